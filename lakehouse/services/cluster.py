"""The embedded Spark standalone cluster: a master and `cluster.workers` workers on this machine.

Started from the installed pyspark's own classes (`org.apache.spark.deploy.master.Master`,
`...worker.Worker`, the classpath `$SPARK_HOME/jars`), the way `sbin/start-master.sh` and
`sbin/start-worker.sh` start them, with ports, cores and memory from the `cluster` config section
and logs and work folders under `cluster.run_dir`. It is the smallest real cluster: applications
register with the master, executors run in processes the workers launch, and everything travels
between them as it would between machines (jars from the driver, state on executors, shuffles).
`conf/standalone.yaml` points the commands at it.

A standalone cluster runs one Spark version, and each application needs its own on the executors:
the medallion's cluster runs Spark 4.1 (with Delta's jars from the driver), and, with
`cluster.fast_path.enabled`, a second master and workers run the fast path's Spark 4.3 for its
real-time mode (ports and cores from `cluster.fast_path`, files under `<run_dir>/fast-path`).
`embedded_clusters` gives both.

`start` returns once every worker has registered; `stop` ends the workers (and the executors
they launched, in their process groups) and then the master.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.config import ClusterConfig, Config
from shared.errors import LakehouseError
from shared.jvm import java_executable
from shared.runtime import FAST_PATH, MEDALLION, Runtime
from lakehouse.services.daemon import Daemon, require_free_ports

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(LakehouseError):
    """The cluster could not be started or stopped; the message carries the failing process's log."""


@dataclass(frozen=True)
class Layout:
    """Where one runtime's cluster lives: its ports, workers and files."""

    runtime: Runtime
    run_dir: Path
    master_port: int
    webui_port: int
    workers: int
    worker_cores: int


def layout(cluster: ClusterConfig, runtime: Runtime) -> Layout:
    """Where `runtime`'s embedded cluster lives and listens, and its workers."""
    if runtime == FAST_PATH:
        fast = cluster.fast_path
        return Layout(runtime, Path(cluster.run_dir) / "fast-path", fast.master_port, fast.webui_port,
                      fast.workers, fast.worker_cores)
    return Layout(runtime, Path(cluster.run_dir), cluster.master_port, cluster.webui_port,
                  cluster.workers, cluster.worker_cores)


@dataclass(frozen=True)
class ClusterStatus:
    runtime: str
    master_url: str
    web_ui: str
    master_pid: int | None
    worker_pids: list[int | None]
    #: What the master reports (its web UI's /json): workers, cores, applications; {} when it does not answer
    master: dict[str, Any] = field(default_factory=dict)

    @property
    def alive_workers(self) -> int:
        return sum(1 for worker in self.master.get("workers", []) if worker.get("state") == "ALIVE")

    @property
    def healthy(self) -> bool:
        return bool(self.master_pid) and all(self.worker_pids) and self.alive_workers == len(self.worker_pids)

    def as_dict(self) -> dict[str, Any]:
        return {
            "runtime": self.runtime, "master_url": self.master_url, "web_ui": self.web_ui, "healthy": self.healthy,
            "master_pid": self.master_pid, "worker_pids": self.worker_pids, "alive_workers": self.alive_workers,
            "cores": self.master.get("cores"), "cores_used": self.master.get("coresused"),
            "applications": [{"name": app.get("name"), "cores": app.get("cores"), "state": app.get("state")}
                             for app in self.master.get("activeapps", [])],
        }

    def describe(self) -> str:
        if not self.master_pid:
            return f"{self.runtime}: not running (master {self.master_url})"
        lines = [f"{self.runtime}: master {self.master_url} (pid {self.master_pid}), web UI {self.web_ui}: "
                 f"{self.alive_workers} of {len(self.worker_pids)} workers alive, "
                 f"{self.master.get('coresused', 0)} of {self.master.get('cores', 0)} cores in use"]
        lines += [f"  worker {index}: " + (f"pid {pid}" if pid else "not running")
                  for index, pid in enumerate(self.worker_pids, start=1)]
        lines += [f"  application {app['name']}: {app['cores']} cores, {app['state']}"
                  for app in self.as_dict()["applications"]]
        return "\n".join(lines)


def embedded_clusters(config: Config, log=print) -> list["StandaloneCluster"]:
    """The medallion's cluster, and the fast path's beside it when `cluster.fast_path.enabled`."""
    runtimes = [MEDALLION, FAST_PATH] if config.cluster.fast_path.enabled else [MEDALLION]
    return [StandaloneCluster(config, runtime, log=log) for runtime in runtimes]


class StandaloneCluster:
    """Start, stop and inspect one runtime's master and workers (files in its `Layout.run_dir`)."""

    def __init__(self, config: Config, runtime: Runtime = MEDALLION, log=print):
        self.settings = config.cluster
        self.layout = layout(config.cluster, runtime)
        self.name = f"the {runtime.name} cluster"
        self.host = self.settings.host
        self.master_url = f"spark://{self.host}:{self.layout.master_port}"
        self.web_ui = f"http://{self.host}:{self.layout.webui_port}"
        self.run_dir = self.layout.run_dir
        # Ends with the runtime's name: one cluster's marker is no prefix of the other's.
        self._marker = f"-Dlakehouse.cluster={self.run_dir}#{runtime.name}"
        self.master = Daemon("master", self.run_dir, marker=[MASTER_CLASS, self._marker])
        self.workers = [Daemon(f"worker-{index}", self.run_dir, marker=[WORKER_CLASS, self._marker])
                        for index in range(1, self.layout.workers + 1)]
        self._log = log

    # -- commands ---------------------------------------------------------------------------

    def start(self) -> str:
        """Start what does not run yet; return the master URL once every worker has registered."""
        java = java_executable()
        spark_home = self.layout.runtime.spark_home()
        keys = "cluster.fast_path." if self.layout.runtime == FAST_PATH else "cluster."
        ports = {} if self.master.running_pid() else {
            f"{keys}master_port": self.layout.master_port, f"{keys}webui_port": self.layout.webui_port}
        for index, worker in enumerate(self.workers, start=1):
            if not worker.running_pid():
                ports[f"worker {index}'s web UI ({keys}webui_port + {index})"] = self.layout.webui_port + index
        require_free_ports(self.host, ports)
        env = os.environ | {"SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": self.host,
                            "SPARK_SCALA_VERSION": _versions(spark_home)[0],
                            "JAVA_HOME": os.path.dirname(os.path.dirname(os.path.realpath(java)))}
        if not self.master.running_pid():
            self._log(f"starting {self.name}'s master (Spark {_versions(spark_home)[1]}) at {self.master_url} "
                      f"(web UI {self.web_ui}; log: {self.master.log_file})")
            self.master.start([*self._java(java, spark_home), MASTER_CLASS, "--host", self.host,
                               "--port", str(self.layout.master_port),
                               "--webui-port", str(self.layout.webui_port)], env=env)
        self._wait_for(lambda state: True, "the master to answer", [self.master])
        for index, worker in enumerate(self.workers, start=1):
            if worker.running_pid():
                continue
            work_dir = self.run_dir / f"worker-{index}"
            work_dir.mkdir(parents=True, exist_ok=True)
            self._log(f"starting {self.name}'s worker {index}: {self.layout.worker_cores} cores, "
                      f"{self.settings.worker_memory} for executors (log: {worker.log_file})")
            worker.start([*self._java(java, spark_home), WORKER_CLASS, "--host", self.host,
                          "--webui-port", str(self.layout.webui_port + index),
                          "--cores", str(self.layout.worker_cores), "--memory", self.settings.worker_memory,
                          "--work-dir", str(work_dir), self.master_url], env=env)
        expected = len(self.workers)
        self._wait_for(lambda state: _alive(state) >= expected, f"{expected} workers to register",
                       [self.master, *self.workers])
        self._log(f"{self.name} ready: {expected} workers, {expected * self.layout.worker_cores} cores")
        return self.master_url

    def stop(self) -> bool:
        """Stop the workers (their executors with them), then the master. False if nothing ran."""
        stopped = False
        for daemon in [*self.workers, self.master]:
            pid = daemon.running_pid()
            if pid:
                self._log(f"stopping {daemon.name} (pid {pid})")
            stopped |= daemon.stop(self.settings.stop_timeout_s, log=self._log)
        self._log(f"{self.name} stopped" if stopped else f"{self.name} not running")
        return stopped

    def status(self) -> ClusterStatus:
        master_pid = self.master.running_pid()
        return ClusterStatus(
            runtime=self.layout.runtime.name, master_url=self.master_url, web_ui=self.web_ui, master_pid=master_pid,
            worker_pids=[worker.running_pid() for worker in self.workers],
            master=(self._master_state() or {}) if master_pid else {},
        )

    # -- internals --------------------------------------------------------------------------

    def _java(self, java: str, spark_home: Path) -> list[str]:
        return [java, f"-Xmx{self.settings.daemon_memory}", self._marker, "-cp", str(spark_home / "jars" / "*")]

    def _master_state(self) -> dict[str, Any] | None:
        return master_state(self.web_ui)

    def _wait_for(self, condition, what: str, daemons: list[Daemon]) -> None:
        deadline = time.monotonic() + self.settings.start_timeout_s
        while time.monotonic() < deadline:
            for daemon in daemons:
                if not daemon.running_pid():
                    self.stop()
                    raise ClusterError(f"the Spark {daemon.name} of {self.name} exited while it started; its log "
                                       f"({daemon.log_file}) ends with:\n{daemon.log_tail()}")
            state = self._master_state()
            if state is not None and condition(state):
                return
            time.sleep(0.5)
        self.stop()
        raise ClusterError(f"waited {self.settings.start_timeout_s:g} s (cluster.start_timeout_s) for {what}; "
                           f"the master's log ({self.master.log_file}) ends with:\n{self.master.log_tail()}")


def master_state(web_ui: str, timeout_s: float = 5) -> dict[str, Any] | None:
    """What a standalone master reports at its web UI's /json (its URL, status, workers with their cores,
    applications), or None when nothing answers there with JSON."""
    page = master_page(web_ui, "/json/", timeout_s)
    try:
        return json.loads(page) if page is not None else None
    except ValueError:
        return None


def master_page(web_ui: str, path: str = "/", timeout_s: float = 5) -> str | None:
    """A page of a master's web UI (its front page's header names the Spark version), or None."""
    try:
        with urllib.request.urlopen(f"{web_ui}{path}", timeout=timeout_s) as response:
            return response.read().decode("utf-8", errors="replace")
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _alive(state: dict[str, Any]) -> int:
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


def _versions(spark_home: Path) -> tuple[str, str]:
    """(Scala, Spark) versions from spark-core's jar name, `spark-core_2.13-4.1.1.jar`. Spark's
    launcher (which builds each executor's command in the worker) needs the Scala one named when
    the scripts of a downloaded Spark, which set it, are not used."""
    for jar in (spark_home / "jars").glob("spark-core_*.jar"):
        scala, _, spark = jar.stem.removeprefix("spark-core_").partition("-")
        return scala, spark
    raise ClusterError(f"no spark-core jar in {spark_home / 'jars'}: the pyspark install is incomplete; run `make setup`")
