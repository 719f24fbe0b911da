"""The hot-page rule, once, for both paths (DESIGN.md, "The rule").

  - windows are tumbling, `hot_pages.window` long, aligned to the epoch: [start, start + window);
  - a window's count is the number of distinct eventId in it: de-duplicate, then count;
  - a window is hot when its count is strictly greater than the threshold.

Each function is a pure DataFrame -> DataFrame transform that works the same on a static frame
(unit tests, rebuilds) and on a stream (the watermark bounds the state there).
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shared.config import spark_interval

WINDOW_COLUMNS = ["pageId", "windowStart", "windowEnd", "clickCount"]


def with_event_time_watermark(events: DataFrame, watermark: timedelta) -> DataFrame:
    """Declare how late an event may be: state older than the watermark is dropped."""
    return events.withWatermark("eventTime", spark_interval(watermark))


def dedupe_clicks(events: DataFrame, watermark: timedelta) -> DataFrame:
    """Keep the first event of each eventId, remembering ids for `watermark` of event time.

    A duplicate that arrives after its first copy left the horizon is not recognised: the
    operational path accepts that (its horizon is short), gold does not (its horizon is long).
    A static frame has no horizon (Spark refuses the watermark variant there): every duplicate goes.
    """
    if not events.isStreaming:
        return events.dropDuplicates(["eventId"])
    return with_event_time_watermark(events, watermark).dropDuplicatesWithinWatermark(["eventId"])


def _tumbling_window(window: timedelta) -> Column:
    return F.window("eventTime", spark_interval(window))


def assign_window(events: DataFrame, window: timedelta) -> DataFrame:
    """Add windowStart and windowEnd: the tumbling window each event's eventTime falls in."""
    bounds = _tumbling_window(window)
    return events.withColumn("windowStart", bounds.start).withColumn("windowEnd", bounds.end)


def count_clicks_per_window(events: DataFrame, window: timedelta) -> DataFrame:
    """pageId, windowStart, windowEnd, clickCount per page and tumbling window with clicks.

    Counts rows: feed it de-duplicated events (`dedupe_clicks`) to count distinct eventIds.
    Grouped on the window struct itself: that is what lets a stream's watermark close windows.
    """
    return (
        events.groupBy(_tumbling_window(window).alias("window"), "pageId")
        .agg(F.count(F.lit(1)).alias("clickCount"))
        .select(
            "pageId",
            F.col("window.start").alias("windowStart"),
            F.col("window.end").alias("windowEnd"),
            "clickCount",
        )
    )


def is_hot(threshold: int) -> Column:
    """The hot condition as a column: strictly more clicks than the threshold."""
    return F.col("clickCount") > F.lit(threshold)


def mark_hot(windows: DataFrame, threshold: int) -> DataFrame:
    """Add isHot to window counts (gold keeps every window, hot or not)."""
    return windows.withColumn("isHot", is_hot(threshold))


def hot_windows(windows: DataFrame, threshold: int) -> DataFrame:
    """Only the hot windows (what the operational path alerts on)."""
    return windows.where(is_hot(threshold))
