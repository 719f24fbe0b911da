"""`lakehouse notify` between the real broker and a real Alertmanager with the shipped routes: every hot
window on the alerts topic reaches the webhook receiver once, whatever records the window has (twice
written, its count raised); a record that is not an alert, has a time nobody can read, or that
Alertmanager refuses, is said in one line and delivered around; an
Alertmanager that is down at the start gets every alert once it is up, and nothing is committed before;
a URL that is not an Alertmanager is refused in one line. The oracle is the records the test wrote."""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from lakehouse.notify import Bridge, DeliveryMetrics
from shared.errors import ConfigError
from shared.kafka import consumer_for, producer_for
from tests.conftest import embedded_alertmanager, make_config
from tests.helpers import wait_for


def alert_record(page: str, second: int, count: int = 120, emitted_at: str = "2026-11-22T10:00:05.010Z") -> bytes:
    start = f"2026-11-22T10:00:{second:02d}.000Z"
    return json.dumps({"alertId": f"{page}|{start}", "pageId": page, "windowStart": start,
                       "windowEnd": f"2026-11-22T10:00:{second + 5:02d}.000Z", "clickCount": count,
                       "threshold": 100, "emittedAt": emitted_at}).encode()


def write(config, *values: bytes) -> None:
    producer = producer_for(config.kafka)
    try:
        for value in values:
            producer.send(config.kafka.topics.alerts, value=value)
        producer.flush()
    finally:
        producer.close()


@contextmanager
def bridging(config, lines: list[str]) -> Iterator[Bridge]:
    """A bridge running in a thread until the block ends; its lines to `lines`."""
    stop = threading.Event()
    bridge = Bridge(config, DeliveryMetrics(), log=lines.append)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            bridge.run(stop)
        except BaseException as error:  # the test's assertions say it, not a thread's traceback
            failures.append(error)

    thread = threading.Thread(target=run, name="bridge", daemon=True)
    thread.start()
    try:
        yield bridge
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not failures, failures


def served(bridge: Bridge, series: str) -> float:
    """A series of the bridge's metrics as its endpoint would serve it."""
    return bridge.metrics.registry.get_sample_value(series) or 0.0


def committed_to_the_end(config) -> bool:
    from kafka import TopicPartition

    consumer = consumer_for(config.kafka, group_id=config.alerting.consumer_group)
    try:
        partitions = [TopicPartition(config.kafka.topics.alerts, p)
                      for p in consumer.partitions_for_topic(config.kafka.topics.alerts) or ()]
        ends = consumer.end_offsets(partitions)
        return bool(partitions) and all(consumer.committed(p) == ends[p] for p in partitions)
    finally:
        consumer.close()


def test_every_window_is_notified_once_and_a_record_that_is_no_alert_is_said_and_passed(
        configured, alertmanager):
    config = configured(f"alerting.alertmanager_url={alertmanager.url}",
                        f"alerting.consumer_group=notify-{uuid.uuid4().hex[:8]}", topics=("alerts",))
    pages = f"/t{uuid.uuid4().hex[:6]}"
    write(config, alert_record(f"{pages}/a", 0), alert_record(f"{pages}/a", 0),  # written twice
          alert_record(f"{pages}/b", 5), b'{"alertId": "broken"',
          alert_record(f"{pages}/b", 5, count=180), alert_record(f"{pages}/c", 10),  # a count raised
          alert_record(f"{pages}/d", 15, emitted_at="soon"),  # a time nobody can read
          alert_record(f"{pages}/e", 20, emitted_at="2099-01-01T00:00:00.000Z"))  # starts after it ends: refused
    lines: list[str] = []
    with bridging(config, lines) as bridge:
        wait_for(lambda: len(alertmanager.notified_windows(pages)) == 3 and committed_to_the_end(config), 30,
                 "three windows notified and every record committed")
    assert alertmanager.notified_windows(pages) == {(f"{pages}/a", "2026-11-22T10:00:00.000Z"): 1,
                                             (f"{pages}/b", "2026-11-22T10:00:05.000Z"): 1,
                                             (f"{pages}/c", "2026-11-22T10:00:10.000Z"): 1}
    [broken] = [line for line in lines if "is not an alert (not JSON" in line]
    [unreadable] = [line for line in lines if "is not an alert (emittedAt" in line]
    assert re.fullmatch(rf"notify: {config.kafka.topics.alerts} partition \d+ offset \d+ is not an alert \(not JSON "
                        r"\(JSONDecodeError\)\): not posted", broken), broken
    assert "is not an alert (emittedAt is not an ISO-8601 instant: 'soon'): not posted" in unreadable, unreadable
    [refused] = [line for line in lines if "refused the alerts: HTTP 400" in line]
    assert refused.endswith(f"the alert {pages}/e|2026-11-22T10:00:20.000Z is not posted"), refused
    assert served(bridge, "lakehouse_notify_invalid_records_total") == 3


def test_an_alertmanager_down_longer_than_resolve_after_gets_every_alert_firing_once_up_and_nothing_committed_before(
        configured, alertmanager_tools, tmp_path):
    manager = embedded_alertmanager(tmp_path / "alertmanager")
    resolve_after_s = 3
    config = configured(f"alerting.alertmanager_url={manager.url}", "alerting.retry_max_delay=1 second",
                        f"alerting.resolve_after={resolve_after_s} seconds",
                        f"alerting.consumer_group=notify-{uuid.uuid4().hex[:8]}", topics=("alerts",))
    pages = "/down"
    write(config, alert_record(f"{pages}/a", 0), alert_record(f"{pages}/b", 5))
    lines: list[str] = []
    try:
        with bridging(config, lines) as bridge:
            wait_for(lambda: served(bridge, "lakehouse_notify_post_failures_total") >= 2, 30, "the bridge to try and fail twice")
            # down for longer than an alert lives once posted: an endsAt counted from the read would have passed
            failed_at = time.monotonic()
            wait_for(lambda: time.monotonic() - failed_at > resolve_after_s, resolve_after_s + 5,
                     "resolve_after to pass with Alertmanager down")
            assert not committed_to_the_end(config), "committed what Alertmanager did not take"
            manager.start(die_with_caller=True)
            wait_for(lambda: len(manager.notified_windows(pages)) == 2 and committed_to_the_end(config), 30,
                     "both windows notified once Alertmanager is up")
    finally:
        manager.stop(quiet=True)
    assert sum(manager.notified_windows(pages).values()) == 2
    assert sum("does not answer" in line for line in lines) == 2, lines  # at the start, then at its first post
    assert any("took the alerts again" in line for line in lines), lines


def test_a_url_that_is_not_an_alertmanager_is_refused_in_one_line(configured, alertmanager):
    config = configured(f"alerting.alertmanager_url={alertmanager.receiver_url}", topics=("alerts",))
    with pytest.raises(ConfigError, match=r"alerting.alertmanager_url: http://127.0.0.1:\d+ is not an Alertmanager's "
                                          r"API v2 \(GET /api/v2/status answered HTTP 404\)"):
        Bridge(config, DeliveryMetrics()).run(threading.Event())
    with pytest.raises(ConfigError, match="alerting.alertmanager_url is not set"):
        Bridge(make_config(), DeliveryMetrics())
