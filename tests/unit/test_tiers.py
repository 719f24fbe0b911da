"""The tiers hold: a unit test cannot start a JVM, where CI forbids skips a skip fails, and the tiers that
start `run` wait for the integration lane beside them to end."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from shared import PROJECT_ROOT
from shared.jvm import java_executable
from tests.processes import alive
from tests.tiers import wait_until_ended


def test_a_unit_test_that_starts_a_jvm_is_stopped_with_where_it_belongs():
    with pytest.raises(RuntimeError, match=r"the unit tier starts no JVM \(java\): move this test to tests/spark"):
        subprocess.run([java_executable(), "-version"], capture_output=True)


@pytest.mark.parametrize("rule, outcome", [(None, "1 skipped"), ("never", "1 failed")])
def test_a_skip_fails_the_run_only_where_ci_forbids_skips(tmp_path, rule, outcome):
    (tmp_path / "test_tool.py").write_text(
        "import pytest\n\ndef test_needs_a_tool():\n    pytest.skip('the tool is not installed')\n")
    environment = {key: value for key, value in os.environ.items() if key != "LAKEHOUSE_TESTS_SKIP"}
    if rule:
        environment["LAKEHOUSE_TESTS_SKIP"] = rule
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.tiers", "-p", "no:cacheprovider",
                             "-rA", str(tmp_path)], cwd=PROJECT_ROOT, env=environment, capture_output=True,
                            text=True, timeout=120)
    assert outcome in result.stdout, result.stdout[-2000:]
    assert (result.returncode == 0) == (rule is None)
    if rule:
        assert "skipped where LAKEHOUSE_TESTS_SKIP=never: the tool is not installed" in result.stdout


def test_the_junit_report_gives_each_test_the_core_seconds_the_machine_was_busy_meanwhile(tmp_path):
    (tmp_path / "test_work.py").write_text(
        "import time\n\ndef test_spins():\n    end = time.process_time() + 0.5\n    while time.process_time() < end:\n"
        "        pass\n\ndef test_fails():\n    assert False\n")
    report = tmp_path / "report.xml"
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.tiers", "-p", "no:cacheprovider",
                             f"--junitxml={report}", str(tmp_path / "test_work.py")], cwd=PROJECT_ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout[-2000:]  # the one failing test, nothing else
    from tests.durations import read_junit

    spins, fails = read_junit([report])
    assert spins.busy_core_s is not None and spins.busy_core_s >= 0.4  # it kept a core busy for 0.5 s
    assert fails.busy_core_s is not None  # a failed test's too


def test_the_tiers_after_the_lanes_wait_until_a_lane_has_exited_though_its_parent_has_not_reaped_it():
    lane = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert alive({lane.pid}) == {lane.pid}, "a running lane must be waited for"
        waiter = threading.Thread(target=wait_until_ended, args=({lane.pid}, 0.01), daemon=True)
        waiter.start()
        lane.stdin.close()  # the lane exits; nobody reaps it yet, as make's shell does not while pytest runs
        waiter.join(30)
        assert not waiter.is_alive(), "the wait outlived the lane"
        assert Path(f"/proc/{lane.pid}").exists(), "the lane was reaped: the case of a zombie was not tried"
    finally:
        lane.kill()
        lane.wait()


def test_a_lanes_id_given_again_to_a_thread_is_no_lane_to_wait_for():
    """The kernel gives a thread an id from the same numbers as a process's, and /proc answers for it: a lane
    that ended may see its id go to one of this very pytest's threads, which must not be waited for."""
    started, done = threading.Event(), threading.Event()
    native: list[int] = []

    def thread() -> None:
        native.append(threading.get_native_id())
        started.set()
        done.wait(30)

    worker = threading.Thread(target=thread, daemon=True)
    worker.start()
    try:
        started.wait(10)
        assert Path(f"/proc/{native[0]}/stat").exists(), "/proc answers for a thread's id"
        assert alive({native[0], os.getpid()}) == {os.getpid()}
    finally:
        done.set()
        worker.join(10)
