"""Every query's progress, kept: a StreamingQueryListener that fills the Delta table ops/stream_progress.

The listener runs inside the application: Spark calls it after each micro-batch of every query
(both paths under `lakehouse run`). It only queues a flat row, so a batch never waits on a write;
`ProgressRecorder.flush` appends what is queued in one Delta commit, every `monitoring.flush_interval_s`
and when the command ends. `lakehouse status` reads the table back (`summarise`).

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
from typing import Any, NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener

from shared.streaming import ProgressSummary, progress_dict

TABLE = "ops/stream_progress"


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


def _instant(text: str | None) -> datetime:
    if not text:
        return datetime.now(timezone.utc)
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def progress_row(progress: Any) -> ProgressRow:
    """One progress report as a row of ops/stream_progress."""
    data = progress_dict(progress)
    summary = ProgressSummary.of(data)
    operators = data.get("stateOperators", [])
    metrics = [source.get("metrics") or {} for source in data.get("sources", [])]
    most_behind = [int(m["maxOffsetsBehindLatest"]) for m in metrics if m.get("maxOffsetsBehindLatest")]
    rocksdb = {f"{op.get('operatorName', 'op')}.{key}": int(value)
               for op in operators for key, value in (op.get("customMetrics") or {}).items()
               if key.startswith("rocksdb") and isinstance(value, (int, float))}
    return ProgressRow(
        timestamp=_instant(data.get("timestamp")), queryName=data.get("name"), queryId=data.get("id"),
        runId=data.get("runId"), batchId=summary.batch_id, numInputRows=summary.input_rows,
        inputRowsPerSecond=summary.input_rate, processedRowsPerSecond=summary.processed_rate,
        durationMs={key: int(value) for key, value in (data.get("durationMs") or {}).items()},
        watermark=summary.watermark, kafkaLag=summary.lag,
        maxOffsetsBehindLatest=max(most_behind) if most_behind else None, stateRows=summary.state_rows,
        stateMemoryBytes=sum(op.get("memoryUsedBytes", 0) for op in operators),
        droppedByWatermark=summary.dropped_by_watermark, rocksdbMetrics=rocksdb,
        observedMetrics=json.dumps(data.get("observedMetrics") or {}),
        expectationsFailed=sum(summary.expectations.values()), progress=json.dumps(data),
    )


class ProgressRecorder(StreamingQueryListener):
    """Queues every progress of every query of the session; `flush` writes them to ops/stream_progress.

    `echo`, when given, also receives each progress as its JSON text: `lakehouse analytical
    --progress-json` prints them for `lakehouse run`, whose console view `show`s them.
    """

    def __init__(self, spark: SparkSession, path: str | None, echo: Callable[[str], None] | None = None):
        self.spark = spark
        self.path = path
        self._echo = echo
        self._names: dict[str, str] = {}  # query id -> name, for terminations (which carry no name)
        self._queue: deque[ProgressRow] = deque()
        self._lock = threading.Lock()
        self.latest: dict[str, ProgressRow] = {}  # query name -> its newest row (the console view)
        self._running: set[str] = set()  # run ids started and not yet reported terminated
        self._all_terminated = threading.Condition(self._lock)

    def onQueryStarted(self, event: Any) -> None:
        with self._lock:
            self._running.add(str(event.runId))
            self._names[str(event.id)] = event.name

    def onQueryProgress(self, event: Any) -> None:
        row = progress_row(event.progress)
        with self._lock:
            self._queue.append(row)
            self.latest[row.queryName] = row
        if self._echo:
            self._echo(event.progress.json)

    def show(self, progress: dict[str, Any]) -> None:
        """Put another process's query in the console view (that process records its own progress)."""
        row = progress_row(progress)
        with self._lock:
            self.latest[row.queryName] = row

    def record(self, progress: dict[str, Any]) -> None:
        """Record and show another process's progress: the fast path's, whose runtime has no Delta."""
        row = progress_row(progress)
        with self._lock:
            self._queue.append(row)
            self.latest[row.queryName] = row

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        name = self._names.get(str(event.id))
        if event.exception:
            row = ProgressRow(timestamp=datetime.now(timezone.utc), queryName=name,
                              queryId=str(event.id), runId=str(event.runId), durationMs={}, rocksdbMetrics={},
                              error=event.exception.splitlines()[0])
            with self._lock:
                self._queue.append(row)
        with self._lock:
            self._running.discard(str(event.runId))
            self._all_terminated.notify_all()

    def await_terminations(self, timeout_s: float) -> bool:
        """Wait until every query this listener saw start has been reported terminated to it.

        Spark delivers listener events on its own thread, after the fact: removed (or its process
        gone) while a query's last events are on their way, the listener fails on Spark's side with
        `ERROR StreamingQueryListenerBus: Listener PythonStreamingQueryListenerWrapper threw an
        exception`, which a clean stop must not log."""
        with self._lock:
            return self._all_terminated.wait_for(lambda: not self._running, timeout=timeout_s)

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
    """Record every query's progress to the Delta table at `path` while the block runs (None: a runtime
    without Delta, whose progress only goes to `echo` and the console view)."""
    recorder = ProgressRecorder(spark, path, echo)
    if path is not None:
        recorder.create_table()
    spark.streams.addListener(recorder)
    try:
        yield recorder
    finally:
        if not any(query.isActive for query in spark.streams.active):  # stopped: their last events are due
            recorder.await_terminations(timeout_s=10)
        spark.streams.removeListener(recorder)
        recorder.flush()


def summarise(progress: DataFrame, since: datetime) -> DataFrame:
    """Per query since `since`: batches, last batch and its time, lag, batch duration percentiles,
    input rate, rows dropped as late, failed expectations, errors and the last one."""
    recent = progress.where(F.col("timestamp") >= F.lit(since))
    duration = F.col("durationMs")["triggerExecution"]
    newest = F.max_by
    return recent.groupBy("queryName").agg(
        F.count("batchId").alias("batches"),
        F.max("batchId").alias("lastBatch"),
        F.date_format(F.max("timestamp"), "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("lastProgress"),
        F.round(newest("kafkaLag", "timestamp"), 0).alias("lag"),
        *(F.percentile_approx(duration, q).alias(f"batchMsP{int(q * 100)}") for q in (0.5, 0.95, 0.99)),
        F.round(F.avg("processedRowsPerSecond"), 0).alias("processedPerSecond"),
        F.sum("droppedByWatermark").alias("droppedLate"),
        F.sum("expectationsFailed").alias("failedExpectations"),
        F.count("error").alias("errors"),
        newest("error", F.when(F.col("error").isNotNull(), F.col("timestamp"))).alias("lastError"),
    ).orderBy("queryName")
