"""A small lake for `lakehouse forget`'s tests: one user's records of every kind (events, a copy, a record that
is not JSON, one that breaks the contract, a session left open), everybody else's beside them, and what the
lake must hold once that user is erased, computed here from the records themselves."""

from __future__ import annotations

import json

from analytical.bronze_clicks import TABLE as BRONZE
from analytical.gold_page_clicks_5s import TABLE as GOLD_5S
from analytical.gold_page_clicks_hourly import TABLE as GOLD_HOURLY
from analytical.gold_page_conversion import TABLE as PAGE_CONVERSION
from analytical.gold_user_sessions import TABLE as USER_SESSIONS
from analytical.silver_clicks import QUARANTINE, TABLE as SILVER
from tests.helpers import click

FORGOTTEN = "u-forget-7"  # nothing else sent holds this text, so any trace of it in a file is the user's
SETTINGS = ("sessions.enabled=true", "sessions.gap=30 seconds", "analytical.watermark=1 minute", "hot_pages.threshold=1")

#: The user's records: two events, a copy of one, a record that is not JSON and one that breaks the contract.
THEIRS = [
    click("f1", "/a", "10:00:00", userId=FORGOTTEN),
    click("f2", "/b", "10:00:10", userId=FORGOTTEN, eventType="purchase"),
    click("f1", "/a", "10:00:00", userId=FORGOTTEN),
    b'{"eventId":"f3","userId":"' + FORGOTTEN.encode() + b'","pageId":"/a","eventTi',
    json.dumps({"eventId": "f4", "pageId": "/b", "eventTime": 7, "userId": FORGOTTEN}).encode(),
    click("f5", "/c", "10:04:50", userId=FORGOTTEN),  # a session still open in the state at the erasure
]
#: Everybody else's: users on the same pages and windows, anonymous clicks, a broken record of another user.
OTHERS = [
    click("o1", "/a", "10:00:01", userId="u1"),
    click("o2", "/b", "10:00:12", userId="u1", eventType="add_to_cart"),
    click("o3", "/a", "10:00:02"),
    click("o4", "/c", "10:00:40", userId="u2"),
    b'{"eventId":"o5","userId":"u2","pageId":"/c"',
    click("o6", "/z", "10:05:00", userId="u9"),  # moves the watermark past every session above
]


def every_row(spark, root: str) -> dict[str, set]:
    """Each table's rows, as tuples (the Delta table's columns in order; maps and arrays made hashable)."""
    def hashable(value):
        if isinstance(value, dict):
            return tuple(sorted(value.items()))
        return tuple(hashable(item) for item in value) if isinstance(value, list) else value
    tables = (BRONZE, SILVER, QUARANTINE, GOLD_5S, GOLD_HOURLY, USER_SESSIONS, PAGE_CONVERSION)
    return {table.name: {tuple(hashable(v) for v in row) for row in table.at(root).read(spark).collect()}
            for table in tables}

#: What forget removes of THEIRS, per table, once its sessions up to the watermark are written.
REMOVED = {"bronze/clicks": 6, "silver/clicks": 3, "silver/quarantine": 2, "gold/user_sessions": 1}


def without_the_user(before: dict[str, set]) -> dict[str, set]:
    """`every_row` of the lake before the erasure, less the rows of FORGOTTEN: bronze's and the quarantine's
    by the records' bytes as sent, silver's and the sessions' by userId; gold's as they were."""
    theirs = set(THEIRS)
    return {
        **before,
        BRONZE.name: {row for row in before[BRONZE.name] if row[1] not in theirs},
        SILVER.name: {row for row in before[SILVER.name] if row[3] != FORGOTTEN},
        QUARANTINE.name: {row for row in before[QUARANTINE.name] if row[1] not in theirs},
        USER_SESSIONS.name: {row for row in before[USER_SESSIONS.name] if row[0] != FORGOTTEN},
    }
