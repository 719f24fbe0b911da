"""The fast path's own tests, run in its runtime (pyspark 4.3: `.venv-fast/bin/pytest tests/realtime`,
which `make test` runs after the medallion's). The medallion's interpreter skips them."""

from shared.runtime import real_time_available

if not real_time_available():
    collect_ignore_glob = ["test_*.py"]
