"""`lakehouse query` and `lakehouse sql`: questions over the tables, in this process (DuckDB over
delta-rs, no JVM) from a local folder or S3, or by Spark."""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.cli.common import instant, output_options, positive, print_rows, say, window_range_options
from shared.config import Config, StorageConfig
from shared.errors import ConfigError
from shared.object_store import is_s3, require_reachable
from shared.storage import local_folder

ENGINES = ("auto", "duckdb", "spark")


def in_process_root(storage: StorageConfig) -> str | None:
    """The lake's root when the in-process engine can read it (a local folder or S3) and is installed,
    else None; an S3 root's bucket is checked first, so a store that cannot answer is said in one line."""
    if local_folder(storage.root) is None and not is_s3(storage.root):
        return None
    try:
        import deltalake  # noqa: F401
        import duckdb  # noqa: F401
    except ImportError:
        return None
    require_reachable(storage.root, storage.s3)
    local = local_folder(storage.root)
    return storage.root if local is None else str(local)


def open_lake(root: str, storage: StorageConfig, **moment: Any) -> Any:
    """The lake under `root` for DuckDB (`moment`: SqlLake's as_of and versions), having said in one
    line which tables it leaves out for having no commit yet."""
    from analytical.sql import SqlLake

    lake = SqlLake(root, s3=storage.s3, **moment)
    note = lake.note()
    if note:
        say(note)
    return lake


def _engine(config: Config, asked: str) -> str:
    if asked == "spark":
        return "spark"
    root = in_process_root(config.storage)
    if root is not None:
        return "duckdb"
    if asked == "duckdb":
        raise ConfigError(f"the in-process engine reads a local folder or S3 (storage.root: {config.storage.root}) "
                          "and needs the readers extra (`make setup`, or pip install -e '.[readers]'); use --engine spark")
    return "spark"


def cmd_query(config: Config, args: argparse.Namespace) -> int:
    from analytical import trends

    question = trends.QUESTIONS[args.question]
    values = {key: getattr(args, key) for key in question.parameters}
    engine = _engine(config, args.engine)
    moment = f" as of {args.as_of}" if args.as_of else ""
    if engine == "duckdb":
        from analytical.sql import sql_name

        table = sql_name(question.table)
        as_of = None if args.as_of is None or args.as_of.isdigit() else instant(args.as_of)
        versions = {table: int(args.as_of)} if args.as_of and args.as_of.isdigit() else {}
        lake = open_lake(in_process_root(config.storage), config.storage, as_of=as_of, versions=versions)
        if table not in lake.tables:
            raise lake.absent(table, f"there is no Delta table {question.table} under "
                              f"{config.storage.root}: run `lakehouse analytical --available-now` to build it"
                              + (" (with sessions.enabled: true)" if question.table != trends.GOLD_PAGE_CLICKS_5S else ""))
        columns, rows = trends.on_duckdb(lake, args.question, args.start, args.end, **values)
        say(f"{len(rows)} rows from {question.table} version {lake.tables[table]}{moment} "
            "(DuckDB, in this process)")
    else:
        from analytical.registry import TABLES
        from shared.spark import spark_session

        spark = spark_session(config)
        [declared] = [table for table in TABLES if table.name == question.table]
        result = trends.on_spark(declared.at(config.storage.root).read(spark, as_of=args.as_of), args.question,
                                 args.start, args.end, **values)
        rows, files = trends.answer(result)
        columns = result.columns
        say(f"{len(rows)} rows from {question.table}{moment} (Spark"
            + (f"; {files} data files read)" if files is not None else ")"))
    print_rows(rows, columns, args.format)
    return 0


def _version(text: str) -> tuple[str, int]:
    name, sep, number = text.partition("=")
    if not sep or not number.isdigit():
        raise argparse.ArgumentTypeError(f"expected TABLE=VERSION, e.g. gold.page_clicks_5s=3, got {text}")
    return name, int(number)


def cmd_sql(config: Config, args: argparse.Namespace) -> int:
    root = in_process_root(config.storage)
    if root is None:
        raise ConfigError(f"lakehouse sql reads a local folder or S3 (storage.root: {config.storage.root}) and needs "
                          "the readers extra (`make setup`, or pip install -e '.[readers]')")
    lake = open_lake(root, config.storage, as_of=args.as_of, versions=dict(args.version or []))
    columns, rows = lake.answer(args.query)
    moment = f" as of {args.as_of.isoformat()}" if args.as_of else ""
    say(f"{len(rows)} rows (DuckDB over {', '.join(f'{name}@v{version}' for name, version in lake.tables.items())}"
        f"{moment})")
    print_rows(rows, columns, args.format)
    return 0


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    output = output_options()

    query = commands.add_parser(
        "query", parents=[common], help="historical trend questions on gold, with time travel",
        description="Answer a question from gold. Times are ISO-8601 (UTC unless a zone is given); "
        "a window belongs to [--from, --to) by its start. Each question is one SQL text run by DuckDB in this "
        "process (a local folder or S3), or by Spark (--engine spark).")
    questions = query.add_subparsers(dest="question", metavar="QUESTION", required=True)
    query_options = argparse.ArgumentParser(add_help=False, parents=[window_range_options(), output])
    query_options.add_argument("--as-of", metavar="VERSION|TIMESTAMP",
                               help="read gold as it was at this Delta version or timestamp (time travel)")
    query_options.add_argument("--engine", choices=ENGINES, default="auto",
                               help="auto (default): DuckDB in this process when the readers extra is installed, else Spark")
    top = questions.add_parser("top-pages", parents=[common, query_options], help="pages with the most clicks",
                               description="The pages with the most clicks in the range, with hot windows and peak.")
    top.add_argument("--limit", type=positive(int), default=10)
    trend = questions.add_parser("trend", parents=[common, query_options], help="one page's clicks per hour or day",
                                 description="One page's clicks, hot windows and peak window per hour or day (UTC).")
    trend.add_argument("--page", required=True, help="the pageId")
    trend.add_argument("--bucket", choices=["hour", "day"], default="hour")
    questions.add_parser("hot-windows", parents=[common, query_options], help="windows over the threshold",
                         description="Every hot window (more clicks than the threshold) in the range, oldest first.")
    questions.add_parser("sessions", parents=[common, query_options], help="sessions per day: engaged, converted",
                         description="From gold/user_sessions, per UTC day of the sessions that started in the "
                         "range (--from/--to by sessionStart): sessions, engaged sessions and share, converted "
                         "sessions and rate, events.")
    conversion = questions.add_parser(
        "conversion", parents=[common, query_options], help="per page: conversion while hot against not",
        description="From gold/page_conversion, per page: the sessions that viewed it while its 5-second window "
        "was hot and those of them that purchased later in the session, the same for the sessions that viewed it "
        "while it was not, and each rate. The hour of a session's first view of the page decides --from/--to. "
        "Few sessions behind a rate make it noise: the counts are printed beside it.")
    conversion.add_argument("--page", help="one pageId (default: every page)")
    conversion.add_argument("--limit", type=positive(int), default=10)
    query.set_defaults(handler=cmd_query, uses_secrets=False)

    sql = commands.add_parser(
        "sql", parents=[common, output], help="any read-only SQL over the tables (DuckDB, no JVM)",
        description="Run one SELECT over the product's Delta tables, in this process (DuckDB over delta-rs; no "
        "Spark). Tables by their contract names: bronze.clicks, silver.clicks, silver.quarantine, "
        "gold.page_clicks_5s, gold.page_clicks_hourly, gold.user_sessions, gold.page_conversion, ops.stream_progress. Timestamps print as ISO-8601 UTC. "
        "Anything but a SELECT is refused.",
        epilog="example: lakehouse sql \"SELECT pageId, sum(clickCount) AS clicks FROM gold.page_clicks_5s "
        "GROUP BY pageId ORDER BY clicks DESC LIMIT 5\"")
    sql.add_argument("query", metavar="SQL", help="one SELECT (or WITH ... SELECT)")
    sql.add_argument("--as-of", type=instant, metavar="TIMESTAMP",
                     help="read every table as it was at this time (Delta time travel; ISO-8601, UTC unless a zone is given)")
    sql.add_argument("--version", type=_version, action="append", metavar="TABLE=VERSION",
                     help="read one table at a Delta version (repeatable), e.g. gold.page_clicks_5s=3")
    sql.set_defaults(handler=cmd_sql, uses_secrets=False)
