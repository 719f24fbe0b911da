"""`lakehouse service`: the systemd unit and the container settings, their stop timeout derived from
the fast path's checkpoint interval (interval + 60 s for its commit + 120 s for the process's own stop
+ 30 s for run's + 30 s of margin)."""

import subprocess

import pytest

from shared import PROJECT_ROOT
from tests.helpers import lakehouse_here


@pytest.mark.parametrize(("interval", "timeout"), [("30 seconds", 270), ("2 minutes", 360)])
def test_the_units_stop_timeout_covers_the_longest_clean_stop(interval, timeout):
    unit = lakehouse_here("service", "systemd", f"--set=operational.real_time.checkpoint_interval={interval}")
    assert unit.returncode == 0, unit.stderr
    lines = unit.stdout.splitlines()
    assert f"TimeoutStopSec={timeout}" in lines and "KillMode=control-group" in lines
    assert f"ExecStart={PROJECT_ROOT}/.venv/bin/lakehouse run" in lines
    container = lakehouse_here("service", "container", f"--set=operational.real_time.checkpoint_interval={interval}")
    assert f"terminationGracePeriodSeconds: {timeout}" in container.stdout


def test_the_unit_runs_with_the_config_it_was_rendered_with(tmp_path):
    config = tmp_path / "lakehouse.yaml"
    config.write_text("operational:\n  real_time:\n    checkpoint_interval: 10 seconds\n")
    unit = lakehouse_here("service", "systemd", "--config", str(config)).stdout.splitlines()
    assert f"ExecStart={PROJECT_ROOT}/.venv/bin/lakehouse --config {config} run" in unit
    assert "TimeoutStopSec=250" in unit


def test_the_container_entrypoint_execs_lakehouse_with_its_arguments_before_run():
    done = subprocess.run([PROJECT_ROOT / "conf" / "container" / "entrypoint.sh", "--help"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("usage: lakehouse"), done.stderr
