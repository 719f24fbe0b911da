"""The medallion's pure transforms on tiny hand-made frames (chispa)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from analytical import trends
from analytical.gold_page_clicks_5s import add_counts
from analytical.gold_page_clicks_hourly import roll_up_hours
from analytical.silver_clicks import quarantined, silver_clicks, written_parts
from shared.parsing import parse_clicks
from shared.rule import is_closed
from tests.conftest import make_config


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


def test_a_batch_s_counts_add_to_the_table_s_and_hot_is_set_on_the_sum(spark, windows):
    batch = spark.createDataFrame(
        [("/a", at("10:00:05"), at("10:00:10"), 2, False), ("/c", at("10:00:00"), at("10:00:05"), 1, False)],
        "pageId string, windowStart timestamp, windowEnd timestamp, clickCount long, isHot boolean")
    held = windows.where("windowStart < '2026-11-22 10:01:00'")  # the table's rows of the batch's minutes

    summed = add_counts(held, batch, threshold=3)

    expected = spark.createDataFrame(
        [("/a", at("10:00:00"), at("10:00:05"), 5, True), ("/a", at("10:00:05"), at("10:00:10"), 4, True),
         ("/b", at("10:00:00"), at("10:00:05"), 3, False), ("/c", at("10:00:00"), at("10:00:05"), 1, False)],
        "pageId string, windowStart timestamp, windowEnd timestamp, clickCount long, isHot boolean")
    assert_df_equality(summed, expected, ignore_row_order=True, ignore_nullable=True)
    assert_df_equality(add_counts(held.limit(0), batch, threshold=3), batch, ignore_row_order=True,
                       ignore_nullable=True)


def test_a_window_closes_when_the_watermark_reaches_its_end(spark, windows):
    watermark_ms = int(datetime.fromisoformat("2026-11-22 10:00:05+00:00").timestamp() * 1000)
    closed = windows.where(is_closed(watermark_ms)).select("pageId", F.date_format("windowStart", "HH:mm:ss"))
    assert sorted(tuple(row) for row in closed.collect()) == [("/a", "10:00:00"), ("/b", "10:00:00")]


def test_the_hourly_roll_up_adds_each_windows_changes_per_page_and_hour(spark):
    """gold/page_clicks_5s's change feed: /a 10:00:00 inserted at 4 then raised to 6 (hot at threshold 5)
    and replayed (equal images); /a 10:00:05 inserted at 2; /a 11:00:00 inserted at 6; /b 10:59:55
    inserted at 1 then raised to 3."""
    changes = [("/a", "10:00:00", 4, False, "insert"),
               ("/a", "10:00:00", 4, False, "update_preimage"), ("/a", "10:00:00", 6, True, "update_postimage"),
               ("/a", "10:00:00", 6, True, "update_preimage"), ("/a", "10:00:00", 6, True, "update_postimage"),
               ("/a", "10:00:05", 2, False, "insert"),
               ("/a", "11:00:00", 6, True, "insert"),
               ("/b", "10:59:55", 1, False, "insert"),
               ("/b", "10:59:55", 1, False, "update_preimage"), ("/b", "10:59:55", 3, False, "update_postimage")]
    feed = spark.createDataFrame(
        [(page, at(start), at(start) + timedelta(seconds=5), count, hot, kind) for page, start, count, hot, kind in changes],
        "pageId string, windowStart timestamp, windowEnd timestamp, clickCount long, isHot boolean, _change_type string",
    )
    expected = spark.createDataFrame(
        [("/a", at("10:00:00"), at("11:00:00"), 8, 1, 6), ("/a", at("11:00:00"), at("12:00:00"), 6, 1, 6),
         ("/b", at("10:00:00"), at("11:00:00"), 3, 0, 3)],
        "pageId string, hourStart timestamp, hourEnd timestamp, clickCount long, hotWindows long, peakWindowClicks long",
    )
    assert_df_equality(roll_up_hours(feed), expected, ignore_row_order=True, ignore_nullable=True)


def ask_both(windows, tmp_path, name, start=None, end=None, **values) -> list[tuple]:
    """Question `name` answered by Spark and by DuckDB over the same rows of its table (`windows`, written as
    a Delta table by delta-rs for DuckDB); both must give the same rows, returned as tuples."""
    from deltalake import write_deltalake

    from analytical.sql import SqlLake

    by_spark, _ = trends.answer(trends.on_spark(windows, name, start, end, **values))
    write_deltalake(str(tmp_path / trends.QUESTIONS[name].table), windows.toArrow(), mode="overwrite")
    _, by_duckdb = trends.on_duckdb(SqlLake(str(tmp_path)), name, start, end, **values)
    assert by_duckdb == by_spark
    return [tuple(row.values()) for row in by_spark]


def test_top_pages_orders_by_clicks_then_page_and_limits(windows, tmp_path):
    assert ask_both(windows, tmp_path, "top-pages", limit=1) == [("/a", 11, 2, 5)]
    assert ask_both(windows, tmp_path, "top-pages", limit=5) == [("/a", 11, 2, 5), ("/b", 4, 0, 3)]


def test_a_range_keeps_windows_by_their_start_half_open(windows, tmp_path):
    kept = ask_both(windows, tmp_path, "top-pages", at("10:00:05"), at("11:00:00"), limit=5)
    assert kept == [("/a", 2, 0, 2), ("/b", 1, 0, 1)]
    assert ask_both(windows, tmp_path, "hot-windows", end=at("10:00:00")) == []


def test_a_page_trend_buckets_by_hour_or_day(windows, tmp_path):
    assert ask_both(windows, tmp_path, "trend", page="/a", bucket="hour") == [
        ("2026-11-22T10:00:00.000Z", 7, 1, 5), ("2026-11-22T11:00:00.000Z", 4, 1, 4)]
    assert ask_both(windows, tmp_path, "trend", page="/b", bucket="day") == [("2026-11-22T00:00:00.000Z", 4, 0, 3)]
    assert ask_both(windows, tmp_path, "trend", page="/b' OR '1'='1", bucket="day") == []  # a value, never SQL


def test_hot_windows_lists_only_hot_ones_oldest_first(windows, tmp_path):
    assert ask_both(windows, tmp_path, "hot-windows") == [
        ("2026-11-22T10:00:00.000Z", "2026-11-22T10:00:05.000Z", "/a", 5),
        ("2026-11-22T11:00:00.000Z", "2026-11-22T11:00:05.000Z", "/a", 4)]


def test_silver_and_quarantine_split_parsed_bronze_rows_and_keep_coordinates(spark):
    bronze = spark.createDataFrame(
        [(b"k", b'{"eventId":"e1","pageId":"/a","eventTime":"2026-11-22T10:00:00Z","extra":1}', "t", 0, 7,
          at("10:00:01"), at("10:00:02")),
         (None, b"\xff", "t", 1, 3, at("10:00:01"), at("10:00:02"))],
        "key binary, value binary, topic string, partition int, offset long, kafkaTimestamp timestamp, ingestTime timestamp",
    )
    parsed = bronze.transform(parse_clicks, make_config().quality, "kafkaTimestamp")
    events = parsed.transform(silver_clicks)
    assert events.columns == ["eventId", "pageId", "eventTime", "userId", "eventType", "topic", "partition", "offset",
                              "kafkaTimestamp", "ingestTime"]
    assert [(r.eventId, r.partition, r.offset) for r in events.collect()] == [("e1", 0, 7)]
    bad = parsed.transform(quarantined).collect()
    assert [(bytes(r.value), r.reason, r.partition, r.offset) for r in bad] == [(b"\xff", "not_utf8", 1, 3)]


def test_the_tables_take_an_invalid_records_bytes_and_a_valid_ones_columns(spark):
    """What silver caches of a micro-batch: a valid record's key and value are dropped (its columns
    hold it), an invalid record's are kept for the quarantine, and the headers go."""
    bronze = spark.createDataFrame(
        [(b"k1", b'{"eventId":"e1","pageId":"/a","eventTime":"2026-11-22T10:00:00Z"}', "t", 0, 7,
          at("10:00:01"), at("10:00:02"), [("h", b"v")]),
         (b"k2", b'{"eventId":"e2"}', "t", 1, 3, at("10:00:01"), at("10:00:02"), [])],
        "key binary, value binary, topic string, partition int, offset long, kafkaTimestamp timestamp, "
        "ingestTime timestamp, headers array<struct<key:string,value:binary>>",
    )
    parts = bronze.transform(parse_clicks, make_config().quality, "kafkaTimestamp").transform(written_parts)
    expected = spark.createDataFrame(
        [("e1", "/a", datetime(2026, 11, 22, 10), None, "page_view", "t", 0, 7, at("10:00:01"), at("10:00:02"), None,
          None, None),
         (None, None, None, None, None, "t", 1, 3, at("10:00:01"), at("10:00:02"), "missing_page_id", bytearray(b"k2"),
          bytearray(b'{"eventId":"e2"}'))],
        "eventId string, pageId string, eventTime timestamp, userId string, eventType string, topic string, partition int, "
        "offset long, kafkaTimestamp timestamp, ingestTime timestamp, invalidReason string, key binary, value binary",
    )
    assert_df_equality(parts, expected, ignore_row_order=True, ignore_nullable=True)


def test_sessions_per_day_count_engaged_and_converted_sessions_by_their_start(spark, tmp_path):
    from analytical.gold_user_sessions import TABLE

    def session(user, start, engaged, converted, events):
        return (user, start, start + timedelta(minutes=30), start, events, 1, "/a", "/a", events, 0,
                int(converted), converted, engaged)

    day = at("10:00:00")
    sessions = spark.createDataFrame([session("u1", day, True, True, 3), session("u2", day, False, False, 1),
                                      session("u3", day, True, False, 2), session("u1", day + timedelta(days=1), False,
                                                                                  False, 1)], TABLE.schema)

    assert ask_both(sessions, tmp_path, "sessions") == [
        ("2026-11-22T00:00:00.000Z", 3, 2, 2 / 3, 1, 1 / 3, 6), ("2026-11-23T00:00:00.000Z", 1, 0, 0.0, 0, 0.0, 1)]
    assert ask_both(sessions, tmp_path, "sessions", start=day + timedelta(hours=1)) == [
        ("2026-11-23T00:00:00.000Z", 1, 0, 0.0, 0, 0.0, 1)]


def test_conversion_sets_hot_against_not_per_page_with_the_sessions_behind_each_rate(spark, tmp_path):
    from analytical.gold_page_conversion import TABLE

    cells = spark.createDataFrame([("/a", at("10:00:00"), True, 4, 2), ("/a", at("11:00:00"), True, 4, 1),
                                   ("/a", at("10:00:00"), False, 10, 1), ("/b", at("10:00:00"), False, 5, 0)],
                                  TABLE.schema)

    assert ask_both(cells, tmp_path, "conversion", limit=10) == [("/a", 8, 3, 3 / 8, 10, 1, 0.1),
                                                                 ("/b", 0, 0, None, 5, 0, 0.0)]
    assert ask_both(cells, tmp_path, "conversion", limit=10, page="/a", end=at("11:00:00")) == [
        ("/a", 4, 2, 0.5, 10, 1, 0.1)]
