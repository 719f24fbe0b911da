"""Which rows an erasure finds, on hand-made rows: a raw record's user read from its bytes, valid or not;
Spark's hash of an id is the one the requests keep; a session open across its user's erasure is dropped; a
record the topic took before its user's erasure completed, or while it runs, is not landed."""

from __future__ import annotations

from datetime import datetime

from chispa import assert_df_equality
from pyspark.sql import functions as F

from analytical.bronze_clicks import record_user_id
from analytical.erasure_requests import TABLE as REQUESTS, user_hash, without_erased, without_forgotten


def test_a_raw_records_user_is_read_from_its_json_or_from_bytes_that_are_not_json(spark):
    values = [
        (1, b'{"eventId":"e1","pageId":"/a","eventTime":"2026-11-22T10:00:00Z","userId":"u1"}'),
        (2, b'{"eventId":"e2","userId":"u\\u00e9","pageId":"/a"}'),  # JSON's escape, decoded
        (3, b'{"eventId":"e3","userId":"u3","pageId":'),  # cut short: not JSON
        (4, b'{"eventId":"e4","userId" : "u4"'),
        (5, b'{"eventId":"e5","pageId":"/a","eventTime":"2026-11-22T10:00:00Z"}'),  # anonymous
        (6, b'{"eventId":"e6","userId":null}'),
        (7, b'{"eventId":"e7","userId":42}'),  # a number, as its text
        (8, b'\xff\xfe not text "userId":"u8"'),
        (9, None),
    ]
    rows = spark.createDataFrame(values, "n int, value binary").select("n", record_user_id("value").alias("user"))
    expected = spark.createDataFrame([(1, "u1"), (2, "u\u00e9"), (3, "u3"), (4, "u4"), (5, None), (6, None), (7, "42"),
                                      (8, "u8"), (9, None)], "n int, user string")
    assert_df_equality(rows, expected, ignore_row_order=True)


def test_spark_hashes_an_id_as_the_requests_keep_it(spark):
    ids = ["u1", "u\u00e9", "user-123@example.com"]
    hashed = spark.createDataFrame([(i,) for i in ids], "userId string").select("userId", F.sha2("userId", 256).alias("h"))
    assert {row.userId: row.h for row in hashed.collect()} == {i: user_hash(i) for i in ids}


def at(clock: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-22T{clock}")


def test_a_forgotten_users_rows_from_before_the_request_are_dropped_and_later_ones_kept(spark):
    rows = spark.createDataFrame([("u1", at("10:00:00")), ("u1", at("12:00:00")), ("u2", at("10:00:00")), (None, at("10:00:00"))],
                                 "userId string, sessionStart timestamp")
    requests = spark.createDataFrame([(user_hash("u1"), at("11:00:00"), None, None)], REQUESTS.schema)
    expected = spark.createDataFrame([("u1", at("12:00:00")), ("u2", at("10:00:00")), (None, at("10:00:00"))],
                                     "userId string, sessionStart timestamp")
    assert_df_equality(rows.transform(without_forgotten, requests, "sessionStart"), expected, ignore_row_order=True)


def test_records_of_a_user_being_erased_are_dropped_and_after_a_completed_erasure_only_later_ones_kept(spark):
    rows = spark.createDataFrame([(1, "u1", at("10:00:00")), (2, "u1", at("11:00:00")), (3, "u1", at("12:00:00")),
                                  (4, "u2", at("10:00:00")), (5, "u3", at("12:00:00")), (6, None, at("10:00:00"))],
                                 "n int, userId string, appended timestamp")
    requests = spark.createDataFrame([(user_hash("u1"), at("10:30:00"), at("11:00:00"), {"silver/clicks": 1}),
                                      (user_hash("u3"), at("11:30:00"), None, None)], REQUESTS.schema)
    kept = rows.transform(without_erased, requests, F.col("userId"), "appended").select("n")
    # u1's until their erasure completed (inclusive), all of u3's, whose erasure runs still
    assert_df_equality(kept, spark.createDataFrame([(3,), (4,), (6,)], "n int"), ignore_row_order=True)
