"""The alert record: the contract's fields and formats, and an alertId reproducible outside Spark."""

import json
import re
from datetime import datetime, timezone

from shared.alerts import to_alert_records
from tests.contract_oracle import alert_id

ISO_MILLIS_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
PAGE = '/search?q="shoes" für Ünïcødé ☃ \\ end'


def hot_window(spark, page: str, count: int):
    start = datetime(2026, 11, 22, 10, 0, 5)
    end = datetime(2026, 11, 22, 10, 0, 10)
    return spark.createDataFrame(
        [(page, start, end, count)], "pageId string, windowStart timestamp, windowEnd timestamp, clickCount long"
    )


def test_alert_value_has_exactly_the_contract_fields(spark):
    record = hot_window(spark, PAGE, 5001).transform(to_alert_records, 5000).collect()[0]
    alert = json.loads(record.value)

    assert list(alert) == ["alertId", "pageId", "windowStart", "windowEnd", "clickCount", "threshold", "emittedAt"]
    assert alert["pageId"] == PAGE
    assert alert["windowStart"] == "2026-11-22T10:00:05.000Z"
    assert alert["windowEnd"] == "2026-11-22T10:00:10.000Z"
    assert alert["clickCount"] == 5001 and isinstance(alert["clickCount"], int)
    assert alert["threshold"] == 5000 and isinstance(alert["threshold"], int)
    assert ISO_MILLIS_UTC.match(alert["emittedAt"])
    assert record.key == alert["alertId"]


def test_alert_id_is_deterministic_from_page_and_window_start(spark):
    expected = alert_id(PAGE, datetime(2026, 11, 22, 10, 0, 5, tzinfo=timezone.utc))

    first = hot_window(spark, PAGE, 5001).transform(to_alert_records, 5000).collect()[0]
    later = hot_window(spark, PAGE, 7000).transform(to_alert_records, 5000).collect()[0]
    other_page = hot_window(spark, "/other", 5001).transform(to_alert_records, 5000).collect()[0]

    assert first.key == later.key == expected
    assert other_page.key != first.key
