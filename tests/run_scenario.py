"""`lakehouse run` on crafted traffic, checked against an oracle computed here from what was sent.

One scenario for every place `run` must give the same answer: local mode (tests/commands/test_run.py),
the standalone cluster and the SASL_SSL broker (tests/deployment/). The oracle counts distinct eventIds
per page and 5-second window from the crafted clicks themselves; a window is hot above THRESHOLD.
"""

from __future__ import annotations

import signal
import subprocess
from collections import defaultdict
from datetime import datetime, timezone
from collections.abc import Callable
from pathlib import Path

from analytical.gold_page_clicks_5s import TABLE as GOLD_PAGE_CLICKS_5S
from shared.alerts_topic import latest_alerts
from shared.kafka import ensure_topics
from tests.contract_oracle import highest_alert
from tests.helpers import LAKEHOUSE, click, send, wait_for

THRESHOLD = 3
DAY = "2026-11-22"

#: (eventId, pageId, time): a hot window with a copy of one click, a window at the threshold (not
#: hot), a cold one, a second hot window of the same page, and a later click that moves time on.
CLICKS = [
    *((f"r{n}", "/run", f"10:00:01.{n:03d}") for n in range(5)), ("r1", "/run", "10:00:01.001"),
    *((f"e{n}", "/edge", f"10:00:06.{n:03d}") for n in range(3)),
    *((f"c{n}", "/cold", f"10:00:02.{n:03d}") for n in range(2)),
    *((f"s{n}", "/run", f"10:00:12.{n:03d}") for n in range(4)),
    ("tick", "/tick", "10:00:30.000"),
]
#: CLICKS, then a hot window after the click that moves time on: no watermark closes it, only a clean stop
#: of each path having read every click (`lakehouse reconcile`'s other way for a window to close).
ENDING_HOT = [*CLICKS, *((f"z{n}", "/last", f"10:00:31.{n:03d}") for n in range(4))]


def expected_windows(clicks: list[tuple[str, str, str]] = CLICKS) -> dict[tuple[str, datetime], int]:
    """(pageId, window start) -> distinct clicks, from the `clicks` sent alone."""
    seen: dict[tuple[str, datetime], set[str]] = defaultdict(set)
    for event_id, page, time in clicks:
        at = datetime.fromisoformat(f"{DAY}T{time}+00:00")
        start = at.replace(second=at.second - at.second % 5, microsecond=0)
        seen[(page, start)].add(event_id)
    return {key: len(ids) for key, ids in seen.items()}


def windows_closed_by_the_newest_click(watermark_s: float = 5.0, window_s: float = 5.0) -> list[tuple[str, datetime]]:
    """The windows of expected_windows() that end at or before the newest click's time minus the
    watermark: the ones both paths have closed once they have read every click."""
    newest = max(datetime.fromisoformat(f"{DAY}T{time}+00:00") for _, _, time in CLICKS)
    return [key for key in expected_windows()
            if (newest - key[1]).total_seconds() >= watermark_s + window_s]


def expected_alerts(real_time: bool = False,
                    clicks: list[tuple[str, str, str]] = CLICKS) -> dict[tuple[str, datetime], int]:
    """The highest alerted count per hot window: the count itself (micro-batch mode), or the largest of
    the crossing count (THRESHOLD + 1) and its doublings that the count reached (real-time mode)."""
    return {key: highest_alert(count, THRESHOLD, real_time) for key, count in expected_windows(clicks).items()
            if count > THRESHOLD}


def run_options(config_overrides: list[str], *more: str) -> list[str]:
    """`run`'s --set values for the scenario: quick triggers, and in real-time mode the shortest checkpoint
    interval, so that a clean stop waits at most 5 s for the running batch (`more` may say otherwise)."""
    return [f"--set={item}" for item in (*config_overrides, f"hot_pages.threshold={THRESHOLD}",
                                         "operational.starting_offsets=earliest", "operational.status_interval_s=2",
                                         "operational.real_time.checkpoint_interval=5 seconds",
                                         "analytical.triggers.medallion=1 second",
                                         "analytical.triggers.gold=1 second", *more)]


def alerted(config) -> dict[tuple[str, datetime], int]:
    book = latest_alerts(config.kafka, config.kafka.topics.alerts)
    return {(alert.page_id, _utc(alert.window_start)): alert.click_count for alert in book.latest.values()}


def gold(spark, config) -> dict[tuple[str, datetime], int]:
    rows = GOLD_PAGE_CLICKS_5S.at(config.storage.root).read(spark).collect()
    return {(row.pageId, row.windowStart.replace(tzinfo=timezone.utc)): row.clickCount for row in rows}


def run_on_crafted_traffic(spark, config, options: list[str], log: Path, extra_args: tuple[str, ...] = (),
                           env: dict | None = None, timeout_s: float = 240,
                           while_running: Callable[[subprocess.Popen], None] = lambda run: None, real_time: bool = False,
                           clicks: list[tuple[str, str, str]] = CLICKS) -> str:
    """Send `clicks`, start `lakehouse [extra_args] run`, wait until the alerts and gold match the oracle,
    call `while_running` with run's process, stop it with SIGTERM (exit 0 required); returns its stderr."""
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    send(config, *(click(event_id, page, time, day=DAY) for event_id, page, time in clicks))
    gold_table = GOLD_PAGE_CLICKS_5S.at(config.storage.root)
    with open(log, "w") as stderr:
        running = subprocess.Popen([LAKEHOUSE, *extra_args, "run", *options], stdout=subprocess.PIPE,
                                   stderr=stderr, text=True, env=env)
        try:
            seen: dict[str, object] = {}

            def holds(name: str, read: Callable[[], object], expected: object) -> bool:
                seen[name] = read()
                return seen[name] == expected

            try:
                wait_for(lambda: holds("alerts", lambda: alerted(config), expected_alerts(real_time, clicks)),
                         timeout_s, "the alerts the oracle expects", every_s=1)
                wait_for(lambda: gold_table.exists(spark) and holds("gold", lambda: gold(spark, config),
                                                                            expected_windows(clicks)),
                         timeout_s, "gold as the oracle expects", every_s=3)
            except AssertionError as timed_out:
                raise AssertionError(f"{timed_out}; last seen {seen}; run's log ends:\n"
                                     f"{log.read_text()[-4000:]}") from None
            while_running(running)
            running.send_signal(signal.SIGTERM)
            assert running.wait(timeout=120) == 0, log.read_text()[-3000:]
        finally:
            running.kill()
    return log.read_text()


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))

