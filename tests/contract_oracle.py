"""An independent Python reading of the events contract (CONTRACT.md, "Events"): which records are valid;
and of the alerts' counts (CONTRACT.md, "Alerts"): what a window's highest alert record says.

Written from the contract's words alone, with Python's own tools (`bytes.decode`, `json.loads`,
calendar arithmetic), and importing nothing from the code under test, so that the property tests
can hold the shared parsing (Spark SQL) against it. Where the two disagree, one of them misreads
the contract.

Known, documented limits of the comparison (the generators stay inside them): numbers of more than
1,000 digits (Spark's JSON reader refuses them, Python reads up to 4,300) and nesting deeper than
a few hundred levels (each reader has its own depth limit).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone

JSON_WHITESPACE = " \t\n\r"
EVENT_TIME = re.compile(
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2})T(?P<hour>[0-9]{2}):(?P<minute>[0-9]{2})"
    r":(?P<second>[0-9]{2})(?:\.(?P<fraction>[0-9]{1,9}))?(?:(?P<utc>Z)|(?P<sign>[+-])(?P<oh>[0-9]{2}):(?P<om>[0-9]{2}))"
)


@dataclass(frozen=True)
class Bounds:
    """The event-time bounds in microseconds since the epoch (UTC)."""

    earliest_micros: int
    max_skew_micros: int


class _Repeated(ValueError):
    pass


def _no_repeated_keys(pairs: list[tuple[str, object]]) -> dict:
    keys = [key for key, _ in pairs]
    if len(keys) != len(set(keys)):
        raise _Repeated("repeated key")
    return dict(pairs)


def _no_constants(name: str) -> None:
    raise ValueError(f"{name} is not JSON")  # Python would read NaN and Infinity


def _kind(document: dict, field: str) -> str:
    if field not in document or document[field] is None:
        return "absent"
    value = document[field]
    if isinstance(value, bool):  # before int: bool is an int in Python
        return "other"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (int, float)):
        return "number"
    return "other"


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm)."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def event_time_micros(text: str) -> int | None:
    """The instant an eventTime names, in microseconds since the epoch, or None when it names none."""
    match = EVENT_TIME.fullmatch(text)
    if not match:
        return None
    year, month, day = (int(match[name]) for name in ("year", "month", "day"))
    hour, minute, second = (int(match[name]) for name in ("hour", "minute", "second"))
    if not (1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)):
        return None
    if hour > 23 or minute > 59 or second > 59:
        return None
    offset_minutes = 0
    if not match["utc"]:
        offset_hours, offset_min = int(match["oh"]), int(match["om"])
        if offset_min > 59 or offset_hours * 60 + offset_min > 18 * 60:  # ISO offsets reach +-18:00
            return None
        offset_minutes = (offset_hours * 60 + offset_min) * (1 if match["sign"] == "+" else -1)
    fraction_micros = int((match["fraction"] or "0").ljust(9, "0")[:6])
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset_minutes * 60
    return seconds * 1_000_000 + fraction_micros


def _as_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def expected_reason(value: bytes | None, kafka_timestamp_micros: int, bounds: Bounds) -> str | None:
    """Why the record is invalid under the contract (first rule broken), or None when it is a valid event."""
    if value is None:
        return "null_value"
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return "not_utf8"
    try:
        # json.loads allows exactly JSON whitespace around one value and refuses anything after it.
        document = json.loads(text, object_pairs_hook=_no_repeated_keys, parse_constant=_no_constants)
    except (ValueError, RecursionError):
        return "not_json"
    if not isinstance(document, dict):
        return "not_object"
    kinds = {field: _kind(document, field) for field in ("eventId", "pageId", "eventTime", "userId", "eventType")}
    for field, missing, empty in (("eventId", "missing_event_id", "empty_event_id"),
                                  ("pageId", "missing_page_id", "empty_page_id")):
        if kinds[field] == "absent":
            return missing
        if kinds[field] == "string" and document[field].strip(JSON_WHITESPACE) == "":
            return empty
    if kinds["eventTime"] == "absent":
        return "missing_event_time"
    if (kinds["eventId"] not in ("string", "number") or kinds["pageId"] not in ("string", "number")
            or kinds["eventTime"] != "string" or kinds["userId"] == "other"
            or kinds["eventType"] not in ("absent", "string")):
        return "wrong_type"
    if len(_as_text(document["pageId"])) > 256:
        return "page_id_too_long"
    if kinds["eventType"] == "string" and len(document["eventType"]) > 64:
        return "event_type_too_long"
    instant = event_time_micros(document["eventTime"])
    if instant is None:
        return "bad_event_time"
    if instant < bounds.earliest_micros or instant - kafka_timestamp_micros > bounds.max_skew_micros:
        return "event_time_out_of_range"
    return None


def event_type(document: dict) -> str:
    """A valid event's type (CONTRACT.md, "Events"): as given, or `page_view` when absent, null or blank."""
    given = document.get("eventType")
    return given if isinstance(given, str) and given.strip(JSON_WHITESPACE) else "page_view"


def user_id(document: dict) -> str | None:
    """A valid event's userId (CONTRACT.md, "Events"): a string as given, a number as its JSON text, None when
    absent or null."""
    given = document.get("userId")
    return None if given is None else _as_text(given)


def highest_alert(count: int, threshold: int, real_time: bool) -> int | None:
    """The clickCount of the highest alert record the fast path writes for a window once it has counted
    `count` distinct eventIds (CONTRACT.md, "Alerts"); None when the window is not hot (count <= threshold).

    Micro-batch mode writes the window's count after each batch that raises it: the highest is the
    count. Real-time mode writes at the crossing (threshold + 1) and each doubling of it: the highest
    is the largest of threshold + 1, 2 x, 4 x, ... not above the count.
    """
    if count <= threshold:
        return None
    if not real_time:
        return count
    reached = threshold + 1
    while reached * 2 <= count:
        reached *= 2
    return reached


def alert_id(page_id: str, window_start: datetime | str) -> str:
    """An alert's id (CONTRACT.md, "Alerts"): the first 32 hex digits of SHA-256 of
    `<pageId>|<windowStart in epoch milliseconds>`; `window_start` an instant (naive: UTC) or its ISO text."""
    if isinstance(window_start, str):
        window_start = datetime.fromisoformat(window_start.replace("Z", "+00:00"))
    if window_start.tzinfo is None:
        window_start = window_start.replace(tzinfo=timezone.utc)
    millis = round(window_start.timestamp() * 1000)
    return hashlib.sha256(f"{page_id}|{millis}".encode()).hexdigest()[:32]
