"""What the tests on the embedded standalone clusters share: their settings on free ports, `lakehouse`
with conf/standalone.yaml, and the processes a cluster left."""

from __future__ import annotations

import socket
from pathlib import Path

from shared import PROJECT_ROOT
from tests.conftest import free_port
from tests.helpers import run_lakehouse

STANDALONE = str(PROJECT_ROOT / "conf" / "standalone.yaml")


def _ports_free_from(first: int, count: int) -> bool:
    for port in range(first, first + count):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def _free_port_range(count: int) -> int:
    """The first of `count` consecutive free ports (a master's web UI, then its workers')."""
    return next(port for port in iter(free_port, None) if _ports_free_from(port, count))


def cluster_settings_in(run_dir: Path) -> list[str]:
    """--set values of both embedded clusters on free ports, files under `run_dir`: the medallion's
    (2 workers of 1 core, `spark.master`) and the fast path's (`operational.real_time.master`)."""
    master, fast_master = free_port(), free_port()
    return [f"cluster.run_dir={run_dir}", f"cluster.master_port={master}",
            f"cluster.webui_port={_free_port_range(3)}", "cluster.workers=2", "cluster.worker_cores=1",
            f"spark.master=spark://127.0.0.1:{master}",
            f"cluster.fast_path.master_port={fast_master}", f"cluster.fast_path.webui_port={_free_port_range(2)}",
            f"operational.real_time.master=spark://127.0.0.1:{fast_master}"]


def lakehouse_on_clusters(*args: str, settings: list[str], timeout: float = 180, env: dict | None = None):
    """`lakehouse --config conf/standalone.yaml ARGS --set SETTINGS...`, as a user runs it."""
    return run_lakehouse("--config", STANDALONE, *args, *(f"--set={item}" for item in settings),
                         timeout=timeout, env=env)
