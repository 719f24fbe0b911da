"""When a window is closed in each path, for `lakehouse reconcile` (QUALITY.md, "The reconciliation").

Besides its watermark, a path has closed every window when it is stopped (nothing holds its checkpoint
lock; on an object store, where the lock is a file of the machine that ran it, its last run marked its
clean stop: `shared.checkpoint_locks.StoppedMarks`) and has read everything before it: the fast path
the clicks topic up to its end; the medallion, bronze the topic, silver bronze, gold silver. Each
function says why a path may still change a count, or None when it cannot.
"""

from __future__ import annotations

import os
from functools import reduce

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from analytical import bronze_clicks, gold_page_clicks_5s, silver_clicks
from analytical.fast_path_history import FastPathHistory
from analytical.tables import is_delta_table
from shared.alerts import ALERTING_QUERY
from shared.broker_readings import BrokerOffsets
from shared.checkpoint_locks import StoppedMarks, holder
from shared.checkpoints import kafka_offsets, read_checkpoint_log
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
    running = _running(spark, config, ALERTING_QUERY)
    if running:
        return (f"the fast path {_is_running(running)}: a batch end after clicks past the window's end "
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
    when it cannot: the medallion is stopped and each of its streams read everything before it."""
    from analytical.registry import STREAMS

    running = next(filter(None, (_running(spark, config, stream.name) for stream in STREAMS)), None)
    if running:
        return (f"the medallion {_is_running(running)}: clicks in silver past the window's end "
                f"+ {config.hot_pages.watermark.total_seconds():g} s close it")
    catch_up = "run `lakehouse analytical --available-now`"
    bronze_log = read_checkpoint_log(spark, config.checkpoint(bronze_clicks.STREAM.name))
    last = bronze_log.last_committed if bronze_log else None
    read_up_to = kafka_offsets(last.end_offsets[0] if last and last.end_offsets else None, config.kafka.topics.clicks)
    if clicks_end is None:
        return f"the end of {config.kafka.topics.clicks} could not be read from the broker"
    unread = _unread(read_up_to, clicks_end)
    if unread:
        return f"bronze has not read {unread:,} clicks on {config.kafka.topics.clicks}: {catch_up}"
    for stream, source in ((silver_clicks.STREAM, bronze_clicks.TABLE), (gold_page_clicks_5s.STREAM, silver_clicks.TABLE)):
        path = source.at(config.storage.root).path
        newest = _newest_version(spark, path)
        read = version_read_by(spark, config, stream.name)
        if newest is not None and (read is None or _changes_data(spark, path, range(read + 1, newest + 1))):
            return f"{stream.name} has not read {source} up to its version {newest}: {catch_up}"
    return None


def _is_running(holder_: str) -> str:
    if holder_ == "unknown":  # an object-store root's lock is a file on the machine that runs the query
        return ("is not running here and may be running on another machine (its last run marked no clean "
                "stop: it was killed, or runs still)")
    return f"is running ({holder_})"


def _running(spark: SparkSession, config: Config, query: str) -> str | None:
    """Who runs `query` now (its checkpoint lock's holder), None when nobody does. This very process may
    hold the lock with the query stopped (the demo holds its locks throughout): then it runs only if
    active here."""
    running = holder(config.storage.root, query, StoppedMarks(config.storage.root, config.storage.s3))
    if running == f"pid {os.getpid()}" and all(active.name != query for active in spark.streams.active):
        return None
    return running


def _changes_data(spark: SparkSession, path: str, versions: range) -> bool:
    """Whether any of these commits of the Delta table at `path` adds or removes data, which a stream
    reading the table reads: an OPTIMIZE, a REORG or a VACUUM (`lakehouse maintain`) moves no row, and
    a stream skips them. A commit whose file is gone (the log's retention) counts as a change."""
    from pyspark.errors import AnalysisException

    if not versions:
        return False
    try:
        actions = spark.read.json([f"{path}/_delta_log/{version:020d}.json" for version in versions])
    except AnalysisException:
        return True
    changes = [F.col(f"{action}.dataChange") for action in ("add", "remove") if action in actions.columns]
    return bool(changes) and not actions.where(reduce(lambda one, other: one | other, changes)).isEmpty()


def _newest_version(spark: SparkSession, path: str) -> int | None:
    from delta.tables import DeltaTable

    if not is_delta_table(spark, path):
        return None
    return DeltaTable.forPath(spark, path).history(1).select("version").first()[0]


def version_read_by(spark: SparkSession, config: Config, stream: str) -> int | None:
    """The last version of its Delta source that a medallion stream has fully read (its checkpoint)."""
    log = read_checkpoint_log(spark, config.checkpoint(stream))
    batch = log.last_committed if log else None
    offset = batch.end_offsets[0] if batch and batch.end_offsets else None
    if not isinstance(offset, dict) or "reservoirVersion" not in offset:
        return None
    version = int(offset["reservoirVersion"])
    return version - 1 if int(offset.get("index", -1)) == -1 else version  # (V, -1): everything before V
