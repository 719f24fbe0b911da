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

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, Protocol

from shared.config import Config, ExpectationPolicy, Supervision
from shared.errors import LakehouseError
from shared.processes import PARENT_STOP, PARENT_STOP_NOW, STOP_SIGNALS
from shared.progress import ChangedRows
from shared.query_progress import RunningTotals, status_line
from shared.spark_internals import (jvm_root_log_level, mark_terminated, query_execution_thread,
                                     running_task_count)
from shared.storage import checkpoint_location


class Output(Protocol):
    """What a stream writes: a Delta table (analytical.tables.Table) or anything else with a name."""

    name: str


#: (spark, config, source root, target root) -> the stream's DataStreamWriter, before its query
#: name, checkpoint and trigger: a rebuild points the same writer at other roots.
Writer = Callable[[Any, Config, str, str], Any]


@dataclass(frozen=True)
class Stream:
    """One streaming query, declared once beside its transform, in the module named after it.

    Both paths declare their queries this way; the medallion's registry (analytical.registry) lists
    its streams, and everything that runs, rebuilds, checks or measures them reads these fields.
    """

    #: Its query name, its checkpoint folder (<root>/_checkpoints/<name>) and its key in
    #: `quality.policies`.
    name: str
    #: `operational`: the fast path (its trigger `operational.trigger`); `bronze`, `silver`, `gold`: the medallion's layer, which sets its
    #: trigger (`analytical.triggers.<layer>`) and its place in a rebuild.
    layer: Literal["operational", "bronze", "silver", "gold"]
    writer: Writer
    #: The Delta tables it writes, in the order it creates them.
    writes: tuple[Output, ...] = ()
    #: What a row that breaks one of its expectations does, unless `quality.policies.<name>` says
    #: otherwise; None when the stream checks no expectations.
    policy: ExpectationPolicy | None = None

    def writer_at(self, spark: Any, config: Config, source_root: str, target_root: str) -> Any:
        """Its writer, named, with its checkpoint under `target_root`: all it lacks is a trigger."""
        return (
            self.writer(spark, config, source_root, target_root)
            .queryName(self.name)
            .option("checkpointLocation", checkpoint_location(target_root, self.name))
        )

    def trigger_interval(self, config: Config) -> timedelta:
        """Its processing-time trigger when it runs continuously (0: the next batch as soon as one ends)."""
        return config.operational.trigger if self.layer == "operational" else getattr(config.analytical.triggers, self.layer)

    def allowed_lateness(self, config: Config) -> timedelta:
        """How far its event-time watermark stays behind the newest event it has seen."""
        return config.hot_pages.watermark if self.layer == "operational" else config.analytical.watermark

    def expectation_policy(self, config: Config) -> ExpectationPolicy:
        """The policy in force: the configured one, else the declared one."""
        declared = self.policy
        if declared is None:
            raise LakehouseError(f"the {self.name} stream checks no expectations, so it has no policy")
        return config.quality.policies.get(self.name, declared)


class StopRequest:
    """SIGINT / SIGTERM set a flag instead of raising, so the query can be stopped cleanly; a second
    one sets `again`: stop now, without waiting for the running batch (`end_with_running_batch`).
    A parent command's PARENT_STOP is a first stop however often it comes, its PARENT_STOP_NOW a
    second (shared.processes)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.again = threading.Event()
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> "StopRequest":
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if signum == PARENT_STOP_NOW or (signum != PARENT_STOP and self.event.is_set()):
            if not self.again.is_set():
                _exit_unless_ended_within(STOP_NOW_WITHIN_S)
            self.again.set()
        self.event.set()

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


#: How long a second stop ("stop now") may take before the process exits where it stands: a query
#: whose write hangs on the storage may not answer Spark's own stop.
STOP_NOW_WITHIN_S = 8.0


def _exit_unless_ended_within(seconds: float) -> None:
    """End the process after `seconds` unless it has ended by then. Its Spark JVM dies with it (it
    is started to); nothing is lost, as after a crash: each query's next start runs the batch it was in."""

    def exit_now() -> None:
        sys.stderr.write(f"still stopping {seconds:g} s after the second stop: exiting now (the next start runs "
                         "the batches cut short again)\n")
        sys.stderr.flush()
        os._exit(130)

    timer = threading.Timer(seconds, exit_now)
    timer.daemon = True  # a process that ends sooner is not held up by it
    timer.start()


@dataclass(frozen=True)
class Stage:
    """What a start function may return instead of a query: a query that runs first, and what starts
    once it has finished on its own (a real-time start that catches up first: operational.catch_up).
    `supervise` says `why` as `query` starts, and `note` as `then` starts."""

    query: Any
    then: Callable[[], Any]
    why: str
    note: str


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
    micro-batch query is stopped between batches (`stop_between_batches`); a second signal stops them now.
    `stop`: the caller's StopRequest, when one stop must end several calls (each layer of a backfill);
    else one of its own.
    """
    totals = {name: RunningTotals() for name in starters}
    changed_rows = ChangedRows(report)
    restarts = dict.fromkeys(starters, 0)
    running: dict[str, Any] = {}
    restart_at: dict[str, float] = {}
    then_start: dict[str, Stage] = {}
    deadline = time.monotonic() + seconds if seconds else None

    def launch(name: str, start: Callable[[], Any]) -> None:
        started = start()
        then_start.pop(name, None)
        why = ""
        if isinstance(started, Stage):
            then_start[name], why, started = started, f": {started.why}", started.query
        running[name] = started
        report(f"[{name}] started (query id {started.id}){why}")

    def restart_later(name: str, message: str) -> None:
        """Another failure in the query's row: restart it after the backoff, or give up after max_restarts."""
        if restarts[name] >= settings.max_restarts:
            raise LakehouseError(f"the {name} query failed: {message}")
        restarts[name] += 1
        backoff = min(settings.restart_backoff_s * 2 ** (restarts[name] - 1), MAX_BACKOFF_S)
        report(f"[{name}] failed ({message}); restart {restarts[name]}/{settings.max_restarts} "
               f"from its checkpoint in {backoff:g} s")
        restart_at[name] = time.monotonic() + backoff

    with StopRequest() if stop is None else nullcontext(stop) as stop:
        try:
            for name, start in starters.items():
                try:
                    launch(name, start)
                except LakehouseError:
                    raise
                except Exception as error:
                    if _refused_by_analysis(error):  # the same plan would be refused at every start
                        raise LakehouseError(f"the {name} query could not start: {_first_line(error)}") from None
                    restart_later(name, f"its start failed: {_first_line(error)}")  # a storage or broker hiccup
            next_status = time.monotonic() + settings.status_interval_s
            next_tick = time.monotonic() + TICK_S
            while running or restart_at:
                done = until is not None and time.monotonic() >= next_status and until()
                if stop.event.is_set() or (deadline and time.monotonic() >= deadline) or done:
                    why = "stop requested" if stop.event.is_set() else "done" if done else f"{seconds:g} s elapsed"
                    report(f"[{', '.join(running)}] {why}: stopping")
                    break
                for name, query in list(running.items()):
                    if totals[name].add(query.recentProgress) is not None:
                        restarts[name] = 0  # it completed a micro-batch: the failures in a row are over
                    if query.isActive:
                        continue
                    del running[name]
                    error = query.exception()
                    if error is None and name in then_start:
                        stage = then_start[name]
                        if stop.event.is_set():  # (arrived since the loop's check: the next stage would be cut short)
                            report(f"[{name}] {stage.note}; stop requested: stopped before the next step")
                            continue
                        report(f"[{name}] {stage.note}")
                        launch(name, stage.then)
                        continue
                    if error is None:
                        report(f"[{name}] finished")
                        continue
                    if _raised_on_purpose(error):
                        raise LakehouseError(f"the {name} query failed: {_first_line(error)}")
                    restart_later(name, _first_line(error))
                for name, when in list(restart_at.items()):
                    if time.monotonic() >= when:
                        del restart_at[name]
                        try:
                            launch(name, starters[name])
                        except Exception as error:  # its start failed too (the broker still restarting, say)
                            restart_later(name, f"its restart failed: {_first_line(error)}")
                if on_tick is not None and time.monotonic() >= next_tick:
                    on_tick(totals)
                    next_tick = time.monotonic() + TICK_S
                if time.monotonic() >= next_status:
                    for name in running if status_lines else ():
                        if totals[name].latest is not None:
                            changed_rows(status_line(name, totals[name].latest, totals[name]))
                    if on_status is not None:
                        on_status()
                    next_status = time.monotonic() + settings.status_interval_s
                _wait_for_a_change(running, stop.event, POLL_S)
        finally:
            if real_time_batch is None:
                stop_between_batches(list(running.values()), report=report, hurry=stop.again)
            else:
                end_with_running_batch(running, real_time_batch.total_seconds() + BATCH_COMMIT_S, report, stop.again)
            for name, query in running.items():
                totals[name].add(query.recentProgress)
            if on_status is not None:
                on_status()
    return totals


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


def await_stop(settings: Supervision, *, seconds: float | None, report: Callable[[str], None],
               until: Callable[[], bool], on_status: Callable[[], None] | None = None) -> None:
    """What a command whose queries run in child processes does meanwhile: wait for SIGINT/SIGTERM,
    `seconds`, or `until()` (a child ended), calling `on_status` every status interval and at the end."""
    deadline = time.monotonic() + seconds if seconds else None
    with StopRequest() as stop:
        try:
            while True:
                wait = settings.status_interval_s if deadline is None else \
                    max(0.0, min(settings.status_interval_s, deadline - time.monotonic()))
                if stop.event.wait(wait) or until() or (deadline and time.monotonic() >= deadline):
                    why = "stop requested" if stop.event.is_set() else "done" if until() else f"{seconds:g} s elapsed"
                    report(f"{why}: stopping")
                    return
                if on_status is not None:
                    on_status()
        finally:
            if on_status is not None:
                on_status()


#: How long `supervise` waits between its looks at the queries, in seconds (a signal is noticed within it).
POLL_S = 0.25
#: How often `supervise` calls its `on_tick`, in seconds.
TICK_S = 1.0
#: How long a clean stop waits for the queries to finish the micro-batches they are in.
BATCH_END_WAIT_S = 60.0


def stop_between_batches(queries: list[Any], wait_s: float = BATCH_END_WAIT_S,
                         report: Callable[[str], None] | None = None, hurry: threading.Event | None = None) -> None:
    """Stop each query as soon as it is between micro-batches, all within `wait_s`, or at once when
    `hurry` is set (a second Ctrl-C).

    `stop()` interrupts the batch in flight, and Spark logs what the interruption broke at ERROR
    (`WriteToDataSourceV2Exec: ... is aborting`, `TorrentBroadcast: Store broadcast ... fail`),
    although nothing is lost: the batch runs again from the checkpoint. A query whose trigger
    starts the next batch at once (the fast path's `0 seconds`) is seldom between batches while
    data keeps coming, nor is a medallion that cannot keep up: after `wait_s` the ones left are stopped
    where they are, and `report` names them."""
    deadline = time.monotonic() + wait_s
    waiting = [query for query in queries if query.isActive]
    if waiting and hurry is not None and report is not None:
        report(f"[{_names(waiting)}] stopping between batches (within {wait_s:g} s); stop again to stop now")
    while waiting and time.monotonic() < deadline and not (hurry is not None and hurry.is_set()):
        for query in list(waiting):
            if not query.isActive or not query.status.get("isTriggerActive"):
                query.stop()
                waiting.remove(query)
        time.sleep(0.01)
    if waiting and report is not None:
        why = "stopped again" if hurry is not None and hurry.is_set() else f"still in a batch after {wait_s:g} s"
        report(f"[{_names(waiting)}] {why}: stopped in the running batch (nothing is lost: a restart runs that "
               "batch again; Spark may log the cut-short write as an error)")
    for query in waiting:
        query.stop()


def _names(queries: list[Any]) -> str:
    return ", ".join(query.name or str(query.id) for query in queries)


#: How long a real-time batch may take to commit once its checkpoint interval is over (its state's
#: eviction scan and commit), on top of the interval, before a stop stops it where it is.
BATCH_COMMIT_S = 60.0


def end_with_running_batch(queries: Mapping[str, Any], wait_s: float, report: Callable[[str], None],
                           hurry: threading.Event) -> None:
    """Stop real-time queries at the end of the batch each is running: within `wait_s`, or at once
    when `hurry` is set (a second Ctrl-C).

    A real-time query is always inside a batch, and `StreamingQuery.stop()` cancels it: nothing is
    lost, but the next start reads the batch's clicks again and re-sends the alert records consumers
    have already seen. Spark's stop marks the query terminated, then cancels its jobs; marking it
    alone (`shared.spark_internals.mark_terminated`) lets the running batch end at its checkpoint
    interval and commit, after which the query's loop sees it is no longer active and ends before
    starting another batch. A batch marked while it was still starting is abandoned instead, and Spark
    logs its writer's abort at ERROR: the JVM's log is quiet meanwhile, and each query's outcome is
    said here, from whether its running batch reported its end.
    """
    last_batch = {name: _last_batch_id(query) for name, query in queries.items()}
    ending = {name: query for name, query in queries.items() if query.isActive and mark_terminated(query)}
    threads = {name: query_execution_thread(query) for name, query in ending.items()}
    if ending:
        report(f"[{', '.join(ending)}] stopping at the end of the running batch (within {wait_s:g} s), so that "
               "a restart replays nothing; stop again to stop now (a restart then runs that batch again)")
    deadline = time.monotonic() + wait_s
    with _jvm_log_quiet(bool(ending)):
        while ending and not hurry.is_set() and time.monotonic() < deadline:
            for name, query in list(ending.items()):
                if threads[name].isAlive():  # (awaitTermination answers at once: the query is marked terminated)
                    continue
                del ending[name]
                error, committed = query.exception(), _last_batch_id(query) > last_batch[name]
                if not error and not committed:
                    _until_no_task_runs()  # the abandoned batch's tasks end (and log) after its thread
                report(f"[{name}] {_outcome(error, committed)}")
            time.sleep(0.1)
    if ending:
        report(f"[{', '.join(ending)}] stopping now: a restart runs the running batch again")
    stop_now([query for query in queries.values() if query.isActive or query in ending.values()])


def _last_batch_id(query: Any) -> int:
    progress = query.lastProgress
    return int(progress["batchId"]) if progress else -1


def _outcome(error: Any, committed: bool) -> str:
    """What became of a marked query's running batch, once its thread has ended."""
    if error:
        return f"its last batch failed ({_first_line(error)}): a restart runs it again"
    if committed:
        return "its last batch committed: stopped"
    return "its running batch had just started and was abandoned, uncommitted: stopped (a restart runs it again)"


@contextmanager
def _jvm_log_quiet(quiet: bool = True) -> Iterator[None]:
    """The JVM's log off for the block (when `quiet`), then back to its level."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context if quiet else None
    if context is None:
        yield
        return
    level = jvm_root_log_level(context)
    context.setLogLevel("OFF")
    try:
        yield
    finally:
        context.setLogLevel(level)


def stop_now(queries: list[Any]) -> None:
    """Stop real-time queries where they are: Spark cancels their long-running tasks and logs each
    cancelled writer and shuffle connection at ERROR with a stack trace, although the batch just runs
    again from the checkpoint at the next start. Those lines are silenced meanwhile."""
    if not queries:
        return
    with _jvm_log_quiet():
        for query in queries:
            query.stop()
        _until_no_task_runs()


def _until_no_task_runs(timeout_s: float = 10) -> None:
    """Cancelled tasks log as they end, after `stop()` returned and after their stages stopped counting
    as active: a quiet log is held until no executor runs a task (their end events)."""
    from pyspark import SparkContext

    context, deadline = SparkContext._active_spark_context, time.monotonic() + timeout_s
    while context is not None and time.monotonic() < deadline and running_task_count(context):
        time.sleep(0.05)


#: The longest wait before a restart, however many failures came before it.
MAX_BACKOFF_S = 60.0
_RAISED = "[USER_RAISED_EXCEPTION]"
#: How a LakehouseError raised inside a query's foreachBatch reads in the query's error.
_REFUSED = f"{LakehouseError.__module__}.{LakehouseError.__qualname__}: "


def _raised_on_purpose(error: Any) -> bool:
    """An error the query raised itself, which a restart would raise again: `raise_error` (an
    expectation under the `fail` policy), or a LakehouseError of a batch function (a refusal)."""
    text = str(getattr(error, "desc", None) or error)
    return _RAISED in text or _REFUSED in text


def _refused_by_analysis(error: BaseException) -> bool:
    """Spark's analysis refused the query (pyspark's AnalysisException or a subclass, Delta's included):
    its plan, its checkpoint or its table, which a retry meets again; named, not imported, so that this
    module loads without pyspark."""
    return any(cls.__name__ == "AnalysisException" for cls in type(error).__mro__)


def _first_line(error: Any) -> str:
    """The line that says what went wrong: the error raised on purpose (an expectation under the
    `fail` policy, a batch function's refusal) when there is one, even inside a foreachBatch
    traceback; else the first line, and what it wraps at its root (`_root_cause`)."""
    text = str(getattr(error, "desc", None) or error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    raised = [line for line in lines if _RAISED in line]
    if raised:
        return raised[-1].split(_RAISED, 1)[1].split(" SQLSTATE")[0].strip()
    refused = [line for line in lines if _REFUSED in line]
    if refused:
        return refused[-1].split(_REFUSED, 1)[1].strip()
    first = lines[0] if lines else type(error).__name__
    cause = _root_cause(error)
    return first if cause is None or cause in first else f"{first}: caused by {cause}"


def _root_cause(error: Any) -> str | None:
    """The first line of what a Spark error wraps at its root: the storage's or the broker's own words
    (an S3 refusal, a timeout), which Spark's own message names only as "Error writing state store
    files". Of a chain `... -> AccessDeniedException: <key>: ... S3Exception: Access Denied (403) ->
    S3Exception: Access Denied (403)`, the cause above the root when it holds the root's words and
    more (the key). pyspark keeps a captured exception's Java causes in `_cause`."""
    lines: list[str] = []
    cause = getattr(error, "_cause", None)
    while cause is not None and len(lines) < 32:
        text = [line.strip() for line in str(getattr(cause, "_desc", None) or cause).splitlines() if line.strip()]
        lines.append(text[0] if text else type(cause).__name__)
        cause = getattr(cause, "_cause", None)
    while len(lines) > 1 and lines[-1] in lines[-2]:
        lines.pop()
    return lines[-1] if lines else None
