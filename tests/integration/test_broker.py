"""The embedded broker's life cycle through the real `lakehouse kafka` commands.

This is the one place a second broker starts: it is the thing under test (the run's shared broker
must not be stopped). Its files live in the test's own folder and it is always stopped.
"""

import json
import os
import socket
import subprocess

import pytest
from kafka.admin import ConfigResource, ConfigResourceType

from lakehouse.services.broker import BrokerError, EmbeddedBroker
from shared.kafka import admin_client, ensure_topics
from tests.conftest import free_port, make_config
from tests.helpers import run_lakehouse, send
from tests.processes import alive


def dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_start_twice_status_and_stop_leave_no_process(tmp_path):
    settings = ["--set", f"broker.run_dir={tmp_path / 'kafka'}", "--set", f"kafka.bootstrap_servers=127.0.0.1:{free_port()}",
                "--set", "kafka.partitions=3"]
    (tmp_path / "kafka").mkdir()
    (tmp_path / "kafka" / "broker.pid").write_text(str(dead_pid()))  # a stale pid file from a crash
    try:
        started = run_lakehouse("kafka", "start", "--timestamp-type", "LogAppendTime", *settings)
        assert started.returncode == 0, started.stderr
        bootstrap = started.stdout.strip()
        assert bootstrap == settings[3].split("=", 1)[1]
        pid = int((tmp_path / "kafka" / "broker.pid").read_text())
        assert alive({pid})

        again = run_lakehouse("kafka", "start", *settings)
        assert again.returncode == 0 and again.stdout.strip() == bootstrap
        assert "already running" in again.stderr
        assert int((tmp_path / "kafka" / "broker.pid").read_text()) == pid

        status = run_lakehouse("kafka", "status", *settings)
        assert status.returncode == 0 and "answering" in status.stdout and str(pid) in status.stdout

        # It made the configured topics (CONTRACT.md's defaults), with the partitions and timestamp type asked for.
        config = make_config(*settings[1::2])
        send(config, b"1", b"2", b"3")
        listed = run_lakehouse("kafka", "topics", "--format", "json", *settings)
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout) == [{"topic": "hot-pages", "partitions": 3, "records": 0},
                                             {"topic": "page-clicks", "partitions": 3, "records": 3}]
        as_csv = run_lakehouse("kafka", "topics", "--format", "csv", *settings).stdout
        assert as_csv.splitlines() == ["topic,partitions,records", "hot-pages,3,0", "page-clicks,3,3"]
        as_table = run_lakehouse("kafka", "topics", *settings).stdout.splitlines()
        assert [line.split() for line in as_table[2:]] == [["hot-pages", "3", "0"], ["page-clicks", "3", "3"]]
        with admin_client(config.kafka) as admin:
            configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "page-clicks")])
        assert "LogAppendTime" in str(configs)
    finally:
        stopped = run_lakehouse("kafka", "stop", *settings)

    assert stopped.returncode == 0, stopped.stderr
    assert not alive({pid})
    assert not (tmp_path / "kafka" / "broker.pid").exists()
    after = run_lakehouse("kafka", "status", *settings)
    assert after.returncode == 1 and "not running" in after.stdout


def test_a_port_in_use_is_refused_before_any_broker_starts(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        result = run_lakehouse("kafka", "start", "--set", f"broker.run_dir={tmp_path}",
                               "--set", f"kafka.bootstrap_servers=127.0.0.1:{port}")

    assert result.returncode == 2
    assert f"port {port}" in result.stderr and "in use" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "broker.pid").exists()


def test_missing_jars_say_to_run_setup(tmp_path):
    env = os.environ | {"LAKEHOUSE_JARS_DIR": str(tmp_path / "no-jars")}
    result = run_lakehouse("kafka", "start", "--set", f"broker.run_dir={tmp_path}",
                           "--set", f"kafka.bootstrap_servers=127.0.0.1:{free_port()}", env=env)

    assert result.returncode == 2
    assert "make setup" in result.stderr and "Traceback" not in result.stderr


def test_a_broker_that_cannot_start_reports_its_log(tmp_path):
    config = make_config(f"broker.run_dir={tmp_path}", f"kafka.bootstrap_servers=127.0.0.1:{free_port()}",
                         "broker.heap_mb=128", "broker.start_timeout_s=60")
    broker = EmbeddedBroker(config, log=lambda message: None)
    broker.run_dir.mkdir(parents=True, exist_ok=True)
    # A data folder formatted for another cluster: the broker refuses to start on it.
    (broker.data_dir).mkdir()
    (broker.data_dir / "meta.properties").write_text("version=1\nnode.id=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\ndirectory.id=not-an-id\n")

    with pytest.raises(BrokerError) as error:
        broker.start()

    assert "log ends with" in str(error.value)
    assert broker.status().running is False


def test_a_storage_that_cannot_be_formatted_is_reported_in_the_formats_words(tmp_path):
    """The first start formats the storage in the broker's own JVM: a format that fails ends that JVM,
    and what it said reaches the user."""
    config = make_config(f"broker.run_dir={tmp_path}", f"kafka.bootstrap_servers=127.0.0.1:{free_port()}",
                         "broker.heap_mb=128", "broker.start_timeout_s=60")
    broker = EmbeddedBroker(config, log=lambda message: None)
    broker.run_dir.mkdir(parents=True, exist_ok=True)
    broker.data_dir.write_text("a file where the data folder goes\n")

    with pytest.raises(BrokerError) as error:
        broker.start()

    assert "formatting the broker storage failed" in str(error.value), error.value
    assert broker.status().running is False


def test_topics_get_the_configured_partitions_and_timestamp_type(broker_overrides):
    config = make_config(*broker_overrides, "kafka.partitions=3")
    name = f"topic-{os.getpid()}-{free_port()}"

    created = ensure_topics(config.kafka, [name], timestamp_type="LogAppendTime")
    again = ensure_topics(config.kafka, [name], timestamp_type="LogAppendTime")

    assert created == [name] and again == []
    with admin_client(config.kafka) as admin:
        described = admin.describe_topics([name])[0]
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    assert len(described["partitions"]) == 3
    assert "LogAppendTime" in str(configs)
