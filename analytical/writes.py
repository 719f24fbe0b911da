"""The ways the medallion's layers write their tables, so that a micro-batch replayed after a failure
cannot add a row twice (every layer is written from `foreachBatch`):
  - `append` with a `Txn` (bronze, silver clicks, the quarantine): once per batch; silver's rows are
    those `new_rows` finds the table does not hold yet, by their keys' hash without shuffling the
    table's rows;
  - `upsert` (gold): replaces the rows of the minutes the batch changed with absolute values, so
    writing the same batch twice changes nothing.
Each write carries a literal range on the target (`Prune`), so Delta reads only the files whose
min/max statistics overlap the batch instead of the whole table: the time of a micro-batch does not
grow with history. Writes are clustered by the range's column, so that each file holds a narrow
range, which the next batches' ranges then skip. Where no file of gold may hold a row in a batch's
range (a backfill's history, a new block of it), nothing can be replaced, and `upsert` appends.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter
from pyspark.sql.types import TimestampType

from analytical.quality import metrics_name, passing, with_expectations
from analytical.tables import TableAt
from shared.checkpoints import query_id
from shared.config import Config
from shared.errors import LakehouseError
from shared.stream import Stream


@dataclass(frozen=True)
class Prune:
    """A target column and the batch column whose [min - margin, max + margin] bounds it."""

    target_column: str
    batch_column: str
    margin: str | None = None  # a Spark interval, e.g. '10 minutes'

    def condition(self, batch: DataFrame) -> str | None:
        """The literal range as SQL on the target (alias t), or None when the batch is empty."""
        value = F.col(self.batch_column)
        is_time = isinstance(batch.schema[self.batch_column].dataType, TimestampType)
        low, high = batch.agg(*(_as_text(bound(value), is_time) for bound in (F.min, F.max))).first()
        if low is None:
            return None
        column = f"t.`{self.target_column}`"
        lower, upper = (f"TIMESTAMP'{low}'", f"TIMESTAMP'{high}'") if is_time else (str(low), str(high))
        if self.margin:
            lower, upper = f"{lower} - INTERVAL {self.margin}", f"{upper} + INTERVAL {self.margin}"
        return f"{column} BETWEEN {lower} AND {upper}"


#: Rows per file that `append` and `upsert` write, each task's rows sorted by the range's column:
#: each file then holds a narrow range, a small part of a backfill's history. Sorted within the
#: tasks, not across them: a global sort samples its input first, which recomputes silver's
#: de-duplication.
FILE_ROWS = 100_000


def new_rows(batch: DataFrame, table: DataFrame, keys: tuple[str, ...], match: str, prune: Prune,
             bounds_from: DataFrame | None = None) -> DataFrame | None:
    """The rows of `batch` that `match` (SQL on s = batch, t = table) finds no row of `table` for in
    `prune`'s range, in the table's columns; None when the batch is empty. `match` requires the `keys`
    columns equal and may compare only them and `prune`'s target column. A pure function of the batch
    and the table's version: pass the version from before the batch's own write, and evaluating it
    again after that write gives the same rows.

    An insert-only MERGE would shuffle every row of the range to join it with the batch: silver's
    range is the watermark's ten minutes of events, 12 million rows at 20,000 events/s, for each
    micro-batch. Instead the range is first narrowed to the rows whose keys' hash the batch holds,
    streamed past the batch's hashes broadcast to every task, and `match` runs against those few
    (analytical/README.md, "Silver's writes without a MERGE").

    `bounds_from`: a cheaper frame with the same range on the prune column and every key of `batch`
    (e.g. `batch` before a de-duplication), so that neither evaluates `batch` once more.

        new_rows(events, silver, ("eventId",), "t.eventId = s.eventId", Prune("eventTime", "eventTime", "1 hour"))
    """
    source = batch if bounds_from is None else bounds_from
    bounds = prune.condition(source)
    if bounds is None:
        return None
    batch_keys = source.select(F.xxhash64(*keys).alias(_KEY_HASH)).distinct()
    candidates = (table.alias("t").where(bounds).select(*dict.fromkeys((*keys, prune.target_column)))
                  .withColumn(_KEY_HASH, F.xxhash64(*keys))
                  .join(F.broadcast(batch_keys), _KEY_HASH, "left_semi").drop(_KEY_HASH))
    return batch.alias("s").join(F.broadcast(candidates).alias("t"), F.expr(match), "left_anti").select(*table.columns)


def append(rows: DataFrame, path: str, prune: Prune, txn: Txn) -> None:
    """Append `rows` (the table's columns) once per `txn`, each task's rows sorted on `prune`'s column."""
    _write(rows, path, prune, txn=txn)


@dataclass(frozen=True)
class Txn:
    """A write made once. A stream's batch whose write must not be repeated (it adds to the table)
    passes (its query's id, its batch id), and whether the batch may have been written before: the
    first batch a query runs after it starts, since a crash may have come after some of its writes.

    The commit's `userMetadata` names the pair, so that the table's history says which batch wrote
    what; a batch that may have been written first looks for that commit (`commit_of`) and writes
    nothing when it is there. Delta's idempotent writes (`txnAppId`/`txnVersion`) keep the same
    promise, but the Delta release this product runs reconstructs the table's state at each such write
    to read its transactions, three Spark jobs more per write (analytical/README.md, "A write made
    once without Delta's transactions").
    """

    app_id: str
    version: int
    may_be_written: bool = True

    @property
    def user_metadata(self) -> str:
        """What the commit's `userMetadata` says of it: `<app_id>/<version>`."""
        return f"{self.app_id}/{self.version}"

    def save(self, spark: SparkSession, writer: DataFrameWriter, path: str) -> None:
        """`writer`'s Delta write to `path`, named as this transaction; nothing when it may have been
        made before and its commit is there."""
        if self.may_be_written and commit_of(spark, path, self) is not None:
            return
        writer.option("userMetadata", self.user_metadata).save(path)

    def earlier(self, user_metadata: str | None) -> bool:
        """Whether a commit's `userMetadata` names this app's write of an earlier version."""
        app, _, version = (user_metadata or "").rpartition("/")
        return app == self.app_id and version.isdigit() and int(version) < self.version


def batch_txns(spark: SparkSession, checkpoint: str) -> Callable[[int], Txn]:
    """batch id -> the `Txn` of that batch of the stream whose checkpoint is `checkpoint`: its query's id,
    the batch id, and whether it may have been written before (the first batch of this run only).

        txn_of = batch_txns(spark, checkpoint)   # where the writer is built
        txn = txn_of(batch_id)                   # in foreachBatch
    """
    first_of_run = [True]

    def txn_of(batch_id: int) -> Txn:
        txn = Txn(query_id(spark, checkpoint), batch_id, may_be_written=first_of_run[0])
        first_of_run[0] = False
        return txn

    return txn_of


#: How many of a table's newest commits `commit_of` reads first; each further round reads this many
#: times more.
HISTORY_PAGE = 8


def commit_of(spark: SparkSession, path: str, txn: Txn) -> int | None:
    """The table's version that `txn` committed, None when it did not commit.

    Read from the newest commits back to the app's commit of an earlier version (an app commits its
    versions in order), HISTORY_PAGE at first: a restart reads a few commits, not a long-lived
    table's whole log."""
    return _newest_and_commit_of(spark, path, txn)[1]


def _newest_and_commit_of(spark: SparkSession, path: str, txn: Txn) -> tuple[int, int | None]:
    """The table's newest version, and `commit_of` its `txn`, from one read of its history."""
    from delta.tables import DeltaTable  # delta-spark is the medallion's runtime only

    table, limit = DeltaTable.forPath(spark, path), HISTORY_PAGE
    while True:
        commits = table.history(limit).select("version", "userMetadata").collect()
        newest = commits[0][0]
        for version, user_metadata in commits:  # the newest first
            if user_metadata == txn.user_metadata:
                return newest, version
            if txn.earlier(user_metadata):
                return newest, None
        if len(commits) < limit:
            return newest, None
        limit *= HISTORY_PAGE


def written_by(spark: SparkSession, path: str, app_id: str) -> bool:
    """Whether any commit of the table at `path` was a `Txn` of `app_id`."""
    from delta.tables import DeltaTable  # delta-spark is the medallion's runtime only

    history = DeltaTable.forPath(spark, path).history().where(F.col("userMetadata").startswith(f"{app_id}/"))
    return not history.isEmpty()


def refuse_writes_of_another(spark: SparkSession, path: str, app_id: str, why: str) -> None:
    """A query's first batch writes only to an empty table or one it wrote (`Txn`s of `app_id`): over
    another checkpoint's writes it would repeat them. `why`: the LakehouseError's message."""
    if not written_by(spark, path, app_id) and not spark.read.format("delta").load(path).isEmpty():
        raise LakehouseError(why)


def version_before(spark: SparkSession, path: str, txn: Txn) -> int:
    """The table's version just before `txn`'s commit: the newest, unless `txn` committed already (a
    batch replayed after a failure), then the one before that.

    What a batch reads of a table it also writes, so that a replay reads what the first attempt read."""
    from delta.tables import DeltaTable  # delta-spark is the medallion's runtime only

    if not txn.may_be_written:
        return DeltaTable.forPath(spark, path).history(1).select("version").first()[0]
    newest, committed = _newest_and_commit_of(spark, path, txn)
    return newest if committed is None else committed - 1


def upsert(batch: DataFrame, path: str, keys: tuple[str, ...], prune: Prune,
           combine: Callable[[DataFrame, DataFrame], DataFrame] | None = None, txn: Txn | None = None) -> None:
    """Write `batch` (one row per key) over the table: its rows replace those with the same `keys`,
    the others are added. The values are absolute, so writing the same batch twice changes nothing.
    `combine(held, batch)`: instead of replacing, the rows to write from the table's rows of the cells
    (`held`) and the batch; with `combine(empty, batch)` equal to `batch`, since a write with nothing
    held appends the batch. `txn`: the write made once (a combined write is not repeatable).

    One commit (Delta's `replaceWhere`) replaces every row of each REPLACED_CELL (on
    `prune.target_column`) that the batch holds a row in: the table's other rows of those cells,
    then the batch, each task's rows sorted on the column, FILE_ROWS a file. What a batch rewrites
    is bounded by the cells it changed, however large the table grows. A MERGE's would not be:
    copy-on-write rewrites each file it matches whole, into the files it writes with the batch, and
    a live batch always matches the file the batch before it wrote, so every row of the table would
    be carried into each batch's file (analytical/README.md, "Gold's writes bounded by the minutes
    they change").

    Where no file of the table may hold a row of those cells (a backfill's history, a new block of
    it), Delta's data skipping says so from the files' statistics without reading a row, and the
    batch is appended.

        windows of 10:00:00-10:00:05 (new) and 09:52:30 (a late correction) replace the rows of the
        minutes 10:00 and 09:52; every other row of the table stays in its file
    """
    cells = _cells(batch, prune)
    if cells is None:
        return  # an empty batch: no commit
    target = batch.sparkSession.read.format("delta").load(path)
    rows = batch.select(*target.columns)
    held = target.where(cells)
    if not held.inputFiles():
        _write(rows, path, prune, txn=txn)
        return
    written = (held.join(batch.select(*keys), list(keys), "left_anti").unionByName(rows) if combine is None
               else combine(held, rows).select(*target.columns))
    _write(written, path, prune, replace_where=cells, txn=txn)


def counts_added(held: DataFrame, batch: DataFrame, keys: tuple[str, ...], counts: tuple[str, ...],
                 carried: tuple[str, ...] = ()) -> DataFrame:
    """An `upsert`'s `combine` for tables of counts: the table's rows of the cells (`held`) with the batch's
    `counts` added key by key, the batch's new keys included; `carried` columns taken from the batch where
    it has the key, else from the table.

        held (/a, 10:00:00, 4), batch (/a, 10:00:00, 2) and (/b, 10:00:00, 1) -> (/a, 6), (/b, 1)
    """
    return (held.alias("t").join(batch.alias("s"), list(keys), "full_outer")
            .select(*keys, *(F.coalesce(f"s.{name}", f"t.{name}").alias(name) for name in carried),
                    *((F.coalesce(f"t.{name}", F.lit(0)) + F.coalesce(f"s.{name}", F.lit(0))).alias(name)
                      for name in counts)))


def same_keys(keys: tuple[str, ...]) -> str:
    """SQL on t = table, s = batch: the `keys` columns equal on both sides.

        same_keys(("pageId", "windowStart")) == "t.`pageId` = s.`pageId` AND t.`windowStart` = s.`windowStart`"
    """
    return " AND ".join(f"t.`{key}` = s.`{key}`" for key in keys)


#: What `upsert` rewrites: every row of each minute of the range's column that its batch holds a row in.
REPLACED_CELL = "minute"


def _cells(batch: DataFrame, prune: Prune) -> str | None:
    """SQL on the table: `prune.target_column` within the REPLACED_CELLs that `prune.batch_column`
    falls in, adjacent cells joined into one range; None when the batch is empty.

        "(`windowStart` >= TIMESTAMP'2026-11-22 09:52:00.000000'
          AND `windowStart` < TIMESTAMP'2026-11-22 09:53:00.000000')
         OR (`windowStart` >= TIMESTAMP'2026-11-22 10:00:00.000000'
          AND `windowStart` < TIMESTAMP'2026-11-22 10:02:00.000000')"
    """
    cell = F.col("cell")
    bounds = (batch.select(F.date_trunc(REPLACED_CELL, F.col(prune.batch_column)).alias("cell"))
              .where(cell.isNotNull()).distinct()  # before the formatting: text for each cell, not each row
              .select(cell, _as_text(cell, is_time=True).alias("start"),
                      _as_text(cell + F.expr(f"INTERVAL 1 {REPLACED_CELL}"), is_time=True).alias("end"))
              .orderBy("cell").collect())
    ranges: list[list[str]] = []
    for _, start, end in bounds:
        if ranges and ranges[-1][1] == start:
            ranges[-1][1] = end
        else:
            ranges.append([start, end])
    column = f"`{prune.target_column}`"
    return " OR ".join(f"({column} >= TIMESTAMP'{start}' AND {column} < TIMESTAMP'{end}')"
                       for start, end in ranges) or None


#: The hash of a row's keys, a column `new_rows` adds for its semi-join.
_KEY_HASH = "_keyHash"


def _write(rows: DataFrame, path: str, prune: Prune, replace_where: str | None = None, txn: Txn | None = None) -> None:
    """Append `rows` (the table's columns), or with `replace_where` replace the table's rows it
    selects by them; each task's rows sorted on the range's column, FILE_ROWS a file; once per `txn`."""
    writer = (rows.sortWithinPartitions(prune.target_column)
              .write.format("delta").option("maxRecordsPerFile", FILE_ROWS))
    writer = writer.mode("append") if replace_where is None else \
        writer.mode("overwrite").option("replaceWhere", replace_where)
    if txn is None:
        writer.save(path)
    else:
        txn.save(rows.sparkSession, writer, path)


@contextmanager
def cached(batch: DataFrame) -> Iterator[DataFrame]:
    """`batch` persisted for the block, and unpersisted when the block succeeds.

    When the block fails (a query stopped mid-batch interrupts it) the cache is left to Spark's
    cleaner: the cancelled job's tasks may still be reading it, and unpersisting under them logged
    `ERROR Executor: ... Block rdd_50_1 does not exist` on every such stop.
    """
    batch.persist()
    yield batch
    batch.unpersist()


def upsert_stream(rows: DataFrame, table: TableAt, keys: tuple[str, ...], prune: Prune,
                  output_mode: str, keep: Callable[[DataFrame], DataFrame] = lambda batch: batch) -> DataStreamWriter:
    """A stream that writes each micro-batch of `rows`, through `keep`, over `table` (`upsert`).

    Gold's writers. The table is created first. Each batch is persisted for the passes over it (its
    cells, then the write): recomputing a stateful batch would redo the aggregation.
    """
    path = table.create(rows.sparkSession, rows.transform(keep).schema)

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        with cached(batch):
            upsert(batch.transform(keep), path, keys, prune)

    return rows.writeStream.outputMode(output_mode).foreachBatch(write_batch)


def checked_upsert_stream(rows: DataFrame, stream: Stream, config: Config, root: str, keys: tuple[str, ...],
                          prune: Prune, output_mode: str) -> DataStreamWriter:
    """A gold writer: `rows` checked against its table's suite under the table's policy as they
    stream (analytical.quality), then written over the table (`upsert_stream`) without the rows the
    policy drops."""
    [table] = stream.writes
    policy = table.expectation_policy(config)
    checked = rows.transform(with_expectations, table.suite(config), policy, metrics_name(table.key))
    return upsert_stream(checked, table.at(root), keys, prune, output_mode, keep=lambda batch: passing(batch, policy))


def _as_text(bound: Column, is_time: bool) -> Column:
    """A min/max as literal text: timestamps formatted in the session time zone, which is also how
    the TIMESTAMP'...' literal is read back (a Python datetime would shift by the OS time zone)."""
    return F.date_format(bound, "yyyy-MM-dd HH:mm:ss.SSSSSS") if is_time else bound
