"""The hot-pages stream: Kafka clicks -> alerts on Kafka, as soon as a window turns hot.

  page-clicks -> parse (invalid records dropped, counted) -> distinct eventIds per page and
  5-second window -> the windows over the threshold -> alert records -> hot-pages

Two modes (`operational.mode`, decided in operational.mode), one rule, one alert record:

  - real-time (Spark 4.3's real-time mode, the fast path's runtime): long-running tasks merge each
    click into state and emit at once, so a window's first record leaves tens of milliseconds after
    its crossing click, and a record is written at the crossing and at each doubling of it
    (`is_alerted_count`), never one per click. The count is kept with constant work per record by
    one of two state operators (`operational.real_time.state_operator`): one JVM transformWithState
    processor (`running_distinct_counts`), which clears closed windows during the batch, or
    dropDuplicates then a count (`count_first_copies_per_window`), whose eviction ends each batch
    with a scan of its whole state while no alert leaves.
  - micro-batch: one aggregation per window holding its set of eventIds; a window's record leaves
    in the micro-batch where its count crosses the threshold, and again, with the higher count, in
    each later batch that adds clicks to it.

Update output mode either way; the Kafka sink is at-least-once, readers keep the highest count per
alertId. The watermark (`hot_pages.watermark` behind the newest event time) closes windows and
drops their state.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import partial
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from operational.catch_up import needs_catch_up, unread_backlog_age
from shared.alerts import ALERTING_QUERY, to_alert_records
from shared.config import Config, HotPagesConfig, QualityConfig, RealTimeSettings
from shared.durations import spark_interval
from shared.errors import LakehouseError
from shared.kafka import read_clicks_stream
from shared.kafka_settings import spark_options
from shared.parsing import parse_clicks, valid_clicks
from shared.query_progress import LATE_METRICS
from shared.rule import (assign_window, count_distinct_clicks_per_window, count_first_copies_per_window,
                         crossing_count, hot_windows, is_alerted_count, with_event_time_watermark)
from operational.mode import FastPathMode, fast_path_mode
from shared.spark import BATCHES_TO_RETAIN, scheduler_pool, session_conf
from shared.spark_internals import jvm_dataset_transform
from shared.stream import Stage, Stream


#: The fast path's FAIR scheduler pool (conf/fairscheduler.xml), ahead of the medallion's when both share an application.
POOL = "operational"


def watermarked_events(clicks: DataFrame, hot: HotPagesConfig, quality: QualityConfig) -> DataFrame:
    """Kafka click records -> the valid events (eventId, pageId, eventTime) under the fast path's watermark."""
    return (
        clicks.transform(parse_clicks, quality)
        .transform(valid_clicks)
        .select("eventId", "pageId", "eventTime")
        .transform(with_event_time_watermark, hot.watermark)
    )


def hot_page_alerts(clicks: DataFrame, hot: HotPagesConfig, quality: QualityConfig) -> DataFrame:
    """Kafka click records -> alert records (key, value), micro-batch mode: the whole fast path, as one transform."""
    return (
        clicks.transform(watermarked_events, hot, quality)
        .transform(count_distinct_clicks_per_window, hot.window)
        .transform(hot_windows, hot.threshold)
        .transform(to_alert_records, hot.threshold)
    )


def hot_page_alerts_real_time(clicks: DataFrame, hot: HotPagesConfig, quality: QualityConfig,
                              count: Callable[[DataFrame, timedelta], DataFrame] = count_first_copies_per_window,
                              ) -> DataFrame:
    """Kafka click records -> alert records (key, value), real-time mode: a record at the crossing and
    at each doubling of it, from the running counts per window that `count` keeps."""
    return (
        clicks.transform(watermarked_events, hot, quality)
        .transform(count, hot.window)
        .where(is_alerted_count(hot.threshold))
        .transform(to_alert_records, hot.threshold)
    )


#: The JVM processor behind `running_distinct_counts`, built by `make setup` from operational/jvm.
RUNNING_DISTINCT_COUNTS = "lakehouse.operational.RunningDistinctCounts"


def running_distinct_counts(events: DataFrame, window: timedelta, recheck: timedelta, least_count: int = 1) -> DataFrame:
    """pageId, windowStart, windowEnd, clickCount: each window's count of distinct eventIds, a row each
    time it grows to `least_count` or beyond (below it, no row: a caller that alerts needs none), from
    one transformWithState processor written for the JVM (real-time mode runs no Python one). The same
    count as `count_first_copies_per_window`, whose dropDuplicates ends each real-time batch with a scan
    of its whole state: this one clears a window's state during the batch, at the first look, every
    `recheck` of processing time from its first click, after the watermark passed its end. The
    watermark moves only between real-time batches: with `recheck` the batch's length, the windows a
    batch end closed are cleared spread over the next batch, not all at its start."""
    recheck_ms = int(recheck.total_seconds() * 1000)
    counts = jvm_dataset_transform(events.transform(assign_window, window), RUNNING_DISTINCT_COUNTS, "of",
                                   recheck_ms, least_count)
    # The processor writes a count of 0 for each click it dropped as late: counted, then left out.
    late = F.count(F.when(F.col("clickCount") == 0, True)).alias("late")
    return counts.observe(LATE_METRICS, late).where(F.col("clickCount") > 0)


def alerting_transform(mode: FastPathMode, real_time: RealTimeSettings,
                       ) -> Callable[[DataFrame, HotPagesConfig, QualityConfig], DataFrame]:
    """The whole fast path as one transform, for its mode (and in real-time mode, the state operator
    `real_time.state_operator` names)."""
    if not mode.real_time:
        return hot_page_alerts
    if real_time.state_operator == "transform-with-state":
        def alerts(clicks: DataFrame, hot: HotPagesConfig, quality: QualityConfig) -> DataFrame:
            # each window looked at once per real-time batch (`running_distinct_counts`), and no row
            # written below the count the rule first alerts at
            counts = partial(running_distinct_counts, recheck=real_time.checkpoint_interval,
                             least_count=crossing_count(hot.threshold))
            return hot_page_alerts_real_time(clicks, hot, quality, count=counts)
        return alerts
    return hot_page_alerts_real_time


def writer(spark: SparkSession, config: Config, source_root: str, target_root: str) -> DataStreamWriter:
    """The clicks topic -> the alerts topic (the roots are unused: the fast path reads and writes Kafka)."""
    clicks = read_clicks_stream(spark, config.kafka, config.operational)
    return (
        clicks.transform(alerting_transform(fast_path_mode(config), config.operational.real_time), config.hot_pages,
                         config.quality)
        .writeStream.format("kafka")
        .options(**spark_options(config.kafka))
        .option("topic", config.kafka.topics.alerts)
        .outputMode("update")
    )


STREAM = Stream(ALERTING_QUERY, "operational", writer, trigger=lambda config: config.operational.trigger,
                lateness=lambda config: config.hot_pages.watermark)


def start(spark: SparkSession, config: Config) -> StreamingQuery:
    """Start the query in its mode (operational.mode); it resumes from storage.root/_checkpoints/hot_pages
    when that exists.

    Its checkpoint keeps `operational.batches_to_retain` micro-batches of offsets and watermarks.
    """
    mode = fast_path_mode(config)
    if not mode.real_time:
        return _started(spark, config, processingTime=spark_interval(STREAM.trigger(config)))
    if not mode.runs_here():
        raise LakehouseError(
            f"operational.mode is real-time, which needs Spark 4.3: run it in the {mode.runtime.name} runtime "
            f"({mode.runtime.python}, made by `make setup`) or set operational.mode=micro-batch")
    return _started(spark, config, realTime=spark_interval(mode.real_time_batch))


def start_caught_up(spark: SparkSession, config: Config, left_by_last: timedelta | None = None) -> StreamingQuery | Stage:
    """`start`, but in real-time mode a backlog older than `operational.real_time.catch_up_after` is
    read in one micro-batch first (operational.catch_up): then a `Stage` whose next query is this
    function's again, real-time once the backlog left is young enough or no longer shrinking
    (`left_by_last`: the age of the backlog the last catch-up started with)."""
    mode = fast_path_mode(config)
    if not mode.real_time or not mode.runs_here():
        return start(spark, config)  # (which says what real-time mode needs)
    age = unread_backlog_age(spark, config)
    if not needs_catch_up(age, config.operational.real_time.catch_up_after, left_by_last):
        return start(spark, config)
    # What came in meanwhile is looked at again: a long catch-up may leave a backlog to catch up with.
    # Without no-data batches: the processor's timers would keep asking for one while the watermark
    # stands still, and the Available-now query would never end.
    catch_up = _started(spark, config, {NO_DATA_BATCHES: "false"}, availableNow=True)
    return Stage(catch_up, then=lambda: start_caught_up(spark, config, left_by_last=age),
                 why=f"the oldest unread click is {age.total_seconds():,.0f} s old: reading the backlog in "
                     "one micro-batch first, so that every partition is read to the same moment",
                 note="the backlog's micro-batch is done")


#: Whether a micro-batch query runs batches without new data, to move its watermark or fire timers.
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


def _started(spark: SparkSession, config: Config, conf: dict[str, str] | None = None, **trigger: Any) -> StreamingQuery:
    """The query started with `trigger`, with `conf` set for its start (a query keeps its session's
    settings from its start)."""
    root = config.storage.root
    writer = STREAM.writer_at(spark, config, root, root).trigger(**trigger)
    # The offsets and commits logs are the batch history `lakehouse reconcile` explains alerts with.
    with session_conf(spark, {BATCHES_TO_RETAIN: str(config.operational.batches_to_retain), **(conf or {})}), \
            scheduler_pool(spark, POOL):
        return writer.start()


def starters(spark: SparkSession, config: Config) -> dict[str, Callable[[], StreamingQuery | Stage]]:
    """Query name -> a function that starts it: what `supervise` runs."""
    return {STREAM.name: lambda: start_caught_up(spark, config)}
