"""The hot-page rule, once, for both paths (CONTRACT.md, "The rule").

  - windows are tumbling, `hot_pages.window` long, aligned to the epoch: [start, start + window);
  - a window's count is the number of distinct eventId in it;
  - a window is hot when its count is strictly greater than the threshold.

The fast path counts each page's window as the set of its eventIds (`count_distinct_clicks_per_window`:
one stateful operator whose state is a row per open window); the medallion de-duplicates by eventId
first (silver) and counts rows (gold). They differ only for a copy of an event stamped with another
page or window than its first copy, which the reconciliation explains.

Each function is a pure DataFrame -> DataFrame transform that works the same on a static frame
(unit tests, rebuilds) and on a stream (the watermark bounds the state there).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shared.durations import spark_interval

WINDOW_COLUMNS = ["pageId", "windowStart", "windowEnd", "clickCount"]
#: What the fast path's count is distinct over (`count_distinct_clicks_per_window`): an eventId
#: counts once per page and window.
DISTINCT_PER = ("pageId", "windowStart", "eventId")


def with_event_time_watermark(events: DataFrame, watermark: timedelta) -> DataFrame:
    """Declare how late an event may be: state older than the watermark is dropped."""
    return events.withWatermark("eventTime", spark_interval(watermark))


def dedupe_clicks(events: DataFrame, watermark: timedelta, first_by: Sequence[str] = (),
                  keys: Sequence[str] = ("eventId",)) -> DataFrame:
    """Keep the first event of each `keys` (an eventId), remembering them for `watermark` of event time.

    A duplicate that arrives after its first copy left the horizon is not recognised. A static frame
    has no horizon (Spark refuses the watermark variant there): every duplicate goes, and `first_by`
    names the columns whose smallest values mark the copy to keep (any copy when empty).
    """
    if events.isStreaming:
        return with_event_time_watermark(events, watermark).dropDuplicatesWithinWatermark(list(keys))
    if not first_by:
        return events.dropDuplicates(list(keys))
    first = F.min_by(F.struct(*events.columns), F.struct(*first_by))
    return events.groupBy(*keys).agg(first.alias("_first")).select("_first.*")


def same_event(watermark: timedelta) -> str:
    """`dedupe_clicks`'s horizon as a MERGE condition (t = table, s = batch): the same eventId,
    event times within `watermark` of each other. A retry re-sends an event with its eventTime, so
    copies match however far apart they arrive; silver finds earlier copies with it."""
    margin = f"INTERVAL {spark_interval(watermark)}"
    return f"t.eventId = s.eventId AND t.eventTime BETWEEN s.eventTime - {margin} AND s.eventTime + {margin}"


def _tumbling_window(window: timedelta) -> Column:
    return F.window("eventTime", spark_interval(window))


def assign_window(events: DataFrame, window: timedelta) -> DataFrame:
    """Add windowStart and windowEnd: the tumbling window each event's eventTime falls in."""
    bounds = _tumbling_window(window)
    return events.withColumn("windowStart", bounds.start).withColumn("windowEnd", bounds.end)


def is_closed(watermark_ms: int) -> Column:
    """Whether a window (its windowEnd) has closed under an event-time watermark (epoch ms): its end
    at or before it. Spark's stateful operators drop an event of such a window as late; a count
    without state drops the same windows, so both close a window at the same event.

        the 10:00:00-10:00:05 window closes once the watermark reaches 10:00:05
    """
    return F.col("windowEnd") <= F.timestamp_millis(F.lit(watermark_ms))


def counts_per_window(events: DataFrame, window: timedelta) -> DataFrame:
    """window (Spark's start/end struct), pageId, clickCount per page and tumbling window with clicks.

    Counts rows: feed it de-duplicated events (`dedupe_clicks`) to count distinct eventIds.
    Grouped on the window struct itself: that is what lets a stream's watermark close windows, and
    what a second, chained window aggregation (gold's hourly roll-up) groups on in turn.
    """
    return events.groupBy(_tumbling_window(window).alias("window"), "pageId").agg(
        F.count(F.lit(1)).alias("clickCount")
    )


def count_distinct_clicks_per_window(events: DataFrame, window: timedelta) -> DataFrame:
    """pageId, windowStart, windowEnd, clickCount: the distinct eventIds per page and tumbling window.

    One aggregation whose state is one row per open (page, window) holding the window's set of
    eventIds: a copy within its window counts once, a copy after the window closed is late. Its
    state is as many rows as open windows, where de-duplicating first (`dedupe_clicks`) keeps every
    eventId of two watermarks and probes it per record, which nearly doubles the batch time. A stream must declare its watermark first
    (`with_event_time_watermark`): it closes the windows and drops their sets.
    """
    distinct = F.size(F.collect_set("eventId")).cast("long")
    return (
        events.groupBy(_tumbling_window(window).alias("window"), "pageId")
        .agg(distinct.alias("clickCount"))
        .transform(with_window_bounds)
    )


def count_first_copies_per_window(events: DataFrame, window: timedelta) -> DataFrame:
    """pageId, windowStart, windowEnd, clickCount: the same count as `count_distinct_clicks_per_window`,
    in two stateful operators whose work per record is constant.

    The first copy of each (page, window, eventId) is kept (`dropDuplicates`, whose state the
    watermark trims once a window has closed), then each page's window counts its rows. Spark's
    real-time mode merges every record into state and emits at once, so the count passes through
    every value: a set per window would be rewritten whole for each record.
    """
    return (
        events.withColumn("window", _tumbling_window(window))
        .dropDuplicates(["pageId", "window", "eventId"])
        .groupBy("window", "pageId")
        .agg(F.count(F.lit(1)).alias("clickCount"))
        .transform(with_window_bounds)
    )


def with_window_bounds(windows: DataFrame) -> DataFrame:
    """The window struct as windowStart and windowEnd columns, in WINDOW_COLUMNS order."""
    return windows.select(
        "pageId",
        F.col("window.start").alias("windowStart"),
        F.col("window.end").alias("windowEnd"),
        "clickCount",
    )


def count_clicks_per_window(events: DataFrame, window: timedelta) -> DataFrame:
    """pageId, windowStart, windowEnd, clickCount per page and tumbling window with clicks."""
    return events.transform(counts_per_window, window).transform(with_window_bounds)


def is_hot(threshold: int) -> Column:
    """The hot condition as a column: strictly more clicks than the threshold."""
    return F.col("clickCount") > F.lit(threshold)


def crossing_count(threshold: int) -> int:
    """The count at which a window turns hot, the first `is_hot` accepts: its crossing click is the
    window's `crossing_count`-th distinct eventId (time-to-alert measures from it)."""
    return threshold + 1


def is_alerted_count(threshold: int) -> Column:
    """The counts a real-time alert record is written at: the crossing (`crossing_count`) and each
    doubling of it (2x, 4x, 8x, ...). A window therefore gets its first record at the crossing and at
    most log2(final count / crossing) more, whatever the rate: the highest is the largest of these
    counts the window reached (`alerted_count`).
    """
    count = F.col("clickCount").cast("long")
    crossing = F.lit(crossing_count(threshold)).cast("long")
    quotient = F.floor(count / crossing).cast("long")
    return (count % crossing == 0) & (quotient >= 1) & (quotient.bitwiseAND(quotient - 1) == 0)


def alerted_count(count: int, threshold: int) -> int | None:
    """The highest count a real-time alert record carries for a window whose count reached `count`:
    the largest of `is_alerted_count`'s counts not above it (None: never hot)."""
    crossing = crossing_count(threshold)
    if count < crossing:
        return None
    return crossing * (1 << ((count // crossing).bit_length() - 1))


def mark_hot(windows: DataFrame, threshold: int) -> DataFrame:
    """Add isHot to window counts (gold keeps every window, hot or not)."""
    return windows.withColumn("isHot", is_hot(threshold))


def hot_windows(windows: DataFrame, threshold: int) -> DataFrame:
    """Only the hot windows (what the operational path alerts on)."""
    return windows.where(is_hot(threshold))
