"""`gold/page_clicks_hourly`: per page and hour, clicks, hot 5-second windows and the peak window.

  silver/clicks (Delta stream) -> watermark -> shared rule: count per page and 5-second window
  -> second window aggregation: per page and hour -> MERGE into the table

The hour is a roll-up of the 5-second windows chained in one streaming query (two stateful
operators), so the roll-up cannot disagree with the windows it sums. Chained aggregations need
append output mode: a 5-second window reaches the hourly aggregation once the watermark closes
it, and an hour is written once the watermark passes its end. An hour in this table is therefore
final; the current hour is only in gold/page_clicks_5s. The stream checks `suite`'s row-level
expectations under its policy (declared `fail`; `quality.policies.gold_page_clicks_hourly` overrides it); `lakehouse check` also compares
every hour with the sum of its windows in gold/page_clicks_5s. A backfill's last, empty micro-batch
moves the watermark, so the hours its data closed are written by the same backfill.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from analytical import gold_page_clicks_5s
from analytical.gold_page_clicks_5s import read_silver
from analytical.quality import Suite, between, equal, not_null, unique
from analytical.tables import Prune, Table, checked_upsert_stream
from shared.config import Config, HotPagesConfig
from shared.durations import spark_interval
from shared.rule import counts_per_window, is_hot

KEYS = ("pageId", "hourStart")
HOUR = timedelta(hours=1)


def roll_up_hours(windows: DataFrame, threshold: int) -> DataFrame:
    """Per-window counts (window struct, pageId, clickCount) -> per page and hour."""
    return (
        windows.groupBy(F.window("window", spark_interval(HOUR)).alias("hour"), "pageId")
        .agg(
            F.sum("clickCount").alias("clickCount"),
            F.count_if(is_hot(threshold)).alias("hotWindows"),
            F.max("clickCount").alias("peakWindowClicks"),
        )
        .select(
            "pageId",
            F.col("hour.start").alias("hourStart"),
            F.col("hour.end").alias("hourEnd"),
            "clickCount",
            "hotWindows",
            "peakWindowClicks",
        )
    )


def suite(config: Config) -> Suite:
    """Sane counts as the hours are written; against gold/page_clicks_5s, every closed hour equals
    the sum, the hot windows and the peak of its 5-second windows."""
    windows_per_hour = int(HOUR / config.hot_pages.window)
    return Suite(
        on_write=(
            not_null("pageId"),
            not_null("hourStart"),
            between("clickCountPositive", "clickCount", min_value=1),
            between("hotWindowsInHour", "hotWindows", 0, windows_per_hour),
            between("peakWithinClicks", "peakOverClicks", max_value=0),
        ),
        on_table=(
            unique("onePerPageAndHour", "pageId", "hourStart"),
            equal("clicksEqualItsWindows", "clickCount", "windowClicks"),
            equal("hotWindowsEqualItsWindows", "hotWindows", "windowHotWindows"),
            equal("peakEqualsItsWindows", "peakWindowClicks", "windowPeak"),
        ),
        derive=lambda rows: rows.withColumn("peakOverClicks", F.col("peakWindowClicks") - F.col("clickCount")),
        table_view=lambda hours, read: hours.join(_hours_of_windows(read(gold_page_clicks_5s.TABLE)),
                                                  ["pageId", "hourStart"], "left"),
    )


def _hours_of_windows(windows: DataFrame) -> DataFrame:
    """Per page and hour, what its 5-second windows in gold add up to."""
    return windows.groupBy("pageId", F.date_trunc("hour", "windowStart").alias("hourStart")).agg(
        F.sum("clickCount").alias("windowClicks"),
        F.count_if("isHot").alias("windowHotWindows"),
        F.max("clickCount").alias("windowPeak"),
    )


def page_clicks_hourly(events: DataFrame, hot: HotPagesConfig) -> DataFrame:
    """De-duplicated events -> pageId, hourStart, hourEnd, clickCount, hotWindows, peakWindowClicks."""
    return events.transform(counts_per_window, hot.window).transform(roll_up_hours, hot.threshold)


def writer(spark: SparkSession, config: Config, source_root: str, target_root: str) -> DataStreamWriter:
    """silver/clicks under `source_root` -> gold/page_clicks_hourly under `target_root`."""
    hours = read_silver(spark, config, source_root).transform(page_clicks_hourly, config.hot_pages)
    return checked_upsert_stream(hours, STREAM, config, target_root, KEYS, Prune("hourStart", "hourStart"),
                                 output_mode="append")


TABLE = Table(
    "gold/page_clicks_hourly",
    StructType([
        StructField("pageId", StringType()),
        StructField("hourStart", TimestampType()),
        StructField("hourEnd", TimestampType()),
        StructField("clickCount", LongType()),
        StructField("hotWindows", LongType(), nullable=False),
        StructField("peakWindowClicks", LongType()),
    ]),
    z_order=("hourStart",),  # as gold/page_clicks_5s: a correction rewrites the newest file only
    expectations=suite,
)
STREAM = TABLE.stream(writer, policy="fail")
