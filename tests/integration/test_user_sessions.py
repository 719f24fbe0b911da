"""gold/user_sessions and gold/page_conversion on the real broker and real Delta tables: crafted events in,
the medallion's backfill (Trigger.AvailableNow, the sessions' state carried between two of them as a live
run carries it between batches), the tables held against tests/sessions_oracle.py's reading of the same
events. Threshold 1: a window of two distinct events is hot."""

from __future__ import annotations

from datetime import datetime

import json

import pytest

from analytical import pipeline
from analytical.gold_page_conversion import TABLE as PAGE_CONVERSION
from analytical.gold_user_sessions import TABLE as USER_SESSIONS
from tests.helpers import click, forget_the_batch_commit, lakehouse_here, send
from tests.sessions_oracle import Event, hot_windows, page_conversion_of, sessions, sessions_of

GAP_S, GAP_BY_TYPE_S = 30, {"purchase": 5}
SETTINGS = ("sessions.enabled=true", f"sessions.gap={GAP_S} seconds", "sessions.gap_by_event_type={purchase: 5 seconds}",
            "sessions.engaged_after=10 seconds", "sessions.engaged_page_views=2", "analytical.watermark=1 minute",
            "hot_pages.threshold=1")
#: The watermark the last event moves to: the sessions that ended before it are written.
FINAL_WATERMARK = datetime(2026, 11, 22, 10, 9)


def event(event_id: str, page: str, clock: str, user: str | None, kind: str | None = None) -> Event:
    return Event(event_id, page, datetime.fromisoformat(f"2026-11-22T{clock}"), user, kind or "page_view")


def value(sent: Event, typed: bool) -> bytes:
    fields = {"userId": sent.user_id} if sent.user_id is not None else {}
    if typed:
        fields["eventType"] = sent.event_type
    return click(sent.event_id, sent.page_id, sent.at.strftime("%H:%M:%S"), **fields)


FIRST = [
    event("v1", "/a", "10:00:00", "u1"),
    event("v2", "/b", "10:00:10", "u1", "add_to_cart"),
    event("v3", "/b", "10:00:20", "u1", "purchase"),
    event("n2", "/b", "10:00:12", None),  # with v2, the window of u1's first view of /b is hot
    event("w1", "/a", "10:00:05", "u2"),
    event("w2", "/c", "10:00:50", "u2"),  # 45 s after w1: a session of its own
    event("n1", "/a", "10:00:07", None, "purchase"),  # no userId: counted, not sessionized
    event("v1", "/a", "10:00:00", "u1"),  # a copy: counted once
    event("x1", "/d", "10:00:30", "u3"),
    event("z1", "/z", "10:01:30", "u9"),  # moves the watermark to 10:00:30: no session above has closed
]
SECOND = [
    event("x2", "/e", "10:00:55", "u3", "add_to_cart"),  # 35 s behind the newest: joins x1's open session
    event("w3", "/c", "10:01:00", "u2", "purchase"),  # within w2's 30 s
    event("z2", "/z", "10:10:00", "u9"),  # the watermark to 10:09:00: every session above closes, not this one
]


@pytest.mark.parametrize("rounds", [1, 2], ids=["one backfill", "two backfills, a session open between them"])
def test_the_sessions_are_the_oracles_in_one_backfill_or_two(spark, configured, rounds):
    lake = configured(*SETTINGS, topics=("clicks",))
    batches = [FIRST + SECOND] if rounds == 1 else [FIRST, SECOND]
    for sent in batches:
        send(lake, *(value(e, typed=e.event_type != "page_view" or e.event_id == "v1") for e in sent))
        runs = {run.name: run for run in pipeline.backfill(spark, lake, report=lambda line: None)}
        assert runs["gold_user_sessions"].rows > 0
    # A crash after the last batch's writes, before its commit: the batch runs again and adds nothing.
    forget_the_batch_commit(lake.checkpoint("gold_user_sessions"))
    pipeline.backfill(spark, lake, report=lambda line: None)

    written = [tuple(row) for row in USER_SESSIONS.at(lake.storage.root).read(spark).collect()]
    rows = set(written)
    assert len(written) == len(rows), "a session written twice"

    closed = {row for row in sessions_of(FIRST + SECOND, GAP_S, GAP_BY_TYPE_S, 10, 2) if row[2] <= FINAL_WATERMARK}
    assert rows == closed
    by_user = {row[0]: row for row in rows if row[0] in ("u1", "u3")}
    assert by_user["u1"][4] == 3 and by_user["u1"][10] == 1, "the copy of v1 counted once, the purchase converts"
    assert by_user["u3"][1:5] == (datetime(2026, 11, 22, 10, 0, 30), datetime(2026, 11, 22, 10, 1, 25),
                                  datetime(2026, 11, 22, 10, 0, 55), 2), "the late add-to-cart extended x1's session"
    assert len(rows) == 5 and "u9" in {row[0] for row in rows}

    conversion = {(row.pageId, row.hourStart, row.viewedWhileHot): (row.sessions, row.convertedSessions)
                  for row in PAGE_CONVERSION.at(lake.storage.root).read(spark).collect()}
    written = [(events, end) for events, end in sessions(FIRST + SECOND, GAP_S, GAP_BY_TYPE_S) if end <= FINAL_WATERMARK]
    assert conversion == page_conversion_of(written, hot_windows(FIRST + SECOND, threshold=1))
    ten = datetime(2026, 11, 22, 10)
    assert conversion[("/b", ten, True)] == (1, 1), "u1 viewed /b while hot (v2 and n2) and bought after"
    assert (conversion[("/a", ten, False)], conversion[("/a", ten, True)]) == ((1, 1), (1, 0)), \
        "u1 viewed /a before it was hot and bought; u2 viewed it while hot (w1 and n1) and did not"

    sessions_asked = ask(lake, "sessions")
    assert sessions_asked == [{"day": "2026-11-22T00:00:00.000Z", "sessions": len(closed),
                               "engagedSessions": sum(row[12] for row in closed),
                               "engagedShare": sum(row[12] for row in closed) / len(closed),
                               "convertedSessions": sum(row[11] for row in closed),
                               "conversionRate": sum(row[11] for row in closed) / len(closed),
                               "events": sum(row[4] for row in closed)}]
    per_page: dict[str, list[int]] = {}
    for (page, _, hot), (viewed, converted) in conversion.items():
        cell = per_page.setdefault(page, [0, 0, 0, 0])
        cell[0 if hot else 2] += viewed
        cell[1 if hot else 3] += converted
    expected = sorted(([page, *cell] for page, cell in per_page.items()), key=lambda r: (-r[1], -r[3], r[0]))
    asked = ask(lake, "conversion", "--limit", "50")
    assert [[row[key] for key in ("pageId", "hotSessions", "hotConverted", "otherSessions", "otherConverted")]
            for row in asked] == expected
    assert asked[0]["hotRate"] == expected[0][2] / expected[0][1]
    assert ask(lake, "conversion", "--limit", "50", "--engine", "spark") == asked, "both engines, row for row"
    assert ask(lake, "conversion", "--page", "/b") == [row for row in asked if row["pageId"] == "/b"]


def ask(lake, *question: str) -> list[dict]:
    done = lakehouse_here("query", *question, "--format", "json", "--set", f"storage.root={lake.storage.root}")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
