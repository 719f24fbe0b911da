"""The truth of a clicks topic under the contract, computed by the test from the records it reads back
(`tests.topics.read_to_end`), never by the code under test: which records are valid, the distinct
events, the distinct-event count of every page and 5-second window, and from it the highest alert
record the fast path must write for each window (`Truth.alert_outcomes`), which the alerts topic is
held against (`assert_alerts_as_the_oracle_says`).

    truth = Truth.of(read_to_end(config.kafka, config.kafka.topics.clicks))
    assert_alerts_as_the_oracle_says(config.kafka, config.kafka.topics.alerts, truth, 5000, real_time=True)
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tests.contract_oracle import Bounds, event_time_micros, event_type, expected_reason, highest_alert, user_id
from tests.sessions_oracle import Event
from tests.helpers import wait_for
from tests.topics import Record, read_to_end

WINDOW_MICROS = 5_000_000
#: hot_pages.watermark as shipped: a click this far behind the newest one sent before it may be late.
WATERMARK_MICROS = 5_000_000
#: The shipped bounds (conf/local.yaml): events from 2000-01-01, at most 1 hour ahead of Kafka.
BOUNDS = Bounds(earliest_micros=946_684_800_000_000, max_skew_micros=3_600_000_000)
SHIPPED_BOUNDS = ("quality.max_clock_skew=1 hour", "quality.earliest_event_time=2000-01-01T00:00:00Z")


@dataclass
class Truth:
    """What the topic's records mean under the contract, computed by the test."""

    records: dict[tuple[int, int], bytes | None]  # (partition, offset) -> value
    invalid: dict[tuple[int, int], str] = field(default_factory=dict)  # -> the oracle's reason
    events: dict[str, tuple[str, int]] = field(default_factory=dict)  # eventId -> (pageId, eventTime micros)
    windows: dict[tuple[str, int], int] = field(default_factory=dict)  # (pageId, window start micros) -> count
    visits: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # eventId -> (userId, eventType)
    #: (pageId, window start micros) -> the fast path's count as (low, high): the distinct eventIds of the
    #: window's clicks sent on time, and of all its clicks (a copy counts again in another page or window)
    fast_path: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: list[Record]) -> "Truth":
        """From a topic's records (`tests.topics.read_to_end`), in any order."""
        truth = cls(records={(r.partition, r.offset): r.value for r in rows})
        counts: dict[tuple[str, int], int] = defaultdict(int)
        clicks: list[tuple[int, str, str, int]] = []  # (Kafka timestamp ms, eventId, pageId, eventTime micros)
        for partition, offset, value, timestamp_ms, _ in sorted(rows, key=lambda r: (r.timestamp_ms, r.partition, r.offset)):
            reason = expected_reason(value, timestamp_ms * 1000, BOUNDS)
            if reason:
                truth.invalid[(partition, offset)] = reason
                continue
            body = json.loads(value)
            event_id, page = (str(body[key]) if not isinstance(body[key], str) else body[key]
                              for key in ("eventId", "pageId"))
            at = event_time_micros(body["eventTime"])
            clicks.append((timestamp_ms, event_id, page, at))
            if event_id in truth.events:
                continue
            truth.events[event_id] = (page, at)
            truth.visits[event_id] = (user_id(body), event_type(body))
            counts[(page, at - at % WINDOW_MICROS)] += 1
        truth.windows = dict(counts)
        truth.fast_path = _fast_path_counts(clicks)
        return truth

    def session_events(self) -> list[Event]:
        """The distinct valid events as tests/sessions_oracle.py reads them."""
        return [Event(event_id, page, naive_utc(at), *self.visits[event_id]) for event_id, (page, at) in self.events.items()]

    def newest_event_time(self) -> datetime:
        return naive_utc(max(at for _, at in self.events.values()))

    def hot(self, threshold: int) -> dict[tuple[str, int], int]:
        return {key: count for key, count in self.windows.items() if count > threshold}

    def hot_windows_per_page(self, threshold: int) -> dict[str, int]:
        """pageId -> its hot windows, for the pages with one."""
        return dict(Counter(page for page, _ in self.hot(threshold)))

    def clicks_per_page(self) -> dict[str, int]:
        """pageId -> its distinct events, over every window."""
        return dict(Counter(page for page, _ in self.events.values()))

    def alert_outcomes(self, threshold: int, real_time: bool) -> dict[tuple[str, int], set[int | None]]:
        """Per page and window with valid clicks, the clickCount its highest alert record may carry once
        the fast path has read every record (None: no alert). One value, unless clicks sent late
        (`_fast_path_counts`) could change it: whether those count depends on batch boundaries."""
        return {key: {highest_alert(count, threshold, real_time) for count in range(low, high + 1)}
                for key, (low, high) in self.fast_path.items()}


def naive_utc(micros: int) -> datetime:
    """An epoch instant in microseconds as the naive UTC datetime Spark's timestamps read as here."""
    return datetime(1970, 1, 1) + timedelta(microseconds=micros)


def _fast_path_counts(clicks: list[tuple[int, str, str, int]]) -> dict[tuple[str, int], tuple[int, int]]:
    """(low, high) distinct eventIds per page and window of the fast path's rule, from the valid clicks
    in Kafka timestamp order: high counts every click, low leaves out those sent late.

    A click is sent late when its eventTime is at or before the newest eventTime sent up to its
    Kafka timestamp (the same millisecond included) minus the watermark. The fast path drops a click
    only when it is at or before a watermark, the newest eventTime read before it minus the
    watermark delay, so every other click counts, provided the records reach it in about the order
    they were sent: the Kafka timestamp here is one producer's clock at the send (CreateTime), and
    each partition keeps its order. A click held back more than the watermark behind a later one of
    the other partition (a send retried long after) could be dropped and is not foreseen here.
    """
    newest_by_ms: dict[int, int] = {}
    newest = None
    for timestamp_ms, _, _, at in clicks:  # sorted by timestamp: the last value per ms is its newest
        newest = at if newest is None else max(newest, at)
        newest_by_ms[timestamp_ms] = newest
    every: dict[tuple[str, int], set[str]] = defaultdict(set)
    on_time: dict[tuple[str, int], set[str]] = defaultdict(set)
    for timestamp_ms, event_id, page, at in clicks:
        key = (page, at - at % WINDOW_MICROS)
        every[key].add(event_id)
        if at > newest_by_ms[timestamp_ms] - WATERMARK_MICROS:
            on_time[key].add(event_id)
    return {key: (len(on_time[key]), len(ids)) for key, ids in every.items()}


def highest_alerts(kafka_config, topic: str) -> dict[tuple[str, int], int]:
    """The highest clickCount per (pageId, window start in microseconds) on the alerts topic, read here
    from the raw records (each must be an alert's JSON object)."""
    highest: dict[tuple[str, int], int] = {}
    for partition, offset, value, *_ in read_to_end(kafka_config, topic):
        record = json.loads(value)
        assert isinstance(record.get("clickCount"), int), f"not an alert at {partition}/{offset}: {value!r}"
        key = (record["pageId"], event_time_micros(record["windowStart"]))
        highest[key] = max(highest.get(key, 0), record["clickCount"])
    return highest


def wrong_alerts(alerts: dict[tuple[str, int], int], outcomes: dict[tuple[str, int], set[int | None]]) -> dict:
    """{window: (highest alerted, what the oracle allows)} where they disagree: a hot window without its
    alert, an alert with another count, an alert for a window that is not hot or has no valid click."""
    return {key: (alerts.get(key), outcomes.get(key, {None})) for key in sorted(set(alerts) | set(outcomes))
            if alerts.get(key) not in outcomes.get(key, {None})}


def _above_the_oracle(wrong: dict) -> bool:
    """An alert higher than the oracle allows: final, since a window's highest record only rises."""
    return any(alerted is not None and alerted > max((c for c in allowed if c is not None), default=0)
               for alerted, allowed in wrong.values())


def assert_alerts_as_the_oracle_says(kafka_config, topic: str, truth: Truth, threshold: int, real_time: bool,
                                     timeout_s: float = 0) -> dict[tuple[str, int], int]:
    """Every window's highest alert record is the one the oracle computes from the topic's clicks
    (`Truth.alert_outcomes`), within `timeout_s` (the fast path still catching up), and every hot
    window is judged exactly (none left to clicks sent late). Returns the highest alerts."""
    outcomes = truth.alert_outcomes(threshold, real_time)
    undecided = {key: outcomes[key] for key in truth.hot(threshold) if len(outcomes.get(key, ())) != 1}
    assert not undecided, f"hot windows whose alert depends on clicks sent late (not judged exactly): {undecided}"
    seen: dict[str, dict] = {}

    def settled() -> bool:
        seen["alerts"] = highest_alerts(kafka_config, topic)
        seen["wrong"] = wrong_alerts(seen["alerts"], outcomes)
        return not seen["wrong"] or _above_the_oracle(seen["wrong"])

    if not settled() and timeout_s > 0:
        try:
            wait_for(settled, timeout_s, "the alerts the oracle computes", every_s=2)
        except AssertionError:
            pass  # reported below, with what differs
    wrong = seen["wrong"]
    assert not wrong, (f"{len(wrong)} of {len(outcomes)} windows with another highest alert than the oracle's "
                       f"(window: (alerted, allowed)), {len(truth.hot(threshold))} hot: {dict(list(wrong.items())[:10])}")
    return seen["alerts"]
