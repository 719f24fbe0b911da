"""`ops/erasure_requests`: one row per user whose clicks `lakehouse forget` erased, or is erasing.

A request names its user by the SHA-256 of the userId only, so that the record of an erasure is not the
personal data it erased. It is open (no completedAt) until every table is done, and counts the rows each
table lost. Two streams read it too: the medallion lands none of a user's records that the topic held
before their erasure completed (`without_erased`), so that `forget` need not wait for it to read them all;
and a session the sessions' state held open when its user was erased is not written when it closes
(`without_forgotten`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timezone

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, MapType, StringType, StructField, StructType, TimestampType

from analytical.tables import Table


def user_hash(user_id: str) -> str:
    """The id as the lake keeps it: SHA-256 of its UTF-8 bytes, in hex, as Spark's `sha2(userId, 256)`.

        user_hash("u1") -> "a0dc65ffca799873cbea0ac274015b9526505daaaed385155425f7337704883e"
    """
    return hashlib.sha256(user_id.encode()).hexdigest()


def without_forgotten(rows: DataFrame, requests: DataFrame, started: str) -> DataFrame:
    """`rows` (with userId and the time column `started`) without those of a user whose erasure was requested
    at or after `started`: what the user did before asking. A row that began after the request is kept.

        rows (u1, 10:00), (u1, 12:00), (u2, 10:00); u1 forgotten at 11:00 -> (u1, 12:00), (u2, 10:00)
    """
    forgotten = F.broadcast(requests.select("userIdSha256", "requestedAt"))
    return rows.join(forgotten, (F.sha2(rows["userId"], 256) == forgotten["userIdSha256"])
                     & (rows[started] <= forgotten["requestedAt"]), "left_anti")


def without_erased(rows: DataFrame, requests: DataFrame, user: Column, appended: str) -> DataFrame:
    """`rows` (whose user is `user`, appended to the topic at the time column `appended`) without the
    records of a user whose erasure is under way, and of one whose erasure completed after they were
    appended: what the erasure would have deleted, had they landed before it.

        rows (u1, 10:00), (u1, 12:00), (u2, 10:00); u1 erased by 11:00 -> (u1, 12:00), (u2, 10:00)
        rows (u1, 10:00), (u1, 12:00); u1's erasure still running -> none
    """
    erased = F.broadcast(requests.select("userIdSha256", "completedAt"))
    return rows.join(erased, (F.sha2(user, 256) == erased["userIdSha256"])
                     & (erased["completedAt"].isNull() | (rows[appended] <= erased["completedAt"])), "left_anti")


def requests_under(spark: SparkSession, root: str) -> DataFrame | None:
    """The requests recorded under `root` now, None when there are none yet (no table: nothing to read).

    Read once, into the driver: a Delta table read is resolved again by each query that uses it, so a
    batch that filtered two writes by the table itself could filter one by a request the other did not
    see (a request recorded between the two)."""
    located = TABLE.at(root)
    if not located.exists(spark):
        return None
    return spark.createDataFrame(located.read(spark).collect(), TABLE.schema)


def open_requests(spark: SparkSession, root: str, hashes: Sequence[str]) -> dict[str, datetime]:
    """Each user's open request: the one an interrupted `forget` left, else one recorded now."""
    located = TABLE.at(root)
    path = located.create(spark, TABLE.schema)
    held = {row["userIdSha256"]: row["requestedAt"] for row in located.read(spark)
            .where(F.col("completedAt").isNull() & F.col("userIdSha256").isin(list(hashes))).collect()}
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    new = [(user, now, None, None) for user in hashes if user not in held]
    if new:
        spark.createDataFrame(new, TABLE.schema).write.format("delta").mode("append").save(path)
    return {**held, **{user: now for user, *_ in new}}


def close_requests(spark: SparkSession, root: str, requested_at: dict[str, datetime],
                   erased: dict[str, dict[tuple[str, str], int]]) -> None:
    """Mark the users' open requests done, now, with the rows each table's erasure deletes removed of them
    (`erased`: per table, the rows per user hash and request time, as its deletes' commits keep them)."""
    from delta.tables import DeltaTable

    users = spark.createDataFrame(
        [(user, {table: rows.get((user, at.isoformat()), 0) for table, rows in erased.items()})
         for user, at in sorted(requested_at.items())], "userIdSha256 string, rowsRemoved map<string, bigint>")
    (DeltaTable.forPath(spark, TABLE.at(root).path).alias("request")
     .merge(users.alias("done"), "request.userIdSha256 = done.userIdSha256 AND request.completedAt IS NULL")
     .whenMatchedUpdate(set={"completedAt": F.current_timestamp(), "rowsRemoved": F.col("done.rowsRemoved")})
     .execute())


TABLE = Table(
    "ops/erasure_requests",
    StructType([
        StructField("userIdSha256", StringType()),
        StructField("requestedAt", TimestampType()),
        StructField("completedAt", TimestampType()),
        StructField("rowsRemoved", MapType(StringType(), LongType())),
    ]),
)
