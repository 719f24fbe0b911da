"""`lakehouse`, the command line. Each command reads the config once and hands typed values down.

Results go to stdout, progress and errors to stderr; a user-facing failure exits non-zero with one
clear message. Heavy imports (pyspark, kafka-python) happen inside the commands that need them, so
`lakehouse --help` and `lakehouse kafka status` stay fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from shared.config import Config, load_config, render
from shared.errors import LakehouseError


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# -- kafka -----------------------------------------------------------------------------------


def cmd_kafka_start(config: Config, args: argparse.Namespace) -> int:
    from shared.broker import EmbeddedBroker
    from shared.kafka import ensure_topics

    bootstrap = EmbeddedBroker(config, log=_stderr).start()
    topics = [config.kafka.topics.clicks, config.kafka.topics.alerts]
    created = ensure_topics(config.kafka, topics, timestamp_type=args.timestamp_type)
    if created:
        stamp = f", {args.timestamp_type}" if args.timestamp_type else ""
        _stderr(f"created topics {', '.join(created)} ({config.kafka.partitions} partitions{stamp})")
    print(bootstrap)
    return 0


def cmd_kafka_stop(config: Config, args: argparse.Namespace) -> int:
    from shared.broker import EmbeddedBroker

    EmbeddedBroker(config, log=_stderr).stop()
    return 0


def cmd_kafka_status(config: Config, args: argparse.Namespace) -> int:
    from shared.broker import EmbeddedBroker

    status = EmbeddedBroker(config, log=_stderr).status()
    print(status.describe())
    return 0 if status.running and status.answering else 1


def cmd_kafka_topics(config: Config, args: argparse.Namespace) -> int:
    from shared.kafka import admin_client, topic_offsets

    with admin_client(config.kafka) as admin:
        names = sorted(name for name in admin.list_topics() if not name.startswith("__"))
    rows = []
    for name in names:
        offsets = topic_offsets(config.kafka, name)
        records = sum(latest - earliest for earliest, latest in offsets.values())
        rows.append({"topic": name, "partitions": len(offsets), "records": records})
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    else:
        print(_table(rows, ["topic", "partitions", "records"]))
    return 0


# -- generate --------------------------------------------------------------------------------


def cmd_generate(config: Config, args: argparse.Namespace) -> int:
    import random

    from shared.generator import ClickGenerator, TrafficSpec, hot_page_ids, send
    from shared.kafka import ensure_topics, producer_for

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    spec = TrafficSpec.for_config(
        config,
        rate=args.rate,
        pages=args.pages,
        hot_pages=args.hot_pages,
        late_fraction=args.late_fraction,
        duplicate_fraction=args.duplicate_fraction,
        malformed_fraction=args.malformed_fraction,
        seed=seed,
        start_time=args.start_time,
    )
    generator = ClickGenerator(spec)
    threshold = config.hot_pages.threshold
    if generator.busiest_ordinary_page_per_window > threshold:
        _stderr(
            f"warning: at this rate an ordinary page expects {generator.busiest_ordinary_page_per_window:.0f} "
            f"clicks per window, over the threshold {threshold}: use more --pages"
        )
    count = args.events if args.events is not None else round(args.rate * args.seconds)
    paced = args.events is None or args.paced
    topic = args.topic or config.kafka.topics.clicks
    ensure_topics(config.kafka, [topic])
    producer = producer_for(config.kafka)
    _stderr(
        f"generating {count} records to {topic} "
        + (f"at {args.rate:g}/s" if paced else "as fast as possible")
        + f" (seed {seed}, {args.hot_pages} hot pages, {args.pages} pages)"
    )

    def progress(done: int, total: int, seconds: float) -> None:
        _stderr(f"  sent {done}/{total} in {seconds:.1f} s ({done / seconds:,.0f}/s)")

    try:
        counts, seconds = send(generator, producer, topic, count, paced=paced, progress=progress)
    finally:
        producer.close()
    summary = {
        "topic": topic,
        "sent": count,
        "seconds": round(seconds, 3),
        "achieved_rate": round(count / seconds, 1) if seconds else None,
        "target_rate": args.rate if paced else None,
        "seed": seed,
        "first_event_time": datetime.fromtimestamp(generator.start_ms / 1000, timezone.utc).isoformat(),
        "hot_pages": hot_page_ids(args.hot_pages),
        "by_kind": dict(sorted(counts.by_kind.items())),
        "malformed_by_reason": dict(sorted(counts.malformed_by_reason.items())),
    }
    print(json.dumps(summary, indent=2))
    return 0


# -- inspect ---------------------------------------------------------------------------------


def cmd_inspect(config: Config, args: argparse.Namespace) -> int:
    from shared.spark import spark_session
    from shared.topic_profile import profile_topic

    spark = spark_session(config)
    topic = args.topic or config.kafka.topics.clicks
    _stderr(f"reading {topic} with Spark (batch) and applying the shared parsing and rule")
    profile = profile_topic(spark, config, topic, top=args.top)
    if args.format == "json":
        print(json.dumps(profile, indent=2, default=str))
        return 0
    print(f"topic {topic}: {profile['records']} records, {profile['valid']} valid, "
          f"{profile['invalid']} invalid, {profile['distinct_events']} distinct events")
    if profile["invalid_by_reason"]:
        print("\ninvalid records by reason:")
        print(_table([{"reason": k, "records": v} for k, v in profile["invalid_by_reason"].items()],
                     ["reason", "records"]))
    print(f"\nevent time from {profile['first_event_time']} to {profile['last_event_time']}; "
          f"{profile['windows']} page windows, {profile['hot_windows']} hot (> {config.hot_pages.threshold})")
    if profile["top_windows"]:
        print("\nbusiest windows (distinct events, after de-duplication):")
        print(_table(profile["top_windows"], ["pageId", "windowStart", "clickCount", "isHot"]))
    return 0


# -- operational ----------------------------------------------------------------------------


def cmd_operational(config: Config, args: argparse.Namespace) -> int:
    from operational import hot_pages
    from shared.kafka import ensure_topics
    from shared.streaming import supervise

    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    with _monitored(config, [hot_pages.QUERY_NAME]) as (spark, recorder):
        _stderr(f"hot pages: {config.kafka.topics.clicks} -> {config.kafka.topics.alerts}, more than "
                f"{config.hot_pages.threshold} clicks per {config.hot_pages.window.total_seconds():g} s window; "
                f"checkpoint {config.checkpoint(hot_pages.QUERY_NAME)}")
        totals = supervise({hot_pages.QUERY_NAME: lambda: hot_pages.start(spark, config)}, config.operational,
                           seconds=args.seconds, report=_stderr, on_status=recorder.flush)
    done = totals[hot_pages.QUERY_NAME]
    _stderr(f"[{hot_pages.QUERY_NAME}] processed {done.rows:,} records in this run: {done.invalid:,} invalid, "
            f"{done.dropped_by_watermark:,} dropped as too late")
    return 0


def cmd_alerts(config: Config, args: argparse.Namespace) -> int:
    from operational.alerts_topic import latest_alerts, read_alerts

    topic = config.kafka.topics.alerts
    if args.follow:  # until Ctrl-C, which is how following ends: exit 0
        try:
            for _, changed in read_alerts(config.kafka, topic, follow=True):
                if changed is not None:
                    print(json.dumps(changed.as_dict()) if args.format == "json" else
                          f"{changed.window_start}  {changed.page_id}  {changed.click_count}", flush=True)
        except KeyboardInterrupt:
            pass
        return 0
    book = latest_alerts(config.kafka, topic)
    alerts = [alert.as_dict() for alert in book.sorted()]
    if args.format == "json":
        print(json.dumps(alerts, indent=2))
    else:
        print(_table(alerts, ["windowStart", "pageId", "clickCount", "threshold", "alertId"]))
    _stderr(f"{len(alerts)} alerted windows from {book.records} records on {topic}"
            + (f"; {len(book.invalid)} records are not valid alerts" if book.invalid else ""))
    return 0


# -- analytical -----------------------------------------------------------------------------


def cmd_analytical(config: Config, args: argparse.Namespace) -> int:
    from analytical import pipeline
    from shared.kafka import ensure_topics, wait_until_reachable

    if args.wait_for_broker:
        wait_until_reachable(config.kafka, args.wait_for_broker, _stderr)
    ensure_topics(config.kafka, [config.kafka.topics.clicks])
    echo = (lambda progress: print(progress, flush=True)) if args.progress_json else None
    with _monitored(config, [stream.name for stream in pipeline.STREAMS], echo) as (spark, recorder):
        _stderr(f"medallion: {config.kafka.topics.clicks} -> bronze -> silver -> gold under {config.storage.root}")
        if not args.available_now:
            pipeline.run_continuously(spark, config, args.seconds, _stderr, on_status=recorder.flush,
                                      status_lines=not args.progress_json)
            return 0
        runs = pipeline.backfill(spark, config, _stderr)
    _print_rows([run.as_dict() for run in runs],
                ["layer", "query", "rows", "seconds", "batches", "invalid", "dropped_by_watermark"], args.format)
    return 0


def cmd_run(config: Config, args: argparse.Namespace) -> int:
    from operational import hot_pages
    from shared.kafka import ensure_topics
    from shared.side_by_side import MedallionProcess
    from shared.streaming import supervise

    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    with _monitored(config, [hot_pages.QUERY_NAME]) as (spark, recorder):
        _stderr(f"both paths from {config.kafka.topics.clicks}: alerts to {config.kafka.topics.alerts} here, the "
                f"medallion under {config.storage.root} in a separate low-priority process; progress to {recorder.path}")
        medallion = MedallionProcess(_passthrough(args), config.analytical.niceness, relay=_stderr,
                                     on_progress=recorder.show)
        try:
            def status() -> None:
                recorder.flush()
                _stderr(recorder.console_view())

            supervise({hot_pages.QUERY_NAME: lambda: hot_pages.start(spark, config)}, config.operational,
                      seconds=args.seconds, report=_stderr, on_status=status, status_lines=False,
                      until=lambda: medallion.ended)
        finally:
            medallion.stop()
        if medallion.failed:
            raise LakehouseError(medallion.failed)
    _stderr("stopped; `lakehouse status` summarises the recorded progress")
    return 0


def cmd_status(config: Config, args: argparse.Namespace) -> int:
    from datetime import timedelta

    from shared.monitoring import TABLE, summarise
    from shared.spark import spark_session

    spark = spark_session(config)
    path = config.path(*TABLE.split("/"))
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        raise LakehouseError(f"no progress recorded at {path} yet: it fills while `lakehouse run`, "
                             "`operational` or `analytical` run")
    since = datetime.now(timezone.utc) - timedelta(minutes=args.minutes)
    rows = [row.asDict() for row in summarise(spark.read.format("delta").load(path), since).collect()]
    _stderr(f"progress of the last {args.minutes:g} minutes from {path}")
    _print_rows(rows, ["queryName", "batches", "lastBatch", "lastProgress", "lag", "batchMsP50", "batchMsP95",
                       "batchMsP99", "processedPerSecond", "droppedLate", "failedExpectations", "errors",
                       "lastError"], args.format)
    return 0


@contextmanager
def _monitored(config: Config, query_names: list[str],
               echo: Callable[[str], None] | None = None) -> Iterator[tuple[Any, Any]]:
    """The checkpoints of `query_names` held by this process, a SparkSession, and every query's
    progress recorded to ops/stream_progress (and given to `echo`) while the block runs."""
    from shared.checkpoints import exclusive
    from shared.monitoring import TABLE, recording
    from shared.spark import spark_session

    with exclusive(config.storage.root, query_names, report=_stderr) as locks:
        spark = spark_session(config)
        locks.record_jvm(spark._jvm.java.lang.ProcessHandle.current().pid())
        with recording(spark, config.path(*TABLE.split("/")), echo) as recorder:
            yield spark, recorder


def cmd_rebuild(config: Config, args: argparse.Namespace) -> int:
    from analytical import pipeline
    from shared.spark import spark_session

    spark = spark_session(config)
    _stderr(f"rebuilding silver and gold from bronze under {config.storage.root}")
    rows = [run.as_dict() for run in pipeline.rebuild(spark, config, _stderr)]
    print(_table(rows, ["layer", "query", "rows", "seconds", "batches"]))
    return 0


def cmd_query(config: Config, args: argparse.Namespace) -> int:
    from analytical import trends
    from analytical.tables import GOLD_PAGE_CLICKS_5S, read_table
    from shared.spark import spark_session

    spark = spark_session(config)
    windows = read_table(spark, config.storage.root, GOLD_PAGE_CLICKS_5S, as_of=args.as_of)
    windows = trends.in_range(windows, args.start, args.end)
    if args.question == "top-pages":
        result = trends.top_pages(windows, args.limit)
    elif args.question == "trend":
        result = trends.page_trend(windows, args.page, args.bucket)
    else:
        result = trends.hot_windows(windows)
    rows, files = trends.answer(result)
    version = f" as of {args.as_of}" if args.as_of else ""
    _stderr(f"{len(rows)} rows from {GOLD_PAGE_CLICKS_5S}{version}"
            + (f"; {files} data files read" if files is not None else ""))
    _print_rows(rows, [field.name for field in result.schema.fields], args.format)
    return 0


def cmd_maintain(config: Config, args: argparse.Namespace) -> int:
    from analytical.maintenance import maintain
    from shared.spark import spark_session

    spark = spark_session(config)
    rows = maintain(spark, config, _stderr, vacuum=not args.no_vacuum)
    _print_rows(rows, ["table", "zOrderBy", "filesBefore", "filesAfter"], args.format)
    return 0


# -- quality ---------------------------------------------------------------------------------


def cmd_check(config: Config, args: argparse.Namespace) -> int:
    from analytical.checks import check
    from shared.spark import spark_session

    spark = spark_session(config)
    rows, docs = check(spark, config, _stderr)
    failed = [row for row in rows if not row["success"]]
    if args.format == "json":
        print(json.dumps({"success": not failed, "expectations": rows, "dataDocs": docs}, indent=2))
    else:
        tables = {}
        for row in rows:
            summary = tables.setdefault(row["table"], {"table": row["table"], "expectations": 0, "passed": 0, "failed": ""})
            summary["expectations"] += 1
            summary["passed"] += row["success"]
        for row in failed:
            tables[row["table"]]["failed"] = ", ".join(filter(None, [tables[row["table"]]["failed"], row["expectation"]]))
        print(_table(list(tables.values()), ["table", "expectations", "passed", "failed"]))
        if failed:
            print()
            print(_table([{**row, "examples": "; ".join(row["examples"]) or row["error"] or ""} for row in failed],
                         ["table", "expectation", "unexpected", "examples"]))
    _stderr(f"Data Docs: {docs}")
    if failed:
        _stderr(f"{len(failed)} of {len(rows)} expectations failed")
    return 1 if failed else 0


def cmd_reconcile(config: Config, args: argparse.Namespace) -> int:
    from analytical.reconciliation import CAUSES, reconcile
    from shared.spark import spark_session

    spark = spark_session(config)
    _stderr(f"reconciling {config.kafka.topics.alerts} against gold under {config.storage.root}")
    result = reconcile(spark, config, args.start, args.end)
    if result["invalidAlertRecords"]:
        _stderr(f"warning: {result['invalidAlertRecords']} records on {config.kafka.topics.alerts} are not valid "
                "alerts (listed under invalidAlerts in --json)")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"windows compared {result['windowsCompared']}, matched {result['matched']}, "
              f"pending {result['pending']}, mismatches {len(result['mismatches'])}, "
              f"unexplained {result['unexplained']}"
              + (f", outside the fast path's kept history {result['outsideHistory']}" if result["outsideHistory"] else ""))
        print(f"closed in both paths up to {result['closedUpTo']}; "
              f"{result['alertRecords']} alert records ({result['invalidAlertRecords']} invalid)")
        if result["mismatches"]:
            print()
            print(_table(result["mismatches"], ["windowStart", "pageId", "operationalCount", "goldCount", "cause"]))
            print()
            for cause, count in result["byCause"].items():
                print(f"{count:6d}  {cause}: {CAUSES.get(cause, 'no record in the data reproduces the alerted count')}")
        print("consistent" if result["consistent"] else "NOT consistent: some differences have no cause in the data")
    return 0 if result["consistent"] else 1


# -- bench -----------------------------------------------------------------------------------


def _passthrough(args: argparse.Namespace) -> list[str]:
    """The --config/--set a benchmark's child processes must see."""
    config = [f"--config={args.config}"] if getattr(args, "config", None) else []
    return config + [f"--set={item}" for item in getattr(args, "overrides", [])]


def cmd_bench_latency(config: Config, args: argparse.Namespace) -> int:
    from operational.benchmarks import PROFILES, latency
    from shared.kafka import require_reachable

    profiles = [name.strip() for name in args.configs.split(",") if name.strip()]
    unknown = sorted(set(profiles) - set(PROFILES))
    if unknown:
        raise LakehouseError(f"--configs: unknown {', '.join(unknown)}; choose from {', '.join(PROFILES)}")
    require_reachable(config.kafka)  # before a child process starts its Spark
    print(json.dumps(latency(_passthrough(args), args.rate, args.seconds, args.hot_pages, profiles,
                             with_medallion=args.with_medallion), indent=2))
    return 0


def cmd_bench_throughput(config: Config, args: argparse.Namespace) -> int:
    from operational.benchmarks import throughput
    from shared.kafka import require_reachable

    require_reachable(config.kafka)
    rates = [float(rate) for rate in args.rates.split(",")]
    print(json.dumps(throughput(_passthrough(args), rates, args.seconds, args.hot_pages), indent=2))
    return 0


def cmd_bench_backfill(config: Config, args: argparse.Namespace) -> int:
    from analytical.benchmarks import backfill_benchmark

    print(json.dumps(backfill_benchmark(_passthrough(args), args.events, args.history, args.span), indent=2))
    return 0


def cmd_bench_memory(config: Config, args: argparse.Namespace) -> int:
    from operational.benchmarks import memory

    print(json.dumps(memory(_passthrough(args), args.rate, args.seconds, args.hot_pages), indent=2))
    return 0


# -- demo ------------------------------------------------------------------------------------


def cmd_demo(config: Config, args: argparse.Namespace) -> int:
    from shared.demo import run_demo

    return run_demo(config, seconds=args.seconds, rate=args.rate, config_args=_passthrough(args))


# -- config ----------------------------------------------------------------------------------


def cmd_config(config: Config, args: argparse.Namespace) -> int:
    print(render(config), end="")
    return 0


# -- plumbing --------------------------------------------------------------------------------


def _table(rows: list[dict], columns: list[str]) -> str:
    widths = {c: max([len(c), *(len(str(row.get(c, ""))) for row in rows)]) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns), "  ".join("-" * widths[c] for c in columns)]
    lines += ["  ".join(str(row.get(c, "")).ljust(widths[c]) for c in columns) for row in rows]
    return "\n".join(lines)


def _print_rows(rows: list[dict], columns: list[str], output: str) -> None:
    if output == "json":
        print(json.dumps(rows, indent=2))
    elif output == "csv":
        import csv

        writer = csv.DictWriter(sys.stdout, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    else:
        print(_table(rows, columns))


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _positive(kind: type) -> Callable[[str], float | int]:
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value

    return parse


def _instant(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO-8601 time such as 2026-11-22T10:00:00Z, got {text}")
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    options = common.add_argument_group("configuration")
    # SUPPRESS: a subcommand's parser must not reset what was given before the subcommand.
    options.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                         help="YAML layered on conf/local.yaml (default: $LAKEHOUSE_CONFIG if set)")
    options.add_argument("--set", metavar="KEY=VALUE", action="append", default=argparse.SUPPRESS, dest="overrides",
                         help="override one dotted key, e.g. --set hot_pages.threshold=100 (repeatable)")

    parser = argparse.ArgumentParser(
        prog="lakehouse",
        description="Clickstream lakehouse: hot-page alerts and a Delta medallion from one Kafka topic.",
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    kafka = commands.add_parser("kafka", help="the embedded single-node Kafka broker", parents=[common],
                                description="Start, stop or inspect the embedded Kafka broker (KRaft).")
    kafka_commands = kafka.add_subparsers(dest="kafka_command", metavar="ACTION", required=True)
    start = kafka_commands.add_parser(
        "start", parents=[common], help="start it (formats storage the first time); prints the bootstrap address",
        description="Start the broker unless it runs, create the configured topics that do not exist yet "
        "(kafka.partitions partitions), and print the bootstrap address once it answers.")
    start.add_argument("--timestamp-type", choices=["CreateTime", "LogAppendTime"],
                       help="message.timestamp.type of the topics it creates (default: the broker's, CreateTime)")
    start.set_defaults(handler=cmd_kafka_start)
    kafka_commands.add_parser("stop", parents=[common], help="stop it: SIGTERM, then SIGKILL only if it hangs",
                              description="Stop the broker and wait until its process is gone.").set_defaults(handler=cmd_kafka_stop)
    kafka_commands.add_parser("status", parents=[common], help="say whether it runs and answers (exit 1 if not)",
                              description="Print whether the broker runs and answers metadata requests; exit 1 when it does not."
                              ).set_defaults(handler=cmd_kafka_status)
    topics = kafka_commands.add_parser("topics", parents=[common], help="list topics with their record counts",
                                       description="List the broker's topics, partitions and records held.")
    topics.add_argument("--format", choices=["table", "json"], default="table")
    topics.set_defaults(handler=cmd_kafka_topics)

    generate = commands.add_parser(
        "generate", parents=[common], help="send synthetic clicks to the clicks topic",
        description="Send synthetic page clicks: ordinary pages with long-tailed popularity, hot pages over "
        "the threshold in every full window, and late, duplicate and malformed records on request. "
        "Prints a JSON summary of what was sent and the rate achieved.")
    amount = generate.add_mutually_exclusive_group()
    amount.add_argument("--seconds", type=_positive(float), default=10.0, help="send for this long at --rate (default 10)")
    amount.add_argument("--events", type=_positive(int), help="send exactly N records, as fast as possible unless --paced")
    generate.add_argument("--rate", type=_positive(float), default=20_000.0,
                          help="events per second of event time, and of wall time when paced (default 20000)")
    generate.add_argument("--paced", action="store_true", help="with --events: send at --rate instead of as fast as possible")
    generate.add_argument("--pages", type=_positive(int), default=1000, help="ordinary pages (default 1000)")
    generate.add_argument("--hot-pages", type=int, default=0, help="pages above the threshold in every full window (default 0)")
    generate.add_argument("--late-fraction", type=_fraction, default=0.0,
                          help="share of events later than the fast path's watermark, within gold's (default 0)")
    generate.add_argument("--duplicate-fraction", type=_fraction, default=0.0,
                          help="share of records that repeat a recent record byte for byte (default 0)")
    generate.add_argument("--malformed-fraction", type=_fraction, default=0.0,
                          help="share of invalid records, every invalid shape in turn (default 0)")
    generate.add_argument("--seed", type=int, help="same seed and start time, same records (default: random, printed)")
    generate.add_argument("--start-time", type=_instant,
                          help="event time of the first event, ISO-8601 (default: start of the current window)")
    generate.add_argument("--topic", help="topic to send to (default: kafka.topics.clicks)")
    generate.set_defaults(handler=cmd_generate)

    inspect = commands.add_parser(
        "inspect", parents=[common], help="profile a clicks topic with Spark: validity, duplicates, hot windows",
        description="Read a clicks topic with Spark (batch), apply the shared parsing and rule, and summarise: "
        "records, invalid ones by reason, distinct events, windows and hot windows.")
    inspect.add_argument("--topic", help="topic to read (default: kafka.topics.clicks)")
    inspect.add_argument("--top", type=_positive(int), default=10, help="busiest windows to list (default 10)")
    inspect.add_argument("--format", choices=["table", "json"], default="table")
    inspect.set_defaults(handler=cmd_inspect)

    operational = commands.add_parser(
        "operational", parents=[common], help="the hot-page stream: clicks -> alerts on Kafka",
        description="Run the fast path until stopped (SIGINT/SIGTERM stop it cleanly, exit 0) or for --seconds. "
        "A restart resumes from its checkpoint. Prints a status line every operational.status_interval_s.")
    operational.add_argument("--seconds", type=_positive(float), help="stop after this long (default: run until stopped)")
    operational.set_defaults(handler=cmd_operational)

    alerts = commands.add_parser(
        "alerts", parents=[common], help="the alerts on the topic, one per alertId (highest count)",
        description="Read the alerts topic from the beginning and print, per alertId, the record with the "
        "highest clickCount. Records that are not valid alerts are counted, not fatal.")
    alerts.add_argument("--follow", action="store_true", help="keep reading; print each new or raised alert")
    alerts.add_argument("--format", choices=["table", "json"], default="table")
    alerts.set_defaults(handler=cmd_alerts)

    analytical = commands.add_parser(
        "analytical", parents=[common], help="the medallion streams: Kafka -> bronze -> silver -> gold",
        description="Run the bronze, silver and gold streams continuously (triggers from analytical.triggers) "
        "until stopped or for --seconds; or, with --available-now, run each layer in order over all there is "
        "(a backfill), print the rows and time per layer, and exit. A second backfill adds nothing.")
    analytical.add_argument("--available-now", action="store_true", help="backfill: process what is there, then exit")
    analytical.add_argument("--seconds", type=_positive(float), help="continuous: stop after this long")
    analytical.add_argument("--format", choices=["table", "json"], default="table", help="backfill summary format")
    analytical.add_argument("--progress-json", action="store_true",
                            help="continuous: print each progress report as one JSON line on stdout instead of status "
                            "lines on stderr (how `lakehouse run` shows this process's queries in its console view)")
    analytical.add_argument("--wait-for-broker", type=_positive(float), metavar="SECONDS",
                            help="wait up to this long for the broker at start instead of failing at once (what "
                            "`lakehouse run` asks of its medallion process: the broker may restart meanwhile)")
    analytical.set_defaults(handler=cmd_analytical)

    run = commands.add_parser(
        "run", parents=[common], help="both paths side by side: the fast path, and the medallion at low priority",
        description="Start the hot-pages stream here and the four medallion streams beside it as a separate "
        "`lakehouse analytical` process under `nice -n <analytical.niceness>` (it measured better than one application "
        "with FAIR pools: README). Every query's progress goes to the Delta table ops/stream_progress, and to one "
        "console view of both processes' queries. "
        "SIGINT/SIGTERM stop every query cleanly (exit 0); when one query fails for good, the others stop cleanly "
        "and the command exits 1 with its error. A second run on the same checkpoints is refused.")
    run.add_argument("--seconds", type=_positive(float), help="stop after this long (default: until stopped)")
    run.set_defaults(handler=cmd_run)

    status = commands.add_parser(
        "status", parents=[common], help="recent progress of every stream, from ops/stream_progress",
        description="Per query, from the recorded progress of the last --minutes: batches, last batch and when, "
        "Kafka lag, batch duration percentiles, processed rate, rows dropped as late, failed expectations, errors.")
    status.add_argument("--minutes", type=_positive(float), default=15.0, help="how far back (default 15)")
    status.add_argument("--format", choices=["table", "csv", "json"], default="table")
    status.set_defaults(handler=cmd_status)

    commands.add_parser(
        "rebuild", parents=[common], help="recompute silver and gold from bronze, from scratch",
        description="Rebuild silver/clicks, silver/quarantine and both gold tables from bronze/clicks with fresh "
        "checkpoints, in a staging folder, then publish each table in one commit: readers never see a half-built "
        "table. Stop the analytical streams first; if a rebuild is interrupted, run it again.",
    ).set_defaults(handler=cmd_rebuild)

    query = commands.add_parser(
        "query", parents=[common], help="historical trend questions on gold, with time travel",
        description="Answer a question from gold/page_clicks_5s. Times are ISO-8601 (UTC unless a zone is given); "
        "a window belongs to [--from, --to) by its start.")
    questions = query.add_subparsers(dest="question", metavar="QUESTION", required=True)
    window_range = argparse.ArgumentParser(add_help=False)
    window_range.add_argument("--from", dest="start", type=_instant, help="first window start included (ISO-8601)")
    window_range.add_argument("--to", dest="end", type=_instant, help="window starts before this")
    query_options = argparse.ArgumentParser(add_help=False, parents=[window_range])
    query_options.add_argument("--as-of", metavar="VERSION|TIMESTAMP",
                               help="read gold as it was at this Delta version or timestamp (time travel)")
    query_options.add_argument("--format", choices=["table", "csv", "json"], default="table")
    top = questions.add_parser("top-pages", parents=[common, query_options], help="pages with the most clicks",
                               description="The pages with the most clicks in the range, with hot windows and peak.")
    top.add_argument("--limit", type=_positive(int), default=10)
    trend = questions.add_parser("trend", parents=[common, query_options], help="one page's clicks per hour or day",
                                 description="One page's clicks, hot windows and peak window per hour or day (UTC).")
    trend.add_argument("--page", required=True, help="the pageId")
    trend.add_argument("--bucket", choices=["hour", "day"], default="hour")
    questions.add_parser("hot-windows", parents=[common, query_options], help="windows over the threshold",
                         description="Every hot window (more clicks than the threshold) in the range, oldest first.")
    query.set_defaults(handler=cmd_query)

    maintain = commands.add_parser(
        "maintain", parents=[common], help="OPTIMIZE (Z-order) and VACUUM the Delta tables",
        description="Compact every medallion table, Z-order those whose readers filter on a column, then VACUUM "
        "files older than analytical.vacuum_retention.")
    maintain.add_argument("--no-vacuum", action="store_true", help="only OPTIMIZE")
    maintain.add_argument("--format", choices=["table", "json"], default="table")
    maintain.set_defaults(handler=cmd_maintain)

    check = commands.add_parser(
        "check", parents=[common], help="the tables' Great Expectations suites; exit 1 when one fails",
        description="Validate silver/clicks, silver/quarantine and both gold tables against their expectations "
        "with Great Expectations (Spark data source), write the Data Docs HTML (under quality.docs_dir, default "
        "storage.root/_quality) and say where. Exit 1 when an expectation fails.")
    check.add_argument("--format", choices=["table", "json"], default="table")
    check.set_defaults(handler=cmd_check)

    reconcile = commands.add_parser(
        "reconcile", parents=[common, window_range], help="hot-pages alerts against gold; exit 1 when a difference is unexplained",
        description="Compare, per page and 5-second window closed in both paths, the highest alerted count with "
        "gold/page_clicks_5s, and give each difference one cause derived from bronze, silver and the hot-pages "
        "checkpoint (README, Reconciliation). Exit 1 when any difference is unexplained.")
    reconcile.add_argument("--json", action="store_true", help="print the result as JSON")
    reconcile.set_defaults(handler=cmd_reconcile)

    bench = commands.add_parser("bench", parents=[common], help="benchmarks; each prints one JSON object",
                                description="Benchmarks. Each run uses fresh topics, tables and checkpoints.")
    bench_commands = bench.add_subparsers(dest="bench_command", metavar="BENCHMARK", required=True)
    bench_latency = bench_commands.add_parser(
        "latency", parents=[common], help="time-to-alert under several configurations, same load",
        description="Time-to-alert (Kafka append of the crossing click -> Kafka append of the first alert) "
        "for each configuration in turn, on the same generated load; p50/p95/p99/max and ratios to tuned.")
    bench_latency.add_argument("--rate", type=_positive(float), default=20_000.0)
    bench_latency.add_argument("--seconds", type=_positive(float), default=60.0)
    bench_latency.add_argument("--hot-pages", type=int, default=8, help="hot pages in the load (default 8)")
    bench_latency.add_argument("--configs", default="tuned,spark-defaults,seed",
                               help="comma-separated: tuned, spark-defaults, seed (default: all three)")
    bench_latency.add_argument("--with-medallion", action="store_true",
                               help="instead of --configs: the fast path alone, then with the four medallion streams "
                               "beside it in its own application (FAIR pools), then in a separate application under "
                               "nice (as `lakehouse run` starts it); p99 ratios over alone (target 1.2)")
    bench_latency.set_defaults(handler=cmd_bench_latency)
    bench_throughput = bench_commands.add_parser(
        "throughput", parents=[common], help="highest offered rate sustained without Kafka lag growing",
        description="Offer each rate in turn for --seconds; stop at the first whose Kafka lag grows.")
    bench_throughput.add_argument("--rates", default="10000,20000,25000,30000", help="rates to try, in order")
    bench_throughput.add_argument("--seconds", type=_positive(float), default=60.0)
    bench_throughput.add_argument("--hot-pages", type=int, default=3)
    bench_throughput.set_defaults(handler=cmd_bench_throughput)
    bench_memory = bench_commands.add_parser(
        "memory", parents=[common], help="state rows and driver JVM RSS over a long run",
        description="Run the fast path at --rate for --seconds, sampling state rows and the driver JVM's RSS.")
    bench_memory.add_argument("--rate", type=_positive(float), default=20_000.0)
    bench_memory.add_argument("--seconds", type=_positive(float), default=600.0)
    bench_memory.add_argument("--hot-pages", type=int, default=3)
    bench_memory.set_defaults(handler=cmd_bench_memory)
    bench_backfill = bench_commands.add_parser(
        "backfill", parents=[common], help="medallion backfill: events/s and growth with history",
        description="Backfill N events from bronze to gold with AvailableNow (events per second), then time an "
        "incremental backfill of the same N new events on top of 1x and of --history x N events of history "
        "(the ratio shows whether a backfill slows down as the tables grow). Reports peak memory.")
    bench_backfill.add_argument("--events", type=_positive(int), default=200_000, help="N (default 200000)")
    bench_backfill.add_argument("--history", type=_positive(int), default=10, help="the larger history, in N (default 10)")
    bench_backfill.add_argument("--span", type=_positive(float), default=3600.0,
                                help="seconds of event time each block of N events covers (default 3600)")
    bench_backfill.set_defaults(handler=cmd_bench_backfill)

    demo = commands.add_parser(
        "demo", parents=[common], help="the whole story, end to end, on the embedded default (a few minutes)",
        description="Start the embedded broker, run both paths side by side on fresh demo topics while synthetic "
        "traffic with hot pages (and a little late, duplicate and malformed data) arrives, backfill the medallion, "
        "then show the alerts with time-to-alert, a trend query, the expectations and the reconciliation, and stop "
        "what it started. Tables go under storage.root/demo.")
    demo.add_argument("--seconds", type=_positive(float), default=60.0, help="seconds of traffic (default 60)")
    demo.add_argument("--rate", type=_positive(float), default=8_000.0, help="events per second (default 8000)")
    demo.set_defaults(handler=cmd_demo)

    commands.add_parser("config", parents=[common], help="print the effective configuration (secrets masked)",
                        description="Print the configuration after layering and overrides, secrets masked."
                        ).set_defaults(handler=cmd_config)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from shared.processes import die_with_parent

    die_with_parent()  # started by another lakehouse command: end with it, however it ends
    args = build_parser().parse_args(argv)
    try:
        config = load_config(getattr(args, "config", None), getattr(args, "overrides", []))
        return args.handler(config, args)
    except LakehouseError as error:
        _stderr(f"error: {error}")
        return error.exit_code
    except KeyboardInterrupt:
        _stderr("interrupted")
        return 130
    except BrokenPipeError:  # the reader went away (`lakehouse alerts --follow | head`): not an error
        sys.stdout = open(os.devnull, "w")
        return 0
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] in {"pyspark", "delta", "kafka", "great_expectations", "yaml", "pydantic"}:
            _stderr(f"error: the Python package {error.name} is not installed here: run `make setup` "
                    "and use .venv/bin/lakehouse")
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
