"""/metrics follows a real-time batch while it runs: its reads, its lag and its alerts show within
seconds, long before the batch's progress report (a checkpoint interval away). The lag and the
liveness come from the source's Kafka consumers in this JVM (lakehouse.monitoring.live_consumers), the alerts from
the alerts topic."""

from __future__ import annotations

import time

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from operational import hot_pages
from shared.broker_readings import BrokerOffsets
from lakehouse.monitoring.live_consumers import consumer_readings
from lakehouse.monitoring.metrics import QueryFacts, QueryMetrics
from shared.query_events import watching
from tests.helpers import click, send, wait_for
from tests.realtime.conftest import THRESHOLD


#: The promise: a running real-time batch shows on /metrics within this many seconds.
FRESH_S = 10


def scraped(metrics: QueryMetrics) -> dict[str, float]:
    """hot_pages' series (name -> value; the lag's is its clicks topic's) as a scrape reads them."""
    text = generate_latest(metrics.registry).decode()
    return {sample.name: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.labels.get("query") == "hot_pages"}


def test_a_running_real_time_batch_shows_its_reads_lag_and_alerts_on_metrics_within_seconds(real_time, spark):
    hot, cold = THRESHOLD + 5, 200
    sent = [click(f"h{n}", "/hot", "10:00:01.000") for n in range(hot)] + \
           [click(f"c{n}", f"/cold{n % 40}", "10:00:02.000") for n in range(cold)]
    config, query = real_time("30 seconds")
    broker = BrokerOffsets(config.kafka)
    metrics = QueryMetrics({"hot_pages": QueryFacts.of(config, hot_pages.STREAM)}, broker,
                           live=lambda: consumer_readings(spark), newest_record_time=broker.newest_timestamp)
    try:
        with watching(spark, metrics):
            metrics.started("hot_pages", str(query.runId))  # it started before this listener
            # the first batch's report gives the offsets the next batch starts from
            wait_for(lambda: len(query.recentProgress) == 1, 90, "the first batch's end")
            before = scraped(metrics)
            send(config, *sent)
            sent_at = time.monotonic()

            last: dict[str, float] = {}

            def caught_up() -> bool:  # one scrape shows it all (a scrape whose broker read times out shows less)
                now = last.update(scraped(metrics)) or last
                return (now.get("lakehouse_input_rows_total") == len(sent)
                        and now.get("lakehouse_running_batch_records_read") == len(sent)
                        and now.get("lakehouse_kafka_lag_records") == 0
                        and now.get("lakehouse_alerts_emitted_total") == 1
                        and now.get("lakehouse_last_alert_timestamp_seconds") is not None)

            try:
                wait_for(caught_up, FRESH_S, f"the running batch's reads, lag and alert on /metrics within {FRESH_S} s",
                         every_s=0.5)
            except AssertionError as late:
                raise AssertionError(f"{late}; the last scrape: {last}; consumers: {consumer_readings(spark)}") from None
            seen_after_s = time.monotonic() - sent_at
            assert len(query.recentProgress) == 1, "a batch ended: what /metrics showed may have come from its report"
            assert last["lakehouse_last_progress_timestamp_seconds"] > before["lakehouse_last_progress_timestamp_seconds"]
            assert last["lakehouse_last_alert_timestamp_seconds"] == pytest.approx(time.time(), abs=seen_after_s + 5)
    finally:
        broker.close()
