"""The fast path's JVM processor (`operational.hot_pages.running_distinct_counts`, built by `make setup`
from operational/jvm) counts each window as the rule does, on the crafted clicks of tests/crafted.py
read as one static frame (no watermark yet, so nothing is late)."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from operational.hot_pages import running_distinct_counts, watermarked_events
from shared.rule import count_distinct_clicks_per_window
from tests.conftest import make_config
from tests.crafted import TOPIC, as_one_partition


def test_the_processor_writes_each_windows_count_each_time_it_grows_from_the_least_count_on_as_the_rule_counts_it(
        spark):
    config = make_config(f"kafka.topics.clicks={TOPIC}")
    events = as_one_partition(spark).transform(watermarked_events, config.hot_pages, config.quality)

    written = defaultdict(list)
    counts = events.transform(running_distinct_counts, config.hot_pages.window, timedelta(seconds=30), least_count=2)
    for row in counts.collect():
        written[(row.pageId, row.windowStart)].append(row.clickCount)
    rule = {(row.pageId, row.windowStart): row.clickCount
            for row in events.transform(count_distinct_clicks_per_window, config.hot_pages.window).collect()}

    # /a 10:00:00: 5, /b 10:00:00: 2, /a 10:00:05: 1, /b 10:00:05: 2, /a 10:00:10: 3 (tests/crafted.py)
    assert sorted((page, count) for (page, _), count in rule.items()) == [("/a", 1), ("/a", 3), ("/a", 5),
                                                                          ("/b", 2), ("/b", 2)]
    assert {window: sorted(counts) for window, counts in written.items()} == {
        window: list(range(2, count + 1)) for window, count in rule.items() if count >= 2}
