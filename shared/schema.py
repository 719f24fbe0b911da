"""The data contracts as code (CONTRACT.md, "Events" and "Alerts"): the click event, why a record is invalid, the alert.

Everything that reads `page-clicks` or `hot-pages` takes its field names and types from here.
"""

from __future__ import annotations

from enum import Enum

from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

MAX_PAGE_ID_LENGTH = 256
#: The longest eventType a valid event may carry, in characters.
MAX_EVENT_TYPE_LENGTH = 64
#: The only characters allowed around the JSON object of a record (RFC 8259's whitespace); also
#: what an "empty" eventId or pageId may consist of.
JSON_WHITESPACE = " \t\n\r"
#: The same, as the inside of a Java regex character class.
JSON_WHITESPACE_CLASS = r" \t\n\r"

#: A valid event, typed. eventTime is an instant (TIMESTAMP, shown in the session's UTC).
EVENT_SCHEMA = StructType(
    [
        StructField("eventId", StringType(), nullable=False),
        StructField("pageId", StringType(), nullable=False),
        StructField("eventTime", TimestampType(), nullable=False),
        StructField("userId", StringType()),
        StructField("eventType", StringType(), nullable=False),
    ]
)


class EventType(str, Enum):
    """The event types the lakehouse gives a meaning to (sessions, conversion); any other is kept as given."""

    PAGE_VIEW = "page_view"  # also what an event without an eventType (absent, null or blank) is
    ADD_TO_CART = "add_to_cart"
    PURCHASE = "purchase"

#: An ISO-8601 instant: date 'T' time, optional fraction, then 'Z' or a +hh:mm / -hh:mm offset.
#: A Java regex: `\z` is the very end (`$` would also match before a final line feed, which
#: Spark's timestamp cast then trims away).
EVENT_TIME_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})\z"


class InvalidReason(str, Enum):
    """Why a Kafka record is not a valid click: exactly one, the first that applies, in this order."""

    NULL_VALUE = "null_value"  # the record has no value (a tombstone)
    NOT_UTF8 = "not_utf8"  # the value's bytes are not UTF-8
    NOT_JSON = "not_json"  # not exactly one JSON value: unparseable, a repeated key, trailing content
    NOT_OBJECT = "not_object"  # one JSON value, but an array, string, number, boolean or null
    MISSING_EVENT_ID = "missing_event_id"
    EMPTY_EVENT_ID = "empty_event_id"  # empty or only whitespace
    MISSING_PAGE_ID = "missing_page_id"
    EMPTY_PAGE_ID = "empty_page_id"
    MISSING_EVENT_TIME = "missing_event_time"
    #: eventId or pageId not a string or number, eventTime not a string, userId not absent, null,
    #: a string or a number (a boolean, an array, an object), eventType not absent, null or a string
    WRONG_TYPE = "wrong_type"
    PAGE_ID_TOO_LONG = "page_id_too_long"  # more than MAX_PAGE_ID_LENGTH characters
    EVENT_TYPE_TOO_LONG = "event_type_too_long"  # more than MAX_EVENT_TYPE_LENGTH characters
    BAD_EVENT_TIME = "bad_event_time"  # empty, not ISO-8601 with a zone, or not a real instant
    #: before quality.earliest_event_time, or more than quality.max_clock_skew after the Kafka timestamp
    EVENT_TIME_OUT_OF_RANGE = "event_time_out_of_range"
    #: Not from parsing: a valid event that broke a silver expectation under the `drop` policy.
    FAILED_EXPECTATION = "failed_expectation"


#: Timestamps in alerts: ISO-8601 UTC with milliseconds, '2026-11-22T10:00:05.000Z'.
ALERT_TIMESTAMP_FORMAT = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"

#: The alert value on `hot-pages`, field for field and in this order.
ALERT_SCHEMA = StructType(
    [
        StructField("alertId", StringType(), nullable=False),
        StructField("pageId", StringType(), nullable=False),
        StructField("windowStart", StringType(), nullable=False),
        StructField("windowEnd", StringType(), nullable=False),
        StructField("clickCount", LongType(), nullable=False),
        StructField("threshold", LongType(), nullable=False),
        StructField("emittedAt", StringType(), nullable=False),
    ]
)
