"""conf/prometheus/ as an operator copies it: Prometheus accepts the scrape configuration and the rules,
every alert is unit-tested both ways, the rules survive the integration tests' time compression, and
the Grafana dashboard graphs every lakehouse_* series with valid PromQL.

promtool and prometheus come from the PATH or from `.tools/prometheus` (make setup installs Debian's
package there); these tests install it when missing and skip, with the reason, only when that fails
(in CI, where LAKEHOUSE_TESTS_SKIP=never, that skip fails the run).
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml

from shared import PROJECT_ROOT
from lakehouse.services import prometheus, prometheus_server
from lakehouse.services.daemon import free_port
from tests.helpers import wait_for
from tests.prometheus_rules import FOR, RANGE, compressed

CONF = PROJECT_ROOT / "conf" / "prometheus"
SCRAPE_CONFIG = CONF / "prometheus.yml"
RULES = CONF / "rules.yml"
RULE_TESTS = CONF / "rules.test.yml"
DASHBOARD = CONF / "grafana-dashboard.json"

#: Every series the endpoint serves (lakehouse/monitoring/metrics.py), each of which the dashboard must graph.
METRICS = (
    "lakehouse_query_up", "lakehouse_query_failures_total", "lakehouse_batches_total",
    "lakehouse_input_rows_total", "lakehouse_input_rows_per_second", "lakehouse_processed_rows_per_second",
    "lakehouse_batch_duration_seconds", "lakehouse_last_batch_duration_seconds",
    "lakehouse_trigger_interval_seconds", "lakehouse_kafka_lag_records", "lakehouse_watermark_delay_seconds",
    "lakehouse_watermark_allowed_lateness_seconds", "lakehouse_state_rows", "lakehouse_state_memory_bytes",
    "lakehouse_late_rows_dropped_total", "lakehouse_invalid_records_total",
    "lakehouse_expectation_failures_total", "lakehouse_alerts_emitted_total",
    "lakehouse_last_progress_timestamp_seconds", "lakehouse_query_real_time",
    "lakehouse_running_batch_records_read", "lakehouse_last_alert_timestamp_seconds",
    "lakehouse_gold_freshness_seconds",
)



@pytest.fixture(scope="module")
def tools() -> prometheus.PrometheusTools:
    found = prometheus.ensure()
    if found is None:
        pytest.skip(prometheus.missing_reason())
    return found


def promtool_ok(tools: prometheus.PrometheusTools, *args: str) -> str:
    result = tools.promtool_run(*args)
    output = f"$ promtool {' '.join(args)}\n{result.stdout}{result.stderr}"
    assert result.returncode == 0, output
    return output


def alerting_rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
            if "alert" in rule]


def test_the_scrape_configuration_is_valid(tools):
    promtool_ok(tools, "check", "config", str(SCRAPE_CONFIG))


def test_the_scrape_configuration_scrapes_both_processes():
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    assert config["rule_files"] == ["rules.yml"]
    assert config["global"]["scrape_interval"] == config["global"]["evaluation_interval"] == "15s"
    [job] = config["scrape_configs"]
    assert job["job_name"] == "lakehouse"
    targets = {target: group["labels"]["path"] for group in job["static_configs"] for target in group["targets"]}
    assert targets == {"127.0.0.1:9471": "operational", "127.0.0.1:9472": "analytical"}


def test_the_rules_are_valid(tools):
    promtool_ok(tools, "check", "rules", str(RULES))


def test_the_rules_unit_tests_pass(tools):
    promtool_ok(tools, "test", "rules", str(RULE_TESTS))


def test_every_alert_is_tested_firing_and_silent():
    alerts = {rule["alert"] for rule in alerting_rules()}
    cases = [case for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
             for case in test.get("alert_rule_test", [])]
    firing = {case["alertname"] for case in cases if case.get("exp_alerts")}
    silent = {case["alertname"] for case in cases if not case.get("exp_alerts")}

    assert len(alerts) == 13
    assert alerts - firing == set(), "alerts no test sees firing"
    assert alerts - silent == set(), "alerts no test sees silent on a healthy series"
    assert (firing | silent) - alerts == set(), "tests of alerts rules.yml does not have"


def test_every_alert_has_a_severity_and_says_what_and_where():
    for rule in alerting_rules():
        assert rule["labels"]["severity"] in ("critical", "warning"), rule["alert"]
        assert rule["alert"].startswith("Lakehouse"), rule["alert"]
        annotations = rule["annotations"]
        assert set(annotations) >= {"summary", "description"}, rule["alert"]
        assert "$labels.instance" in annotations["description"], rule["alert"]


def test_the_rules_survive_the_time_compression_of_the_integration_tests(tools, tmp_path):
    text = RULES.read_text()
    # Only plain ranges (no subquery such as [5m:1m], no multi-unit [1h30m]) and plain `for:` values,
    # so that the rewrite leaves nothing uncompressed.
    assert re.findall(r"\[[^\]]*\]", text) == RANGE.findall(text)
    assert len(FOR.findall(text)) == sum(1 for rule in alerting_rules() if "for" in rule)
    rewritten = tmp_path / "rules.yml"
    rewritten.write_text(compressed(text))

    promtool_ok(tools, "check", "rules", str(rewritten))
    assert "[5m]" not in rewritten.read_text() and "for: 10m" not in rewritten.read_text()


def dashboard_exprs(dashboard: dict) -> list[str]:
    panels = [*dashboard["panels"], *(inner for panel in dashboard["panels"] for inner in panel.get("panels", []))]
    return [target["expr"] for panel in panels for target in panel.get("targets", []) if target.get("expr")]


def test_the_dashboard_graphs_every_series():
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = "\n".join(dashboard_exprs(dashboard))

    missing = [name for name in METRICS if not re.search(rf"\b{name}(_bucket|_sum|_count)?\b", exprs)]
    assert missing == []
    assert dashboard["schemaVersion"] >= 36
    variables = {variable["name"]: variable for variable in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert {"path", "query"} <= set(variables)
    for panel in dashboard["panels"]:
        if panel.get("targets"):
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_the_dashboard_queries_are_valid_promql(tools, tmp_path):
    """Each panel's expression, with Grafana's variables filled in, as a recording rule promtool parses."""
    exprs = dashboard_exprs(json.loads(DASHBOARD.read_text()))
    filled = [expr.replace("$__rate_interval", "1m").replace("$__range", "1h").replace("$path", ".*")
              .replace("$query", ".*") for expr in exprs]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:panel_{index}", "expr": expr} for index, expr in enumerate(filled)]}]}
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump(rules))

    promtool_ok(tools, "check", "rules", str(path))


class _Metrics(BaseHTTPRequestHandler):
    """A stand-in /metrics: the fast path's query has terminated, bronze runs."""

    body = (b"# TYPE lakehouse_query_up gauge\n"
            b'lakehouse_query_up{query="hot_pages"} 0\n'
            b'lakehouse_query_up{query="bronze_clicks"} 1\n')

    def do_GET(self) -> None:  # noqa: N802 (the http.server API)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_live_prometheus_scrapes_and_fires_query_down_for_a_query_and_for_a_dead_process(tools, tmp_path):
    """PrometheusServer end to end, on the real rules compressed as the integration tests do: one
    endpoint serving a query that is down, one port where nothing listens."""
    endpoint = ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    threading.Thread(target=endpoint.serve_forever, daemon=True).start()
    live, dead = f"127.0.0.1:{endpoint.server_address[1]}", f"127.0.0.1:{free_port('127.0.0.1')}"
    (tmp_path / "rules.yml").write_text(compressed(RULES.read_text()))
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": ["rules.yml"],
        "scrape_configs": [{"job_name": "lakehouse", "static_configs": [
            {"targets": [live], "labels": {"path": "operational"}},
            {"targets": [dead], "labels": {"path": "analytical"}}]}],
    }))
    server = prometheus_server.PrometheusServer(config, tmp_path / "data", log_file=tmp_path / "prometheus.log",
                                         found=tools)
    try:
        server.start()

        def firing() -> set[tuple[str, str]]:
            return {(alert["labels"]["instance"], alert["labels"].get("query", ""))
                    for alert in server.alerts()
                    if alert["labels"]["alertname"] == "LakehouseQueryDown" and alert["state"] == "firing"}

        wait_for(lambda: firing() == {(live, "hot_pages"), (dead, "")}, 30, "LakehouseQueryDown firing",
                 every_s=0.5)
        health = {target["labels"]["instance"]: target["health"] for target in server.targets()}
        assert health == {live: "up", dead: "down"}
        values = {sample["metric"]["query"]: sample["value"][1] for sample in server.query("lakehouse_query_up")}
        assert values == {"hot_pages": "0", "bronze_clicks": "1"}
    except BaseException:
        print(server.log_tail())
        raise
    finally:
        server.stop()
        endpoint.shutdown()
        endpoint.server_close()
