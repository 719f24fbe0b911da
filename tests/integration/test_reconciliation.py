"""The reconciliation suite: both paths on one topic, then hot-pages against gold.

Threshold 3 (four distinct clicks make a window hot). The fast path is the real hot-pages query,
driven batch by batch with processAllAvailable(); the medallion is the real AvailableNow backfill.
Event times are crafted; the time the fast path has seen is moved on with `advance`, which sends
one click to an unrelated page in each of two micro-batches, so that the second batch runs under
a watermark that already counts the first (Spark moves the watermark between batches).
"""

from __future__ import annotations

import json

import pytest

from analytical import pipeline
from analytical.reconciliation import CAUSES, reconcile
from analytical.gold_page_clicks_5s import TABLE as GOLD_PAGE_CLICKS_5S
from analytical.tables import read_table
from operational import hot_pages
from shared.alerts_topic import latest_alerts
from shared.kafka import producer_for
from tests.helpers import click, run_lakehouse, send


SETTINGS = ("hot_pages.threshold=3", "operational.starting_offsets=earliest")


@pytest.fixture
def both(configured):
    return configured(*SETTINGS)


@pytest.fixture
def fast_path(spark, both, start_query):
    """The running hot-pages query."""
    return start_query(hot_pages.start, spark, both)


def clicks(page: str, second: float, count: int, prefix: str = "") -> list[bytes]:
    """`count` distinct clicks on `page` from 10:00:`second`, one millisecond apart."""
    return [click(f"{prefix}{page}-{second}-{n}", page, _at(second, n)) for n in range(count)]


def _at(second: float, n: int) -> str:
    whole = int(second)
    millis = int(round((second - whole) * 1000)) + n
    return f"10:{whole // 60:02d}:{whole % 60:02d}.{millis:03d}"


def feed(config, query, *values: bytes) -> None:
    """Produce, then let the fast path process everything produced (one or more micro-batches)."""
    send(config, *values)
    query.processAllAvailable()


def advance(config, query, second: float) -> None:
    """Move the fast path's event time to 10:00:`second`, in two micro-batches (see the module doc)."""
    feed(config, query, click(f"tick-{second}-a", "/tick", _at(second, 0)))
    feed(config, query, click(f"tick-{second}-b", "/tick", _at(second, 1)))


def backfill(spark, config) -> None:
    pipeline.backfill(spark, config, report=lambda line: None)


def by_window(result) -> dict[tuple[str, str], dict]:
    return {(m["pageId"], m["windowStart"][11:19]): m for m in result["mismatches"]}


def test_clean_traffic_every_closed_hot_window_matches_and_counts_are_equal(spark, both, fast_path):
    feed(both, fast_path, *clicks("/p1", 1, 5), *clicks("/p2", 2, 4), *clicks("/cold", 3, 2),
         *clicks("/p1", 6, 6), *clicks("/p2", 7, 4))
    advance(both, fast_path, 30)
    backfill(spark, both)

    result = reconcile(spark, both)

    assert result["windowsCompared"] == 4 and result["matched"] == 4
    assert result["mismatches"] == [] and result["unexplained"] == 0 and result["consistent"] is True
    gold = {(row.pageId, row.windowStart.strftime("%H:%M:%S")): row.clickCount
            for row in read_table(spark, both.storage.root, GOLD_PAGE_CLICKS_5S).where("isHot").collect()}
    alerted = {(a.page_id, a.window_start[11:19]): a.click_count
               for a in latest_alerts(both.kafka, both.kafka.topics.alerts).latest.values()}
    assert alerted == gold == {("/p1", "10:00:00"): 5, ("/p2", "10:00:00"): 4,
                               ("/p1", "10:00:05"): 6, ("/p2", "10:00:05"): 4}


def test_events_later_than_the_fast_paths_watermark_are_attributed_to_lateness(spark, both, fast_path):
    feed(both, fast_path, *clicks("/p1", 1, 4), *clicks("/p2", 2, 3))
    advance(both, fast_path, 30)
    feed(both, fast_path, *clicks("/p1", 1.5, 2, prefix="late-"), *clicks("/p2", 2.5, 1, prefix="late-"))
    advance(both, fast_path, 60)
    backfill(spark, both)

    result = reconcile(spark, both)

    mismatches = by_window(result)
    alerted = mismatches[("/p1", "10:00:00")]
    assert (alerted["operationalCount"], alerted["goldCount"], alerted["cause"], alerted["records"]) == (
        4, 6, "late_beyond_operational_watermark", {"late_beyond_operational_watermark": 2})
    no_alert = mismatches[("/p2", "10:00:00")]  # 3 on the fast path (not hot), 4 in gold (hot)
    assert (no_alert["operationalCount"], no_alert["goldCount"], no_alert["cause"]) == (
        None, 4, "late_beyond_operational_watermark")
    assert result["unexplained"] == 0 and result["consistent"] is True
    assert result["byCause"] == {"late_beyond_operational_watermark": 2}


def test_a_copy_beyond_the_fast_paths_dedup_horizon_is_attributed_to_duplication(spark, both, fast_path):
    # e-retry first at 10:00:01, then re-sent by a client that stamped it 10:00:32: silver keeps the
    # first copy (same eventId within analytical.watermark); the fast path forgot the id long before.
    feed(both, fast_path, click("e-retry", "/p1", _at(1, 0)), *clicks("/p1", 2, 3))
    advance(both, fast_path, 30)
    feed(both, fast_path, click("e-retry", "/p1", _at(32, 0)), *clicks("/p1", 33, 3))
    advance(both, fast_path, 60)
    backfill(spark, both)

    result = reconcile(spark, both)

    mismatch = by_window(result)[("/p1", "10:00:30")]
    assert (mismatch["operationalCount"], mismatch["goldCount"], mismatch["cause"]) == (
        4, 3, "duplicate_beyond_operational_dedup_horizon")
    assert result["matched"] == 1  # 10:00:00, four clicks in both paths
    assert result["unexplained"] == 0 and result["consistent"] is True


def test_data_the_fast_path_has_not_read_is_pending_or_not_processed_never_a_failure(spark, both, fast_path):
    feed(both, fast_path, *clicks("/p1", 1, 4))
    advance(both, fast_path, 30)
    fast_path.stop()
    send(both, *clicks("/p1", 2.5, 1, prefix="after-stop-"),  # a window the fast path had closed
         *clicks("/p1", 41, 5), *clicks("/p2", 46, 5), click("tick-end", "/tick", _at(90, 0)))
    backfill(spark, both)

    result = reconcile(spark, both)

    mismatch = by_window(result)[("/p1", "10:00:00")]
    assert (mismatch["operationalCount"], mismatch["goldCount"], mismatch["cause"]) == (
        4, 5, "not_processed_by_operational")
    assert result["pending"] == 2  # 10:00:40 and 10:00:45: hot in gold, still open in the fast path
    assert result["unexplained"] == 0 and result["consistent"] is True


def test_a_forged_alert_is_unexplained_and_reconcile_exits_1(spark, both, config_overrides, fast_path):
    feed(both, fast_path, *clicks("/p1", 1, 4))
    advance(both, fast_path, 30)
    backfill(spark, both)
    producer = producer_for(both.kafka)
    forged = {"alertId": "f" * 32, "pageId": "/ghost", "windowStart": "2026-11-22T10:00:05.000Z",
              "windowEnd": "2026-11-22T10:00:10.000Z", "clickCount": 9999, "threshold": 3,
              "emittedAt": "2026-11-22T10:00:06.000Z"}
    producer.send(both.kafka.topics.alerts, key=b"f" * 32, value=json.dumps(forged).encode())
    producer.send(both.kafka.topics.alerts, key=b"junk", value=b"this is not an alert")
    producer.flush()
    producer.close()

    run = run_lakehouse("reconcile", "--format", "json", *(f"--set={item}" for item in (*config_overrides, *SETTINGS)))

    assert run.returncode == 1, run.stderr
    result = json.loads(run.stdout)
    assert [(m["pageId"], m["operationalCount"], m["goldCount"], m["cause"]) for m in result["mismatches"]] == [
        ("/ghost", 9999, 0, "unexplained")]
    assert result["unexplained"] == 1 and result["consistent"] is False and result["matched"] == 1
    assert result["invalidAlertRecords"] == 1 and result["invalidAlerts"][0]["why"].startswith("not JSON")
    assert "not valid alerts" in run.stderr


def test_every_cause_is_documented_in_the_contract():
    from shared import PROJECT_ROOT

    contract = (PROJECT_ROOT / "CONTRACT.md").read_text()
    assert [cause for cause in CAUSES if f"`{cause}`" not in contract] == []


def test_a_window_the_stopped_fast_path_has_not_read_is_pending_with_what_closes_it_until_it_has(
        spark, both, fast_path, start_query):
    feed(both, fast_path, *clicks("/p1", 1, 5))  # hot and alerted; no click has closed its window
    fast_path.stop()
    send(both, *clicks("/p2", 2, 4))  # hot in gold; the stopped fast path has not read it
    backfill(spark, both)

    result = reconcile(spark, both)

    pending = {(window["pageId"], window["windowStart"][11:19]): window for window in result["pendingWindows"]}
    assert set(pending) == {("/p1", "10:00:00"), ("/p2", "10:00:00")}, json.dumps(result, indent=1)
    assert (result["windowsCompared"], result["pending"], result["unexplained"]) == (0, 2, 0)
    for window in pending.values():
        assert window["openIn"] == ["fast path"], "gold has read every click and the medallion is stopped"
        assert "stopped with 4 clicks" in window["why"]["fast path"] and "start it" in window["why"]["fast path"]

    restarted = start_query(hot_pages.start, spark, both)  # what the reason says to do: it reads the 4 clicks
    restarted.processAllAvailable()
    restarted.stop()
    result = reconcile(spark, both)

    assert (result["windowsCompared"], result["matched"], result["pending"], result["unexplained"]) == (2, 2, 0, 0), \
        json.dumps(result, indent=1)
