"""The test tiers, by what their tests need, and CI's rule that no test skips.

A test's tier is its folder (`TIERS`), given to it as a marker: `make test-unit` runs `-m unit`, and so
on (CONTRIBUTING.md, "The tests"). With LAKEHOUSE_TESTS_SKIP=never (`.ci/run` sets it) a skipped test
fails the run with its reason: a missing tool is a broken set-up there, not a reason to pass. The root
conftest re-exports these hooks.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.processes import alive

TIERS = {"unit": "unit", "spark": "spark", "integration": "integration", "realtime": "integration",
         "commands": "commands", "faults": "faults", "deployment": "deployment"}
_TESTS = Path(__file__).parent


#: The order one pytest process runs the tiers in (`make test TIERS=...`): the quickest to fail first.
ORDER = ("unit", "spark", "integration", "commands", "faults", "deployment")
#: The pids of the pytest processes `make test` runs beside this one (the fast path's, and the second of the
#: medallion's runtime). The tiers whose tests start `run` wait for them to end before their first test:
#: `run`'s medallion runs under nice 19, and a pytest beside it would take its cores.
AFTER_PIDS = "LAKEHOUSE_TESTS_AFTER_PIDS"
AFTER_THE_LANES = ("commands", "faults", "deployment")


def pytest_collection_modifyitems(items):
    for item in items:
        if (tier := tier_of(item)) is not None:
            item.add_marker(tier)
            # in --junitxml, where tests/durations.py reads it: a crash-suite test counts as one wherever it is
            item.user_properties.append(("tier", "faults" if item.get_closest_marker("faults") else tier))
    items.sort(key=lambda item: ORDER.index(tier_of(item) or "unit"))  # stable: each module stays whole


def tier_of(item) -> str | None:
    """The tier of a collected test, by its folder (None outside tests/: the tiers' own test runs one)."""
    try:
        folder = item.path.relative_to(_TESTS).parts[0]
    except ValueError:
        return None
    return TIERS.get(folder)


def busy_core_seconds() -> float:
    """Core-seconds this machine has spent busy since boot, every process's (/proc/stat; 0 elsewhere)."""
    try:
        with open("/proc/stat") as stat:
            ticks = [int(field) for field in stat.readline().split()[1:9]]
    except OSError:
        return 0.0
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # all but idle and iowait


def wait_until_ended(pids: set[int], every_s: float = 0.5) -> None:
    """Wait for `pids` to end; one that ended but that its parent has not reaped has (make's shell reaps
    a lane only once this pytest ends)."""
    while alive(pids):
        time.sleep(every_s)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    lanes = [int(pid) for pid in os.environ.get(AFTER_PIDS, "").split()]
    if lanes and tier_of(item) in AFTER_THE_LANES:
        del os.environ[AFTER_PIDS]  # once, and not for the commands the tests start
        running = alive(set(lanes))
        reporter = item.config.pluginmanager.get_plugin("terminalreporter")
        if running and reporter:
            reporter.write_line(f"the {tier_of(item)} tier waits for the pytest beside it to end (pid "
                                f"{', '.join(map(str, sorted(running)))})")
        wait_until_ended(running)  # before the test's clock and busy cores start
    item.busy_at_start = busy_core_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # in --junitxml, beside its seconds: the core-seconds the machine was busy meanwhile (a test's
    # commands run in processes of their own), which tell a test that waits from one that works
    if call.when == "teardown" and hasattr(item, "busy_at_start"):
        item.user_properties.append(("busy_core_s", f"{busy_core_seconds() - item.busy_at_start:.1f}"))
    report = (yield).get_result()
    if os.environ.get("LAKEHOUSE_TESTS_SKIP") == "never" and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome, report.longrepr = "failed", f"skipped where LAKEHOUSE_TESTS_SKIP=never: {reason}"
