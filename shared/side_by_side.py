"""The medallion beside the fast path, as a separate, lower-priority application.

Measured (`lakehouse bench latency --with-medallion`, README "Isolation"): with the four medallion
streams in the fast path's own Spark application, FAIR pools and all, p99 time-to-alert was 2.09
times the fast path's alone on 2 cores; with the medallion as its own `lakehouse analytical`
process under `nice -n 19`, 0.93. FAIR pools only order tasks that wait: a medallion task already
running, and a Delta MERGE's driver work, still hold the shared JVM's cores. A separate
low-priority process yields the machine whenever the fast path has work. So `lakehouse run`, the
demo and the benchmark start the medallion this way (`analytical.niceness`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from shared.processes import child_env


#: How long the medallion process waits for the broker at start: `run` checked it a moment before,
#: and a broker restarting meanwhile must not end the run (the streams themselves ride it out).
BROKER_WAIT_S = 120.0


class MedallionProcess:
    """`lakehouse analytical --progress-json` in a child process under `nice`.

    Its stderr lines go to `relay`; its progress reports (JSON lines on its stdout) to `on_progress`.
    The child records its own progress to ops/stream_progress and holds its own checkpoint locks.
    """

    def __init__(self, config_args: Sequence[str], niceness: int, relay: Callable[[str], None],
                 on_progress: Callable[[dict[str, Any]], None] = lambda progress: None):
        self._process = subprocess.Popen(
            ["nice", "-n", str(niceness), sys.executable, "-m", "shared.cli", "analytical", "--progress-json",
             f"--wait-for-broker={BROKER_WAIT_S:g}",
             *config_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            # Its own process group, so a terminal's Ctrl-C reaches only the parent, which stops it in
            # order; but not its own session: with sched_autogroup (Linux's default) a new session is
            # a new CPU group scheduled as an equal of the parent's, and `nice` would no longer yield
            # (measured: p50 time-to-alert 3.6 s instead of 1.0 s).
            process_group=0,
            env=child_env(),  # killed with its parent, so a kill -9 of `run` leaves no checkpoint held
        )
        self.last_error: str | None = None
        self.streams_with_progress: set[str] = set()
        self._relay = relay
        self._on_progress = on_progress
        self._readers = [threading.Thread(target=self._read_errors, daemon=True),
                         threading.Thread(target=self._read_progress, daemon=True)]
        for reader in self._readers:
            reader.start()

    def _read_errors(self) -> None:
        for line in self._process.stderr:
            line = line.rstrip("\n")
            if line.startswith("error: "):
                self.last_error = line.removeprefix("error: ")
            self._relay(line)

    def _read_progress(self) -> None:
        for line in self._process.stdout:
            if line.startswith("{"):  # anything else a library prints is not ours
                progress = json.loads(line)
                self.streams_with_progress.add(progress.get("name"))
                self._on_progress(progress)

    @property
    def ended(self) -> bool:
        return self._process.poll() is not None

    @property
    def failed(self) -> str | None:
        """Its error when it ended with one (it prints `error: ...` last)."""
        if self._process.poll() in (None, 0):
            return None
        self._join()
        return self.last_error or f"the medallion process exited with {self._process.returncode}"

    def stop(self, timeout_s: float = 120) -> None:
        """SIGTERM: it stops its queries cleanly; SIGKILL only if it hangs."""
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._join()

    def _join(self) -> None:
        for reader in self._readers:
            reader.join(timeout=10)
