"""Crashes and hostile input, Jepsen-style: real processes killed at random moments under traffic,
and every table and alert checked against a truth the test computes from what the topic holds.

  - `lakehouse run` is killed with SIGKILL (its pid, not its group) at 3 random moments and started
    again at once each time (once while it starts, twice once its fast path runs, so that restarts
    resume from the fast path's checkpoint), and the broker is killed with SIGKILL and started again
    in between, under a running fast path, and the Alertmanager its bridge posts to is restarted;
    every window the alerts topic holds must reach Alertmanager's receiver exactly once;
    then the traffic stops, the last run stops cleanly, a backfill runs and `lakehouse reconcile`
    must explain every difference; the users' closed sessions and the conversion per page must be
    exactly what tests/sessions_oracle.py reads from the topic's events. The moments come from a seed the test prints; set
    LAKEHOUSE_FAULT_SEED to it to replay the schedule.
  - 10,000 hostile records reach the fast path in micro-batch mode, then a window turns hot in real
    time (the same in real-time mode: tests/realtime/test_hostile_input.py).

Threshold 50: the hot page takes about 100 clicks per window, an ordinary page about 2. Each window's
highest alert record must be exactly what the oracle computes from the topic's clicks
(`traffic.assert_alerts_as_the_oracle_says`): in real-time mode the largest of 51, 102, 204, ... its
distinct clicks reached, so a hot window of 101 clicks reads 51 and one of 102 reads 102, and a
restart that lost or counted twice part of a window shows.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from analytical import pipeline
from analytical.bronze_clicks import TABLE as BRONZE_CLICKS
from analytical.gold_page_clicks_5s import TABLE as GOLD_PAGE_CLICKS_5S
from analytical.gold_page_conversion import TABLE as PAGE_CONVERSION
from analytical.gold_user_sessions import STREAM as USER_SESSIONS_STREAM
from analytical.gold_user_sessions import TABLE as USER_SESSIONS
from analytical.silver_clicks import QUARANTINE as SILVER_QUARANTINE
from analytical.silver_clicks import TABLE as SILVER_CLICKS
from operational import hot_pages
from shared.checkpoints import read_checkpoint_log
from shared.config_loading import with_overrides
from shared.kafka import ensure_topics
from shared.query_progress import progress_dict
from lakehouse.monitoring.running_queries import running_queries
from lakehouse.services.broker import EmbeddedBroker
from tests.conftest import embedded_alertmanager, make_config
from tests.traffic import HOT_PAGE, Traffic, click, hostile, now_micros
from tests.sessions_oracle import hot_windows, page_conversion_of, sessions, sessions_of
from tests.truth import SHIPPED_BOUNDS, Truth, assert_alerts_as_the_oracle_says, naive_utc
from tests.topics import alert_records, read_to_end
from tests.helpers import LAKEHOUSE, assert_no_errors, lakehouse_here, send, wait_for
from tests.processes import alive, family


THRESHOLD = 50
#: Set to a seed the test printed to replay its kill schedule.
SEED_VARIABLE = "LAKEHOUSE_FAULT_SEED"
#: The fast path's real-time batches here: the shortest checkpoint interval, so that the kills visit
#: batch ends often.
BATCH_S = 5
#: The nemesis, in order. The first kill of run falls 3 to 15 s after its start, while its processes
#: start; the others within 2.5 batches after its fast path's query started (0 to 12.5 s): before,
#: around and after committed batches, which a restart resumes from.
NEMESIS = ("run while it starts", "broker", "run", "alertmanager", "run")
KILL_WITHIN_S = 2.5 * BATCH_S
#: Sessions of a few seconds (`Traffic`'s 300 users click every 3 s or so), written once the medallion's
#: watermark, 45 s behind the newest event, has passed their end: those of the traffic's first third.
#: A click reaches the medallion at most its lateness (10 s) and the broker's time down (up to 15 s: one
#: partition's records may be appended before the other's) behind the newest: within that watermark.
GAP_S, PURCHASE_GAP_S, USERS, WATERMARK_S, LATE_BY_S = 5, 2, 300, 45, 10
SESSIONS = ("sessions.enabled=true", f"sessions.gap={GAP_S} seconds",
            f"sessions.gap_by_event_type={{purchase: {PURCHASE_GAP_S} seconds}}")
#: What run's log says once the fast path's query runs.
FAST_PATH_STARTED = "[hot_pages] started"


def fault_seed() -> int:
    """The kill schedule's seed: $LAKEHOUSE_FAULT_SEED, else a new one."""
    chosen = os.environ.get(SEED_VARIABLE, "").strip()
    return int(chosen) if chosen else random.SystemRandom().randrange(2**32)


def options(config_overrides, *more: str) -> list[str]:
    return [f"--set={item}" for item in (
        *config_overrides, *SHIPPED_BOUNDS, f"hot_pages.threshold={THRESHOLD}", "operational.starting_offsets=earliest",
        "operational.status_interval_s=2", "analytical.status_interval_s=2", "analytical.triggers.medallion=1 second",
        "analytical.triggers.gold=2 seconds",
        # Under steady traffic a fast path that starts a batch as soon as one ends, with the medallion
        # under nice 19, leaves the medallion minutes to start on 2 cores: this suite is about
        # crashes, not isolation, so both share the cores here.
        "operational.trigger=1 second", "analytical.niceness=0",
        # The fast path as shipped, in real-time mode (its own runtime, a child of run), with batches
        # short enough that kills fall before, inside and after committed batches.
        "operational.mode=real-time", f"operational.real_time.checkpoint_interval={BATCH_S} seconds",
        # The sessions too, short enough that those of the run's first minute close before it ends.
        *SESSIONS, f"analytical.watermark={WATERMARK_S} seconds", *more)]


# -- processes -------------------------------------------------------------------------------


def start_run(opts: list[str], log: Path) -> subprocess.Popen:
    with open(log, "w") as stderr:
        return subprocess.Popen([LAKEHOUSE, "run", *opts], stdout=subprocess.DEVNULL, stderr=stderr)


# -- checks ----------------------------------------------------------------------------------


def alert_records_per_window(config) -> str:
    """Records per alertId on the alerts topic (update mode re-emits a rising count; the sink is
    at-least-once), as mean and max."""
    per_alert = Counter(record["alertId"] for record in alert_records(config))
    return f"mean {sum(per_alert.values()) / max(len(per_alert), 1):.1f}, max {max(per_alert.values(), default=0)}"


def assert_the_medallion_equals_the_truth(spark, config, truth: Truth) -> dict:
    root = config.storage.root
    bronze = [(r.partition, r.offset, None if r.value is None else bytes(r.value))
              for r in BRONZE_CLICKS.at(root).read(spark).where(f"topic = '{config.kafka.topics.clicks}'")
              .select("partition", "offset", "value").collect()]
    assert len(bronze) == len(set((p, o) for p, o, _ in bronze)), "a record twice in bronze"
    assert {(p, o): v for p, o, v in bronze} == truth.records, "bronze is not the topic, record for record"

    silver = SILVER_CLICKS.at(root).read(spark).select("eventId", "pageId", "eventTime").collect()
    assert len(silver) == len({row.eventId for row in silver}), "an event twice in silver"
    assert {row.eventId for row in silver} == set(truth.events), "silver is not the distinct valid events"

    quarantine = {(r.partition, r.offset): r.reason
                  for r in SILVER_QUARANTINE.at(root).read(spark).select("partition", "offset", "reason").collect()}
    assert quarantine == truth.invalid, "the quarantine is not the invalid records with their reasons"

    gold = {(r.pageId, int(r.windowStart.timestamp()) * 1_000_000): r.clickCount
            for r in GOLD_PAGE_CLICKS_5S.at(root).read(spark).collect()}
    assert gold == truth.windows, "gold is not the recount of the distinct valid events"
    return {"bronze": len(bronze), "silver": len(silver), "quarantine": len(quarantine), "gold_windows": len(gold),
            **assert_the_sessions_equal_the_truth(spark, config, truth)}


def assert_the_sessions_equal_the_truth(spark, config, truth: Truth) -> dict:
    """gold/user_sessions and gold/page_conversion: every field of the sessions that ended at or before the
    watermark the sessions' query last ran under, by tests/sessions_oracle.py. That watermark trails the
    newest event by the medallion's watermark, or by more when the query stopped before the batch that
    applies the newest one (a restart runs that batch only once new events come)."""
    root, events = config.storage.root, truth.session_events()
    applied = read_checkpoint_log(spark, config.checkpoint(USER_SESSIONS_STREAM.name)).last_committed.watermark_ms
    watermark = naive_utc(applied * 1000)
    assert watermark <= truth.newest_event_time() - timedelta(seconds=WATERMARK_S), "a watermark ahead of the events"
    gaps = (GAP_S, {"purchase": PURCHASE_GAP_S})
    every = sessions(events, *gaps)
    closed = [(session, end) for session, end in every if end <= watermark]
    written = [tuple(row) for row in USER_SESSIONS.at(root).read(spark).collect()]
    rows = set(written)
    assert len(written) == len(rows), "a session written twice"
    expected = {row for row in sessions_of(events, *gaps, engaged_after_s=10, engaged_page_views=2) if row[2] <= watermark}
    assert rows == expected, (f"sessions: {len(rows - expected)} written that the oracle has not, "
                              f"{len(expected - rows)} of the oracle's missing: {sorted(rows ^ expected)[:6]}")
    conversion = {(row.pageId, row.hourStart, row.viewedWhileHot): (row.sessions, row.convertedSessions)
                  for row in PAGE_CONVERSION.at(root).read(spark).collect()}
    assert conversion == page_conversion_of(closed, hot_windows(events, THRESHOLD)), "page conversion"
    assert rows, "no session closed: the test would hold nothing"
    return {"sessions": len(rows), "converted_sessions": sum(row[11] for row in rows),
            "sessions_open_at_the_end": len(every) - len(closed)}


# -- the tests -------------------------------------------------------------------------------


@pytest.mark.timeout(900)
@pytest.mark.parametrize("storage", ["local", "object store"])
def test_kill_9_of_run_and_of_the_broker_under_traffic_lose_nothing_and_miss_no_alert(
        spark, config, config_overrides, broker_overrides, tmp_path, storage, request):
    """The nemesis, at random moments under steady traffic: SIGKILL of `lakehouse run` (started again
    at once), SIGKILL of the broker (started again within 20 s), SIGKILL of run twice more. Then the
    traffic stops, the last run stops cleanly, and a backfill brings the medallion up to date. Once
    with tables and checkpoints in a local folder, once on the run's S3-compatible store.

    Its time: four starts of `run` (two JVMs each), the kills spread over each run's batches (up to 2.5
    batches after its fast path starts), the broker down up to 15 s, Alertmanager down up to 8 s, then two
    batch ends after the fast path caught up: the moments a crash can fall in take minutes to visit."""
    if storage == "object store":
        on_s3 = [*request.getfixturevalue("object_store"), f"storage.root={request.getfixturevalue('s3_root')}"]
        config, config_overrides = with_overrides(config, on_s3), [*config_overrides, *on_s3]
    seed = fault_seed()
    print(f"\nkill schedule seed {seed} ({SEED_VARIABLE}={seed} replays it)", flush=True)
    opts = options(config_overrides)
    settings = make_config(*(item.removeprefix("--set=") for item in opts))
    real_time = settings.operational.mode == "real-time"
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    manager = embedded_alertmanager(tmp_path / "alertmanager")
    manager.start(die_with_caller=True)
    opts += [f"--set=alerting.alertmanager_url={manager.url}", "--set=alerting.retry_max_delay=2 seconds",
             "--set=alerting.repost_interval=5 seconds"]  # a post Alertmanager's restart lost comes again soon
    broker = EmbeddedBroker(make_config(*broker_overrides), log=lambda message: None)
    traffic = Traffic(config.kafka, config.kafka.topics.clicks, users=USERS, late_by_s=LATE_BY_S)
    rng = random.Random(seed)
    ended_within: list[float] = []
    moments: list[str] = []
    broker_down_s = 0.0
    log = tmp_path / "run-0.log"
    run = start_run(opts, log)
    try:
        traffic.start()
        for step, nemesis in enumerate(NEMESIS, start=1):
            if nemesis == "run while it starts":
                delay, since = rng.uniform(3, 15), "its start"
            else:  # mid-batch, mid-commit, during the medallion's start: any moment of a running fast path
                wait_for(lambda: FAST_PATH_STARTED in log.read_text() or run.poll() is not None, 180,
                         f"the fast path of {log.name} to start", every_s=0.2)
                delay, since = rng.uniform(0, KILL_WITHIN_S), "its fast path started"
            moments.append(f"{nemesis.split()[0]} {delay:.1f} s after {since}")
            time.sleep(delay)
            assert run.poll() is None, f"run ended before the nemesis ({nemesis}):\n{log.read_text()[-3000:]}"
            if nemesis == "broker":
                os.kill(broker.status().pid, signal.SIGKILL)
                broker_down_s = rng.uniform(5, 15)
                time.sleep(broker_down_s)
                broker.start(die_with_caller=True)
                continue
            if nemesis == "alertmanager":  # restarted as its service manager would: its alerts are lost
                manager.stop(quiet=True)
                time.sleep(rng.uniform(2, 8))
                manager.start(die_with_caller=True)
                continue
            doomed = family(run.pid)
            os.kill(run.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            run.wait()
            log = tmp_path / f"run-{step}.log"
            run = start_run(opts, log)  # at once: it must be accepted
            wait_for(lambda: not alive(doomed), 30, "every process of the killed run to end", every_s=0.05)
            ended_within.append(round(time.monotonic() - killed_at, 2))
            assert run.poll() is None, f"the restart was refused:\n{log.read_text()[-3000:]}"
        traffic.stop()
        truth = Truth.of(read_to_end(config.kafka, config.kafka.topics.clicks))
        # The traffic has stopped: every window's count is final once the fast path has caught up.
        assert_alerts_as_the_oracle_says(config.kafka, config.kafka.topics.alerts, truth, THRESHOLD, real_time,
                                         timeout_s=180)
        # The alerts may all come from a killed run whose batch was never committed: the last run must
        # read the topic to its end itself, and commit two batches after that (the first moves the
        # watermark past the last window, the second commits with it), or reconcile finds every window
        # still open: on an object-store root a stopped path may be running elsewhere, so only the
        # committed watermark closes windows there.
        wait_for(lambda: fast_path_caught_up(settings) or run.poll() is not None, 180,
                 f"the fast path of {log.name} to read every click", every_s=0.5)
        caught_up_at: list[float] = []  # the first count /metrics gives: a failed scrape is no baseline

        def two_more_batch_ends() -> bool:
            ended = fast_path_batches(settings)
            if ended is None:
                return False
            caught_up_at[:] = caught_up_at or [ended]
            return ended >= caught_up_at[0] + 2

        wait_for(lambda: two_more_batch_ends() or run.poll() is not None, 180,
                 f"two batch ends of {log.name}'s fast path after it caught up", every_s=0.5)
        # Every window the topic alerts reached people once, through the kills of run (its bridge with it)
        # and Alertmanager's restart: the same window's records are one alert, notified once.
        alerted = {(record["pageId"], record["windowStart"]) for record in alert_records(config)}
        wait_for(lambda: set(manager.notified_windows()) == alerted, 120, "every alerted window notified", every_s=0.5)
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=180) == 0
        assert set(manager.notified_windows().values()) == {1}, {window: n for window, n in manager.notified_windows().items() if n > 1}
    finally:
        traffic.stopping.set()
        run.kill()
        manager.stop(quiet=True)
    assert_no_errors(log.read_text())
    assert max(ended_within) <= 5, f"processes of a killed run outlived it: {ended_within}"

    # One click of a user of its own, past every session's end and the watermark: the backfill's batch that
    # reads it applies a watermark that closes the traffic's sessions. A query applies a newer watermark only
    # in a batch after one with events, and the last run may have stopped before that batch (CONTRACT.md).
    closing = max(at for _, at in truth.events.values()) + (WATERMARK_S + 2 * GAP_S) * 1_000_000
    send(settings, click("/closing", closing, event_id="closing", userId="closing-user"))
    truth = Truth.of(read_to_end(config.kafka, config.kafka.topics.clicks))
    pipeline.backfill(spark, settings, report=lambda line: None)

    figures = assert_the_medallion_equals_the_truth(spark, config, truth)
    alerts = assert_alerts_as_the_oracle_says(config.kafka, config.kafka.topics.alerts, truth, THRESHOLD, real_time)
    reconciled = lakehouse_here("reconcile", "--format", "json", *opts)
    assert reconciled.returncode in (0, 1), reconciled.stderr[-3000:]
    verdict = json.loads(reconciled.stdout)
    summary = {key: verdict[key] for key in ("windowsCompared", "matched", "pending", "byCause", "unexplained",
                                             "outsideHistory", "closedUpTo")}
    assert verdict["unexplained"] == 0, f"{summary}; mismatches: {verdict['mismatches'][:10]}"
    assert verdict["windowsCompared"] > 0, \
        f"the reconciliation compared no window: {summary}; pending: {verdict['pendingWindows'][:3]}"
    print(f"\nnemesis (seed {seed}): {len(ended_within)} kills of run, every process gone within {max(ended_within):.2f} s "
          f"(each: {', '.join(f'{s:.2f}' for s in ended_within)}); broker killed and down {broker_down_s:.1f} s; "
          f"kills at: {'; '.join(moments)}; "
          f"records sent {traffic.sent:,} (failed sends {traffic.failed}); {figures}; distinct events "
          f"{len(truth.events):,}, invalid {len(truth.invalid):,}; hot windows {len(truth.hot(THRESHOLD))}, "
          f"alerted windows {len(alerts)} (each the oracle's exact count), alert records per window "
          f"{alert_records_per_window(config)}; reconcile {summary}")


def fast_path_batches(settings) -> float | None:
    """How many batches the running fast path has ended (its /metrics), None when it does not say. Not
    its progress timestamp: in real-time mode that follows the running batch's polls."""
    return next((row.get("batchesEnded") for row in running_queries(settings.metrics, ["operational"])
                 if row["query"] == hot_pages.STREAM.name), None)


def fast_path_caught_up(settings) -> bool:
    """Whether the running fast path has read every click on the topic (its lag on /metrics is 0)."""
    return any(row["query"] == hot_pages.STREAM.name and row.get("up") and row.get("lag") == 0
               for row in running_queries(settings.metrics, ["operational"]))


def test_ten_thousand_hostile_records_neither_silence_nor_fool_the_fast_path(spark, config, config_overrides):
    settings = make_config(*config_overrides, *SHIPPED_BOUNDS, f"hot_pages.threshold={THRESHOLD}",
                           "operational.starting_offsets=earliest")
    ensure_topics(settings.kafka, [settings.kafka.topics.clicks, settings.kafka.topics.alerts])
    from shared.kafka import producer_for

    rng = random.Random(7)
    producer = producer_for(settings.kafka)
    for index in range(10_000):  # aimed at the hot page, and at a page of their own
        producer.send(settings.kafka.topics.clicks, key=b"hostile",
                      value=hostile(rng, HOT_PAGE if index % 2 else "/hostile"))
    producer.flush()
    query = hot_pages.start(spark, settings)
    try:
        query.processAllAvailable()
        watermark = (progress_dict(query.lastProgress).get("eventTime") or {}).get("watermark")
        # Then a window turns hot in real time: 80 clicks on a page within one second.
        target = now_micros()
        for _ in range(80):
            producer.send(settings.kafka.topics.clicks, value=click("/target", target))
        producer.flush()
        query.processAllAvailable()
    finally:
        query.stop()
        producer.close()

    window = target - target % 5_000_000
    truth = Truth.of(read_to_end(settings.kafka, settings.kafka.topics.clicks))
    alerts = assert_alerts_as_the_oracle_says(settings.kafka, settings.kafka.topics.alerts, truth, THRESHOLD,
                                              settings.operational.mode == "real-time")
    assert alerts.get(("/target", window)) == 80, alerts
    assert watermark is None or watermark < "2100", f"a hostile record moved the watermark to {watermark}"
    print(f"\nhostile: 10,000 sent, {len(truth.invalid):,} invalid by the oracle, {len(truth.events):,} valid; "
          f"watermark after them {watermark}; alerts {alerts}")
