"""The reconciliation suite: both paths on one topic, then hot-pages against gold.

Threshold 3 (four distinct clicks make a window hot). The fast path is the real hot-pages query,
driven batch by batch with processAllAvailable(); the medallion is the real AvailableNow backfill.
Event times are crafted; the time the fast path has seen is moved on with `advance`, which sends
one click to an unrelated page in each of two micro-batches, so that the second batch runs under
a watermark that already counts the first (Spark moves the watermark between batches).
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone

import pytest

from analytical import pipeline
from analytical.reconciliation import CAUSES, reconcile
from analytical.gold_page_clicks_5s import TABLE as GOLD_PAGE_CLICKS_5S
from operational import hot_pages
from shared.alerts_topic import latest_alerts
from shared.kafka import producer_for
from tests.helpers import ahead_of_the_clock, click, lakehouse_here, run_lakehouse, send


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
            for row in GOLD_PAGE_CLICKS_5S.at(both.storage.root).read(spark).where("isHot").collect()}
    alerted = {(a.page_id, a.window_start[11:19]): a.click_count
               for a in latest_alerts(both.kafka, both.kafka.topics.alerts).latest.values()}
    assert alerted == gold == {("/p1", "10:00:00"): 5, ("/p2", "10:00:00"): 4,
                               ("/p1", "10:00:05"): 6, ("/p2", "10:00:05"): 4}


def test_events_later_than_the_fast_paths_watermark_are_attributed_to_lateness(spark, both, fast_path,
                                                                                   config_overrides):
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

    # The same from the command line, one row per difference in CSV; and limited to a range.
    options = [f"--set={item}" for item in (*config_overrides, *SETTINGS)]
    as_csv = lakehouse_here("reconcile", "--format", "csv", *options)
    assert as_csv.returncode == 0, as_csv.stderr
    assert sorted((row["pageId"], row["windowStart"], row["operationalCount"], row["goldCount"], row["cause"])
                  for row in csv.DictReader(io.StringIO(as_csv.stdout))) == [
        ("/p1", "2026-11-22T10:00:00.000Z", "4", "6", "late_beyond_operational_watermark"),
        ("/p2", "2026-11-22T10:00:00.000Z", "", "4", "late_beyond_operational_watermark")]
    after_them = reconcile(spark, both, start=datetime(2026, 11, 22, 10, 0, 5, tzinfo=timezone.utc),
                           end=datetime(2026, 11, 22, 11, tzinfo=timezone.utc))
    assert (after_them["mismatches"], after_them["windowsCompared"]) == ([], 0)
    within = reconcile(spark, both, start=datetime(2026, 11, 22, 10, 0, tzinfo=timezone.utc),
                       end=datetime(2026, 11, 22, 10, 0, 5, tzinfo=timezone.utc))
    assert sorted(by_window(within)) == [("/p1", "10:00:00"), ("/p2", "10:00:00")]


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


def test_events_silver_set_aside_are_attributed_to_the_medallion_not_processing_them(spark, configured, start_query):
    """Four clicks from a producer whose clock runs 30 minutes ahead, on a CreateTime topic: within the
    skew of their Kafka timestamp, so the fast path counts them, but not of their ingest time, so
    silver quarantines them (tests allow 1 minute of skew) and gold never sees them."""
    settings = configured(*SETTINGS, "quality.max_clock_skew=1 minute")
    ahead = [ahead_of_the_clock(f"ahead-{n}", "/ahead") for n in range(4)]
    for value, timestamp_ms in ahead:
        send(settings, value, timestamp_ms=timestamp_ms)
    fast_path = start_query(hot_pages.start, spark, settings)
    fast_path.processAllAvailable()
    fast_path.stop()  # stopped, and it has read every click: the windows are closed in both paths
    backfill(spark, settings)

    result = reconcile(spark, settings)

    (mismatch,) = [m for m in result["mismatches"] if m["pageId"] == "/ahead"]
    assert (mismatch["operationalCount"], mismatch["goldCount"], mismatch["cause"], mismatch["records"]) == (
        4, 0, "not_processed_by_analytical", {"not_processed_by_analytical": 4})
    assert result["unexplained"] == 0


def test_events_gold_dropped_as_late_are_attributed_to_the_analytical_watermark(spark, configured, start_query):
    """Gold's watermark (analytical.watermark, 10 minutes) has passed 10:00 when a fifth click for
    10:00:00 reaches the medallion: silver keeps it, gold drops it. The fast path starts only then and
    reads every click in one batch, so it counts all five."""
    settings = configured(*SETTINGS)
    send(settings, *clicks("/p1", 1, 4), click("tick", "/tick", "10:30:00.000"))
    backfill(spark, settings)
    send(settings, click("late", "/p1", _at(2, 500)))
    backfill(spark, settings)
    fast_path = start_query(hot_pages.start, spark, settings)
    fast_path.processAllAvailable()
    fast_path.stop()

    result = reconcile(spark, settings)

    mismatch = by_window(result)[("/p1", "10:00:00")]
    assert (mismatch["operationalCount"], mismatch["goldCount"], mismatch["cause"], mismatch["records"]) == (
        5, 4, "late_beyond_analytical_watermark", {"late_beyond_analytical_watermark": 1})
    assert result["unexplained"] == 0


def test_windows_read_in_batches_whose_log_is_purged_are_counted_outside_history(spark, configured, start_query):
    """With two batches retained (operational.batches_to_retain), the fast path's first batches leave
    its checkpoint: what they read can no longer be placed, so their windows are neither matched nor
    mismatched but outsideHistory."""
    both = configured(*SETTINGS, "operational.batches_to_retain=2")
    fast_path = start_query(hot_pages.start, spark, both)
    feed(both, fast_path, *clicks("/early", 1, 4))  # batch 0
    for second in (30, 60, 90):
        advance(both, fast_path, second)  # two batches each
    feed(both, fast_path, *clicks("/late", 91, 4))  # the last batch, retained
    fast_path.stop()  # stopped, and it has read every click: the windows are closed in both paths
    backfill(spark, both)

    result = reconcile(spark, both)

    assert result["operational"]["firstBatch"] > 0, "the checkpoint still holds batch 0"
    assert result["outsideHistory"] >= 1
    assert [key for key in by_window(result) if key[0] == "/early"] == []
    assert result["matched"] >= 1 and result["unexplained"] == 0

