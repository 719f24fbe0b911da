"""Every query's progress as Prometheus series: what operators scrape, graph and alert on.

`lakehouse operational`, `analytical` and `run` (each of run's two processes) serve them over HTTP
at `metrics.bind_address` and their path's port (`metrics.operational_port`, `metrics.analytical_port`)
while their queries run (lakehouse.monitoring.metrics_endpoint). The session's listener (shared.query_events.watching)
hands every report to `QueryMetrics`, which keeps the counters and the last values. Some series are
computed when Prometheus scrapes, because their point is to move when the query does not:

  - the Kafka lag: the broker's newest offsets now (shared.broker_readings) minus the offsets the
    query has processed; a frozen or starved query's lag keeps growing here;
  - the watermark's delay behind the wall clock;
  - for a query in real-time mode, whose batch reports come once per checkpoint interval: its running
    batch, followed live (lakehouse.monitoring.running_batches): the lag, what it has read, its alerts
    on the topic, and whether its end is overdue.

Gold's freshness (`lakehouse_gold_freshness_seconds`) comes with each report of the medallion's query: the
batch observes its clicks' Kafka times at 100 quantiles, and its end turns them into ages, each
counting for 1% of the batch's clicks (`WeightedHistogram`).

Names follow Prometheus' conventions (the unit in the name, `_total` on counters); every series has
the label `query` (the Spark query name), and `reason`, `table`, `expectation` or `topic` where they
apply. conf/prometheus/ holds the scrape configuration, the alerting rules and a Grafana dashboard.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import (CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector,
                               disable_created_metrics)
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from shared.config import Config
from lakehouse.monitoring.running_batches import LiveReadings, RunningBatches
from lakehouse.monitoring.weighted_histogram import WeightedHistogram
from shared.parsing import PARSE_REASONS
from shared.query_progress import Offsets, ProgressSummary
from shared.stream import Stream
from operational.mode import fast_path_mode

#: Batch durations from a fast-path batch (well under a second) to a backfill's (minutes).
BATCH_SECONDS_BUCKETS = (0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)
#: Gold's freshness, from a batch on a 5-second trigger to an hour behind (a catch-up after an outage).
FRESHNESS_SECONDS_BUCKETS = (2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 300, 600, 1800, 3600)
#: The broker's newest offsets of the given topics, or None when the broker does not answer.
LatestOffsets = Callable[[Iterable[str]], Offsets | None]
#: The Unix time of the newest record on a topic, or None (empty, or the broker does not answer).
NewestRecordTime = Callable[[str], float | None]


@dataclass(frozen=True)
class QueryFacts:
    """What the configuration says about one query, which its progress reports do not."""

    trigger_s: float
    allowed_lateness_s: float
    #: Its sink's rows are alerts (the fast path).
    alerts: bool = False
    #: The reasons its parsing counts invalid records by, and the expectations it checks: their
    #: counters exist from the query's start at 0, because Prometheus' increase() cannot see the
    #: first value of a series, and a first failure must raise an alert.
    invalid_reasons: tuple[str, ...] = ()
    #: (table, expectation) for each expectation its writes check.
    expectations: tuple[tuple[str, str], ...] = ()
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
        checked = [(table.name, table.suite(config)) for table in stream.writes if getattr(table, "policy", None)]
        return cls(trigger_s=stream.trigger(config).total_seconds(),
                   allowed_lateness_s=stream.lateness(config).total_seconds(),
                   alerts=stream.layer == "operational",
                   invalid_reasons=tuple(reason.value for reason in PARSE_REASONS)
                   if stream.layer in ("operational", "medallion") else (),  # the queries that parse Kafka records
                   expectations=tuple((table, expectation.name) for table, suite in checked
                                      for expectation in suite.on_write),
                   real_time=stream.layer == "operational" and fast_path_mode(config).real_time,
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
        self._newest_record_time = newest_record_time
        self._lock = threading.Lock()
        self._batches = RunningBatches(self._lock, live)
        self._processed: dict[str, Offsets] = {}  # query -> offsets its last batch ended at
        self._latest_seen: dict[str, Offsets] = {}  # query -> the broker's offsets at its last batch
        self._watermark: dict[str, float] = {}  # query -> watermark, seconds since the epoch
        self._freshness: dict[str, WeightedHistogram] = {}  # query -> its clicks' freshness, when it observes them
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
        alerts_on_topic = None
        for counter in (self.failures, self.batches, self.input_rows, self.late_dropped):
            counter.labels(query)  # at 0 until something is counted
        facts = self.facts.get(query)
        if facts:
            self.trigger.labels(query).set(facts.trigger_s)
            self.allowed_lateness.labels(query).set(facts.allowed_lateness_s)
            for reason in facts.invalid_reasons:
                self.invalid.labels(query, reason)
            for table, expectation in facts.expectations:
                self.expectation_failures.labels(query, table, expectation)
            if facts.alerts:
                self.alerts.labels(query)
            self.real_time.labels(query).set(1 if facts.real_time else 0)
            if facts.real_time and facts.alerts_topic and self._latest_offsets:
                on_topic = self._latest_offsets([facts.alerts_topic])
                alerts_on_topic = None if on_topic is None else sum(on_topic.values())
        self._batches.started(query, self._clock(), alerts_on_topic)

    def idle(self, query: str) -> None:
        self.last_progress.labels(query).set(self._clock())

    def terminated(self, query: str, run_id: str, error: str | None) -> None:
        self.up.labels(query).set(0)
        self._batches.terminated(query)
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
            if not self._batches.first_report_locked(query, str(summary.run_id), summary.batch_id):
                return
        self._count_batch(summary)

    def _count_batch(self, summary: ProgressSummary) -> None:
        query, facts = summary.name, self.facts.get(summary.name)
        seconds = summary.duration_ms / 1000
        self.batches.labels(query).inc()
        already = self._batches.ended(query, summary.batch_id, self._clock())  # counted by scrapes as it ran
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
        for key, count in summary.expectations.items():
            if count:
                table_key, expectation = key.split(".", 1)
                self.expectation_failures.labels(query, table_key.replace("_", "/", 1), expectation).inc(count)
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
            watermarks = dict(self._watermark)
            processed = {query: dict(offsets) for query, offsets in self._processed.items()}
            seen = {query: dict(offsets) for query, offsets in self._latest_seen.items()}
            running = {query: self._batches.running_batch_locked(query) for query in processed}
        for query, watermark in sorted(watermarks.items()):
            delay.add_metric([query], now - watermark)
        intervals = {query: facts.batch_interval_s for query, facts in self.facts.items() if facts.real_time}
        for query, seconds in self._batches.overdue(now, intervals):
            overdue.add_metric([query], seconds)
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
        consumers = self._batches.consumer_readings() if followed else {}
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
                    more = self._batches.more_read(query, read, running[query])
                    if more:
                        self.input_rows.labels(query).inc(more)
            if facts.alerts_topic and latest is not None:
                more = self._batches.more_alerts(query, facts.alerts_topic, latest)
                if more:
                    self.alerts.labels(query).inc(more)
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


def _seconds(instant: str | None) -> float | None:
    if not instant:
        return None
    seconds = datetime.fromisoformat(instant.replace("Z", "+00:00")).timestamp()
    return seconds if seconds > 0 else None
