"""Running a streaming query as a command: until stopped, with a status line, restarts on failure.

Both paths run their queries through `supervise`: SIGINT and SIGTERM stop the queries cleanly (the
command then exits 0), a failed query is restarted from its checkpoint with a growing backoff (a
broker restart, a lost connection), and a query that fails for good (too many failures in a row, or
an error raised on purpose such as an expectation under the `fail` policy, which a restart would
only repeat) stops the others and becomes a LakehouseError with Spark's message, not a Java stack
trace.
The driver keeps no growing history: it reads only the query's bounded `recentProgress`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from datetime import timedelta
from typing import Any

from shared.config import Supervision
from shared.errors import BrokerUnreachableError, LakehouseError
from shared.progress import ChangedRows
from shared.query_errors import first_line, raised_on_purpose, refused_by_analysis
from shared.query_progress import RunningTotals, status_line
from shared.stopping import BATCH_COMMIT_S, StopRequest, end_with_running_batch, stop_at_batch_end
from shared.stream import Stage

#: How long `supervise` waits between its looks at the queries, in seconds (a signal is noticed within it).
POLL_S = 0.25
#: How often `supervise` calls its `on_tick`, in seconds.
TICK_S = 1.0
#: The longest wait before a restart, however many failures came before it.
MAX_BACKOFF_S = 60.0


def supervise(
    starters: Mapping[str, Callable[[], Any]],
    settings: Supervision,
    *,
    seconds: float | None,
    report: Callable[[str], None],
    on_status: Callable[[], None] | None = None,
    status_lines: bool = True,
    until: Callable[[], bool] | None = None,
    on_tick: Callable[[dict[str, RunningTotals]], None] | None = None,
    real_time_batch: timedelta | None = None,
    stop: StopRequest | None = None,
) -> dict[str, RunningTotals]:
    """Run the queries `starters` start (name -> start function, which may return a `Stage`) side by side.

    Returns when every query has finished (an AvailableNow backfill), `seconds` pass, or a signal
    arrives; the queries still running are then stopped. A failed query, or one whose start fails (a
    storage or broker hiccup), is restarted from its checkpoint after a backoff that starts at
    `settings.restart_backoff_s` and doubles with each failure in a row (at most MAX_BACKOFF_S); a
    completed micro-batch ends the row. After `settings.max_restarts` failures in a row, an error raised
    on purpose, or a first start that Spark's analysis refuses, the others are stopped cleanly and a
    LakehouseError carries the failed query's message.
    Every `settings.status_interval_s`: a status line per query (unless `status_lines` is off), then
    `on_status` (the progress recorder's flush and console view), and once more at the end.
    `until`: stop as soon as it returns True (checked at each status interval).
    `on_tick`: called with the totals every TICK_S, for a live view finer than the status lines.
    `real_time_batch`: the queries run in real-time mode with this checkpoint interval: a stop lets
    the running batch end and commit (`end_with_running_batch`), so a restart replays nothing; a
    micro-batch query at the end of its running batch too, or at once between batches
    (`stop_at_batch_end`); a second signal stops them now.
    `stop`: the caller's StopRequest, when one stop must end several calls (each layer of a backfill);
    else one of its own.
    """
    queries = _Queries(starters, settings, report)
    changed_rows = ChangedRows(report)
    deadline = time.monotonic() + seconds if seconds else None
    with StopRequest() if stop is None else nullcontext(stop) as stop:
        try:
            for name in starters:
                queries.start_first(name)
            next_status = time.monotonic() + settings.status_interval_s
            next_tick = time.monotonic() + TICK_S
            while queries.running or queries.restart_at:
                done = until is not None and time.monotonic() >= next_status and until()
                if stop.event.is_set() or (deadline and time.monotonic() >= deadline) or done:
                    why = "stop requested" if stop.event.is_set() else "done" if done else f"{seconds:g} s elapsed"
                    report(f"[{', '.join(queries.running)}] {why}: stopping")
                    break
                for name, query in list(queries.running.items()):
                    queries.look_at(name, query, stop.event)
                queries.restart_those_due()
                if on_tick is not None and time.monotonic() >= next_tick:
                    on_tick(queries.totals)
                    next_tick = time.monotonic() + TICK_S
                if time.monotonic() >= next_status:
                    for name in queries.running if status_lines else ():
                        totals = queries.totals[name]
                        if totals.latest is not None:
                            changed_rows(status_line(name, totals.latest, totals))
                    if on_status is not None:
                        on_status()
                    next_status = time.monotonic() + settings.status_interval_s
                _wait_for_a_change(queries.running, stop.event, POLL_S)
        finally:
            running = queries.running
            if real_time_batch is None:
                stop_at_batch_end(list(running.values()), report=report, hurry=stop.again)
            else:
                end_with_running_batch(running, real_time_batch.total_seconds() + BATCH_COMMIT_S, report, stop.again)
            for name, query in running.items():
                queries.totals[name].add(query.recentProgress)
            if on_status is not None:
                on_status()
    return queries.totals


class _Queries:
    """`supervise`'s queries: the running ones, their totals, their failures in a row and the restarts
    they wait for, and the next step of a `Stage`."""

    def __init__(self, starters: Mapping[str, Callable[[], Any]], settings: Supervision,
                 report: Callable[[str], None]):
        self.starters, self.settings, self.report = starters, settings, report
        self.totals = {name: RunningTotals() for name in starters}
        self.running: dict[str, Any] = {}
        self.restart_at: dict[str, float] = {}
        self._failures_in_a_row = dict.fromkeys(starters, 0)
        self._then_start: dict[str, Stage] = {}

    def launch(self, name: str, start: Callable[[], Any]) -> None:
        started = start()
        self._then_start.pop(name, None)
        why = ""
        if isinstance(started, Stage):
            self._then_start[name], why, started = started, f": {started.why}", started.query
        self.running[name] = started
        self.report(f"[{name}] started (query id {started.id}){why}")

    def start_first(self, name: str) -> None:
        """The query's first start: a start Spark's analysis refuses ends the command (the same plan is
        refused at every start), as does a LakehouseError (a setting that cannot work); one that fails
        otherwise (a storage or broker hiccup, the broker down since the command checked it) is retried."""
        self.launch_or_retry(name, self.starters[name], "its start failed", first=True)

    def launch_or_retry(self, name: str, start: Callable[[], Any], failed: str, first: bool = False) -> None:
        """Start the query, or, when its start fails, restart it later from its starter (`failed`: what
        the restart's message calls the failure). Only a first start is refused for good."""
        try:
            self.launch(name, start)
        except Exception as error:
            if first and isinstance(error, LakehouseError) and not isinstance(error, BrokerUnreachableError):
                raise
            if first and refused_by_analysis(error):
                raise LakehouseError(f"the {name} query could not start: {first_line(error)}") from None
            self.restart_later(name, f"{failed}: {first_line(error)}")

    def restart_later(self, name: str, message: str) -> None:
        """Another failure in the query's row: restart it after the backoff, or give up after max_restarts."""
        settings, failures = self.settings, self._failures_in_a_row
        if failures[name] >= settings.max_restarts:
            raise LakehouseError(f"the {name} query failed: {message}")
        failures[name] += 1
        backoff = min(settings.restart_backoff_s * 2 ** (failures[name] - 1), MAX_BACKOFF_S)
        self.report(f"[{name}] failed ({message}); restart {failures[name]}/{settings.max_restarts} "
                    f"from its checkpoint in {backoff:g} s")
        self.restart_at[name] = time.monotonic() + backoff

    def look_at(self, name: str, query: Any, stop: threading.Event) -> None:
        """Count the query's new batches; once it has ended: its next step, its end, or its failure."""
        if self.totals[name].add(query.recentProgress) is not None:
            self._failures_in_a_row[name] = 0  # it completed a micro-batch: the failures in a row are over
        if query.isActive:
            return
        del self.running[name]
        error = query.exception()
        if error is None and name in self._then_start:
            stage = self._then_start[name]
            if stop.is_set():  # (arrived since the loop's check: the next stage would be cut short)
                self.report(f"[{name}] {stage.note}; stop requested: stopped before the next step")
                return
            self.report(f"[{name}] {stage.note}")
            # (its next step reads the broker: a broker restarting as the step ended fails that start)
            self.launch_or_retry(name, stage.then, f"the start after {stage.note}")
        elif error is None:
            self.report(f"[{name}] finished")
        elif raised_on_purpose(error):
            raise LakehouseError(f"the {name} query failed: {first_line(error)}")
        else:
            self.restart_later(name, first_line(error))

    def restart_those_due(self) -> None:
        for name, when in list(self.restart_at.items()):
            if time.monotonic() >= when:
                del self.restart_at[name]  # (its start may fail too: the broker still restarting, say)
                self.launch_or_retry(name, self.starters[name], "its restart failed")


def _wait_for_a_change(running: Mapping[str, Any], stop: threading.Event, seconds: float) -> None:
    """Wait up to `seconds` for a stop request or, when one query runs (each stream of a backfill in
    turn), for its end: the next stream then starts at once instead of up to a poll later."""
    if len(running) != 1 or stop.is_set():
        stop.wait(seconds)
        return
    from pyspark.errors import StreamingQueryException

    try:
        next(iter(running.values())).awaitTermination(seconds)
    except StreamingQueryException:  # it failed: supervise reads its exception on the next round
        pass


