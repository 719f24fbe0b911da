"""`gold/page_clicks_5s`: clicks per page and 5-second window, with isHot; the source of truth.

  silver/clicks (Delta stream) -> watermark `analytical.watermark` -> Kafka append times observed
  (gold's freshness) -> shared rule: count per page and window, mark hot -> replace the
  changed minutes' rows in the table (analytical.tables.upsert)

Update output mode: every micro-batch emits the windows it changed with their full counts, so
when a backfill ends every window up to the newest event is in the table (none is held back for
the watermark), and an event that arrives late, but within the watermark, raises its window's
count in the next batch. The write sets absolute counts, which makes a replayed batch harmless.
The stream checks `suite`'s row-level expectations on each window it writes, under its policy
(declared `fail`; `quality.policies.gold_page_clicks_5s` overrides it).
Events later than the watermark are dropped from gold (the stream's numRowsDroppedByWatermark
counts them); silver still holds them.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType, TimestampType

from analytical import silver_clicks
from analytical.bronze_clicks import KAFKA_TIMESTAMP
from analytical.quality import Suite, between, equal, not_null, unique
from analytical.tables import Prune, Table, checked_upsert_stream
from shared.config import Config, HotPagesConfig
from shared.query_progress import ARRIVAL_METRICS, ARRIVAL_QUANTILES
from shared.rule import count_clicks_per_window, is_hot, mark_hot, with_event_time_watermark

KEYS = ("pageId", "windowStart")


def suite(config: Config) -> Suite:
    """Windows of the configured length, positive counts, isHot exactly over the threshold, and
    one row per page and window."""
    hot = config.hot_pages
    seconds = hot.window.total_seconds()
    return Suite(
        on_write=(
            not_null("pageId"),
            not_null("windowStart"),
            between("windowLength", "windowSeconds", seconds, seconds),
            between("clickCountPositive", "clickCount", min_value=1),
            equal("isHotOverThreshold", "isHot", "overThreshold"),
        ),
        on_table=(unique("onePerPageAndWindow", "pageId", "windowStart"),),
        derive=lambda rows: rows.withColumn(
            "windowSeconds", (F.unix_micros("windowEnd") - F.unix_micros("windowStart")) / 1_000_000
        ).withColumn("overThreshold", is_hot(hot.threshold)),
    )


def page_clicks_5s(events: DataFrame, hot: HotPagesConfig) -> DataFrame:
    """De-duplicated events -> pageId, windowStart, windowEnd, clickCount, isHot."""
    return events.transform(count_clicks_per_window, hot.window).transform(mark_hot, hot.threshold)


def observe_arrivals(clicks: DataFrame) -> DataFrame:
    """The clicks unchanged, with how many a micro-batch reads and when Kafka appended them (at
    ARRIVAL_QUANTILES) observed as ARRIVAL_METRICS: with the batch's end, gold's freshness
    (shared.query_progress.ProgressSummary.freshness_s), which /metrics and `lakehouse bench
    freshness` report."""
    appended_ms = F.unix_millis(KAFKA_TIMESTAMP)
    return clicks.observe(ARRIVAL_METRICS, F.count(F.lit(1)).alias("clicks"),
                          F.percentile_approx(appended_ms, list(ARRIVAL_QUANTILES)).alias("kafkaTimes"))


def read_silver(spark: SparkSession, config: Config, source_root: str) -> DataFrame:
    """silver/clicks as a stream of (eventId, pageId, eventTime, kafkaTimestamp) under the analytical
    watermark."""
    return (
        spark.readStream.format("delta")
        .option("maxFilesPerTrigger", config.analytical.max_files_per_trigger)
        .load(silver_clicks.TABLE.path(source_root))
        .select("eventId", "pageId", "eventTime", KAFKA_TIMESTAMP)
        .transform(with_event_time_watermark, config.analytical.watermark)
    )


def writer(spark: SparkSession, config: Config, source_root: str, target_root: str) -> DataStreamWriter:
    """silver/clicks under `source_root` -> gold/page_clicks_5s under `target_root`."""
    windows = read_silver(spark, config, source_root).transform(observe_arrivals).transform(page_clicks_5s,
                                                                                             config.hot_pages)
    return checked_upsert_stream(windows, STREAM, config, target_root, KEYS, Prune("windowStart", "windowStart"),
                                 output_mode="update")


TABLE = Table(
    "gold/page_clicks_5s",
    StructType([
        StructField("pageId", StringType()),
        StructField("windowStart", TimestampType()),
        StructField("windowEnd", TimestampType()),
        StructField("clickCount", LongType(), nullable=False),
        StructField("isHot", BooleanType(), nullable=False),
    ]),
    # The writes' window range, and time-clustered files: a correction (within the watermark, so to
    # the newest windows) rewrites the newest file, never one that mixes them with history.
    z_order=("windowStart",),
    expectations=suite,
    change_feed=True,  # what gold/page_clicks_hourly reads
)
STREAM = TABLE.stream(writer, policy="fail")
