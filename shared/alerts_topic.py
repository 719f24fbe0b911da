"""Reading `hot-pages` back: every record checked against the alert contract, and per alertId the
record with the highest clickCount (the Kafka sink is at-least-once and a window's count grows).

Used by `lakehouse alerts`, the demo and the benchmarks. A record that is not a valid alert is
counted and kept aside with its offset, never a crash.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from shared.config import KafkaConfig
from shared.errors import LakehouseError
from shared.schema import ALERT_SCHEMA
from shared.kafka import consumer_for

ALERT_FIELDS = tuple(ALERT_SCHEMA.fieldNames())


@dataclass(frozen=True)
class Alert:
    alert_id: str
    page_id: str
    window_start: str
    window_end: str
    click_count: int
    threshold: int
    emitted_at: str
    kafka_timestamp_ms: int
    partition: int
    offset: int

    def as_dict(self) -> dict[str, Any]:
        return {
            "alertId": self.alert_id,
            "pageId": self.page_id,
            "windowStart": self.window_start,
            "windowEnd": self.window_end,
            "clickCount": self.click_count,
            "threshold": self.threshold,
            "emittedAt": self.emitted_at,
        }


@dataclass
class AlertBook:
    """The latest alert per alertId, plus what was not an alert."""

    latest: dict[str, Alert] = field(default_factory=dict)
    records: int = 0
    invalid: list[tuple[int, int, str]] = field(default_factory=list)  # (partition, offset, why)

    def add(self, partition: int, offset: int, timestamp_ms: int, value: bytes | None) -> Alert | None:
        """Take one record; return the alert if it is new or raises its window's count."""
        self.records += 1
        alert, why = parse_alert(value, partition, offset, timestamp_ms)
        if alert is None:
            self.invalid.append((partition, offset, why))
            return None
        known = self.latest.get(alert.alert_id)
        if known is None or alert.click_count > known.click_count:
            self.latest[alert.alert_id] = alert
            return alert
        return None

    def sorted(self) -> list[Alert]:
        return sorted(self.latest.values(), key=lambda a: (a.window_start, a.page_id))


def parse_alert(value: bytes | None, partition: int, offset: int, timestamp_ms: int) -> tuple[Alert | None, str]:
    if value is None:
        return None, "null value"
    try:
        data = json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return None, f"not JSON ({error.__class__.__name__})"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    missing = [name for name in ALERT_FIELDS if name not in data]
    if missing:
        return None, f"missing {', '.join(missing)}"
    if not all(isinstance(data[name], int) and not isinstance(data[name], bool) for name in ("clickCount", "threshold")):
        return None, "clickCount and threshold must be integers"
    if not all(isinstance(data[name], str) for name in ALERT_FIELDS if name not in ("clickCount", "threshold")):
        return None, "alertId, pageId and the times must be strings"
    return (
        Alert(data["alertId"], data["pageId"], data["windowStart"], data["windowEnd"], data["clickCount"],
              data["threshold"], data["emittedAt"], timestamp_ms, partition, offset),
        "",
    )


def read_alerts(kafka: KafkaConfig, topic: str, follow: bool = False, idle_timeout_s: float = 2.0) -> Iterator[tuple[AlertBook, Alert | None]]:
    """Yield (book, changed alert) for each record of `topic` from the beginning.

    Without `follow`, stops once the end offsets seen at the start are consumed; with it, runs
    until interrupted, yielding (book, None) when idle so callers can refresh.
    """
    from kafka import TopicPartition

    book = AlertBook()
    consumer = consumer_for(kafka, consumer_timeout_ms=int(idle_timeout_s * 1000))
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise LakehouseError(f"topic {topic} does not exist on {kafka.bootstrap_servers}: has the fast path run?")
        assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning(*assigned)
        end = consumer.end_offsets(assigned)
        while True:
            for record in consumer:
                yield book, book.add(record.partition, record.offset, record.timestamp, record.value)
                if not follow and all(consumer.position(tp) >= end[tp] for tp in assigned):
                    return
            if not follow:
                if all(consumer.position(tp) >= end[tp] for tp in assigned):
                    return
                continue
            yield book, None
    finally:
        consumer.close()


def latest_alerts(kafka: KafkaConfig, topic: str) -> AlertBook:
    """All of `topic` now, folded into an AlertBook."""
    book = AlertBook()
    for book, _ in read_alerts(kafka, topic):
        pass  # read_alerts fills one book; the loop only drains it
    return book

