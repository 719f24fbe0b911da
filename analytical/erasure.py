"""`lakehouse forget`: erase users' clicks from the lake, every row and every byte of them.

  user ids -> the SHA-256 of each: the only form of an id the lake keeps, here and in Delta's log
  -> ops/erasure_requests: one row per id, open (no completedAt) until its erasure is done
  -> each table whose rows name a user (`Table.user_of_row`: bronze and the quarantine from the raw
     bytes, silver/clicks and gold/user_sessions by userId), in the streams' order:
       the rows whose user hashes to a requested id, counted, then deleted in one commit whose
       predicate names hashes only (retried when a stream's write commits first)
       -> every file the log has removed, deleted now (VACUUM LITE without retention): the files that
          held the rows, and older rewrites' that may have; a file a running write has not committed
          yet is not in the log, so it is never touched
  -> the requests closed: completedAt, and the rows each table lost

Old versions of an erased table name files that are gone: reading one fails, which is the point. Gold's
page counts and conversion cells name no user and keep their counts (CONTRACT.md). The streams that read
an erased table skip the erasure's commits (`TableAt.read_stream`). Running `forget` again finishes what
an interrupted one left: the deletes find nothing the second time, and the open requests close.

    erase(spark, config, ["u-123"], report)
    -> [{"table": "bronze/clicks", "rowsRemoved": 41, ...}, {"table": "silver/clicks", ...}, ...]
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, MapType, StringType, StructField, StructType, TimestampType

from analytical import bronze_clicks
from analytical.maintenance import RETENTION_PROPERTY, vacuum_table
from analytical.registry import TABLES
from analytical.tables import Table
from shared.config import Config
from shared.errors import ConfigError, LakehouseError

#: How often a delete is tried when a stream's write to the same table commits first.
DELETE_ATTEMPTS = 10


def user_hash(user_id: str) -> str:
    """The id as the lake keeps it: SHA-256 of its UTF-8 bytes, in hex, as Spark's `sha2(userId, 256)`.

        user_hash("u1") -> "a0dc65ffca799873cbea0ac274015b9526505daaaed385155425f7337704883e"
    """
    return hashlib.sha256(user_id.encode()).hexdigest()


def requested_ids(ids: Iterable[str]) -> list[str]:
    """The ids of a request, each once, in order; an empty or blank one is a ConfigError."""
    chosen: list[str] = []
    for index, user_id in enumerate(ids):
        if not user_id.strip():
            raise ConfigError(f"user id {index + 1} is empty: name each user to forget by their userId")
        if user_id not in chosen:
            chosen.append(user_id)
    if not chosen:
        raise ConfigError("no user id given: --user-id ID (repeatable) or --ids-file FILE")
    return chosen


def of_users(table: Table, hashes: Sequence[str]) -> Column:
    """Whether a row of `table` names one of the users whose hashes are `hashes`."""
    if table.user_of_row is None:
        raise LakehouseError(f"{table} names no user")
    return F.sha2(table.user_of_row(), 256).isin(list(hashes))


#: What the lake keeps of each request (its id hashed, never in clear).
REQUESTS = Table(
    "ops/erasure_requests",
    StructType([
        StructField("userIdSha256", StringType()),
        StructField("requestedAt", TimestampType()),
        StructField("completedAt", TimestampType()),
        StructField("rowsRemoved", MapType(StringType(), LongType())),
    ]),
)

#: The tables an erasure visits, in the streams' order: each that declares whose rows it holds.
ERASED: tuple[Table, ...] = tuple(table for table in TABLES if table.user_of_row is not None)


def erase(spark: SparkSession, config: Config, user_ids: Sequence[str],
          report: Callable[[str], None], tables: Sequence[Table] = ERASED) -> list[dict[str, Any]]:
    """Erase the users `user_ids` name from every table in `tables` under `storage.root`; one row per
    table (rows removed, files deleted). A root without bronze/clicks is a LakehouseError."""
    root = config.storage.root
    if not bronze_clicks.TABLE.at(root).exists(spark):
        raise LakehouseError(f"{root} is not a lake: it holds no {bronze_clicks.TABLE} table "
                             "(storage.root names the lake to erase from)")
    hashes = sorted({user_hash(user_id) for user_id in requested_ids(user_ids)})
    requested_at = _open_requests(spark, root, hashes)
    report(f"[forget] {len(hashes)} user(s), requested {min(requested_at.values()):%Y-%m-%d %H:%M:%S} UTC")
    results = []
    for table in tables:
        located = table.at(root)
        if not located.exists(spark):
            continue
        found = _rows_per_user(located.read(spark), table, hashes)
        if found:
            _delete(spark, located.path, of_users(table, hashes), report)
            _record_removed(spark, root, table, found)
        files = _delete_removed_files(spark, config, located.path)
        results.append({"table": table.name, "rowsRemoved": sum(found.values()), "filesDeleted": files})
        report(f"[forget] {table}: {sum(found.values())} row(s) removed, {files} file(s) deleted")
    _close_requests(spark, root, hashes)
    return results


def _rows_per_user(rows: DataFrame, table: Table, hashes: Sequence[str]) -> dict[str, int]:
    user = F.sha2(table.user_of_row(), 256)
    return {row["user"]: row["rows"] for row in
            rows.select(user.alias("user")).where(F.col("user").isin(list(hashes)))
            .groupBy("user").agg(F.count(F.lit(1)).alias("rows")).collect()}


def _delete(spark: SparkSession, path: str, condition: Column, report: Callable[[str], None]) -> None:
    """DELETE the rows `condition` selects, again while a concurrent write to the table commits first."""
    from delta.exceptions import DeltaConcurrentModificationException
    from delta.tables import DeltaTable

    for attempt in range(1, DELETE_ATTEMPTS + 1):
        try:
            DeltaTable.forPath(spark, path).delete(condition)
            return
        except DeltaConcurrentModificationException as conflict:
            if attempt == DELETE_ATTEMPTS:
                raise LakehouseError(f"{path}: the erasure's delete conflicted with {DELETE_ATTEMPTS} concurrent "
                                     f"writes in a row ({type(conflict).__name__}); run `lakehouse forget` again") from conflict
            report(f"[forget] {path}: a concurrent write committed first ({type(conflict).__name__}); trying again")
            time.sleep(min(0.2 * attempt, 2.0))


def _delete_removed_files(spark: SparkSession, config: Config, path: str) -> int:
    """Delete every data file the table's log has removed, now (VACUUM LITE, no retention); how many.
    The table's retention is then the configured one again, as `lakehouse maintain` sets it."""
    try:
        return vacuum_table(spark, path, 0, lite=True)
    finally:
        configured = config.analytical.vacuum_retention.total_seconds() / 3600
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES "
                  f"('{RETENTION_PROPERTY}' = 'interval {configured:g} hours')")


def _open_requests(spark: SparkSession, root: str, hashes: Sequence[str]) -> dict[str, datetime]:
    """Each user's open request: the one an interrupted `forget` left, else one recorded now."""
    located = REQUESTS.at(root)
    path = located.create(spark, REQUESTS.schema)
    held = {row["userIdSha256"]: row["requestedAt"] for row in located.read(spark)
            .where(F.col("completedAt").isNull() & F.col("userIdSha256").isin(list(hashes))).collect()}
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    new = [(user, now, None, None) for user in hashes if user not in held]
    if new:
        spark.createDataFrame(new, REQUESTS.schema).write.format("delta").mode("append").save(path)
    return {**held, **{user: now for user, *_ in new}}


def _record_removed(spark: SparkSession, root: str, table: Table, found: dict[str, int]) -> None:
    """Add the rows `table` lost to each user's open request (a request an interrupted run left keeps
    what that run removed: the run that finishes it finds none of those rows)."""
    removed = spark.createDataFrame(list(found.items()), "userIdSha256 string, rows bigint")
    held = F.coalesce(F.col("request.rowsRemoved"), F.create_map().cast("map<string, bigint>"))
    others = F.map_filter(held, lambda name, rows: name != F.lit(table.name))
    _update_open(spark, root, removed, {"rowsRemoved": F.map_concat(
        others, F.create_map(F.lit(table.name), F.coalesce(held[table.name], F.lit(0)) + F.col("done.rows")))})


def _close_requests(spark: SparkSession, root: str, hashes: Sequence[str]) -> None:
    """Mark the users' open requests done, now."""
    users = spark.createDataFrame([(user,) for user in hashes], "userIdSha256 string")
    _update_open(spark, root, users, {"completedAt": F.current_timestamp()})


def _update_open(spark: SparkSession, root: str, users: DataFrame, values: dict[str, Column]) -> None:
    from delta.tables import DeltaTable

    (DeltaTable.forPath(spark, REQUESTS.at(root).path).alias("request")
     .merge(users.alias("done"), "request.userIdSha256 = done.userIdSha256 AND request.completedAt IS NULL")
     .whenMatchedUpdate(set=values)
     .execute())
