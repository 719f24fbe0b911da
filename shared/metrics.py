"""Every query's progress as Prometheus series: what operators scrape, graph and alert on.

`lakehouse operational`, `analytical` and `run` (each of run's two processes) serve them over HTTP
at `metrics.bind_address` and their path's port (`metrics.operational_port`, `metrics.analytical_port`)
while their queries run (`serving`). The progress listener (shared.monitoring.ProgressRecorder)
hands every report to `QueryMetrics`, which keeps the counters and the last values. Two series are
computed when Prometheus scrapes, because their point is to move when the query does not:

  - the Kafka lag: the broker's newest offsets now minus the offsets the query has processed.
    Spark's Kafka source commits no consumer-group offsets, so the usual lag exporters see nothing
    of these streams; a frozen or starved query's lag keeps growing here;
  - the watermark's delay behind the wall clock.

Names follow Prometheus' conventions (the unit in the name, `_total` on counters); every series has
the label `query` (the Spark query name), and `reason`, `table`, `expectation` or `topic` where they
apply. conf/prometheus/ holds the scrape configuration, the alerting rules and a Grafana dashboard.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import (CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, disable_created_metrics,
                               start_http_server)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from pyspark.sql.streaming import StreamingQueryListener

from shared.config import Config, MetricsConfig
from shared.parsing import PARSE_METRICS, PARSE_REASONS
from shared.streaming import Offsets, Stream, expectation_counts, kafka_offsets, progress_dict

#: Batch durations from a fast-path batch (well under a second) to a backfill's (minutes).
BATCH_SECONDS_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)
#: The broker's newest offsets of the given topics, or None when the broker does not answer.
LatestOffsets = Callable[[Iterable[str]], Offsets | None]


@dataclass(frozen=True)
class QueryFacts:
    """What the configuration says about one query, which its progress reports do not."""

    trigger_s: float
    allowed_lateness_s: float
    #: The table its expectations check (labels its expectation failures).
    table: str | None = None
    #: Its sink's rows are alerts (the fast path).
    alerts: bool = False
    #: The reasons its parsing counts invalid records by, and the expectations it checks: their
    #: counters exist from the query's start at 0, because Prometheus' increase() cannot see the
    #: first value of a series, and a first failure must raise an alert.
    invalid_reasons: tuple[str, ...] = ()
    expectations: tuple[str, ...] = ()

    @classmethod
    def of(cls, config: Config, stream: Stream) -> "QueryFacts":
        """A stream's facts from its declaration and the config (its suite builds Spark columns: call
        this once a SparkSession exists)."""
        table = stream.writes[0] if stream.writes else None
        suite = table.suite(config) if getattr(table, "suite", None) else None
        return cls(trigger_s=stream.trigger_interval(config).total_seconds(),
                   allowed_lateness_s=stream.allowed_lateness(config).total_seconds(),
                   table=table.name if table else None, alerts=stream.layer == "fast",
                   invalid_reasons=tuple(reason.value for reason in PARSE_REASONS)
                   if stream.layer in ("fast", "silver") else (),  # the layers that parse Kafka records
                   expectations=tuple(expectation.name for expectation in suite.on_write) if suite else ())


class QueryMetrics(Collector):
    """The series of one process's queries, in a registry of their own (not the client's global one:
    nothing else of the process is exported, and tests make several)."""

    def __init__(self, facts: Mapping[str, QueryFacts], latest_offsets: LatestOffsets | None = None,
                 clock: Callable[[], float] = time.time):
        self.facts = dict(facts)
        self._latest_offsets = latest_offsets
        self._clock = clock
        self._lock = threading.Lock()
        self._processed: dict[str, Offsets] = {}  # query -> offsets its last batch ended at
        self._latest_seen: dict[str, Offsets] = {}  # query -> the broker's offsets at its last batch
        self._watermark: dict[str, float] = {}  # query -> watermark, seconds since the epoch
        self._counted: dict[str, tuple[str, int]] = {}  # query -> (run id, batch id) last counted
        disable_created_metrics()  # no `_created` twin per counter: Prometheus 2 does not use them
        self.registry = registry = CollectorRegistry(auto_describe=True)
        query = ("query",)

        def gauge(name: str, text: str, labels: tuple[str, ...] = query) -> Gauge:
            return Gauge(name, text, labels, registry=registry)

        def counter(name: str, text: str, labels: tuple[str, ...] = query) -> Counter:
            return Counter(name, text, labels, registry=registry)

        self.up = gauge("lakehouse_query_up", "1 while the query runs, 0 once it has stopped or failed")
        self.failures = counter("lakehouse_query_failures", "Terminations with an error (supervision restarts)")
        self.batches = counter("lakehouse_batches", "Micro-batches completed")
        self.input_rows = counter("lakehouse_input_rows", "Records read by the query's micro-batches")
        self.input_rate = gauge("lakehouse_input_rows_per_second", "Arrival rate over the last micro-batch")
        self.processed_rate = gauge("lakehouse_processed_rows_per_second", "Processing rate of the last micro-batch")
        self.batch_duration = Histogram("lakehouse_batch_duration_seconds", "Micro-batch duration (triggerExecution)",
                                        query, buckets=BATCH_SECONDS_BUCKETS, registry=registry)
        self.last_batch_duration = gauge("lakehouse_last_batch_duration_seconds", "Duration of the last micro-batch")
        self.trigger = gauge("lakehouse_trigger_interval_seconds",
                             "Configured processing-time trigger; 0 = the next batch as soon as one ends")
        self.allowed_lateness = gauge("lakehouse_watermark_allowed_lateness_seconds",
                                      "Configured delay of the event-time watermark behind the newest event")
        self.state_rows = gauge("lakehouse_state_rows", "Rows in the query's state stores")
        self.state_memory = gauge("lakehouse_state_memory_bytes", "Memory used by the query's state stores")
        self.late_dropped = counter("lakehouse_late_rows_dropped", "Rows dropped as later than the watermark")
        self.invalid = counter("lakehouse_invalid_records", "Records that failed parsing, by reason",
                               ("query", "reason"))
        self.expectation_failures = counter("lakehouse_expectation_failures", "Rows that broke an expectation",
                                            ("query", "table", "expectation"))
        self.alerts = counter("lakehouse_alerts_emitted", "Hot-page alerts published to Kafka")
        self.last_progress = gauge("lakehouse_last_progress_timestamp_seconds",
                                   "Unix time of the query's newest progress or idle report")
        registry.register(self)
        ProcessCollector(registry=registry)

    # -- what the listener reports --------------------------------------------------------------

    def started(self, query: str) -> None:
        self.up.labels(query).set(1)
        self.last_progress.labels(query).set(self._clock())
        for counter in (self.failures, self.batches, self.input_rows, self.late_dropped):
            counter.labels(query)  # at 0 until something is counted
        facts = self.facts.get(query)
        if facts:
            self.trigger.labels(query).set(facts.trigger_s)
            self.allowed_lateness.labels(query).set(facts.allowed_lateness_s)
            for reason in facts.invalid_reasons:
                self.invalid.labels(query, reason)
            for expectation in facts.expectations:
                self.expectation_failures.labels(query, facts.table or "", expectation)
            if facts.alerts:
                self.alerts.labels(query)

    def idle(self, query: str) -> None:
        self.last_progress.labels(query).set(self._clock())

    def terminated(self, query: str, failed: bool) -> None:
        self.up.labels(query).set(0)
        if failed:
            self.failures.labels(query).inc()

    def progressed(self, progress: Any) -> None:
        """One progress report: counters grow once per batch (a report seen twice counts once)."""
        data = progress_dict(progress)
        query = data.get("name") or "unnamed"
        self.up.labels(query).set(1)
        self.last_progress.labels(query).set(self._clock())
        self._keep_offsets_and_watermark(query, data)
        batch = (str(data.get("runId")), int(data.get("batchId", -1)))
        with self._lock:
            if self._counted.get(query) == batch:
                return
            self._counted[query] = batch
        self._count_batch(query, data)

    def _count_batch(self, query: str, data: dict[str, Any]) -> None:
        facts = self.facts.get(query)
        operators = data.get("stateOperators") or []
        seconds = (data.get("durationMs") or {}).get("triggerExecution", 0) / 1000
        self.batches.labels(query).inc()
        self.input_rows.labels(query).inc(data.get("numInputRows") or 0)
        self.input_rate.labels(query).set(float(data.get("inputRowsPerSecond") or 0))
        self.processed_rate.labels(query).set(float(data.get("processedRowsPerSecond") or 0))
        self.batch_duration.labels(query).observe(seconds)
        self.last_batch_duration.labels(query).set(seconds)
        self.state_rows.labels(query).set(sum(op.get("numRowsTotal", 0) for op in operators))
        self.state_memory.labels(query).set(sum(op.get("memoryUsedBytes", 0) for op in operators))
        self.late_dropped.labels(query).inc(sum(op.get("numRowsDroppedByWatermark", 0) for op in operators))
        observed = data.get("observedMetrics") or {}
        for reason, count in (observed.get(PARSE_METRICS) or {}).items():
            if reason not in ("records", "invalid") and count:
                self.invalid.labels(query, reason).inc(count)
        table = facts.table if facts and facts.table else ""
        for expectation, count in expectation_counts(observed).items():
            if count:
                self.expectation_failures.labels(query, table, expectation).inc(count)
        sink_rows = (data.get("sink") or {}).get("numOutputRows", -1)
        if facts and facts.alerts and sink_rows > 0:
            self.alerts.labels(query).inc(sink_rows)

    def _keep_offsets_and_watermark(self, query: str, data: dict[str, Any]) -> None:
        processed: Offsets = {}
        latest: Offsets = {}
        for source in data.get("sources") or []:
            processed |= kafka_offsets(source.get("endOffset"))
            latest |= kafka_offsets(source.get("latestOffset"))
        watermark = _seconds(((data.get("eventTime") or {}).get("watermark")))
        with self._lock:
            if processed:
                self._processed[query] = processed
                self._latest_seen[query] = latest
            if watermark:  # the epoch: no event seen yet, no watermark to be late by
                self._watermark[query] = watermark

    # -- what is computed at scrape time --------------------------------------------------------

    def describe(self) -> Iterator[Any]:
        """The live families, without asking the broker (registering calls this)."""
        yield from self._live_families()

    def collect(self) -> Iterator[Any]:
        delay, lag = self._live_families()
        now = self._clock()
        with self._lock:
            watermarks = dict(self._watermark)
            processed = {query: dict(offsets) for query, offsets in self._processed.items()}
            seen = {query: dict(offsets) for query, offsets in self._latest_seen.items()}
        for query, watermark in sorted(watermarks.items()):
            delay.add_metric([query], now - watermark)
        topics = {topic for offsets in processed.values() for topic, _ in offsets}
        latest = self._latest_offsets(topics) if self._latest_offsets and topics else None
        for query, offsets in sorted(processed.items()):
            newest = latest if latest is not None else seen.get(query, {})
            for topic in sorted({topic for topic, _ in offsets}):
                behind = sum(max(newest.get(key, end) - end, 0) for key, end in offsets.items() if key[0] == topic)
                lag.add_metric([query, topic], behind)
        yield delay
        yield lag

    @staticmethod
    def _live_families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily("lakehouse_watermark_delay_seconds",
                              "Wall clock minus the query's event-time watermark, at scrape time", labels=["query"]),
            GaugeMetricFamily("lakehouse_kafka_lag_records",
                              "Records on the broker the query has not processed, at scrape time",
                              labels=["query", "topic"]),
        )


class MetricsListener(StreamingQueryListener):
    """Hands Spark's query events to `QueryMetrics` (kept apart from the progress recorder, so that a
    benchmark can serve the metrics without recording to Delta)."""

    def __init__(self, metrics: QueryMetrics):
        self.metrics = metrics
        self._names: dict[str, str] = {}  # query id -> name: idle and termination events carry no name

    def onQueryStarted(self, event: Any) -> None:
        self._names[str(event.id)] = event.name or "unnamed"
        self.metrics.started(self._names[str(event.id)])

    def onQueryProgress(self, event: Any) -> None:
        self.metrics.progressed(event.progress)

    def onQueryIdle(self, event: Any) -> None:
        if str(event.id) in self._names:
            self.metrics.idle(self._names[str(event.id)])

    def onQueryTerminated(self, event: Any) -> None:
        if str(event.id) in self._names:
            self.metrics.terminated(self._names[str(event.id)], failed=bool(event.exception))


@contextmanager
def listening(spark: Any, metrics: QueryMetrics | None) -> Iterator[None]:
    """`metrics` fed by the session's query events while the block runs (nothing when None)."""
    if metrics is None:
        yield
        return
    listener = MetricsListener(metrics)
    spark.streams.addListener(listener)
    try:
        yield
    finally:
        spark.streams.removeListener(listener)


def _seconds(instant: str | None) -> float | None:
    if not instant:
        return None
    seconds = datetime.fromisoformat(instant.replace("Z", "+00:00")).timestamp()
    return seconds if seconds > 0 else None


class BrokerOffsets:
    """The newest offsets of topics, asked of the broker at each scrape through one kafka-python
    consumer (no group: nothing is committed). A broker that does not answer within the timeout
    gives None, and the lag falls back to what the query's last progress saw."""

    def __init__(self, kafka: Any, timeout_ms: int = 2000):
        self._kafka = kafka
        self._timeout_ms = timeout_ms
        self._consumer: Any = None
        self._lock = threading.Lock()

    def __call__(self, topics: Iterable[str]) -> Offsets | None:
        from kafka import TopicPartition

        with self._lock:
            try:
                if self._consumer is None:
                    from shared.kafka import consumer_for

                    self._consumer = consumer_for(self._kafka, request_timeout_ms=self._timeout_ms)
                partitions = [TopicPartition(topic, partition) for topic in sorted(topics)
                              for partition in sorted(self._consumer.partitions_for_topic(topic) or ())]
                return {(tp.topic, tp.partition): offset for tp, offset in self._consumer.end_offsets(partitions).items()}
            except Exception:  # a scrape must answer; the next one asks again
                self.close()
                return None

    def close(self) -> None:
        if self._consumer is not None:
            try:
                self._consumer.close()
            finally:
                self._consumer = None


def require_free_port(settings: MetricsConfig, application: str) -> None:
    """A ServiceError naming the key when the path's metrics port is taken (nothing when disabled)."""
    from shared.services.daemon import require_free_ports

    if settings.enabled:
        require_free_ports(settings.bind_address, {f"metrics.{application}_port": settings.port(application)})


@contextmanager
def serving(settings: MetricsConfig, application: str, facts: Mapping[str, QueryFacts],
            latest_offsets: LatestOffsets | None = None) -> Iterator[QueryMetrics | None]:
    """`QueryMetrics` for the path's `application` (operational, analytical), served over HTTP on
    its configured port while the block runs; None when `metrics.enabled` is false."""
    if not settings.enabled:
        yield None
        return
    require_free_port(settings, application)
    metrics = QueryMetrics(facts, latest_offsets)
    server, thread = start_http_server(settings.port(application), addr=settings.bind_address,
                                       registry=metrics.registry)
    try:
        yield metrics
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        if isinstance(latest_offsets, BrokerOffsets):
            latest_offsets.close()
