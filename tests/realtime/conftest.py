"""The fast path's own tests, run in its runtime (pyspark 4.3: `.venv-fast/bin/pytest tests/realtime`,
which `make test` runs beside the medallion's). The medallion's interpreter skips them."""

import pytest

from operational import hot_pages
from shared.runtime import real_time_available
if not real_time_available():
    collect_ignore_glob = ["test_*.py"]

#: The tests' threshold: a window's first alert record is its 21st distinct eventId.
THRESHOLD = 20


@pytest.fixture
def real_time(spark, configured, start_query):
    """Start the real-time query with a given checkpoint interval (and --set overrides) on this test's topics."""
    def start(checkpoint_interval: str, *overrides: str):
        settings = configured(f"hot_pages.threshold={THRESHOLD}", "operational.starting_offsets=earliest",
                              "operational.mode=real-time",
                              f"operational.real_time.checkpoint_interval={checkpoint_interval}", *overrides)
        return settings, start_query(hot_pages.start, spark, settings)

    return start

