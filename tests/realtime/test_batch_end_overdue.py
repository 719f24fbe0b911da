"""A real-time batch whose commit the storage holds up is loud: with the object store frozen (SIGSTOP:
every request to it hangs, as on a server that never answers a state upload), no batch ends, and
within two checkpoint intervals /metrics says by how much its end is overdue and the console's status
line says BATCH END OVERDUE; once the store answers again, the batch commits and the line is quiet."""

from __future__ import annotations

import os
import signal

from prometheus_client import generate_latest

from operational import hot_pages
from lakehouse.monitoring.metrics import QueryFacts, QueryMetrics
from lakehouse.monitoring.running_queries import activity_line, query_rows
from lakehouse.services.object_store import EmbeddedObjectStore
from shared.query_events import watching
from tests.conftest import make_config
from tests.helpers import wait_for


def test_a_batch_end_the_storage_holds_up_is_overdue_on_metrics_and_the_console_until_it_commits(
        real_time, spark, object_store, s3_root):
    """Its time: the query's start and first batch on the store, two checkpoint intervals of a frozen store,
    then the held-up commit and one more batch end once it answers (100 s beside a full run)."""
    config, query = real_time("10 seconds", *object_store, f"storage.root={s3_root}")
    metrics = QueryMetrics({"hot_pages": QueryFacts.of(config, hot_pages.STREAM)})

    def now() -> dict:
        (row,) = query_rows(generate_latest(metrics.registry).decode())
        return row | {"line": activity_line(row)}

    with watching(spark, metrics):
        metrics.started("hot_pages", str(query.runId))
        wait_for(lambda: now().get("batchesEnded", 0) >= 1, 120, "a batch end counted on /metrics")
        assert "OVERDUE" not in now()["line"]  # it has just ended one
        store = EmbeddedObjectStore(make_config(*object_store, f"storage.root={s3_root}"), log=lambda line: None)
        pid = store.status().pid
        ended = now()["batchesEnded"]
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_for(lambda: "BATCH END OVERDUE" in now()["line"], 90, "the console to say the batch end is overdue",
                     every_s=0.5)
            assert now()["batchesEnded"] <= ended + 1, "batches kept ending with the store frozen"
        finally:
            os.kill(pid, signal.SIGCONT)
        wait_for(lambda: now()["batchesEnded"] > ended + 1 and "OVERDUE" not in now()["line"], 180,
                 "a batch end once the store answers again", every_s=0.5)
        assert query.exception() is None
