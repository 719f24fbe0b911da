"""`lakehouse check`: every table's expectations as Great Expectations suites, with Data Docs.

The suites are the ones the tables declare (analytical.registry, analytical.quality): each becomes an ExpectationSuite
validated, through a Spark data source, against the whole table with its derived columns. The
Great Expectations project is a file context under `quality.docs_dir` (default
storage.root/_quality), so the suites, the validation results and the Data Docs HTML stay
between runs and the Data Docs show the history of checks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from analytical.quality import Suite
from analytical.registry import TABLES, written
from analytical.tables import NoCommitYet, Table
from shared.config import Config
from shared.progress import tracked
from shared.storage import local_side

Report = Callable[[str], None]
_SOURCE = "lakehouse"
_WHOLE_TABLE = "whole table"


def suites(config: Config, tables: Sequence[Table] = TABLES) -> list[Suite]:
    """The suite of every table that declares one, in the registry's order."""
    return [table.suite(config) for table in tables if table.expectations is not None]


def project_dir(config: Config) -> Path:
    """Where the Great Expectations project (and its Data Docs) lives: a local folder, beside a local
    root's tables, else on this machine (`local_side`)."""
    if config.quality.docs_dir is not None:
        return config.quality.docs_dir
    return local_side(config.storage.root, "_quality")


def check(spark: SparkSession, config: Config, report: Report,
          tables: Sequence[Table] | None = None) -> tuple[list[dict[str, Any]], str, dict[str, str]]:
    """Validate every suite of `tables` (default: those the configuration's streams write); (one row per
    expectation, the Data Docs index URL, why each suite that was not validated was skipped: a table it
    reads has no commit yet).

    A table with no commit is one a stream left before its first commit: the others are still checked."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="file", project_root_dir=str(project_dir(config)))
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    context.variables.save()
    source = _get_or_add(lambda: context.data_sources.get(_SOURCE), lambda: context.data_sources.add_spark(_SOURCE))

    declared = {table.name: table for table in TABLES}

    def read(table: Table | str) -> DataFrame:
        return declared[str(table)].at(config.storage.root).read(spark)

    rows, skipped = [], {}
    for suite in tracked(suites(config, written(config) if tables is None else tables), "check", unit="suites",
                         detail=lambda suite: suite.table):
        try:
            frame = read(suite.table).transform(suite.derive)
            if suite.table_view is not None:
                frame = suite.table_view(frame, read)
        except NoCommitYet as uncommitted:
            skipped[suite.table] = str(uncommitted)
            report(f"[check] {suite.table}: skipped, {uncommitted}")
            continue
        asset = _get_or_add(lambda: source.get_asset(suite.name), lambda: source.add_dataframe_asset(suite.name))
        batch = _get_or_add(lambda: asset.get_batch_definition(_WHOLE_TABLE),
                            lambda: asset.add_batch_definition_whole_dataframe(_WHOLE_TABLE))
        expectations = [e.to_gx() for e in (*suite.on_write, *suite.on_table)]
        gx_suite = context.suites.add_or_update(gx.ExpectationSuite(name=suite.name, expectations=expectations))
        validation = context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=suite.name, data=batch, suite=gx_suite))
        checkpoint = context.checkpoints.add_or_update(gx.Checkpoint(
            name=suite.name, validation_definitions=[validation],
            actions=[gx.checkpoint.UpdateDataDocsAction(name="data_docs")],
            result_format={"result_format": "SUMMARY"}))
        report(f"[check] {suite.table}: {len(expectations)} expectations")
        frame.persist()
        try:
            result = checkpoint.run(batch_parameters={"dataframe": frame})
        finally:
            frame.unpersist()
        for validation_result in result.run_results.values():
            rows += [_row(suite.table, outcome) for outcome in validation_result.results]
    return rows, context.get_docs_sites_urls()[0]["site_url"], skipped


def _row(table: str, outcome) -> dict[str, Any]:
    config = outcome.expectation_config
    result = outcome.result or {}
    error = _error(outcome.exception_info)
    return {
        "table": table,
        "expectation": (config.meta or {}).get("name", config.type),
        "type": config.type,
        "success": bool(outcome.success),
        "unexpected": result.get("unexpected_count", 0 if outcome.success else None),
        "examples": [str(value) for value in (result.get("partial_unexpected_list") or [])[:3]],
        "error": error,
    }


def _error(info: Any) -> str | None:
    """The first exception message in GX's exception_info (flat, or keyed by metric)."""
    if not isinstance(info, dict):
        return None
    if info.get("raised_exception"):
        return info.get("exception_message")
    for value in info.values():
        if isinstance(value, dict) and value.get("raised_exception"):
            return value.get("exception_message")
    return None


def _get_or_add(get: Callable[[], Any], add: Callable[[], Any]) -> Any:
    try:
        return get()
    except (KeyError, LookupError, ValueError):
        return add()
