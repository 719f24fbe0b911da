"""When a window is closed in each path, for `lakehouse reconcile` (QUALITY.md, "The reconciliation").

Besides its watermark, a path has closed every window when it is stopped (nothing holds its checkpoint
lock; on an object store, where the lock is a file of the machine that ran it, its last run marked its
clean stop: `shared.checkpoint_locks.StoppedMarks`) and has read everything before it: the fast path
the clicks topic up to its end; the medallion, the topic up to its end, its last batch finished. Each
function says why a path may still change a count, or None when it cannot.
"""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

from analytical import medallion, silver_clicks
from analytical.fast_path_history import FastPathHistory
from shared.alerts import ALERTING_QUERY
from shared.broker_readings import BrokerOffsets
from shared.checkpoint_locks import StoppedMarks, holder
from analytical.writes import Txn, version_before
from shared.checkpoints import kafka_offsets, query_id, read_checkpoint_log
from shared.config import Config, KafkaConfig


def topic_end(kafka: KafkaConfig) -> dict[int, int] | None:
    """Per partition, the clicks topic's end offset now (None when the broker does not say)."""
    offsets = BrokerOffsets(kafka)
    try:
        ends = offsets([kafka.topics.clicks])
    finally:
        offsets.close()
    return None if ends is None else {partition: end for (_, partition), end in ends.items()}


def _unread(read_up_to: dict[int, int], ends: dict[int, int]) -> int:
    return sum(max(end - read_up_to.get(partition, 0), 0) for partition, end in ends.items())


def fast_path_still_counting(spark: SparkSession, config: Config, history: FastPathHistory, clicks_end: dict[int, int] | None) -> str | None:
    """Why the fast path may still change the count of a window its watermark has not closed; None
    when it cannot: it is stopped and its last batch read every click on the topic."""
    runs = running(spark, config, ALERTING_QUERY)
    if runs:
        return (f"the fast path {is_running(runs)}: a batch end after clicks past the window's end "
                f"+ {config.hot_pages.watermark.total_seconds():g} s closes it")
    if clicks_end is None:
        return f"the end of {config.kafka.topics.clicks} could not be read from the broker"
    unread = _unread(history.read_up_to, clicks_end)
    if unread:
        return (f"the fast path is stopped with {unread:,} clicks on {config.kafka.topics.clicks} unread: "
                "start it (`lakehouse operational` or `lakehouse run`)")
    return None


def medallion_still_counting(spark: SparkSession, config: Config, clicks_end: dict[int, int] | None) -> str | None:
    """Why gold may still change the count of a window silver's newest event has not closed; None
    when it cannot: the medallion is stopped, its query read every click on the topic and finished
    its last batch. Only that query writes gold's windows: the streams that follow it do not count."""
    runs = running(spark, config, medallion.STREAM.name)
    if runs:
        return (f"the medallion {is_running(runs)}: clicks in silver past the window's end "
                f"+ {config.hot_pages.watermark.total_seconds():g} s close it")
    catch_up = "run `lakehouse analytical --available-now`"
    log = read_checkpoint_log(spark, config.checkpoint(medallion.STREAM.name))
    if log and log.batches and not log.batches[-1].committed:
        return f"the {medallion.STREAM.name} query's batch {log.batches[-1].batch_id} did not finish: {catch_up}"
    last = log.last_committed if log else None
    read_up_to = kafka_offsets(last.end_offsets[0] if last and last.end_offsets else None, config.kafka.topics.clicks)
    if clicks_end is None:
        return f"the end of {config.kafka.topics.clicks} could not be read from the broker"
    unread = _unread(read_up_to, clicks_end)
    if unread:
        return f"the medallion has not read {unread:,} clicks on {config.kafka.topics.clicks}: {catch_up}"
    return None


def silver_version_counted(spark: SparkSession, config: Config) -> int | None:
    """The newest version of silver/clicks whose events gold counts: the version before the write of a
    batch the medallion's query has not finished (gold may lack its events yet); None (the newest) when
    every batch finished."""
    checkpoint = config.checkpoint(medallion.STREAM.name)
    log = read_checkpoint_log(spark, checkpoint)
    if not log or not log.batches or log.batches[-1].committed:
        return None
    path = silver_clicks.TABLE.at(config.storage.root).path
    return version_before(spark, path, Txn(query_id(spark, checkpoint), log.batches[-1].batch_id))


def is_running(holder_: str) -> str:
    if holder_ == "unknown":  # an object-store root's lock is a file on the machine that runs the query
        return ("is not running here and may be running on another machine (its last run marked no clean "
                "stop: it was killed, or runs still)")
    return f"is running ({holder_})"


def running(spark: SparkSession, config: Config, query: str) -> str | None:
    """Who runs `query` now (its checkpoint lock's holder), None when nobody does. This very process may
    hold the lock with the query stopped (the demo holds its locks throughout): then it runs only if
    active here."""
    running = holder(config.storage.root, query, StoppedMarks(config.storage.root, config.storage.s3))
    if running == f"pid {os.getpid()}" and all(active.name != query for active in spark.streams.active):
        return None
    return running
