"""The medallion beside the fast path, as a separate, lower-priority application.

Measured (`lakehouse bench latency --with-medallion`, README): with the four medallion streams in
the fast path's own Spark application, FAIR pools and all, p99 time-to-alert was 2.09 times the
fast path's alone on 2 cores; with the medallion as its own `lakehouse analytical` process under
`nice -n 19`, 0.93. A running medallion task and a Delta MERGE's driver work hold the shared
JVM's cores; a separate low-priority process yields the machine whenever the fast path has work.
So `lakehouse run`, the demo and the benchmark start it this way.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Sequence

NICENESS = 19


class MedallionProcess:
    """`lakehouse analytical` (continuous) in a child process under `nice`, its stderr relayed."""

    def __init__(self, config_args: Sequence[str], relay: Callable[[str], None]):
        self._process = subprocess.Popen(
            ["nice", "-n", str(NICENESS), sys.executable, "-m", "shared.cli", "analytical", *config_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            start_new_session=True,  # a terminal's Ctrl-C reaches the parent, which stops it in order
        )
        self.last_error: str | None = None
        self.streams_with_progress: set[str] = set()
        self._relay = relay
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self._process.stderr:
            line = line.rstrip("\n")
            if line.startswith("error: "):
                self.last_error = line.removeprefix("error: ")
            elif line.startswith("[") and "] batch " in line:
                self.streams_with_progress.add(line[1:line.index("]")])
            self._relay(line)

    @property
    def ended(self) -> bool:
        return self._process.poll() is not None

    @property
    def failed(self) -> str | None:
        """Its error when it ended with one (it prints `error: ...` last)."""
        if self._process.poll() in (None, 0):
            return None
        self._reader.join(timeout=10)
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
        self._reader.join(timeout=10)
