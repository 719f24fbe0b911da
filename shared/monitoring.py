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
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQueryListener

from shared.streaming import ProgressSummary, progress_dict

TABLE = "ops/stream_progress"
SCHEMA = (
    "timestamp timestamp, queryName string, queryId string, runId string, batchId long, "
    "numInputRows long, inputRowsPerSecond double, processedRowsPerSecond double, "
    "durationMs map<string,long>, watermark string, kafkaLag double, maxOffsetsBehindLatest long, "
    "stateRows long, stateMemoryBytes long, droppedByWatermark long, rocksdbMetrics map<string,long>, "
    "observedMetrics string, expectationsFailed long, error string, progress string"
)


def _instant(text: str | None) -> datetime:
    if not text:
        return datetime.now(timezone.utc)
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def progress_row(progress: Any) -> tuple:
    """One progress report as a row of SCHEMA."""
    data = progress_dict(progress)
    summary = ProgressSummary.of(data)
    operators = data.get("stateOperators", [])
    metrics = [source.get("metrics") or {} for source in data.get("sources", [])]
    most_behind = [int(m["maxOffsetsBehindLatest"]) for m in metrics if m.get("maxOffsetsBehindLatest")]
    rocksdb = {f"{op.get('operatorName', 'op')}.{key}": int(value)
               for op in operators for key, value in (op.get("customMetrics") or {}).items()
               if key.startswith("rocksdb") and isinstance(value, (int, float))}
    return (
        _instant(data.get("timestamp")), data.get("name"), data.get("id"), data.get("runId"), summary.batch_id,
        summary.input_rows, summary.input_rate, summary.processed_rate,
        {key: int(value) for key, value in (data.get("durationMs") or {}).items()},
        summary.watermark, summary.lag, max(most_behind) if most_behind else None,
        summary.state_rows, sum(op.get("memoryUsedBytes", 0) for op in operators), summary.dropped_by_watermark,
        rocksdb, json.dumps(data.get("observedMetrics") or {}), sum(summary.expectations.values()), None,
        json.dumps(data),
    )


class ProgressRecorder(StreamingQueryListener):
    """Queues every progress of every query of the session; `flush` writes them to ops/stream_progress.

    `echo`, when given, also receives each progress as its JSON text: `lakehouse analytical
    --progress-json` prints them for `lakehouse run`, whose console view `show`s them.
    """

    def __init__(self, spark: SparkSession, path: str, echo: Callable[[str], None] | None = None):
        self.spark = spark
        self.path = path
        self._echo = echo
        self._queue: deque[tuple] = deque()
        self._lock = threading.Lock()
        self.latest: dict[str, tuple] = {}  # query name -> its newest row (the console view)
        self._running: set[str] = set()  # run ids started and not yet reported terminated
        self._all_terminated = threading.Condition(self._lock)

    def onQueryStarted(self, event: Any) -> None:
        with self._lock:
            self._running.add(str(event.runId))

    def onQueryProgress(self, event: Any) -> None:
        row = progress_row(event.progress)
        with self._lock:
            self._queue.append(row)
            self.latest[row[1]] = row
        if self._echo:
            self._echo(event.progress.json)

    def show(self, progress: dict[str, Any]) -> None:
        """Put another process's query in the console view (that process records its own progress)."""
        row = progress_row(progress)
        with self._lock:
            self.latest[row[1]] = row

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        if event.exception:
            row = (datetime.now(timezone.utc), self._name_of(str(event.id)), str(event.id), str(event.runId),
                   None, None, None, None, {}, None, None, None, None, None, None, {}, None, None,
                   event.exception.splitlines()[0], None)
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

    def _name_of(self, query_id: str) -> str | None:
        return next((row[1] for row in self.latest.values() if row[2] == query_id), None)

    def create_table(self) -> None:
        """Create the table if it is missing, before any query runs: under `lakehouse run` two
        processes append to it, and two first commits would race for version 0."""
        from delta.tables import DeltaTable

        if not DeltaTable.isDeltaTable(self.spark, self.path):
            self.spark.createDataFrame([], SCHEMA).write.format("delta").mode("append").save(self.path)

    def flush(self) -> int:
        """Append what is queued in one commit; the number of rows written. A failed append keeps
        the rows for the next flush: monitoring never stops the queries it watches."""
        with self._lock:
            rows = list(self._queue)
            self._queue.clear()
        if not rows:
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
            rows = sorted(self.latest.values(), key=lambda row: row[1] or "")
        lines = []
        for row in rows:
            lag = "n/a" if row[10] is None else f"{row[10]:,.0f}"
            lines.append(f"  {row[1]:<24} batch {row[4]:>6}  in {row[6] or 0:>9,.0f}/s  done {row[7] or 0:>9,.0f}/s  "
                         f"{row[8].get('triggerExecution', 0):>6} ms  lag {lag:>7}  state {row[12] or 0:>9,}  "
                         f"late {row[14] or 0:,}  failed expectations {row[17] or 0:,}")
        return "\n".join(lines)


@contextmanager
def recording(spark: SparkSession, path: str,
              echo: Callable[[str], None] | None = None) -> Iterator[ProgressRecorder]:
    """Record every query's progress to the Delta table at `path` while the block runs."""
    recorder = ProgressRecorder(spark, path, echo)
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
