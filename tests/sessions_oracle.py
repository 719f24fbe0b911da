"""An independent reading of CONTRACT.md's sessions (`gold/user_sessions`), in plain Python: from the valid
events a test sent, the rows the table must hold. It imports nothing from the code under test.

    rows = sessions_of(events, gap_s=30, gap_by_type_s={"purchase": 5}, engaged_after_s=10, engaged_page_views=2)
    cells = page_conversion_of(sessions(events, 30, {"purchase": 5}), hot_windows(events, threshold=1))
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone


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


def sessions(events: list[Event], gap_s: float, gap_by_type_s: dict[str, float]) -> list[tuple[list[Event], datetime]]:
    """Each session's events and end. A user's events in time order (ties by eventId) stay in one session
    while each comes at or before the session's end, the latest of its events' time plus that event's gap."""
    by_user: dict[str, list[Event]] = defaultdict(list)
    for event in first_copies(events):
        if event.user_id is not None:
            by_user[event.user_id].append(event)
    found = []
    for user_events in by_user.values():
        session: list[Event] = []
        end = None
        for event in sorted(user_events, key=lambda e: (e.at, e.event_id)):
            closes = event.at + timedelta(seconds=gap_by_type_s.get(event.event_type, gap_s))
            if session and event.at <= end:
                session.append(event)
                end = max(end, closes)
                continue
            if session:
                found.append((session, end))
            session, end = [event], closes
        found.append((session, end))
    return found


def sessions_of(events: list[Event], gap_s: float, gap_by_type_s: dict[str, float], engaged_after_s: float,
                engaged_page_views: int) -> set[tuple]:
    """gold/user_sessions' rows, as tuples in its column order: userId, sessionStart, sessionEnd,
    lastEventTime, events, pages, landingPage, exitPage, pageViews, addToCarts, purchases, converted, engaged."""
    return {_row(session[0].user_id, session, end, engaged_after_s, engaged_page_views)
            for session, end in sessions(events, gap_s, gap_by_type_s)}


def hot_windows(events: list[Event], threshold: int, window_s: int = 5) -> set[tuple[str, datetime]]:
    """(pageId, windowStart) of the windows with more than `threshold` distinct events, any user or none."""
    counts: dict[tuple[str, datetime], int] = defaultdict(int)
    for event in first_copies(events):
        epoch = int(event.at.replace(tzinfo=timezone.utc).timestamp())
        counts[(event.page_id, datetime.fromtimestamp(epoch - epoch % window_s, timezone.utc).replace(tzinfo=None))] += 1
    return {window for window, count in counts.items() if count > threshold}


def page_conversion_of(closed: list[tuple[list[Event], datetime]], hot: set[tuple[str, datetime]],
                       window_s: int = 5) -> dict[tuple[str, datetime, bool], tuple[int, int]]:
    """gold/page_conversion: (pageId, hourStart, viewedWhileHot) -> (sessions, convertedSessions). A session
    counts for each page it has an event on, at its first such event: that event's hour, whether its window
    is hot, and whether a purchase of the session came at or after it."""
    cells: dict[tuple[str, datetime, bool], list[int]] = defaultdict(lambda: [0, 0])
    for session, _ in closed:
        purchases = [e.at for e in session if e.event_type == "purchase"]
        first: dict[str, datetime] = {}
        for event in session:
            first[event.page_id] = min(first.get(event.page_id, event.at), event.at)
        for page, at in first.items():
            epoch = int(at.replace(tzinfo=timezone.utc).timestamp())
            window = datetime.fromtimestamp(epoch - epoch % window_s, timezone.utc).replace(tzinfo=None)
            cell = cells[(page, at.replace(minute=0, second=0, microsecond=0), (page, window) in hot)]
            cell[0] += 1
            cell[1] += any(purchase >= at for purchase in purchases)
    return {key: (viewed, converted) for key, (viewed, converted) in cells.items()}


def _row(user: str, session: list[Event], end: datetime, engaged_after_s: float, engaged_page_views: int) -> tuple:
    counts = {kind: sum(1 for e in session if e.event_type == kind) for kind in ("page_view", "add_to_cart", "purchase")}
    first, last = session[0], session[-1]
    engaged = ((last.at - first.at).total_seconds() > engaged_after_s or counts["page_view"] >= engaged_page_views
               or counts["purchase"] > 0)
    return (user, first.at, end, last.at, len(session), len({e.page_id for e in session}), first.page_id, last.page_id,
            counts["page_view"], counts["add_to_cart"], counts["purchase"], counts["purchase"] > 0, engaged)
