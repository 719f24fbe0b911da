"""`lakehouse run` and `lakehouse status`: both paths side by side (lakehouse.both_paths), and what
every query of them did lately."""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from datetime import datetime, timezone
from typing import Any

from lakehouse.cli.common import monitored, output_options, passthrough, positive, print_rows, say
from shared.config import Config
from shared.errors import LakehouseError
from shared.progress import ChangedRows


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.both_paths import BothPaths
    from lakehouse.master_check import require_fit_master
    from lakehouse.monitoring.stream_progress import recording
    from lakehouse.path_processes import ProgressRelay
    from shared.kafka import ensure_topics
    from shared.object_store import require_reachable
    from shared.processes import stops_deferred

    require_fit_master(config, note=say)  # before anything starts
    require_reachable(config.storage.root, config.storage.s3)
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    paths = BothPaths(config, passthrough(config, args), relay=say)
    changed_rows = ChangedRows(say)
    if paths.fast_path_here:
        with monitored(config, "operational", application_settings=paths.mode.session_settings) as (spark, recorder):
            say(f"both paths from {config.kafka.topics.clicks}: alerts to {config.kafka.topics.alerts} here, the "
                f"medallion under {config.storage.root} in a separate low-priority process; progress to {recorder.path}")
            with paths.started(on_progress=recorder.show):
                paths.run(spark, seconds=args.seconds, report=say,
                          on_status=lambda: (recorder.flush(), changed_rows(recorder.console_view())))
    else:
        say(f"both paths from {config.kafka.topics.clicks}: the fast path (real-time mode, its own runtime) alerting "
            f"to {config.kafka.topics.alerts}, the medallion under {config.storage.root} in a low-priority process")
        relayed = ProgressRelay()  # the medallion's process records the fast path's progress too: no JVM here

        with recording(None, None) as view, ExitStack() as running:  # the console view only
            def fast_path_progress(progress: dict) -> None:
                view.show(progress)
                relayed.forward(progress)

            with stops_deferred():  # the children are all started, or none
                running.enter_context(paths.started(on_progress=view.show, on_fast_path_progress=fast_path_progress,
                                                    records=relayed))
            paths.run(None, seconds=args.seconds, report=say,
                      on_status=lambda: (view.flush(), changed_rows(view.console_view())))
        if lost := relayed.undelivered():
            say(f"warning: {lost} progress reports of the fast path not recorded to ops/stream_progress: the "
                "medallion's process, which records them, had ended")
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
    root = in_process_root(config.storage)
    if root is not None:  # DuckDB in this process: no JVM to start
        from analytical.sql import duckdb_spelling, sql_name

        lake = open_lake(root, config.storage)
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


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
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
