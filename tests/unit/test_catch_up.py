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


def test_after_a_catch_up_another_only_while_each_halves_the_backlog():
    limit = timedelta(seconds=10)
    assert needs_catch_up(timedelta(seconds=40), limit, left_by_last=timedelta(seconds=600))
    assert needs_catch_up(timedelta(seconds=19), limit, left_by_last=timedelta(seconds=40))
    assert not needs_catch_up(timedelta(seconds=20), limit, left_by_last=timedelta(seconds=40)), \
        "a catch-up that left half the backlog it started with is as long as the next would be"
    assert not needs_catch_up(timedelta(seconds=13), limit, left_by_last=timedelta(seconds=24)), \
        "on a slow machine each catch-up takes longer than the limit: the fast path still goes real-time"
    assert not needs_catch_up(timedelta(seconds=5), limit, left_by_last=timedelta(seconds=600))
