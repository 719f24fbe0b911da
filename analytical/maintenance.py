"""`lakehouse maintain`: compact the medallion's tables, cluster them for their readers, VACUUM.

Streams write many small files (one or more per micro-batch and table). OPTIMIZE rewrites them
into few large ones; where a reader filters on a column, Z-ordering by it keeps each file's
min/max range on that column narrow, so Delta's data skipping reads only the files that can match.
Each table declares its Z-order columns (`Table.z_order`, beside the reason); a table without them
(bronze and the quarantine, read whole in commit order) is only compacted.

OPTIMIZE commits are marked dataChange=false, so the streams that read these tables skip them.
VACUUM then deletes files no version within `analytical.vacuum_retention` refers to.

Gold tables made before the project stopped using deletion vectors still list them in their
protocol, which `deltalake` and Polars refuse to read: maintain rewrites their marked files and
drops the feature first (`_drop_deletion_vectors`), once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import SparkSession

from analytical.registry import TABLES
from analytical.tables import Table
from shared.config import Config
from shared.progress import tracked

#: Delta refuses a VACUUM retention under this unless its safety check is turned off.
DELTA_MIN_RETENTION_HOURS = 168
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
RETENTION_PROPERTY = "delta.deletedFileRetentionDuration"


def maintain(spark: SparkSession, config: Config, report: Callable[[str], None],
             vacuum: bool = True, tables: Sequence[Table] = TABLES) -> list[dict[str, Any]]:
    """OPTIMIZE (with Z-order where listed), then VACUUM, every table that exists; one row per table."""
    from delta.tables import DeltaTable

    retention_hours = config.analytical.vacuum_retention.total_seconds() / 3600
    results = []
    for table in tracked(tables, "maintain", unit="tables"):
        z_order = table.z_order
        located = table.at(config.storage.root)
        path = located.path
        if not located.exists(spark):
            report(f"[maintain] {table}: no table yet, skipped")
            continue
        _drop_deletion_vectors(spark, path, report)
        delta = DeltaTable.forPath(spark, path)
        files_before = _file_count(delta)
        optimizer = delta.optimize()
        metrics = (optimizer.executeZOrderBy(*z_order) if z_order else optimizer.executeCompaction()).first()
        files_after = _file_count(delta)
        row = {"table": table.name, "zOrderBy": ",".join(z_order) or None, "filesBefore": files_before,
               "filesAfter": files_after,
               "filesRemoved": metrics["metrics"]["numFilesRemoved"], "filesAdded": metrics["metrics"]["numFilesAdded"]}
        if vacuum:
            row["filesVacuumed"] = vacuum_table(spark, path, retention_hours)
            row["vacuumRetentionHours"] = retention_hours
        report(f"[maintain] {table}: {files_before} -> {files_after} files"
               + (f", Z-ordered by {row['zOrderBy']}" if z_order else ""))
        results.append(row)
    return results


def _drop_deletion_vectors(spark: SparkSession, path: str, report: Callable[[str], None]) -> None:
    """Make a table that lists deletion vectors readable by every reader: stop making them, rewrite
    the files that have them, drop the feature from the protocol (Delta 4 keeps the history readable
    through a checkpoint, no truncation)."""
    features = spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["tableFeatures"] or []
    if "deletionVectors" not in features:
        return
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")
    spark.sql(f"REORG TABLE delta.`{path}` APPLY (PURGE)")
    spark.sql(f"ALTER TABLE delta.`{path}` DROP FEATURE deletionVectors")
    report(f"[maintain] {path}: deletion vectors purged and dropped from the protocol (readable by deltalake)")


def _file_count(delta: Any) -> int:
    return int(delta.detail().first()["numFiles"])


def vacuum_table(spark: SparkSession, path: str, retention_hours: float, lite: bool = False) -> int:
    """VACUUM the table at `path` with `retention_hours`; how many files it deleted. Delta 4 ignores a
    retention argument other than 0 and reads the table's property, so that is set first; a retention of
    none changes no property (a property's commit would fail each concurrent write to the table).

    `lite`: only the files the log's remove actions name (VACUUM LITE), never one the log does not know,
    such as a file a running write has made and not committed yet: what a retention of none needs while
    streams write the table (analytical.erasure)."""
    from delta.tables import DeltaTable

    delta = DeltaTable.forPath(spark, path)
    retention = f"interval {retention_hours:g} hours"
    if retention_hours and delta.detail().first()["properties"].get(RETENTION_PROPERTY) != retention:
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('{RETENTION_PROPERTY}' = '{retention}')")
    previous = spark.conf.get(_RETENTION_CHECK, "true")
    if retention_hours < DELTA_MIN_RETENTION_HOURS:
        spark.conf.set(_RETENTION_CHECK, "false")  # the retention is a deliberate choice
    try:
        spark.sql(f"VACUUM delta.`{path}`{' LITE' if lite else ''} RETAIN {retention_hours:g} HOURS").collect()
    finally:
        spark.conf.set(_RETENTION_CHECK, previous)
    ended = delta.history(10).where("operation = 'VACUUM END'").orderBy("version", ascending=False).first()
    return int(ended["operationMetrics"].get("numDeletedFiles", 0)) if ended else 0
