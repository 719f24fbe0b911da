"""Each path's `lakehouse` command in a child process of its own, in its path's runtime, and the traffic
generator beside them (`TrafficProcess`).

`FastPathProcess`: the fast path in its own runtime (Spark 4.3, real-time mode), its progress recorded
by the process that started it.

`MedallionProcess`: the medallion beside the fast path, as a separate, lower-priority application
(`analytical.niceness`). FAIR pools only order tasks that wait: a medallion task already running, and
a Delta MERGE's driver work, would still hold a shared JVM's cores, while a separate low-priority
process yields the machine whenever the fast path has work (operational/README.md, "Isolation", has
the measurements). So `lakehouse run`, the demo and the benchmark start the medallion this way. It can
also record the fast path's progress, passed on to it (`ProgressRelay`): then the process that starts
both needs no JVM of its own.
"""

from __future__ import annotations

import json
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from shared.config import Config

from shared.config_loading import write_for_child
from shared.errors import LakehouseError
from shared.processes import PARENT_STOP, PARENT_STOP_NOW, child_env
from shared.runtime import FAST_PATH, MEDALLION, command_in
from shared.stopping import BATCH_COMMIT_S, StopRequest


def child_options(config: Config, verbose: bool = False) -> list[str]:
    """`--config=FILE` holding `config` whole (shared.config_loading.write_for_child), and `--verbose`: how a
    child `lakehouse` process (a path's, a benchmark's, the traffic generator) gets its configuration."""
    return [f"--config={write_for_child(config)}", *(["--verbose"] if verbose else [])]


#: How long a path's process waits for the broker at start: `run` checked it a moment before, and a
#: broker restarting meanwhile must not end the run (the streams themselves ride it out).
BROKER_WAIT_S = 120.0


class PathProcess:
    """One path's `lakehouse` command in a child process of its own, in its path's runtime.

    Its stderr lines go to `relay`; its progress reports (JSON lines on its stdout) to `on_progress`.
    The child holds its own checkpoint locks.
    """

    describe = "the child process"
    #: How long a clean stop may take before it is killed.
    stop_within_s = 120.0

    def __init__(self, command: Sequence[str], relay: Callable[[str], None],
                 on_progress: Callable[[dict[str, Any]], None] = lambda progress: None,
                 on_progress_end: Callable[[], None] = lambda: None, stdin: int = subprocess.DEVNULL):
        self._process = subprocess.Popen(
            command, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            # Its own process group, so a terminal's Ctrl-C reaches only the parent, which stops it in
            # order; but not its own session: with sched_autogroup (Linux's default) a new session is
            # a new CPU group scheduled as an equal of the parent's, and `nice` would no longer yield.
            process_group=0,
            env=child_env(),  # killed with its parent, so a kill -9 of `run` leaves no checkpoint held
        )
        self.last_error: str | None = None
        self._stop_requested = False
        self.streams_with_progress: set[str] = set()
        self._relay = relay
        self._on_progress = on_progress
        self._on_progress_end = on_progress_end
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
        self._on_progress_end()  # it has ended: its last report is in

    @property
    def pid(self) -> int:
        """The child's process id (its JVM is a child of it)."""
        return self._process.pid

    @property
    def ended(self) -> bool:
        return self._process.poll() is not None

    @property
    def failed(self) -> str | None:
        """Its error when it ended with one (it prints `error: ...` last). Stopped while it was still
        starting, before it took a stop signal as a clean stop, it ends by the signal: not a failure."""
        ended_by_a_stop = self._process.poll() in (-signal.SIGTERM, -PARENT_STOP, -PARENT_STOP_NOW)
        if self._process.poll() in (None, 0) or (self._stop_requested and ended_by_a_stop):
            return None
        self._join()
        return self.last_error or f"{self.describe} exited with {self._process.returncode}"

    def crash(self) -> None:
        """SIGKILL, as the OOM killer would: its Spark JVM dies with it (it dies with its parent)."""
        self._process.kill()
        self._process.wait()

    def stop(self) -> None:
        """Stop it cleanly (`request_stop`); SIGKILL only if it hangs (`stop_within_s`)."""
        self.request_stop()
        self.await_end(threading.Event())

    def request_stop(self, now: bool = False) -> None:
        """PARENT_STOP: it stops its queries cleanly, even when the user's own stop reached it too
        (a second SIGTERM would tell it to stop now); `now`: PARENT_STOP_NOW, it stops now."""
        if self._process.poll() is None:
            self._stop_requested = True
            self._process.send_signal(PARENT_STOP_NOW if now else PARENT_STOP)

    def await_end(self, hurry: threading.Event) -> None:
        """Wait for it to end after `request_stop`, at most `stop_within_s`; when `hurry` is set meanwhile
        (a second Ctrl-C to this process), ask it once to stop now."""
        deadline, hurried = time.monotonic() + self.stop_within_s, False
        while self._process.poll() is None and time.monotonic() < deadline:
            if hurry.is_set() and not hurried:
                self.request_stop(now=True)
                hurried = True
            try:
                self._process.wait(timeout=0.25)
            except subprocess.TimeoutExpired:
                pass
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._join()

    def _join(self) -> None:
        for reader in self._readers:
            reader.join(timeout=10)


@contextmanager
def stopped_at_the_end(children: Sequence[PathProcess]) -> Iterator[Sequence[PathProcess]]:
    """Stop `children` when the block ends, however it ends; then, when it ended normally, a child
    that failed becomes a LakehouseError with its error."""
    try:
        yield children
    finally:
        with StopRequest() as again:  # a Ctrl-C while they stop is passed on: they stop now
            for child in children:  # all at once: each may wait for its running batch to end
                child.request_stop()
            for child in children:
                child.await_end(again.event)
    for child in children:
        if child.failed:
            raise LakehouseError(child.failed)


class ProgressRelay:
    """Progress reports passed on to a medallion process's stdin, one JSON line each, which records
    them to ops/stream_progress beside its own (`lakehouse analytical --record-progress-from-stdin`):
    the fast path's runtime has no Delta, and its parent then needs no Spark of its own to record them.

    `forward` never blocks the caller (the fast path's report reader): a thread writes, so a medallion
    still starting holds the lines in a queue, not the fast path's output. `end` closes the stream
    once the last report is in, which the medallion waits for before its last flush."""

    _END = None

    def __init__(self) -> None:
        self._lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._undelivered = 0

    def attach(self, stdin) -> None:
        self._writer = threading.Thread(target=self._write, args=(stdin,), name="progress-relay", daemon=True)
        self._writer.start()

    def forward(self, progress: dict[str, Any]) -> None:
        self._lines.put(json.dumps(progress))

    def end(self) -> None:
        self._lines.put(self._END)

    def undelivered(self, wait_s: float = 10) -> int:
        """The reports the medallion's process never got (it had ended), once the stream has ended."""
        if self._writer is not None:
            self._writer.join(timeout=wait_s)
        return self._undelivered

    def _write(self, stdin) -> None:
        try:
            with stdin:
                while (line := self._lines.get()) is not self._END:
                    stdin.write(line + "\n")
                    stdin.flush()
        except (BrokenPipeError, OSError, ValueError):  # the medallion has ended: nothing records them now
            self._undelivered += 1
            while self._lines.get() is not self._END:
                self._undelivered += 1


class MedallionProcess(PathProcess):
    """`lakehouse analytical --progress-json` in the medallion's runtime, under `nice`; it records its
    own progress to ops/stream_progress, and with a `relay` also the reports forwarded to it."""

    describe = "the medallion process"

    def __init__(self, config_args: Sequence[str], niceness: int, relay: Callable[[str], None],
                 on_progress: Callable[[dict[str, Any]], None] = lambda progress: None,
                 records: ProgressRelay | None = None):
        super().__init__(["nice", "-n", str(niceness), *command_in(
            MEDALLION, "lakehouse.cli", "analytical", "--progress-json", f"--wait-for-broker={BROKER_WAIT_S:g}",
            *(["--record-progress-from-stdin"] if records else []), *config_args)], relay, on_progress,
            stdin=subprocess.PIPE if records else subprocess.DEVNULL)
        if records:
            records.attach(self._process.stdin)


class NotifyProcess(PathProcess):
    """`lakehouse notify` beside the paths (lakehouse.notify): the hot-page alerts posted to Alertmanager,
    by a consumer of its own in a process of its own, so that the fast path never waits for it."""

    describe = "the bridge to Alertmanager"
    stop_within_s = 30.0  # it stops between two posts, or abandons a post it retries: nothing is committed then

    def __init__(self, config_args: Sequence[str], relay: Callable[[str], None]):
        super().__init__(command_in(MEDALLION, "lakehouse.cli", "notify", *config_args), relay)


class TrafficProcess:
    """`lakehouse generate --format json` in a child process: the synthetic clicks the demo and the
    benchmarks send beside the paths (lakehouse.services.generator), ended with its parent.

        traffic = TrafficProcess(child_options(config), "--rate", "2000", "--seconds", "10")
        sent = traffic.summary()["sent"]          # once it has sent them
    """

    def __init__(self, config_args: Sequence[str], *generate_options: str):
        self._errors = tempfile.TemporaryFile("w+")  # its progress and errors, read only if it fails
        self._process = subprocess.Popen(
            [sys.executable, "-m", "lakehouse.cli", "generate", "--format", "json", *generate_options, *config_args],
            stdout=subprocess.PIPE, stderr=self._errors, text=True, env=child_env())

    @property
    def ended(self) -> bool:
        return self._process.poll() is not None

    def summary(self) -> dict[str, Any]:
        """Wait for it to end: what it says it sent (`lakehouse generate --format json`), or a
        LakehouseError with its last words when it failed."""
        output = self._process.communicate()[0]
        with self._errors:
            if self._process.returncode != 0:
                self._errors.seek(0)
                raise LakehouseError(f"the traffic generator failed (exit {self._process.returncode}): "
                                     f"{self._errors.read().strip()[-500:]}")
        return json.loads(output)

    def kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._errors.close()


#: What `run` itself does once its children have ended: its last progress flush and the console's last view.
RUN_OWN_STOP_S = 30.0


def fast_path_stop_within_s(checkpoint_interval: timedelta) -> float:
    """How long the fast path's clean stop may take: its running real-time batch ends at its checkpoint
    interval and commits (shared.stopping.end_with_running_batch), then its process ends."""
    return checkpoint_interval.total_seconds() + BATCH_COMMIT_S + PathProcess.stop_within_s


def run_stop_within_s(checkpoint_interval: timedelta) -> float:
    """The longest a clean stop of `lakehouse run` takes: its children stop side by side, the fast path
    last, then its own end. A service manager's stop timeout must be longer, or it kills `run` in the
    middle of the stop.

        >>> run_stop_within_s(timedelta(seconds=30))
        240.0
    """
    return fast_path_stop_within_s(checkpoint_interval) + RUN_OWN_STOP_S


class FastPathProcess(PathProcess):
    """`lakehouse operational --progress-json` in the fast path's runtime (real-time mode needs Spark
    4.3, which has no Delta): its progress reports reach `on_progress`, which records them."""

    describe = "the fast path's process"

    def __init__(self, config_args: Sequence[str], checkpoint_interval: timedelta, relay: Callable[[str], None],
                 on_progress: Callable[[dict[str, Any]], None] = lambda progress: None,
                 on_progress_end: Callable[[], None] = lambda: None):
        super().__init__(command_in(FAST_PATH, "lakehouse.cli", "operational", "--progress-json",
                                    f"--wait-for-broker={BROKER_WAIT_S:g}", *config_args), relay, on_progress,
                         on_progress_end)
        self.stop_within_s = fast_path_stop_within_s(checkpoint_interval)
