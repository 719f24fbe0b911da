"""The data contracts of DESIGN.md as code: the click event, why a record is invalid, the alert.

Everything that reads `page-clicks` or `hot-pages` takes its field names and types from here.
"""

from __future__ import annotations

from enum import Enum

from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

MAX_PAGE_ID_LENGTH = 256

#: A valid event, typed. eventTime is an instant (TIMESTAMP, shown in the session's UTC).
EVENT_SCHEMA = StructType(
    [
        StructField("eventId", StringType(), nullable=False),
        StructField("pageId", StringType(), nullable=False),
        StructField("eventTime", TimestampType(), nullable=False),
        StructField("userId", StringType()),
    ]
)

#: An ISO-8601 instant: date 'T' time, optional fraction, then 'Z' or a +hh:mm / -hh:mm offset.
EVENT_TIME_PATTERN = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$"


class InvalidReason(str, Enum):
    """Why a Kafka record is not a valid click: exactly one, the first that applies, in this order."""

    NULL_VALUE = "null_value"  # the record has no value (a tombstone)
    NOT_UTF8 = "not_utf8"  # the value's bytes are not UTF-8
    NOT_JSON = "not_json"  # the value does not parse as JSON
    NOT_OBJECT = "not_object"  # valid JSON, but an array, string, number, boolean or null
    MISSING_EVENT_ID = "missing_event_id"
    EMPTY_EVENT_ID = "empty_event_id"  # empty or only whitespace
    MISSING_PAGE_ID = "missing_page_id"
    EMPTY_PAGE_ID = "empty_page_id"
    PAGE_ID_TOO_LONG = "page_id_too_long"  # more than MAX_PAGE_ID_LENGTH characters
    MISSING_EVENT_TIME = "missing_event_time"
    BAD_EVENT_TIME = "bad_event_time"  # empty, not ISO-8601 with a zone, or not a real instant
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
