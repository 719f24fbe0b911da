"""Whether the fast path's Spark master can run it, asked before anything starts.

A standalone cluster runs one Spark version, and a driver of another cannot even register with its
master: Spark retries, then says `All masters are unresponsive` with a traceback. A
real-time query also holds a task slot per source and shuffle partition for as long as it runs
(`operational.real_time.task_slots`), so a cluster with fewer free cores cannot start its batch. So
`lakehouse operational` and `run` ask a `spark://` master first, through its web UI (the front page's
header names its Spark version, `/json` its workers' cores and the applications holding them), and where
the fast path cannot run there, one line says what to set and the command exits 2.

- `local[...]` is not asked: the driver is the cluster, its runtime's own Spark.
- `yarn`, `k8s://` and any other master are not asked: there each application brings its Spark (YARN
  ships the driver's own jars unless `spark.yarn.archive` names others, on Kubernetes the executors'
  image decides), and no standalone web UI describes it.
- A master whose web UI does not answer (disabled, behind an authentication filter, on a port other than
  the one looked at) is not refused: a note says it was not asked and what the fast path needs there, and
  the command goes on, Spark's own errors telling the rest. Refusing would stop clusters that work. A
  master that does not even accept a connection is refused: no driver can register with it.
- The web UI looked at: for the embedded clusters' master ports on `cluster.host`, their own
  (`cluster.webui_port`, `cluster.fast_path.webui_port`); else Spark's default, 8080. Its /json must
  name the same master port, or it is another master's UI and the master counts as not asked.
"""

from __future__ import annotations

import re
import socket
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.config import ClusterConfig, Config
from shared.errors import LakehouseError
from operational.mode import fast_path_mode

#: Spark standalone's defaults: a master's port and its web UI's (`spark.master.ui.port`).
DEFAULT_MASTER_PORT = 7077
DEFAULT_WEB_UI_PORT = 8080
#: How long one question to a master may take: a refusal comes within seconds.
ASK_TIMEOUT_S = 3.0

#: The version in the web UI's header: `<span class="version" ...>4.1.3</span>` (Spark 1.x to 4.3).
_VERSION = re.compile(r'<span class="version[^"]*"[^>]*>\s*(\d+\.\d+[^<\s]*)\s*</span>')


def standalone_addresses(master: str) -> list[tuple[str, int]]:
    """(host, port) of each master of a `spark://host:port[,host:port...]` URL; [] for any other master."""
    if not master.startswith("spark://"):
        return []
    addresses = []
    for part in master.removeprefix("spark://").split(","):
        host, colon, port = part.strip().rpartition(":")
        if colon and port.isdigit():
            addresses.append((host, int(port)))
        else:
            addresses.append((part.strip(), DEFAULT_MASTER_PORT))
    return addresses


def spark_version_in(page: str) -> str | None:
    """The Spark version a master's web UI names in its header, or None."""
    found = _VERSION.search(page)
    return found.group(1) if found else None


def minor(version: str) -> str:
    """`4.3.0` -> `4.3`: drivers and executors of one minor version work together."""
    return ".".join(version.split(".")[:2])


@dataclass(frozen=True)
class MasterReport:
    """What a standalone master says about itself."""

    #: The master port it names (its /json's `url`).
    port: int
    status: str
    #: None when its web UI's front page named none.
    version: str | None
    #: Cores of its ALIVE workers, and of those the ones no application holds.
    cores: int
    free_cores: int
    #: Active application name -> cores it holds.
    holders: dict[str, int]

    @classmethod
    def of(cls, state: dict[str, Any], version: str | None) -> "MasterReport":
        """From its web UI's /json and the version its front page names."""
        alive = [worker for worker in state.get("workers", []) if worker.get("state") == "ALIVE"]
        holders: Counter[str] = Counter()
        for app in state.get("activeapps", []):
            holders[str(app.get("name") or app.get("id"))] += int(app.get("cores") or 0)
        named = standalone_addresses(str(state.get("url", "")))
        return cls(port=named[0][1] if named else -1, status=str(state.get("status", "")), version=version,
                   cores=sum(int(worker.get("cores", 0)) for worker in alive),
                   free_cores=sum(int(worker.get("cores", 0)) - int(worker.get("coresused", 0)) for worker in alive),
                   holders=dict(holders))


@dataclass(frozen=True)
class Need:
    """What the fast path will ask of its master."""

    master: str
    #: The config key that names the master (what to change).
    key: str
    real_time: bool
    #: The Spark its driver runs: the fast path's runtime in real-time mode, else the command's.
    spark_version: str
    #: The cores a real-time query holds all along.
    task_slots: int
    #: The Spark micro-batch mode would run on instead (the medallion's runtime, where `lakehouse` is).
    micro_batch_version: Callable[[], str]

    @property
    def where(self) -> str:
        return f"the fast path's Spark master {self.master} ({self.key})"

    @property
    def wanted(self) -> str:
        return f"Spark {minor(self.spark_version)}.x" + (f" and {self.task_slots} free cores" if self.real_time else "")


def refusal(need: Need, report: MasterReport) -> str | None:
    """Why the fast path cannot run on the master that sent `report`, as one line saying what to set;
    None when it can."""
    if report.version and minor(report.version) != minor(need.spark_version):
        wanted = f"a cluster of Spark {minor(need.spark_version)}.x"
        if not need.real_time:
            return (f"{need.where} runs Spark {report.version}, and micro-batch mode runs the fast path on this "
                    f"runtime's Spark {need.spark_version}: set {need.key} to {wanted}")
        here = minor(report.version) == minor(need.micro_batch_version())
        return (f"{need.where} runs Spark {report.version}, and real-time mode runs the fast path on its runtime's "
                f"Spark {need.spark_version}, driver and executors alike: set operational.real_time.master to {wanted}"
                + (", or operational.mode: micro-batch to run on this one" if here else ""))
    if need.real_time and report.free_cores < need.task_slots:
        held = ", ".join(f"{name} holds {cores}" for name, cores in report.holders.items())
        return (f"{need.where} has {report.free_cores} free cores of {report.cores} on its alive workers"
                + (f" ({held})" if held else "")
                + f", and real-time mode holds operational.real_time.task_slots = {need.task_slots} for as long as "
                  f"it runs: free {need.task_slots - report.free_cores} more there (stop an application holding "
                  "them, or add workers)")
    return None


def master_key(config: Config) -> str:
    """The config key that names the fast path's master."""
    if "spark.master" in config.operational.spark_conf:
        return "operational.spark_conf"
    if fast_path_mode(config).real_time and config.operational.real_time.master:
        return "operational.real_time.master"
    return "spark.master"


def web_ui_port(cluster: ClusterConfig, host: str, port: int) -> int:
    """Where a master's web UI is looked for: the embedded clusters' own, else Spark's default."""
    if host == cluster.host:
        embedded = {cluster.master_port: cluster.webui_port, cluster.fast_path.master_port: cluster.fast_path.webui_port}
        return embedded.get(port, DEFAULT_WEB_UI_PORT)
    return DEFAULT_WEB_UI_PORT


def ask(host: str, port: int, web_ui: str) -> MasterReport | None:
    """The report of the master at host:port from its web UI, or None when that UI does not answer or
    is another master's."""
    from lakehouse.services.cluster import master_page, master_state

    state = master_state(web_ui, ASK_TIMEOUT_S)
    if state is None:
        return None
    report = MasterReport.of(state, spark_version_in(master_page(web_ui, "/", ASK_TIMEOUT_S) or ""))
    return report if report.port == port else None


def accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=ASK_TIMEOUT_S):
            return True
    except OSError:
        return False


def require_fit_master(config: Config, note: Callable[[str], None] | None) -> None:
    """Before the fast path starts: raise a LakehouseError (one line, exit 2) when its `spark://` master
    cannot run it; `note` is told when the master could not be asked (None: say nothing)."""
    from shared.runtime import MEDALLION, current
    from shared.spark import spark_conf

    mode = fast_path_mode(config)
    master = spark_conf(config, class_archive=False, application="operational",
                        application_settings=mode.session_settings)["spark.master"]
    addresses = standalone_addresses(master)
    if not addresses:
        return
    real_time = mode.real_time
    need = Need(master, master_key(config), real_time, (mode.runtime if real_time else current()).spark_version(),
                config.operational.real_time.task_slots, MEDALLION.spark_version)
    web_uis = [f"http://{host}:{web_ui_port(config.cluster, host, port)}" for host, port in addresses]
    for (host, port), web_ui in zip(addresses, web_uis):
        report = ask(host, port, web_ui)
        if report is not None and report.status == "ALIVE":  # the one drivers register with (others: standby)
            reason = refusal(need, report)
            if reason:
                raise LakehouseError(reason)
            return
    if not any(accepts_connections(host, port) for host, port in addresses):
        raise LakehouseError(f"no Spark master answers at {master} ({need.key}): start it (`lakehouse cluster "
                             f"start` starts the embedded ones) or set {need.key} to one that runs")
    if note is not None:
        note(f"note: {need.where} was not asked for its Spark version and free cores (no web UI of it answers at "
             f"{', '.join(web_uis)}); the fast path needs {need.wanted} there, or its query will not start")
