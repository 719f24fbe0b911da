"""`lakehouse maintain`: compact the medallion's tables, cluster them for their readers, VACUUM.

Streams write many small files (one or more per micro-batch and table). OPTIMIZE rewrites them
into few large ones; where a reader filters on a column, Z-ordering by it keeps each file's
min/max range on that column narrow, so Delta's data skipping reads only the files that can match:

  - silver/clicks by eventTime: the silver MERGE finds duplicates by an eventTime range;
  - gold/page_clicks_5s by pageId, windowStart: `query trend --page` and the gold MERGE's window range;
  - gold/page_clicks_hourly by pageId: per-page trends over hours;
  - bronze and quarantine are only compacted (read whole, in commit order).

OPTIMIZE commits are marked dataChange=false, so the streams that read these tables skip them.
VACUUM then deletes files no version within `analytical.vacuum_retention` refers to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import SparkSession

from analytical.tables import (
    BRONZE_CLICKS,
    GOLD_PAGE_CLICKS_5S,
    GOLD_PAGE_CLICKS_HOURLY,
    SILVER_CLICKS,
    SILVER_QUARANTINE,
    is_delta_table,
    table_path,
)
from shared.config import Config

#: Z-order columns per table; empty means compaction only.
Z_ORDER: dict[str, tuple[str, ...]] = {
    BRONZE_CLICKS: (),
    SILVER_CLICKS: ("eventTime",),
    SILVER_QUARANTINE: (),
    GOLD_PAGE_CLICKS_5S: ("pageId", "windowStart"),
    GOLD_PAGE_CLICKS_HOURLY: ("pageId",),
}
#: Delta refuses a VACUUM retention under this unless its safety check is turned off.
DELTA_MIN_RETENTION_HOURS = 168
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
_RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"


def maintain(spark: SparkSession, config: Config, report: Callable[[str], None],
             vacuum: bool = True) -> list[dict[str, Any]]:
    """OPTIMIZE (with Z-order where listed), then VACUUM, every table that exists; one row per table."""
    from delta.tables import DeltaTable

    retention_hours = config.analytical.vacuum_retention.total_seconds() / 3600
    results = []
    for table, z_order in Z_ORDER.items():
        path = table_path(config.storage.root, table)
        if not is_delta_table(spark, path):
            report(f"[maintain] {table}: no table yet, skipped")
            continue
        delta = DeltaTable.forPath(spark, path)
        files_before = _file_count(delta)
        optimizer = delta.optimize()
        metrics = (optimizer.executeZOrderBy(*z_order) if z_order else optimizer.executeCompaction()).first()
        files_after = _file_count(delta)
        row = {"table": table, "zOrderBy": ",".join(z_order) or None, "filesBefore": files_before,
               "filesAfter": files_after,
               "filesRemoved": metrics["metrics"]["numFilesRemoved"], "filesAdded": metrics["metrics"]["numFilesAdded"]}
        if vacuum:
            _vacuum(spark, path, delta, retention_hours)
            row["vacuumRetentionHours"] = retention_hours
        report(f"[maintain] {table}: {files_before} -> {files_after} files"
               + (f", Z-ordered by {row['zOrderBy']}" if z_order else ""))
        results.append(row)
    return results


def _file_count(delta: Any) -> int:
    return int(delta.detail().first()["numFiles"])


def _vacuum(spark: SparkSession, path: str, delta: Any, retention_hours: float) -> None:
    """VACUUM with the configured retention, which Delta 4 reads from the table's property (it
    ignores the argument)."""
    retention = f"interval {retention_hours:g} hours"
    if delta.detail().first()["properties"].get(_RETENTION_PROPERTY) != retention:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{_RETENTION_PROPERTY}' = '{retention}')")
    previous = spark.conf.get(_RETENTION_CHECK, "true")
    if retention_hours < DELTA_MIN_RETENTION_HOURS:
        spark.conf.set(_RETENTION_CHECK, "false")  # the configured retention is a deliberate choice
    try:
        delta.vacuum()
    finally:
        spark.conf.set(_RETENTION_CHECK, previous)
