"""Every query's progress, kept: a recorder that fills the Delta table ops/stream_progress.

The recorder watches the application's queries (shared.query_events.watching): it is given each
batch's progress of every query (both paths under `lakehouse run`). It only queues a flat row, so a
batch never waits on a write; `ProgressRecorder.flush` appends what is queued in one Delta commit,
every `monitoring.flush_interval_s` and when the command ends. `lakehouse status` reads the table back (`SUMMARY_SQL`).

A row holds what an operator asks about a batch: rates, the durationMs parts, the watermark, the
Kafka lag, state rows and memory, rows dropped by the watermark, the RocksDB custom metrics, the
observed metrics (invalid records, expectation results), and the full progress JSON. A query that
terminates with an error adds a row with `error` set.
"""

from __future__ import annotations

import json
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, NamedTuple

from shared.config import Config

if TYPE_CHECKING:  # pyspark is imported only where a recorder runs: `lakehouse status` reads without it
    from pyspark.sql import SparkSession

    from shared.query_progress import ProgressSummary

TABLE = "ops/stream_progress"


def table_location(config: Config) -> str:
    """Where ops/stream_progress is under `config`'s storage root."""
    return config.path(*TABLE.split("/"))


class ProgressRow(NamedTuple):
    """One row of ops/stream_progress: one progress report of one query (or its failure, `error`)."""

    timestamp: datetime
    queryName: str | None
    queryId: str | None
    runId: str | None
    batchId: int | None = None
    numInputRows: int | None = None
    inputRowsPerSecond: float | None = None
    processedRowsPerSecond: float | None = None
    durationMs: dict[str, int] | None = None
    watermark: str | None = None
    kafkaLag: float | None = None
    maxOffsetsBehindLatest: int | None = None
    stateRows: int | None = None
    stateMemoryBytes: int | None = None
    droppedByWatermark: int | None = None
    rocksdbMetrics: dict[str, int] | None = None
    observedMetrics: str | None = None
    expectationsFailed: int | None = None
    error: str | None = None
    progress: str | None = None


_SPARK_TYPES = {
    "timestamp": "timestamp", "queryName": "string", "queryId": "string", "runId": "string", "batchId": "long",
    "numInputRows": "long", "inputRowsPerSecond": "double", "processedRowsPerSecond": "double",
    "durationMs": "map<string,long>", "watermark": "string", "kafkaLag": "double", "maxOffsetsBehindLatest": "long",
    "stateRows": "long", "stateMemoryBytes": "long", "droppedByWatermark": "long",
    "rocksdbMetrics": "map<string,long>", "observedMetrics": "string", "expectationsFailed": "long",
    "error": "string", "progress": "string",
}
SCHEMA = ", ".join(f"{name} {_SPARK_TYPES[name]}" for name in ProgressRow._fields)


def progress_row(summary: ProgressSummary) -> ProgressRow:
    """One progress report as a row of ops/stream_progress."""
    rocksdb = {f"{op.get('operatorName', 'op')}.{key}": int(value)
               for op in summary.operators for key, value in (op.get("customMetrics") or {}).items()
               if key.startswith("rocksdb") and isinstance(value, (int, float))}
    return ProgressRow(
        timestamp=summary.started_at or datetime.now(timezone.utc), queryName=summary.name,
        queryId=summary.query_id, runId=summary.run_id, batchId=summary.batch_id, numInputRows=summary.input_rows,
        inputRowsPerSecond=summary.input_rate, processedRowsPerSecond=summary.processed_rate,
        durationMs=summary.durations_ms, watermark=summary.watermark, kafkaLag=summary.lag,
        maxOffsetsBehindLatest=summary.max_offsets_behind, stateRows=summary.state_rows,
        stateMemoryBytes=summary.state_memory_bytes, droppedByWatermark=summary.dropped_by_watermark,
        rocksdbMetrics=rocksdb, observedMetrics=json.dumps(summary.data.get("observedMetrics") or {}),
        expectationsFailed=sum(summary.expectations.values()), progress=json.dumps(summary.data),
    )


class ProgressRecorder:
    """Queues every progress of every query it watches; `flush` writes them to ops/stream_progress.

    `echo`, when given, also receives each progress as its JSON text: `lakehouse analytical
    --progress-json` prints them for `lakehouse run`, whose console view `show`s them.
    """

    def __init__(self, spark: SparkSession, path: str | None, echo: Callable[[str], None] | None = None):
        self.spark = spark
        self.path = path
        self._echo = echo
        self._queue: deque[ProgressRow] = deque()
        self._lock = threading.Lock()
        self.latest: dict[str, ProgressRow] = {}  # query name -> its newest row (the console view)

    def started(self, name: str, run_id: str) -> None:
        pass

    def progressed(self, summary: ProgressSummary) -> None:
        self.record(summary)
        if self._echo:
            self._echo(json.dumps(summary.data))

    def show(self, progress: dict[str, Any]) -> None:
        """Put another process's query in the console view (that process records its own progress)."""
        from shared.query_progress import ProgressSummary

        row = progress_row(ProgressSummary.of(progress))
        with self._lock:
            self.latest[row.queryName] = row

    def record(self, progress: ProgressSummary | dict[str, Any]) -> None:
        """Record and show a progress; another process's too (the fast path's, whose runtime has no Delta)."""
        from shared.query_progress import ProgressSummary

        row = progress_row(progress if isinstance(progress, ProgressSummary) else ProgressSummary.of(progress))
        with self._lock:
            self._queue.append(row)
            self.latest[row.queryName] = row

    def idle(self, name: str) -> None:
        pass

    def terminated(self, name: str, run_id: str, error: str | None) -> None:
        if error is not None:
            row = ProgressRow(timestamp=datetime.now(timezone.utc), queryName=name, queryId=None, runId=run_id,
                              durationMs={}, rocksdbMetrics={}, error=error)
            with self._lock:
                self._queue.append(row)

    def create_table(self) -> None:
        """Create the table if it is missing, before any query runs: under `lakehouse run` two
        processes append to it, and two first commits would race for version 0."""
        from delta.tables import DeltaTable

        if self.path is not None and not DeltaTable.isDeltaTable(self.spark, self.path):
            self.spark.createDataFrame([], SCHEMA).write.format("delta").mode("append").save(self.path)

    def flush(self) -> int:
        """Append what is queued in one commit; the number of rows written. A failed append keeps
        the rows for the next flush: monitoring never stops the queries it watches."""
        with self._lock:
            rows = list(self._queue)
            self._queue.clear()
        if not rows or self.path is None:
            return 0
        try:
            self.spark.createDataFrame(rows, SCHEMA).write.format("delta").mode("append").save(self.path)
        except Exception as error:  # a storage hiccup: said, and retried next time
            with self._lock:
                self._queue.extendleft(reversed(rows))
            print(f"warning: could not append {len(rows)} progress rows to {self.path} (kept for the next try): "
                  f"{str(error).splitlines()[0]}", file=sys.stderr, flush=True)
            return 0
        return len(rows)

    def console_view(self) -> str:
        """A line per query from its newest progress: what `lakehouse run` prints as it goes."""
        with self._lock:
            rows = sorted(self.latest.values(), key=lambda row: row.queryName or "")
        lines = []
        for row in rows:
            lag = "n/a" if row.kafkaLag is None else f"{row.kafkaLag:,.0f}"
            lines.append(f"  {row.queryName:<24} batch {row.batchId:>6}  in {row.inputRowsPerSecond or 0:>9,.0f}/s  "
                         f"done {row.processedRowsPerSecond or 0:>9,.0f}/s  "
                         f"{row.durationMs.get('triggerExecution', 0):>6} ms  lag {lag:>7}  "
                         f"state {row.stateRows or 0:>9,}  late {row.droppedByWatermark or 0:,}  "
                         f"failed expectations {row.expectationsFailed or 0:,}")
        return "\n".join(lines)


@contextmanager
def recording(spark: SparkSession, path: str | None,
              echo: Callable[[str], None] | None = None) -> Iterator[ProgressRecorder]:
    """A recorder to the Delta table at `path` (None: a runtime without Delta, whose progress only goes
    to `echo` and the console view), flushed when the block ends; hand it to `watching` for the
    session's own queries."""
    recorder = ProgressRecorder(spark, path, echo)
    if path is not None:
        recorder.create_table()
    try:
        yield recorder
    finally:
        recorder.flush()


def _percentile(q: float) -> str:
    # round, then cast: a cast alone truncates in Spark and rounds in DuckDB
    return (f"CAST(round(percentile_cont({q}) WITHIN GROUP (ORDER BY durationMs['triggerExecution'])) AS BIGINT) "
            f"AS batchMsP{int(q * 100)}")


#: Per query since `:since`, from `{progress}`: batches, last batch and its time, lag, batch duration
#: percentiles, processing rate, rows dropped as late, failed expectations, errors and the last one.
#: One text that DuckDB (`lakehouse status` in its own process, no JVM) and Spark both run.
SUMMARY_SQL = f"""
SELECT queryName, count(batchId) AS batches, max(batchId) AS lastBatch, max(timestamp) AS lastProgress,
       round(max_by(kafkaLag, timestamp), 0) AS lag,
       {_percentile(0.5)}, {_percentile(0.95)}, {_percentile(0.99)},
       round(avg(processedRowsPerSecond), 0) AS processedPerSecond,
       sum(droppedByWatermark) AS droppedLate, sum(expectationsFailed) AS failedExpectations,
       count(error) AS errors, max_by(error, CASE WHEN error IS NOT NULL THEN timestamp END) AS lastError
FROM {{progress}} WHERE timestamp >= :since
GROUP BY queryName ORDER BY queryName"""
