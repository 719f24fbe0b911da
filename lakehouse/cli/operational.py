"""`lakehouse operational` and `lakehouse alerts`: the hot-page stream, and what it raised."""

from __future__ import annotations

import argparse
import csv
import json
import sys
from contextlib import ExitStack
from typing import Any

from lakehouse.cli.common import monitored, output_options, passthrough, positive, print_rows, say
from shared.config import Config
from shared.progress import ChangedRows

ALERT_COLUMNS = ["windowStart", "pageId", "clickCount", "threshold", "alertId"]


def cmd_operational(config: Config, args: argparse.Namespace) -> int:
    from operational import hot_pages
    from shared.kafka import ensure_topics, wait_until_reachable
    from lakehouse.master_check import require_fit_master
    from shared.object_store import require_reachable
    from lakehouse.monitoring.running_queries import activity_line, running_queries
    from operational.mode import fast_path_mode
    from shared.streaming import supervise

    # before anything starts; a parent that records the progress (--progress-json) has said its note
    require_fit_master(config, note=None if args.progress_json else say)
    require_reachable(config.storage.root, config.storage.s3)
    if args.wait_for_broker:
        wait_until_reachable(config.kafka, args.wait_for_broker, say)
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    mode = fast_path_mode(config)
    if not mode.runs_here():
        return _operational_in_its_runtime(config, args)
    name = hot_pages.STREAM.name
    echo = (lambda progress: print(progress, flush=True)) if args.progress_json else None
    with monitored(config, "operational", echo, application_settings=mode.session_settings) as (spark, recorder):
        say(f"hot pages ({mode.name}): {config.kafka.topics.clicks} -> {config.kafka.topics.alerts}, "
            f"more than {config.hot_pages.threshold} clicks per {config.hot_pages.window.total_seconds():g} s window; "
            f"checkpoint {config.checkpoint(name)}")
        changed_rows = ChangedRows(say)

        def status() -> None:
            recorder.flush()
            if mode.real_time:  # its batch reports come once per checkpoint interval: say what it does meanwhile
                for row in running_queries(config.metrics, ["operational"]):
                    changed_rows("  " + activity_line(row))

        totals = supervise(hot_pages.starters(spark, config), config.operational,
                           seconds=args.seconds, report=say, on_status=status,
                           status_lines=not args.progress_json,
                           real_time_batch=mode.real_time_batch)
    done = totals[name]
    say(f"[{name}] processed {done.rows:,} records in this run: {done.invalid:,} invalid, "
            f"{done.dropped_by_watermark:,} dropped as too late")
    return 0


def _operational_in_its_runtime(config: Config, args: argparse.Namespace) -> int:
    """Real-time mode typed in the medallion's runtime: the query runs in a child process in the fast
    path's runtime (Spark 4.3), until a signal, `--seconds` or its end; this process records its
    progress to ops/stream_progress (Delta) with a Spark of its own, and prints the console view."""
    from lakehouse.monitoring.stream_progress import recording, table_location
    from lakehouse.path_processes import FastPathProcess, stopped_at_the_end
    from shared.processes import stops_deferred
    from shared.spark import spark_session
    from shared.stopping import await_stop

    with ExitStack() as started:
        with stops_deferred():  # as in `monitored`
            recorder = started.enter_context(recording(spark_session(config, in_driver=True), table_location(config)))
            child = FastPathProcess(passthrough(config, args), config.operational.real_time.checkpoint_interval,
                                    relay=say, on_progress=recorder.record)
            started.enter_context(stopped_at_the_end([child]))
        changed_rows = ChangedRows(say)

        def status() -> None:
            recorder.flush()
            changed_rows(recorder.console_view())

        await_stop(config.operational, seconds=args.seconds, report=say, until=lambda: child.ended, on_status=status)
    return 0


def cmd_alerts(config: Config, args: argparse.Namespace) -> int:
    from shared.alerts_topic import latest_alerts, read_alerts

    topic = config.kafka.topics.alerts
    if args.follow:  # until Ctrl-C, which is how following ends: exit 0
        rows = csv.DictWriter(sys.stdout, fieldnames=ALERT_COLUMNS, extrasaction="ignore", lineterminator="\n")
        if args.format == "csv":
            rows.writeheader()
        try:
            for _, changed in read_alerts(config.kafka, topic, follow=True):
                if changed is None:
                    continue
                if args.format == "csv":
                    rows.writerow(changed.as_dict())
                else:
                    print(json.dumps(changed.as_dict()) if args.format == "json" else
                          f"{changed.window_start}  {changed.page_id}  {changed.click_count}")
                sys.stdout.flush()
        except KeyboardInterrupt:
            pass
        return 0
    book = latest_alerts(config.kafka, topic)
    alerts = [alert.as_dict() for alert in book.sorted()]
    print_rows(alerts, ALERT_COLUMNS, args.format)
    say(f"{len(alerts)} alerted windows from {book.records} records on {topic}"
            + (f"; {len(book.invalid)} records are not valid alerts" if book.invalid else ""))
    return 0



def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    operational = commands.add_parser(
        "operational", parents=[common], help="the hot-page stream: clicks -> alerts on Kafka",
        description="Run the fast path until stopped (SIGINT/SIGTERM stop it cleanly, exit 0) or for --seconds. "
        "A restart resumes from its checkpoint. Prints a status line every operational.status_interval_s.")
    operational.add_argument("--seconds", type=positive(float), help="stop after this long (default: run until stopped)")
    operational.add_argument("--progress-json", action="store_true",
                             help="print each progress report as a JSON line on stdout (for a parent that records it)")
    operational.add_argument("--wait-for-broker", type=positive(float), metavar="SECONDS",
                             help="wait up to this long for the broker at start instead of failing at once (what "
                             "`lakehouse run` asks of the fast path's process: the broker may restart meanwhile)")
    operational.set_defaults(handler=cmd_operational, runs_until_stopped=True)

    alerts = commands.add_parser(
        "alerts", parents=[common, output_options("one row per alert; with --follow, JSON lines or CSV rows")], help="the alerts on the topic, one per alertId (highest count)",
        description="Read the alerts topic from the beginning and print, per alertId, the record with the "
        "highest clickCount. Records that are not valid alerts are counted, not fatal.")
    alerts.add_argument("--follow", action="store_true", help="keep reading; print each new or raised alert")
    alerts.set_defaults(handler=cmd_alerts)
