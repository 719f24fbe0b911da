"""Reading what is on a topic, the one way the tests do it: to the end offsets the broker reports
when the read starts, never until a silence. An absence read this way is an absence: a slow first
fetch cannot pass for an empty topic.

    records = read_to_end(config.kafka, config.kafka.topics.alerts)
    assert [r for r in alert_records(config) if r["pageId"] == "/cold"] == []
"""

from __future__ import annotations

import json
import time
from typing import Any, NamedTuple


class Record(NamedTuple):
    partition: int
    offset: int
    value: bytes | None
    timestamp_ms: int
    key: bytes | None


def read_to_end(kafka_config, topic: str, timeout_s: float = 60) -> list[Record]:
    """Every record on `topic` up to the end offsets the broker reports now, in partition and offset
    order; an AssertionError if they cannot all be read within `timeout_s`."""
    from kafka import TopicPartition

    from shared.kafka import consumer_for

    consumer = consumer_for(kafka_config)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        assert partitions, f"topic {topic} does not exist"
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        records: list[Record] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, f"{topic} could not be read to its end offsets {ends} in {timeout_s:g} s"
            for tp, batch in consumer.poll(timeout_ms=1000, max_records=5000).items():
                records += [Record(tp.partition, r.offset, r.value, r.timestamp, r.key)
                            for r in batch if r.offset < ends[tp]]
        return sorted(records)
    finally:
        consumer.close()


def alert_records(config) -> list[dict[str, Any]]:
    """Each record on the configuration's alerts topic, read to its end: its JSON value, with its key
    under "key"."""
    return [json.loads(record.value) | {"key": record.key.decode() if record.key is not None else None}
            for record in read_to_end(config.kafka, config.kafka.topics.alerts)]
