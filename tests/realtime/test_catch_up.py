"""A real-time start with a backlog whose partitions filled unevenly (operational.catch_up): every hot
window of the backlog alerts, as `lakehouse operational` runs it.

Partition 0 holds a few clicks a second, partition 1 hundreds of times more, over the same two
minutes. Read by real-time tasks, partition 0 is read to its end at once; a batch that ended while
partition 1 was still being read would move the watermark past partition 1's unread clicks. The
expected alerts are computed here from the clicks sent.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from datetime import datetime, timezone

from shared.alerts_topic import latest_alerts
from shared.kafka import producer_for
from tests.helpers import LAKEHOUSE, assert_quiet, wait_for
from tests.realtime.conftest import THRESHOLD

WINDOW_MS = 5_000
WINDOWS = 24
HOT_CLICKS = 25            # per hot page and window: one alert record each, at THRESHOLD + 1
FILLER_PER_WINDOW = 12_500  # partition 1's other clicks: two per page and window, never hot


def moment(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def alerted(config) -> dict[tuple[str, datetime], int]:
    """(page, window start) -> the highest count alerted for it."""
    book = latest_alerts(config.kafka, config.kafka.topics.alerts)
    return {(alert.page_id, datetime.fromisoformat(alert.window_start.replace("Z", "+00:00"))): alert.click_count
            for alert in book.latest.values()}


def test_a_backlog_with_unevenly_filled_partitions_is_read_in_one_micro_batch_first_and_every_hot_window_alerts(
        configured, config_overrides, tmp_path):
    settings = (f"hot_pages.threshold={THRESHOLD}", "operational.starting_offsets=earliest",
                "operational.mode=real-time", "operational.real_time.checkpoint_interval=5 seconds",
                "operational.status_interval_s=2")
    config = configured(*settings)
    # Two minutes of clicks, ten minutes ago, stamped (in Kafka too) with their event time.
    first_window = (int(time.time() * 1000) - 600_000) // WINDOW_MS * WINDOW_MS
    producer = producer_for(config.kafka)
    expected = {}
    for w in range(WINDOWS):
        start = first_window + w * WINDOW_MS
        for partition, page in ((0, "/light"), (1, "/heavy")):
            expected[(page, moment(start))] = THRESHOLD + 1
            for n in range(HOT_CLICKS):
                at = start + n * WINDOW_MS // HOT_CLICKS
                value = json.dumps({"eventId": f"{page}-{w}-{n}", "pageId": page,
                                    "eventTime": moment(at).isoformat().replace("+00:00", "Z")}).encode()
                producer.send(config.kafka.topics.clicks, value, timestamp_ms=at, partition=partition)
        for n in range(FILLER_PER_WINDOW):
            at = start + n * WINDOW_MS // FILLER_PER_WINDOW
            value = json.dumps({"eventId": f"f-{w}-{n}", "pageId": f"/f{n % (FILLER_PER_WINDOW // 2)}",
                                "eventTime": moment(at).isoformat().replace("+00:00", "Z")}).encode()
            producer.send(config.kafka.topics.clicks, value, timestamp_ms=at, partition=1)
    producer.flush()

    log = tmp_path / "operational.log"
    options = [f"--set={item}" for item in (*config_overrides, *settings)]
    with open(log, "w") as output:
        command = subprocess.Popen([LAKEHOUSE, "operational", *options], stdout=output, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: command.poll() is not None or (
                "the backlog's micro-batch is done" in log.read_text() and expected.items() <= alerted(config).items()),
                300, "the backlog's micro-batch to end and every hot window's alert", every_s=2)
        finally:
            command.send_signal(signal.SIGTERM)
            returncode = command.wait(timeout=180)
    said = log.read_text()

    assert returncode == 0, said[-3000:]
    assert alerted(config) == expected, f"missing: {sorted(set(expected) - set(alerted(config)))[:5]} ..."
    assert "reading the backlog in one micro-batch first" in said, said[-3000:]
    assert "the backlog's micro-batch is done" in said and said.count("] started (query id") >= 2
    assert "Traceback" not in said, said[-3000:]
    assert_quiet(said)
