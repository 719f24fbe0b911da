"""A real Prometheus on a config file (the programs lakehouse.services.prometheus finds), for the
integration tests and the benchmarks: its own process group and log, ready when `/-/ready` answers,
queried over the HTTP API."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from lakehouse.services.daemon import ServiceError, free_port, log_tail, signal_group
from lakehouse.services.prometheus import PrometheusTools, missing_reason, tools
from shared.errors import MissingDependencyError


class PrometheusServer:
    """A Prometheus server on `config_file`, for tests: start, query, stop.

    It runs in its own process group (a terminal's Ctrl-C to pytest does not reach it, and `stop()`
    ends it with everything it started) and, where util-linux's setpriv exists, dies with the process
    that started it, so a killed test run leaves no Prometheus behind. `--web.enable-lifecycle`
    allows `reload()` after a test rewrites the config or the rules.
    """

    def __init__(self, config_file: Path, storage_dir: Path, port: int | None = None,
                 log_file: Path | None = None, found: PrometheusTools | None = None,
                 host: str = "127.0.0.1", extra_args: tuple[str, ...] = ()):
        self.tools = found or tools()
        if self.tools is None:
            raise MissingDependencyError(missing_reason())
        self.config_file = Path(config_file)
        self.storage_dir = Path(storage_dir)
        self.host = host
        self.port = port or free_port(host)
        self.log_file = Path(log_file) if log_file else self.storage_dir.parent / "prometheus.log"
        self.extra_args = tuple(extra_args)
        self._process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 60) -> PrometheusServer:
        """Launch it and wait until `/-/ready` answers 200; ServiceError with the log's tail if not."""
        self.storage_dir.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        command = [str(self.tools.prometheus), f"--config.file={self.config_file}",
                   f"--storage.tsdb.path={self.storage_dir}", f"--web.listen-address={self.host}:{self.port}",
                   "--web.enable-lifecycle", *self.extra_args]
        setpriv = shutil.which("setpriv")
        if setpriv:
            command = [setpriv, "--pdeathsig", "KILL", "--", *command]
        with open(self.log_file, "ab") as log:
            self._process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise ServiceError(f"prometheus exited with status {self._process.returncode} at start; "
                                   f"its log ({self.log_file}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        self.stop()
        raise ServiceError(f"prometheus did not become ready on {self.url} within {timeout_s:g} s; "
                           f"its log ({self.log_file}):\n{self.log_tail()}")

    def __enter__(self) -> PrometheusServer:
        return self.start() if self._process is None else self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _api(self, path: str, params: dict[str, str] | None = None, method: str = "GET") -> Any:
        """The `data` of a Prometheus API answer; ServiceError on a failed request or an error status."""
        url = f"{self.url}{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        request = urllib.request.Request(url, method=method)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                body = json.loads(response.read().decode())
        except urllib.error.HTTPError as error:
            # The API answers 400/422 with a JSON error (a bad expression); say what it was.
            detail = error.read().decode(errors="replace")
            raise ServiceError(f"prometheus {path} {params or ''}: HTTP {error.code}: {detail}") from error
        except (urllib.error.URLError, OSError) as error:
            raise ServiceError(f"prometheus {path}: {error}") from error
        if body.get("status") != "success":
            raise ServiceError(f"prometheus {path} {params or ''}: {body.get('error', body)}")
        return body.get("data")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result: [{"metric": {...labels}, "value": [time, "value"]}, ...].

        A scalar or string result is returned as a one-element list of its [time, value]."""
        data = self._api("/api/v1/query", {"query": expr})
        result = data.get("result", [])
        return result if data.get("resultType") in ("vector", "matrix") else [result]

    def alerts(self) -> list[dict[str, Any]]:
        """Pending and firing alerts: [{"labels": {..., "alertname"}, "state", "value", ...}, ...]."""
        return self._api("/api/v1/alerts").get("alerts", [])

    def targets(self) -> list[dict[str, Any]]:
        """Active scrape targets with their `health` ("up", "down", "unknown") and `lastError`."""
        return self._api("/api/v1/targets", {"state": "active"}).get("activeTargets", [])

    def rules(self) -> list[dict[str, Any]]:
        """The loaded rule groups (to check a reload took the new rules)."""
        return self._api("/api/v1/rules").get("groups", [])

    def reload(self) -> None:
        """Reread the config and the rule files (POST /-/reload; a bad file leaves the old ones)."""
        request = urllib.request.Request(f"{self.url}/-/reload", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30):
                pass
        except urllib.error.HTTPError as error:
            raise ServiceError(f"prometheus reload failed: HTTP {error.code}: "
                               f"{error.read().decode(errors='replace')}") from error

    def stop(self, timeout_s: float = 10) -> None:
        """SIGTERM its process group, SIGKILL only if it has not exited after `timeout_s`."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        signal_group(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            signal_group(process.pid, signal.SIGKILL)
            process.wait(timeout=10)

    def log_tail(self, count: int = 25) -> str:
        return log_tail(self.log_file, count)
