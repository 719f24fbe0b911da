"""`lakehouse check` and `lakehouse reconcile`: the expectations, and the alerts against gold."""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.cli.common import output_options, print_rows, say, table, window_range_options
from shared.config import Config


def cmd_check(config: Config, args: argparse.Namespace) -> int:
    from analytical.checks import check
    from shared.spark import spark_session

    spark = spark_session(config)
    rows, docs, skipped = check(spark, config, say)
    failed = [row for row in rows if not row["success"]]

    def text() -> str:
        tables = {}
        for row in rows:
            summary = tables.setdefault(row["table"], {"table": row["table"], "expectations": 0, "passed": 0, "failed": ""})
            summary["expectations"] += 1
            summary["passed"] += row["success"]
        for row in failed:
            tables[row["table"]]["failed"] = ", ".join(filter(None, [tables[row["table"]]["failed"], row["expectation"]]))
        summary = table(list(tables.values()), ["table", "expectations", "passed", "failed"])
        if not failed:
            return summary
        return summary + "\n\n" + table([{**row, "examples": "; ".join(row["examples"]) or row["error"] or ""}
                                          for row in failed], ["table", "expectation", "unexpected", "examples"])

    print_rows(rows, ["table", "expectation", "success", "unexpected", "examples", "error"], args.format,
               document={"success": not failed, "expectations": rows, "dataDocs": docs, "skipped": skipped}, text=text)
    say(f"Data Docs: {docs}")
    if skipped:
        say(f"not checked, no commit yet: {', '.join(skipped)}")
    if failed:
        say(f"{len(failed)} of {len(rows)} expectations failed")
    return 1 if failed else 0


def cmd_reconcile(config: Config, args: argparse.Namespace) -> int:
    from analytical.reconciliation import reconcile
    from shared.spark import spark_session

    spark = spark_session(config)
    say(f"reconciling {config.kafka.topics.alerts} against gold under {config.storage.root}")
    result = reconcile(spark, config, args.start, args.end)
    if result["invalidAlertRecords"]:
        say(f"warning: {result['invalidAlertRecords']} records on {config.kafka.topics.alerts} are not valid "
                "alerts (listed under invalidAlerts in --format json)")
    print_rows(result["mismatches"], ["windowStart", "pageId", "operationalCount", "goldCount", "cause"], args.format,
               document=result, text=lambda: _reconciliation_text(result))
    return 0 if result["consistent"] else 1


def _closed_text(result: dict[str, Any]) -> str:
    if not result["pending"]:
        return "every window closed in both paths"
    if result["closedUpTo"] is None:
        return "the watermarks have closed no window in both paths yet"
    return f"the watermarks have closed windows in both paths up to {result['closedUpTo']}"


def _reconciliation_text(result: dict[str, Any]) -> str:
    """The reconciliation as people read it: the counts, each mismatch, each cause, the verdict."""
    from analytical.reconciliation import CAUSES

    outside = result["outsideHistory"]
    lines = [f"windows compared {result['windowsCompared']}, matched {result['matched']}, "
             f"pending {result['pending']}, mismatches {len(result['mismatches'])}, unexplained {result['unexplained']}"
             + (f", outside the fast path's kept history {outside}" if outside else ""),
             _closed_text(result) + "; "
             f"{result['alertRecords']} alert records ({result['invalidAlertRecords']} invalid)"]
    if result["mismatches"]:
        lines += ["", table(result["mismatches"], ["windowStart", "pageId", "operationalCount", "goldCount", "cause"]), ""]
        lines += [f"{count:6d}  {cause}: {CAUSES.get(cause, 'no record in the data reproduces the alerted count')}"
                  for cause, count in result["byCause"].items()]
    if result["pendingWindows"]:  # each open path says once what would close its windows
        lines += ["", "pending (not closed in both paths yet):",
                  table([{**window, "openIn": " and ".join(window["openIn"])} for window in result["pendingWindows"]],
                        ["windowStart", "pageId", "operationalCount", "goldCount", "openIn"]), ""]
        reasons = {path: why for window in result["pendingWindows"] for path, why in window["why"].items()}
        lines += [f"  open in the {path}: {why}" for path, why in reasons.items()]
    lines.append("consistent" if result["consistent"] else "NOT consistent: some differences have no cause in the data")
    return "\n".join(lines)


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    window_range = window_range_options()
    check = commands.add_parser(
        "check", parents=[common, output_options("one row per expectation")], help="the tables' Great Expectations suites; exit 1 when one fails",
        description="Validate silver/clicks, silver/quarantine and both gold tables against their expectations "
        "with Great Expectations (Spark data source), write the Data Docs HTML (under quality.docs_dir, default "
        "storage.root/_quality) and say where. Exit 1 when an expectation fails.")
    check.set_defaults(handler=cmd_check)

    reconcile = commands.add_parser(
        "reconcile", parents=[common, window_range, output_options("one row per mismatch")], help="hot-pages alerts against gold; exit 1 when a difference is unexplained",
        description="Compare, per page and 5-second window closed in both paths, the highest alerted count with "
        "gold/page_clicks_5s, and give each difference one cause derived from bronze, silver and the hot-pages "
        "checkpoint (QUALITY.md). Exit 1 when any difference is unexplained. A window not closed in both paths is pending, listed with "
        "the path it is open in and what would close it.")
    reconcile.set_defaults(handler=cmd_reconcile)
