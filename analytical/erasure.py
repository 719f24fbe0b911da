"""`lakehouse forget`: erase users' clicks from the lake, every row and every byte of them.

  user ids -> the SHA-256 of each: the only form of an id the lake keeps, here and in Delta's log
  -> ops/erasure_requests: one row per id, open (no completedAt) until its erasure is done
  -> a hold placed (analytical.erasure_hold): the medallion's next batch waits before it writes, so that
     no append of its beats a delete
  -> the medallion's batch running then, if any, committed (or holding): the batches after it land no
     record of the users that the topic took before the erasure completes, however far behind the topic
     they read
  -> each table whose rows name a user (`Table.user_of_row`: bronze and the quarantine from the raw
     bytes, silver/clicks and gold/user_sessions by userId), downstream first:
       the rows whose user hashes to a requested id, counted, then deleted in one commit whose
       predicate names hashes only and whose userMetadata keeps the counts per user and request
       (retried when a stream's write commits first)
  -> the hold lifted
  -> each of them again, downstream first:
       once the table has an erasure's delete (this run's or an interrupted one's) and its streams
       have read past it, every file the log has removed, deleted now (VACUUM LITE without
       retention): the files that held the rows, and older rewrites' that may have; a file a running
       write has not committed yet is not in the log, so it is never touched
  -> the requests closed: completedAt, and the rows each table lost, from its deletes' commits (those of
     an interrupted run included)

Old versions of an erased table name files that are gone: reading one fails, which is the point. Gold's
page counts and conversion cells name no user and keep their counts (CONTRACT.md). The streams that read
an erased table skip the erasure's commits (`TableAt.read_stream`). Running `forget` again finishes what
an interrupted one left: the deletes find nothing the second time, and the open requests close.

    erase(spark, config, ["u-123"], report)
    -> [{"table": "bronze/clicks", "rowsRemoved": 41, ...}, {"table": "silver/clicks", ...}, ...]
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType

from analytical import bronze_clicks, medallion
from analytical.closed_windows import is_running, running
from analytical.erasure_hold import ErasureHold
from analytical.erasure_requests import close_requests, open_requests, user_hash
from analytical.maintenance import vacuum_table
from analytical.registry import TABLES
from analytical.registry import running as running_streams
from analytical.tables import Table
from shared.checkpoints import read_checkpoint_log
from shared.config import Config
from shared.errors import ConfigError, LakehouseError

#: How often a delete is tried when a stream's write to the same table commits first.
DELETE_ATTEMPTS = 10
#: The commits of a table's history an erasure looks back over for its own deletes and the appends before
#: them (a live table commits once a trigger: minutes of history, not the years its log may hold).
RECENT_COMMITS = 1000


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
    chosen = requested_ids(user_ids)
    hashes = sorted({user_hash(user_id) for user_id in chosen})
    requested_at = open_requests(spark, root, hashes)
    report(f"[forget] {len(hashes)} user(s), requested {min(requested_at.values()):%Y-%m-%d %H:%M:%S} UTC")
    present = [table for table in tables if table.at(root).exists(spark)]
    # Downstream first: a stream that reads a table reads on past its delete while the tables it reads
    # from are erased, so that the files its delete removed can go without waiting for it.
    downstream_first = present[::-1]
    removed = {}
    hold = ErasureHold.under(root, config.storage.s3)
    placed = None if hold is None else hold.place(config.erasure.hold_timeout.total_seconds())
    try:
        def held_at() -> int | None:
            return None if placed is None else hold.held_at(placed)

        _wait_until_the_medallion_skips_them(spark, config, report, lambda batch: (held_at() if held_at() is not None
                                                                                   else -1) >= batch)
        if (held := held_at()) is not None:
            report(f"[forget] the medallion holds its writes at its batch {held} while the rows are deleted")
        for table in present:  # a stopped stream behind a table would read files the erasure deletes: refused first
            _wait_until_read(spark, config, table, _last_append(spark, table.at(root).path) + 1, report, wait=False)
        for table in downstream_first:
            located = table.at(root)
            found, where = _found(located.read(spark), table, chosen, hashes)
            if found:  # the counts go in the delete's own commit: a run killed before it finds and counts them again
                _delete(spark, located.path, of_users(table, hashes) & where,
                        [{"user": user, "requestedAt": requested_at[user].isoformat(), "rows": rows}
                         for user, rows in sorted(found.items())], report)
            removed[table] = sum(found.values())
    finally:
        if hold is not None:
            hold.lift()
    results = []
    for table in downstream_first:
        located, files = table.at(root), 0
        if (deleted_at := _last_delete(spark, located.path)) is not None:  # this run's, or a killed one's
            _wait_until_read(spark, config, table, _last_append(spark, located.path, before=deleted_at) + 1, report,
                             wait=True)
            files = _delete_removed_files(spark, located.path)
        results.append({"table": table.name, "rowsRemoved": removed[table], "filesDeleted": files})
        report(f"[forget] {table}: {removed[table]} row(s) removed, {files} file(s) deleted")
    results.sort(key=lambda row: [table.name for table in present].index(row["table"]))  # in the streams' order
    close_requests(spark, root, requested_at, {table.name: _erased_rows(spark, table.at(root).path) for table in present})
    return results


def _found(rows: DataFrame, table: Table, user_ids: Sequence[str], hashes: Sequence[str]) -> tuple[dict[str, int], Column]:
    """The users' rows per user hash, and where they lie: the range of each of the table's partition and
    statistics columns (numbers and times only) that holds them all. The scan keeps the rows
    `Table.rows_of_users` says may be theirs before it hashes their users.

    The delete adds that range to its predicate, so that Delta reads the few files that hold the rows. A
    delete that reads the whole table takes long enough for a running stream to commit an append meanwhile,
    and Delta then refuses it (no isolation level of Delta's own lets an append and a delete of the same
    partition both commit), again at each try."""
    bounded = [field.name for field in rows.schema.fields if field.name in (*table.partition_by, *table.stats_columns)
               and not isinstance(field.dataType, (StringType, BinaryType))]
    counts = [F.count(F.lit(1)).alias("rows"), *(aggregate(name).alias(f"{label}:{name}") for name in bounded
              for label, aggregate in (("min", F.min), ("max", F.max), ("count", F.count)))]
    candidates = rows if table.rows_of_users is None else rows.where(table.rows_of_users(user_ids))
    per_user = (candidates.select(F.sha2(table.user_of_row(), 256).alias("user"), *bounded)
                .where(F.col("user").isin(list(hashes))).groupBy("user").agg(*counts).collect())
    where = F.lit(True)
    for name in bounded:  # a column null in one of the rows bounds nothing
        if per_user and all(row[f"count:{name}"] == row["rows"] for row in per_user):
            low, high = min(row[f"min:{name}"] for row in per_user), max(row[f"max:{name}"] for row in per_user)
            where = where & F.col(name).between(F.lit(low), F.lit(high))
    return {row["user"]: row["rows"] for row in per_user}, where


def _delete(spark: SparkSession, path: str, condition: Column, erased: list[dict[str, Any]],
            report: Callable[[str], None]) -> None:
    """DELETE the rows `condition` selects, again while a concurrent write to the table commits first. The
    commit keeps `erased` (per user: the request, the rows counted) as its userMetadata (`_erased_rows`)."""
    from delta import exceptions
    from delta.tables import DeltaTable

    conflicts = tuple(getattr(exceptions, name) for name in exceptions.__all__)  # Delta's commit conflicts: no common base

    with _commit_metadata(spark, json.dumps({"erasure": erased})):
        for attempt in range(1, DELETE_ATTEMPTS + 1):
            try:
                DeltaTable.forPath(spark, path).delete(condition)
                return
            except conflicts as conflict:
                if attempt == DELETE_ATTEMPTS:
                    raise LakehouseError(f"{path}: the erasure's delete conflicted with {DELETE_ATTEMPTS} concurrent "
                                         f"writes in a row ({type(conflict).__name__}); run `lakehouse forget` again") from conflict
                report(f"[forget] {path}: a concurrent write committed first ({type(conflict).__name__}); trying again")
                time.sleep(min(0.2 * attempt, 2.0))


#: The session setting whose value Delta keeps in a commit's commitInfo, as its userMetadata.
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


@contextmanager
def _commit_metadata(spark: SparkSession, metadata: str) -> Iterator[None]:
    """The session's commits in the block keep `metadata`; a value the session had before comes back after."""
    theirs = spark.conf.get(USER_METADATA, None)
    spark.conf.set(USER_METADATA, metadata)
    try:
        yield
    finally:
        if theirs is None:
            spark.conf.unset(USER_METADATA)
        else:
            spark.conf.set(USER_METADATA, theirs)


#: Commits a stream that reads the table with skipChangeCommits has nothing to read in: no appended rows.
_NOT_APPENDS = frozenset({"CREATE TABLE", "DELETE", "OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES",
                          "UNSET TBLPROPERTIES", "REORG", "ADD COLUMNS", "CHANGE COLUMN", "DROP FEATURE"})


def _erased_rows(spark: SparkSession, path: str) -> dict[tuple[str, str], int]:
    """Per (user hash, request time) the rows the recent erasures' deletes of the table removed, from
    their commits' userMetadata (`_delete`): a delete a killed run committed is counted by the run after."""
    from delta.tables import DeltaTable

    counts: dict[tuple[str, str], int] = {}
    for row in (DeltaTable.forPath(spark, path).history(RECENT_COMMITS)
                .where("operation = 'DELETE' AND userMetadata IS NOT NULL").select("userMetadata").collect()):
        try:
            erased = json.loads(row.userMetadata).get("erasure", [])
        except (ValueError, AttributeError):
            continue  # a delete of someone else's, with metadata of its own
        for user in erased if isinstance(erased, list) else []:
            key = (user.get("user"), user.get("requestedAt"))
            counts[key] = counts.get(key, 0) + int(user.get("rows", 0))
    return counts


def _last_delete(spark: SparkSession, path: str) -> int | None:
    """The newest version among the recent ones that deleted rows (an erasure's), None when none did."""
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(spark, path).history(RECENT_COMMITS)
    newest = history.where("operation = 'DELETE'").agg(F.max("version")).first()[0]
    return None if newest is None else int(newest)


def _last_append(spark: SparkSession, path: str, before: int | None = None) -> int:
    """The newest version (before `before`, when given) that may append rows a stream has to read; -1 for none.
    An operation not known to append nothing counts as one."""
    from delta.tables import DeltaTable

    history = DeltaTable.forPath(spark, path).history(RECENT_COMMITS).select("version", "operation")
    if before is not None:
        history = history.where(F.col("version") < before)
    newest = history.where(~F.col("operation").isin(list(_NOT_APPENDS))).agg(F.max("version")).first()[0]
    return -1 if newest is None else int(newest)


def _wait_until_the_medallion_skips_them(spark: SparkSession, config: Config, report: Callable[[str], None],
                                         holds_at: Callable[[int], bool]) -> None:
    """Wait until the medallion's batch running at the request, if any, has committed or `holds_at` it
    (analytical.erasure_hold): each batch after reads the request and lands none of the users' records
    (medallion.without_erased_records), whatever the topic still holds of them; a batch that holds has
    read nothing yet. A query that is not running has no batch to wait for: the batch it left
    unfinished runs again, under the request, when it starts."""
    checkpoint = config.checkpoint(medallion.STREAM.name)
    log = read_checkpoint_log(spark, checkpoint)
    if log is None or log.batches[-1].committed:
        return
    batch = log.batches[-1].batch_id

    def done() -> bool:
        now = read_checkpoint_log(spark, checkpoint)
        return any(held.batch_id >= batch and held.committed for held in now.batches) or holds_at(batch) or not running(
            spark, config, medallion.STREAM.name)

    _wait(spark, config, medallion.STREAM, done, lambda: f"is running its batch {batch}, planned before the request",
          report)


def _wait_until_read(spark: SparkSession, config: Config, table: Table, version: int,
                     report: Callable[[str], None], wait: bool) -> None:
    """Wait until each stream that reads `table` has read every commit before `version` (the erasure's
    delete: its VACUUM deletes the files those commits added). A stopped one that has not is refused
    (`wait` False: refused even when it runs)."""
    for stream in running_streams(config):
        if table not in stream.reads:
            continue
        source = stream.reads.index(table)

        def done(stream=stream, source=source) -> bool:
            log = read_checkpoint_log(spark, config.checkpoint(stream.name))
            last = log.last_committed if log else None
            offset = last.end_offsets[source] if last and len(last.end_offsets) > source else None
            return log is None or read_before(offset, version)

        if wait:
            _wait(spark, config, stream, done, lambda: f"has not read {table} up to version {version}", report)
        elif not done() and not running(spark, config, stream.name):
            _refuse(stream, f"has not read {table} up to version {version}")


def read_before(offset: Any, version: int) -> bool:
    """Whether a Delta source's offset (`{"reservoirVersion": v, "index": i, "isStartingVersion": b}`)
    is past every commit before `version`: at a later version, or at that one past its first snapshot.

        read_before({"reservoirVersion": 8, "index": -1, "isStartingVersion": False}, 8) -> True
        read_before({"reservoirVersion": 7, "index": 3, "isStartingVersion": False}, 8) -> False
    """
    if not isinstance(offset, dict) or "reservoirVersion" not in offset:
        return False
    read = int(offset["reservoirVersion"])
    return read > version or (read == version and not offset.get("isStartingVersion", False))


def _wait(spark: SparkSession, config: Config, stream: Any, done: Callable[[], bool], behind: Callable[[], str],
          report: Callable[[str], None]) -> None:
    started = time.monotonic()
    deadline, said = started + config.erasure.catch_up_timeout.total_seconds(), False
    while not done():
        runs = running(spark, config, stream.name)
        if not runs:
            _refuse(stream, behind())
        if time.monotonic() > deadline:
            raise LakehouseError(f"{stream.name} {behind()} after erasure.catch_up_timeout "
                                 f"({config.erasure.catch_up_timeout.total_seconds():g} s) while it {is_running(runs)}: "
                                 "nothing was deleted past this point; run `lakehouse forget` again")
        if not said:
            report(f"[forget] waiting for {stream.name}, which {behind()} ({is_running(runs)})")
            said = True
        time.sleep(0.5)
    if said:
        report(f"[forget] {stream.name} is past it ({time.monotonic() - started:.0f} s)")


def _refuse(stream: Any, behind: str) -> None:
    raise LakehouseError(f"{stream.name} {behind} and is not running: catch it up first (`lakehouse analytical "
                         "--available-now`), then run `lakehouse forget` again")


def _delete_removed_files(spark: SparkSession, path: str) -> int:
    """Delete every data file the table's log has removed, now (VACUUM LITE, no retention); how many."""
    return vacuum_table(spark, path, 0, lite=True)
