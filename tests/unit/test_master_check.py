"""Whether the fast path's Spark master can run it (lakehouse.master_check): what a master's web UI says ->
the verdict and its one line, and the check as a command makes it, against a stand-in web UI (no JVM)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from shared.errors import LakehouseError
from lakehouse.master_check import MasterReport, Need, refusal, require_fit_master, spark_version_in, standalone_addresses
from shared.runtime import FAST_PATH, MEDALLION
from tests.conftest import free_port, make_config

#: The headers of Spark 4.1's and 4.3's master web UI, as they serve them.
HEADER_4_1 = '<a style="text-decoration: none" href="/">\n <span class="version" style="margin-right: 15px;">4.1.3</span>\n</a>'
HEADER_4_3 = '<a class="text-decoration-none" href="/">\n <span class="version me-3">4.3.0</span>\n</a>'


def master_json(port: int, *workers: tuple[str, int, int], apps: dict[str, int] | None = None) -> dict:
    """A master's /json: workers as (state, cores, cores used), active applications by name."""
    return {"url": f"spark://127.0.0.1:{port}", "status": "ALIVE",
            "workers": [{"state": state, "cores": cores, "coresused": used} for state, cores, used in workers],
            "activeapps": [{"name": name, "cores": cores, "state": "RUNNING"} for name, cores in (apps or {}).items()]}


def need(real_time: bool = True, spark_version: str = "4.3.0", key: str = "operational.real_time.master") -> Need:
    return Need("spark://m:7077", key, real_time, spark_version, task_slots=4, micro_batch_version=lambda: "4.1.3")


def report(version: str | None, *workers: tuple[str, int, int], apps: dict[str, int] | None = None) -> MasterReport:
    return MasterReport.of(master_json(7077, *workers, apps=apps), version)


def test_only_standalone_masters_are_asked_each_of_a_high_availability_list():
    for not_asked in ("local[4]", "local", "local-cluster[2,1,1024]", "yarn", "k8s://https://kubernetes.default.svc"):
        assert standalone_addresses(not_asked) == []
    assert standalone_addresses("spark://127.0.0.1:7078") == [("127.0.0.1", 7078)]
    assert standalone_addresses("spark://a:7077,b:7177") == [("a", 7077), ("b", 7177)]
    assert standalone_addresses("spark://spark-master") == [("spark-master", 7077)]


def test_the_version_is_read_from_either_runtimes_web_ui_header():
    assert spark_version_in(f"<html>{HEADER_4_1}Spark Master at spark://h:7077</html>") == "4.1.3"
    assert spark_version_in(f"<html>{HEADER_4_3}</html>") == "4.3.0"
    assert spark_version_in("<html>Unauthorized</html>") is None


def test_free_cores_are_the_alive_workers_cores_no_application_holds():
    seen = report("4.3.0", ("ALIVE", 4, 1), ("ALIVE", 2, 0), ("DEAD", 8, 0), apps={"etl": 1})
    assert (seen.cores, seen.free_cores, seen.holders, seen.port) == (6, 5, {"etl": 1}, 7077)


def test_a_cluster_of_the_medallions_spark_is_refused_naming_both_ways_out():
    assert refusal(need(), report("4.1.3", ("ALIVE", 4, 0))) == (
        "the fast path's Spark master spark://m:7077 (operational.real_time.master) runs Spark 4.1.3, and real-time "
        "mode runs the fast path on its runtime's Spark 4.3.0, driver and executors alike: set "
        "operational.real_time.master to a cluster of Spark 4.3.x, or operational.mode: micro-batch to run on this one")
    # micro-batch mode would not run on a third version either: only the first way out is offered
    assert refusal(need(), report("3.5.1", ("ALIVE", 4, 0))).endswith("to a cluster of Spark 4.3.x")
    # another patch release of the same minor version works with the driver
    assert refusal(need(), report("4.3.1", ("ALIVE", 4, 0))) is None


def test_a_cluster_without_a_free_core_for_every_long_running_task_is_refused():
    assert refusal(need(), report("4.3.0", ("ALIVE", 4, 2), apps={"clickstream-lakehouse-operational": 2})) == (
        "the fast path's Spark master spark://m:7077 (operational.real_time.master) has 2 free cores of 4 on its "
        "alive workers (clickstream-lakehouse-operational holds 2), and real-time mode holds "
        "operational.real_time.task_slots = 4 for as long as it runs: free 2 more there (stop an application "
        "holding them, or add workers)")
    assert refusal(need(), report("4.3.0", ("ALIVE", 2, 0), ("ALIVE", 2, 0))) is None
    assert "has 0 free cores of 0" in refusal(need(), report("4.3.0", ("DEAD", 4, 0)))


def test_micro_batch_mode_needs_its_drivers_version_and_no_reserved_cores():
    micro_batch = need(real_time=False, spark_version="4.1.3", key="spark.master")
    assert refusal(micro_batch, report("4.1.3", ("ALIVE", 1, 1))) is None
    assert refusal(micro_batch, report("4.3.0", ("ALIVE", 4, 0))) == (
        "the fast path's Spark master spark://m:7077 (spark.master) runs Spark 4.3.0, and micro-batch mode runs "
        "the fast path on this runtime's Spark 4.1.3: set spark.master to a cluster of Spark 4.1.x")


def test_a_web_ui_without_a_version_is_still_asked_for_its_cores():
    assert refusal(need(), report(None, ("ALIVE", 4, 0))) is None
    assert refusal(need(), report(None, ("ALIVE", 2, 0))) is not None


class StandInMaster:
    """A Spark master's web UI as far as the check reads it: its front page and /json."""

    def __init__(self, front_page: str, state: dict):
        pages = {"/": front_page, "/json/": json.dumps(state)}

        class Pages(BaseHTTPRequestHandler):
            def do_GET(self):
                body = pages.get(self.path, "").encode()
                self.send_response(200 if self.path in pages else 404)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listening_port():
    """A port something listens on, as a master's RPC port does."""
    with socket.socket() as rpc:
        rpc.bind(("127.0.0.1", 0))
        rpc.listen()
        yield rpc.getsockname()[1]


def standalone(rpc_port: int, web_ui_port: int, *more: str):
    return make_config("operational.mode=real-time", "cluster.host=127.0.0.1", f"cluster.master_port={rpc_port}",
                       f"cluster.webui_port={web_ui_port}", f"spark.master=spark://127.0.0.1:{rpc_port}", *more)


def test_the_check_asks_the_web_ui_of_the_master_it_will_use(listening_port):
    ui = StandInMaster(f"<html>{HEADER_4_1}</html>", master_json(listening_port, ("ALIVE", 1, 0), ("ALIVE", 1, 0)))
    notes = []
    try:
        with pytest.raises(LakehouseError) as refused:
            require_fit_master(standalone(listening_port, ui.port), notes.append)
        assert str(refused.value).startswith(
            f"the fast path's Spark master spark://127.0.0.1:{listening_port} (spark.master) runs Spark "
            f"{MEDALLION.spark_version()}, and real-time mode runs the fast path on its runtime's Spark "
            f"{FAST_PATH.spark_version()}")
        # micro-batch mode runs on this runtime's Spark, the medallion's: the same cluster is fine
        require_fit_master(standalone(listening_port, ui.port, "operational.mode=micro-batch"), notes.append)
    finally:
        ui.close()
    assert notes == []


def test_a_master_that_cannot_be_asked_gets_a_note_and_one_that_is_not_there_a_refusal(listening_port):
    other = StandInMaster(f"<html>{HEADER_4_3}</html>", master_json(listening_port + 1, ("ALIVE", 4, 0)))
    notes = []
    try:  # the UI looked at is another master's: not asked
        require_fit_master(standalone(listening_port, other.port), notes.append)
    finally:
        other.close()
    (note,) = notes
    assert note.startswith(f"note: the fast path's Spark master spark://127.0.0.1:{listening_port} (spark.master) "
                           "was not asked for its Spark version and free cores")
    assert note.endswith("needs Spark 4.3.x and 4 free cores there, or its query will not start")

    nobody = free_port()
    with pytest.raises(LakehouseError, match=rf"^no Spark master answers at spark://127.0.0.1:{nobody} "
                                             r"\(operational.real_time.master\): start it"):
        require_fit_master(make_config("operational.mode=real-time",
                                       f"operational.real_time.master=spark://127.0.0.1:{nobody}"), notes.append)


def test_local_yarn_and_kubernetes_masters_are_not_asked():
    for master in ("local[2]", "yarn", "k8s://https://kubernetes.default.svc"):
        require_fit_master(make_config("operational.mode=real-time", f"spark.master={master}"), note=pytest.fail)
