"""An independent reading of CONTRACT.md's sessions (`gold/user_sessions`), in plain Python: from the valid
events a test sent, the rows the table must hold. It imports nothing from the code under test.

    rows = sessions_of(events, gap_s=30, gap_by_type_s={"purchase": 5}, engaged_after_s=10, engaged_page_views=2)
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Event:
    event_id: str
    page_id: str
    at: datetime  # naive UTC
    user_id: str | None
    event_type: str = "page_view"


def first_copies(events: list[Event]) -> list[Event]:
    """Each eventId once, its first copy in the order sent (silver keeps the first; the copies here are exact)."""
    seen: dict[str, Event] = {}
    for event in events:
        seen.setdefault(event.event_id, event)
    return list(seen.values())


def sessions_of(events: list[Event], gap_s: float, gap_by_type_s: dict[str, float], engaged_after_s: float,
                engaged_page_views: int) -> set[tuple]:
    """The table's rows, as tuples in its column order: userId, sessionStart, sessionEnd, lastEventTime,
    events, pages, landingPage, exitPage, pageViews, addToCarts, purchases, converted, engaged.

    A user's events in time order (ties by eventId) stay in one session while each comes at or before the
    session's end, the latest of its events' time plus that event's gap."""
    by_user: dict[str, list[Event]] = defaultdict(list)
    for event in first_copies(events):
        if event.user_id is not None:
            by_user[event.user_id].append(event)
    rows = set()
    for user, user_events in by_user.items():
        session: list[Event] = []
        end = None
        for event in sorted(user_events, key=lambda e: (e.at, e.event_id)):
            closes = event.at + timedelta(seconds=gap_by_type_s.get(event.event_type, gap_s))
            if session and event.at <= end:
                session.append(event)
                end = max(end, closes)
                continue
            if session:
                rows.add(_row(user, session, end, engaged_after_s, engaged_page_views))
            session, end = [event], closes
        rows.add(_row(user, session, end, engaged_after_s, engaged_page_views))
    return rows


def _row(user: str, session: list[Event], end: datetime, engaged_after_s: float, engaged_page_views: int) -> tuple:
    counts = {kind: sum(1 for e in session if e.event_type == kind) for kind in ("page_view", "add_to_cart", "purchase")}
    first, last = session[0], session[-1]
    engaged = ((last.at - first.at).total_seconds() > engaged_after_s or counts["page_view"] >= engaged_page_views
               or counts["purchase"] > 0)
    return (user, first.at, end, last.at, len(session), len({e.page_id for e in session}), first.page_id, last.page_id,
            counts["page_view"], counts["add_to_cart"], counts["purchase"], counts["purchase"] > 0, engaged)
