"""Fixtures of the deployment suite."""

from __future__ import annotations

import pytest

from tests.deployment.clusters import cluster_settings_in, lakehouse_on_clusters
from tests.helpers import wait_for
from tests.processes import command_lines_in


@pytest.fixture(scope="module")
def cluster_settings(tmp_path_factory) -> list[str]:
    """--set values of both embedded clusters on this module's own free ports and folder (not started)."""
    return cluster_settings_in(tmp_path_factory.mktemp("cluster"))


@pytest.fixture(scope="session")
def medallion_cluster(tmp_path_factory):
    """The medallion's cluster alone (Spark 4.1: a master and one worker), started once for the tests
    that need only a running medallion master: (its --set values, its master URL); the fast path's
    master in the settings does not run. A test may kill its worker (tests/deployment/test_cluster.py):
    what the others read is the master. Stopping it must end every process it started."""
    cluster_dir = tmp_path_factory.mktemp("medallion-cluster")
    settings = [*cluster_settings_in(cluster_dir), "cluster.fast_path.enabled=false", "cluster.workers=1"]
    started = lakehouse_on_clusters("cluster", "start", settings=settings)
    assert started.returncode == 0, started.stderr
    yield settings, started.stdout.split()[0]
    assert lakehouse_on_clusters("cluster", "stop", settings=settings).returncode == 0
    wait_for(lambda: not command_lines_in(str(cluster_dir)), 30, "every cluster process to end")
