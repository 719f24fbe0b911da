"""Small helpers the tests share: run the real `lakehouse` command, wait on a condition."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

LAKEHOUSE = str(Path(sys.executable).with_name("lakehouse"))


def run_lakehouse(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """The installed console script, as a user runs it; stdout and stderr captured as text."""
    return subprocess.run([LAKEHOUSE, *args], capture_output=True, text=True, env=env, timeout=timeout, check=False)


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
