"""The keys a query wrote to a table in its recent batches, held in memory (hash and time only), so that
a live batch looks for its rows' earlier copies there instead of in the table's files.

Silver's search for earlier copies reads every row of the watermark's range of silver in each batch: at
20,000 events/s that is 12,000,000 eventIds hashed per 5-s batch, most of a live batch's cost
(analytical/README.md, "Silver's search for earlier copies in one live batch"). The query wrote those
rows itself, so it can keep their (key hash, time) as it writes them and look there first:

  a batch's keys -> the held hashes of the batch's range     -> the rows they name, read from the table
                                                                 at the few times they hold (exact)
                 -> the table's rows older than what is held -> as before (a late event, a restart)

What is held always stands for one version of the table: every row of it at or after `low` is in the
pieces, each piece the rows one batch added. A batch that reads another version (a first batch, a
replay, another writer's commit such as `lakehouse maintain` or an erasure) starts over with nothing
held, from just after the table's newest time, and so pays today's full search until its range has
moved past that time. Exactness never rests on the hash: a hash that matches only points to where the
table's own row is read and compared.

    recent = RecentKeys(("eventId",), "eventTime")   # one per query run, kept across its batches
    new = new_rows(events, silver_at_version, ("eventId",), match, prune,
                   candidates=lambda table, bounds, hashes: recent.candidates(table, version, bounds, hashes))
    ... append new with userMetadata M ...; recent.added(spark, path, M); recent.slide(cut_micros)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analytical.delta_log import AddedFile, added_files, commit_path
from shared.spark_internals import read_small_file

#: The hash of a row's keys, the column the pieces hold and the batch's keys are joined on.
KEY_HASH = "_keyHash"
#: At most this many rows held, over all pieces (16 bytes each in memory, before Spark's overhead): a
#: backfill's batches would otherwise hold a history. The oldest pieces go first.
MAX_HELD_ROWS = 25_000_000
#: 0001-01-01T00:00:00Z, Spark's earliest timestamp: all of an empty table is held.
EARLIEST_MICROS = -62_135_596_800_000_000
#: The times a matched hash is read back at are merged into at most this many ranges of the table.
MAX_RANGES = 32


#: Pieces of one level are merged into one of the next when there are this many: a batch's piece is
#: level 0, and a union of a few dozen pieces plans and scans as fast as one.
FANOUT = 6
#: Pieces of this level are not merged further: a piece is let go whole, when its newest row is old
#: enough, and a merged piece holds its oldest rows that much longer.
TOP_LEVEL = 2


@dataclass
class _Piece:
    rows: DataFrame  # (KEY_HASH, time), in Spark's columnar cache: 16 bytes a row
    count: int
    newest_micros: int
    level: int = 0


@dataclass
class RecentKeys:
    """What one writer of a table added to it in its recent batches (the module's docstring)."""

    keys: tuple[str, ...]
    time_column: str
    version: int | None = None  # the version the pieces stand for
    low_micros: int | None = None  # every row of `version` at or after it is held; None: nothing is
    pieces: list[_Piece] = field(default_factory=list)
    read: int | None = None  # the version the batch's `candidates` read, which its commit follows

    def candidates(self, table: DataFrame, version: int, bounds: str, batch_hashes: DataFrame) -> DataFrame:
        """The rows of `table` (read at `version`) within `bounds` (SQL on alias t) whose keys' hash
        is one of `batch_hashes` (a KEY_HASH column): the held ones looked up in memory, read back
        from the table at their exact times, and the table's rows older than what is held."""
        if version != self.version:
            self._start_over(table, version)
        self.read = version
        time = f"t.`{self.time_column}`"
        held = f"{time} >= timestamp_micros({self.low_micros})" if self.low_micros is not None else None
        older = table_candidates(table, bounds if held is None else f"({bounds}) AND NOT ({held})",
                                 self.keys, self.time_column, batch_hashes)
        if held is None or not self.pieces:
            return older
        hits = _union(piece.rows for piece in self.pieces).alias("t").where(f"({bounds}) AND {held}") \
            .join(F.broadcast(batch_hashes), KEY_HASH, "left_semi")
        times = sorted(row[0] for row in hits.select(F.unix_micros(self.time_column)).distinct().collect())
        if not times:
            return older
        at_times = " OR ".join(f"{time} BETWEEN timestamp_micros({start}) AND timestamp_micros({end})"
                               for start, end in _ranges(times, MAX_RANGES))
        exact = table_candidates(table, f"({bounds}) AND {held} AND ({at_times})", self.keys, self.time_column,
                                 hits.select(KEY_HASH).distinct())
        return older.unionByName(exact)

    def added(self, spark: SparkSession, table_path: str, user_metadata: str) -> None:
        """Hold what the batch's commit added to the version its `candidates` read: the commit that
        follows that version, when its `userMetadata` says it is the batch's; else (another writer's
        commit came first, or there was no commit) start over at the next batch.

        Read back from the files the commit added, so that a piece's lineage is one file scan."""
        commit = read_small_file(spark, commit_path(table_path, self.read + 1)) if self.read is not None else None
        said, files = added_files(commit) if commit is not None else (None, [])
        if said != user_metadata:
            self.forget()
            return
        self.version, self.read = self.read + 1, None
        if files:
            written = spark.read.parquet(*(f"{table_path}/{added.path}" for added in files))
            hashed = written.select(F.xxhash64(*self.keys).alias(KEY_HASH), self.time_column)
            counted = _counted(files, self.time_column)
            piece = _held(hashed, self.time_column) if counted is None else _Piece(hashed.persist(), *counted)
            if piece.count:
                self.pieces.append(piece)
        self._merge()
        while sum(held.count for held in self.pieces) > MAX_HELD_ROWS:
            self._let_go(self.pieces[0])

    def _merge(self) -> None:
        """The newest FANOUT pieces of one level below TOP_LEVEL as one piece of the next."""
        while len(self.pieces) >= FANOUT:
            run = self.pieces[-FANOUT:]
            if run[0].level >= TOP_LEVEL or any(piece.level != run[0].level for piece in run):
                return
            merged = _held(_union(piece.rows for piece in run), self.time_column, run[0].level + 1)
            for piece in run:  # after the merged piece is made of them
                piece.rows.unpersist()
            self.pieces[-FANOUT:] = [merged]

    def slide(self, cut_micros: int) -> None:
        """Let go of the pieces whose rows are all older than `cut_micros`: only a late event, found in
        the table as before, can have an earlier copy there."""
        for piece in [piece for piece in self.pieces if piece.newest_micros < cut_micros]:
            self._let_go(piece)
        if self.low_micros is not None:
            self.low_micros = max(self.low_micros, cut_micros)

    def forget(self) -> None:
        """Hold nothing (a failed batch: a piece may be what failed)."""
        for piece in list(self.pieces):
            piece.rows.unpersist()
        self.pieces, self.version, self.low_micros, self.read = [], None, None, None

    def _start_over(self, table: DataFrame, version: int) -> None:
        """Nothing held, standing for `version`: every row the table holds is older than `low`."""
        self.forget()
        newest = table.agg(F.max(F.unix_micros(self.time_column))).first()[0]
        self.version, self.low_micros = version, (newest + 1 if newest is not None else EARLIEST_MICROS)

    def _let_go(self, piece: _Piece) -> None:
        """Drop a piece; what is held still stands for every row after its newest."""
        self.pieces.remove(piece)
        piece.rows.unpersist()
        if self.low_micros is not None:
            self.low_micros = max(self.low_micros, piece.newest_micros + 1)


def table_candidates(table: DataFrame, bounds: str, keys: tuple[str, ...], time_column: str,
                     batch_hashes: DataFrame) -> DataFrame:
    """The table's rows within `bounds` (SQL on alias t) whose keys' hash is one of `batch_hashes`, in
    the columns `keys` and `time_column`: read past the batch's hashes broadcast to every task, without
    shuffling the table's rows."""
    return (table.alias("t").where(bounds).select(*dict.fromkeys((*keys, time_column)))
            .withColumn(KEY_HASH, F.xxhash64(*keys))
            .join(F.broadcast(batch_hashes), KEY_HASH, "left_semi").drop(KEY_HASH))


def _held(rows: DataFrame, time_column: str, level: int = 0) -> _Piece:
    """`rows` cached (columnar; spilled to disk rather than dropped) and counted. A block lost with an
    executor is read again from the commit's files; gone from storage, the batch fails and `forget`s."""
    rows = rows.persist()
    count, newest = rows.agg(F.count(F.lit(1)), F.max(F.unix_micros(time_column))).first()
    return _Piece(rows, count, newest if newest is not None else EARLIEST_MICROS, level)


def _counted(files: list[AddedFile], time_column: str) -> tuple[int, int] | None:
    """Rows and newest time (micros) of a commit's files from the statistics it wrote, None when they
    are missing: the piece is then cached lazily, and a batch that is the last one (a backfill's) never
    reads its files back. Delta writes a timestamp's maxValues to the millisecond, truncated: a
    millisecond is added, since a piece's newest may be later than it is, never earlier."""
    if any(added.records is None or time_column not in added.newest for added in files):
        return None
    newest = max(datetime.fromisoformat(added.newest[time_column].replace("Z", "+00:00")) for added in files)
    return sum(added.records for added in files), _micros(newest) + 1000


def _micros(instant: datetime) -> int:
    return (instant - _EPOCH) // timedelta(microseconds=1)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _union(frames) -> DataFrame:
    frames = list(frames)
    union = frames[0]
    for frame in frames[1:]:
        union = union.union(frame)
    return union


def _ranges(sorted_micros: list[int], most: int) -> list[tuple[int, int]]:
    """Sorted times as at most `most` ranges that hold them all: the widest gaps split them.

        >>> _ranges([1, 2, 10, 11, 50], 2)
        [(1, 11), (50, 50)]
    """
    gaps = sorted(range(1, len(sorted_micros)), key=lambda i: sorted_micros[i] - sorted_micros[i - 1],
                  reverse=True)[:most - 1]
    starts = [0, *sorted(gaps)]
    ends = [*(start - 1 for start in starts[1:]), len(sorted_micros) - 1]
    return [(sorted_micros[start], sorted_micros[end]) for start, end in zip(starts, ends)]
