"""The rule on tiny static frames: de-duplication, epoch-aligned [start, end) windows, strict threshold."""

from datetime import datetime, timedelta

from chispa import assert_df_equality
from pyspark.sql import functions as F

from shared.rule import count_clicks_per_window, count_distinct_clicks_per_window, crossing_count, dedupe_clicks, hot_windows, mark_hot, same_event

FIVE_SECONDS = timedelta(seconds=5)
SCHEMA = "eventId string, pageId string, eventTime timestamp"


def at(text: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-22T{text}")


def windows_schema(extra: str = "") -> str:
    return "pageId string, windowStart timestamp, windowEnd timestamp, clickCount long" + extra


def test_dedupe_keeps_one_event_per_event_id(spark):
    events = spark.createDataFrame(
        [("a", "/p", at("10:00:01")), ("a", "/p", at("10:00:01")), ("a", "/p", at("10:00:02")), ("b", "/p", at("10:00:01"))],
        SCHEMA,
    )

    deduped = events.transform(dedupe_clicks, FIVE_SECONDS)

    assert sorted(row.eventId for row in deduped.collect()) == ["a", "b"]


def test_windows_are_epoch_aligned_and_half_open(spark):
    events = spark.createDataFrame(
        [
            ("start", "/p", at("10:00:05.000")),  # exactly at a start: belongs to [05, 10)
            ("inside", "/p", at("10:00:09.999")),
            ("end", "/p", at("10:00:10.000")),  # exactly at that window's end: the next window
            ("before", "/p", at("10:00:04.999")),
            ("other page", "/q", at("10:00:06")),
        ],
        SCHEMA,
    )
    expected = spark.createDataFrame(
        [
            ("/p", at("10:00:00"), at("10:00:05"), 1),
            ("/p", at("10:00:05"), at("10:00:10"), 2),
            ("/p", at("10:00:10"), at("10:00:15"), 1),
            ("/q", at("10:00:05"), at("10:00:10"), 1),
        ],
        windows_schema(),
    )

    actual = events.transform(count_clicks_per_window, FIVE_SECONDS)

    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_counts_distinct_events_after_dedupe(spark):
    events = spark.createDataFrame([("a", "/p", at("10:00:01"))] * 3 + [("b", "/p", at("10:00:02"))], SCHEMA)

    counts = events.transform(dedupe_clicks, FIVE_SECONDS).transform(count_clicks_per_window, FIVE_SECONDS)

    assert [row.clickCount for row in counts.collect()] == [2]


def test_the_fast_paths_count_is_the_distinct_event_ids_of_each_page_and_window(spark):
    events = spark.createDataFrame(
        [("a", "/p", at("10:00:01"))] * 3 + [("b", "/p", at("10:00:04.999")),  # /p 10:00:00: a, b
         ("a", "/p", at("10:00:06")),   # a copy stamped with the next window counts there
         ("b", "/q", at("10:00:02"))],  # a copy stamped with another page counts there
        SCHEMA)
    expected = spark.createDataFrame(
        [("/p", at("10:00:00"), at("10:00:05"), 2), ("/p", at("10:00:05"), at("10:00:10"), 1),
         ("/q", at("10:00:00"), at("10:00:05"), 1)], windows_schema())

    counts = events.transform(count_distinct_clicks_per_window, FIVE_SECONDS)

    assert_df_equality(counts, expected, ignore_row_order=True, ignore_nullable=True)


def test_a_count_equal_to_the_threshold_is_not_hot_and_one_more_is(spark):
    windows = spark.createDataFrame(
        [("/at", at("10:00:00"), at("10:00:05"), 3), ("/over", at("10:00:00"), at("10:00:05"), 4)], windows_schema()
    )
    expected = spark.createDataFrame(
        [("/at", at("10:00:00"), at("10:00:05"), 3, False), ("/over", at("10:00:00"), at("10:00:05"), 4, True)],
        windows_schema(", isHot boolean"),
    )

    assert_df_equality(windows.transform(mark_hot, 3), expected, ignore_row_order=True, ignore_nullable=True)
    assert [row.pageId for row in windows.transform(hot_windows, 3).collect()] == ["/over"]


def test_window_length_comes_from_config(spark):
    events = spark.createDataFrame([("a", "/p", at("10:00:01")), ("b", "/p", at("10:00:09"))], SCHEMA)

    counts = events.transform(count_clicks_per_window, timedelta(seconds=10)).collect()

    assert [(row.windowStart, row.windowEnd, row.clickCount) for row in counts] == [(at("10:00:00"), at("10:00:10"), 2)]


def test_the_crossing_count_is_the_first_count_the_hot_condition_accepts(spark):
    for threshold in (0, 3, 5000):
        counts = spark.createDataFrame([(crossing_count(threshold) - 1,), (crossing_count(threshold),)],
                                       "clickCount long")
        assert [row.isHot for row in counts.transform(mark_hot, threshold).orderBy("clickCount").collect()] == [
            False, True]


def test_the_merge_condition_matches_copies_within_the_horizon_as_the_de_duplication_does(spark):
    events = spark.createDataFrame(
        [("e1", datetime(2026, 11, 22, 10, 0, 0)), ("e1", datetime(2026, 11, 22, 10, 0, 5)),
         ("e1", datetime(2026, 11, 22, 10, 0, 6)), ("e2", datetime(2026, 11, 22, 10, 0, 0))],
        "eventId string, eventTime timestamp")
    new = spark.createDataFrame([("e1", datetime(2026, 11, 22, 10, 0, 0))], "eventId string, eventTime timestamp")
    matched = events.alias("t").join(new.alias("s"), F.expr(same_event(timedelta(seconds=5))))
    assert sorted(row.eventTime.second for row in matched.select("t.eventTime").collect()) == [0, 5]
