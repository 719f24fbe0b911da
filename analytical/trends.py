"""Historical questions, answered from `gold/page_clicks_5s` (`lakehouse query`).

  - top_pages:   the pages with the most clicks in [from, to);
  - page_trend:  one page's clicks per hour or day;
  - hot_windows: the windows over the threshold in [from, to).

Each is a pure transform of the gold table, so the same code answers for the current version or
for an older one read with Delta time travel (`read_table(..., as_of=...)`). Gold's 5-second table
is complete up to its newest window, which the hourly table (final hours only) is not.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shared.schema import ALERT_TIMESTAMP_FORMAT

Bucket = Literal["hour", "day"]


def in_range(windows: DataFrame, start: datetime | None, end: datetime | None) -> DataFrame:
    """Windows that start in [start, end); either bound may be open."""
    if start is not None:
        windows = windows.where(F.col("windowStart") >= F.lit(start))
    if end is not None:
        windows = windows.where(F.col("windowStart") < F.lit(end))
    return windows


def _totals() -> list[Column]:
    return [
        F.sum("clickCount").alias("clicks"),
        F.count_if("isHot").alias("hotWindows"),
        F.max("clickCount").alias("peakWindowClicks"),
    ]


def top_pages(windows: DataFrame, limit: int) -> DataFrame:
    """pageId, clicks, hotWindows, peakWindowClicks for the `limit` pages with the most clicks."""
    return (
        windows.groupBy("pageId")
        .agg(*_totals())
        .orderBy(F.desc("clicks"), "pageId")
        .limit(limit)
    )


def page_trend(windows: DataFrame, page_id: str, bucket: Bucket) -> DataFrame:
    """bucketStart, clicks, hotWindows, peakWindowClicks for one page, per hour or day (UTC)."""
    return (
        windows.where(F.col("pageId") == F.lit(page_id))
        .groupBy(F.date_trunc(bucket, "windowStart").alias("bucketStart"))
        .agg(*_totals())
        .orderBy("bucketStart")
    )


def hot_windows(windows: DataFrame) -> DataFrame:
    """The hot windows: windowStart, windowEnd, pageId, clickCount, oldest first."""
    return (
        windows.where(F.col("isHot"))
        .select("windowStart", "windowEnd", "pageId", "clickCount")
        .orderBy("windowStart", "pageId")
    )


def answer(result: DataFrame) -> tuple[list[dict[str, Any]], int | None]:
    """Collect a (small) result, timestamps as ISO-8601 UTC text like the alerts', and the number
    of data files the query read (what Delta's data skipping left of the table; None if unknown)."""
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
    plan = result._jdf.queryExecution().executedPlan()
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
