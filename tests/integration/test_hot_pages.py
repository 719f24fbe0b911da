"""The fast path on the real broker: crafted clicks at explicit event times in, alerts out.

Threshold 3 here, so a window of exactly 3 distinct clicks is not hot and a 4th makes it hot.
Each test drives the real query with processAllAvailable() and reads the alerts topic back.
"""

import json
import re
from datetime import datetime
from pathlib import Path

import pytest

from operational import hot_pages
from shared.alerts import ALERTING_QUERY
from shared.alerts_topic import latest_alerts
from shared.query_progress import progress_dict
from tests.contract_oracle import alert_id
from tests.helpers import click, send
from tests.topics import alert_records, read_to_end


ISO_MILLIS_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


@pytest.fixture
def fast_config(configured):
    return configured("hot_pages.threshold=3", "operational.starting_offsets=earliest")


@pytest.fixture
def run_fast_path(spark, fast_config, start_query):
    """Start the query (again, after a stop) on this test's topics and checkpoint."""
    return lambda: start_query(hot_pages.start, spark, fast_config)


def alerts(config) -> dict:
    book = latest_alerts(config.kafka, config.kafka.topics.alerts)
    assert book.invalid == []
    return {(a.page_id, a.window_start): a for a in book.latest.values()}


def test_threshold_is_strict_and_the_alert_carries_window_count_and_id(fast_config, run_fast_path):
    query = run_fast_path()
    send(fast_config, *(click(f"e{n}", "/p", f"10:00:0{n}.500") for n in range(1, 4)))
    query.processAllAvailable()
    assert alerts(fast_config) == {}

    send(fast_config, click("e4", "/p", "10:00:04.999"), click("other", "/p", "10:00:05.000"))
    query.processAllAvailable()

    found = alerts(fast_config)
    assert list(found) == [("/p", "2026-11-22T10:00:00.000Z")]
    alert = found[("/p", "2026-11-22T10:00:00.000Z")]
    assert alert.click_count == 4 and alert.threshold == 3
    assert alert.window_end == "2026-11-22T10:00:05.000Z"
    assert alert.alert_id == alert_id("/p", datetime(2026, 11, 22, 10, 0, 0))


def test_the_alert_record_is_exactly_the_contract(fast_config, run_fast_path):
    query = run_fast_path()
    send(fast_config, *(click(f"e{n}", "/contract", f"10:00:1{n}") for n in range(4)))
    query.processAllAvailable()

    records = read_to_end(fast_config.kafka, fast_config.kafka.topics.alerts)
    assert len(records) == 1
    value = json.loads(records[0].value)
    assert list(value) == ["alertId", "pageId", "windowStart", "windowEnd", "clickCount", "threshold", "emittedAt"]
    assert records[0].key.decode() == value["alertId"]
    assert all(ISO_MILLIS_UTC.match(value[k]) for k in ("windowStart", "windowEnd", "emittedAt"))
    assert (value["clickCount"], value["threshold"]) == (4, 3)


def test_duplicates_of_an_event_id_are_not_counted(fast_config, run_fast_path):
    query = run_fast_path()
    send(fast_config, *(click(eid, "/dup", "10:00:01") for eid in ["a", "a", "b", "b", "c", "a"]))
    query.processAllAvailable()
    assert alerts(fast_config) == {}

    send(fast_config, click("d", "/dup", "10:00:02"), click("c", "/dup", "10:00:03"))
    query.processAllAvailable()

    assert [a.click_count for a in alerts(fast_config).values()] == [4]


def test_malformed_and_hostile_records_neither_stop_the_stream_nor_count(fast_config, run_fast_path):
    query = run_fast_path()
    hostile = [
        None,
        b"\xff\xfe\xfd",
        b"not json at all",
        b"[1, 2, 3]",
        b'{"pageId": "/m", "eventTime": "2026-11-22T10:00:01Z"}',
        click("x", "/m", "10:00:01").replace(b"Z", b""),
        b'{"eventId": "big", "pageId": "/m", "pad": "' + b"x" * 900_000 + b'"}',  # huge, and no eventTime
        b"[" * 50_000 + b"]" * 50_000,
        b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
        '{"eventId":"u16","pageId":"/m","eventTime":"2026-11-22T10:00:01Z"}'.encode("utf-16"),
        b"\xef\xbb\xbf" + click("bom", "/m", "10:00:01"),
    ]
    valid = [click(f"v{n}", "/m", f"10:00:0{n}") for n in range(1, 5)]
    send(fast_config, valid[0], *hostile[:6], valid[1], *hostile[6:], valid[2], valid[3])
    query.processAllAvailable()

    assert query.isActive and query.exception() is None
    assert [a.click_count for a in alerts(fast_config).values()] == [4]
    observed = [progress_dict(p).get("observedMetrics", {}).get("parsed_clicks", {}) for p in query.recentProgress]
    assert sum(m.get("invalid", 0) for m in observed) == len(hostile)
    assert sum(m.get("records", 0) for m in observed) == len(hostile) + len(valid)


def test_an_event_later_than_the_watermark_is_not_counted(fast_config, run_fast_path):
    query = run_fast_path()
    send(fast_config, click("now", "/late", "10:01:00"))  # watermark moves to 10:00:55
    query.processAllAvailable()

    send(fast_config, *(click(f"old{n}", "/late", f"10:00:0{n}") for n in (1, 2, 6, 7)))  # two late windows
    query.processAllAvailable()

    assert alerts(fast_config) == {}
    # Spark merges a batch's events per page and window before the watermark filter, so what it
    # drops, and reports, is late windows: two here (the records share a key, so one partition).
    dropped = sum(op["numRowsDroppedByWatermark"] for p in query.recentProgress for op in progress_dict(p)["stateOperators"])
    assert dropped == 2


def test_quotes_and_non_ascii_in_a_page_id_come_out_as_valid_json(fast_config, run_fast_path):
    page = 'naïve "quoted" \\ päge/☃/日本'
    query = run_fast_path()
    send(fast_config, *(click(f"q{n}", page, f"10:00:2{n}") for n in range(4)))
    query.processAllAvailable()

    (record,) = read_to_end(fast_config.kafka, fast_config.kafka.topics.alerts)
    assert json.loads(record.value.decode("utf-8"))["pageId"] == page


def test_a_restart_from_the_checkpoint_loses_no_alert_and_keeps_counts(fast_config, run_fast_path):
    query = run_fast_path()
    send(fast_config, click("a1", "/a", "10:00:01"), click("a2", "/a", "10:00:02"))
    query.processAllAvailable()
    query.stop()

    # While the fast path is down: window A gets its 3rd and 4th click, window B four clicks.
    send(fast_config, click("a3", "/a", "10:00:03"), click("a4", "/a", "10:00:04"),
         *(click(f"b{n}", "/b", f"10:00:0{n}") for n in range(1, 5)))
    restarted = run_fast_path()
    restarted.processAllAvailable()

    found = alerts(fast_config)
    assert {(page, a.click_count) for (page, _), a in found.items()} == {("/a", 4), ("/b", 4)}
    counts = [record["clickCount"] for record in alert_records(fast_config)]
    assert all(count >= 4 for count in counts)  # no alert ever claimed a count the data does not have

    restarted.stop()
    again = run_fast_path()
    again.processAllAvailable()
    assert len(read_to_end(fast_config.kafka, fast_config.kafka.topics.alerts)) == len(counts)  # nothing replayed twice


def test_a_start_killed_before_its_first_batch_was_logged_does_not_block_the_next_one(fast_config, run_fast_path):
    """What a kill -9 while the query plans its first batch can leave: the state's schema and metadata
    folders, a schema file half written, and no batch in offsets/."""
    state = Path(fast_config.checkpoint(ALERTING_QUERY)) / "state" / "0"
    (state / "0" / "_metadata").mkdir(parents=True)
    (state / "_metadata").mkdir()
    (state / "_stateSchema" / "default").mkdir(parents=True)
    (state / "_stateSchema" / "default" / ".0_killed.tmp").write_bytes(b"\x00\x01")
    (state.parent.parent / "offsets").mkdir()

    query = run_fast_path()
    send(fast_config, *(click(f"k{n}", "/k", f"10:00:0{n}") for n in range(1, 5)))
    query.processAllAvailable()

    assert {(page, a.click_count) for (page, _), a in alerts(fast_config).items()} == {("/k", 4)}
