"""`lakehouse analytical|run|status|rebuild|maintain`: the medallion, and both paths side by side."""

from __future__ import annotations

import argparse
import threading
from datetime import datetime, timezone
from typing import Any

from lakehouse.cli.common import monitored, output_options, passthrough, positive, print_rows, recording_children, say
from shared.config import Config
from shared.errors import LakehouseError
from shared.progress import ChangedRows


def cmd_analytical(config: Config, args: argparse.Namespace) -> int:
    from analytical import pipeline
    from shared.kafka import ensure_topics, wait_until_reachable
    from shared.object_store import require_reachable

    require_reachable(config.storage.root, config.storage.s3)  # before anything is written anywhere
    if args.wait_for_broker:
        wait_until_reachable(config.kafka, args.wait_for_broker, say)
    ensure_topics(config.kafka, [config.kafka.topics.clicks])
    echo = (lambda progress: print(progress, flush=True)) if args.progress_json else None
    # the fast path's reports relayed here must be recorded even when a stop came while this started
    stopped_while_starting = threading.Event() if args.record_progress_from_stdin else None
    with monitored(config, "analytical", echo, stopped_while_starting) as (spark, recorder):
        relayed = _record_relayed_progress(recorder) if args.record_progress_from_stdin else None
        say(f"medallion: {config.kafka.topics.clicks} -> bronze -> silver -> gold under {config.storage.root}")
        if not args.available_now:
            if stopped_while_starting is not None and stopped_while_starting.is_set():
                say("stop requested while starting: no stream started; recording the relayed progress to its end")
            else:
                pipeline.run_continuously(spark, config, args.seconds, say, on_status=recorder.flush,
                                          status_lines=not args.progress_json)
            if relayed is not None:  # the other process's last reports, before the last flush
                relayed.join(timeout=RELAYED_PROGRESS_WAIT_S)
            return 0
        runs = pipeline.backfill(spark, config, say)
    print_rows([run.as_dict() for run in runs],
                ["layer", "query", "rows", "seconds", "batches", "invalid", "dropped_by_watermark"], args.format)
    return 0


#: How long the medallion's process waits, once stopped, for the last progress reports relayed to it:
#: the fast path's stop lets its running batch end (at most a checkpoint interval, then its commit).
RELAYED_PROGRESS_WAIT_S = 180.0


def _record_relayed_progress(recorder: Any) -> threading.Thread:
    """Record each progress report read from stdin (one JSON object a line, lakehouse.path_processes.
    ProgressRelay) until it closes: the fast path's, whose runtime has no Delta. The thread, to join."""
    import json
    import sys

    def follow() -> None:
        for line in sys.stdin:
            if line.startswith("{"):
                recorder.record(json.loads(line))

    reader = threading.Thread(target=follow, name="relayed-progress", daemon=True)
    reader.start()
    return reader


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    from operational import hot_pages
    from shared.kafka import ensure_topics
    from lakehouse.master_check import require_fit_master
    from shared.object_store import require_reachable
    from lakehouse.path_processes import FastPathProcess, MedallionProcess, ProgressRelay
    from shared.runtime import real_time_available
    from shared.streaming import supervise

    require_fit_master(config, note=say)  # before anything starts
    require_reachable(config.storage.root, config.storage.s3)
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    if config.operational.mode == "real-time" and not real_time_available():
        say(f"both paths from {config.kafka.topics.clicks}: the fast path (real-time mode, its own runtime) alerting "
            f"to {config.kafka.topics.alerts}, the medallion under {config.storage.root} in a low-priority process")
        relayed = ProgressRelay()  # the medallion's process records the fast path's progress too

        def both(view: Any) -> list:
            def fast_path_progress(progress: dict) -> None:
                view.show(progress)
                relayed.forward(progress)

            return [FastPathProcess(passthrough(config, args), config.operational.real_time.checkpoint_interval,
                                    relay=say, on_progress=fast_path_progress, on_progress_end=relayed.end),
                    MedallionProcess(passthrough(config, args), config.analytical.niceness, relay=say,
                                     on_progress=view.show, records=relayed)]

        recording_children(config, args, both, records_here=False)
        if lost := relayed.undelivered():
            say(f"warning: {lost} progress reports of the fast path not recorded to ops/stream_progress: the "
                "medallion's process, which records them, had ended")
        say("stopped; `lakehouse status` summarises the recorded progress")
        return 0
    with monitored(config, "operational") as (spark, recorder):
        say(f"both paths from {config.kafka.topics.clicks}: alerts to {config.kafka.topics.alerts} here, the "
                f"medallion under {config.storage.root} in a separate low-priority process; progress to {recorder.path}")
        medallion = MedallionProcess(passthrough(config, args), config.analytical.niceness, relay=say,
                                     on_progress=recorder.show)
        try:
            changed_rows = ChangedRows(say)

            def status() -> None:
                recorder.flush()
                changed_rows(recorder.console_view())

            supervise(hot_pages.starters(spark, config), config.operational,
                      seconds=args.seconds, report=say, on_status=status, status_lines=False,
                      until=lambda: medallion.ended)
        finally:
            medallion.stop()
        if medallion.failed:
            raise LakehouseError(medallion.failed)
    say("stopped; `lakehouse status` summarises the recorded progress")
    return 0


def cmd_status(config: Config, args: argparse.Namespace) -> int:
    from datetime import timedelta

    from lakehouse.cli.questions import in_process_root, open_lake
    from lakehouse.monitoring.stream_progress import SUMMARY_SQL, TABLE, table_location
    from lakehouse.monitoring.running_queries import activity_line, running_queries

    path = table_location(config)
    since = datetime.now(timezone.utc) - timedelta(minutes=args.minutes)
    missing = LakehouseError(f"no progress recorded at {path} yet: it fills while `lakehouse run`, "
                             "`operational` or `analytical` run")
    root = in_process_root(config)
    if root is not None:  # DuckDB in this process: no JVM to start
        from analytical.sql import duckdb_spelling, sql_name

        lake = open_lake(root, config)
        if sql_name(TABLE) not in lake.tables:
            raise lake.absent(sql_name(TABLE), str(missing))
        _, rows = lake.answer(duckdb_spelling(SUMMARY_SQL, progress=TABLE), {"since": since})
    else:
        from analytical import trends
        from analytical.tables import is_delta_table
        from shared.spark import spark_session

        spark = spark_session(config)
        if not is_delta_table(spark, path):
            raise missing
        progress = spark.read.format("delta").load(path)
        rows, _ = trends.answer(spark.sql(SUMMARY_SQL, args={"since": since}, progress=progress))
    say(f"progress of the last {args.minutes:g} minutes from {path}")
    live = running_queries(config.metrics)
    if live:
        say("running now (their /metrics): " + "; ".join(activity_line(row) for row in live))
    rows = with_running_now(rows, live)
    print_rows(rows, ["queryName", "batches", "lastBatch", "lastProgress", "lag", "batchMsP50", "batchMsP95",
                       "batchMsP99", "processedPerSecond", "droppedLate", "failedExpectations", "errors",
                       "lastError", "running", "lagNow", "secondsSinceActivity"], args.format)
    return 0


def with_running_now(recorded: list[dict], live: list[dict]) -> list[dict]:
    """The recorded rows with what the running queries' /metrics say now (a real-time query reports
    a batch only once per checkpoint interval): running, lagNow, secondsSinceActivity."""
    now = {row["query"]: row for row in live}
    rows = [{**row, "running": False} for row in recorded]
    rows += [{"queryName": name} for name in sorted(set(now) - {row["queryName"] for row in recorded})]
    for row in rows:
        if row["queryName"] in now:
            running = now[row["queryName"]]
            row |= {"running": bool(running.get("up")), "lagNow": running.get("lag"),
                    "secondsSinceActivity": running.get("secondsSinceProgress")}
    return rows


def cmd_rebuild(config: Config, args: argparse.Namespace) -> int:
    from analytical import pipeline
    from shared.spark import spark_session

    spark = spark_session(config, application="analytical")
    say(f"rebuilding silver and gold from bronze under {config.storage.root}")
    rows = [run.as_dict() for run in pipeline.rebuild(spark, config, say)]
    print_rows(rows, ["layer", "query", "rows", "seconds", "batches"], args.format)
    return 0


def cmd_maintain(config: Config, args: argparse.Namespace) -> int:
    from analytical.maintenance import maintain
    from shared.spark import spark_session

    spark = spark_session(config, application="analytical")
    rows = maintain(spark, config, say, vacuum=not args.no_vacuum)
    print_rows(rows, ["table", "zOrderBy", "filesBefore", "filesAfter"], args.format)
    return 0



def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    analytical = commands.add_parser(
        "analytical", parents=[common, output_options("a backfill's rows and time per layer")], help="the medallion streams: Kafka -> bronze -> silver -> gold",
        description="Run the bronze, silver and gold streams continuously (triggers from analytical.triggers) "
        "until stopped or for --seconds; or, with --available-now, run each layer in order over all there is "
        "(a backfill), print the rows and time per layer, and exit. A second backfill adds nothing.")
    analytical.add_argument("--available-now", action="store_true", help="backfill: process what is there, then exit")
    analytical.add_argument("--seconds", type=positive(float), help="continuous: stop after this long")
    analytical.add_argument("--progress-json", action="store_true",
                            help="continuous: print each progress report as one JSON line on stdout instead of status "
                            "lines on stderr (how `lakehouse run` shows this process's queries in its console view)")
    analytical.add_argument("--record-progress-from-stdin", action="store_true",
                            help="continuous: also record the progress reports read from stdin (one JSON object a "
                            "line) to ops/stream_progress, until it closes: how `lakehouse run` records its fast "
                            "path's progress in real-time mode, whose runtime has no Delta")
    analytical.add_argument("--wait-for-broker", type=positive(float), metavar="SECONDS",
                            help="wait up to this long for the broker at start instead of failing at once (what "
                            "`lakehouse run` asks of its medallion process: the broker may restart meanwhile)")
    analytical.set_defaults(handler=cmd_analytical, runs_until_stopped=True)

    run = commands.add_parser(
        "run", parents=[common], help="both paths side by side: the fast path, and the medallion at low priority",
        description="Start the hot-pages stream here and the four medallion streams beside it as a separate "
        "`lakehouse analytical` process under `nice -n <analytical.niceness>` (it yields to the fast path better than one "
        "application with FAIR pools: OPERATIONS.md). Every query's progress goes to the Delta table ops/stream_progress, and to one "
        "console view of both processes' queries. "
        "SIGINT/SIGTERM stop every query cleanly (exit 0); when one query fails for good, the others stop cleanly "
        "and the command exits 2 with its error. A second run on the same checkpoints is refused.")
    run.add_argument("--seconds", type=positive(float), help="stop after this long (default: until stopped)")
    run.set_defaults(handler=cmd_run, runs_until_stopped=True)

    status = commands.add_parser(
        "status", parents=[common, output_options("one row per query")], help="recent progress of every stream, from ops/stream_progress",
        description="Per query, from the recorded progress of the last --minutes: batches, last batch and when, "
        "Kafka lag, batch duration percentiles, processed rate, rows dropped as late, failed expectations, errors.")
    status.add_argument("--minutes", type=positive(float), default=15.0, help="how far back (default 15)")
    status.set_defaults(handler=cmd_status)

    commands.add_parser(
        "rebuild", parents=[common, output_options("one row per layer")], help="recompute silver and gold from bronze, from scratch",
        description="Rebuild silver/clicks, silver/quarantine and both gold tables from bronze/clicks with fresh "
        "checkpoints, in a staging folder, then publish each table in one commit: readers never see a half-built "
        "table. Stop the analytical streams first. SIGINT/SIGTERM stop it before the next table is published (the "
        "live tables stay as they were from there on); run it again to finish.",
    ).set_defaults(handler=cmd_rebuild)

    maintain = commands.add_parser(
        "maintain", parents=[common, output_options("one row per table")], help="OPTIMIZE (Z-order) and VACUUM the Delta tables",
        description="Compact every medallion table, Z-order those whose readers filter on a column, then VACUUM "
        "files older than analytical.vacuum_retention.")
    maintain.add_argument("--no-vacuum", action="store_true", help="only OPTIMIZE")
    maintain.set_defaults(handler=cmd_maintain)
