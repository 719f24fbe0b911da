"""Every query's progress as Prometheus series: what operators scrape, graph and alert on.

`lakehouse operational`, `analytical` and `run` (each of run's two processes) serve them over HTTP
at `metrics.bind_address` and their path's port (`metrics.operational_port`, `metrics.analytical_port`)
while their queries run (`serving`). The session's listener (shared.query_progress.watching)
hands every report to `QueryMetrics`, which keeps the counters and the last values. Some series are
computed when Prometheus scrapes, because their point is to move when the query does not:

  - the Kafka lag: the broker's newest offsets now (shared.broker_readings) minus the offsets the
    query has processed; a frozen or starved query's lag keeps growing here;
  - the watermark's delay behind the wall clock;
  - for a query in real-time mode, whose batch reports come once per checkpoint interval: its Kafka
    consumers' own metrics (lakehouse.monitoring.live_consumers) give the lag live, stamp the last progress while
    they poll, and say what the running batch has read, which advances the input rows counter; its
    alerts are counted on the alerts topic itself, and the newest alert's time is read from there.

Gold's freshness (`lakehouse_gold_freshness_seconds`) comes with each gold_page_clicks_5s report: the
batch observes its clicks' Kafka times at 100 quantiles, and its end turns them into ages, each
counting for 1% of the batch's clicks (`WeightedHistogram`).

Names follow Prometheus' conventions (the unit in the name, `_total` on counters); every series has
the label `query` (the Spark query name), and `reason`, `table`, `expectation` or `topic` where they
apply. conf/prometheus/ holds the scrape configuration, the alerting rules and a Grafana dashboard.
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import (CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, disable_created_metrics,
                               start_http_server)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from shared.config import Config, MetricsConfig
from shared.broker_readings import BrokerOffsets
from lakehouse.monitoring.live_consumers import ConsumerReading
from shared.parsing import PARSE_REASONS
from shared.query_progress import Offsets, ProgressSummary
from shared.stream import Stream

#: Batch durations from a fast-path batch (well under a second) to a backfill's (minutes).
BATCH_SECONDS_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)
#: Gold's freshness, from a batch on a 5-second trigger to an hour behind (a catch-up after an outage).
FRESHNESS_SECONDS_BUCKETS = (2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 300, 600, 1800, 3600)
#: The broker's newest offsets of the given topics, or None when the broker does not answer.
LatestOffsets = Callable[[Iterable[str]], Offsets | None]
#: This JVM's Kafka consumers by topic (lakehouse.monitoring.live_consumers.consumer_readings bound to a session).
LiveReadings = Callable[[], Mapping[str, ConsumerReading]]
#: How long a scrape waits for the JVM's consumer metrics. A JVM that does not answer (frozen, in a
#: long GC pause) must not hold the scrape past Prometheus' timeout, which would read as the process
#: being down; without the reading the lag is the broker's offsets minus the last batch's, and grows.
LIVE_READING_WITHIN_S = 0.5
#: A real-time batch ends every checkpoint interval; one not ended this many intervals after the last
#: is overdue: its commit is not finishing.
OVERDUE_AFTER_INTERVALS = 2
#: The Unix time of the newest record on a topic, or None (empty, or the broker does not answer).
NewestRecordTime = Callable[[str], float | None]


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
    #: Spark's real-time mode: one batch per checkpoint interval, so the series below also follow the
    #: running batch (lakehouse.monitoring.live_consumers) and the alerts topic, not only the batch reports.
    real_time: bool = False
    #: The topic it reads (followed live in real-time mode), and the one its alerts go to.
    source_topic: str | None = None
    alerts_topic: str | None = None
    #: Real-time mode: how often a batch ends and commits (operational.real_time.checkpoint_interval).
    batch_interval_s: float = 0.0

    @classmethod
    def of(cls, config: Config, stream: Stream) -> "QueryFacts":
        """A stream's facts from its declaration and the config (its suite builds Spark columns: call
        this once a SparkSession exists)."""
        table = stream.writes[0] if stream.writes else None
        suite = table.suite(config) if hasattr(table, "suite") else None
        return cls(trigger_s=stream.trigger_interval(config).total_seconds(),
                   allowed_lateness_s=stream.allowed_lateness(config).total_seconds(),
                   table=table.name if table else None, alerts=stream.layer == "operational",
                   invalid_reasons=tuple(reason.value for reason in PARSE_REASONS)
                   if stream.layer in ("operational", "silver") else (),  # the layers that parse Kafka records
                   expectations=tuple(expectation.name for expectation in suite.on_write) if suite else (),
                   real_time=stream.layer == "operational" and config.operational.mode == "real-time",
                   source_topic=config.kafka.topics.clicks if stream.layer == "operational" else None,
                   alerts_topic=config.kafka.topics.alerts if stream.layer == "operational" else None,
                   batch_interval_s=config.operational.real_time.checkpoint_interval.total_seconds())


class QueryMetrics(Collector):
    """The series of one process's queries, in a registry of their own (not the client's global one:
    nothing else of the process is exported, and tests make several)."""

    def __init__(self, facts: Mapping[str, QueryFacts], latest_offsets: LatestOffsets | None = None,
                 clock: Callable[[], float] = time.time, live: LiveReadings | None = None,
                 newest_record_time: NewestRecordTime | None = None):
        self.facts = dict(facts)
        self._latest_offsets = latest_offsets
        self._clock = clock
        self._live = live
        self._newest_record_time = newest_record_time
        self._live_counted: dict[str, dict[int, int]] = {}  # query -> batch id -> its rows counted live
        self._live_waiting = False  # a reading still waits for the JVM: no second one is sent after it
        self._alerts_baseline: dict[str, int] = {}  # alerting query -> its topic's records when it started
        self._alerts_counted: dict[str, int] = {}  # alerting query -> records counted on its topic since
        self._lock = threading.Lock()
        self._processed: dict[str, Offsets] = {}  # query -> offsets its last batch ended at
        self._latest_seen: dict[str, Offsets] = {}  # query -> the broker's offsets at its last batch
        self._watermark: dict[str, float] = {}  # query -> watermark, seconds since the epoch
        self._counted: dict[str, tuple[str, int]] = {}  # query -> (run id, batch id) last counted
        self._freshness: dict[str, WeightedHistogram] = {}  # query -> its clicks' freshness, when it observes them
        self._last_batch_end: dict[str, float] = {}  # real-time query -> when its last batch ended (or it started)
        disable_created_metrics()  # no `_created` twin per counter: Prometheus 2 does not use them
        self.registry = registry = CollectorRegistry(auto_describe=True)
        registry.register(self)  # collected first: a scrape's live readings reach the counters it then reads
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
        self.real_time = gauge("lakehouse_query_real_time", "1: Spark's real-time mode (a batch per checkpoint "
                               "interval, followed live); 0: micro-batches")
        self.last_progress = gauge("lakehouse_last_progress_timestamp_seconds",
                                   "Unix time of the query's newest progress or idle report")
        ProcessCollector(registry=registry)

    # -- what the listener reports --------------------------------------------------------------

    def started(self, query: str, run_id: str = "") -> None:
        self.up.labels(query).set(1)
        self.last_progress.labels(query).set(self._clock())
        with self._lock:
            self._last_batch_end[query] = self._clock()
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
            self.real_time.labels(query).set(1 if facts.real_time else 0)
            if facts.real_time and facts.alerts_topic and self._latest_offsets:
                on_topic = self._latest_offsets([facts.alerts_topic])
                if on_topic is not None:
                    with self._lock:
                        self._alerts_baseline.setdefault(query, sum(on_topic.values()))

    def idle(self, query: str) -> None:
        self.last_progress.labels(query).set(self._clock())

    def terminated(self, query: str, run_id: str, error: str | None) -> None:
        self.up.labels(query).set(0)
        with self._lock:
            self._last_batch_end.pop(query, None)  # no batch is running to be overdue
        if error is not None:
            self.failures.labels(query).inc()

    def progressed(self, summary: ProgressSummary) -> None:
        """One progress report: counters grow once per batch (a report seen twice counts once)."""
        query = summary.name
        self.up.labels(query).set(1)
        self.last_progress.labels(query).set(self._clock())
        with self._lock:
            if summary.processed_offsets:
                self._processed[query] = summary.processed_offsets
                self._latest_seen[query] = summary.latest_offsets
            watermark = _seconds(summary.watermark)
            if watermark:  # the epoch: no event seen yet, no watermark to be late by
                self._watermark[query] = watermark
            batch = (str(summary.run_id), summary.batch_id)
            if self._counted.get(query) == batch:
                return
            self._counted[query] = batch
        self._count_batch(summary)

    def _count_batch(self, summary: ProgressSummary) -> None:
        query, facts = summary.name, self.facts.get(summary.name)
        seconds = summary.duration_ms / 1000
        self.batches.labels(query).inc()
        with self._lock:  # what the scrapes already counted of this batch while it ran
            self._last_batch_end[query] = self._clock()
            counted_live = self._live_counted.get(query, {})
            already = counted_live.pop(summary.batch_id, 0)
            for earlier in [batch for batch in counted_live if batch < summary.batch_id]:
                del counted_live[earlier]
        self.input_rows.labels(query).inc(max(0, summary.input_rows - already))
        self.input_rate.labels(query).set(summary.input_rate)
        self.processed_rate.labels(query).set(summary.processed_rate)
        self.batch_duration.labels(query).observe(seconds)
        self.last_batch_duration.labels(query).set(seconds)
        self.state_rows.labels(query).set(summary.state_rows)
        self.state_memory.labels(query).set(summary.state_memory_bytes)
        self.late_dropped.labels(query).inc(summary.dropped_by_watermark)
        for reason, count in summary.invalid_by_reason.items():
            self.invalid.labels(query, reason).inc(count)
        table = facts.table if facts and facts.table else ""
        for expectation, count in summary.expectations.items():
            if count:
                self.expectation_failures.labels(query, table, expectation).inc(count)
        if facts and facts.alerts and not facts.real_time and summary.sink_rows > 0:
            self.alerts.labels(query).inc(summary.sink_rows)
        if summary.freshness_s:
            with self._lock:
                self._freshness.setdefault(query, WeightedHistogram(FRESHNESS_SECONDS_BUCKETS)).add(summary.freshness_s)

    # -- what is computed at scrape time --------------------------------------------------------

    def describe(self) -> Iterator[Any]:
        """The live families, without asking the broker (registering calls this)."""
        yield from self._live_families()
        yield self._freshness_family()

    def collect(self) -> Iterator[Any]:
        delay, lag, reading, last_alert, overdue = self._live_families()
        now = self._clock()
        with self._lock:
            batch_ends = dict(self._last_batch_end)
            watermarks = dict(self._watermark)
            processed = {query: dict(offsets) for query, offsets in self._processed.items()}
            seen = {query: dict(offsets) for query, offsets in self._latest_seen.items()}
            running = {query: self._running_batch(query) for query in processed}
        for query, watermark in sorted(watermarks.items()):
            delay.add_metric([query], now - watermark)
        for query, ended in sorted(batch_ends.items()):
            facts = self.facts.get(query)
            if facts and facts.real_time and facts.batch_interval_s:
                overdue.add_metric([query], max(0.0, now - ended - OVERDUE_AFTER_INTERVALS * facts.batch_interval_s))
        followed = {query: facts for query, facts in self.facts.items() if facts.real_time}
        topics = {topic for offsets in processed.values() for topic, _ in offsets} | {
            topic for facts in followed.values() for topic in (facts.source_topic, facts.alerts_topic) if topic}
        latest = self._latest_offsets(topics) if self._latest_offsets and topics else None
        behind: dict[tuple[str, str], int] = {}
        for query, offsets in processed.items():
            newest = latest if latest is not None else seen.get(query, {})
            for topic in {topic for topic, _ in offsets}:
                behind[(query, topic)] = sum(max(newest.get(key, end) - end, 0)
                                             for key, end in offsets.items() if key[0] == topic)
        consumers = self._consumer_readings() if followed else {}
        for query, facts in sorted(followed.items()):
            live = consumers.get(facts.source_topic or "")
            if live is not None:  # the running batch, between its reports
                behind[(query, facts.source_topic)] = sum(live.lags.values())
                self.last_progress.labels(query).set(now - live.last_poll_s)
                if latest is not None and query in processed:
                    read = sum(max(0, latest.get((facts.source_topic, partition), 0) - partition_lag
                                   - processed[query].get((facts.source_topic, partition), 0))
                               for partition, partition_lag in live.lags.items())
                    reading.add_metric([query], read)
                    self._count_running_batch(query, read, running[query])
            if facts.alerts_topic and latest is not None:
                self._count_alerts_on_topic(query, facts.alerts_topic, latest)
        for (query, topic), records in sorted(behind.items()):
            lag.add_metric([query, topic], records)
        for query, facts in sorted(self.facts.items()):
            newest_alert = self._newest_record_time(facts.alerts_topic) \
                if facts.alerts_topic and self._newest_record_time else None
            if newest_alert is not None:
                last_alert.add_metric([query], newest_alert)
        yield delay
        yield lag
        yield reading
        yield last_alert
        yield overdue
        freshness = self._freshness_family()
        with self._lock:
            for query, histogram in sorted(self._freshness.items()):
                freshness.add_metric([query], histogram.cumulative(), histogram.total)
        yield freshness

    def _consumer_readings(self) -> Mapping[str, ConsumerReading]:
        """The live readings, or none when the JVM does not answer within LIVE_READING_WITHIN_S or
        fails: a scrape must answer, and the batch reports still count."""
        if not self._live:
            return {}
        with self._lock:
            if self._live_waiting:
                return {}
            self._live_waiting = True
        answer: dict[str, ConsumerReading] = {}
        done = threading.Event()

        def read() -> None:
            try:
                answer.update(self._live())
            except Exception:
                pass
            finally:
                with self._lock:
                    self._live_waiting = False
                done.set()

        threading.Thread(target=read, name="live-consumer-reading", daemon=True).start()
        return dict(answer) if done.wait(LIVE_READING_WITHIN_S) else {}

    def _running_batch(self, query: str) -> int:
        """The id of the batch after the last one counted (call with the lock held)."""
        return self._counted[query][1] + 1 if query in self._counted else 0

    def _count_running_batch(self, query: str, read: int, batch: int) -> None:
        """The running batch's reads so far advance the input rows counter; its report later adds
        only the rest (`_count_batch`). `read` was measured from the offsets the batch before `batch`
        ended at: when a report has come in since, it counted those reads itself, and this reading
        is dropped."""
        with self._lock:
            if self._running_batch(query) != batch:
                return
            counted = self._live_counted.setdefault(query, {})
            more = read - counted.get(batch, 0)
            if more > 0:
                counted[batch] = read
        if more > 0:
            self.input_rows.labels(query).inc(more)

    def _count_alerts_on_topic(self, query: str, topic: str, latest: Offsets) -> None:
        """A real-time query's alerts, counted as records on its alerts topic since it started."""
        on_topic = sum(offset for (name, _), offset in latest.items() if name == topic)
        with self._lock:
            if query not in self._alerts_baseline:
                return
            emitted = on_topic - self._alerts_baseline[query]
            more = emitted - self._alerts_counted.get(query, 0)
            if more > 0:
                self._alerts_counted[query] = emitted
        if more > 0:
            self.alerts.labels(query).inc(more)

    @staticmethod
    def _live_families() -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily("lakehouse_watermark_delay_seconds",
                              "Wall clock minus the query's event-time watermark, at scrape time", labels=["query"]),
            GaugeMetricFamily("lakehouse_kafka_lag_records",
                              "Records on the broker the query has not processed (nor read in its running "
                              "real-time batch), at scrape time", labels=["query", "topic"]),
            GaugeMetricFamily("lakehouse_running_batch_records_read",
                              "Records the running real-time batch has read so far (its Kafka consumers' positions)",
                              labels=["query"]),
            GaugeMetricFamily("lakehouse_last_alert_timestamp_seconds",
                              "Unix time of the newest record on the query's alerts topic, at scrape time",
                              labels=["query"]),
            GaugeMetricFamily("lakehouse_batch_end_overdue_seconds",
                              "Real-time mode: seconds past two checkpoint intervals since the last batch ended; "
                              "above 0, the running batch's commit is not finishing (the storage, a state upload)",
                              labels=["query"]),
        )

    @staticmethod
    def _freshness_family() -> HistogramMetricFamily:
        return HistogramMetricFamily("lakehouse_gold_freshness_seconds",
                                     "Seconds from a click's Kafka append to the end of the batch that wrote its "
                                     "window to gold (each batch's clicks at 100 quantiles)", labels=["query"])


class WeightedHistogram:
    """A Prometheus histogram whose observations carry a weight: a batch's freshness arrives as 100
    quantiles, each standing for 1% of its clicks (prometheus_client's Histogram counts one per call).

        histogram = WeightedHistogram((5, 60))
        histogram.add([(3.0, 2.0), (70.0, 0.5)])
        histogram.cumulative()  # [("5.0", 2.0), ("60.0", 2.0), ("+Inf", 2.5)]; histogram.total == 41.0
    """

    def __init__(self, bounds: Iterable[float]):
        self.bounds = tuple(bounds)
        self.counts = [0.0] * (len(self.bounds) + 1)  # the last: above every bound
        self.total = 0.0

    def add(self, observations: Iterable[tuple[float, float]]) -> None:
        for value, weight in observations:
            self.counts[bisect.bisect_left(self.bounds, value)] += weight
            self.total += value * weight

    def cumulative(self) -> list[tuple[str, float]]:
        """(le, observations at or below it) per bound and +Inf, as the exposition format wants them."""
        running = list(itertools.accumulate(self.counts))
        return [(floatToGoString(bound), count) for bound, count in zip(self.bounds, running)] + [("+Inf", running[-1])]


def _seconds(instant: str | None) -> float | None:
    if not instant:
        return None
    seconds = datetime.fromisoformat(instant.replace("Z", "+00:00")).timestamp()
    return seconds if seconds > 0 else None


def require_free_port(settings: MetricsConfig, application: str) -> None:
    """A ServiceError naming the key when the path's metrics port is taken (nothing when disabled)."""
    from lakehouse.services.daemon import require_free_ports

    if settings.enabled:
        require_free_ports(settings.bind_address, {f"metrics.{application}_port": settings.port(application)})


@contextmanager
def serving(settings: MetricsConfig, application: str, facts: Mapping[str, QueryFacts],
            latest_offsets: LatestOffsets | None = None, live: LiveReadings | None = None) -> Iterator[QueryMetrics | None]:
    """`QueryMetrics` for the path's `application` (operational, analytical), served over HTTP on
    its configured port while the block runs; None when `metrics.enabled` is false. `live`: the
    session's running batches (real-time queries are followed between their reports)."""
    if not settings.enabled:
        yield None
        return
    require_free_port(settings, application)
    newest = latest_offsets.newest_timestamp if isinstance(latest_offsets, BrokerOffsets) else None
    metrics = QueryMetrics(facts, latest_offsets, live=live, newest_record_time=newest)
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
