"""A real-time start with a backlog reads it in one micro-batch first, so that no click of it is late.

Spark keeps one watermark per query: the newest event time read from any partition, less
`hot_pages.watermark`. A real-time batch reads each Kafka partition with a task of its own, as fast
as it can: after a crash or a stop, the partitions with fewer clicks per second of event time run
ahead, and a batch that ends before every partition has caught up moves the watermark past the
slower partitions' unread clicks, which the next batch drops as late and whose windows then miss their
alerts. One Available-now micro-batch reads every partition to the offsets the start saw, and its
watermark moves after all of them are read, so it passes no click it has not read. (With a
`max_offsets_per_trigger`, Available-now splits the backlog into batches by each partition's lag
in records, level in event time only where each partition's clicks are spread evenly.)

So a start whose oldest unread click is older than `operational.real_time.catch_up_after` runs the
same query with the Available-now trigger on the same checkpoint first, and real-time mode after it
(`shared.stream.Stage`), or another catch-up while each one halves the backlog. Where the query
resumes comes from its checkpoint; how old the click there is, from its Kafka timestamp.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from shared.alerts import ALERTING_QUERY
from shared.config import Config, KafkaConfig, KafkaSourceSettings


def unread_backlog_age(spark: Any, config: Config) -> timedelta:
    """How old the oldest click is that the hot-pages query has not read yet, by its Kafka timestamp."""
    from shared.checkpoints import read_checkpoint_log

    topic = config.kafka.topics.clicks
    log = read_checkpoint_log(spark, config.checkpoint(ALERTING_QUERY))
    unread = unread_from(config.kafka, topic, log.read_up_to(topic) if log else None, config.operational)
    return backlog_age(oldest_unread_timestamp_ms(config.kafka, topic, unread), int(time.time() * 1000))


def backlog_age(oldest_unread_ms: int | None, now_ms: int) -> timedelta:
    """How far behind the clock the oldest unread click is (zero when nothing is unread).

        >>> backlog_age(1_000, 31_000)
        datetime.timedelta(seconds=30)
    """
    return timedelta(milliseconds=max(0, now_ms - oldest_unread_ms)) if oldest_unread_ms is not None else timedelta(0)


def needs_catch_up(age: timedelta, catch_up_after: timedelta, left_by_last: timedelta | None = None) -> bool:
    """Whether a start with a backlog `age` old reads it in a micro-batch before going real-time.

    After a catch-up (`left_by_last`: the age of the backlog it started with), again only if that
    one halved the backlog. A catch-up costs a fixed start (planning, loading the state) on top of its
    reading, and leaves a backlog of what arrived meanwhile: once that is about as old as the last
    one, another would leave the same, and the fast path would never go real-time. What is left then
    arrived during the catch-up, level across partitions, and a real-time batch reads it at once.

        >>> needs_catch_up(timedelta(seconds=12), timedelta(seconds=10), left_by_last=timedelta(seconds=300))
        True
        >>> needs_catch_up(timedelta(seconds=12), timedelta(seconds=10), left_by_last=timedelta(seconds=20))
        False
    """
    return age > catch_up_after and (left_by_last is None or age < left_by_last / 2)


def unread_from(kafka: KafkaConfig, topic: str, read_up_to: Mapping[int, int] | None,
                source: KafkaSourceSettings) -> dict[int, int]:
    """Per partition, the first offset the query has not read: where its checkpoint says it resumes,
    or for a first start, where `starting_offsets` begins (latest: nothing is unread)."""
    from shared.kafka import topic_offsets

    if read_up_to:
        return dict(read_up_to)
    offsets = topic_offsets(kafka, topic)
    return {partition: earliest if source.starting_offsets == "earliest" else latest
            for partition, (earliest, latest) in offsets.items()}


def oldest_unread_timestamp_ms(kafka: KafkaConfig, topic: str, unread: Mapping[int, int],
                               timeout_s: float = 30.0) -> int | None:
    """The Kafka timestamp of the oldest of the records at `unread` (partition -> offset); None when
    every partition has been read to its end."""
    from kafka import TopicPartition

    from shared.kafka import consumer_for

    consumer = consumer_for(kafka)
    try:
        partitions = [TopicPartition(topic, partition) for partition in sorted(unread)]
        ends = consumer.end_offsets(partitions)
        waiting = [tp for tp in partitions if unread[tp.partition] < ends[tp]]
        if not waiting:
            return None
        consumer.assign(waiting)
        for tp in waiting:
            consumer.seek(tp, unread[tp.partition])
        first: dict[TopicPartition, int] = {}
        deadline = time.monotonic() + timeout_s
        while len(first) < len(waiting) and time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                if records and tp not in first:
                    first[tp] = records[0].timestamp
                    consumer.pause(tp)
        return min(first.values()) if first else None
    finally:
        consumer.close()
