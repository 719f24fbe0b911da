"""The shared parsing: every invalid shape of the events contract gets its reason; valid events are typed."""

from datetime import datetime, timezone

from chispa import assert_df_equality

from shared.parsing import invalid_clicks, parse_clicks, valid_clicks
from tests.conftest import make_config

GOOD = b'{"eventId":"e1","pageId":"/home","eventTime":"2026-11-22T10:00:01.250Z","userId":"u1"}'
#: The Kafka timestamp every case is given: a second after GOOD's event time.
APPENDED = datetime(2026, 11, 22, 10, 0, 2)
#: The shipped bounds: events from 2000-01-01, at most 1 hour ahead of their Kafka timestamp.
QUALITY = make_config("quality.max_clock_skew=1 hour").quality


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
    ("only whitespace", b" \n\t ", "not_json"),
    ("repeated key", event(eventId='"a","eventId":"b"'), "not_json"),
    ("repeated key in a nested object", event(extra='{"a":1,"a":2}'), "not_json"),
    ("a second object after the first", GOOD + b' {"eventId":"e2"}', "not_json"),
    ("a comma and a second object", GOOD + b',{"eventId":"e2"}', "not_json"),
    ("a closing bracket after the object", GOOD + b"]", "not_json"),
    ("a NUL after the object", GOOD + b"\x00", "not_json"),
    ("trailing text", GOOD + b"garbage", "not_json"),
    ("a byte order mark", b"\xef\xbb\xbf" + GOOD, "not_json"),
    ("a vertical tab before the object", b"\x0b" + GOOD, "not_json"),
    ("NaN", event(userId="NaN"), "not_json"),
    ("a comment", b"/* c */" + GOOD, "not_json"),
    ("JSON whitespace around the object", b" \n\t\r" + GOOD + b"\r\n\t ", None),
    ("array", b"[" + GOOD + b"]", "not_object"),
    ("number", b"42", "not_object"),
    ("string", b'"hello"', "not_object"),
    ("json null", b"null", "not_object"),
    ("whitespace then an array", b"\n [1]", "not_object"),
    ("no eventId", event(eventId=None), "missing_event_id"),
    ("null eventId", event(eventId="null"), "missing_event_id"),
    ("empty eventId", event(eventId='""'), "empty_event_id"),
    ("blank eventId", event(eventId='"   "'), "empty_event_id"),
    ("eventId of tabs and line feeds", event(eventId='"\\t\\n\\r"'), "empty_event_id"),
    ("eventId as a number", event(eventId="123"), None),
    ("eventId as true", event(eventId="true"), "wrong_type"),
    ("eventId as an array", event(eventId='["e1"]'), "wrong_type"),
    ("eventId as an empty array", event(eventId="[]"), "wrong_type"),
    ("eventId as an object", event(eventId='{"id":"e1"}'), "wrong_type"),
    ("no pageId", event(pageId=None), "missing_page_id"),
    ("empty pageId", event(pageId='""'), "empty_page_id"),
    ("pageId as true", event(pageId="true"), "wrong_type"),
    ("pageId as a number", event(pageId="7"), None),
    ("pageId of 257 characters", event(pageId='"' + "p" * 257 + '"'), "page_id_too_long"),
    ("pageId of 256 characters", event(pageId='"' + "p" * 256 + '"'), None),
    ("pageId of 256 non-ASCII characters", event(pageId='"' + "é" * 256 + '"'), None),
    ("no eventTime", event(eventTime=None), "missing_event_time"),
    ("eventTime as a number", event(eventTime="1763805601250"), "wrong_type"),
    ("userId as a number", event(userId="42"), None),
    ("userId null", event(userId="null"), None),
    ("userId as false", event(userId="false"), "wrong_type"),
    ("userId as an object", event(userId="{}"), "wrong_type"),
    ("empty eventTime", event(eventTime='""'), "bad_event_time"),
    ("eventTime without zone", event(eventTime='"2026-11-22T10:00:01"'), "bad_event_time"),
    ("eventTime date only", event(eventTime='"2026-11-22"'), "bad_event_time"),
    ("eventTime month 13", event(eventTime='"2026-13-22T10:00:01Z"'), "bad_event_time"),
    ("eventTime as words", event(eventTime='"yesterday"'), "bad_event_time"),
    ("eventTime with a final line feed", event(eventTime='"2026-11-22T10:00:01Z\\n"'), "bad_event_time"),
    ("eventTime with non-ASCII digits", event(eventTime='"２026-11-22T10:00:01Z"'), "bad_event_time"),
    ("eventTime with offset", event(eventTime='"2026-11-22T11:00:01.250+01:00"'), None),
    ("eventTime in year 9999", event(eventTime='"9999-12-31T23:59:59.999Z"'), "event_time_out_of_range"),
    ("eventTime in year 0001", event(eventTime='"0001-01-01T00:00:00Z"'), "event_time_out_of_range"),
    ("eventTime before the earliest", event(eventTime='"1999-12-31T23:59:59.999Z"'), "event_time_out_of_range"),
    ("eventTime just within the skew", event(eventTime='"2026-11-22T11:00:02Z"'), None),
    ("eventTime just beyond the skew", event(eventTime='"2026-11-22T11:00:02.001Z"'), "event_time_out_of_range"),
    ("extra fields", event(extra='{"nested":[1,2]}', userId='"u"'), None),
    ("missing eventId wins over bad time", event(eventId=None, eventTime='"x"'), "missing_event_id"),
    ("missing pageId wins over a wrong type", event(eventId="true", pageId=None), "missing_page_id"),
    ("a wrong type wins over a long pageId", event(pageId='"' + "p" * 300 + '"', userId="[]"), "wrong_type"),
    ("eventType purchase", event(eventType='"purchase"'), None),
    ("eventType null", event(eventType="null"), None),
    ("eventType as a number", event(eventType="1"), "wrong_type"),
    ("eventType as true", event(eventType="true"), "wrong_type"),
    ("eventType as an array", event(eventType='["purchase"]'), "wrong_type"),
    ("eventType of 65 characters", event(eventType='"' + "t" * 65 + '"'), "event_type_too_long"),
    ("eventType of 64 characters", event(eventType='"' + "t" * 64 + '"'), None),
    ("canonical eventType of 65 characters", GOOD[:-1] + b',"eventType":"' + b"t" * 65 + b'"}', "event_type_too_long"),
    ("a long pageId wins over a long eventType", event(pageId='"' + "p" * 257 + '"', eventType='"' + "t" * 65 + '"'),
     "page_id_too_long"),
    ("a long eventType wins over a bad time", event(eventType='"' + "t" * 65 + '"', eventTime='"x"'),
     "event_type_too_long"),
]


def records_of(spark, cases):
    return spark.createDataFrame([(name, value, APPENDED) for name, value, _ in cases],
                                 "case string, value binary, timestamp timestamp")


def test_every_invalid_shape_gets_its_reason(spark):
    expected = spark.createDataFrame([(name, reason) for name, _, reason in CASES], "case string, invalidReason string")

    actual = records_of(spark, CASES).transform(parse_clicks, QUALITY).select("case", "invalidReason")

    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_the_bounds_follow_the_record_kafka_timestamp_not_the_clock(spark):
    ahead = event(eventTime='"2026-11-22T12:00:00Z"')  # 2 hours after APPENDED
    records = spark.createDataFrame([("early", ahead, APPENDED), ("appended later", ahead, datetime(2026, 11, 22, 11))],
                                    "case string, value binary, timestamp timestamp")

    reasons = dict(records.transform(parse_clicks, QUALITY).select("case", "invalidReason").collect())

    assert reasons == {"early": "event_time_out_of_range", "appended later": None}


def test_a_bronze_row_is_bounded_by_its_kafkaTimestamp_column(spark):
    rows = spark.createDataFrame([(event(eventTime='"2026-11-22T12:00:00Z"'), APPENDED)],
                                 "value binary, kafkaTimestamp timestamp")

    assert rows.transform(parse_clicks, QUALITY, "kafkaTimestamp").first().invalidReason == "event_time_out_of_range"


def test_valid_events_are_typed_and_times_are_instants(spark):
    records = spark.createDataFrame(
        [
            (event(eventTime='"2026-11-22T11:00:01.250+01:00"', userId='"u7"', eventType='"purchase"'), 3, 42, APPENDED),
            (event(eventId='"e2"', eventTime='"2026-11-22T10:00:01.250Z"', userId="7"), 3, 43, APPENDED),
        ],
        "value binary, partition int, offset long, timestamp timestamp",
    )
    instant = datetime(2026, 11, 22, 10, 0, 1, 250_000, tzinfo=timezone.utc).replace(tzinfo=None)
    expected = spark.createDataFrame(
        [("e1", "/home", instant, "u7", "purchase", 3, 42, APPENDED),
         ("e2", "/home", instant, "7", "page_view", 3, 43, APPENDED)],
        "eventId string, pageId string, eventTime timestamp, userId string, eventType string, partition int, offset long, "
        "timestamp timestamp",
    )

    actual = records.transform(parse_clicks, QUALITY).transform(valid_clicks).drop("value")

    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True, ignore_column_order=True)


#: The serializer's shape (the parsing's canonical lane) and the same fields in another order (its JSON lane).
EVENT_TYPES = [
    ("canonical without", b'{"eventId":"c1","pageId":"/p","eventTime":"2026-11-22T10:00:01Z"}', None, "page_view"),
    ("canonical with userId", b'{"eventId":"c2","pageId":"/p","eventTime":"2026-11-22T10:00:01Z","userId":"u"}',
     "u", "page_view"),
    ("canonical with both", b'{"eventId":"c3","pageId":"/p","eventTime":"2026-11-22T10:00:01Z","userId":"u",'
     b'"eventType":"purchase"}', "u", "purchase"),
    ("canonical with eventType only", b'{"eventId":"c4","pageId":"/p","eventTime":"2026-11-22T10:00:01Z",'
     b'"eventType":"add_to_cart"}', None, "add_to_cart"),
    ("canonical, an unknown type kept", b'{"eventId":"c5","pageId":"/p","eventTime":"2026-11-22T10:00:01Z",'
     b'"eventType":"wishlist"}', None, "wishlist"),
    ("canonical, a blank type", b'{"eventId":"c6","pageId":"/p","eventTime":"2026-11-22T10:00:01Z",'
     b'"eventType":" "}', None, "page_view"),
    ("another order", b'{"eventType":"purchase","userId":"u","eventTime":"2026-11-22T10:00:01Z","pageId":"/p",'
     b'"eventId":"j1"}', "u", "purchase"),
    ("a type with spaces kept as given", b'{"eventType":" Purchase ","eventId":"j2","pageId":"/p",'
     b'"eventTime":"2026-11-22T10:00:01Z"}', None, " Purchase "),
    ("a null type", b'{"eventType":null,"eventId":"j3","pageId":"/p","eventTime":"2026-11-22T10:00:01Z"}',
     None, "page_view"),
    ("userId named like the type's place", b'{"eventId":"c7","pageId":"/p","eventTime":"2026-11-22T10:00:01Z",'
     b'"userId":"eventType"}', "eventType", "page_view"),
]


def test_event_types_are_read_in_either_lane_and_default_to_page_view(spark):
    expected = spark.createDataFrame([(name, user, kind) for name, _, user, kind in EVENT_TYPES],
                                     "case string, userId string, eventType string")
    records = spark.createDataFrame([(name, value, APPENDED) for name, value, _, _ in EVENT_TYPES],
                                    "case string, value binary, timestamp timestamp")

    actual = records.transform(parse_clicks, QUALITY).transform(valid_clicks).select("case", "userId", "eventType")

    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_split_keeps_kafka_columns_and_loses_no_record(spark):
    records = spark.createDataFrame([(GOOD, 0, APPENDED), (b"nope", 1, APPENDED), (None, 2, APPENDED)],
                                    "value binary, offset long, timestamp timestamp")
    parsed = records.transform(parse_clicks, QUALITY)

    valid = parsed.transform(valid_clicks)
    invalid = parsed.transform(invalid_clicks)

    assert [row.offset for row in valid.collect()] == [0]
    assert sorted((row.offset, row.invalidReason, row.value) for row in invalid.collect()) == [
        (1, "not_json", bytearray(b"nope")),
        (2, "null_value", None),
    ]
    assert "eventId" not in invalid.columns and "invalidReason" not in valid.columns


def test_the_json_is_parsed_once_per_record_even_under_the_validity_filter(spark):
    plan = records_of(spark, CASES[:1]).transform(parse_clicks, QUALITY).transform(valid_clicks)
    optimized = plan._jdf.queryExecution().optimizedPlan().toString()

    # Pushed beneath the parse, the filter would re-parse for every field it reads (10 times).
    assert optimized.count("parseJson") == 1
