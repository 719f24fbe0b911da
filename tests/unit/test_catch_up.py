"""When a real-time start reads its backlog in a micro-batch first (operational.catch_up)."""

from datetime import timedelta

from operational.catch_up import backlog_age, needs_catch_up


def test_the_backlog_is_as_old_as_its_oldest_unread_click_and_none_is_no_backlog():
    assert backlog_age(1_000, 31_000) == timedelta(seconds=30)
    assert backlog_age(None, 31_000) == timedelta(0)
    assert backlog_age(40_000, 31_000) == timedelta(0), "a click stamped ahead of the clock is no backlog"


def test_only_a_backlog_older_than_catch_up_after_is_read_in_a_micro_batch_first():
    assert needs_catch_up(timedelta(seconds=10.001), timedelta(seconds=10))
    assert not needs_catch_up(timedelta(seconds=10), timedelta(seconds=10))
    assert not needs_catch_up(timedelta(0), timedelta(0))
