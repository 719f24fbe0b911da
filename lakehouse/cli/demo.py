"""`lakehouse demo`: the whole story, end to end, on the embedded default.

Starts the embedded broker (unless one runs) and runs both paths side by side (`lakehouse run`) on
its own topics and tables (conf/demo.yaml) while `lakehouse generate` sends shop traffic with
three hot pages (and a little late, duplicate and malformed data), with an embedded Alertmanager
(when installed) that run's bridge posts the hot pages to. Then a backfill catches the medallion up, and
the demo shows the alerts with their time-to-alert, a trend query, the expectations, the reconciliation
and the notifications that reached people. It stops what it started and says how to go on with what it made.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from pathlib import Path

from lakehouse.path_processes import child_options
from shared import PROJECT_ROOT
from shared.config import Config
from shared.config_loading import with_overrides
from shared.config_layers import as_overrides, read_yaml
from shared.errors import LakehouseError
from shared.progress import ENV as PROGRESS_MODE
from shared.spark_internals import jvm_pid
from shared.storage import local_folder

#: The demo's topics and tables, apart from a user's own; any command reads them with this file.
DEMO_PROFILE = PROJECT_ROOT / "conf" / "demo.yaml"


def _say(message: str) -> None:
    print(message, flush=True)


#: What the processes and steps say that the console shows besides the demo's story.
WORTH_SHOWING = re.compile(r"\b(WARN|WARNING|ERROR|Traceback)\b|error:|\] failed \(")


class DemoLog:
    """The console tells the demo's story; everything its processes and steps say (query starts,
    status rows, each layer's progress) goes to the demo's log, and only warnings and errors also
    to the console."""

    def __init__(self, path: Path):
        self.path = path
        self._file = None

    def note(self, message: str) -> None:
        if self._file is None or not self.path.exists():  # the demo empties its folder as it starts
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")
        self._file.write(message + "\n")
        self._file.flush()
        for line in message.splitlines():
            if WORTH_SHOWING.search(line):
                print(f"   {line}", file=sys.stderr, flush=True)


def _on_the_way(seconds: float, config: Config, recorder, alerted_windows: int) -> str:
    """A line of the run's story: what the topic holds, what the fast path alerted, where the medallion is."""
    from lakehouse.catalog import QUERIES_BY_PATH
    from shared.kafka import topic_offsets

    clicks = sum(latest - earliest for earliest, latest in topic_offsets(config.kafka, config.kafka.topics.clicks).values())
    batches = ", ".join(f"{stream.name} {recorder.latest[stream.name].batchId}"
                        for stream in QUERIES_BY_PATH["analytical"]
                        if stream.name in recorder.latest)
    return f"   {seconds:3.0f} s: {clicks:>9,} clicks on the topic, {alerted_windows:>3} windows alerted; medallion batches: {batches}"


def _fresh_topics(config: Config) -> None:
    """Delete the demo topics of an earlier run and create them again, with broker timestamps."""
    from shared.kafka import admin_client, ensure_topics

    topics = [config.kafka.topics.clicks, config.kafka.topics.alerts]
    with admin_client(config.kafka) as admin:
        old = [name for name in topics if name in admin.list_topics()]
        if old:
            admin.delete_topics(old)
            deadline = time.monotonic() + 30
            while set(old) & set(admin.list_topics()) and time.monotonic() < deadline:
                time.sleep(0.2)  # deletion is asynchronous: recreate only once they are gone
    ensure_topics(config.kafka, topics, timestamp_type="LogAppendTime")


def run_demo(config: Config, seconds: float, rate: float, verbose: bool, overrides: list[str]) -> int:
    """The demo on `config` with conf/demo.yaml layered on it, the command's own `overrides` (--set)
    last, which its child processes are given whole (common.child_options)."""
    from lakehouse.both_paths import BothPaths
    from lakehouse.catalog import QUERIES_BY_PATH
    from lakehouse.services.broker import EmbeddedBroker
    from shared.checkpoint_locks import empty_keeping_locks, exclusive
    from shared.spark import spark_session

    from lakehouse.services.alertmanager import ALERTMANAGER, EmbeddedAlertmanager

    started_at = time.monotonic()
    demo_settings = [*as_overrides(read_yaml(DEMO_PROFILE)), *overrides]  # what the command says wins
    config = with_overrides(config, demo_settings)
    manager = EmbeddedAlertmanager(config, log=lambda line: None) if ALERTMANAGER.found() else None
    if manager is not None and config.alerting.alertmanager_url is None:  # run's bridge posts to it
        config = with_overrides(config, [f"alerting.alertmanager_url={manager.url}"])
    log = DemoLog((local_folder(config.storage.root) or PROJECT_ROOT / ".run") / "demo.log")
    paths = BothPaths(config, child_options(config, verbose), relay=log.note)
    if not sys.stderr.isatty():  # in a log the story lines are the progress; a terminal keeps its bars
        os.environ.setdefault(PROGRESS_MODE, "off")
    broker = EmbeddedBroker(config, log=log.note)
    was_running = broker.status().running
    manager_was_running = manager is not None and manager.status().running
    # refuses a second demo on the same folder (a fast path in a child process holds its own lock)
    held = [stream.name for stream in QUERIES_BY_PATH["operational"]] if paths.fast_path_here else ["demo"]
    with exclusive(config.path(), held, report=log.note) as locks:
        empty_keeping_locks(config.path())
        try:
            _say("\n== 1. the embedded Kafka broker, fresh demo topics (broker timestamps: LogAppendTime)")
            _say(f"   {broker.start(die_with_caller=True)}")
            _fresh_topics(config)
            _say(f"   Alertmanager {manager.start(die_with_caller=True)}, with the shipped routes (conf/alertmanager.yml) "
                 "and a webhook receiver" if manager is not None else
                 f"   no Alertmanager ({ALERTMANAGER.why}): the hot pages reach the topic only")

            _say(f"\n== 2. `lakehouse run`: the fast path ({paths.mode.name} mode), and the medallion as a "
                 f"low-priority process, while "
                 f"{seconds:g} s of clicks arrive at {rate:,.0f}/s (3 hot pages over {config.hot_pages.threshold} "
                 "per window; 1% late, 1% duplicate, 0.5% malformed)")
            spark = spark_session(config)
            locks.record_jvm(jvm_pid(spark))
            sent = _both_paths_under_traffic(spark, paths, seconds, rate, log.note)
            _say(f"   sent {sent['sent']:,} records at {sent['achieved_rate']:,.0f}/s")
            docs = _questions(spark, config, log.note)
            if manager is not None:
                _notifications(manager, config, since=started_at)
        finally:
            if not was_running or (manager is not None and not manager_was_running):
                _say("\n== 9. clean stop")
            if manager is not None and not manager_was_running:
                manager.stop(quiet=True)
                _say("   Alertmanager is stopped")
            if not was_running:
                broker.stop()
                _say("   the broker is stopped")
    _say_what_stays(config, docs, log, time.monotonic() - started_at)
    return 0


def _both_paths_under_traffic(spark, paths, seconds: float, rate: float, note) -> dict:
    """Step 2: both paths as `lakehouse run` runs them (lakehouse.both_paths), their progress recorded
    here; once every query runs, the traffic, until it has all been sent and 10 s more. What the
    generator says it sent."""
    from lakehouse.catalog import QUERIES_BY_PATH, queries_by_path
    from lakehouse.monitoring.stream_progress import recording, table_location
    from lakehouse.path_processes import TrafficProcess
    from shared.alerts_topic import latest_alerts
    from shared.query_events import watching

    config = paths.config
    options = ["--seconds", str(seconds), "--rate", str(rate), "--hot-pages", "3", "--late-fraction", "0.01",
               "--duplicate-fraction", "0.01", "--malformed-fraction", "0.005", *VISITS]
    traffic: list[TrafficProcess] = []
    traffic_started: list[float] = []
    finished_at: list[float] = []
    fast_path_started = threading.Event()

    def relay_fast_path(line: str) -> None:
        if "] started (query id" in line:
            fast_path_started.set()
        note(line)

    with recording(spark, table_location(config)) as recorder, watching(spark, recorder):
        next_view = time.monotonic()

        def all_up() -> bool:
            up = {name for name in recorder.latest} | ({stream.name for stream in QUERIES_BY_PATH["operational"]}
                                                        if fast_path_started.is_set() else set())
            return all(stream.name in up for streams in queries_by_path(config).values() for stream in streams)

        def status() -> None:
            nonlocal next_view
            if not traffic and all_up():
                _say("   every query runs: the traffic starts")
                traffic_started.append(time.monotonic())
                traffic.append(TrafficProcess(paths.child_args, *options))
            if traffic and not finished_at and traffic[0].ended:
                finished_at.append(time.monotonic())
            if time.monotonic() >= next_view:
                recorder.flush()
                note(recorder.console_view())
                if traffic_started and not finished_at:
                    alerted = len(latest_alerts(config.kafka, config.kafka.topics.alerts).latest)
                    _say(_on_the_way(time.monotonic() - traffic_started[0], config, recorder, alerted))
                next_view = time.monotonic() + 10

        with paths.started(on_progress=recorder.show, on_fast_path_progress=recorder.record,
                           fast_path_relay=relay_fast_path):
            paths.run(spark, seconds=seconds + 180, report=note, on_status=status,
                      until=lambda: bool(finished_at) and time.monotonic() > finished_at[0] + 10,
                      supervision=config.operational.model_copy(update={"status_interval_s": 1}))
    if not traffic:
        raise LakehouseError("the demo's queries did not all start within the time allowed")
    return traffic[0].summary()


#: The demo's visitors: a click every 2 s, a tenth of them add to cart, a tenth of the clicks after that buy,
#: twice as often in a visit that clicked a hot page; 5% of clicks anonymous.
VISITS = ("--think-time", "2", "--visit-clicks", "6", "--cart-probability", "0.1", "--purchase-probability", "0.1",
          "--hot-uplift", "1.0", "--anonymous-fraction", "0.05")


def _questions(spark, config: Config, note) -> str:
    """Steps 3 to 7: the backfill, the alerts and their time-to-alert, a trend, the expectations and the
    reconciliation, each as its command does it. Where the Data Docs are."""
    from analytical import gold_page_clicks_5s, pipeline, trends
    from analytical.checks import check
    from analytical.reconciliation import reconcile
    from lakehouse.bench.time_to_alert import time_to_alert
    from shared.alerts_topic import latest_alerts

    _say("\n== 3. a backfill catches the medallion up (`lakehouse analytical --available-now`)")
    for run in pipeline.backfill(spark, config, note):
        _say(f"   {run.name:24s} {run.rows:>9,} rows in {run.seconds:5.1f} s")

    _say("\n== 4. the alerts, one per window (highest count), and their time-to-alert")
    book = latest_alerts(config.kafka, config.kafka.topics.alerts)
    for alert in book.sorted()[:6]:
        _say(f"   {alert.window_start}  {alert.page_id:22s} {alert.click_count:>6,} clicks")
    _say(f"   ... {len(book.latest)} alerted windows, {book.records} alert records")
    figures = time_to_alert(spark, config)
    _say(f"   time-to-alert (Kafka append of the crossing click -> Kafka append of the alert): "
         f"p50 {figures['p50_ms']} ms, p95 {figures['p95_ms']} ms, p99 {figures['p99_ms']} ms, "
         f"max {figures['max_ms']} ms over {figures['alerts']} windows")

    _say("\n== 5. a trend question on gold (`lakehouse query top-pages --limit 5`)")
    windows = gold_page_clicks_5s.TABLE.at(config.storage.root).read(spark)
    rows, _ = trends.answer(trends.on_spark(windows, "top-pages", limit=5))
    for row in rows:
        _say("   " + "  ".join(f"{key} {value}" for key, value in row.items()))

    _conversion(spark, config)

    _say("\n== 6. the expectations (`lakehouse check`)")
    results, docs, skipped = check(spark, config, note)
    failed = [row for row in results if not row["success"]]
    _say(f"   {len(results) - len(failed)} of {len(results)} expectations passed"
         + (f"; failed: {', '.join(row['expectation'] for row in failed)}" if failed else "")
         + (f"; not checked, no commit yet: {', '.join(skipped)}" if skipped else ""))

    _say("\n== 7. the reconciliation of alerts against gold (`lakehouse reconcile`)")
    verdict = reconcile(spark, config)
    _say(f"   windows compared {verdict['windowsCompared']}, matched {verdict['matched']}, pending "
         f"{verdict['pending']}, by cause {verdict['byCause']}, unexplained {verdict['unexplained']}: "
         + ("consistent" if verdict["consistent"] else "NOT consistent"))
    return docs


def _notifications(manager, config: Config, since: float) -> None:
    """Step 8: what reached people: the notifications Alertmanager sent the demo's receiver, one per hot
    window (`lakehouse alertmanager notifications`), against the windows the topic alerted."""
    from datetime import datetime, timedelta, timezone

    from operational.alertmanager_alerts import HOT_PAGE
    from shared.alerts_topic import latest_alerts

    _say("\n== 8. the hot pages reach people through Alertmanager (`lakehouse alertmanager notifications`)")
    began = datetime.now(timezone.utc) - timedelta(seconds=time.monotonic() - since)
    alerted = {(alert.page_id, alert.window_start) for alert in latest_alerts(config.kafka, config.kafka.topics.alerts).latest.values()}
    deadline = time.monotonic() + 30  # the bridge posts within milliseconds; Alertmanager waits group_wait (1 s)
    while not set(windows := manager.notified_windows(since=began)) >= alerted and time.monotonic() < deadline:
        time.sleep(0.5)
    others = sorted({alert["labels"].get("alertname") for notification in manager.notifications(since=began)
                     for alert in notification["body"].get("alerts", [])} - {HOT_PAGE})
    _say(f"   {windows.total()} notifications for {len(windows)} of the {len(alerted)} alerted windows (one per window: "
         f"the fast path's records of a window are one alert); anything else that fired: {', '.join(others) or 'nothing'}")


def _conversion(spark, config: Config) -> None:
    """Step 5, continued: did the hot pages sell more? The sessions written so far (`lakehouse query sessions`),
    the conversion of the pages viewed while hot against all views while not (`lakehouse query conversion`)."""
    from pyspark.sql import functions as F

    from analytical import gold_page_conversion, gold_user_sessions, trends

    if not config.sessions.enabled:
        return
    _say("\n   sessions and conversion (`lakehouse query sessions`, `lakehouse query conversion --limit 3`): "
         "a session is written once the watermark has passed its end")
    sessions, _ = trends.answer(trends.on_spark(gold_user_sessions.TABLE.at(config.storage.root).read(spark), "sessions"))
    for row in sessions:
        _say(f"   {row['sessions']:,} sessions, {row['engagedShare']:.0%} engaged, {row['conversionRate']:.1%} converted")
    cells = gold_page_conversion.TABLE.at(config.storage.root).read(spark)
    for row in trends.answer(trends.on_spark(cells, "conversion", limit=3))[0]:
        rate = f"{row['hotRate']:.1%}" if row["hotRate"] is not None else "-"
        _say(f"   {row['pageId']:22s} viewed while hot by {row['hotSessions']:>6,} sessions, {rate} bought after")
    totals = cells.groupBy("viewedWhileHot").agg(F.sum("sessions").alias("viewed"),
                                                 F.sum("convertedSessions").alias("bought")).collect()
    for hot, viewed, bought in sorted(totals, reverse=True):
        _say(f"   every page {'while hot' if hot else 'while not'}: {viewed:,} session views, "
             f"{bought / viewed:.1%} bought after")


def _say_what_stays(config: Config, docs: str, log: DemoLog, took_s: float) -> None:
    profile = DEMO_PROFILE.relative_to(PROJECT_ROOT)
    _say(f"\ndemo done in {took_s:.0f} s. What it made stays for you to explore:")
    _say(f"   tables:     {config.storage.root} (bronze, silver, gold, ops/stream_progress)")
    _say(f"   Data Docs:  {docs}")
    _say(f"   its log:    {log.path}")
    _say(f"   ask it:     lakehouse query hot-windows --config {profile}")
    _say(f"               lakehouse query conversion --config {profile}")
    _say(f"               lakehouse sql --config {profile} \"SELECT reason, count(*) FROM silver.quarantine GROUP BY reason\"")
    _say(f"   alerts:     lakehouse kafka start && lakehouse alerts --config {profile}   (the broker keeps its topics)")
    _say("   your own run, step by step: README.md, \"Your first run\"; the notebooks make their own "
         "topics and tables (notebooks/README.md)")
