"""`gold/page_clicks_5s`: clicks per page and 5-second window, with isHot; the source of truth.

  the events a micro-batch of the medallion's query added to silver (analytical.medallion) -> clicks of
  closed windows dropped as late -> shared rule: count per page and window -> added to the table's
  counts of the minutes it touches, once (analytical.writes.upsert with a Txn)

No state store: each batch counts its own clicks as a plain aggregation and adds them to the
windows' counts in the table, which is where the counts live. The table's row is therefore always
the window's full count: when a backfill ends every window up to the newest event is there, and an
event that arrives late, but within the watermark, raises its window's count in the next batch.
Adding is not repeatable, so each batch's write is made once (analytical.writes.Txn: the query's id,
the batch id): a batch replayed after a crash finds its commit and writes nothing.

Late is what Spark's state would call late: Spark tracks the watermark (max event time of the batches
before, less `analytical.watermark`; the batch reads it from its checkpoint's offsets file), and a
click whose window has ended at or before it is dropped from gold (`late_clicks` in the batch's
progress, the query's `dropped_by_watermark`); silver still holds it. The batch checks `suite`'s
row-level expectations on the windows it counts, under its policy (declared `fail`;
`quality.policies.gold_page_clicks_5s` overrides it).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType, TimestampType

from analytical import silver_clicks
from analytical.bronze_clicks import KAFKA_TIMESTAMP
from analytical.quality import (Suite, between, equal, expectation_metrics, metrics_name, not_null, passing, unique,
                                with_failed_expectation)
from analytical.tables import Table
from analytical.writes import Prune, Txn, cached, counts_added, refuse_writes_of_another, upsert
from shared.config import Config, HotPagesConfig
from shared.query_progress import ARRIVAL_METRICS, ARRIVAL_QUANTILES, LATE_METRICS
from shared.rule import count_clicks_per_window, is_closed, is_hot, mark_hot, with_event_time_watermark

KEYS = ("pageId", "windowStart")
PRUNE = Prune("windowStart", "windowStart")


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


def observe_arrivals(records: DataFrame, is_click: Column) -> DataFrame:
    """The records unchanged, with how many clicks (the records where `is_click`) a micro-batch reads and
    when Kafka appended them (at ARRIVAL_QUANTILES) observed as ARRIVAL_METRICS: with the batch's end,
    gold's freshness (shared.query_progress.ProgressSummary.freshness_s), which /metrics and `lakehouse
    bench freshness` report."""
    appended_ms = F.when(is_click, F.unix_millis(KAFKA_TIMESTAMP))  # the percentiles skip nulls
    return records.observe(ARRIVAL_METRICS, F.count_if(is_click).alias("clicks"),
                           F.percentile_approx(appended_ms, list(ARRIVAL_QUANTILES)).alias("kafkaTimes"))


def read_silver(spark: SparkSession, config: Config, source_root: str) -> DataFrame:
    """silver/clicks as a stream of (eventId, pageId, eventTime, kafkaTimestamp) under the analytical
    watermark: what a gold table that follows silver reads."""
    return (
        silver_clicks.TABLE.at(source_root).read_stream(spark, config)
        .select("eventId", "pageId", "eventTime", KAFKA_TIMESTAMP)
        .transform(with_event_time_watermark, config.analytical.watermark)
    )


def add_counts(held: DataFrame, batch: DataFrame, threshold: int) -> DataFrame:
    """The table's windows (`held`) with a batch's counts added, the batch's new windows included,
    isHot set on the sum.

        held (/a, 10:00:00, 4), batch (/a, 10:00:00, 2) and (/b, 10:00:00, 1) -> (/a, 6), (/b, 1)
    """
    return counts_added(held, batch, KEYS, ("clickCount",), carried=("windowEnd",)).transform(mark_hot, threshold)


def refuse_counts_of_another_query(spark: SparkSession, path: str, query: str, checkpoint: str) -> None:
    """A query's first batch adds to the table only if the table is empty or its own: a new checkpoint
    over counts that an earlier query wrote (its checkpoint deleted) would add every click to them a
    second time."""
    refuse_writes_of_another(
        spark, path, query,
        f"{TABLE} holds counts that the query of the checkpoint {checkpoint} did not write, so adding "
        "clicks to them would count them twice: run `lakehouse rebuild` (it recomputes silver and gold "
        "from bronze), or delete silver and gold together with the checkpoint")


def add_clicks(clicks: DataFrame, path: str, config: Config, txn: Txn, watermark_ms: int) -> dict[str, dict]:
    """Add a micro-batch's new clicks (silver's rows) to the windows' counts in the table at `path`, once
    per `txn`, but not those of windows the batch's watermark has closed; what it observed (late clicks,
    the expectations), by observation name."""
    suite, policy = TABLE.suite(config), TABLE.expectation_policy(config)
    closed = is_closed(watermark_ms)
    windows = clicks.transform(page_clicks_5s, config.hot_pages).transform(
        with_failed_expectation, suite, policy, applies=~closed)
    with cached(windows):
        late = F.coalesce(F.sum(F.when(closed, F.col("clickCount"))), F.lit(0)).alias("late")
        [observed] = windows.agg(late, *expectation_metrics(suite, policy, applies=~closed)).collect()
        upsert(passing(windows.where(~closed), policy), path, KEYS, PRUNE,
               combine=lambda held, rows: add_counts(held, rows, config.hot_pages.threshold), txn=txn)
    checked = observed.asDict()
    return {LATE_METRICS: {"late": checked.pop("late")}, metrics_name(TABLE.key): checked}


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
    policy="fail",
)
