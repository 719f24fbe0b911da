"""A background JVM service this project starts and stops: the embedded broker, the cluster's master
and workers.

Each has a pid file, a log and a command line that identifies it (`marker`): a pid file whose
process is gone, or is now some other program, counts as not running, so a `start` after a crash or
a reboot starts afresh. A service is started in its own session (a terminal's Ctrl-C to the command
that started it does not reach it) and stopped with SIGTERM to its process group, SIGKILL only when
it hangs.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from shared.errors import LakehouseError
from shared.processes import dying_with_parent


class ServiceError(LakehouseError):
    """A service could not be started or stopped; the message carries its log's tail."""


class Daemon:
    """One background process: `<run_dir>/<name>.pid`, `<run_dir>/<name>.log`."""

    def __init__(self, name: str, run_dir: Path, marker: Sequence[str]):
        self.name = name
        self.pid_file = run_dir / f"{name}.pid"
        self.log_file = run_dir / f"{name}.log"
        self._marker = list(marker)  # every one of these is in the command line of this service
        self._process: subprocess.Popen | None = None

    def start(self, command: Sequence[str], env: Mapping[str, str] | None = None,
              die_with_caller: bool = False, cwd: Path | None = None) -> int:
        """Launch `command` (in the folder `cwd`, when given) with stdout and stderr appended to the log;
        returns its pid.

        `die_with_caller`: the kernel kills it when the calling process dies, however it dies."""
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            self._process = subprocess.Popen(
                dying_with_parent(command) if die_with_caller else list(command),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=None if env is None else dict(env), start_new_session=True, cwd=cwd,
            )
        self.pid_file.write_text(str(self._process.pid))
        return self._process.pid

    def running_pid(self) -> int | None:
        """The pid in the pid file if that process is alive and is this service, else None."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        if self._process is not None and self._process.pid == pid:
            # Started by this process: its exit status says. Its command line cannot: for a moment
            # after Popen returns, the kernel may still be setting up the new program's arguments,
            # and /proc/<pid>/cmdline reads empty: a worker just started would be taken for dead, its
            # start would fail and the worker be left running.
            return pid if self._process.poll() is None else None
        command = command_line(pid)
        if command and all(part in command for part in self._marker):
            return pid
        return None

    def stop(self, timeout_s: float, log=print) -> bool:
        """SIGTERM, wait up to `timeout_s`, SIGKILL only then. False if it was not running."""
        pid = self.running_pid()
        if not pid:
            self.pid_file.unlink(missing_ok=True)
            return False
        signal_group(pid, signal.SIGTERM)
        if not self.wait_for_exit(pid, timeout_s):
            log(f"{self.name} did not stop within {timeout_s:g} s, killing it")
            signal_group(pid, signal.SIGKILL)
            self.wait_for_exit(pid, 10)
        self.pid_file.unlink(missing_ok=True)
        return True

    def stop_saying(self, what: str, timeout_s: float, log=print, quiet: bool = False) -> bool:
        """`stop`, saying so unless `quiet`: `stopping <what> (pid N)`, then `<what> stopped` or
        `<what> not running`. False if it was not running.

            broker_daemon.stop_saying("the Kafka broker", 30, log=say)
        """
        pid = self.running_pid()
        if pid and not quiet:
            log(f"stopping {what} (pid {pid})")
        stopped = self.stop(timeout_s, log=log)
        if not quiet:
            log(f"{what} stopped" if stopped else f"{what} not running")
        return stopped

    def wait_for_exit(self, pid: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process is not None and self._process.pid == pid:
                try:
                    self._process.wait(timeout=0.2)
                    return True
                except subprocess.TimeoutExpired:
                    continue
            if command_line(pid) is None:
                return True
            time.sleep(0.2)
        return False

    def log_tail(self, count: int = 25) -> str:
        return log_tail(self.log_file, count)


def log_tail(log_file: Path, count: int = 25) -> str:
    """The last `count` lines of a log, indented, for an error message."""
    try:
        lines = log_file.read_text(errors="replace").splitlines()
    except OSError:
        return "  (no log written)"
    return "\n".join("  " + line for line in lines[-count:])


def signal_group(pid: int, signum: int) -> None:
    """Signal the process group `pid` leads (the process alone when that is not allowed); a process
    already gone is no error."""
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass
    except PermissionError:
        os.kill(pid, signum)


def command_line(pid: int) -> str | None:
    """The process's command line, or None when no such process runs (zombies count as gone)."""
    proc = Path(f"/proc/{pid}")
    if proc.exists():
        try:
            if ") Z" in (proc / "stat").read_text():
                return None
            return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return None
    result = subprocess.run(["ps", "-p", str(pid), "-o", "command="], capture_output=True, text=True)
    return result.stdout.strip() or None


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def require_free_ports(host: str, ports: Mapping[str, int]) -> None:
    """One clear error naming every configured port (by its key) another process holds."""
    taken = [f"port {port} on {host} is in use by another process ({key})"
             for key, port in ports.items() if port_in_use(host, port)]
    if taken:
        raise ServiceError("; ".join(taken) + ": stop that process, or choose another port in the config "
                           "(--set <key>=...)")


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]
