"""Which rows an erasure finds, on hand-made rows: a raw record's user read from its bytes, valid or not;
Spark's hash of an id is the one the requests keep; a session open across its user's erasure is dropped; a
record the topic took before its user's erasure completed, or while it runs, is not landed."""

from __future__ import annotations

import json
from datetime import datetime

from chispa import assert_df_equality
from hypothesis import strategies as st
from pyspark.sql import functions as F

from analytical.bronze_clicks import may_name, record_user_id
from tests.spark.test_parsing_properties import drawn
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


def test_the_cheap_scan_keeps_every_record_of_the_user_however_its_bytes_spell_them(spark):
    user = "u\u00e9-7"
    spellings = [
        json.dumps({"eventId": "e1", "userId": user}, ensure_ascii=False).encode(),  # as written, UTF-8
        json.dumps({"eventId": "e2", "userId": user}).encode(),  # \u00e9 escaped
        b'{"eventId":"e3","userId":"\\u0075\\u00e9-7"}',  # ASCII escaped too
        b'{"eventId":"e4", "userId" : "' + user.encode() + b'"}',  # spaced out
        b'{"eventId":"e5","userId":"' + user.encode() + b'","pageId":',  # cut short: not JSON
        b'{"eventId":"e6","\\u0075serId":"x"}',  # the key escaped (another user: kept to be parsed)
    ]
    compact = {"separators": (",", ":"), "ensure_ascii": False}
    others = [json.dumps({"eventId": f"o{n}", "userId": f"u{n}", "pageId": "/a"}, **compact).encode() for n in range(3)]
    naming_them = json.dumps({"eventId": "o9", "userId": "u9", "pageId": f"/{user}"}, **compact).encode()
    rows = spark.createDataFrame([(value,) for value in [*spellings, *others, naming_them]], "value binary")
    kept = {row.value: row.user for row in rows.where(may_name("value", [user]))
            .select(record_user_id("value").alias("user"), "value").collect()}
    # every spelling of the user; of the others only the one whose bytes hold the id, which parsing tells apart
    assert set(kept) == {*spellings, naming_them}
    assert [value for value, found in kept.items() if found == user] == spellings[:-1]


@st.composite
def spelled_record(draw) -> tuple[str, bytes]:
    """A record of a drawn user, its id spelled as a producer may: UTF-8 or escaped (some characters or all),
    compact or spaced out, among other fields that may hold anything."""
    user = draw(st.text(min_size=1, max_size=10))
    escaped = "".join(f"\\u{ord(char):04x}" if char.isascii() and draw(st.booleans()) else json.dumps(char)[1:-1]
                      for char in user)
    spelling = draw(st.sampled_from([json.dumps(user), json.dumps(user, ensure_ascii=False), f'"{escaped}"']))
    colon = draw(st.sampled_from([":", " : ", ": "]))
    other = json.dumps(draw(st.text(max_size=10)), ensure_ascii=draw(st.booleans()))
    return user, f'{{"eventId":"e","pageId":{other},"userId"{colon}{spelling}}}'.encode()


def test_the_cheap_scan_keeps_every_drawn_spelling_of_a_users_id(spark):
    records = drawn(spelled_record(), 150)
    frame = spark.createDataFrame([(index, value) for index, (_, value) in enumerate(records)], "n int, value binary")
    kept = frame.select("n", *(may_name("value", [user]).alias(f"own{n}") for n, (user, _) in enumerate(records)))
    rows = kept.collect()
    missed = [records[row.n] for row in rows if not row[f"own{row.n}"]]
    assert not missed, f"records the scan would skip, though they are their user's: {missed[:5]}"
