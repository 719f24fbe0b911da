"""The session's one StreamingQueryListener (`QueryEvents`): it keeps the query names (Spark's idle and
termination events carry only the id), reads each progress report once (shared.query_progress), and
calls each `QueryObserver` given to `watching`: the progress recorder, the Prometheus series."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from pyspark.sql.streaming import StreamingQueryListener

from shared.query_progress import ProgressSummary


class QueryObserver(Protocol):
    """What watches the queries (the progress recorder, the Prometheus series): called from Spark's
    listener thread, so each call must be quick and must not raise."""

    def started(self, name: str, run_id: str) -> None: ...

    def progressed(self, summary: ProgressSummary) -> None: ...

    def idle(self, name: str) -> None: ...

    def terminated(self, name: str, run_id: str, error: str | None) -> None: ...


class QueryEvents(StreamingQueryListener):
    """The session's one listener: each event read once and handed to every observer."""

    def __init__(self, observers: Sequence[QueryObserver]):
        self.observers = list(observers)
        self._names: dict[str, str] = {}  # query id -> name: idle and termination events carry no name
        self._running: set[str] = set()  # run ids started and not yet reported terminated
        self._lock = threading.Lock()
        self._all_terminated = threading.Condition(self._lock)

    def onQueryStarted(self, event: Any) -> None:
        name = event.name or "unnamed"
        with self._lock:
            self._names[str(event.id)] = name
            self._running.add(str(event.runId))
        for observer in self.observers:
            observer.started(name, str(event.runId))

    def onQueryProgress(self, event: Any) -> None:
        summary = ProgressSummary.of(event.progress)
        for observer in self.observers:
            observer.progressed(summary)

    def onQueryIdle(self, event: Any) -> None:
        name = self._names.get(str(event.id))
        for observer in self.observers if name else ():
            observer.idle(name)

    def onQueryTerminated(self, event: Any) -> None:
        name = self._names.get(str(event.id), "unnamed")
        error = event.exception.splitlines()[0] if event.exception else None
        for observer in self.observers:
            observer.terminated(name, str(event.runId), error)
        with self._lock:
            self._running.discard(str(event.runId))
            self._all_terminated.notify_all()

    def await_terminations(self, timeout_s: float) -> bool:
        """Wait until every query seen to start has been reported terminated.

        Spark delivers listener events on its own thread, after the fact: removed (or its process
        gone) while a query's last events are on their way, the listener fails on Spark's side with
        `ERROR StreamingQueryListenerBus: Listener PythonStreamingQueryListenerWrapper threw an
        exception`, which a clean stop must not log."""
        with self._lock:
            return self._all_terminated.wait_for(lambda: not self._running, timeout=timeout_s)


@contextmanager
def watching(spark: Any, *observers: QueryObserver | None) -> Iterator[QueryEvents]:
    """The session's query events handed to `observers` (None ones skipped) while the block runs."""
    events = QueryEvents([observer for observer in observers if observer is not None])
    spark.streams.addListener(events)
    try:
        yield events
    finally:
        if not any(query.isActive for query in spark.streams.active):  # stopped: their last events are due
            events.await_terminations(timeout_s=10)
        spark.streams.removeListener(events)
