"""The shared parsing: every invalid shape of DESIGN.md gets its reason; valid events are typed."""

from datetime import datetime, timezone

from chispa import assert_df_equality

from shared.parsing import invalid_clicks, parse_clicks, valid_clicks

GOOD = b'{"eventId":"e1","pageId":"/home","eventTime":"2026-11-22T10:00:01.250Z","userId":"u1"}'


def event(**fields) -> bytes:
    body = {"eventId": '"e1"', "pageId": '"/home"', "eventTime": '"2026-11-22T10:00:01.250Z"'} | fields
    return ("{" + ",".join(f'"{k}":{v}' for k, v in body.items() if v is not None) + "}").encode()


CASES = [
    ("valid", GOOD, None),
    ("null value", None, "null_value"),
    ("latin-1 bytes", b'{"eventId":"e\xe9"}', "not_utf8"),
    ("lone continuation byte", b"\x80", "not_utf8"),
    ("not json", b"page view", "not_json"),
    ("truncated json", GOOD[:30], "not_json"),
    ("empty value", b"", "not_json"),
    ("repeated key", event(eventId='"a","eventId":"b"'), "not_json"),
    ("array", b"[" + GOOD + b"]", "not_object"),
    ("number", b"42", "not_object"),
    ("string", b'"hello"', "not_object"),
    ("json null", b"null", "not_object"),
    ("no eventId", event(eventId=None), "missing_event_id"),
    ("null eventId", event(eventId="null"), "missing_event_id"),
    ("empty eventId", event(eventId='""'), "empty_event_id"),
    ("blank eventId", event(eventId='"   "'), "empty_event_id"),
    ("no pageId", event(pageId=None), "missing_page_id"),
    ("empty pageId", event(pageId='""'), "empty_page_id"),
    ("pageId of 257 characters", event(pageId='"' + "p" * 257 + '"'), "page_id_too_long"),
    ("pageId of 256 characters", event(pageId='"' + "p" * 256 + '"'), None),
    ("pageId of 256 non-ASCII characters", event(pageId='"' + "é" * 256 + '"'), None),
    ("no eventTime", event(eventTime=None), "missing_event_time"),
    ("empty eventTime", event(eventTime='""'), "bad_event_time"),
    ("eventTime without zone", event(eventTime='"2026-11-22T10:00:01"'), "bad_event_time"),
    ("eventTime date only", event(eventTime='"2026-11-22"'), "bad_event_time"),
    ("eventTime month 13", event(eventTime='"2026-13-22T10:00:01Z"'), "bad_event_time"),
    ("eventTime as words", event(eventTime='"yesterday"'), "bad_event_time"),
    ("eventTime with offset", event(eventTime='"2026-11-22T11:00:01.250+01:00"'), None),
    ("extra fields", event(extra='{"nested":[1,2]}', userId='"u"'), None),
    ("missing eventId wins over bad time", event(eventId=None, eventTime='"x"'), "missing_event_id"),
]


def test_every_invalid_shape_gets_its_reason(spark):
    records = spark.createDataFrame([(name, value) for name, value, _ in CASES], "case string, value binary")
    expected = spark.createDataFrame([(name, reason) for name, _, reason in CASES], "case string, invalidReason string")

    actual = records.transform(parse_clicks).select("case", "invalidReason")

    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_valid_events_are_typed_and_times_are_instants(spark):
    records = spark.createDataFrame(
        [
            (event(eventTime='"2026-11-22T11:00:01.250+01:00"', userId='"u7"'), 3, 42),
            (event(eventId='"e2"', eventTime='"2026-11-22T10:00:01.250Z"'), 3, 43),
        ],
        "value binary, partition int, offset long",
    )
    instant = datetime(2026, 11, 22, 10, 0, 1, 250_000, tzinfo=timezone.utc).replace(tzinfo=None)
    expected = spark.createDataFrame(
        [("e1", "/home", instant, "u7", 3, 42), ("e2", "/home", instant, None, 3, 43)],
        "eventId string, pageId string, eventTime timestamp, userId string, partition int, offset long",
    )

    actual = records.transform(parse_clicks).transform(valid_clicks).drop("value")

    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True, ignore_column_order=True)


def test_split_keeps_kafka_columns_and_loses_no_record(spark):
    records = spark.createDataFrame([(GOOD, 0), (b"nope", 1), (None, 2)], "value binary, offset long")
    parsed = records.transform(parse_clicks)

    valid = parsed.transform(valid_clicks)
    invalid = parsed.transform(invalid_clicks)

    assert [row.offset for row in valid.collect()] == [0]
    assert sorted((row.offset, row.invalidReason, row.value) for row in invalid.collect()) == [
        (1, "not_json", bytearray(b"nope")),
        (2, "null_value", None),
    ]
    assert "eventId" not in invalid.columns and "invalidReason" not in valid.columns


def test_the_json_is_parsed_once_per_record_even_under_the_validity_filter(spark):
    records = spark.createDataFrame([(GOOD,)], "value binary")

    plan = records.transform(parse_clicks).transform(valid_clicks)._jdf.queryExecution().optimizedPlan().toString()

    # Pushed beneath the parse, the filter would re-parse for every field it reads (10 times).
    assert plan.count("parseJson") == 1
