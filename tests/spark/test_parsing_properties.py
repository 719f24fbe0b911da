"""Property-based tests of the shared parsing: thousands of generated records, held against an
independent oracle of the contract (tests/contract_oracle.py).

Hypothesis draws the records (arbitrary bytes; JSON documents built from the contract's fields
with random types, nesting, repeated keys, whitespace, trailing content and encodings); one Spark
job parses them all, since a Spark job per example would take minutes. Each property asserts:
exactly one row per record, either a typed valid event or exactly one documented reason, and the
same verdict (valid, or the same reason) as the oracle; a valid event's fields and instant (its
offset applied, its fraction cut to microseconds) are the oracle's reading of the text. A failure
lists the records that disagree.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from shared.parsing import PARSE_REASONS, parse_clicks
from tests.conftest import make_config
from tests.contract_oracle import Bounds, event_time_micros, event_type, expected_reason

BYTES_EXAMPLES = 1500
DOCUMENT_EXAMPLES = 2500
SERIALIZER_EXAMPLES = 800

QUALITY = make_config("quality.max_clock_skew=1 hour", "quality.earliest_event_time=2000-01-01T00:00:00Z").quality
BOUNDS = Bounds(earliest_micros=946_684_800_000_000, max_skew_micros=3_600_000_000)
#: Kafka timestamps are drawn within 30 minutes of this instant, event times within 90.
BASE = datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc)
BASE_MICROS = int(BASE.timestamp()) * 1_000_000
HOUR_MICROS = 3_600_000_000

FIELDS = ["eventId", "pageId", "eventTime", "userId", "eventType"]
WHITESPACE = st.text(alphabet=" \t\n\r", max_size=3)
NOT_JSON_WHITESPACE = st.sampled_from(["\x0b", "\x0c", "\u00a0", "\ufeff", "\u2028", "\x00"])
TRAILING = st.sampled_from([" {}", ',{"eventId":"x"}', "]", "}", "\x00", "x", '"', " null", ',"0"]', "//", "\r\n\t"])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12), st.sampled_from(["", " ", "\t\n\r", "\u00a0", "true", "null", "0"]),
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)


def rarely(one_in: int):
    """True about once in `one_in` draws: Hypothesis favours the ends of a range, so not an end."""
    return st.integers(1, one_in).map(lambda drawn: drawn == one_in // 2 + 1)


@st.composite
def event_times(draw) -> str:
    """ISO-8601 times near BASE, in one of several zones (the text is that zone's clock: the instant
    stays near BASE), a third of them wrong in one part: the year (far past or future),
    month, day, hour or second out of range, a fraction of 10 digits, a bad or odd zone, a final
    line feed or space."""
    micros = BASE_MICROS + draw(st.integers(-3 * HOUR_MICROS // 2, 3 * HOUR_MICROS // 2))
    zone = draw(st.sampled_from(["Z", "+00:00", "-00:00", "+01:00", "-05:30", "+18:00"]))
    sign = -1 if zone[0] == "-" else 1
    offset = timedelta(0) if zone == "Z" else sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    at = datetime.fromtimestamp(micros / 1_000_000, timezone.utc) + offset  # the instant, as that zone's clock reads it
    parts = {"year": f"{at.year:04d}", "month": f"{at.month:02d}", "day": f"{at.day:02d}", "hour": f"{at.hour:02d}",
             "second": f"{at.second:02d}", "fraction": draw(st.sampled_from(["", f".{at.microsecond // 1000:03d}",
                                                                              ".5", ".123456789"])),
             "zone": zone, "end": ""}
    if draw(rarely(3)):
        broken = draw(st.sampled_from(sorted(parts)))
        parts[broken] = draw(st.sampled_from({
            "year": ["0001", "1999", "2000", "9999", "0000"], "month": ["00", "02", "13"], "day": ["00", "29", "31", "32"],
            "hour": ["23", "24"], "second": ["59", "60"], "fraction": [".", ".1234567890"],
            "zone": ["", "z", "+0100", "UTC", " Z", "+19:00", "+18:30", "+05:60"], "end": ["\n", " ", "x"],
        }[broken]))
    return (f"{parts['year']}-{parts['month']}-{parts['day']}T{parts['hour']}:{at.minute:02d}:{parts['second']}"
            f"{parts['fraction']}{parts['zone']}{parts['end']}")


def mostly(right, *wrong, one_in: int = 8):
    """A draw of `right`, but about once in `one_in` a draw of one of `wrong`."""
    return st.tuples(rarely(one_in), right, st.one_of(*wrong)).map(lambda drawn: drawn[2] if drawn[0] else drawn[1])


event_ids = mostly(st.text(min_size=1, max_size=10), st.integers(-(10**6), 10**6), json_values)
# Long ids at the limit (MAX_PAGE_ID_LENGTH 256, counted in characters: "é" is 2 bytes) and beyond it,
# each as likely as a wrong type (one shape in 32 draws): with one shape of 254 to 258 characters,
# a draw of 2,500 documents now and then held no id beyond the limit, and the coverage check failed.
page_ids = mostly(st.text(min_size=1, max_size=10), st.integers(0, 10**6), json_values,
                  st.text(alphabet="pé", min_size=254, max_size=256), st.text(alphabet="pé", min_size=257, max_size=260))
field_values = {
    "eventId": event_ids,
    "pageId": page_ids,
    "eventTime": mostly(event_times(), json_values),
    "userId": mostly(st.one_of(st.none(), st.text(max_size=8), st.integers()), json_values),
    # MAX_EVENT_TYPE_LENGTH 64, at the limit and beyond it, as often as a wrong type
    "eventType": mostly(st.one_of(st.none(), st.text(max_size=8), st.sampled_from(["purchase", "add_to_cart", " "])),
                        json_values, st.text(alphabet="té", min_size=62, max_size=64),
                        st.text(alphabet="té", min_size=65, max_size=67)),
}


@st.composite
def documents(draw) -> bytes:
    """A JSON object from the contract's fields (each may be missing, repeated or of any type),
    maybe with extra fields, written with random whitespace and trailing content, in some encoding."""
    keys = [key for key in FIELDS if not draw(rarely(20))]  # each field present 19 times in 20
    if draw(rarely(10)):
        keys.append(draw(st.sampled_from(FIELDS)))  # a repeated key, if it was there already
    keys += draw(st.lists(st.sampled_from(["extra", "nested", "event_id", "PageId"]), max_size=2, unique=True))
    pairs = [(key, draw(field_values.get(key, json_values))) for key in draw(st.permutations(keys))]
    ascii_only = draw(st.booleans())
    separator = draw(st.sampled_from([",", ", ", " ,\n", "\t,"]))
    colon = draw(st.sampled_from([":", ": ", " :\r\n"]))
    body = "{" + separator.join(json.dumps(k, ensure_ascii=ascii_only) + colon + json.dumps(v, ensure_ascii=ascii_only)
                                for k, v in pairs) + "}"
    if draw(rarely(10)):  # not an object at all
        body = draw(st.sampled_from([f"[{body}]", json.dumps(draw(scalars)), '"' + body.replace('"', "'") + '"']))
    before = draw(WHITESPACE) + (draw(NOT_JSON_WHITESPACE) if draw(rarely(20)) else "")
    after = draw(WHITESPACE) + (draw(TRAILING) if draw(rarely(10)) else "")
    text = before + body + after
    encoding = draw(st.sampled_from(["utf-8"] * 27 + ["utf-16", "utf-8-sig", "latin-1"]))
    try:
        return text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode("utf-8")


strings = st.one_of(st.text(max_size=12), st.sampled_from(["", " ", "\t", "\u00a0", "é", "\x7f", "a\\b", 'a"b']))


@st.composite
def serializer_documents(draw) -> bytes:
    """Documents in the shape most producers write (compact, the contract's fields in order, string
    values), which the parsing reads without its JSON parser; now and then a string written raw
    (quote, backslash or control character unescaped) or something after the object."""
    def quoted(text: str) -> str:
        return '"' + text + '"' if draw(rarely(6)) else json.dumps(text, ensure_ascii=False)

    pairs = [("eventId", draw(strings)), ("pageId", draw(mostly(strings, st.text(alphabet="pé", min_size=254, max_size=258)))),
             ("eventTime", draw(event_times()))]
    if draw(st.booleans()):
        pairs.append(("userId", draw(strings)))
    if draw(st.booleans()):
        # beyond MAX_EVENT_TYPE_LENGTH only (Hypothesis favours the shortest size: a range across the limit
        # drew no type beyond it in a run of 800)
        pairs.append(("eventType", draw(mostly(strings, st.text(alphabet="té", min_size=65, max_size=67), one_in=4))))
    body = "{" + ",".join(f'"{key}":{quoted(value)}' for key, value in pairs) + "}"
    return (body + (draw(TRAILING) if draw(rarely(10)) else "")).encode("utf-8")


def drawn(strategy, count: int) -> list:
    """`count` examples of `strategy`, drawn by Hypothesis (each run explores new ones)."""
    found = []

    @settings(max_examples=count, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(strategy)
    def collect(example):
        found.append(example)

    collect()
    return found


def check_against_the_oracle(spark, records: list[tuple[bytes | None, int]]) -> Counter:
    """Parse `records` (value, Kafka timestamp in micros) in one Spark job; assert the properties.
    Returns how many records got each verdict, and under "valid ..." how many valid events had a time
    with an offset of minutes ("valid -05:30") or a fraction beyond microseconds ("valid .123456789")."""
    frame = spark.createDataFrame(
        [(index, value, datetime.fromtimestamp(micros / 1_000_000, timezone.utc).replace(tzinfo=None))
         for index, (value, micros) in enumerate(records)],
        "record long, value binary, timestamp timestamp",
    )
    rows = (frame.transform(parse_clicks, QUALITY)
            .select("record", "invalidReason", "eventId", "pageId", "eventTime", "eventType",
                    F.unix_micros("eventTime").alias("eventMicros"))
            .collect())

    per_record = Counter(row.record for row in rows)
    assert sorted(per_record) == list(range(len(records))) and set(per_record.values()) == {1}, "one row per record"
    documented = {reason.value for reason in PARSE_REASONS}
    verdicts = Counter(row.invalidReason or "valid" for row in rows)
    for row in rows:
        if row.invalidReason is None:
            assert None not in (row.eventId, row.pageId, row.eventTime), row
            document = json.loads(records[row.record][0].decode("utf-8-sig"))
            for name in ("eventId", "pageId"):  # a string field is read as its text, unescaped
                if isinstance(document[name], str):
                    assert getattr(row, name) == document[name], (records[row.record][0], row)
            # the instant that decides the window: the oracle's reading of the text, offset and all
            assert row.eventMicros == event_time_micros(document["eventTime"]), (records[row.record][0], row)
            assert row.eventType == event_type(document), (records[row.record][0], row)
            verdicts.update(f"valid {shape}" for shape in ("-05:30", ".123456789") if shape in document["eventTime"])
        else:
            assert row.invalidReason in documented and \
                (row.eventId, row.pageId, row.eventTime, row.eventType) == (None, None, None, None)
    disagreements = [
        (records[row.record][0], row.invalidReason, expected)
        for row in rows
        if row.invalidReason != (expected := expected_reason(records[row.record][0], records[row.record][1], BOUNDS))
    ]
    disagreements.sort(key=lambda case: len(case[0] or b""))
    assert not disagreements, (
        f"{len(disagreements)} of {len(records)} records: the parsing and the oracle disagree "
        "(value, parsing's reason, oracle's reason), shortest first:\n"
        + "\n".join(repr(case) for case in disagreements[:15])
    )
    return verdicts


kafka_timestamps = st.integers(BASE_MICROS - HOUR_MICROS // 2, BASE_MICROS + HOUR_MICROS // 2)


def test_any_bytes_get_exactly_one_verdict_and_the_oracle_agrees(spark):
    records = drawn(st.tuples(st.one_of(st.none(), st.binary(max_size=200)), kafka_timestamps), BYTES_EXAMPLES)

    verdicts = check_against_the_oracle(spark, records)

    assert len(records) > BYTES_EXAMPLES // 2
    assert {"not_utf8", "not_json"} <= set(verdicts)


def test_generated_documents_get_the_oracle_verdict(spark):
    records = drawn(st.tuples(documents(), kafka_timestamps), DOCUMENT_EXAMPLES)

    verdicts = check_against_the_oracle(spark, records)

    # The generator reaches every rule, valid events included (a degenerate one would prove little).
    assert set(verdicts) >= {"valid", "not_json", "not_object", "missing_event_id", "empty_event_id",
                             "missing_page_id", "empty_page_id", "missing_event_time", "wrong_type",
                             "page_id_too_long", "event_type_too_long", "bad_event_time",
                             "event_time_out_of_range"}, verdicts
    print(f"\n{len(records)} generated documents: {dict(verdicts.most_common())}")


def test_documents_in_the_serializers_shape_get_the_oracle_verdict_and_their_fields(spark):
    records = drawn(st.tuples(serializer_documents(), kafka_timestamps), SERIALIZER_EXAMPLES)

    verdicts = check_against_the_oracle(spark, records)

    assert {"valid", "not_json", "empty_event_id", "page_id_too_long", "event_type_too_long",
            "bad_event_time"} <= set(verdicts), verdicts
    assert {"valid -05:30", "valid .123456789"} <= set(verdicts), verdicts  # instants the oracle checked
