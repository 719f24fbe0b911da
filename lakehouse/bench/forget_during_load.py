"""A `lakehouse forget` started in the middle of a measured run's load (lakehouse/bench/measured_run.py),
as a data-protection officer would run it beside `lakehouse run`: in its own process and the medallion's
runtime, at its own priority (erasure.niceness), on the lake the medallion beside the fast path writes. `lakehouse bench forget` compares the
fast path's time to alert before it and while it runs (lakehouse/bench/forget.py)."""

from __future__ import annotations

import json
import subprocess
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from lakehouse.bench.linux_process import jvm_niceness
from lakehouse.path_processes import child_options
from shared.config import Config
from shared.errors import LakehouseError
from shared.processes import child_env
from shared.progress import echo as say_progress
from shared.runtime import MEDALLION, command_in


@dataclass
class ForgetDuringLoad:
    """`lakehouse forget --user-id USER`, `after_s` seconds after `start`: when it began and ended, and
    the rows it reported (or its exit code and last words)."""

    user: str
    after_s: float
    started_at: datetime | None = None
    ended_at: datetime | None = None
    tables: list[dict[str, Any]] = field(default_factory=list)
    jvm_niceness: set[int] = field(default_factory=set)
    failed: str | None = None
    _thread: threading.Thread | None = None

    def start(self, config: Config) -> None:
        timer = threading.Timer(self.after_s, self._forget, args=(config,))
        timer.daemon = True
        self._thread = timer
        timer.start()

    def _forget(self, config: Config) -> None:
        say_progress(f"bench: lakehouse forget --user-id {self.user}, beside the load")
        self.started_at = datetime.now(timezone.utc)
        # as a user types it: it lowers its own priority (erasure.niceness)
        try:
            forget = subprocess.Popen(command_in(MEDALLION, "lakehouse.cli", "forget", "--user-id", self.user,
                                                 "--format", "json", *child_options(config)),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env())
        except (OSError, LakehouseError) as error:  # in the timer's thread: said in the figures, not lost
            self.failed = f"could not start: {error}"
            return
        said = []
        for line in forget.stderr:  # its steps, with the seconds since it began: where its time goes
            said.append(line.rstrip("\n"))
            self.jvm_niceness |= jvm_niceness(forget.pid)  # as the kernel has it, not as forget says
            say_progress(f"forget +{(datetime.now(timezone.utc) - self.started_at).total_seconds():.0f} s: {said[-1]}")
        output = forget.stdout.read()
        forget.wait()
        self.ended_at = datetime.now(timezone.utc)
        if forget.returncode == 0:
            self.tables = json.loads(output)["tables"]
        else:
            self.failed = f"exit {forget.returncode}: {' / '.join(said[-5:])}"

    def wait(self, timeout_s: float) -> None:
        """Until the forget has ended, at most `timeout_s` (it has failed, then, for want of time)."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self.ended_at is None and self.failed is None:
            self.failed = f"not done {timeout_s:g} s after the load ended"

    def figures(self) -> dict[str, Any]:
        return {"user": self.user, "started_after_load_began_s": self.after_s,
                "seconds": None if self.ended_at is None or self.started_at is None
                else round((self.ended_at - self.started_at).total_seconds(), 1),
                "tables": self.tables, "jvm_niceness": sorted(self.jvm_niceness), "failed": self.failed}
