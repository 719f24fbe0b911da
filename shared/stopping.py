"""How a command's streaming queries stop: a stop request (SIGINT, SIGTERM, a parent's stop; a second
one means now), each query at the end of the batch it is running (a micro-batch query between
batches at once), and a stop now that keeps Spark's log of the cancelled work quiet."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from shared.config import Supervision
from shared.processes import PARENT_STOP, PARENT_STOP_NOW, STOP_SIGNALS
from shared.query_errors import first_line
from shared.spark_internals import (jvm_root_log_level, mark_terminated, query_execution_thread,
                                     running_task_count)


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


#: How long a clean stop waits for the queries to finish the micro-batches they are in.
BATCH_END_WAIT_S = 60.0


def stop_at_batch_end(queries: list[Any], wait_s: float = BATCH_END_WAIT_S,
                      report: Callable[[str], None] | None = None, hurry: threading.Event | None = None) -> None:
    """Stop each micro-batch query at the end of the batch it is in (at once when it is between
    batches), all within `wait_s`, or at once when `hurry` is set (a second Ctrl-C).

    `stop()` interrupts the batch in flight, and Spark logs what the interruption broke at ERROR
    (`WriteToDataSourceV2Exec: ... is aborting`, `TorrentBroadcast: Store broadcast ... fail`),
    although nothing is lost: the batch runs again from the checkpoint. So each query is first marked
    terminated (`mark_terminated`): its loop starts no other batch, and a query that is never between
    batches (a medallion whose batches take longer than its trigger, the fast path's `0 seconds` under
    steady traffic) still ends with the batch it is running. A query this Spark does not let be marked
    is stopped the first time it is between batches. Spark's status says "between batches" for a
    moment after a batch has begun (the new batch's status is set once it runs), so a stop that lands
    there cuts that batch short: the JVM's log is quiet for each stop. After `wait_s` the ones left are
    stopped where they are (`stop_now`), and `report` names them."""
    deadline = time.monotonic() + wait_s
    waiting = [query for query in queries if query.isActive]
    threads = {id(query): query_execution_thread(query) for query in waiting if mark_terminated(query)}
    if waiting and hurry is not None and report is not None:
        report(f"[{_names(waiting)}] stopping at the end of the running batch (within {wait_s:g} s); "
               "stop again to stop now")

    def ended(query: Any) -> bool:
        thread = threads.get(id(query))
        return not (thread.isAlive() if thread is not None else query.isActive)

    while waiting and time.monotonic() < deadline and not (hurry is not None and hurry.is_set()):
        for query in list(waiting):
            if ended(query):
                query.stop()
                waiting.remove(query)
            elif not query.status.get("isTriggerActive"):
                with _jvm_log_quiet():
                    query.stop()
                waiting.remove(query)
        time.sleep(0.01)
    if waiting and report is not None:
        why = "stopped again" if hurry is not None and hurry.is_set() else f"still in a batch after {wait_s:g} s"
        report(f"[{_names(waiting)}] {why}: stopped in the running batch (nothing is lost: a restart runs that "
               "batch again)")
    stop_now(waiting)


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
    # quiet before the mark: a batch it abandons logs its writer's abort at once
    with _jvm_log_quiet(any(query.isActive for query in queries.values())):
        ending = {name: query for name, query in queries.items() if query.isActive and mark_terminated(query)}
        threads = {name: query_execution_thread(query) for name, query in ending.items()}
        if ending:
            report(f"[{', '.join(ending)}] stopping at the end of the running batch (within {wait_s:g} s), so that "
                   "a restart replays nothing; stop again to stop now (a restart then runs that batch again)")
        deadline = time.monotonic() + wait_s
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
        return f"its last batch failed ({first_line(error)}): a restart runs it again"
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
    """Stop queries where they are: Spark cancels their tasks (a real-time query's run for its whole
    batch) and logs each cancelled writer, broadcast and shuffle connection at ERROR with a stack trace,
    although the batch just runs again from the checkpoint at the next start. Those lines are silenced
    meanwhile."""
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
