"""`lakehouse run` as a user runs it: the fast path, the medallion beside it as a low-priority process,
one console view and one progress table for both, one writer per checkpoint."""

from __future__ import annotations

import json
import signal
import socket
import subprocess

import pytest

from analytical.gold_page_clicks_5s import TABLE as GOLD_PAGE_CLICKS_5S
from analytical.registry import STREAMS
from analytical.tables import read_table, is_delta_table
from operational import hot_pages
from operational.alerts_topic import latest_alerts
from shared.kafka import ensure_topics
from shared.services.broker import EmbeddedBroker
from tests.conftest import free_port, make_config
from tests.helpers import LAKEHOUSE, ahead_of_the_clock, click, run_lakehouse, send, wait_for

pytestmark = pytest.mark.integration

#: Every query of both paths, from their declarations.
QUERIES = {hot_pages.STREAM.name, *(stream.name for stream in STREAMS)}


def settings(config_overrides, *more: str) -> list[str]:
    return [f"--set={item}" for item in (*config_overrides, "hot_pages.threshold=3",
                                         "operational.starting_offsets=earliest", "operational.status_interval_s=2",
                                         "analytical.triggers.bronze=1 second", "analytical.triggers.silver=1 second",
                                         "analytical.triggers.gold=1 second", *more)]


def test_run_feeds_both_paths_records_progress_and_refuses_a_second_writer(spark, config, config_overrides, tmp_path):
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    send(config, *(click(f"r{n}", "/run", f"10:00:01.{n:03d}") for n in range(5)), click("tick", "/tick", "10:00:30.000"))
    options = settings(config_overrides)
    log = tmp_path / "run.log"
    with open(log, "w") as stderr:
        running = subprocess.Popen([LAKEHOUSE, "run", *options], stdout=subprocess.PIPE, stderr=stderr, text=True)
        try:
            wait_for(lambda: latest_alerts(config.kafka, config.kafka.topics.alerts).latest, 240, "the alert", every_s=1)
            gold = f"{config.storage.root}/{GOLD_PAGE_CLICKS_5S}"
            wait_for(lambda: is_delta_table(spark, gold) and read_table(spark, config.storage.root, GOLD_PAGE_CLICKS_5S)
                     .where("pageId = '/run'").count() == 1, 240, "the window in gold", every_s=3)

            second = run_lakehouse("run", "--seconds", "5", *options, timeout=120)
            assert second.returncode != 0
            assert "is in use by pid" in second.stderr and "stop that run first" in second.stderr

            running.send_signal(signal.SIGTERM)
            assert running.wait(timeout=120) == 0
        finally:
            running.kill()
    output = log.read_text()
    assert "stop requested: stopping" in output and "Traceback" not in output
    assert all(f"  {name} " in output for name in QUERIES), "one console view of both processes' queries"
    (alert,) = latest_alerts(config.kafka, config.kafka.topics.alerts).latest.values()
    assert (alert.page_id, alert.click_count) == ("/run", 5)

    status = run_lakehouse("status", "--format", "json", *options)
    assert status.returncode == 0, status.stderr
    summary = {row["queryName"]: row for row in json.loads(status.stdout)}
    assert set(summary) == QUERIES
    assert summary["hot_pages"]["batches"] >= 2 and summary["hot_pages"]["errors"] == 0
    assert summary["hot_pages"]["batchMsP50"] > 0


def test_when_one_query_fails_run_stops_the_others_and_exits_non_zero_with_its_error(config, config_overrides):
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    ahead, created = ahead_of_the_clock("e-ahead", "/a")  # the producer's clock 30 minutes ahead
    send(config, ahead, timestamp_ms=created)

    result = run_lakehouse("run", *settings(config_overrides, "quality.policies.silver_clicks=fail",
                                            "quality.max_clock_skew=1 minute"), timeout=300)

    assert result.returncode != 0
    # Spark logs the failure with its stack traces on the way; the command's last word is one line.
    assert result.stderr.strip().splitlines()[-1] == (
        "error: the silver_clicks query failed: expectation failed on silver/clicks (policy fail): "
        "eventTimeNotAheadOfIngest")


def test_a_broker_that_is_down_stops_run_at_once_with_a_clear_message(config_overrides):
    down = f"kafka.bootstrap_servers=127.0.0.1:{free_port()}"
    result = run_lakehouse("run", *(f"--set={item}" for item in (*config_overrides, down)), timeout=120)

    assert result.returncode != 0
    assert "no Kafka broker answers at 127.0.0.1:" in result.stderr and "Traceback" not in result.stderr


def test_the_demo_stops_at_once_with_a_clear_message_when_its_broker_cannot_start(tmp_path):
    with socket.socket() as squatter:  # something that is not a Kafka broker holds the demo's port
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        settings = [f"kafka.bootstrap_servers=127.0.0.1:{port}", f"broker.run_dir={tmp_path / 'broker'}",
                    f"storage.root={tmp_path / 'lake'}"]
        result = run_lakehouse("demo", *(f"--set={item}" for item in settings), timeout=120)

    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: port {port} on 127.0.0.1 is in use")
    assert "Traceback" not in result.stderr
    assert not EmbeddedBroker(make_config(*settings), log=lambda message: None).status().running, "nothing left running"
