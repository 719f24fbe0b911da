"""`gold/page_clicks_hourly`: per page and hour, clicks, hot 5-second windows and the peak window.

  silver/clicks (Delta stream) -> watermark -> shared rule: count per page and 5-second window
  -> second window aggregation: per page and hour -> MERGE into the table

The hour is a roll-up of the 5-second windows chained in one streaming query (two stateful
operators), so the roll-up cannot disagree with the windows it sums. Chained aggregations need
append output mode: a 5-second window reaches the hourly aggregation once the watermark closes
it, and an hour is written once the watermark passes its end. An hour in this table is therefore
final; the current hour is only in gold/page_clicks_5s. A backfill's last, empty micro-batch
moves the watermark, so the hours its data closed are written by the same backfill.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from analytical.gold_page_clicks_5s import read_silver
from analytical.tables import GOLD_PAGE_CLICKS_HOURLY, Prune, table_path, upsert_stream
from shared.config import Config, HotPagesConfig, spark_interval
from shared.rule import counts_per_window, is_hot

QUERY_NAME = "gold_page_clicks_hourly"
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


def page_clicks_hourly(events: DataFrame, hot: HotPagesConfig) -> DataFrame:
    """De-duplicated events -> pageId, hourStart, hourEnd, clickCount, hotWindows, peakWindowClicks."""
    return events.transform(counts_per_window, hot.window).transform(roll_up_hours, hot.threshold)


def writer(spark: SparkSession, config: Config, source_root: str, target_root: str) -> DataStreamWriter:
    """silver/clicks under `source_root` -> gold/page_clicks_hourly under `target_root`."""
    hours = read_silver(spark, config, source_root).transform(page_clicks_hourly, config.hot_pages)
    path = table_path(target_root, GOLD_PAGE_CLICKS_HOURLY)
    return upsert_stream(hours, path, KEYS, Prune("hourStart", "hourStart"), output_mode="append")
