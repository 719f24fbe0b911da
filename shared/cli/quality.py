"""`lakehouse check` and `lakehouse reconcile`: the expectations, and the alerts against gold."""

from __future__ import annotations

import argparse
import json
from typing import Any

from shared.cli.common import say, table, window_range_options
from shared.config import Config


def cmd_check(config: Config, args: argparse.Namespace) -> int:
    from analytical.checks import check
    from shared.spark import spark_session

    spark = spark_session(config)
    rows, docs = check(spark, config, say)
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
        print(table(list(tables.values()), ["table", "expectations", "passed", "failed"]))
        if failed:
            print()
            print(table([{**row, "examples": "; ".join(row["examples"]) or row["error"] or ""} for row in failed],
                         ["table", "expectation", "unexpected", "examples"]))
    say(f"Data Docs: {docs}")
    if failed:
        say(f"{len(failed)} of {len(rows)} expectations failed")
    return 1 if failed else 0


def cmd_reconcile(config: Config, args: argparse.Namespace) -> int:
    from analytical.reconciliation import CAUSES, reconcile
    from shared.spark import spark_session

    spark = spark_session(config)
    say(f"reconciling {config.kafka.topics.alerts} against gold under {config.storage.root}")
    result = reconcile(spark, config, args.start, args.end)
    if result["invalidAlertRecords"]:
        say(f"warning: {result['invalidAlertRecords']} records on {config.kafka.topics.alerts} are not valid "
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
            print(table(result["mismatches"], ["windowStart", "pageId", "operationalCount", "goldCount", "cause"]))
            print()
            for cause, count in result["byCause"].items():
                print(f"{count:6d}  {cause}: {CAUSES.get(cause, 'no record in the data reproduces the alerted count')}")
        print("consistent" if result["consistent"] else "NOT consistent: some differences have no cause in the data")
    return 0 if result["consistent"] else 1



def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    window_range = window_range_options()
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
