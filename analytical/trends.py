"""Historical questions, answered from `gold/page_clicks_5s` (`lakehouse query`).

  - top-pages:   the pages with the most clicks in [start, end);
  - trend:       one page's clicks per hour or day;
  - hot-windows: the windows over the threshold in [start, end).

Each question is one SQL text, written once and run as it is by two engines: DuckDB in this
process (`analytical.sql`, no JVM: the default where the lake is a local folder) and Spark (`on_spark`,
for a lake beyond one machine or a root only Spark reads). It reads the table as `{windows}` and
takes its values as named parameters (`:start`), never as text pasted into the SQL, so a pageId
is only ever a value. The same text answers for the current version or an older one (Delta time
travel). Gold's 5-second table is complete up to its newest window, which the hourly table (final
hours only) is not.

    >>> on_spark(windows, "top-pages", limit=3)     # a Spark DataFrame
    >>> on_duckdb(SqlLake(root), "top-pages", limit=3)  # columns and rows
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from analytical.sql import duckdb_spelling
from shared.spark_internals import executed_plan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from analytical.sql import SqlLake

#: The table every question reads, by its path under the storage root.
GOLD_PAGE_CLICKS_5S = "gold/page_clicks_5s"

Bucket = Literal["hour", "day"]

#: A window belongs to [start, end) by its start; either bound may be open (NULL).
_IN_RANGE = "(:start IS NULL OR windowStart >= :start) AND (:end IS NULL OR windowStart < :end)"
_TOTALS = "sum(clickCount) AS clicks, count_if(isHot) AS hotWindows, max(clickCount) AS peakWindowClicks"


@dataclass(frozen=True)
class Question:
    """One question: its SQL over `{windows}` and the parameters it takes besides start and end."""

    sql: str
    parameters: tuple[str, ...] = ()


QUESTIONS: dict[str, Question] = {
    "top-pages": Question(
        f"SELECT pageId, {_TOTALS} FROM {{windows}} WHERE {_IN_RANGE} "
        "GROUP BY pageId ORDER BY clicks DESC, pageId LIMIT :limit", ("limit",)),
    "trend": Question(
        f"SELECT date_trunc(:bucket, windowStart) AS bucketStart, {_TOTALS} FROM {{windows}} "
        f"WHERE pageId = :page AND {_IN_RANGE} GROUP BY bucketStart ORDER BY bucketStart", ("page", "bucket")),
    "hot-windows": Question(
        f"SELECT windowStart, windowEnd, pageId, clickCount FROM {{windows}} WHERE isHot AND {_IN_RANGE} "
        "ORDER BY windowStart, pageId"),
}


def parameters(name: str, start: datetime | None = None, end: datetime | None = None,
               **values: Any) -> dict[str, Any]:
    """The named values question `name` takes; a missing one is a TypeError naming it."""
    question = QUESTIONS[name]
    missing = [key for key in question.parameters if values.get(key) is None]
    if missing:
        raise TypeError(f"{name} needs {', '.join(missing)}")
    return {"start": start, "end": end, **{key: values[key] for key in question.parameters}}


def on_spark(windows: DataFrame, name: str, start: datetime | None = None, end: datetime | None = None,
             **values: Any) -> DataFrame:
    """Question `name` asked of a DataFrame of gold's 5-second windows, by Spark SQL.

        on_spark(windows, "trend", page="/a", bucket="day")
    """
    return windows.sparkSession.sql(QUESTIONS[name].sql, args=parameters(name, start, end, **values), windows=windows)


def on_duckdb(lake: SqlLake, name: str, start: datetime | None = None, end: datetime | None = None,
              **values: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """Question `name` asked of gold's 5-second table in a `SqlLake` (DuckDB, this process): the same
    text, with DuckDB's spelling of a named parameter (`$start` for `:start`)."""
    return lake.answer(duckdb_spelling(QUESTIONS[name].sql, windows=GOLD_PAGE_CLICKS_5S),
                       parameters(name, start, end, **values))


def answer(result: DataFrame) -> tuple[list[dict[str, Any]], int | None]:
    """Collect a (small) Spark result, timestamps as ISO-8601 UTC text like the alerts', and the
    number of data files the query read (what Delta's data skipping left of the table; None if unknown)."""
    from pyspark.sql import functions as F

    from shared.schema import ALERT_TIMESTAMP_FORMAT

    columns = [
        F.date_format(field.name, ALERT_TIMESTAMP_FORMAT).alias(field.name)
        if field.dataType.typeName() == "timestamp" else F.col(field.name)
        for field in result.schema.fields
    ]
    formatted = result.select(*columns)
    rows = [row.asDict() for row in formatted.collect()]
    return rows, _files_read(formatted)


def _files_read(result: DataFrame) -> int | None:
    """Files the (finished) execution of `result` scanned, from its scan nodes' metrics."""
    plan = executed_plan(result)
    total, found = 0, False
    for node in _plan_nodes(plan):
        if node.nodeName().startswith("Scan"):
            metric = node.metrics().get("numFiles")
            if metric.isDefined():
                total += metric.get().value()
                found = True
    return total if found else None


def _plan_nodes(plan: Any):
    """Every node of a physical plan, looking inside adaptive plans and query stages."""
    stack = [plan]
    while stack:
        node = stack.pop()
        name = node.getClass().getSimpleName()
        if name == "AdaptiveSparkPlanExec":
            stack.append(node.executedPlan())
            continue
        if name.endswith("QueryStageExec"):
            stack.append(node.plan())
            continue
        yield node
        children = node.children()
        stack.extend(children.apply(i) for i in range(children.size()))
