"""`lakehouse run` as a service: the systemd unit and the container settings, derived from the
configuration so that the stop timeout a service manager allows covers the longest clean stop
(`lakehouse.path_processes.run_stop_within_s`: the fast path's checkpoint interval and commit).

How a stop arrives is the service manager's choice, and `run` keeps its promise each way: systemd's
default sends SIGTERM to every process of the unit at once (`KillMode=control-group`), a container
runtime to the main process only, a terminal's Ctrl-C to the foreground group. The Spark JVMs ignore
SIGTERM and SIGINT (their Python process ends them), and `run` asks its children to stop with its own
signal (`shared.processes.PARENT_STOP`), so a child that had the service manager's SIGTERM too still
stops once, at its batch end.

    >>> print(systemd_unit(config, config_file="/etc/lakehouse/lakehouse.yaml"))
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path

from lakehouse.path_processes import run_stop_within_s
from shared import PROJECT_ROOT
from shared.config import Config
from shared.config_loading import CONFIG_ENV_VAR

#: Seconds the service manager waits beyond the longest clean stop before its SIGKILL.
MARGIN_S = 30


def stop_timeout_s(config: Config) -> int:
    """How long a service manager should let `lakehouse run` stop before it kills it."""
    return math.ceil(run_stop_within_s(config.operational.real_time.checkpoint_interval)) + MARGIN_S


def _config_args(config_file: str | None) -> list[str]:
    return ["--config", str(Path(config_file).resolve())] if config_file else []


def _command(config_file: str | None) -> str:
    return shlex.join([str(PROJECT_ROOT / ".venv" / "bin" / "lakehouse"), *_config_args(config_file), "run"])


def systemd_unit(config: Config, config_file: str | None = None) -> str:
    """A systemd service unit for `lakehouse run` with this configuration (`config_file`: the --config
    it runs with). Secrets come from an environment file the unit names, never from the unit."""
    return f"""# lakehouse run as a systemd service: `lakehouse service systemd > /etc/systemd/system/lakehouse.service`
# Its stop timeout covers the longest clean stop ({stop_timeout_s(config) - MARGIN_S} s with a real-time checkpoint
# interval of {config.operational.real_time.checkpoint_interval.total_seconds():g} s); render it again when that changes.
[Unit]
Description=Clickstream lakehouse: the fast path and the medallion (lakehouse run)
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
WorkingDirectory={PROJECT_ROOT}
ExecStart={_command(config_file)}
# secrets (KAFKA_SASL_PASSWORD, AWS_SECRET_ACCESS_KEY, ...) as NAME=value lines, readable by the service only
EnvironmentFile=-/etc/lakehouse/secrets.env
# systemd's default stop: SIGTERM to every process of the unit at once, SIGKILL after TimeoutStopSec
KillMode=control-group
KillSignal=SIGTERM
TimeoutStopSec={stop_timeout_s(config)}
# exit 0 is a clean stop; 2 a query that failed for good after its restarts, which a restart may cure
Restart=on-failure
RestartSec=10

[Install]
WantedBy=multi-user.target
"""


def container_settings(config: Config, config_file: str | None = None) -> str:
    """What a container running `lakehouse run` needs: the entrypoint and the stop grace period."""
    timeout = stop_timeout_s(config)
    entrypoint = PROJECT_ROOT / "conf" / "container" / "entrypoint.sh"
    return f"""# lakehouse run in a container: the runtime sends SIGTERM to the main process only, SIGKILL after its grace period
entrypoint:      {shlex.join([str(entrypoint), *_config_args(config_file)])}
docker:          docker run --init --stop-timeout {timeout} ...   (docker stop waits {timeout} s)
kubernetes:      terminationGracePeriodSeconds: {timeout}
secrets:         from the environment ({CONFIG_ENV_VAR} names the config file; KAFKA_SASL_PASSWORD, AWS_* ...)
"""
