"""Durations as the configuration writes them ('5 seconds', '500 ms', '10 minutes') and as Spark
reads them ('5 seconds', '250 milliseconds'): pure functions, no dependency, so that the rule can
format its windows without the configuration's loader.

    >>> spark_interval(parse_duration("1.5s"))
    '1500 milliseconds'
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]+)\s*$")
_UNIT_SECONDS = {
    **dict.fromkeys(("ms", "millisecond", "milliseconds"), 0.001),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hour", "hours"), 3600),
}


def parse_duration(value: Any) -> timedelta:
    """'5 seconds', '5s', '500 ms', '10 minutes', '1h' -> timedelta (whole milliseconds)."""
    if isinstance(value, timedelta):
        return value
    match = _DURATION.match(str(value).lower())
    if not match or match.group(2) not in _UNIT_SECONDS:
        raise ValueError(f"expected a duration such as '5 seconds', '500 ms' or '10 minutes', got {value!r}")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    millis = round(seconds * 1000)
    if abs(millis - seconds * 1000) > 1e-6:
        raise ValueError(f"durations are whole milliseconds, got {value!r}")
    return timedelta(milliseconds=millis)


def spark_interval(duration: timedelta) -> str:
    """A duration as Spark's interval string ('5 seconds', '10 minutes', '250 milliseconds')."""
    millis = round(duration.total_seconds() * 1000)
    if millis == 0:
        return "0 seconds"
    if millis % 60_000 == 0:
        return f"{millis // 60_000} minutes"
    if millis % 1000 == 0:
        return f"{millis // 1000} seconds"
    return f"{millis} milliseconds"
