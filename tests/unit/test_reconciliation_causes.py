"""The reconciliation's choice of cause for a window's difference, on hand-made ledger rows."""

from __future__ import annotations

from pyspark.sql import Row

from analytical.reconciliation import UNEXPLAINED, _explain


def window(**counts) -> Row:
    base = dict(pageId="/p", windowStartText="2026-11-22T10:00:00.000Z", operationalCount=None, goldCount=0,
                alertThreshold=None, silverCount=0, matchedCount=0, derivedCount=0, maybeLateCount=0,
                notInSilver=0, missing_dup=0, missing_maybe_late=0, missing_late=0, missing_unprocessed=0)
    return Row(**{**base, **counts})


def test_a_difference_gets_the_cause_with_the_most_records():
    # gold 6 = silver 6; the fast path counted 4 of them, the other 2 reached it late.
    row = window(operationalCount=4, alertThreshold=3, goldCount=6, silverCount=6, matchedCount=4, derivedCount=4,
                 missing_late=2, missing_unprocessed=0)
    assert _explain(row, 3)["cause"] == "late_beyond_operational_watermark"
    tied = window(operationalCount=4, alertThreshold=3, goldCount=6, silverCount=6, matchedCount=4, derivedCount=4,
                  missing_late=1, missing_unprocessed=1)
    assert _explain(tied, 3)["cause"] == "late_beyond_operational_watermark"  # ties: the documented order
    extra = window(operationalCount=4, alertThreshold=3, goldCount=3, silverCount=3, matchedCount=3, derivedCount=4)
    assert _explain(extra, 3)["cause"] == "duplicate_beyond_operational_dedup_horizon"


def test_a_count_the_data_does_not_reproduce_is_unexplained():
    forged = window(operationalCount=9999, alertThreshold=3)
    assert _explain(forged, 3)["cause"] == UNEXPLAINED
    # gold hot without an alert, but the fast path's derived count was over the threshold: an alert was lost
    lost = window(goldCount=5, silverCount=5, matchedCount=5, derivedCount=5)
    assert _explain(lost, 3)["cause"] == UNEXPLAINED
    # a late event in the window, but the alert does not match the derived count either
    wrong = window(operationalCount=7, alertThreshold=3, goldCount=6, silverCount=6, matchedCount=5, derivedCount=5,
                   missing_late=1)
    assert _explain(wrong, 3)["cause"] == UNEXPLAINED
    assert _explain(window(operationalCount=5, alertThreshold=3, goldCount=6, silverCount=6, matchedCount=5,
                           derivedCount=5, missing_late=1), 3)["cause"] == "late_beyond_operational_watermark"


def test_in_real_time_mode_the_alerted_count_is_the_largest_doubling_reached():
    from functools import partial

    from shared.rule import alerted_count

    reported = partial(alerted_count, threshold=3)  # records at 4, 8, 16, ...
    # the fast path derived 13 (as gold, less 2 late clicks): its highest record carries 8
    late = window(operationalCount=8, alertThreshold=3, goldCount=15, silverCount=15, matchedCount=13,
                  derivedCount=13, missing_late=2)
    assert _explain(late, 3, reported)["cause"] == "late_beyond_operational_watermark"
    # 9 is no doubling of 4: no real-time record can carry it
    forged = window(operationalCount=9, alertThreshold=3, goldCount=15, silverCount=15, matchedCount=13,
                    derivedCount=13, missing_late=2)
    assert _explain(forged, 3, reported)["cause"] == UNEXPLAINED
