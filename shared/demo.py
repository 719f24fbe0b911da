"""`lakehouse demo`: what the product does so far, end to end, on the embedded default.

Starts the embedded broker (unless one runs), runs the fast path on fresh demo topics while
`lakehouse generate` sends shop traffic with three hot pages (and a little late, duplicate and
malformed data), then shows the alerts with their time-to-alert, and stops what it started.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time

from shared.config import Config, with_overrides

DEMO_CLICKS = "demo-page-clicks"
DEMO_ALERTS = "demo-hot-pages"


def _say(message: str) -> None:
    print(message, flush=True)


def _note(message: str) -> None:
    print(f"   {message}", file=sys.stderr, flush=True)


def _fresh_topics(config: Config) -> None:
    """Delete the demo topics of an earlier run and create them again, with broker timestamps."""
    from shared.kafka import admin_client, ensure_topics

    topics = [DEMO_CLICKS, DEMO_ALERTS]
    with admin_client(config.kafka) as admin:
        old = [name for name in topics if name in admin.list_topics()]
        if old:
            admin.delete_topics(old)
            deadline = time.monotonic() + 30
            while set(old) & set(admin.list_topics()) and time.monotonic() < deadline:
                time.sleep(0.2)  # deletion is asynchronous: recreate only once they are gone
    ensure_topics(config.kafka, topics, timestamp_type="LogAppendTime")


def run_demo(config: Config, seconds: float, rate: float) -> int:
    from operational import hot_pages
    from operational.alerts_topic import latest_alerts
    from operational.time_to_alert import time_to_alert
    from shared.broker import EmbeddedBroker
    from shared.spark import spark_session
    from shared.streaming import ProgressSummary, RunningTotals, status_line

    started_at = time.monotonic()
    config = with_overrides(config, [f"kafka.topics.clicks={DEMO_CLICKS}", f"kafka.topics.alerts={DEMO_ALERTS}",
                                     f"storage.root={config.path('demo')}", "operational.starting_offsets=earliest"])
    shutil.rmtree(config.storage.root, ignore_errors=True)
    broker = EmbeddedBroker(config, log=_note)
    was_running = broker.status().running
    try:
        _say("\n== 1. the embedded Kafka broker, fresh demo topics (broker timestamps: LogAppendTime)")
        _say(f"   {broker.start()}")
        _fresh_topics(config)

        _say(f"\n== 2. the fast path, while {seconds:g} s of clicks arrive at {rate:,.0f}/s "
             f"(3 hot pages over {config.hot_pages.threshold} per window; 1% late, 1% duplicate, 0.5% malformed)")
        spark = spark_session(config)
        query = hot_pages.start(spark, config)
        while query.lastProgress is None:  # first (empty) micro-batch: state stores open, plan warm
            time.sleep(0.2)
        generator = subprocess.Popen(
            [sys.executable, "-m", "shared.cli", "generate", "--seconds", str(seconds), "--rate", str(rate),
             "--hot-pages", "3", "--late-fraction", "0.01", "--duplicate-fraction", "0.01",
             "--malformed-fraction", "0.005", "--topic", DEMO_CLICKS,
             f"--set=kafka.bootstrap_servers={config.kafka.bootstrap_servers}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        totals = RunningTotals()
        while generator.poll() is None:
            time.sleep(5)
            latest = totals.add(query.recentProgress)
            if latest:
                _say("   " + status_line(hot_pages.QUERY_NAME, latest, totals))
        sent = json.loads(generator.stdout.read())
        query.processAllAvailable()
        totals.add(query.recentProgress)
        query.stop()
        _say(f"   sent {sent['sent']:,} records at {sent['achieved_rate']:,.0f}/s; the fast path read "
             f"{totals.rows:,}: {totals.invalid:,} invalid, {totals.dropped_by_watermark:,} too late")

        _say("\n== 3. the alerts on the topic, one per window (highest count)")
        book = latest_alerts(config.kafka, DEMO_ALERTS)
        for alert in book.sorted():
            _say(f"   {alert.window_start}  {alert.page_id:22s} {alert.click_count:>6,} clicks  id {alert.alert_id}")
        _say(f"   {len(book.latest)} alerted windows, {book.records} alert records")

        _say("\n== 4. time-to-alert: Kafka append of the click that crossed the threshold -> "
             "Kafka append of the first alert")
        figures = time_to_alert(spark, config)
        _say(f"   p50 {figures['p50_ms']} ms, p95 {figures['p95_ms']} ms, p99 {figures['p99_ms']} ms, "
             f"max {figures['max_ms']} ms over {figures['alerts']} windows "
             f"({figures['missed_windows']} hot windows without an alert)")
    finally:
        if not was_running:
            _say("\n== 5. clean stop")
            broker.stop()
    _say(f"\ndemo done in {time.monotonic() - started_at:.0f} s. Next: `make test`; "
         "`.venv/bin/lakehouse --help` lists the commands.")
    return 0
