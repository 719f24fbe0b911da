"""Hostile input against the fast path in real-time mode (part of the crash suite, `make test-faults`).

10,000 hostile records (tests/traffic.py: every kind that was once taken for a click, event
times that would move the watermark to year 9999 or hold it at year 1) reach the real-time query,
across several batch boundaries; then a window turns hot in real time. The oracle is computed from
the topic with tests/contract_oracle.py, never by the code under test: every window's highest alert
record must be the largest of 51, 102, 204, ... that its distinct valid clicks reached, and a window
that is not hot must have none (the valid hostile records make the hot page's and /hostile's windows hot).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from operational import hot_pages
from shared.alerts import ALERTING_QUERY
from shared.kafka import ensure_topics, producer_for
from tests.conftest import make_config
from tests.traffic import HOT_PAGE, click, hostile, now_micros
from tests.truth import SHIPPED_BOUNDS, Truth, assert_alerts_as_the_oracle_says
from tests.helpers import files_holding, wait_for
from tests.topics import alert_records, read_to_end

pytestmark = pytest.mark.faults  # a crash-suite test, in the fast path's runtime

THRESHOLD = 50
HOSTILE = 10_000
#: The user of the clicks that make the last window hot: a window the query's state still holds when it stops.
TARGET_USER = "who-made-target-hot"


def test_ten_thousand_hostile_records_neither_silence_nor_fool_the_real_time_fast_path(spark, config_overrides):
    settings = make_config(*config_overrides, *SHIPPED_BOUNDS, f"hot_pages.threshold={THRESHOLD}",
                           "operational.starting_offsets=earliest", "operational.mode=real-time",
                           "operational.real_time.checkpoint_interval=5 seconds")
    ensure_topics(settings.kafka, [settings.kafka.topics.clicks, settings.kafka.topics.alerts])
    producer = producer_for(settings.kafka)
    rng = random.Random(7)
    query = hot_pages.start(spark, settings)
    try:
        # Sent while the query runs, in three bursts, so batch boundaries fall between them: the
        # watermark must hold within a batch and across batches.
        for burst in range(3):
            for index in range(burst, HOSTILE, 3):  # aimed at the hot page, and at a page of their own
                producer.send(settings.kafka.topics.clicks, key=b"hostile",
                              value=hostile(rng, HOT_PAGE if index % 2 else "/hostile"))
            producer.flush()
            ended = len(query.recentProgress)
            wait_for(lambda: len(query.recentProgress) > ended, 60, f"a batch boundary after burst {burst + 1}")
        wait_for(lambda: sum(p["numInputRows"] for p in query.recentProgress) >= HOSTILE, 90,
                 "every hostile record read")
        watermarks = [(p.get("eventTime") or {}).get("watermark") for p in query.recentProgress]

        # Then a window turns hot in real time: 80 clicks on a page within one second.
        target = now_micros()
        for _ in range(80):
            producer.send(settings.kafka.topics.clicks, value=click("/target", target, userId=TARGET_USER))
        producer.flush()
        wait_for(lambda: any(r["pageId"] == "/target" for r in alert_records(settings)), 30, "the /target alert")
        ended = len(query.recentProgress)
        wait_for(lambda: len(query.recentProgress) > ended, 60, "a batch boundary after the hot window")
        watermarks.append((query.recentProgress[-1].get("eventTime") or {}).get("watermark"))
        assert query.exception() is None
    finally:
        query.stop()
        producer.close()

    truth = Truth.of(read_to_end(settings.kafka, settings.kafka.topics.clicks))
    window = target - target % 5_000_000
    assert truth.windows[("/target", window)] == 80
    target_records = [r["clickCount"] for r in alert_records(settings) if r["pageId"] == "/target"]
    # The window's record leaves at its crossing, the (threshold + 1)-th distinct click; 80 < 2 x 51.
    assert set(target_records) == {THRESHOLD + 1}, target_records
    # The query has read every record: each window's highest record is final.
    alerts = assert_alerts_as_the_oracle_says(settings.kafka, settings.kafka.topics.alerts, truth, THRESHOLD,
                                              real_time=True)
    # What `lakehouse forget` cannot reach holds no userId: the state keeps each open window's eventIds only.
    checkpoint = Path(settings.checkpoint(ALERTING_QUERY))
    assert files_holding(checkpoint / "state", "/target"), "the scan reads the open window's state"
    assert files_holding(checkpoint, TARGET_USER) == []
    moved = [mark for mark in watermarks if mark is not None and mark >= "2100"]
    assert not moved, f"a hostile record moved the watermark: {moved}"
    print(f"\nhostile (real-time): {HOSTILE:,} sent, {len(truth.invalid):,} invalid by the oracle, "
          f"{len(truth.events):,} valid; watermarks {sorted(set(filter(None, watermarks)))[-1:]}; alerts {alerts}")
