"""`gold/page_clicks_hourly`: per page and hour, clicks, hot 5-second windows and the peak window.

  gold/page_clicks_5s's change feed (Delta stream) -> watermark on windowStart -> per page and hour:
  each window's change added (its new count and isHot, less the old) and its newest count's maximum
  -> written into the table (analytical.writes.upsert)

The hour is a roll-up of gold/page_clicks_5s, read as the rows that table's writes removed and
added (each write replaces the rows of the minutes it changed), so it cannot disagree with the
windows it sums, and the shared rule runs once, in the 5-second stream, instead of again through two
more state stores. A window's count only grows (a late click adds to it; nothing takes one away),
so an hour's sum of changes is the sum of its windows' counts, its sum of isHot changes is how many
of them are hot, and the largest count any of them reached is its peak. A window rewritten
unchanged is removed and added with the same values, which adds nothing (a replayed 5-second batch
writes nothing at all).

An hour is written once (append output mode), when the watermark passes its end: the newest window
start read, less `analytical.watermark` and one window. A window is corrected only while silver's
watermark is before its end, which is never after that, so no correction is dropped as late and an
hour in this table is final; the current hour is only in gold/page_clicks_5s. The stream checks
`suite`'s row-level expectations under its policy (declared `fail`;
`quality.policies.gold_page_clicks_hourly` overrides it); `lakehouse check` also compares every hour
with the sum of its windows in gold/page_clicks_5s. A backfill's last, empty micro-batch moves the
watermark, so the hours its data closed are written by the same backfill.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from analytical import gold_page_clicks_5s
from analytical.quality import Suite, between, equal, not_null, unique
from analytical.tables import Table
from analytical.writes import Prune, checked_upsert_stream
from shared.config import Config
from shared.durations import spark_interval

KEYS = ("pageId", "hourStart")
HOUR = timedelta(hours=1)


#: The change-feed rows that add to their window's sums: a new row and a post-image. A pre-image and a
#: deleted row take away.
_ADDS = ("insert", "update_postimage")


def roll_up_hours(window_changes: DataFrame) -> DataFrame:
    """gold/page_clicks_5s's change feed (its columns, and `_change_type`) -> pageId, hourStart,
    hourEnd, clickCount, hotWindows, peakWindowClicks.

        window 10:00:00 inserted with 4 clicks, then updated from 4 to 7 (hot)
        -> clickCount 4 - 4 + 7 = 7, hotWindows 0 - 0 + 1 = 1, peakWindowClicks 7
    """
    sign = F.when(F.col("_change_type").isin(*_ADDS), 1).otherwise(-1)
    return (
        window_changes.groupBy(F.window("windowStart", spark_interval(HOUR)).alias("hour"), "pageId")
        .agg(
            F.sum(sign * F.col("clickCount")).alias("clickCount"),
            F.coalesce(F.sum(sign * F.col("isHot").cast("long")), F.lit(0)).alias("hotWindows"),
            F.max(F.when(sign > 0, F.col("clickCount"))).alias("peakWindowClicks"),
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


def as_inserted(windows: DataFrame) -> DataFrame:
    """gold/page_clicks_5s's rows as the change feed a new stream reads first: every window an insert,
    which `roll_up_hours` sums as the table is (a plain batch roll-up)."""
    return windows.withColumn("_change_type", F.lit(_ADDS[0]))


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


def read_window_changes(spark: SparkSession, config: Config, source_root: str) -> DataFrame:
    """gold/page_clicks_5s under `source_root` as a stream of its changes, under a watermark on
    windowStart that no correction a window can still get is behind (the module says why).

    A new checkpoint starts from the table as it is (every window an insert), then follows its commits.
    """
    delay = config.analytical.watermark + config.hot_pages.window
    return (
        spark.readStream.format("delta")
        .option("readChangeFeed", "true")
        .option("maxFilesPerTrigger", config.analytical.max_files_per_trigger)
        .load(gold_page_clicks_5s.TABLE.at(source_root).path)
        .withWatermark("windowStart", spark_interval(delay))
    )


def writer(spark: SparkSession, config: Config, source_root: str, target_root: str) -> DataStreamWriter:
    """gold/page_clicks_5s under `source_root` -> gold/page_clicks_hourly under `target_root`."""
    hours = read_window_changes(spark, config, source_root).transform(roll_up_hours)
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
    policy="fail",
)
STREAM = TABLE.stream(writer, reads=(gold_page_clicks_5s.TABLE,))
