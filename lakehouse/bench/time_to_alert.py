"""Time-to-alert, as CONTRACT.md defines it ("Alerts"), computed from the two topics themselves.

For each alerted window: from the Kafka append of the click that took the window over the
threshold (the (threshold+1)-th distinct eventId of that page and window, in append order) to the
Kafka append of the window's first alert. Both topics use message.timestamp.type=LogAppendTime,
so both instants come from the broker's one clock.

`measured_from` leaves out the windows whose crossing click came before it: the benchmarks' warm-up,
the first seconds of load in which the JVM compiles the query's code (a latency figure describes a
stream that has been running, as a production one has for days).
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession, Window
from pyspark.sql import functions as F

from shared.alerts import alert_id
from shared.config import Config
from shared.parsing import parse_clicks, valid_clicks
from shared.rule import DISTINCT_PER, assign_window, crossing_count, dedupe_clicks
from lakehouse.topic_profile import read_topic

_APPEND_ORDER = ["timestamp", "partition", "offset"]
#: How many of the slowest windows a run lists, with when each crossed: what its p99 is made of (with 240
#: windows, the third slowest), to be set beside what happened then (a batch's end, a process beside it).
SLOWEST = 8


def crossing_clicks(clicks: DataFrame, config: Config) -> DataFrame:
    """Per window that goes over the threshold: alertId and the append time of the crossing click."""
    in_window = Window.partitionBy("pageId", "windowStart").orderBy(*_APPEND_ORDER)
    return (
        clicks.transform(parse_clicks, config.quality)
        .transform(valid_clicks)
        .transform(assign_window, config.hot_pages.window)
        # a static frame: the first copy of each eventId in each page's window, as the fast path counts
        .transform(dedupe_clicks, config.hot_pages.watermark, _APPEND_ORDER, DISTINCT_PER)
        .withColumn("rank", F.row_number().over(in_window))
        .where(F.col("rank") == crossing_count(config.hot_pages.threshold))
        .select(alert_id(F.col("pageId"), F.col("windowStart")).alias("alertId"), "pageId", "windowStart",
                F.col("timestamp").alias("crossedAt"))
    )


def first_alerts(alerts: DataFrame) -> DataFrame:
    """Per alertId: the append time of its first record and the highest count it reached."""
    return alerts.groupBy(F.col("key").cast("string").alias("alertId")).agg(
        F.min("timestamp").alias("firstAlertAt"),
        F.max(F.get_json_object(F.col("value").cast("string"), "$.clickCount").cast("long")).alias("maxCount"),
    )


def first_appends_per_count(spark: SparkSession, config: Config) -> dict[tuple[str, str, int], datetime]:
    """Per (pageId, windowStart, clickCount) of the alerts topic: when its first record was appended
    (`lakehouse bench notify` measures each record's delivery to Alertmanager from it)."""
    field = lambda name: F.get_json_object(F.col("value").cast("string"), f"$.{name}")  # noqa: E731
    rows = (read_topic(spark, config.kafka, config.kafka.topics.alerts)
            .groupBy(field("pageId").alias("pageId"), field("windowStart").alias("windowStart"),
                     field("clickCount").cast("long").alias("clickCount"))
            .agg(F.unix_millis(F.min("timestamp")).alias("appendedMs")).collect())
    return {(row.pageId, row.windowStart, row.clickCount): datetime.fromtimestamp(row.appendedMs / 1000, timezone.utc)
            for row in rows if row.pageId is not None and row.clickCount is not None}


def window_latencies(spark: SparkSession, config: Config) -> DataFrame:
    """Per window over the threshold or alerted: alertId, pageId, when its crossing click and its first alert
    were appended (either null when the other side has none), and the latency between them."""
    crossings = crossing_clicks(read_topic(spark, config.kafka, config.kafka.topics.clicks), config)
    alerted = first_alerts(read_topic(spark, config.kafka, config.kafka.topics.alerts))
    return crossings.join(alerted, "alertId", "full_outer").select(
        "alertId", "pageId", "crossedAt", "firstAlertAt",
        (F.unix_millis("firstAlertAt") - F.unix_millis("crossedAt")).alias("latencyMs"))


def time_to_alert(spark: SparkSession, config: Config, measured_from: datetime | None = None,
                  windows: list[Row] | None = None) -> dict[str, Any]:
    """Latency percentiles over every alerted window (crossed at or after `measured_from`), with what
    could not be matched. The windows that crossed before `measured_from` are left out: counted as
    `warmup_windows`, with their own percentiles under `warmup`. `windows`: window_latencies' rows, when
    the caller has them already (a long run's topics take minutes to read)."""
    windows = window_latencies(spark, config).collect() if windows is None else windows
    warm = []
    if measured_from is not None:
        warm = [row for row in windows if row.crossedAt is not None and row.crossedAt < naive_local(measured_from)]
        left_out = {row.alertId for row in warm}
        windows = [row for row in windows if row.alertId not in left_out]
    latencies = sorted(row.latencyMs for row in windows if row.latencyMs is not None)
    slowest = sorted((row for row in windows if row.latencyMs is not None), key=lambda row: -row.latencyMs)
    return {
        **percentiles(latencies),
        "latencies_ms": latencies,
        "slowest_windows": [{"pageId": row.pageId, "crossedAt": aware(row.crossedAt).isoformat(),
                             "latencyMs": row.latencyMs}
                            for row in slowest[:SLOWEST]],
        "alerts": sum(1 for row in windows if row.firstAlertAt is not None),
        "warmup_windows": len(warm),
        "warmup": percentiles(sorted(row.latencyMs for row in warm if row.latencyMs is not None)),
        "windows_over_threshold": sum(1 for row in windows if row.crossedAt is not None),
        "missed_windows": sum(1 for row in windows if row.firstAlertAt is None),
        "alerts_without_crossing": sum(1 for row in windows if row.crossedAt is None),
    }


def time_to_alert_in_spans(windows: list[Row], spans: dict[str, list[tuple[datetime, datetime]]],
                           keep_latencies: bool = False) -> dict[str, dict[str, Any]]:
    """time_to_alert's figures per named set of spans [start, end) of crossing times, each set's windows pooled:
    what the fast path did before something happened beside it, and while it lasted (`lakehouse bench forget`),
    or in the blocks with something beside it against the blocks without (`lakehouse bench notify --interleave`).
    `windows`: window_latencies' rows; `keep_latencies`: each set's latencies stay, as `latencies_ms`.

        time_to_alert_in_spans(windows, {"before": [(t0, t1)], "during": [(t1, t2), (t3, t4)]})
    """
    figures = {}
    for name, intervals in spans.items():
        inside = [row for row in windows if row.crossedAt is not None
                  and any(naive_local(start) <= row.crossedAt < naive_local(end) for start, end in intervals)]
        slowest = sorted((row for row in inside if row.latencyMs is not None), key=lambda row: -row.latencyMs)
        latencies = sorted(row.latencyMs for row in inside if row.latencyMs is not None)
        figures[name] = {**percentiles(latencies), **({"latencies_ms": latencies} if keep_latencies else {}),
                         "windows_over_threshold": len(inside),
                         "missed_windows": sum(1 for row in inside if row.firstAlertAt is None),
                         "slowest_windows": [{"pageId": row.pageId, "crossedAt": aware(row.crossedAt).isoformat(),
                                              "latencyMs": row.latencyMs} for row in slowest[:3]]}
    return figures


def from_nearest(moment: datetime, instants: list[datetime]) -> int | None:
    """Milliseconds from the nearest of `instants` to `moment` (negative: before it); None without any.

        from_nearest(crossed_at, batch_ends)  # -40: the window crossed 40 ms before a batch ended
    """
    if not instants:
        return None
    nearest = min(instants, key=lambda instant: abs((moment - instant).total_seconds()))
    return round((moment - nearest).total_seconds() * 1000)


def aware(moment: datetime) -> datetime:
    """A naive local datetime of Spark's collect() as an instant in UTC."""
    return moment.astimezone(timezone.utc)


def naive_local(moment: datetime) -> datetime:
    """`moment` as the naive local datetime Spark's collect() gives for a timestamp."""
    return moment.astimezone().replace(tzinfo=None) if moment.tzinfo else moment


def percentiles(values: list[float]) -> dict[str, float | None]:
    """p50, p95, p99, p99.9 (nearest rank) and max of `values` (sorted), in the unit given."""
    if not values:
        return {"p50_ms": None, "p95_ms": None, "p99_ms": None, "p999_ms": None, "max_ms": None}

    def rank(p: float) -> float:
        return values[max(0, math.ceil(p / 100 * len(values)) - 1)]

    return {"p50_ms": rank(50), "p95_ms": rank(95), "p99_ms": rank(99), "p999_ms": rank(99.9), "max_ms": values[-1]}
