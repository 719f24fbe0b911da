"""The reconciliation's model of the fast path, and time-to-alert's crossing clicks, agree with the
fast path's own transform.

The model (`analytical.fast_path_model.fast_path_model`) restates the rule record by record, in order
to explain differences with gold. A change to the rule (`shared/rule.py`) or to the parsing that the
model does not follow makes the two disagree here: on one static frame read in one micro-batch (no
watermark yet, so nothing is late), every window must get the same count from both.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from pyspark.sql import functions as F

from analytical.fast_path_history import FastPathHistory
from analytical.fast_path_model import fast_path_model
from operational.hot_pages import hot_page_alerts, watermarked_events
from lakehouse.bench.time_to_alert import crossing_clicks
from shared.rule import (alerted_count, assign_window, count_distinct_clicks_per_window, count_first_copies_per_window,
                         is_alerted_count)
from tests.conftest import make_config
from tests.crafted import TOPIC, as_one_partition, records

OUTPUT_TIME = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"


def test_the_model_counts_every_window_as_the_fast_path_does(spark):
    config = make_config("hot_pages.threshold=0", f"kafka.topics.clicks={TOPIC}")  # every window alerts
    received = datetime.fromisoformat("2026-11-22 10:00:30")
    rows = [(b"k", value, TOPIC, offset % 2, offset, received, received)
            for offset, value in enumerate(records())]
    kafka = spark.createDataFrame(
        rows, "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
              "kafkaTimestamp timestamp")

    fast_path = {(alert["pageId"], alert["windowStart"]): alert["clickCount"] for alert in
                 (json.loads(row.value) for row in
                  kafka.transform(hot_page_alerts, config.hot_pages, config.quality).collect())}

    ends = {partition: max(offset for _, _, _, p, offset, _, _ in rows if p == partition) + 1 for partition in (0, 1)}
    one_batch = FastPathHistory(ranges=[(partition, 0, end, 0, 0, 0) for partition, end in ends.items()],
                                closed_up_to_ms=None, batches=1, first_batch=0)
    with fast_path_model(spark, kafka.drop("timestamp"), config, one_batch) as placed:
        fates = {row.fate for row in placed.select("fate").distinct().collect()}
        model = {(row.pageId, row.windowStartText): row.n for row in
                 placed.where(F.col("fate") == "counted").transform(assign_window, config.hot_pages.window)
                 .groupBy("pageId", F.date_format("windowStart", OUTPUT_TIME).alias("windowStartText"))
                 .agg(F.count(F.lit(1)).alias("n")).collect()}

    assert fates == {"counted", "duplicate"}
    assert model == fast_path
    assert fast_path == {("/a", "2026-11-22T10:00:00.000Z"): 5, ("/b", "2026-11-22T10:00:00.000Z"): 2,
                         ("/a", "2026-11-22T10:00:05.000Z"): 1, ("/b", "2026-11-22T10:00:05.000Z"): 2,
                         ("/a", "2026-11-22T10:00:10.000Z"): 3}


def test_time_to_alert_measures_from_the_click_that_turns_each_alerted_window_hot(spark):
    config = make_config("hot_pages.threshold=2", f"kafka.topics.clicks={TOPIC}")
    start = datetime.fromisoformat("2026-11-22 10:00:30")
    rows = [(b"k", value, TOPIC, 0, offset, start + timedelta(milliseconds=offset))  # appended in offset order
            for offset, value in enumerate(records())]
    kafka = spark.createDataFrame(rows, "key binary, value binary, topic string, partition int, offset long, "
                                        "timestamp timestamp")

    alerted = {row.key for row in kafka.transform(hot_page_alerts, config.hot_pages, config.quality).collect()}
    crossings = {row.alertId: row.crossedAt for row in crossing_clicks(kafka, config).collect()}

    assert set(crossings) == alerted
    # /a 10:00:00: a0, a1, a2 are its first three distinct clicks (offsets 0-2); /a 10:00:10: c0, c1, c2
    # (offsets 9-11); the copies of a1 and a3 (offsets 5, 6) come after and count once.
    assert sorted(crossings.values()) == [start + timedelta(milliseconds=2), start + timedelta(milliseconds=11)]


def test_the_real_time_count_is_the_micro_batch_count(spark):
    """The two modes' counts (one set per window; first copies then a count) agree window by window."""
    config = make_config(f"kafka.topics.clicks={TOPIC}")
    events = as_one_partition(spark).transform(watermarked_events, config.hot_pages, config.quality)

    def counts(transform) -> dict:
        return {(row.pageId, row.windowStart): row.clickCount
                for row in events.transform(transform, config.hot_pages.window).collect()}

    assert counts(count_first_copies_per_window) == counts(count_distinct_clicks_per_window)
    assert len(counts(count_first_copies_per_window)) == 5


@pytest.mark.parametrize("threshold", [0, 2, 20, 5000])
def test_real_time_records_are_written_at_the_crossing_and_each_doubling(spark, threshold):
    near_doublings = {(threshold + 1) * 2 ** k + d for k in range(8) for d in (-1, 0, 1)}
    counts = sorted(set(range(0, 200)) | near_doublings)
    frame = spark.createDataFrame([(c,) for c in counts], "clickCount long")
    written = sorted(row.clickCount for row in frame.where(is_alerted_count(threshold)).collect())
    doublings = [(threshold + 1) * 2 ** k for k in range(40)]

    assert written == [c for c in counts if c in doublings]
    assert written[0] == threshold + 1
    # the highest record of a window whose count reached c: the largest doubling not above c
    for count in counts:
        expected = max((d for d in doublings if d <= count), default=None)
        assert alerted_count(count, threshold) == expected
