"""Reading alerts back and the benchmark arithmetic, without a broker."""

import json

from shared.alerts_topic import AlertBook
from lakehouse.bench.operational import _slope
from lakehouse.bench.time_to_alert import percentiles


def alert(count: int, alert_id: str = "id-1", **changes) -> bytes:
    body = {"alertId": alert_id, "pageId": "/p", "windowStart": "2026-11-22T10:00:00.000Z",
            "windowEnd": "2026-11-22T10:00:05.000Z", "clickCount": count, "threshold": 3,
            "emittedAt": "2026-11-22T10:00:03.123Z"} | changes
    return json.dumps(body).encode()


def test_the_book_keeps_the_highest_count_per_alert_id_whatever_the_order():
    book = AlertBook()
    for offset, value in enumerate([alert(4), alert(9), alert(6), alert(5, "id-2")]):
        book.add(0, offset, 1000 + offset, value)

    assert {a.alert_id: a.click_count for a in book.latest.values()} == {"id-1": 9, "id-2": 5}
    assert book.records == 4 and book.invalid == []


def test_records_that_are_not_alerts_are_set_aside_with_the_reason():
    book = AlertBook()
    for offset, value in enumerate([None, b"\xff", b"[1]", b'{"alertId": "x"}', alert("four"), alert(4)]):
        book.add(0, offset, 0, value)

    assert [why.split(" ")[0] for _, _, why in book.invalid] == ["null", "not", "not", "missing", "clickCount"]
    assert len(book.latest) == 1


def test_percentiles_use_nearest_rank():
    values = list(range(1, 101))

    assert percentiles(values) == {"p50_ms": 50, "p95_ms": 95, "p99_ms": 99, "p999_ms": 100, "max_ms": 100}
    assert percentiles([]) == {"p50_ms": None, "p95_ms": None, "p99_ms": None, "p999_ms": None, "max_ms": None}


def test_lag_slope_tells_growth_from_noise():
    assert _slope([(t, 1000 + 500 * t) for t in range(10)]) == 500
    assert abs(_slope([(t, 1000 + (50 if t % 2 else -50)) for t in range(10)])) < 20
