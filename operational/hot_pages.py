"""The hot-pages stream: Kafka clicks -> alerts on Kafka, about a second after a window turns hot.

  page-clicks -> parse (invalid records dropped, counted) -> distinct eventIds per page and
  5-second window (one stateful operator) -> keep windows over the threshold -> alert records
  -> hot-pages

Update output mode: a window's alert leaves in the micro-batch where its count crosses the
threshold, and again, with the higher count, in each later batch that adds clicks to it (the
Kafka sink is at-least-once; readers keep the highest count per alertId). The watermark
(`hot_pages.watermark` behind the newest event time) closes windows and drops their eventId sets:
the state is one row per open window, whatever the rate.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from shared.alerts import to_alert_records
from shared.config import Config, HotPagesConfig, QualityConfig, spark_interval
from shared.kafka import read_clicks_stream, spark_options
from shared.parsing import parse_clicks, valid_clicks
from shared.rule import count_distinct_clicks_per_window, hot_windows, with_event_time_watermark
from shared.spark import BATCHES_TO_RETAIN, OPERATIONAL_POOL, scheduler_pool, session_conf
from shared.streaming import Stream


def hot_page_alerts(clicks: DataFrame, hot: HotPagesConfig, quality: QualityConfig) -> DataFrame:
    """Kafka click records -> alert records (key, value): the whole fast path, as one transform."""
    return (
        clicks.transform(parse_clicks, quality)
        .transform(valid_clicks)
        .select("eventId", "pageId", "eventTime")
        .transform(with_event_time_watermark, hot.watermark)
        .transform(count_distinct_clicks_per_window, hot.window)
        .transform(hot_windows, hot.threshold)
        .transform(to_alert_records, hot.threshold)
    )


def writer(spark: SparkSession, config: Config, source_root: str, target_root: str) -> DataStreamWriter:
    """The clicks topic -> the alerts topic (the roots are unused: the fast path reads and writes Kafka)."""
    clicks = read_clicks_stream(spark, config.kafka, config.operational)
    return (
        clicks.transform(hot_page_alerts, config.hot_pages, config.quality)
        .writeStream.format("kafka")
        .options(**spark_options(config.kafka))
        .option("topic", config.kafka.topics.alerts)
        .outputMode("update")
    )


STREAM = Stream("hot_pages", "fast", writer)


def start(spark: SparkSession, config: Config) -> StreamingQuery:
    """Start the query; it resumes from storage.root/_checkpoints/hot_pages when that exists.

    Its checkpoint keeps `operational.batches_to_retain` micro-batches of offsets and watermarks.
    """
    root = config.storage.root
    writer = STREAM.writer_at(spark, config, root, root)
    writer = writer.trigger(processingTime=spark_interval(STREAM.trigger_interval(config)))
    # The offsets and commits logs are the batch history `lakehouse reconcile` explains alerts with.
    with session_conf(spark, {BATCHES_TO_RETAIN: str(config.operational.batches_to_retain)}), \
            scheduler_pool(spark, OPERATIONAL_POOL):
        return writer.start()


def starters(spark: SparkSession, config: Config) -> dict[str, Callable[[], StreamingQuery]]:
    """Query name -> a function that starts it: what `supervise` runs."""
    return {STREAM.name: lambda: start(spark, config)}
