"""The fast path in Spark 4.3's real-time mode, on the real broker: crafted clicks in, alerts out.

Threshold 20: a window's first alert record is its 21st distinct eventId, later ones its 42nd, 84th,
... (CONTRACT.md, "Alerts"). The expected records are computed here from the clicks sent. A real-time
query never finishes a batch on its own, so the tests wait on the alerts topic and on the progress
reports each batch boundary writes.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta

from shared.query_progress import ProgressSummary
from tests.helpers import click, send, wait_for

from tests.contract_oracle import alert_id
from tests.realtime.conftest import THRESHOLD
from tests.topics import alert_records

DAY = "2026-11-22"


def clicks(page: str, first: int, count: int, second: str) -> list[bytes]:
    """`count` distinct clicks on `page` (eventIds page-first .. page-first+count-1) at 10:00:`second`."""
    return [click(f"{page}-{n}", page, f"10:{second}.000") for n in range(first, first + count)]


def window_start(second: str) -> str:
    moment = datetime.fromisoformat(f"{DAY}T10:{second}+00:00")
    return (moment - timedelta(seconds=moment.second % 5)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def alerted(records: list[dict], page: str) -> list[int]:
    return sorted(record["clickCount"] for record in records if record["pageId"] == page)


def wait_for_alert(config, page: str, what: str, timeout_s: float = 90) -> None:
    wait_for(lambda: alerted(alert_records(config), page), timeout_s, what, every_s=0.5)


def last_batch_ended(query) -> int:
    """The id of the newest batch that has reported its end (-1 before the first)."""
    return max((progress["batchId"] for progress in query.recentProgress), default=-1)


def batch_that_first_saw(query, event_time: str) -> int | None:
    """The first batch whose newest event time is `event_time` (a prefix of Spark's ISO text)."""
    return next((progress["batchId"] for progress in query.recentProgress
                 if ((progress.get("eventTime") or {}).get("max") or "").startswith(event_time)), None)


def test_every_hot_window_gets_its_crossing_record_and_one_per_doubling(real_time):
    config, query = real_time("5 seconds")
    # Hostile input first: one click dated year 9999 (out of range: it must not move the watermark,
    # which would drop every click below) and records that are not clicks. A batch boundary passes
    # after them, so the next batch's watermark is computed with them read.
    canary = json.dumps({"eventId": "canary", "pageId": "/hot", "eventTime": "9999-12-31T23:59:59Z"}).encode()
    send(config, canary, b"\xff", b"{}", None, click("t", "/hot", "10:00:01.000", day=DAY) + b" trailing")
    wait_for(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= 5, 120, "the hostile records read")

    sent = (clicks("/hot", 0, 90, "00:01") + clicks("/hot", 0, 10, "00:02")   # 90 distinct, 10 copies
            + clicks("/hot", 0, 5, "00:06")                                 # copies in the next window count there
            + clicks("/cross", 0, 21, "00:03") + clicks("/edge", 0, 20, "00:04"))
    send(config, *sent)
    distinct = Counter((page, window) for page, window, _ in {
        (json.loads(v)["pageId"], window_start(json.loads(v)["eventTime"][14:23]), json.loads(v)["eventId"])
        for v in sent})
    doublings = [(THRESHOLD + 1) * 2 ** k for k in range(10)]
    expected = sorted((page, window, count) for (page, window), total in distinct.items()
                      for count in doublings if count <= total)
    assert expected == sorted([("/hot", window_start("00:01"), 21), ("/hot", window_start("00:01"), 42),
                               ("/hot", window_start("00:01"), 84), ("/cross", window_start("00:03"), 21)])

    wait_for(lambda: len(alert_records(config)) >= len(expected), 90, "the expected alert records", every_s=0.5)
    send(config, *clicks("/sentinel", 0, 21, "00:04"))  # its record comes after every earlier one (one writer)
    wait_for_alert(config, "/sentinel", "the sentinel window's alert")
    records = [r for r in alert_records(config) if r["pageId"] != "/sentinel"]

    assert sorted((r["pageId"], r["windowStart"], r["clickCount"]) for r in records) == expected
    for record in records:
        start = datetime.fromisoformat(record["windowStart"].replace("Z", "+00:00"))
        assert record["key"] == record["alertId"] == alert_id(record["pageId"], start)
        assert record["threshold"] == THRESHOLD
        assert record["windowEnd"] == (start + timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    assert query.exception() is None


def test_the_watermark_moves_only_at_batch_boundaries(real_time):
    """Inside a real-time batch the watermark stays where the batch began. With dropDuplicates and a
    count, a batch drops as late what is at or before the watermark of the batch before it (as
    micro-batches do): a click is dropped only once two boundaries have passed since the newest event
    time that makes it late."""
    config, query = real_time("20 seconds", "operational.real_time.state_operator=drop-duplicates")
    send(config, click("base", "/base", "10:00:00.000", day=DAY))
    wait_for(lambda: batch_that_first_saw(query, f"{DAY}T10:00:00") is not None, 120,
             "a batch boundary after the first click")

    # /ahead moves the newest event time two minutes on, then /late's window (two minutes behind) still
    # takes its 21st click: in the batch that read /ahead, and in the next one too (see below), so
    # wherever a boundary falls in this step.
    send(config, *clicks("/late", 0, 20, "00:10"), *clicks("/ahead", 0, 21, "02:00"))
    wait_for_alert(config, "/ahead", "the /ahead window's alert", timeout_s=15)
    send(config, *clicks("/late", 20, 1, "00:11"))
    wait_for_alert(config, "/late", "the late click counted, at most one boundary after /ahead", timeout_s=15)

    # B, the batch that read /ahead, ends with the watermark 10:01:55; the batch after it drops late rows
    # by the watermark B began with (09:59:55): a new window two minutes behind still counts there.
    wait_for(lambda: batch_that_first_saw(query, f"{DAY}T10:02:00") is not None, 60,
             "the end of the batch that read /ahead")
    ahead_batch = batch_that_first_saw(query, f"{DAY}T10:02:00")
    assert last_batch_ended(query) == ahead_batch, "the batch after /ahead's ended before this step (20 s) began"
    send(config, *clicks("/one-boundary", 0, 21, "00:30"))
    wait_for_alert(config, "/one-boundary", "a window two minutes behind, one boundary on", timeout_s=15)

    # Any batch after that one drops such a window whole.
    wait_for(lambda: last_batch_ended(query) > ahead_batch, 60, "the end of the batch after /ahead's")
    send(config, *clicks("/two-boundaries", 0, 21, "00:40"), *clicks("/sentinel", 0, 21, "02:01"))
    wait_for_alert(config, "/sentinel", "the sentinel window's alert")

    assert alerted(alert_records(config), "/two-boundaries") == []
    assert alerted(alert_records(config), "/late") == [21]
    wait_for(lambda: last_batch_ended(query) > ahead_batch + 1, 60, "the end of the batch that dropped it")
    dropped = sum(op["numRowsDroppedByWatermark"] for op in query.recentProgress[-1]["stateOperators"])
    assert dropped >= 21


def test_the_one_processor_drops_a_click_once_a_batch_begins_with_the_watermark_past_its_window(real_time):
    """With the JVM processor (state_operator transform-with-state) the watermark also stays where the
    batch began, and a batch drops as late a click whose window ended at or before that watermark, its
    own: one boundary after the newest event time that makes it late, where dropDuplicates needs two."""
    config, query = real_time("20 seconds", "operational.real_time.state_operator=transform-with-state")
    send(config, click("base", "/base", "10:00:00.000", day=DAY))
    wait_for(lambda: batch_that_first_saw(query, f"{DAY}T10:00:00") is not None, 120,
             "a batch boundary after the first click")

    # Sent at once, just after a boundary, so read in one 20-s batch: /ahead moves the newest event time
    # two minutes on, and /late's window, two minutes behind, still takes its 21st click after it.
    send(config, *clicks("/late", 0, 20, "00:10"), *clicks("/ahead", 0, 21, "02:00"), *clicks("/late", 20, 1, "00:11"))
    wait_for_alert(config, "/ahead", "the /ahead window's alert", timeout_s=15)
    wait_for_alert(config, "/late", "the /late window's alert, from the same batch", timeout_s=15)

    # The batch after the one that read /ahead begins with the watermark 10:01:55 and drops a window
    # two minutes behind whole.
    wait_for(lambda: batch_that_first_saw(query, f"{DAY}T10:02:00") is not None, 60,
             "the end of the batch that read /ahead")
    send(config, *clicks("/one-boundary", 0, 21, "00:30"), *clicks("/sentinel", 0, 21, "02:01"))
    wait_for_alert(config, "/sentinel", "the sentinel window's alert")

    assert alerted(alert_records(config), "/one-boundary") == []
    assert alerted(alert_records(config), "/late") == [21]
    assert alerted(alert_records(config), "/ahead") == [21]
    # the processor's late clicks are reported as Spark reports its own operators' (late dropped)
    wait_for(lambda: batch_that_first_saw(query, f"{DAY}T10:02:01") is not None, 60,
             "the end of the batch that read the sentinel, and dropped /one-boundary")
    assert sum(ProgressSummary.of(progress).dropped_by_watermark for progress in query.recentProgress) == 21
    assert query.exception() is None
