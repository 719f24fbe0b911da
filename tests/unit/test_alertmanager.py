"""What the bridge posts to Alertmanager for a hot window, and the shipped Alertmanager configuration:
valid for amtool, routing each hot window to a group of its own, and inhibiting by rules that exist."""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from lakehouse.services.alertmanager import ALERTMANAGER, DEBIAN_ASSETS, RELATIVE_ASSETS, with_receivers_at
from operational.alertmanager_alerts import as_alertmanager_alert, unfit
from shared import PROJECT_ROOT
from shared.alerts_topic import Alert

SHIPPED = PROJECT_ROOT / "conf" / "alertmanager.yml"
RULES = PROJECT_ROOT / "conf" / "prometheus" / "rules.yml"
ALERT = Alert("a1", "/sale page", "2026-11-22T10:00:00.000Z", "2026-11-22T10:00:05.000Z", 5210, 5000,
              "2026-11-22T10:00:05.012Z", 0, 0, 7)


def test_a_hot_window_is_one_alert_named_by_its_window_that_resolves_after_it():
    posted_at = datetime(2026, 11, 22, 10, 0, 6, tzinfo=timezone.utc)
    alert = as_alertmanager_alert(ALERT, posted_at, timedelta(minutes=5), "https://g/d?page={pageId}&from={windowStart}")
    assert alert["labels"] == {"alertname": "HotPage", "pageId": "/sale page", "windowStart": "2026-11-22T10:00:00.000Z"}
    assert alert["annotations"]["clickCount"] == "5210" and alert["annotations"]["threshold"] == "5000"
    assert alert["startsAt"] == "2026-11-22T10:00:05.012Z"
    assert alert["endsAt"] == "2026-11-22T10:05:06.000Z", "5 minutes past its first post, which came after the window"
    assert alert["generatorURL"] == "https://g/d?page=%2Fsale%20page&from=2026-11-22T10%3A00%3A00.000Z"
    early = as_alertmanager_alert(ALERT, datetime(2026, 11, 22, 10, 0, 1, tzinfo=timezone.utc), timedelta(minutes=5), "x")
    assert early["endsAt"] == "2026-11-22T10:05:05.000Z", "5 minutes past the window's end"


def test_the_embedded_receivers_webhooks_move_to_its_port_and_others_stay():
    routes = {"route": {"receiver": "a"}, "receivers": [
        {"name": "a", "webhook_configs": [{"url": "http://127.0.0.1:9095/on-call", "send_resolved": True}]},
        {"name": "b", "webhook_configs": [{"url": "https://hooks.example.com/x"}]},
        {"name": "c", "email_configs": [{"to": "x@example.com"}]}]}
    moved = with_receivers_at(routes, 19999)
    assert [hook["url"] for receiver in moved["receivers"] for hook in receiver.get("webhook_configs", [])] == [
        "http://127.0.0.1:19999/on-call", "https://hooks.example.com/x"]
    assert moved["receivers"][2] == routes["receivers"][2] and moved["route"] == routes["route"]


def test_the_relative_assets_path_takes_the_place_of_debians_byte_for_byte():
    assert len(RELATIVE_ASSETS) == len(DEBIAN_ASSETS)
    assert RELATIVE_ASSETS.replace(b"//", b"/").replace(b"//", b"/").endswith(b"/alertmanager")


def test_the_shipped_configuration_routes_each_hot_window_alone_and_inhibits_by_rules_that_exist():
    shipped = yaml.safe_load(SHIPPED.read_text())
    [hot] = [route for route in shipped["route"]["routes"] if 'alertname="HotPage"' in route["matchers"]]
    assert set(hot["group_by"]) == {"alertname", "pageId", "windowStart"}
    rules = {rule["alert"] for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]}
    named = {matcher.split('"')[1] for inhibit in shipped["inhibit_rules"] for matcher in inhibit["source_matchers"]}
    named |= {name for inhibit in shipped["inhibit_rules"] for matcher in inhibit["target_matchers"]
              for name in matcher.split('"')[1].split("|")}
    assert named and named <= rules, named - rules


def test_amtool_accepts_the_shipped_configuration():
    programs = ALERTMANAGER.ensure()
    if programs is None:
        pytest.skip(ALERTMANAGER.why)
    checked = subprocess.run([str(programs["amtool"]), "check-config", str(SHIPPED)], capture_output=True, text=True)
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout, checked.stdout + checked.stderr


def test_an_alert_with_a_time_alertmanager_cannot_read_is_unfit():
    from dataclasses import replace

    assert unfit(ALERT) is None
    assert unfit(replace(ALERT, window_end="soon")) == "windowEnd is not an ISO-8601 instant: 'soon'"
    assert unfit(replace(ALERT, emitted_at="2026-11-22T10:00:05")) == "emittedAt has no time zone: '2026-11-22T10:00:05'"
