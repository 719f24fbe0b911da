"""Missing or too old tools are named with what to install; a hung broker is killed, not waited on forever."""

import subprocess
import sys
from pathlib import Path

import pytest

from lakehouse.services.broker import EmbeddedBroker
from shared.errors import MissingDependencyError
from shared.jvm import java_executable
from lakehouse.prerequisites import check
from tests.conftest import make_config
from tests.helpers import wait_for


def fake_java(folder: Path, version_line: str) -> Path:
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(0o755)
    return folder


def test_an_old_java_is_refused_with_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, 'openjdk version "1.8.0_392"')))

    with pytest.raises(MissingDependencyError, match=r"java 17\+ is required.*1\.8\.0.*openjdk-17"):
        java_executable()


def test_a_recent_java_is_accepted(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, 'openjdk version "21.0.2" 2024-01-16')))

    assert java_executable() == str(tmp_path / "bin" / "java")


def test_a_java_without_javac_is_reported_with_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(fake_java(tmp_path, 'openjdk version "17.0.9" 2023-10-17')))

    problems = check()

    assert any("javac was not found" in p and "openjdk-17-jdk-headless" in p for p in problems), problems
    (tmp_path / "bin" / "javac").write_text("#!/bin/sh\n")
    assert not any("javac" in p for p in check())


def test_missing_java_and_maven_are_both_reported(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))

    problems = check()

    assert any("java was not found" in p and "JAVA_HOME" in p for p in problems)
    assert any("mvn" in p and "apt-get install maven" in p for p in problems)


def test_stop_escalates_to_sigkill_when_sigterm_is_ignored(tmp_path):
    config = make_config(f"broker.run_dir={tmp_path}", "broker.stop_timeout_s=1")
    broker = EmbeddedBroker(config, log=lambda message: None)
    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
         "open(__import__('sys').argv[3], 'w').close(); time.sleep(120)", "kafka.Kafka", str(broker.properties),
         str(tmp_path / "ready")],
        start_new_session=True,
    )
    broker.pid_file.write_text(str(stubborn.pid))
    wait_for((tmp_path / "ready").exists, 10, "the stand-in to ignore SIGTERM")

    assert broker.stop(quiet=True) is True
    assert stubborn.wait(timeout=10) == -9
    assert not broker.pid_file.exists()
