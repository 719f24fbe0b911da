"""Both paths on real Spark standalone clusters (`lakehouse cluster`): the medallion's (Spark 4.1, a
master and two workers) and the fast path's (Spark 4.3, a master and a 4-core worker) on this machine,
`lakehouse run --config conf/standalone.yaml` as two applications, the fast path in real-time mode,
every table and checkpoint on the run's S3-compatible store (the workers share no folder with the
driver), the same oracle as local mode, and nothing left running after the stops."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

from shared.config_loading import with_overrides
from lakehouse.services.cluster import StandaloneCluster
from tests.conftest import make_config
from tests.deployment.clusters import STANDALONE, lakehouse_on_clusters as _lakehouse
from tests.processes import command_lines_in
from tests.helpers import run_lakehouse, wait_for
from tests.run_scenario import alerted, expected_alerts, expected_windows, gold, run_on_crafted_traffic, run_options


def test_run_on_a_two_worker_cluster_gives_local_modes_answers_and_stops_clean(
        spark, config, config_overrides, cluster_settings, object_store, s3_root, tmp_path):
    """With tables and checkpoints on the object store, as on a cluster whose machines share no disk.

    Its time: two clusters' masters and three workers start, `run` registers two applications whose
    executors start on the workers, and the scenario's alerts and gold are awaited through them."""
    on_s3 = [*object_store, f"storage.root={s3_root}"]
    config, config_overrides = with_overrides(config, on_s3), [*config_overrides, *on_s3]
    cluster_dir = cluster_settings[0].split("=", 1)[1]
    try:
        started = _lakehouse("cluster", "start", settings=cluster_settings)
        assert started.returncode == 0, started.stderr
        medallion_url, fast_path_url = started.stdout.split()
        status = json.loads(_lakehouse("cluster", "status", "--format", "json", settings=cluster_settings).stdout)
        assert status["healthy"]
        assert [(each["runtime"], each["master_url"], each["alive_workers"], each["cores"])
                for each in status["clusters"]] == [("medallion", medallion_url, 2, 2), ("fast-path", fast_path_url, 1, 4)]

        def each_application_on_its_runtimes_cluster(run) -> None:
            now = json.loads(_lakehouse("cluster", "status", "--format", "json", settings=cluster_settings).stdout)
            cores = {each["runtime"]: {app["name"]: app["cores"] for app in each["applications"]}
                     for each in now["clusters"]}
            assert cores == {"medallion": {"clickstream-lakehouse-analytical": 1},
                             "fast-path": {"clickstream-lakehouse-operational": 4}}

        options = run_options([*config_overrides, *cluster_settings], "operational.mode=real-time")
        try:
            output = run_on_crafted_traffic(spark, config, options, tmp_path / "run.log",
                                            extra_args=("--config", STANDALONE), timeout_s=300, real_time=True,
                                            while_running=each_application_on_its_runtimes_cluster)
        except AssertionError as failed:  # what the clusters had given each application, and its executors' logs
            now = _lakehouse("cluster", "status", "--format", "json", settings=cluster_settings).stdout
            logs = "".join(f"\n--- {path}\n{path.read_text()[-1500:]}"
                           for path in sorted(Path(cluster_dir).glob("**/worker-*/app-*/*/stderr")))
            raise AssertionError(f"{failed}\ncluster status: {now}{logs}") from None

        assert "Traceback" not in output
        assert alerted(config) == expected_alerts(real_time=True) and gold(spark, config) == expected_windows()
        for executors in ("worker-*/app-*/*/stderr", "fast-path/worker-*/app-*/*/stderr"):
            assert len({path.parent.parent.name for path in Path(cluster_dir).glob(executors)}) == 1, (
                f"one application ran executors on each cluster ({executors})")
    finally:
        stopped = _lakehouse("cluster", "stop", settings=cluster_settings)
    assert stopped.returncode == 0, stopped.stderr
    wait_for(lambda: not command_lines_in(cluster_dir), 30, "every cluster process to end")
    again = _lakehouse("cluster", "status", settings=cluster_settings)
    assert again.returncode == 1 and again.stdout.splitlines() == [
        f"medallion: not running (master {medallion_url})", f"fast-path: not running (master {fast_path_url})"]


def test_a_dead_worker_a_taken_port_and_a_missing_java_each_get_one_clear_message(cluster_settings, medallion_cluster):
    settings = [*cluster_settings, "cluster.workers=1", "cluster.fast_path.enabled=false"]
    with socket.socket() as squatter:
        master_port = make_config(*settings).cluster.master_port
        squatter.bind(("127.0.0.1", master_port))
        squatter.listen()
        taken = _lakehouse("cluster", "start", settings=settings)
    assert taken.returncode == 2 and "Traceback" not in taken.stderr
    assert taken.stderr.strip().splitlines()[-1] == (
        f"error: port {master_port} on 127.0.0.1 is in use by another process (cluster.master_port): "
        "stop that process, or choose another port in the config (--set <key>=...)")

    no_java = run_lakehouse("cluster", "start", *(f"--set={item}" for item in settings),
                            env={**os.environ, "JAVA_HOME": "/nonexistent", "PATH": "/usr/bin/none"})
    assert no_java.returncode == 2 and no_java.stderr.startswith("error: java was not found: install a JDK 17")

    # a running cluster's worker killed: the shared one, whose stop (the fixture's end) must still end it all
    running, _ = medallion_cluster
    cluster = StandaloneCluster(make_config(*running), log=lambda message: None)
    os.kill(cluster.workers[0].running_pid(), signal.SIGKILL)
    status = _lakehouse("cluster", "status", settings=running)
    assert status.returncode == 1 and "worker 1: not running" in status.stdout
