"""A query's progress, read once: Spark's report of each batch as one `ProgressSummary`, and one
listener per session that hands it to whatever watches the queries.

Spark reports a batch's progress when the batch ends (every micro-batch; once per checkpoint interval
in real-time mode) as nested JSON. `ProgressSummary.of` reads it into plain fields; the progress
recorder (ops/stream_progress), the Prometheus series, the console's status lines and the benchmarks
all read those fields, never the JSON.

    summary = ProgressSummary.of(query.lastProgress)
    summary.input_rows, summary.invalid_by_reason, summary.processed_offsets

The session's one listener, which hands each report to whatever watches: shared.query_events.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from shared.parsing import PARSE_METRICS

#: Kafka offsets per (topic, partition).
Offsets = dict[tuple[str, int], int]

#: Observed metrics named expectations_<table key> (analytical.quality), and their fields that are not
#: one expectation's count.
EXPECTATIONS_PREFIX = "expectations_"
_NOT_AN_EXPECTATION = ("policy", "rows", "failed", "dropped")
#: The fields of the parse metrics (shared.parsing.PARSE_METRICS) that are not a reason.
_NOT_A_REASON = ("records", "invalid")


def progress_dict(progress: Any) -> dict[str, Any]:
    """A progress report as plain JSON data (PySpark's object stringifies nested offsets)."""
    return json.loads(progress.json) if hasattr(progress, "json") else dict(progress)


def kafka_offsets(value: Any) -> Offsets:
    """A progress report's Kafka offsets ({topic: {partition: offset}}) by (topic, partition); empty
    for another source's offsets (a Delta source's are a version and an index) and for none."""
    if not isinstance(value, dict):
        return {}
    return {(topic, int(partition)): int(offset)
            for topic, partitions in value.items() if isinstance(partitions, dict)
            for partition, offset in partitions.items() if isinstance(offset, int)}


def expectation_counts(observed: dict[str, Any]) -> dict[str, int]:
    """Rows that broke each expectation, by `<table key>.<expectation>`, from a batch's observed metrics.

        {"expectations_silver_clicks": {"eventIdNotNull": 2, "rows": 9}} -> {"silver_clicks.eventIdNotNull": 2}
    """
    return {
        f"{metrics_name.removeprefix(EXPECTATIONS_PREFIX)}.{name}": int(count or 0)
        for metrics_name, metrics in observed.items() if metrics_name.startswith(EXPECTATIONS_PREFIX)
        for name, count in metrics.items() if name not in _NOT_AN_EXPECTATION
    }


def _instant(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _sources_offsets(sources: list[dict[str, Any]], key: str) -> Offsets:
    offsets: Offsets = {}
    for source in sources:
        offsets |= kafka_offsets(source.get(key))
    return offsets


#: The observed metrics (`late`) of a state operator that drops late clicks itself instead of reporting
#: them as Spark's numRowsDroppedByWatermark: the fast path's JVM processor (operational/hot_pages.py).
LATE_METRICS = "late_clicks"
#: The observed metrics of the query that measures gold's freshness (analytical/medallion.py):
#: `clicks` read in the batch, and `kafkaTimes`, their Kafka append times (epoch ms) at ARRIVAL_QUANTILES.
ARRIVAL_METRICS = "arrivals"
#: The midpoints of 100 equal shares: each quantile stands for 1% of the batch's clicks.
ARRIVAL_QUANTILES = tuple((share + 0.5) / 100 for share in range(100))


class BatchObservations:
    """Metrics a query observes inside its `foreachBatch`, held for its progress report.

    Spark's report carries only what the streaming plan observes; an observation on the batch's
    DataFrame inside `foreachBatch` never reaches it (gold/page_clicks_5s counts its windows there, so
    its expectations and late clicks are observed there). The batch function records them by query id
    and batch id before the batch ends, and `ProgressSummary.of` reads them into the report's
    `observedMetrics`, so every reader of progress sees them as it sees Spark's own. A replayed batch
    records again over the first attempt. The newest `limit` batches are kept.

        BATCH_OBSERVATIONS.record(query_id, 7, {"late_clicks": {"late": 3}})
        ProgressSummary.of(report_of_batch_7).dropped_by_watermark  # 3, plus any state operator's
    """

    def __init__(self, limit: int = 1000) -> None:
        self._limit = limit
        self._by_batch: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def record(self, query_id: str, batch_id: int, observed: Mapping[str, Mapping[str, Any]]) -> None:
        with self._lock:
            self._by_batch.pop((query_id, batch_id), None)
            self._by_batch[(query_id, batch_id)] = {name: dict(metrics) for name, metrics in observed.items()}
            while len(self._by_batch) > self._limit:
                del self._by_batch[next(iter(self._by_batch))]

    def of(self, query_id: str | None, batch_id: int) -> dict[str, dict[str, Any]]:
        with self._lock:
            return dict(self._by_batch.get((query_id or "", batch_id), {}))


#: This process's: a batch function and the progress of its batch are in the same driver.
BATCH_OBSERVATIONS = BatchObservations()


@dataclass(frozen=True)
class ProgressSummary:
    """One batch of one query, from its progress report."""

    name: str
    query_id: str | None
    run_id: str | None
    batch_id: int
    #: When the batch started (Spark's `timestamp`) and how long it took (`durationMs`, by part).
    started_at: datetime | None
    durations_ms: dict[str, int]
    input_rows: int
    input_rate: float
    processed_rate: float
    lag: float | None  # records behind the latest offsets, averaged over partitions
    max_offsets_behind: int | None
    state_rows: int
    state_memory_bytes: int
    dropped_by_watermark: int
    invalid_by_reason: dict[str, int]  # records that failed parsing, by shared.parsing reason
    watermark: str | None
    expectations: dict[str, int]  # rows that broke each expectation (analytical.quality), by name
    sink_rows: int  # rows written (-1: the sink does not say)
    #: Kafka offsets the batch started at, ended at, and the newest the source saw.
    start_offsets: Offsets = field(default_factory=dict)
    processed_offsets: Offsets = field(default_factory=dict)
    latest_offsets: Offsets = field(default_factory=dict)
    #: The clicks the batch read and their Kafka append times (epoch ms) at ARRIVAL_QUANTILES, when
    #: the query observes them (ARRIVAL_METRICS).
    arrived_clicks: int = 0
    arrival_times_ms: tuple[int, ...] = ()
    #: Per state operator, Spark's report as is (name, rows, custom metrics, ...).
    operators: tuple[dict[str, Any], ...] = ()
    #: The report as JSON data, for whatever keeps it whole (ops/stream_progress).
    data: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, progress: Any) -> "ProgressSummary":
        data = progress_dict(progress)
        in_batch = BATCH_OBSERVATIONS.of(data.get("id"), int(data["batchId"]))
        if in_batch:
            data = {**data, "observedMetrics": {**(data.get("observedMetrics") or {}), **in_batch}}
        sources = data.get("sources") or []
        source_metrics = [source.get("metrics") or {} for source in sources]
        lags = [float(m["avgOffsetsBehindLatest"]) for m in source_metrics if m.get("avgOffsetsBehindLatest")]
        most_behind = [int(m["maxOffsetsBehindLatest"]) for m in source_metrics if m.get("maxOffsetsBehindLatest")]
        operators = tuple(data.get("stateOperators") or ())
        observed = data.get("observedMetrics") or {}
        parsed = observed.get(PARSE_METRICS) or {}
        arrivals = observed.get(ARRIVAL_METRICS) or {}
        return cls(
            name=data.get("name") or "unnamed",
            query_id=data.get("id"),
            run_id=data.get("runId"),
            batch_id=int(data["batchId"]),
            started_at=_instant(data.get("timestamp")),
            durations_ms={key: int(value) for key, value in (data.get("durationMs") or {}).items()},
            input_rows=int(data.get("numInputRows") or 0),
            input_rate=float(data.get("inputRowsPerSecond") or 0.0),
            processed_rate=float(data.get("processedRowsPerSecond") or 0.0),
            lag=sum(lags) if lags else (0.0 if source_metrics else None),
            max_offsets_behind=max(most_behind) if most_behind else None,
            state_rows=sum(op.get("numRowsTotal", 0) for op in operators),
            state_memory_bytes=sum(op.get("memoryUsedBytes", 0) for op in operators),
            dropped_by_watermark=sum(op.get("numRowsDroppedByWatermark", 0) for op in operators)
            + int((observed.get(LATE_METRICS) or {}).get("late") or 0),
            invalid_by_reason={reason: int(count) for reason, count in parsed.items()
                               if reason not in _NOT_A_REASON and count},
            watermark=(data.get("eventTime") or {}).get("watermark"),
            expectations=expectation_counts(observed),
            sink_rows=int((data.get("sink") or {}).get("numOutputRows", -1)),
            start_offsets=_sources_offsets(sources, "startOffset"),
            processed_offsets=_sources_offsets(sources, "endOffset"),
            latest_offsets=_sources_offsets(sources, "latestOffset"),
            arrived_clicks=int(arrivals.get("clicks") or 0),
            arrival_times_ms=tuple(int(time) for time in arrivals.get("kafkaTimes") or ()),
            operators=operators,
            data=data,
        )

    @property
    def duration_ms(self) -> int:
        """The whole batch (`triggerExecution`)."""
        return self.durations_ms.get("triggerExecution", 0)

    @property
    def ended_at(self) -> datetime | None:
        """When the batch ended: a real-time batch's end is its boundary."""
        return self.started_at + timedelta(milliseconds=self.duration_ms) if self.started_at else None

    @property
    def freshness_s(self) -> list[tuple[float, float]]:
        """Gold's freshness over the clicks the batch read: (seconds from a click's Kafka append to the
        end of the batch that wrote its window, how many clicks that figure stands for), one pair per
        ARRIVAL_QUANTILES point. Empty when the batch read no clicks or the query does not observe them.

        A batch that ended at 12:00:10 and read 200 clicks appended from 11:59:58 to 12:00:08 gives
        100 pairs from about (12.0, 2.0) to (2.0, 2.0)."""
        if not self.arrival_times_ms or self.ended_at is None:
            return []
        ended_ms = self.ended_at.timestamp() * 1000
        share = self.arrived_clicks / len(self.arrival_times_ms)
        return [((ended_ms - appended_ms) / 1000, share) for appended_ms in self.arrival_times_ms]

    @property
    def invalid(self) -> int:
        return sum(self.invalid_by_reason.values())

    @property
    def backlog(self) -> int | None:
        """Records from the batch's start offsets to its latest ones, summed over Kafka partitions.

        Under Trigger.AvailableNow the Kafka source reports as `latestOffset` the end it fixed for the
        run, so the first batch's backlog is what the run will read. None when a source is not Kafka
        or has no start yet (its first batch ever), or a partition has no start offset.
        """
        start, latest = self.start_offsets, self.latest_offsets
        if not start or not latest or set(latest) - set(start):
            return None
        return sum(offset - start[key] for key, offset in latest.items())


def records_behind(summary: ProgressSummary | None, newest: Mapping[tuple[str, int], int], topic: str) -> int:
    """Records of `topic` up to `newest` (the broker's end offsets by (topic, partition), kafka-python's
    TopicPartition too) that the batch of `summary` had not read: all of them before its first report,
    and all of a partition it has no offset for."""
    read = summary.processed_offsets if summary else {}
    return sum(max(0, end - read.get((t, partition), 0)) for (t, partition), end in newest.items() if t == topic)


def batch_boundaries(summaries: Iterable[ProgressSummary], start: datetime, end: datetime) -> int:
    """How many batches ended inside [start, end]: a real-time batch's end is its boundary, where the
    query commits and starts the next one."""
    return sum(1 for summary in summaries if summary.ended_at and start <= summary.ended_at <= end)


class RunningTotals:
    """Totals over the batches seen so far (each progress counted once, by batch id)."""

    def __init__(self) -> None:
        self.last_batch = -1
        self.invalid = 0
        self.dropped_by_watermark = 0
        self.rows = 0
        self.latest: ProgressSummary | None = None
        self.batches = 0
        self.expectations: Counter[str] = Counter()
        #: Spark's `durationMs` of every batch, summed by part (triggerExecution, addBatch, queryPlanning, ...).
        self.durations_ms: Counter[str] = Counter()
        #: What the first batch had to read up to the end the source fixed for the run, when the
        #: source says (ProgressSummary.backlog: Kafka under AvailableNow): the run's total.
        self.backlog: int | None = None

    def add(self, progresses: Sequence[Any]) -> ProgressSummary | None:
        """Count the progresses not seen yet; the newest of them, or None when none is new."""
        latest = None
        for progress in progresses:
            if progress["batchId"] <= self.last_batch:
                continue
            summary = ProgressSummary.of(progress)
            self.last_batch = summary.batch_id
            self.invalid += summary.invalid
            self.dropped_by_watermark += summary.dropped_by_watermark
            self.rows += summary.input_rows
            self.expectations.update(summary.expectations)
            self.durations_ms.update(summary.durations_ms)
            if not self.batches:
                self.backlog = summary.backlog
            self.batches += 1
            latest = self.latest = summary
        return latest


def status_line(name: str, summary: ProgressSummary, totals: RunningTotals) -> str:
    lag = "n/a" if summary.lag is None else f"{summary.lag:,.0f}"
    return (
        f"[{name}] batch {summary.batch_id}: in {summary.input_rate:,.0f}/s, processed "
        f"{summary.processed_rate:,.0f}/s, last batch {summary.duration_ms} ms, lag {lag}, "
        f"state rows {summary.state_rows:,}, late dropped {totals.dropped_by_watermark:,}, "
        f"invalid {totals.invalid:,}"
        + (f", failed expectations {dict(totals.expectations)}" if sum(totals.expectations.values()) else "")
    )
