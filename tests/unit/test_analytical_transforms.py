"""The medallion's pure transforms on tiny hand-made frames (chispa)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from analytical import trends
from analytical.gold_page_clicks_hourly import roll_up_hours
from analytical.silver_clicks import quarantined, silver_clicks
from shared.parsing import parse_clicks
from tests.conftest import make_config
from shared.rule import counts_per_window


def at(text: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-22 {text}")


@pytest.fixture
def windows(spark):
    """gold/page_clicks_5s rows: (pageId, windowStart, clickCount, isHot with threshold 3)."""
    rows = [("/a", "10:00:00", 5), ("/a", "10:00:05", 2), ("/a", "11:00:00", 4), ("/b", "10:00:00", 3),
            ("/b", "10:59:55", 1)]
    return spark.createDataFrame(
        [(page, at(start), count, count > 3) for page, start, count in rows],
        "pageId string, windowStart timestamp, clickCount long, isHot boolean",
    ).select("pageId", "windowStart", (F.col("windowStart") + F.expr("INTERVAL 5 SECONDS")).alias("windowEnd"),
             "clickCount", "isHot")


def test_the_hourly_roll_up_sums_counts_hot_windows_and_peak_per_page_and_hour(spark):
    clicks = [("/a", "10:00:00", 5), ("/a", "10:00:05", 2), ("/a", "11:00:00", 4), ("/b", "10:00:00", 3),
              ("/b", "10:59:55", 1)]
    events = spark.createDataFrame(
        [(page, at(start).replace(microsecond=n * 1000)) for page, start, count in clicks for n in range(count)],
        "pageId string, eventTime timestamp")
    counts = events.transform(counts_per_window, timedelta(seconds=5))
    expected = spark.createDataFrame(
        [("/a", at("10:00:00"), at("11:00:00"), 7, 1, 5), ("/a", at("11:00:00"), at("12:00:00"), 4, 1, 4),
         ("/b", at("10:00:00"), at("11:00:00"), 4, 0, 3)],
        "pageId string, hourStart timestamp, hourEnd timestamp, clickCount long, hotWindows long, peakWindowClicks long",
    )
    assert_df_equality(roll_up_hours(counts, threshold=3), expected, ignore_row_order=True, ignore_nullable=True)


def test_top_pages_orders_by_clicks_then_page_and_limits(spark, windows):
    expected = spark.createDataFrame([("/a", 11, 2, 5)], "pageId string, clicks long, hotWindows long, peakWindowClicks long")
    assert_df_equality(trends.top_pages(windows, limit=1), expected, ignore_nullable=True)


def test_a_range_keeps_windows_by_their_start_half_open(spark, windows):
    kept = trends.in_range(windows, at("10:00:05"), at("11:00:00"))
    assert sorted((r.pageId, r.windowStart) for r in kept.collect()) == [("/a", at("10:00:05")), ("/b", at("10:59:55"))]


def test_a_page_trend_buckets_by_hour_or_day(spark, windows):
    hourly = spark.createDataFrame([(at("10:00:00"), 7, 1, 5), (at("11:00:00"), 4, 1, 4)],
                                   "bucketStart timestamp, clicks long, hotWindows long, peakWindowClicks long")
    assert_df_equality(trends.page_trend(windows, "/a", "hour"), hourly, ignore_nullable=True)
    daily = trends.page_trend(windows, "/b", "day").collect()
    assert [(r.bucketStart, r.clicks, r.hotWindows) for r in daily] == [(at("00:00:00"), 4, 0)]


def test_hot_windows_lists_only_hot_ones_oldest_first(spark, windows):
    assert [(r.pageId, r.windowStart) for r in trends.hot_windows(windows).collect()] == [
        ("/a", at("10:00:00")), ("/a", at("11:00:00"))]


def test_silver_and_quarantine_split_parsed_bronze_rows_and_keep_coordinates(spark):
    bronze = spark.createDataFrame(
        [(b"k", b'{"eventId":"e1","pageId":"/a","eventTime":"2026-11-22T10:00:00Z","extra":1}', "t", 0, 7,
          at("10:00:01"), at("10:00:02")),
         (None, b"\xff", "t", 1, 3, at("10:00:01"), at("10:00:02"))],
        "key binary, value binary, topic string, partition int, offset long, kafkaTimestamp timestamp, ingestTime timestamp",
    )
    parsed = bronze.transform(parse_clicks, make_config().quality, "kafkaTimestamp")
    events = parsed.transform(silver_clicks)
    assert events.columns == ["eventId", "pageId", "eventTime", "userId", "topic", "partition", "offset",
                              "kafkaTimestamp", "ingestTime"]
    assert [(r.eventId, r.partition, r.offset) for r in events.collect()] == [("e1", 0, 7)]
    bad = parsed.transform(quarantined).collect()
    assert [(bytes(r.value), r.reason, r.partition, r.offset) for r in bad] == [(b"\xff", "not_utf8", 1, 3)]
