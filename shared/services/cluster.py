"""The embedded Spark standalone cluster: a master and `cluster.workers` workers on this machine.

Started from the installed pyspark's own classes (`org.apache.spark.deploy.master.Master`,
`...worker.Worker`, the classpath `$SPARK_HOME/jars`), the way `sbin/start-master.sh` and
`sbin/start-worker.sh` start them, with ports, cores and memory from the `cluster` config section
and logs and work folders under `cluster.run_dir`. It is the smallest real cluster: applications
register with the master, executors run in processes the workers launch, and everything travels
between them as it would between machines (jars from the driver, state on executors, shuffles).
`conf/standalone.yaml` points the commands at it.

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
from shared.services.daemon import Daemon, require_free_ports

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(LakehouseError):
    """The cluster could not be started or stopped; the message carries the failing process's log."""


@dataclass(frozen=True)
class ClusterStatus:
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
            "master_url": self.master_url, "web_ui": self.web_ui, "healthy": self.healthy,
            "master_pid": self.master_pid, "worker_pids": self.worker_pids, "alive_workers": self.alive_workers,
            "cores": self.master.get("cores"), "cores_used": self.master.get("coresused"),
            "applications": [{"name": app.get("name"), "cores": app.get("cores"), "state": app.get("state")}
                             for app in self.master.get("activeapps", [])],
        }

    def describe(self) -> str:
        if not self.master_pid:
            return f"not running (master {self.master_url})"
        lines = [f"master {self.master_url} (pid {self.master_pid}), web UI {self.web_ui}: "
                 f"{self.alive_workers} of {len(self.worker_pids)} workers alive, "
                 f"{self.master.get('coresused', 0)} of {self.master.get('cores', 0)} cores in use"]
        lines += [f"  worker {index}: " + (f"pid {pid}" if pid else "not running")
                  for index, pid in enumerate(self.worker_pids, start=1)]
        lines += [f"  application {app['name']}: {app['cores']} cores, {app['state']}"
                  for app in self.as_dict()["applications"]]
        return "\n".join(lines)


class StandaloneCluster:
    """Start, stop and inspect the master and workers whose files live in `cluster.run_dir`."""

    def __init__(self, config: Config, log=print):
        self.settings: ClusterConfig = config.cluster
        self.host = self.settings.host
        self.master_url = f"spark://{self.host}:{self.settings.master_port}"
        self.web_ui = f"http://{self.host}:{self.settings.webui_port}"
        self.run_dir = Path(self.settings.run_dir)
        marker = f"-Dlakehouse.cluster={self.run_dir}"
        self._marker = marker
        self.master = Daemon("master", self.run_dir, marker=[MASTER_CLASS, marker])
        self.workers = [Daemon(f"worker-{index}", self.run_dir, marker=[WORKER_CLASS, marker])
                        for index in range(1, self.settings.workers + 1)]
        self._log = log

    # -- commands ---------------------------------------------------------------------------

    def start(self) -> str:
        """Start what does not run yet; return the master URL once every worker has registered."""
        java = java_executable()
        spark_home = _spark_home()
        ports = {} if self.master.running_pid() else {
            "cluster.master_port": self.settings.master_port, "cluster.webui_port": self.settings.webui_port}
        for index, worker in enumerate(self.workers, start=1):
            if not worker.running_pid():
                ports[f"worker {index}'s web UI (cluster.webui_port + {index})"] = self.settings.webui_port + index
        require_free_ports(self.host, ports)
        env = os.environ | {"SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": self.host,
                            "SPARK_SCALA_VERSION": _scala_version(spark_home),
                            "JAVA_HOME": os.path.dirname(os.path.dirname(os.path.realpath(java)))}
        if not self.master.running_pid():
            self._log(f"starting the Spark master at {self.master_url} (web UI {self.web_ui}; log: {self.master.log_file})")
            self.master.start([*self._java(java, spark_home), MASTER_CLASS, "--host", self.host,
                               "--port", str(self.settings.master_port),
                               "--webui-port", str(self.settings.webui_port)], env=env)
        self._wait_for(lambda state: True, "the master to answer", [self.master])
        for index, worker in enumerate(self.workers, start=1):
            if worker.running_pid():
                continue
            work_dir = self.run_dir / f"worker-{index}"
            work_dir.mkdir(parents=True, exist_ok=True)
            self._log(f"starting worker {index}: {self.settings.worker_cores} cores, "
                      f"{self.settings.worker_memory} for executors (log: {worker.log_file})")
            worker.start([*self._java(java, spark_home), WORKER_CLASS, "--host", self.host,
                          "--webui-port", str(self.settings.webui_port + index),
                          "--cores", str(self.settings.worker_cores), "--memory", self.settings.worker_memory,
                          "--work-dir", str(work_dir), self.master_url], env=env)
        expected = len(self.workers)
        self._wait_for(lambda state: _alive(state) >= expected, f"{expected} workers to register",
                       [self.master, *self.workers])
        self._log(f"cluster ready: {expected} workers, {expected * self.settings.worker_cores} cores")
        return self.master_url

    def stop(self) -> bool:
        """Stop the workers (their executors with them), then the master. False if nothing ran."""
        stopped = False
        for daemon in [*self.workers, self.master]:
            pid = daemon.running_pid()
            if pid:
                self._log(f"stopping {daemon.name} (pid {pid})")
            stopped |= daemon.stop(self.settings.stop_timeout_s, log=self._log)
        self._log("cluster stopped" if stopped else "cluster not running")
        return stopped

    def status(self) -> ClusterStatus:
        master_pid = self.master.running_pid()
        return ClusterStatus(
            master_url=self.master_url, web_ui=self.web_ui, master_pid=master_pid,
            worker_pids=[worker.running_pid() for worker in self.workers],
            master=(self._master_state() or {}) if master_pid else {},
        )

    # -- internals --------------------------------------------------------------------------

    def _java(self, java: str, spark_home: Path) -> list[str]:
        return [java, f"-Xmx{self.settings.daemon_memory}", self._marker, "-cp", str(spark_home / "jars" / "*")]

    def _master_state(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"{self.web_ui}/json/", timeout=5) as response:
                return json.load(response)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def _wait_for(self, condition, what: str, daemons: list[Daemon]) -> None:
        deadline = time.monotonic() + self.settings.start_timeout_s
        while time.monotonic() < deadline:
            for daemon in daemons:
                if not daemon.running_pid():
                    self.stop()
                    raise ClusterError(f"the Spark {daemon.name} exited while the cluster started; its log "
                                       f"({daemon.log_file}) ends with:\n{daemon.log_tail()}")
            state = self._master_state()
            if state is not None and condition(state):
                return
            time.sleep(0.5)
        self.stop()
        raise ClusterError(f"waited {self.settings.start_timeout_s:g} s (cluster.start_timeout_s) for {what}; "
                           f"the master's log ({self.master.log_file}) ends with:\n{self.master.log_tail()}")


def _alive(state: dict[str, Any]) -> int:
    return sum(1 for worker in state.get("workers", []) if worker.get("state") == "ALIVE")


def _scala_version(spark_home: Path) -> str:
    """Spark's launcher (which builds each executor's command in the worker) needs it named when the
    scripts of a downloaded Spark, which set it, are not used: read it from spark-core's jar name."""
    for jar in (spark_home / "jars").glob("spark-core_*.jar"):
        return jar.name.removeprefix("spark-core_").split("-", 1)[0]
    raise ClusterError(f"no spark-core jar in {spark_home / 'jars'}: the pyspark install is incomplete; run `make setup`")


def _spark_home() -> Path:
    """The installed pyspark: its `jars/` is the cluster's classpath, as SPARK_HOME is for a download."""
    import pyspark

    return Path(pyspark.__file__).parent
