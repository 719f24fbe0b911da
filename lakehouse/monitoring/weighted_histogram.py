"""A Prometheus histogram of weighted observations, for gold's freshness (lakehouse.monitoring.metrics)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable

from prometheus_client.utils import floatToGoString


class WeightedHistogram:
    """A Prometheus histogram whose observations carry a weight: a batch's freshness arrives as 100
    quantiles, each standing for 1% of its clicks (prometheus_client's Histogram counts one per call).

        histogram = WeightedHistogram((5, 60))
        histogram.add([(3.0, 2.0), (70.0, 0.5)])
        histogram.cumulative()  # [("5.0", 2.0), ("60.0", 2.0), ("+Inf", 2.5)]; histogram.total == 41.0
    """

    def __init__(self, bounds: Iterable[float]):
        self.bounds = tuple(bounds)
        self.counts = [0.0] * (len(self.bounds) + 1)  # the last: above every bound
        self.total = 0.0

    def add(self, observations: Iterable[tuple[float, float]]) -> None:
        for value, weight in observations:
            self.counts[bisect.bisect_left(self.bounds, value)] += weight
            self.total += value * weight

    def cumulative(self) -> list[tuple[str, float]]:
        """(le, observations at or below it) per bound and +Inf, as the exposition format wants them."""
        running = list(itertools.accumulate(self.counts))
        return [(floatToGoString(bound), count) for bound, count in zip(self.bounds, running)] + [("+Inf", running[-1])]
