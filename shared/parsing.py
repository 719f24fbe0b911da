"""Kafka records -> typed click events, or invalid records with the reason.

Both paths parse with `parse_clicks` and then split with `valid_clicks` / `invalid_clicks`: the
operational path drops and counts the invalid ones, the analytical path quarantines them. Parsing
never raises on bad input: only try_* functions are used (Spark 4 runs in ANSI mode, where a plain
cast of a bad value fails the query), and no Python runs per record (executors need only the jars).

What "one valid record" means is the events contract (CONTRACT.md, "Events"), strictly:

- Exactly one JSON value, with only JSON whitespace around it. Spark's `parse_json` reads the first
  value and ignores whatever follows it (a second object, a NUL, trailing text), so the value is
  parsed inside an array that ends with the SHA-256 of the record's bytes: `[<value>,"<sha>"]`.
  The array's second element is that hash only when nothing but whitespace came after the first
  value; to forge it, a record would have to contain its own SHA-256.
- `eventId` and `pageId` are JSON strings or numbers (a number is read as its text), `eventTime` is
  a JSON string, `userId` is absent, null, a string or a number, `eventType` absent, null or a string
  (absent, null or blank: `page_view`). Any other JSON type is `wrong_type` (without this, `true` or an
  array became the page `"true"` and raised an alert).
- Most records are written by a serializer in one shape: `{"eventId":"…","pageId":"…","eventTime":"…"}`,
  maybe with `,"userId":"…"` and then `,"eventType":"…"` before the brace, compact, strings without
  escapes or control characters. Such a record is exactly one JSON object whose fields are the quoted texts, so
  `CANONICAL` (one regular expression) recognises it and one split reads its fields; only the
  other records pay for the JSON parser, the hash and the type checks (parsing was most of the
  fast path's CPU before: operational/README.md). Both lanes
  feed the same checks below, and the property tests hold both to the contract.
- The event time lies within the bounds of `quality` (EventTimeBounds): not before
  `earliest_event_time` and at most `max_clock_skew` after the record's Kafka timestamp. This is
  checked here, before any watermark sees the event: a watermark is the newest event time minus a
  delay, so one record dated 9999 would otherwise close every window for good, checkpoint included.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shared.schema import (EVENT_SCHEMA, EVENT_TIME_PATTERN, JSON_WHITESPACE, JSON_WHITESPACE_CLASS, MAX_EVENT_TYPE_LENGTH,
                           MAX_PAGE_ID_LENGTH, EventType, InvalidReason)

EVENT_COLUMNS = EVENT_SCHEMA.fieldNames()
#: Default name of the observed metrics `parse_clicks` adds: records read, invalid records, and one
#: count per InvalidReason that parsing gives.
PARSE_METRICS = "parsed_clicks"
#: The Kafka timestamp column of a Kafka source's rows; bronze calls it `kafkaTimestamp`.
KAFKA_TIMESTAMP = "timestamp"
#: The reasons parsing gives (FAILED_EXPECTATION comes later, from silver's expectations).
PARSE_REASONS = [reason for reason in InvalidReason if reason is not InvalidReason.FAILED_EXPECTATION]

#: The serializer's shape: a string without quotes, backslashes or control characters, per field.
_TEXT = r'[^"\\\x00-\x1f]*'
CANONICAL = (r'^\{"eventId":"' + _TEXT + r'","pageId":"' + _TEXT + r'","eventTime":"' + _TEXT + r'"'
             r'(,"userId":"' + _TEXT + r'")?(,"eventType":"' + _TEXT + r'")?\}\z')
#: Where the fields are in a canonical record split at its quotes: {"eventId":"A","pageId":"B",...;
#: an optional field's name and value at either of the last two places.
_CANONICAL_PARTS = {"eventId": 4, "pageId": 8, "eventTime": 12}  # element_at is 1-based
_OPTIONAL_PARTS = (16, 20)
_FIELDS = ("eventId", "pageId", "eventTime", "userId", "eventType")

#: What `schema_of_variant` calls a JSON number.
_NUMBER_TYPES = r"^(TINYINT|SMALLINT|INT|BIGINT|FLOAT|DOUBLE|DECIMAL\(\d+,\d+\))$"


class EventTimeBounds(Protocol):
    """Where a valid event time lies (the configuration's `quality` section is one)."""

    earliest_event_time: datetime
    max_clock_skew: timedelta


def parse_clicks(records: DataFrame, quality: EventTimeBounds, kafka_timestamp: str = KAFKA_TIMESTAMP,
                 metrics_name: str = PARSE_METRICS) -> DataFrame:
    """Add eventId, pageId, eventTime (timestamp), userId, eventType and invalidReason (null when valid).

    `records` needs a binary `value` column and the Kafka timestamp `kafka_timestamp`; its other
    columns are kept as they are. Unknown fields are ignored.

    The result is observed as `metrics_name` (`records`, `invalid`, and one count per reason: a
    stream reports them in each progress). The observation is also a barrier Catalyst does not push
    filters through: without it, `valid_clicks`' filter is pushed beneath the parse and every
    reference to a parsed field re-parses the JSON.
    """
    # The sentinel is hashed from the bytes, not the text: a cast of non-UTF-8 bytes is lossy.
    wrapped = F.concat(F.lit("["), F.col("_text"), F.lit(',"'), F.col("_sha"), F.lit('"]'))
    canonical = F.col("_canonical")
    parsed = (
        records.withColumn("_text", F.col("value").cast("string"))
        .withColumn("_canonical", F.coalesce(F.is_valid_utf8(F.col("value")) & F.col("_text").rlike(CANONICAL),
                                             F.lit(False)))
        .withColumn("_parts", F.when(canonical, F.split(F.col("_text"), '"')))
        .withColumn("_sha", F.when(~canonical, F.sha2(F.col("value"), 256)))
        .withColumn("_doc", F.when(~canonical, F.try_parse_json(wrapped)))
        .withColumn("_oneValue", canonical | (F.try_variant_get("_doc", "$[1]", "string") == F.col("_sha")))
    )
    for name in _FIELDS:
        from_parts = _canonical_field(name)
        parsed = (
            parsed.withColumn(f"_{name}Type", F.when(canonical, F.when(from_parts.isNotNull(), F.lit("STRING")))
                              .otherwise(F.schema_of_variant(F.variant_get("_doc", f"$[0].{name}", "variant"))))
            .withColumn(f"_{name}", F.when(canonical, from_parts)
                        .otherwise(F.try_variant_get("_doc", f"$[0].{name}", "string")))
        )
    for name in _FIELDS:  # columns of their own: the reason's expression stays small enough to be JIT-compiled
        parsed = parsed.withColumn(f"_{name}Kind", _json_type(name))
    parsed = parsed.withColumn("_instant", F.try_to_timestamp(F.col("_eventTime")))
    reason = F.col("invalidReason")
    return (
        parsed.withColumn("invalidReason", _invalid_reason(quality, kafka_timestamp))
        .withColumn("eventId", _valid_only(F.col("_eventId")))
        .withColumn("pageId", _valid_only(F.col("_pageId")))
        .withColumn("eventTime", _valid_only(F.col("_instant")))
        .withColumn("userId", _valid_only(F.col("_userId")))
        .withColumn("eventType", _valid_only(F.when(_blank("eventType"), F.lit(EventType.PAGE_VIEW.value))
                                             .otherwise(F.col("_eventType"))))
        .drop("_text", "_canonical", "_parts", "_sha", "_doc", "_oneValue", "_instant",
              *(f"_{name}{part}" for name in _FIELDS for part in ("", "Type", "Kind")))
        .observe(metrics_name, F.count(F.lit(1)).alias("records"), F.count(reason).alias("invalid"),
                 *(F.count_if(reason == why.value).alias(why.value) for why in PARSE_REASONS))
    )


def valid_clicks(parsed: DataFrame) -> DataFrame:
    """The valid events of `parse_clicks`' output, without the invalidReason column."""
    return parsed.where(F.col("invalidReason").isNull()).drop("invalidReason")


def invalid_clicks(parsed: DataFrame) -> DataFrame:
    """The invalid records of `parse_clicks`' output, event columns dropped (they are null)."""
    return parsed.where(F.col("invalidReason").isNotNull()).drop(*EVENT_COLUMNS)


def _canonical_field(name: str) -> Column:
    """A field's text in a canonical record (null when it has no such field), from its split at quotes."""
    parts = F.col("_parts")
    if name in _CANONICAL_PARTS:
        return F.element_at(parts, _CANONICAL_PARTS[name])
    value = None
    for at in _OPTIONAL_PARTS:  # the name is two places before the value
        named = F.try_element_at(parts, F.lit(at - 2)) == F.lit(name)
        value = F.when(named, F.try_element_at(parts, F.lit(at))) if value is None else \
            value.when(named, F.try_element_at(parts, F.lit(at)))
    return value


def _valid_only(value: Column) -> Column:
    return F.when(F.col("invalidReason").isNull(), value)


def _json_type(field: str) -> Column:
    """The field's JSON type: missing, null, string, number or other (boolean, array, object)."""
    schema = F.col(f"_{field}Type")
    return (
        F.when(schema.isNull(), "missing")
        .when(schema == "VOID", "null")
        .when(schema == "STRING", "string")
        .when(schema.rlike(_NUMBER_TYPES), "number")
        .otherwise("other")
    )


def _kind(field: str) -> Column:
    return F.col(f"_{field}Kind")


def _absent(field: str) -> Column:
    return _kind(field).isin("missing", "null")


def _empty(field: str) -> Column:
    """A string of nothing but whitespace (space, tab, line feed, carriage return)."""
    return (_kind(field) == "string") & (F.btrim(F.col(f"_{field}"), F.lit(JSON_WHITESPACE)) == "")


def _blank(field: str) -> Column:
    """Absent, null, or a string of nothing but whitespace."""
    return _absent(field) | _empty(field)


def _invalid_reason(quality: EventTimeBounds, kafka_timestamp: str) -> Column:
    """The first rule a record breaks, as an InvalidReason value; null when it breaks none."""
    event_time, instant = F.col("_eventTime"), F.col("_instant")
    skew_micros = int(quality.max_clock_skew.total_seconds() * 1_000_000)
    checks: list[tuple[Column, InvalidReason]] = [
        (F.col("value").isNull(), InvalidReason.NULL_VALUE),
        (~F.is_valid_utf8(F.col("value")), InvalidReason.NOT_UTF8),
        (F.col("_oneValue").isNull() | ~F.col("_oneValue"), InvalidReason.NOT_JSON),
        (~F.col("_text").rlike(f"^[{JSON_WHITESPACE_CLASS}]*\\{{"), InvalidReason.NOT_OBJECT),
        (_absent("eventId"), InvalidReason.MISSING_EVENT_ID),
        (_empty("eventId"), InvalidReason.EMPTY_EVENT_ID),
        (_absent("pageId"), InvalidReason.MISSING_PAGE_ID),
        (_empty("pageId"), InvalidReason.EMPTY_PAGE_ID),
        (_absent("eventTime"), InvalidReason.MISSING_EVENT_TIME),
        (
            ~_kind("eventId").isin("string", "number") | ~_kind("pageId").isin("string", "number")
            | (_kind("eventTime") != "string") | (_kind("userId") == "other")
            | _kind("eventType").isin("number", "other"),
            InvalidReason.WRONG_TYPE,
        ),
        (F.char_length(F.col("_pageId")) > MAX_PAGE_ID_LENGTH, InvalidReason.PAGE_ID_TOO_LONG),
        (F.char_length(F.col("_eventType")) > MAX_EVENT_TYPE_LENGTH, InvalidReason.EVENT_TYPE_TOO_LONG),
        (~event_time.rlike(EVENT_TIME_PATTERN) | instant.isNull(), InvalidReason.BAD_EVENT_TIME),
        (
            (instant < F.lit(quality.earliest_event_time))
            | (F.unix_micros(instant) - F.unix_micros(F.col(kafka_timestamp)) > F.lit(skew_micros)),
            InvalidReason.EVENT_TIME_OUT_OF_RANGE,
        ),
    ]
    return F.coalesce(*(F.when(broken, F.lit(why.value)) for broken, why in checks))
