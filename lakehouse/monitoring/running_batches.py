"""Which batch of each query its series have counted, and, for a query in real-time mode, what its
running batch has done since: a real-time batch reports once per checkpoint interval, so between its
reports /metrics follows it live (lakehouse.monitoring.metrics.QueryMetrics asks at each scrape):

  - what the running batch has read, from its Kafka consumers' own metrics
    (lakehouse.monitoring.live_consumers), counted into the input rows as it reads; its report then
    adds only the rest;
  - its alerts, counted as records on the alerts topic since the query started;
  - how long past two checkpoint intervals its end is overdue (a commit that is not finishing).

Each count is kept here under the lock the metrics read their snapshots under, so that a report
that comes in while a scrape reads is counted once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from lakehouse.monitoring.live_consumers import ConsumerReading
from shared.query_progress import Offsets

#: This JVM's Kafka consumers by topic (lakehouse.monitoring.live_consumers.consumer_readings bound to a session).
LiveReadings = Callable[[], Mapping[str, ConsumerReading]]
#: How long a scrape waits for the JVM's consumer metrics. A JVM that does not answer (frozen, in a
#: long GC pause) must not hold the scrape past Prometheus' timeout, which would read as the process
#: being down; without the reading the lag is the broker's offsets minus the last batch's, and grows.
LIVE_READING_WITHIN_S = 0.5
#: A real-time batch ends every checkpoint interval; one not ended this many intervals after the last
#: is overdue: its commit is not finishing.
OVERDUE_AFTER_INTERVALS = 2


class RunningBatches:
    """The batches counted per query and what the running ones have done since; every method takes
    `lock` itself except those named `..._locked`, which the caller calls with it held."""

    def __init__(self, lock: threading.Lock, live: LiveReadings | None = None):
        self.lock = lock
        self._live = live
        self._counted: dict[str, tuple[str, int]] = {}  # query -> (run id, batch id) last counted
        self._counted_live: dict[str, dict[int, int]] = {}  # query -> batch id -> its rows counted live
        self._live_waiting = False  # a reading still waits for the JVM: no second one is sent after it
        self._alerts_baseline: dict[str, int] = {}  # alerting query -> its topic's records when it started
        self._alerts_counted: dict[str, int] = {}  # alerting query -> records counted on its topic since
        self._last_end: dict[str, float] = {}  # real-time query -> when its last batch ended (or it started)

    def started(self, query: str, now: float, alerts_on_topic: int | None = None) -> None:
        with self.lock:
            self._last_end[query] = now
            if alerts_on_topic is not None:
                self._alerts_baseline.setdefault(query, alerts_on_topic)

    def terminated(self, query: str) -> None:
        with self.lock:
            self._last_end.pop(query, None)  # no batch is running to be overdue

    def first_report_locked(self, query: str, run_id: str, batch_id: int) -> bool:
        """Whether this report of a batch is the first seen (a report seen twice counts once)."""
        if self._counted.get(query) == (run_id, batch_id):
            return False
        self._counted[query] = (run_id, batch_id)
        return True

    def ended(self, query: str, batch_id: int, now: float) -> int:
        """A batch's report counts it: the rows the scrapes already counted of it while it ran."""
        with self.lock:
            self._last_end[query] = now
            counted_live = self._counted_live.get(query, {})
            already = counted_live.pop(batch_id, 0)
            for earlier in [batch for batch in counted_live if batch < batch_id]:
                del counted_live[earlier]
        return already

    def running_batch_locked(self, query: str) -> int:
        """The id of the batch after the last one counted."""
        return self._counted[query][1] + 1 if query in self._counted else 0

    def more_read(self, query: str, read: int, batch: int) -> int:
        """The running batch's reads not counted yet. `read` was measured from the offsets the batch
        before `batch` ended at: when a report has come in since, it counted those reads itself, and
        this reading adds nothing."""
        with self.lock:
            if self.running_batch_locked(query) != batch:
                return 0
            counted = self._counted_live.setdefault(query, {})
            more = read - counted.get(batch, 0)
            if more > 0:
                counted[batch] = read
        return max(more, 0)

    def more_alerts(self, query: str, topic: str, latest: Offsets) -> int:
        """A real-time query's alerts on its topic since it started, not counted yet."""
        on_topic = sum(offset for (name, _), offset in latest.items() if name == topic)
        with self.lock:
            if query not in self._alerts_baseline:
                return 0
            emitted = on_topic - self._alerts_baseline[query]
            more = emitted - self._alerts_counted.get(query, 0)
            if more > 0:
                self._alerts_counted[query] = emitted
        return max(more, 0)

    def overdue(self, now: float, intervals: Mapping[str, float]) -> list[tuple[str, float]]:
        """(query, seconds its batch end is overdue, 0 when on time) per query with a batch interval."""
        with self.lock:
            ends = dict(self._last_end)
        return [(query, max(0.0, now - ended - OVERDUE_AFTER_INTERVALS * intervals[query]))
                for query, ended in sorted(ends.items()) if intervals.get(query)]

    def consumer_readings(self) -> Mapping[str, ConsumerReading]:
        """The live readings, or none when the JVM does not answer within LIVE_READING_WITHIN_S or
        fails: a scrape must answer, and the batch reports still count."""
        if not self._live:
            return {}
        with self.lock:
            if self._live_waiting:
                return {}
            self._live_waiting = True
        answer: dict[str, ConsumerReading] = {}
        done = threading.Event()

        def read() -> None:
            try:
                answer.update(self._live())
            except Exception:
                pass
            finally:
                with self.lock:
                    self._live_waiting = False
                done.set()

        threading.Thread(target=read, name="live-consumer-reading", daemon=True).start()
        return dict(answer) if done.wait(LIVE_READING_WITHIN_S) else {}
