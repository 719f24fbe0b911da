"""gold/user_sessions' transform on hand-made events: sessions split at exactly their gap, per event type,
and every figure of a session written out by hand from the events below."""

from __future__ import annotations

from datetime import datetime

from chispa import assert_df_equality

from analytical.gold_user_sessions import TABLE, known_users, user_sessions
from tests.conftest import make_config

SESSIONS = make_config("sessions.gap=30 seconds", "sessions.gap_by_event_type={purchase: 5 seconds, add_to_cart: 20 seconds}",
                       "sessions.engaged_after=10 seconds", "sessions.engaged_page_views=2").sessions


def at(clock: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-22T{clock}")


EVENTS = [  # eventId, pageId, eventTime, userId, eventType
    # u1: a view, an add-to-cart 20 s later (within the view's 30 s), a purchase 15 s later (within the
    # add-to-cart's 20 s), whose 5 s end at 10:00:40; a view at exactly 10:00:40 still joins (Spark's
    # session window: an event at the session's end extends it) and extends it to 10:01:10; a view 1 ms
    # after that starts the next session.
    ("e1", "/a", at("10:00:00"), "u1", "page_view"),
    ("e2", "/b", at("10:00:20"), "u1", "add_to_cart"),
    ("e3", "/b", at("10:00:35"), "u1", "purchase"),
    ("e4", "/c", at("10:00:40"), "u1", "page_view"),
    ("e13", "/d", at("10:01:10.001"), "u1", "page_view"),
    # u2: views 29.999 s apart, then a type of its own (the default gap): one session, two page views
    ("e5", "/x", at("10:00:00"), "u2", "page_view"),
    ("e6", "/y", at("10:00:29.999"), "u2", "page_view"),
    ("e7", "/x", at("10:00:45"), "u2", "wishlist"),
    # u3: a silver row from before eventType (null: a page view), an add-to-cart 11 s later: engaged by time
    ("e8", "/z", at("10:05:00"), "u3", None),
    ("e9", "/z", at("10:05:11"), "u3", "add_to_cart"),
    # u4: two views at the same instant: landing and exit told apart by eventId
    ("e11", "/n", at("10:07:00"), "u4", "page_view"),
    ("e10", "/m", at("10:07:00"), "u4", "page_view"),
    # no userId: not sessionized
    ("e12", "/a", at("10:00:01"), None, "purchase"),
]

EXPECTED = [
    ("u1", at("10:00:00"), at("10:01:10"), at("10:00:40"), 4, 3, "/a", "/c", 2, 1, 1, True, True),
    ("u1", at("10:01:10.001"), at("10:01:40.001"), at("10:01:10.001"), 1, 1, "/d", "/d", 1, 0, 0, False, False),
    ("u2", at("10:00:00"), at("10:01:15"), at("10:00:45"), 3, 2, "/x", "/x", 2, 0, 0, False, True),
    ("u3", at("10:05:00"), at("10:05:31"), at("10:05:11"), 2, 1, "/z", "/z", 1, 1, 0, False, True),
    ("u4", at("10:07:00"), at("10:07:30"), at("10:07:00"), 2, 2, "/m", "/n", 2, 0, 0, False, True),
]


def test_sessions_split_at_each_events_gap_and_carry_every_figure(spark):
    events = spark.createDataFrame(EVENTS, "eventId string, pageId string, eventTime timestamp, userId string, "
                                           "eventType string")
    expected = spark.createDataFrame(EXPECTED, TABLE.schema)

    actual = events.transform(known_users).transform(user_sessions, SESSIONS)

    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def test_a_session_is_one_view_short_of_engaged_until_its_second_view_or_its_eleventh_second(spark):
    events = spark.createDataFrame([("v1", "/a", at("11:00:00"), "u", "page_view"),
                                    ("v2", "/a", at("11:00:10"), "u", "add_to_cart")],  # 10 s: not longer than 10
                                   "eventId string, pageId string, eventTime timestamp, userId string, eventType string")

    [session] = events.transform(user_sessions, SESSIONS).collect()

    assert (session.pageViews, session.engaged) == (1, False)
