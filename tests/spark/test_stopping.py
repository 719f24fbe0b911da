"""A clean stop of a micro-batch query that is never between batches: it ends with the batch it is in."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from shared.stopping import stop_at_batch_end
from tests.helpers import wait_for


def _last_batch(log: Path) -> int:
    return max((int(entry.name) for entry in log.iterdir() if entry.name.isdigit()), default=-1)


def test_a_query_always_in_a_batch_stops_at_the_end_of_it_with_that_batch_committed(spark, tmp_path):
    """A medallion whose batches take longer than its trigger starts the next one as one ends: a stop
    that waited to catch the moment between two found none under load and cut one short after 60 s.
    Here the batch in flight holds until the stop has begun, and the next would start at once."""
    started_batches: list[int] = []
    stop_begun = threading.Event()

    def held(batch, batch_id: int) -> None:
        started_batches.append(batch_id)
        stop_begun.wait(60)

    def report(line: str) -> None:
        said.append(line)
        stop_begun.set()

    checkpoint = tmp_path / "checkpoint"
    query = (spark.readStream.format("rate").option("rowsPerSecond", 20).load()
             .writeStream.queryName("always_busy").foreachBatch(held).trigger(processingTime="0 seconds")
             .option("checkpointLocation", str(checkpoint)).start())
    said: list[str] = []
    try:
        wait_for(lambda: started_batches, 60, "a batch in flight")
        began = time.monotonic()
        stop_at_batch_end([query], wait_s=30, report=report, hurry=threading.Event())
        took = time.monotonic() - began
    finally:
        stop_begun.set()
        query.stop()

    assert said == ["[always_busy] stopping at the end of the running batch (within 30 s); stop again to stop now"]
    assert took < 10, f"the stop took {took:.1f} s for a batch that ended as it began"
    assert _last_batch(checkpoint / "commits") == _last_batch(checkpoint / "offsets") == started_batches[-1], \
        "the running batch was not committed, or another one started after the stop"
