"""The medallion's Delta tables: their declarations (`Table`), where they are, and the file operations
a rebuild and the checks need. How the layers write them: analytical.writes.

Table names are CONTRACT.md's paths under a storage root (`bronze/clicks`, ...). A root is usually
`storage.root`; a rebuild builds the same tables under a staging root first (analytical.pipeline).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.types import StructField, StructType

from analytical.delta_log import NO_COMMIT_YET, is_commit_or_checkpoint
from analytical.quality import Suite
from shared.config import Config, ExpectationPolicy
from shared.errors import LakehouseError
from shared.spark_internals import hadoop_file_system
from shared.storage import location
from shared.stream import Stream, Writer

#: The command that fills every table, for the message when one is missing.
_FILLED_BY = "lakehouse analytical --available-now"


@dataclass(frozen=True)
class Table:
    """One Delta table, declared once, in the module of the stream that writes it.

    Everything that lists tables (analytical.registry, a rebuild, `lakehouse check` and
    `maintain`) reads these fields; nothing else restates them.
    """

    #: Its path under a storage root, as CONTRACT.md names it (`gold/page_clicks_5s`).
    name: str
    #: Exactly what the stream's transform produces; the stream refuses to start on any other.
    schema: StructType
    partition_by: tuple[str, ...] = ()
    #: The only columns Delta keeps min/max statistics for: those readers and writes filter on, never a
    #: user's id (the statistics stay in the Delta log, which an erasure cannot rewrite).
    #: Empty: Delta's default, the first 32 columns.
    stats_columns: tuple[str, ...] = ()
    #: `lakehouse maintain` Z-orders by these; empty: compaction only.
    z_order: tuple[str, ...] = ()
    #: Its expectations (analytical.quality): what its stream checks and `lakehouse check` validates.
    expectations: Callable[[Config], Suite] | None = None
    #: Whether Delta records its changes (`delta.enableChangeDataFeed`), for a stream that reads them.
    change_feed: bool = False
    #: What a row that breaks one of its expectations does as it is written, unless
    #: `quality.policies.<key>` says otherwise; None when its writes check none.
    policy: ExpectationPolicy | None = None
    #: The user a row is about, as the userId it names (a Column over the table's columns): what `lakehouse
    #: forget` erases by (analytical.erasure). None: no row of it names a user.
    user_of_row: Callable[[], Column] | None = None
    #: Given user ids, a condition cheaper than `user_of_row` that holds on each of their rows (and maybe on
    #: a few others, which `user_of_row` then tells apart): how `forget` scans the table. None: none cheaper.
    rows_of_users: Callable[[Sequence[str]], Column] | None = None

    def __str__(self) -> str:
        return self.name

    @property
    def key(self) -> str:
        """Its name as one word (`gold_page_clicks_5s`): its key in `quality.policies` and its metrics' names."""
        return self.name.replace("/", "_")

    def expectation_policy(self, config: Config) -> ExpectationPolicy:
        """The policy in force: the configured one, else the declared one."""
        if self.policy is None:
            raise LakehouseError(f"the writes of {self.name} check no expectations, so it has no policy")
        return config.quality.policies.get(self.key, self.policy)

    @property
    def layer(self) -> str:
        """`bronze`, `silver` or `gold`: the first part of its path."""
        return self.name.split("/")[0]

    def suite(self, config: Config) -> Suite | None:
        """Its expectations under `config`, named after the table; None when it has none."""
        return None if self.expectations is None else replace(self.expectations(config), table=self.name)

    def stream(self, writer: Writer, reads: tuple["Table", ...], enabled: Callable[[Config], bool] = lambda config: True,
               also_writes: tuple["Table", ...] = ()) -> Stream:
        """The stream that follows the medallion's query to write this table, named after it:
        `gold/page_clicks_hourly` is written by the query (and checkpoint) `gold_page_clicks_hourly`,
        on the trigger `analytical.triggers.gold`.

            STREAM = TABLE.stream(writer, reads=(gold_page_clicks_5s.TABLE,))

        `reads`: the tables it streams from; `enabled`: whether a configuration runs it (Stream.enabled); `also_writes`: the tables it writes
        after this one from the same batches (gold/user_sessions' query writes gold/page_conversion).
        """
        return Stream(self.key, self.layer, writer, trigger=lambda config: config.analytical.triggers.gold,
                      lateness=lambda config: config.analytical.watermark, writes=(self, *also_writes),
                      reads=reads, enabled=enabled)

    def at(self, root: str) -> "TableAt":
        """The table under one storage root: a handle that knows its path, reads and creates it.

            windows = gold_page_clicks_5s.TABLE.at(config.storage.root).read(spark)
        """
        return TableAt(self, root)


@dataclass(frozen=True)
class TableAt:
    """A declared table bound to its location under a storage root (`Table.at`)."""

    table: Table
    root: str

    @property
    def path(self) -> str:
        return location(self.root, self.table.name)

    def create(self, spark: SparkSession, produced: StructType) -> str:
        """Create the table unless it is there (the streams' writes need one); its path.

        `produced`: the schema of the rows the stream is about to write. A transform that no longer
        produces the declared schema is a LakehouseError naming the difference, before anything
        is written.
        """
        table = self.table
        if produced != table.schema:
            raise LakehouseError(f"the rows written to {table} do not match its declared schema: "
                                 f"{_difference(table.schema, produced)}")
        properties = {CHANGE_FEED: "true"} if table.change_feed else {}
        if table.stats_columns:  # a table made under an older declaration follows this one from its next file
            properties[STATS_COLUMNS] = ",".join(table.stats_columns)
        create_if_missing(spark, self.path, table.schema, table.partition_by, properties=properties)
        return self.path

    def exists(self, spark: SparkSession) -> bool:
        """Whether the table holds a commit now (is_delta_table)."""
        return is_delta_table(spark, self.path)

    def read_stream(self, spark: SparkSession, config: Config) -> DataFrame:
        """The table as a stream of what its commits append, in commit order, at most
        `analytical.max_files_per_trigger` files a batch. A commit that only removes rows (an erasure:
        analytical.erasure) is skipped: the rows it rewrote were read when they were appended."""
        return (spark.readStream.format("delta")
                .option("maxFilesPerTrigger", config.analytical.max_files_per_trigger)
                .option("skipChangeCommits", "true")
                .load(self.path))

    def read(self, spark: SparkSession, as_of: str | None = None) -> DataFrame:
        """The table as a batch DataFrame, at a version or timestamp (`as_of`) when given.

        A missing table is a LakehouseError that says which backfill fills it; one with no commit yet, one
        that says so.
        """
        path = self.path
        if not is_delta_table(spark, path):
            file_system, log = hadoop_file_system(spark, f"{path.rstrip('/')}/_delta_log")
            if file_system.exists(log):
                raise NoCommitYet(f"the Delta table {self.table} at {path} has {NO_COMMIT_YET}")
            raise LakehouseError(f"there is no Delta table {self.table} at {path}: run `{_FILLED_BY}` to build it")
        reader = spark.read.format("delta")
        if as_of is not None:
            option = "versionAsOf" if as_of.isdigit() else "timestampAsOf"
            reader = reader.option(option, as_of)
        return reader.load(path)


def _difference(declared: StructType, produced: StructType) -> str:
    expected = {field.name: field for field in declared.fields}
    actual = {field.name: field for field in produced.fields}
    problems = [f"{name} is missing" for name in expected if name not in actual]
    problems += [f"{name} is not declared" for name in actual if name not in expected]
    problems += [f"{name} is {_described(actual[name])}, declared {_described(field)}"
                 for name, field in expected.items() if name in actual and actual[name] != field]
    if not problems and list(expected) != list(actual):
        problems.append(f"columns in order {', '.join(actual)}, declared {', '.join(expected)}")
    return "; ".join(problems)


def _described(field: StructField) -> str:
    return field.dataType.simpleString() + ("" if field.nullable else " not null")


#: The table property under which Delta records each commit's changed rows (`Table.change_feed`).
CHANGE_FEED = "delta.enableChangeDataFeed"
#: The table property naming the only columns Delta keeps min/max statistics for (`Table.stats_columns`).
STATS_COLUMNS = "delta.dataSkippingStatsColumns"


def create_if_missing(spark: SparkSession, path: str, schema: Any, partition_by: tuple[str, ...] = (),
                      stats_columns: tuple[str, ...] = (), properties: dict[str, str] | None = None) -> None:
    """Create an empty Delta table at `path` with `schema` unless one is there (the streams' writes need one);
    give an existing one any of `properties` and columns it lacks (a table made before they were declared:
    silver/clicks before `eventType`), each added column null in the rows already there.

    `stats_columns`: the only columns Delta keeps min/max statistics for, those that readers and
    writes filter on. By default it keeps them for the first 32 columns, and computing them for
    id strings nobody ranges over costs about as much as writing the Parquet itself.
    No table enables deletion vectors: `deltalake` (delta-rs, under Polars' `read_delta`) refuses
    to read a table whose protocol lists them, and gold is what analysts read without Spark. Gold's
    writes rewrite the files holding the minutes a batch changed instead, small and recent ones
    (`upsert`, `Table.z_order` of the gold tables and analytical.maintenance).
    """
    from delta.tables import DeltaTable

    _clear_log_without_commit(spark, path)
    builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
    if partition_by:
        builder = builder.partitionedBy(*partition_by)
    if stats_columns:
        builder = builder.property(STATS_COLUMNS, ",".join(stats_columns))
    for key, value in (properties or {}).items():
        builder = builder.property(key, value)
    table = builder.execute()
    _add_missing_columns(spark, path, schema, table.toDF().schema)
    missing = {key: value for key, value in (properties or {}).items()
               if table.detail().first()["properties"].get(key) != value}
    if missing:
        settings = ", ".join(f"'{key}' = '{value}'" for key, value in missing.items())
        spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({settings})")


def _add_missing_columns(spark: SparkSession, path: str, declared: StructType, held: StructType) -> None:
    """ALTER TABLE ADD COLUMNS for each declared column the table lacks, in its declared place."""
    present = set(held.fieldNames())
    previous = None
    for field in declared.fields:
        if field.name not in present:
            place = f"AFTER `{previous}`" if previous else "FIRST"
            spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (`{field.name}` {field.dataType.simpleString()} {place})")
            present.add(field.name)
        previous = field.name


def _clear_log_without_commit(spark: SparkSession, path: str) -> None:
    """Delete a `_delta_log` that holds no commit: what a creation killed before its first commit leaves
    (on S3 too, where the folder is a marker object). Delta takes such a folder for a table and then finds
    none (DELTA_TABLE_NOT_FOUND), so the stream could never start again. Only the table's writer creates it,
    under its checkpoint's lock, so no other process is between its folder and its first commit."""
    file_system, log = hadoop_file_system(spark, f"{path.rstrip('/')}/_delta_log")
    if file_system.exists(log) and not is_delta_table(spark, path):
        file_system.delete(log, True)


class NoCommitYet(LakehouseError):
    """A table whose folder and log exist without a commit (analytical.delta_log): no reader can open it."""


def is_delta_table(spark: SparkSession, path: str) -> bool:
    """Whether `path` holds a Delta table now: a commit or a checkpoint in its `_delta_log`.

    Not `DeltaTable.isDeltaTable`, which answers from the session's cached DeltaLog: asked once before
    the table was created, it keeps saying no after another process created it."""
    file_system, log = hadoop_file_system(spark, f"{path.rstrip('/')}/_delta_log")
    if not file_system.exists(log):
        return False
    return any(is_commit_or_checkpoint(status.getPath().getName()) for status in file_system.listStatus(log))


def delete_path(spark: SparkSession, path: str) -> None:
    """Delete a folder (a checkpoint, a staging root) on whatever file system the root is on."""
    file_system, hadoop_path = hadoop_file_system(spark, path)
    file_system.delete(hadoop_path, True)


def move_path(spark: SparkSession, source: str, target: str) -> None:
    """Move a folder to `target`, replacing what is there."""
    file_system, source_path = hadoop_file_system(spark, source)
    _, target_path = hadoop_file_system(spark, target)
    file_system.delete(target_path, True)
    file_system.mkdirs(target_path.getParent())
    if not file_system.rename(source_path, target_path):
        raise LakehouseError(f"could not move {source} to {target}")
