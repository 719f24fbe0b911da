"""`lakehouse analytical|rebuild|maintain|forget`: the medallion."""

from __future__ import annotations

import argparse
import threading
from typing import Any

from lakehouse.cli.common import monitored, output_options, positive, print_rows, say
from shared.config import Config


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


def _lowered_for_its_jvm(niceness: int) -> int | None:
    """Lower this process to `niceness` (never raising it) before it starts the JVM that inherits it;
    the nice it then runs at. None when a JVM runs in this process already (forget called from Python on
    a live session): that JVM keeps its priority, and the process that embeds it is left as it was."""
    import os

    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        return None
    return os.nice(max(niceness - os.nice(0), 0))


def cmd_forget(config: Config, args: argparse.Namespace) -> int:
    from datetime import datetime, timezone

    from analytical.erasure import erase, requested_ids
    from shared.kafka import records_kept_for
    from shared.object_store import require_reachable
    from shared.spark import spark_session

    ids = list(args.user_id or [])
    if args.ids_file:
        try:
            with open(args.ids_file, encoding="utf-8") as lines:
                ids += [line.rstrip("\r\n") for line in lines if line.strip()]
        except OSError as error:
            from shared.errors import ConfigError
            raise ConfigError(f"--ids-file {args.ids_file}: {error.strerror}") from error
    ids = requested_ids(ids)  # refused before a JVM starts
    require_reachable(config.storage.root, config.storage.s3)
    niceness = _lowered_for_its_jvm(config.erasure.niceness)
    spark = spark_session(config, application="analytical", brief=True)
    rows = erase(spark, config, ids, say)
    say(f"erased at nice {niceness} (erasure.niceness {config.erasure.niceness}): below the fast path, above the medallion"
        if niceness is not None else
        "erased on the JVM already running in this process, at its priority (erasure.niceness applies to a JVM forget starts)")
    topic = config.kafka.topics.clicks
    kept = records_kept_for(config.kafka, topic)
    gone_by = None if kept is None else (datetime.now(timezone.utc) + kept).strftime("%Y-%m-%dT%H:%M:%SZ")
    print_rows(rows, ["table", "rowsRemoved", "filesDeleted"], args.format,
               document={"tables": rows, "topic": topic, "topicDropsTheRecordsBy": gone_by})
    say(f"{topic} keeps records forever (retention.ms -1): the user's records stay on it until it is given a "
        "retention" if gone_by is None else
        f"{topic} drops the user's records by {gone_by} (its retention.ms + segment.ms: {kept}); "
        "the lake holds none of them")
    return 0



def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    analytical = commands.add_parser(
        "analytical", parents=[common, output_options("a backfill's rows and time per query")],
        help="the medallion: Kafka -> bronze, silver, gold in one query, then the hourly gold stream",
        description="Run the medallion's query (each micro-batch of the clicks topic landed in bronze and written "
        "to silver, the quarantine and gold/page_clicks_5s) and the hourly gold stream continuously (triggers from "
        "analytical.triggers) until stopped or for --seconds; or, with --available-now, run each in order over "
        "all there is (a backfill), print the rows and time per query, and exit. A second backfill adds nothing.")
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

    commands.add_parser(
        "rebuild", parents=[common, output_options("one row per query")], help="recompute silver and gold from bronze, from scratch",
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

    forget = commands.add_parser(
        "forget", parents=[common, output_options("one row per table")],
        help="erase users' clicks from every table of the lake, rows and files (a GDPR erasure request)",
        description="Record an erasure request per user in ops/erasure_requests (the id's SHA-256, never the id), "
        "delete every row that names the user from bronze (read from the raw bytes, malformed records too), "
        "silver/clicks, the quarantine and gold/user_sessions, then delete the files that held them: the tables' "
        "versions from before the erasure can no longer be read. The streams may keep running. Gold's page "
        "counts name no user and keep their counts. Running it again finishes an interrupted erasure.")
    forget.add_argument("--user-id", action="append", metavar="ID", help="a userId to forget (repeatable)")
    forget.add_argument("--ids-file", metavar="FILE", help="a file of userIds, one a line")
    forget.set_defaults(handler=cmd_forget)
