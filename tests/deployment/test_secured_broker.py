"""Both paths, `lakehouse alerts` and the admin against the embedded broker with a SASL_SSL listener
(TLS from a CA made at start, SCRAM-SHA-512 users), credentials from the environment only; each way
of getting the security wrong (password, CA, plaintext against TLS and TLS against plaintext) is one
clear message; the password is written nowhere. And both paths over an SSL listener: TLS without a
client login."""

from __future__ import annotations

import os
import secrets
import uuid
from pathlib import Path

import pytest

from lakehouse.services.broker import EmbeddedBroker
from tests.conftest import COMMAND_JVMS, TEST_SETTINGS, free_port, make_config
from tests.helpers import run_lakehouse
from tests.run_scenario import alerted, expected_alerts, expected_windows, gold, run_on_crafted_traffic, run_options


USER = "lakehouse-test"


def _started(overrides: list[str], env: dict[str, str]) -> None:
    started = run_lakehouse("kafka", "start", *(f"--set={item}" for item in overrides), env=env, timeout=180)
    assert started.returncode == 0, started.stderr


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """(--set values of a secured broker, the environment holding its client's credentials)."""
    run_dir = tmp_path_factory.mktemp("secured-broker")
    password = f"pw-{secrets.token_urlsafe(18)}"  # distinctive: searched for in everything written
    env = {**os.environ, "KAFKA_SASL_USERNAME": USER, "KAFKA_SASL_PASSWORD": password}
    overrides = [f"kafka.bootstrap_servers=127.0.0.1:{free_port()}", f"broker.run_dir={run_dir}",
                 "kafka.security.protocol=SASL_SSL", "kafka.security.sasl_mechanism=SCRAM-SHA-512",
                 "kafka.security.sasl_username=${KAFKA_SASL_USERNAME}",
                 "kafka.security.sasl_password=${KAFKA_SASL_PASSWORD}",
                 f"kafka.security.ssl_cafile={run_dir / 'tls' / 'ca.pem'}"]
    saved = dict(os.environ)
    os.environ.update(KAFKA_SASL_USERNAME=USER, KAFKA_SASL_PASSWORD=password)  # this process's clients
    _started(overrides, env)
    yield overrides, env, password
    EmbeddedBroker(make_config(*overrides), log=lambda message: None).stop(quiet=True)
    os.environ.clear()
    os.environ.update(saved)


@pytest.fixture(scope="module")
def tls_only(tmp_path_factory):
    """(--set values of a broker with an SSL listener: TLS, and no client login, as some clusters run)."""
    run_dir = tmp_path_factory.mktemp("tls-broker")
    overrides = [f"kafka.bootstrap_servers=127.0.0.1:{free_port()}", f"broker.run_dir={run_dir}",
                 "kafka.security.protocol=SSL", f"kafka.security.ssl_cafile={run_dir / 'tls' / 'ca.pem'}"]
    _started(overrides, dict(os.environ))
    yield overrides, dict(os.environ), None
    EmbeddedBroker(make_config(*overrides), log=lambda message: None).stop(quiet=True)


def _settings(secured, tmp_path: Path) -> tuple[list[str], object]:
    overrides, _, _ = secured
    suffix = uuid.uuid4().hex[:10]
    settings = [*overrides, f"kafka.topics.clicks=clicks-{suffix}", f"kafka.topics.alerts=alerts-{suffix}",
                f"storage.root={tmp_path / 'lakehouse'}", *TEST_SETTINGS, *COMMAND_JVMS]
    return settings, make_config(*settings)


def test_both_paths_and_alerts_work_over_sasl_ssl_and_write_the_password_nowhere(spark, secured, tmp_path):
    _, env, password = secured
    settings, config = _settings(secured, tmp_path)
    # the fast path in real-time mode: its own runtime's Spark and Kafka connector over SASL_SSL
    output = run_on_crafted_traffic(spark, config, run_options(settings, "operational.mode=real-time"),
                                    tmp_path / "run.log", env=env, real_time=True)

    assert "Traceback" not in output and "hot pages (real-time)" in output
    assert alerted(config) == expected_alerts(real_time=True) and gold(spark, config) == expected_windows()
    alerts = run_lakehouse("alerts", "--format", "json", *(f"--set={item}" for item in settings), env=env)
    assert alerts.returncode == 0, alerts.stderr
    assert alerts.stdout.count('"pageId": "/run"') == len(expected_alerts(real_time=True))

    shown = run_lakehouse("config", *(f"--set={item}" for item in settings), env=env)
    assert shown.returncode == 0 and USER in shown.stdout
    written = [path for path in (Path(config.storage.root).rglob("*")) if path.is_file()]
    written += [path for path in Path(config.broker.run_dir).rglob("*") if path.is_file() and "data" not in path.parts]
    assert len(written) > 20  # checkpoints, tables, ops/stream_progress, the broker's logs
    holding = [str(path) for path in written if password.encode() in path.read_bytes()]
    assert holding == [] and password not in output and password not in shown.stdout


def test_both_paths_work_over_tls_without_a_login_and_plaintext_is_refused(spark, tls_only, tmp_path):
    settings, config = _settings(tls_only, tmp_path)
    output = run_on_crafted_traffic(spark, config, run_options(settings, "operational.mode=real-time"),
                                    tmp_path / "run.log", real_time=True)

    assert "Traceback" not in output and "hot pages (real-time)" in output
    assert alerted(config) == expected_alerts(real_time=True) and gold(spark, config) == expected_windows()
    host_port = config.kafka.bootstrap_servers
    plaintext = run_lakehouse("alerts", *(f"--set={item}" for item in (*settings, "kafka.security.protocol=PLAINTEXT")))
    assert plaintext.returncode == 2 and plaintext.stderr.strip().splitlines()[-1] == (
        f"error: {host_port} speaks TLS and kafka.security.protocol is PLAINTEXT: set it to SSL or "
        "SASL_SSL and kafka.security.ssl_cafile to the CA that signed the broker's certificate")


def test_a_wrong_password_an_unknown_ca_and_plaintext_against_tls_each_get_one_clear_message(
        secured, broker_overrides, tmp_path):
    _, env, _ = secured
    settings, config = _settings(secured, tmp_path)
    host_port = config.kafka.bootstrap_servers

    def last_line(*command: str, extra: list[str] = (), environment: dict = env) -> str:
        result = run_lakehouse(*command, *(f"--set={item}" for item in (*settings, *extra)), env=environment,
                               timeout=120)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        return result.stderr.strip().splitlines()[-1]

    wrong = {**env, "KAFKA_SASL_PASSWORD": "not-the-password"}
    refused = (f"error: {host_port} refused the login of Kafka user {USER} (SCRAM-SHA-512): check the credentials "
               "kafka.security.sasl_username and sasl_password take from the environment")
    assert last_line("alerts", environment=wrong) == refused
    assert last_line("analytical", "--available-now", environment=wrong) == refused  # before Spark starts
    assert last_line("generate", "--events", "10", environment=wrong) == refused

    untrusted = last_line("alerts", extra=["kafka.security.ssl_cafile=null"])
    assert untrusted.startswith(f"error: the TLS certificate of {host_port} is not trusted by the system's CAs")

    plaintext = last_line("operational", "--seconds", "5", extra=["kafka.security.protocol=PLAINTEXT",
                                                                  "kafka.security.sasl_mechanism=null"])
    assert plaintext == (f"error: {host_port} speaks TLS and kafka.security.protocol is PLAINTEXT: set it to SSL or "
                         "SASL_SSL and kafka.security.ssl_cafile to the CA that signed the broker's certificate")

    plaintext_broker = broker_overrides[0]  # the run's PLAINTEXT broker: kafka.bootstrap_servers=...
    tls_to_plaintext = last_line("alerts", extra=[plaintext_broker])
    assert tls_to_plaintext.startswith(f"error: {plaintext_broker.split('=', 1)[1]} did not complete a TLS handshake")
    assert tls_to_plaintext.endswith("it does not speak TLS on this port, and kafka.security.protocol is SASL_SSL")
