"""Who makes each generated click, and what kind of click it is: visitors who browse, add to cart and
buy (lakehouse.services.generator says how its visits behave)."""

from __future__ import annotations

import heapq
import itertools
import random
from datetime import timedelta
from typing import Protocol


class VisitSettings(Protocol):
    """How visitors behave (lakehouse.services.generator.TrafficSpec is one)."""

    think_time: timedelta
    visit_clicks: float
    cart_probability: float
    purchase_probability: float
    hot_uplift: float
    anonymous_fraction: float


class _Visit:
    """One visitor's visit in progress."""

    __slots__ = ("user", "carted", "saw_hot")

    def __init__(self, user: str):
        self.user, self.carted, self.saw_hot = user, False, False


class Visits:
    """Who makes each click, and what kind of click it is (the module says how visits behave).

    `next(at_ms, hot)` for each click in event-time order: the visitor whose next click is due by then
    (the one due first), or a new visitor; and the click's eventType. Visitors are new users, named
    `user-<prefix>-<n>`, so a visit is one user's only visit unless a think time outlasts a session's gap.
    A visitor who has clicked a hot page stays with the hot pages (the sale is what they came for), so
    the visits that saw one and those that did not stay apart, as the uplift then shows.
    """

    def __init__(self, spec: VisitSettings, rng: random.Random, prefix: str):
        self._spec, self._rng, self._prefix = spec, rng, prefix
        #: (due ms, visitor number, visit), heaps on the first two: the visits that saw a hot page, the others
        self._hot: list[tuple[int, int, _Visit]] = []
        self._other: list[tuple[int, int, _Visit]] = []
        self._visitors = itertools.count()
        self._think_rate = 1 / (spec.think_time.total_seconds() * 1000)
        self._ends = 1 / spec.visit_clicks

    def next(self, at_ms: int, hot: bool) -> tuple[str | None, str]:
        spec, rng = self._spec, self._rng
        if spec.anonymous_fraction and rng.random() < spec.anonymous_fraction:
            return None, "page_view"
        hot_due, other_due = self._hot, self._other
        if hot and hot_due and hot_due[0][0] <= at_ms:
            _, number, visit = heapq.heappop(hot_due)
        elif other_due and other_due[0][0] <= at_ms:  # a click on a hot page may be an ordinary visitor's
            _, number, visit = heapq.heappop(other_due)
        else:
            number = next(self._visitors)
            visit = _Visit(f"user-{self._prefix}-{number}")
        visit.saw_hot |= hot
        if visit.carted and rng.random() < spec.purchase_probability * (1 + spec.hot_uplift if visit.saw_hot else 1):
            return visit.user, "purchase"  # the visit ends with it
        kind = "page_view"
        if spec.cart_probability and rng.random() < spec.cart_probability:
            kind, visit.carted = "add_to_cart", True
        if rng.random() >= self._ends:
            due_ms = at_ms + max(1, round(rng.expovariate(self._think_rate)))
            heapq.heappush(hot_due if visit.saw_hot else other_due, (due_ms, number, visit))
        return visit.user, kind
