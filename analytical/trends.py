"""Historical questions, answered from gold (`lakehouse query`).

From `gold/page_clicks_5s` (complete up to its newest window, which the hourly table, final hours only,
is not):
  - top-pages:   the pages with the most clicks in [start, end);
  - trend:       one page's clicks per hour or day;
  - hot-windows: the windows over the threshold in [start, end).
From `gold/user_sessions` and `gold/page_conversion` (sessions written once final):
  - sessions:    per day, the sessions that started, their engaged share and their conversion;
  - conversion:  per page, the conversion of the sessions that viewed it while hot against those that
                 viewed it while not, each rate with the sessions behind it.

Each question is one SQL text, written once and run as it is by two engines: DuckDB in this
process (`analytical.sql`, no JVM: the default where the lake is a local folder) and Spark (`on_spark`,
for a lake beyond one machine or a root only Spark reads). It reads its table as `{table}` and
takes its values as named parameters (`:start`), never as text pasted into the SQL, so a pageId
is only ever a value. The same text answers for the current version or an older one (Delta time
travel). A rate is a double, NULL where no session stands behind it.

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

#: The tables the questions read, by their path under the storage root.
GOLD_PAGE_CLICKS_5S = "gold/page_clicks_5s"
GOLD_USER_SESSIONS = "gold/user_sessions"
GOLD_PAGE_CONVERSION = "gold/page_conversion"

Bucket = Literal["hour", "day"]


def _in_range(column: str) -> str:
    """A row belongs to [start, end) by `column`; either bound may be open (NULL)."""
    return f"(:start IS NULL OR {column} >= :start) AND (:end IS NULL OR {column} < :end)"


def _rate(part: str, whole: str) -> str:
    """`part / whole` as a double, NULL where `whole` is 0 (both engines, ANSI mode included)."""
    return f"CAST({part} AS DOUBLE) / NULLIF({whole}, 0)"


def _when_hot(hot: bool, column: str) -> str:
    return f"sum(CASE WHEN {'' if hot else 'NOT '}viewedWhileHot THEN {column} ELSE 0 END)"


_IN_RANGE = _in_range("windowStart")
_TOTALS = "sum(clickCount) AS clicks, count_if(isHot) AS hotWindows, max(clickCount) AS peakWindowClicks"


@dataclass(frozen=True)
class Question:
    """One question: its SQL over `{table}`, the table (path under the root), and the parameters it
    takes besides start and end."""

    sql: str
    parameters: tuple[str, ...] = ()
    table: str = GOLD_PAGE_CLICKS_5S
    #: Those of `parameters` it may be asked without (NULL: every page).
    optional: tuple[str, ...] = ()


QUESTIONS: dict[str, Question] = {
    "top-pages": Question(
        f"SELECT pageId, {_TOTALS} FROM {{table}} WHERE {_IN_RANGE} "
        "GROUP BY pageId ORDER BY clicks DESC, pageId LIMIT :limit", ("limit",)),
    "trend": Question(
        f"SELECT date_trunc(:bucket, windowStart) AS bucketStart, {_TOTALS} FROM {{table}} "
        f"WHERE pageId = :page AND {_IN_RANGE} GROUP BY bucketStart ORDER BY bucketStart", ("page", "bucket")),
    "hot-windows": Question(
        f"SELECT windowStart, windowEnd, pageId, clickCount FROM {{table}} WHERE isHot AND {_IN_RANGE} "
        "ORDER BY windowStart, pageId"),
    "sessions": Question(
        "SELECT date_trunc('day', sessionStart) AS day, count(*) AS sessions, count_if(engaged) AS engagedSessions, "
        f"{_rate('count_if(engaged)', 'count(*)')} AS engagedShare, count_if(converted) AS convertedSessions, "
        f"{_rate('count_if(converted)', 'count(*)')} AS conversionRate, sum(events) AS events "
        f"FROM {{table}} WHERE {_in_range('sessionStart')} GROUP BY day ORDER BY day", table=GOLD_USER_SESSIONS),
    "conversion": Question(
        "SELECT pageId, hotSessions, hotConverted, " + _rate("hotConverted", "hotSessions") + " AS hotRate, "
        "otherSessions, otherConverted, " + _rate("otherConverted", "otherSessions") + " AS otherRate FROM ("
        f"SELECT pageId, {_when_hot(True, 'sessions')} AS hotSessions, "
        f"{_when_hot(True, 'convertedSessions')} AS hotConverted, {_when_hot(False, 'sessions')} AS otherSessions, "
        f"{_when_hot(False, 'convertedSessions')} AS otherConverted FROM {{table}} "
        f"WHERE {_in_range('hourStart')} AND (:page IS NULL OR pageId = :page) GROUP BY pageId) "
        "ORDER BY hotSessions DESC, otherSessions DESC, pageId LIMIT :limit", ("limit", "page"),
        table=GOLD_PAGE_CONVERSION, optional=("page",)),
}


def parameters(name: str, start: datetime | None = None, end: datetime | None = None,
               **values: Any) -> dict[str, Any]:
    """The named values question `name` takes; a missing one is a TypeError naming it."""
    question = QUESTIONS[name]
    missing = [key for key in question.parameters if values.get(key) is None and key not in question.optional]
    if missing:
        raise TypeError(f"{name} needs {', '.join(missing)}")
    return {"start": start, "end": end, **{key: values.get(key) for key in question.parameters}}


def on_spark(table: DataFrame, name: str, start: datetime | None = None, end: datetime | None = None,
             **values: Any) -> DataFrame:
    """Question `name` asked of a DataFrame of its table (`QUESTIONS[name].table`), by Spark SQL.

        on_spark(windows, "trend", page="/a", bucket="day")
    """
    return table.sparkSession.sql(QUESTIONS[name].sql, args=parameters(name, start, end, **values), table=table)


def on_duckdb(lake: SqlLake, name: str, start: datetime | None = None, end: datetime | None = None,
              **values: Any) -> tuple[list[str], list[dict[str, Any]]]:
    """Question `name` asked of its table in a `SqlLake` (DuckDB, this process): the same text, with
    DuckDB's spelling of a named parameter (`$start` for `:start`)."""
    question = QUESTIONS[name]
    return lake.answer(duckdb_spelling(question.sql, table=question.table), parameters(name, start, end, **values))


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
