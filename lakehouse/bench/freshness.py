"""Gold's freshness from the medallion query's reports, for `lakehouse bench freshness`.

A measured run with the medallion beside the fast path (lakehouse/bench/measured_run.py) collects the
query's reports; each holds its clicks' Kafka times at 100 quantiles (analytical/gold_page_clicks_5s.py,
`observe_arrivals`), which with the batch's end give every click's freshness: the figures /metrics
exports as lakehouse_gold_freshness_seconds. The benchmark itself is lakehouse/bench/operational.py's
`freshness`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from shared.query_progress import ProgressSummary

#: The promise to the data team: 99% of clicks in gold within a minute of their Kafka append.
FRESHNESS_P99_TARGET_S = 60.0
#: How long after the load's end a run waits for gold to catch up (gold's trigger is 10 s by default).
GOLD_CATCH_UP_WAIT = timedelta(seconds=300)
#: Gold has caught up once a batch holds clicks appended this close to the load's end.
LAST_CLICKS = timedelta(seconds=2)


def weighted_quantile(pairs: Iterable[tuple[float, float]], q: float) -> float | None:
    """The smallest value whose pairs (value, weight) up to it hold at least `q` of the weight.

        weighted_quantile([(1.0, 3.0), (5.0, 1.0)], 0.75) == 1.0
        weighted_quantile([(1.0, 3.0), (5.0, 1.0)], 0.80) == 5.0
    """
    ordered = sorted(pairs)
    total = sum(weight for _, weight in ordered)
    if not ordered or total <= 0:
        return None
    running = 0.0
    for value, weight in ordered:
        running += weight
        if running >= q * total - 1e-9:
            return value
    return ordered[-1][0]


def freshness_figures(batches: Sequence[ProgressSummary], start: datetime, end: datetime) -> dict[str, Any]:
    """Gold's freshness over the clicks of the gold batches that ended inside [start, end]: p50, p99
    and the largest quantile's, in seconds, and the p99 of the batches that ended in each minute from
    `start` (None: no batch did). Bounded freshness stays level; a medallion slower than the traffic
    shows as a rising series with gaps (few, long batches)."""
    inside = [batch for batch in batches if batch.ended_at and start <= batch.ended_at <= end and batch.freshness_s]
    pairs = [pair for batch in inside for pair in batch.freshness_s]
    minutes: dict[int, list[tuple[float, float]]] = {}
    for batch in inside:
        minutes.setdefault(int((batch.ended_at - start).total_seconds() // 60), []).extend(batch.freshness_s)
    return {
        "clicks": round(sum(weight for _, weight in pairs)),
        "batches": len(inside),
        "p50_s": _rounded(weighted_quantile(pairs, 0.50)),
        "p99_s": _rounded(weighted_quantile(pairs, 0.99)),
        "max_s": _rounded(max((seconds for seconds, _ in pairs), default=None)),
        "p99_s_by_minute": [_rounded(weighted_quantile(minutes.get(minute, []), 0.99))
                            for minute in range(math.ceil((end - start).total_seconds() / 60))],
    }


def caught_up_at(batches: Iterable[ProgressSummary], appended_by: datetime) -> datetime | None:
    """When gold first wrote a batch whose newest clicks were appended at `appended_by` or later: from
    then on every click the load sent before it is in gold."""
    threshold_ms = appended_by.timestamp() * 1000
    ends = [batch.ended_at for batch in batches
            if batch.ended_at and batch.arrival_times_ms and batch.arrival_times_ms[-1] >= threshold_ms]
    return min(ends, default=None)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def layer_figures(batches: Sequence[ProgressSummary], start: datetime, end: datetime) -> dict[str, Any]:
    """Per medallion query, its batches that ended inside [start, end]: how many, their median and
    longest durations, and the share of the window it spent in batches (1: back to back, behind)."""
    by_query: dict[str, list[float]] = {}
    for batch in batches:
        if batch.ended_at and start <= batch.ended_at <= end:
            by_query.setdefault(batch.name, []).append(batch.duration_ms / 1000)
    window_s = max((end - start).total_seconds(), 1e-9)
    return {query: {"batches": len(seconds), "median_s": round(statistics.median(seconds), 1),
                    "max_s": round(max(seconds), 1), "busy_share": round(sum(seconds) / window_s, 2)}
            for query, seconds in sorted(by_query.items())}


def gold_freshness(batches: Sequence[ProgressSummary], measured_from: datetime, load_ended: datetime,
                   caught_up: datetime | None) -> dict[str, Any]:
    """A run's gold figures from the medallion's reports (only gold's carry freshness): freshness over
    the gold batches that ended from `measured_from` until gold caught up with the load (or, when it did
    not, until the load ended), how long after the load's end gold caught up (None: not within the
    wait), and each layer's batches in that window."""
    end = caught_up or load_ended
    return freshness_figures(batches, measured_from, end) | {
        "caught_up_s_after_load": None if caught_up is None else round(max(0.0, (caught_up - load_ended).total_seconds()), 1),
        "measured_s": round((end - measured_from).total_seconds(), 1),
        "layers": layer_figures(batches, measured_from, end),
    }
