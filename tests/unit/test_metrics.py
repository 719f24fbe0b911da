"""lakehouse.monitoring.metrics: progress reports in, Prometheus series out, read back through the client's own
text format parser; and the endpoint served over HTTP."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from datetime import datetime, timezone

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from shared.config_loading import load_config
from shared.errors import LakehouseError
from lakehouse.monitoring.live_consumers import ConsumerReading
from lakehouse.monitoring.metrics import QueryFacts, QueryMetrics
from lakehouse.monitoring.metrics_endpoint import serving
from lakehouse.monitoring.running_batches import LIVE_READING_WITHIN_S
from shared.query_progress import ProgressSummary
from lakehouse.services.daemon import free_port
from tests.helpers import wait_for

FACTS = {"hot_pages": QueryFacts(trigger_s=0, allowed_lateness_s=10, alerts=True,
                                 invalid_reasons=("not_json", "bad_event_time", "empty_page_id")),
         "medallion": QueryFacts(trigger_s=10, allowed_lateness_s=600,
                                 expectations=(("silver/clicks", "pageIdPresent"), ("gold/page_clicks_5s", "pageIdPresent"),
                                               ("gold/page_clicks_5s", "clickCountPositive"),
                                               ("gold/page_clicks_5s", "windowLength")))}
NOW = 1_800_000_000.0  # the injected clock


def progress(batch: int, *, run: str = "r1", rows: int = 100, invalid: dict[str, int] | None = None,
             end: dict[str, int] | None = None, latest: dict[str, int] | None = None, watermark: str = "1970-01-01T00:00:00.000Z",
             alerts: int = 0, duration_ms: int = 800, dropped: int = 0) -> dict:
    """A hot_pages progress report in the shape Spark gives (only the fields the series read)."""
    invalid = invalid or {}
    return {
        "name": "hot_pages", "runId": run, "batchId": batch, "numInputRows": rows,
        "inputRowsPerSecond": 250.0, "processedRowsPerSecond": 125.0, "durationMs": {"triggerExecution": duration_ms},
        "eventTime": {"watermark": watermark},
        "stateOperators": [{"numRowsTotal": 7, "memoryUsedBytes": 2048, "numRowsDroppedByWatermark": dropped}],
        "sources": [{"endOffset": {"clicks": end or {"0": 10, "1": 20}},
                     "latestOffset": {"clicks": latest or {"0": 10, "1": 20}}}],
        "sink": {"numOutputRows": alerts},
        "observedMetrics": {"parsed_clicks": {"records": rows, "invalid": sum(invalid.values()), **invalid}},
    }


def samples(metrics: QueryMetrics) -> dict[tuple[str, tuple], float]:
    """(sample name, sorted labels) -> value, parsed from the exposition text a scrape gets."""
    text = generate_latest(metrics.registry).decode()
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(metrics: QueryMetrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, tuple(sorted(labels.items()))))


def test_each_batch_counts_once_and_the_series_hold_its_figures():
    metrics = QueryMetrics(FACTS, clock=lambda: NOW)
    metrics.started("hot_pages")
    first = progress(0, rows=100, invalid={"not_json": 2, "bad_event_time": 1}, alerts=3, dropped=4)
    metrics.progressed(ProgressSummary.of(first))
    metrics.progressed(ProgressSummary.of(first))  # the same report again (a relay, a retry): counted once
    metrics.progressed(ProgressSummary.of(progress(1, rows=50, invalid={"not_json": 5}, duration_ms=2500)))

    assert value(metrics, "lakehouse_query_up", query="hot_pages") == 1
    assert value(metrics, "lakehouse_batches_total", query="hot_pages") == 2
    assert value(metrics, "lakehouse_input_rows_total", query="hot_pages") == 150
    assert value(metrics, "lakehouse_invalid_records_total", query="hot_pages", reason="not_json") == 7
    assert value(metrics, "lakehouse_invalid_records_total", query="hot_pages", reason="bad_event_time") == 1
    assert value(metrics, "lakehouse_alerts_emitted_total", query="hot_pages") == 3
    assert value(metrics, "lakehouse_late_rows_dropped_total", query="hot_pages") == 4
    assert value(metrics, "lakehouse_last_batch_duration_seconds", query="hot_pages") == 2.5
    assert value(metrics, "lakehouse_batch_duration_seconds_count", query="hot_pages") == 2
    assert value(metrics, "lakehouse_batch_duration_seconds_bucket", query="hot_pages", le="1.0") == 1
    assert value(metrics, "lakehouse_state_rows", query="hot_pages") == 7
    assert value(metrics, "lakehouse_state_memory_bytes", query="hot_pages") == 2048
    assert value(metrics, "lakehouse_trigger_interval_seconds", query="hot_pages") == 0
    assert value(metrics, "lakehouse_watermark_allowed_lateness_seconds", query="hot_pages") == 10
    assert value(metrics, "lakehouse_last_progress_timestamp_seconds", query="hot_pages") == NOW
    # A restarted query numbers its batches from its checkpoint: a new run's batch counts.
    metrics.progressed(ProgressSummary.of(progress(1, run="r2", rows=10)))
    assert value(metrics, "lakehouse_input_rows_total", query="hot_pages") == 160


def test_counters_exist_at_zero_from_the_start_so_that_a_first_failure_is_an_increase():
    metrics = QueryMetrics(FACTS, clock=lambda: NOW)
    metrics.started("hot_pages")
    metrics.started("medallion")
    assert value(metrics, "lakehouse_invalid_records_total", query="hot_pages", reason="empty_page_id") == 0
    assert value(metrics, "lakehouse_alerts_emitted_total", query="hot_pages") == 0
    assert value(metrics, "lakehouse_query_failures_total", query="hot_pages") == 0
    assert value(metrics, "lakehouse_expectation_failures_total", query="medallion",
                 table="gold/page_clicks_5s", expectation="windowLength") == 0
    assert value(metrics, "lakehouse_expectation_failures_total", query="medallion",
                 table="silver/clicks", expectation="pageIdPresent") == 0
    assert value(metrics, "lakehouse_alerts_emitted_total", query="medallion") is None  # not an alerter


def test_gold_freshness_is_a_histogram_of_every_click_weighted_by_the_share_each_quantile_stands_for():
    metrics = QueryMetrics(FACTS, clock=lambda: NOW)
    metrics.started("gold_page_clicks_5s")
    assert value(metrics, "lakehouse_gold_freshness_seconds_count", query="gold_page_clicks_5s") is None
    # Batch 0 ends at 10:00:20 with 200 clicks: a quarter appended at 10:00:17 (3 s), the rest at 09:59:30 (50 s).
    # Batch 1 ends at 10:01:40 with 100 clicks, all appended at 10:00:00 (100 s).
    ends = {0: ("2026-11-27T10:00:00.000Z", 20_000), 1: ("2026-11-27T10:01:00.000Z", 40_000)}
    kafka_times = {0: [1795773617000] * 25 + [1795773570000] * 75, 1: [1795773600000] * 100}
    for batch, clicks in ((0, 200), (1, 100)):
        started, duration = ends[batch]
        report = {"name": "gold_page_clicks_5s", "runId": "r1", "batchId": batch, "timestamp": started,
                  "durationMs": {"triggerExecution": duration},
                  "observedMetrics": {"arrivals": {"clicks": clicks, "kafkaTimes": kafka_times[batch]}}}
        metrics.progressed(ProgressSummary.of(report))
        metrics.progressed(ProgressSummary.of(report))  # a report seen twice counts once

    def bucket(le: str) -> float | None:
        return value(metrics, "lakehouse_gold_freshness_seconds_bucket", query="gold_page_clicks_5s", le=le)

    assert (bucket("2.0"), bucket("5.0"), bucket("45.0"), bucket("60.0"), bucket("90.0"), bucket("120.0"),
            bucket("+Inf")) == (0, 50, 50, 200, 200, 300, 300)
    assert value(metrics, "lakehouse_gold_freshness_seconds_count", query="gold_page_clicks_5s") == 300
    assert value(metrics, "lakehouse_gold_freshness_seconds_sum", query="gold_page_clicks_5s") == \
        50 * 3 + 150 * 50 + 100 * 100
    assert value(metrics, "lakehouse_gold_freshness_seconds_count", query="hot_pages") is None


def test_expectation_failures_are_labelled_with_the_table_and_the_expectation():
    metrics = QueryMetrics(FACTS, clock=lambda: NOW)
    report = {"name": "medallion", "runId": "r", "batchId": 3, "numInputRows": 9,
              "observedMetrics": {
                  "expectations_gold_page_clicks_5s": {"policy": "fail", "rows": 9, "failed": 2, "dropped": 0,
                                                       "clickCountPositive": 2, "windowLength": 0, "pageIdPresent": 0},
                  "expectations_silver_clicks": {"policy": "drop", "rows": 9, "failed": 3, "dropped": 3,
                                                 "pageIdPresent": 3}}}
    metrics.progressed(ProgressSummary.of(report))
    assert value(metrics, "lakehouse_expectation_failures_total", query="medallion",
                 table="gold/page_clicks_5s", expectation="clickCountPositive") == 2
    assert value(metrics, "lakehouse_expectation_failures_total", query="medallion",
                 table="silver/clicks", expectation="pageIdPresent") == 3, "one query, two tables: each its own"
    assert value(metrics, "lakehouse_expectation_failures_total", query="medallion",
                 table="gold/page_clicks_5s", expectation="pageIdPresent") is None
    assert value(metrics, "lakehouse_expectation_failures_total", query="medallion",
                 table="gold/page_clicks_5s", expectation="windowLength") is None  # not started, none failed


def test_the_lag_is_the_brokers_offsets_now_minus_what_the_query_processed():
    broker: dict[tuple[str, int], int] = {("clicks", 0): 10, ("clicks", 1): 20}
    metrics = QueryMetrics(FACTS, latest_offsets=lambda topics: dict(broker), clock=lambda: NOW)
    metrics.progressed(ProgressSummary.of(progress(0, end={"0": 10, "1": 15}, latest={"0": 10, "1": 20})))
    assert value(metrics, "lakehouse_kafka_lag_records", query="hot_pages", topic="clicks") == 5

    broker.update({("clicks", 0): 400, ("clicks", 1): 520})  # the query is frozen; clicks keep coming
    assert value(metrics, "lakehouse_kafka_lag_records", query="hot_pages", topic="clicks") == (400 - 10) + (520 - 15)


def test_without_an_answer_from_the_broker_the_lag_is_what_the_last_batch_saw():
    metrics = QueryMetrics(FACTS, latest_offsets=lambda topics: None, clock=lambda: NOW)
    metrics.progressed(ProgressSummary.of(progress(0, end={"0": 10, "1": 15}, latest={"0": 12, "1": 40})))
    assert value(metrics, "lakehouse_kafka_lag_records", query="hot_pages", topic="clicks") == 2 + 25


def test_the_watermark_delay_is_measured_at_scrape_time_and_absent_before_the_first_event():
    clock = [NOW]
    metrics = QueryMetrics(FACTS, clock=lambda: clock[0])
    metrics.progressed(ProgressSummary.of(progress(0)))  # the epoch: no event yet
    assert value(metrics, "lakehouse_watermark_delay_seconds", query="hot_pages") is None

    watermark = NOW - 60
    metrics.progressed(ProgressSummary.of(progress(1, watermark=datetime.fromtimestamp(watermark, timezone.utc).isoformat())))
    clock[0] = NOW + 30
    assert value(metrics, "lakehouse_watermark_delay_seconds", query="hot_pages") == pytest.approx(
        NOW + 30 - watermark)


def test_a_real_time_batch_is_followed_between_its_reports_and_its_report_adds_only_the_rest():
    facts = {"hot_pages": QueryFacts(trigger_s=0, allowed_lateness_s=10, alerts=True, real_time=True,
                                     source_topic="clicks", alerts_topic="alerts")}
    broker = {("clicks", 0): 10, ("clicks", 1): 20, ("alerts", 0): 7}
    consumers = {"clicks": ConsumerReading(lags={0: 0, 1: 0}, last_poll_s=0.5)}
    newest_alert = [None]
    clock = [NOW]
    metrics = QueryMetrics(facts, latest_offsets=lambda topics: {k: v for k, v in broker.items() if k[0] in topics},
                           clock=lambda: clock[0], live=lambda: consumers, newest_record_time=lambda topic: newest_alert[0])
    metrics.started("hot_pages")  # 7 alert records were on the topic before it started: not its own
    metrics.progressed(ProgressSummary.of(progress(0, rows=30, end={"0": 10, "1": 20}, alerts=0)))
    assert value(metrics, "lakehouse_query_real_time", query="hot_pages") == 1

    # batch 1 runs for minutes: 500 clicks arrive, its consumers are 180 behind, 4 alerts left
    broker.update({("clicks", 0): 260, ("clicks", 1): 270, ("alerts", 0): 11})
    consumers["clicks"] = ConsumerReading(lags={0: 100, 1: 80}, last_poll_s=0.5)
    newest_alert[0] = NOW - 3
    clock[0] = NOW + 20
    assert value(metrics, "lakehouse_kafka_lag_records", query="hot_pages", topic="clicks") == 180
    assert value(metrics, "lakehouse_running_batch_records_read", query="hot_pages") == 500 - 180
    assert value(metrics, "lakehouse_input_rows_total", query="hot_pages") == 30 + 320
    assert value(metrics, "lakehouse_alerts_emitted_total", query="hot_pages") == 4
    assert value(metrics, "lakehouse_last_alert_timestamp_seconds", query="hot_pages") == NOW - 3
    assert value(metrics, "lakehouse_last_progress_timestamp_seconds", query="hot_pages") == NOW + 20 - 0.5

    # its consumers stop polling (stuck tasks): the liveness stamp stays at their last poll
    consumers["clicks"] = ConsumerReading(lags={0: 100, 1: 80}, last_poll_s=9.5)
    clock[0] = NOW + 29
    assert value(metrics, "lakehouse_last_progress_timestamp_seconds", query="hot_pages") == NOW + 19.5

    # batch 1 ends having read 500: its report adds the 180 the scrapes had not counted, and its
    # sink's rows are not counted again (the topic already said)
    consumers["clicks"] = ConsumerReading(lags={0: 0, 1: 0}, last_poll_s=0.1)
    metrics.progressed(ProgressSummary.of(progress(1, rows=500, end={"0": 260, "1": 270}, alerts=4)))
    assert value(metrics, "lakehouse_input_rows_total", query="hot_pages") == 30 + 500
    assert value(metrics, "lakehouse_alerts_emitted_total", query="hot_pages") == 4
    assert value(metrics, "lakehouse_kafka_lag_records", query="hot_pages", topic="clicks") == 0


def test_a_report_that_comes_in_while_a_scrape_reads_is_not_counted_twice():
    """A real-time batch ends while a scrape reads the broker and the consumers: its report counts
    the batch, and the scrape's reading, measured from the batch before, counts nothing more."""
    facts = {"hot_pages": QueryFacts(trigger_s=0, allowed_lateness_s=10, alerts=True, real_time=True,
                                     source_topic="clicks", alerts_topic="alerts")}
    broker = {("clicks", 0): 10, ("clicks", 1): 20}
    reports = [ProgressSummary.of(progress(1, rows=500, end={"0": 260, "1": 270}, alerts=0))]
    metrics = None

    def live():
        if reports:  # batch 1 ends now, during the scrape; batch 2 has read nothing yet
            metrics.progressed(reports.pop())
        return {"clicks": ConsumerReading(lags={0: 0, 1: 0}, last_poll_s=0.1)}

    metrics = QueryMetrics(facts, latest_offsets=lambda topics: {k: v for k, v in broker.items() if k[0] in topics},
                           clock=lambda: NOW, live=live)
    metrics.started("hot_pages")
    metrics.progressed(ProgressSummary.of(progress(0, rows=30, end={"0": 10, "1": 20}, alerts=0)))
    broker.update({("clicks", 0): 260, ("clicks", 1): 270})  # batch 1 reads 500 and ends
    assert value(metrics, "lakehouse_input_rows_total", query="hot_pages") == 30 + 500
    assert not reports
    assert value(metrics, "lakehouse_input_rows_total", query="hot_pages") == 30 + 500


def test_a_jvm_that_does_not_answer_leaves_the_lag_to_the_broker_and_holds_no_scrape():
    """A frozen JVM (SIGSTOP, a long GC pause) never answers the live reading: each scrape still
    answers at once, with the lag the broker's offsets and the last batch's report give, and only
    one reading waits for the JVM however many scrapes come."""
    facts = {"hot_pages": QueryFacts(trigger_s=0, allowed_lateness_s=10, alerts=True, real_time=True,
                                     source_topic="clicks", alerts_topic="alerts")}
    broker = {("clicks", 0): 10, ("clicks", 1): 20}
    frozen, readings = threading.Event(), []

    def live():
        readings.append(time.monotonic())
        if not frozen.wait(timeout=30):
            raise AssertionError("the test ended without thawing the JVM")
        return {"clicks": ConsumerReading(lags={0: 1, 1: 2}, last_poll_s=0.1)}

    metrics = QueryMetrics(facts, latest_offsets=lambda topics: {k: v for k, v in broker.items() if k[0] in topics},
                           clock=lambda: NOW, live=live)
    metrics.started("hot_pages")
    metrics.progressed(ProgressSummary.of(progress(0, rows=30, end={"0": 10, "1": 20}, alerts=0)))
    broker.update({("clicks", 0): 1010, ("clicks", 1): 2020})
    for _ in range(3):
        started = time.monotonic()
        assert value(metrics, "lakehouse_kafka_lag_records", query="hot_pages", topic="clicks") == 1000 + 2000
        assert time.monotonic() - started < LIVE_READING_WITHIN_S + 2
    assert len(readings) == 1, "one reading waits for the JVM; the scrapes after it send none"

    frozen.set()  # the JVM answers again: the next scrapes follow the running batch live
    wait_for(lambda: value(metrics, "lakehouse_kafka_lag_records", query="hot_pages", topic="clicks") == 3, 10,
             "a scrape with the live reading again", every_s=0.1)


def test_a_micro_batch_query_is_not_followed_live():
    consumers = {"clicks": ConsumerReading(lags={0: 999}, last_poll_s=0.1)}
    broker = {("clicks", 0): 10, ("clicks", 1): 20}
    metrics = QueryMetrics(FACTS, latest_offsets=lambda topics: dict(broker), clock=lambda: NOW,
                           live=lambda: consumers)
    metrics.started("hot_pages")
    metrics.progressed(ProgressSummary.of(progress(0, rows=30, alerts=2)))
    assert value(metrics, "lakehouse_input_rows_total", query="hot_pages") == 30
    assert value(metrics, "lakehouse_alerts_emitted_total", query="hot_pages") == 2
    assert value(metrics, "lakehouse_kafka_lag_records", query="hot_pages", topic="clicks") == 0
    assert value(metrics, "lakehouse_running_batch_records_read", query="hot_pages") is None


def test_a_terminated_query_is_down_and_a_failure_is_counted():
    metrics = QueryMetrics(FACTS, clock=lambda: NOW)
    metrics.started("hot_pages")
    metrics.terminated("hot_pages", "r1", error="boom")
    assert value(metrics, "lakehouse_query_up", query="hot_pages") == 0
    assert value(metrics, "lakehouse_query_failures_total", query="hot_pages") == 1
    metrics.started("hot_pages")
    metrics.terminated("hot_pages", "r1", error=None)
    assert value(metrics, "lakehouse_query_failures_total", query="hot_pages") == 1


def test_the_endpoint_serves_the_series_on_the_configured_port_and_a_taken_port_names_its_key():
    port = free_port("127.0.0.1")
    config = load_config(overrides=[f"metrics.operational_port={port}", f"metrics.analytical_port={port + 1}"])
    with serving(config.metrics, "operational", FACTS) as metrics:
        metrics.started("hot_pages")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            text = response.read().decode()
        assert 'lakehouse_query_up{query="hot_pages"} 1.0' in text
        assert "process_resident_memory_bytes" in text

        with pytest.raises(LakehouseError, match=f"port {port} on 127.0.0.1 is in use .*metrics.operational_port"):
            with serving(config.metrics, "operational", FACTS):
                pass
    with pytest.raises(OSError):  # the endpoint ended with its block
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_disabled_metrics_serve_nothing_and_equal_ports_are_refused():
    config = load_config(overrides=["metrics.enabled=false"])
    with serving(config.metrics, "analytical", FACTS) as metrics:
        assert metrics is None
    for same in (["metrics.operational_port=9500", "metrics.analytical_port=9500"],
                 ["metrics.analytical_port=9500", "metrics.notify_port=9500"]):
        with pytest.raises(LakehouseError, match="metrics.*operational_port, analytical_port and notify_port must differ"):
            load_config(overrides=same)


def test_status_reads_the_running_queries_from_their_metrics_page_and_adds_them_to_the_recorded_rows():
    from lakehouse.cli.run import with_running_now
    from lakehouse.monitoring.running_queries import activity_line, query_rows

    facts = {"hot_pages": QueryFacts(trigger_s=0, allowed_lateness_s=10, alerts=True, real_time=True,
                                     source_topic="clicks", alerts_topic="alerts")}
    broker = {("clicks", 0): 260, ("clicks", 1): 270, ("alerts", 0): 4}
    metrics = QueryMetrics(facts, latest_offsets=lambda topics: {k: v for k, v in broker.items() if k[0] in topics},
                           clock=lambda: NOW, live=lambda: {"clicks": ConsumerReading({0: 100, 1: 80}, 2.0)},
                           newest_record_time=lambda topic: NOW - 3)
    metrics.started("hot_pages")
    metrics.progressed(ProgressSummary.of(progress(0, rows=30, end={"0": 10, "1": 20})))

    (row,) = query_rows(generate_latest(metrics.registry).decode(), now=NOW + 1)
    assert row["query"] == "hot_pages" and row["up"] == 1 and row["realTime"] == 1 and row["batchesEnded"] == 1
    assert (row["lag"], row["runningBatchRead"]) == (180, 500 - 180)
    assert (row["secondsSinceProgress"], row["secondsSinceAlert"]) == (3.0, 4.0)
    assert activity_line(row).startswith("[hot_pages] real-time, running: lag 180, running batch read 320")

    recorded = [{"queryName": "hot_pages", "batches": 1}, {"queryName": "bronze_clicks", "batches": 9}]
    merged = {r["queryName"]: r for r in with_running_now(recorded, [row])}
    assert merged["hot_pages"] == {"queryName": "hot_pages", "batches": 1, "running": True, "lagNow": 180,
                                      "secondsSinceActivity": 3.0}
    assert merged["bronze_clicks"] == {"queryName": "bronze_clicks", "batches": 9, "running": False}


def test_a_real_time_batch_not_ended_two_checkpoint_intervals_after_the_last_is_overdue_until_one_ends():
    clock = [NOW]
    facts = {"hot_pages": QueryFacts(trigger_s=0, allowed_lateness_s=10, alerts=True, real_time=True,
                                     batch_interval_s=30)}
    metrics = QueryMetrics(facts, clock=lambda: clock[0])
    metrics.started("hot_pages")
    clock[0] = NOW + 60  # two intervals: the first batch may still be committing
    assert value(metrics, "lakehouse_batch_end_overdue_seconds", query="hot_pages") == 0
    clock[0] = NOW + 75
    assert value(metrics, "lakehouse_batch_end_overdue_seconds", query="hot_pages") == 15
    metrics.progressed(ProgressSummary.of(progress(0)))  # it committed at last
    clock[0] = NOW + 100
    assert value(metrics, "lakehouse_batch_end_overdue_seconds", query="hot_pages") == 0
    metrics.terminated("hot_pages", "r1", None)
    clock[0] = NOW + 1000
    assert value(metrics, "lakehouse_batch_end_overdue_seconds", query="hot_pages") is None


def test_a_micro_batch_query_has_no_overdue_series():
    metrics = QueryMetrics(FACTS, clock=lambda: NOW)
    metrics.started("gold_page_clicks_5s")
    assert not [key for key in samples(metrics) if key[0] == "lakehouse_batch_end_overdue_seconds"]


def test_the_console_line_of_a_query_whose_batch_end_is_overdue_says_so():
    from lakehouse.monitoring.running_queries import activity_line, query_rows

    facts = {"hot_pages": QueryFacts(trigger_s=0, allowed_lateness_s=10, alerts=True, real_time=True,
                                     batch_interval_s=30)}
    clock = [NOW]
    metrics = QueryMetrics(facts, clock=lambda: clock[0])
    metrics.started("hot_pages")
    on_time = activity_line(query_rows(generate_latest(metrics.registry).decode(), now=NOW)[0])
    clock[0] = NOW + 95
    (late,) = query_rows(generate_latest(metrics.registry).decode(), now=NOW + 95)
    assert "OVERDUE" not in on_time
    assert late["batchEndOverdue"] == 35 and "BATCH END OVERDUE by 35 s: its commit is not finishing" in activity_line(late)
