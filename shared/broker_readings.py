"""What the broker says now, asked at each Prometheus scrape: the newest offsets of topics (a
query's Kafka lag) and the time of a topic's newest record (the last alert).

Spark's Kafka source commits no consumer-group offsets, so the usual lag exporters see nothing of
these streams: the lag is the broker's offsets now minus what the query has read (lakehouse.monitoring.metrics).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from shared.query_progress import Offsets


class BrokerOffsets:
    """The newest offsets of topics, asked of the broker at each scrape through one kafka-python
    consumer (no group: nothing is committed). A broker that does not answer within the timeout
    gives None, and the lag falls back to what the query's last progress saw."""

    def __init__(self, kafka: Any, timeout_ms: int = 2000):
        self._kafka = kafka
        self._timeout_ms = timeout_ms
        self._consumer: Any = None
        self._lock = threading.Lock()

    def __call__(self, topics: Iterable[str]) -> Offsets | None:
        from kafka import TopicPartition

        with self._lock:
            try:
                consumer = self._client()
                partitions = [TopicPartition(topic, partition) for topic in sorted(topics)
                              for partition in sorted(consumer.partitions_for_topic(topic) or ())]
                return {(tp.topic, tp.partition): offset for tp, offset in consumer.end_offsets(partitions).items()}
            except Exception:  # a scrape must answer; the next one asks again
                self.close()
                return None

    def _client(self) -> Any:
        if self._consumer is None:
            from shared.kafka import consumer_for

            self._consumer = consumer_for(self._kafka, request_timeout_ms=self._timeout_ms)
        return self._consumer

    def newest_timestamp(self, topic: str) -> float | None:
        """The Unix time of the newest record on `topic` (the latest of its partitions' last records),
        read through the same consumer; None when it is empty or the broker does not answer."""
        from kafka import TopicPartition

        with self._lock:
            try:
                consumer = self._client()
                partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
                ends = {tp: end for tp, end in consumer.end_offsets(partitions).items() if end > 0}
                if not ends:
                    return None
                consumer.assign(list(ends))
                for tp, end in ends.items():
                    consumer.seek(tp, end - 1)
                newest, deadline = None, time.monotonic() + self._timeout_ms / 1000
                remaining = set(ends)
                while remaining and time.monotonic() < deadline:
                    for tp, records in consumer.poll(timeout_ms=200).items():
                        remaining.discard(tp)
                        stamp = max(record.timestamp for record in records) / 1000
                        newest = stamp if newest is None else max(newest, stamp)
                return newest
            except Exception:  # a scrape must answer; the next one asks again
                self.close()
                return None

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            finally:
                self._consumer = None
