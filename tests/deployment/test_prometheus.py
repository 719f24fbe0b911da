"""A real Prometheus (Debian's package) scrapes a running `lakehouse run`, its fast path in the shipped
real-time mode, with the shipped scrape configuration and rules (time compressed,
tests.prometheus_rules): every series is there with values that fit the traffic sent; freezing the
fast path's JVM fires "lag growing" (and not "query down": its Python process still answers, without
the JVM's live readings), and stopping `run` fires "query down" for both paths. Prometheus sends its
alerts to a real Alertmanager with the shipped routes (waiting 1 s before a group's first
notification), whose webhook receiver gets both paths' "query down", and run's bridge's hot pages.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml

from shared import PROJECT_ROOT
from shared.kafka import ensure_topics
from lakehouse.services import prometheus, prometheus_server
from tests.conftest import embedded_alertmanager
from tests.helpers import LAKEHOUSE, wait_for
from shared.runtime import FAST_PATH
from tests.processes import child_jvms, children_running
from tests.prometheus_rules import compressed


CONF = PROJECT_ROOT / "conf" / "prometheus"
RATE = 200  # clicks per second: enough for every series to move, little for 2 cores
OPERATIONAL = ("hot_pages",)
ANALYTICAL = ("medallion", "gold_page_clicks_hourly")


@pytest.fixture
def prometheus_tools() -> prometheus.PrometheusTools:
    found = prometheus.ensure()
    if found is None:
        pytest.skip(prometheus.missing_reason())
    return found


def scrape_configuration(tmp_path: Path, config, alertmanager: str) -> Path:
    """conf/prometheus/prometheus.yml, pointed at this test's ports and Alertmanager (host:port), scraping
    and evaluating every second, with the compressed rules beside it."""
    (tmp_path / "rules.yml").write_text(compressed((CONF / "rules.yml").read_text()))
    shipped = yaml.safe_load((CONF / "prometheus.yml").read_text())
    shipped["global"].update(scrape_interval="1s", evaluation_interval="1s")
    [job] = shipped["scrape_configs"]
    job["scrape_timeout"] = "1s"
    ports = {"operational": config.metrics.operational_port, "analytical": config.metrics.analytical_port}
    for target in job["static_configs"]:
        target["targets"] = [f"{config.metrics.bind_address}:{ports[target['labels']['path']]}"]
    [manager] = shipped["alerting"]["alertmanagers"]
    manager["static_configs"] = [{"targets": [alertmanager]}]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(shipped))
    return path


def quick_routes(tmp_path: Path) -> Path:
    """conf/alertmanager.yml with each group's first notification after 1 s, not the shipped 30 s."""
    routes = yaml.safe_load((PROJECT_ROOT / "conf" / "alertmanager.yml").read_text())
    routes["route"]["group_wait"] = "1s"
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(routes))
    return path


def notified(manager, alertname: str, label: str) -> set[str]:
    """The `label` of each firing `alertname` the receiver got."""
    return {alert["labels"].get(label) for kept in manager.notifications()
            if kept["body"]["status"] == "firing" for alert in kept["body"]["alerts"]
            if alert["labels"]["alertname"] == alertname}


def test_prometheus_scrapes_run_and_the_lag_and_down_rules_fire(prometheus_tools, alertmanager_tools, config,
                                                                config_overrides, tmp_path):
    FAST_PATH.require()  # real-time mode runs in the fast path's runtime (`make setup` installs it)
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    settings = [f"--set={item}" for item in (
        *config_overrides, "hot_pages.threshold=20", "operational.starting_offsets=earliest",
        "operational.mode=real-time", "operational.real_time.checkpoint_interval=10 seconds",
        "analytical.niceness=0", "analytical.triggers.medallion=1 second",
        "analytical.triggers.gold=2 seconds")]
    manager = embedded_alertmanager(tmp_path / "alertmanager", f"alertmanager.config_file={quick_routes(tmp_path)}")
    manager.start(die_with_caller=True)
    settings.append(f"--set=alerting.alertmanager_url={manager.url}")
    server = prometheus_server.PrometheusServer(scrape_configuration(tmp_path, config, manager.url.removeprefix("http://")),
                                                tmp_path / "tsdb", log_file=tmp_path / "prometheus.log",
                                                found=prometheus_tools)
    run_log = tmp_path / "run.log"
    processes: list[subprocess.Popen] = []
    frozen: list[int] = []
    try:
        server.start()
        with open(run_log, "w") as stderr:
            run = subprocess.Popen([LAKEHOUSE, "run", *settings], stdout=subprocess.DEVNULL, stderr=stderr)
        processes.append(run)
        processes.append(subprocess.Popen(
            [LAKEHOUSE, "generate", "--rate", str(RATE), "--seconds", "900", "--hot-pages", "1",
             "--malformed-fraction", "0.02", *settings], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        def running() -> bool:
            assert run.poll() is None, f"run exited with {run.returncode}: {run_log.read_text()[-3000:]}"
            return True

        def value(expr: str) -> dict[str, float]:
            return {sample["metric"].get("query", ""): float(sample["value"][1]) for sample in server.query(expr)}

        def firing(alert: str) -> set[tuple[str, str]]:
            return {(found["labels"].get("path", ""), found["labels"].get("query", "")) for found in server.alerts()
                    if found["labels"]["alertname"] == alert and found["state"] == "firing"}

        # Both processes serve, every query is up and has read clicks, the fast path's real-time batch
        # has ended four times (a report each checkpoint interval): the first batch, read from the
        # earliest offsets, is counted at its end only (live counting starts from a batch's end
        # offsets), and the 20-s rate below must not see that jump.
        every_query = set(OPERATIONAL + ANALYTICAL)
        wait_for(lambda: running() and set(value("lakehouse_query_up == 1")) == every_query
                 and set(value("lakehouse_input_rows_total > 0")) >= {"hot_pages", "medallion"}
                 and value("lakehouse_alerts_emitted_total").get("hot_pages", 0) > 0
                 and value('lakehouse_batch_duration_seconds_count{query="hot_pages"}').get("hot_pages", 0) >= 4,
                 300, "every query up and reading, four real-time batches ended", every_s=2)
        assert value("lakehouse_query_real_time")["hot_pages"] == 1

        # Values that fit what was sent: a fast path keeping up with 200 clicks/s of clicks stamped now.
        assert 0 <= value('lakehouse_kafka_lag_records{query="hot_pages"}')["hot_pages"] < 20 * RATE
        delay = value("lakehouse_watermark_delay_seconds")
        assert 5 <= delay["hot_pages"] < 120, delay  # the 10 s watermark (less the clocks' jitter) plus the report's age
        assert value('rate(lakehouse_input_rows_total{query="hot_pages"}[20s])')["hot_pages"] == pytest.approx(RATE, rel=0.5)
        assert value('lakehouse_trigger_interval_seconds')["medallion"] == 1
        # state rows are not counted by default (spark.rocksdb.count_rows, OPERATIONS.md); the memory is reported
        assert "hot_pages" in value("lakehouse_state_rows") and value("lakehouse_state_memory_bytes")["hot_pages"] > 0
        assert sum(value('lakehouse_invalid_records_total{query="hot_pages"}').values()) > 0  # 2% malformed
        reasons = {sample["metric"]["reason"] for sample in server.query("lakehouse_invalid_records_total")}
        assert {"not_json", "bad_event_time", "page_id_too_long"} <= reasons
        tables = {(sample["metric"]["table"], sample["metric"]["expectation"])
                  for sample in server.query("lakehouse_expectation_failures_total")}
        assert {("gold/page_clicks_5s", "clickCountPositive"), ("silver/clicks", "pageIdPresent")} <= tables
        # (The lag of a query that is catching up, such as the medallion starting from the earliest offsets
        # on two busy cores, may well be growing now; only "down" must be silent.)
        assert firing("LakehouseQueryDown") == set()

        # Starve the fast path: freeze its JVM (a child of run's fast-path process); that Python process
        # still serves the endpoint, without the JVM's live readings.
        [fast_path] = children_running(run.pid, "lakehouse.cli operational")
        [jvm] = child_jvms(fast_path)
        os.kill(jvm, signal.SIGSTOP)
        frozen.append(jvm)
        wait_for(lambda: ("operational", "hot_pages") in firing("LakehouseKafkaLagGrowing"), 120,
                 "LakehouseKafkaLagGrowing for hot_pages", every_s=1)
        assert ("operational", "hot_pages") not in firing("LakehouseQueryDown")
        assert value('lakehouse_kafka_lag_records{query="hot_pages"}')["hot_pages"] > 1000
        os.kill(jvm, signal.SIGCONT)
        frozen.clear()

        # Stop it: both processes go, and with them their endpoints.
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=300) == 0, run_log.read_text()[-3000:]  # each path waits up to 60 s for a batch to end
        wait_for(lambda: {"operational", "analytical"} <= {path for path, _ in firing("LakehouseQueryDown")}, 60,
                 "LakehouseQueryDown for both paths", every_s=1)
        # ... and reach people: Alertmanager's receiver has both paths' queries down, and the hot page
        wait_for(lambda: {"operational", "analytical"} <= notified(manager, "LakehouseQueryDown", "path"), 60,
                 "Alertmanager to notify LakehouseQueryDown for both paths", every_s=1)
        assert notified(manager, "HotPage", "pageId"), "run's bridge delivered the hot page's alerts"
    except BaseException:
        print(server.log_tail(), run_log.read_text()[-3000:] if run_log.exists() else "", sep="\n")
        raise
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        for process in processes:
            process.kill()
            process.wait(timeout=60)
        server.stop()
        manager.stop(quiet=True)
