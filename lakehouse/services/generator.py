"""Synthetic page clicks, reproducible from a seed, for the demo, the benchmarks and the tests.

The traffic looks like a shop's: many pages with a long-tailed popularity (Zipf-like, capped so
that an ordinary page stays well under the threshold), a few hot pages that take more than the
threshold in every full window, and on request late, duplicate and malformed records. Event time
advances at the nominal rate from `start_time` (default: the start of the current window), so a
run is the same whatever the machine's speed; the same seed and start time give the same bytes.

Clicks come from visits (`Visits`): a visitor's next click follows the one before by a think time
(exponential, mean `think_time`), and a visit ends after a click with probability 1 / `visit_clicks`,
or with a purchase. A click is an add-to-cart with probability `cart_probability`; once a visit has
carted, a click is a purchase with probability `purchase_probability`, raised by `hot_uplift` (0.5:
half as likely again) in a visit that has clicked a hot page. A share `anonymous_fraction` of the
clicks carry no userId and belong to no visit. A page view carries no eventType (the contract's default).
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import time
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from shared.config import Config
from shared.errors import LakehouseError
from lakehouse.services.visits import Visits
from shared.schema import MAX_PAGE_ID_LENGTH, InvalidReason

#: Hot pages get this many times (threshold + 1) clicks per window, so that late, duplicate and
#: malformed records taken out of them cannot pull a window back under the threshold.
HOT_MARGIN = 1.5
#: Hot pages may take at most this share of the traffic.
MAX_HOT_SHARE = 0.8
#: `lakehouse generate` without --hot-pages: this many, or as many as the rate carries, so that a
#: first try raises alerts at the configured threshold.
DEFAULT_HOT_PAGES = 3
#: An ordinary page is capped at this share of the threshold per window.
ORDINARY_CAP = 0.5
_ZIPF_EXPONENT = 0.8
_DUPLICATE_MEMORY = 10_000

Record = tuple[bytes | None, bytes | None, str]  # (key, value, kind)


@dataclass(frozen=True)
class TrafficSpec:
    """What to generate. Fractions are of all records and add up to at most 1."""

    rate: float  # events per second of event time (and of wall time when paced)
    threshold: int
    window: timedelta
    late_by: tuple[timedelta, timedelta]  # lateness range of late events
    pages: int = 1000
    hot_pages: int = 0
    #: Hot page k of N has its event times earlier by k/N of the window, so that the hot pages cross the
    #: threshold at instants spread over each window rather than all in the same millisecond: a latency
    #: measured over their windows then samples every moment of the fast path's batches, its batch ends too.
    hot_stagger: bool = False
    late_fraction: float = 0.0
    duplicate_fraction: float = 0.0
    malformed_fraction: float = 0.0
    seed: int = 0
    start_time: datetime | None = None
    think_time: timedelta = timedelta(seconds=10)  # mean time between a visit's clicks
    visit_clicks: float = 5.0  # mean clicks of a visit that does not end in a purchase
    cart_probability: float = 0.0
    purchase_probability: float = 0.0
    hot_uplift: float = 0.0
    anonymous_fraction: float = 0.0

    @classmethod
    def for_config(cls, config: Config, rate: float, **options) -> "TrafficSpec":
        """Traffic for this deployment: its threshold and window, and late events that are late
        beyond the fast path's watermark (by at least two windows) yet within gold's (half of it).
        """
        hot = config.hot_pages
        earliest = hot.watermark + 2 * hot.window
        latest = max(earliest + 2 * hot.window, config.analytical.watermark / 2)
        return cls(rate=rate, threshold=hot.threshold, window=hot.window, late_by=(earliest, latest), **options)

    def validated(self) -> "TrafficSpec":
        if self.rate <= 0:
            raise LakehouseError(f"--rate must be above 0, got {self.rate:g}")
        if self.pages < 1 or self.hot_pages < 0:
            raise LakehouseError("--pages must be at least 1 and --hot-pages at least 0")
        for name in ("late_fraction", "duplicate_fraction", "malformed_fraction", "cart_probability",
                     "purchase_probability", "anonymous_fraction"):
            value = getattr(self, name)
            if not 0 <= value <= 1:
                raise LakehouseError(f"--{name.replace('_', '-')} must be between 0 and 1, got {value:g}")
        if self.hot_uplift < 0 or self.purchase_probability * (1 + self.hot_uplift) > 1:
            raise LakehouseError(f"--hot-uplift must be 0 or more, and keep the purchase probability on hot visits "
                                 f"at 1 or less: {self.purchase_probability:g} x (1 + {self.hot_uplift:g})")
        if self.visit_clicks < 1 or self.think_time <= timedelta(0):
            raise LakehouseError("--visit-clicks must be at least 1 and --think-time above 0")
        special = self.late_fraction + self.duplicate_fraction + self.malformed_fraction
        if special > 0.5:
            raise LakehouseError(f"late, duplicate and malformed fractions add up to {special:g}; keep them at 0.5 or less")
        if self.hot_pages > self.hot_pages_carried:
            needed = math.ceil(self.hot_rate_per_page * self.hot_pages / MAX_HOT_SHARE)
            raise LakehouseError(
                f"--hot-pages {self.hot_pages} at threshold {self.threshold} per {self.window.total_seconds():g} s "
                f"needs --rate {needed} or more (hot pages may take at most {MAX_HOT_SHARE:.0%} of the traffic)"
            )
        return self

    @property
    def hot_pages_carried(self) -> int:
        """The most hot pages this rate carries at this threshold."""
        return math.floor(MAX_HOT_SHARE * self.rate / self.hot_rate_per_page + 1e-9)

    @property
    def hot_rate_per_page(self) -> float:
        """Clicks per second one hot page gets: HOT_MARGIN x (threshold + 1) per window."""
        return HOT_MARGIN * (self.threshold + 1) / self.window.total_seconds()


@dataclass
class GeneratedCounts:
    """What was generated, by kind, and the malformed records by the reason they should get."""

    by_kind: Counter = field(default_factory=Counter)
    malformed_by_reason: Counter = field(default_factory=Counter)

    def add(self, kind: str) -> None:
        if kind.startswith("malformed:"):
            self.by_kind["malformed"] += 1
            self.malformed_by_reason[kind.split(":", 1)[1]] += 1
        else:
            self.by_kind[kind] += 1


def hot_page_ids(count: int) -> list[str]:
    return [f"/promo/flash-sale-{n}" for n in range(1, count + 1)]


def ordinary_page_ids(count: int) -> list[str]:
    return [f"/products/sku-{n:05d}" for n in range(1, count + 1)]


class ClickGenerator:
    """An endless, deterministic stream of Kafka records (key, value, kind) for a TrafficSpec.

    kind is 'click', 'hot', 'late', 'duplicate' or 'malformed:<expected invalid reason>'.
    """

    def __init__(self, spec: TrafficSpec):
        self.spec = spec.validated()
        self._rng = random.Random(spec.seed)
        self._id_prefix = f"{self._rng.getrandbits(40):010x}"
        window_ms = round(spec.window.total_seconds() * 1000)
        start = spec.start_time or datetime.now(timezone.utc)
        start_ms = int(start.timestamp() * 1000)
        if spec.start_time is None:  # begin on a window boundary so the first window is full
            start_ms -= start_ms % window_ms
        self.start_ms = start_ms
        self._hot = [page.encode() for page in hot_page_ids(spec.hot_pages)]
        self._hot_shift_ms = {page: round(k * window_ms / len(self._hot)) if spec.hot_stagger else 0
                              for k, page in enumerate(self._hot)}
        self._ordinary = [page.encode() for page in ordinary_page_ids(spec.pages)]
        self._ordinary_cumulative = list(itertools.accumulate(self._ordinary_weights()))
        self._hot_share = spec.hot_rate_per_page * spec.hot_pages / spec.rate
        self._visits = Visits(spec, self._rng, self._id_prefix)
        self._late_ms = tuple(round(bound.total_seconds() * 1000) for bound in spec.late_by)
        self._recent: deque[tuple[bytes, bytes]] = deque(maxlen=_DUPLICATE_MEMORY)
        self._second_cache: tuple[int, str] = (-1, "")

    def _ordinary_weights(self) -> list[float]:
        """Zipf-like popularity, water-filled so that no page expects over ORDINARY_CAP x threshold."""
        spec = self.spec
        weights = [1 / (rank + 1) ** _ZIPF_EXPONENT for rank in range(spec.pages)]
        ordinary_rate = spec.rate - spec.hot_rate_per_page * spec.hot_pages
        per_window = ordinary_rate * spec.window.total_seconds()
        cap = ORDINARY_CAP * spec.threshold / per_window if per_window > 0 else 1.0
        for _ in range(20):
            total = sum(weights)
            shares = [w / total for w in weights]
            if max(shares) <= cap * 1.0001 or cap * spec.pages < 1:
                break
            weights = [min(share, cap) for share in shares]
        return weights

    @property
    def busiest_ordinary_page_per_window(self) -> float:
        """Expected clicks per window of the most popular ordinary page (to warn when it gets hot)."""
        spec = self.spec
        ordinary_rate = spec.rate - spec.hot_rate_per_page * spec.hot_pages
        share = self._ordinary_cumulative[0] / self._ordinary_cumulative[-1]
        return share * ordinary_rate * spec.window.total_seconds()

    def records(self) -> Iterator[Record]:
        rng, spec = self._rng, self.spec
        late_cut = spec.late_fraction
        duplicate_cut = late_cut + spec.duplicate_fraction
        malformed_cut = duplicate_cut + spec.malformed_fraction
        hot_credit = 0.0
        hot_turn = itertools.cycle(self._hot)
        for index in itertools.count():
            event_ms = self.start_ms + int(index * 1000 / spec.rate)
            hot_credit += self._hot_share
            if hot_credit >= 1:  # hot clicks are spread evenly, round robin over the hot pages
                hot_credit -= 1
                page = next(hot_turn)
                kind = "hot"
                event_ms -= self._hot_shift_ms[page]
            else:
                page = self._ordinary[bisect.bisect(self._ordinary_cumulative, rng.random() * self._ordinary_cumulative[-1])]
                kind = "click"
            draw = rng.random()
            user, event_type = self._visits.next(event_ms, kind == "hot")
            if draw < late_cut:
                event_ms -= rng.randint(*self._late_ms)
                kind = "late"
            elif draw < duplicate_cut and self._recent:
                key, value = self._recent[rng.randrange(len(self._recent))]
                yield key, value, "duplicate"
                continue
            elif draw < malformed_cut:
                yield self._malformed(index, page, event_ms, user)
                continue
            value = self._event(index, page, event_ms, user, event_type)
            self._recent.append((page, value))
            yield page, value, kind

    def _event(self, index: int, page: bytes, event_ms: int, user: str | None, event_type: str = "page_view") -> bytes:
        """The serializer's shape (shared.parsing's canonical lane): a page view without its eventType."""
        user_field = "" if user is None else f',"userId":"{user}"'
        type_field = "" if event_type == "page_view" else f',"eventType":"{event_type}"'
        return (
            f'{{"eventId":"{self._id_prefix}-{index:012d}","pageId":"{page.decode()}",'
            f'"eventTime":"{self._iso(event_ms)}"{user_field}{type_field}}}'
        ).encode()

    def _iso(self, epoch_ms: int) -> str:
        second, millis = divmod(epoch_ms, 1000)
        if self._second_cache[0] != second:
            self._second_cache = (second, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second)))
        return f"{self._second_cache[1]}.{millis:03d}Z"

    def _malformed(self, index: int, page: bytes, event_ms: int, user: str | None) -> Record:
        """One of the invalid shapes of the events contract, in turn, tagged with the reason it must get."""
        good = self._event(index, page, event_ms, user or "user-anonymous")
        shapes = [
            (InvalidReason.NOT_JSON, good[: len(good) // 2]),
            (InvalidReason.NOT_OBJECT, b"[" + good + b"]"),
            (InvalidReason.MISSING_EVENT_ID, good.replace(b'"eventId"', b'"eventID"', 1)),
            (InvalidReason.EMPTY_PAGE_ID, good.replace(b'"pageId":"' + page + b'"', b'"pageId":""', 1)),
            (InvalidReason.PAGE_ID_TOO_LONG, good.replace(page, page + b"x" * MAX_PAGE_ID_LENGTH, 1)),
            (InvalidReason.BAD_EVENT_TIME, good.replace(b"Z\"", b"\"", 1)),
            (InvalidReason.NOT_UTF8, good.replace(b"user-", b"user-\xff\xfe", 1)),
            (InvalidReason.NULL_VALUE, None),
            (InvalidReason.NOT_JSON, good + b' {"eventId":"a second object"}'),
            (InvalidReason.WRONG_TYPE, good.replace(b'"pageId":"' + page + b'"', b'"pageId":true', 1)),
            (InvalidReason.EVENT_TIME_OUT_OF_RANGE, good.replace(self._iso(event_ms).encode(),
                                                                 b"9999-12-31T23:59:59.999Z", 1)),
        ]
        reason, value = shapes[index % len(shapes)]
        return page, value, f"malformed:{reason.value}"


@dataclass(frozen=True)
class Sent:
    """What `send` did: the records by kind, the wall time, and the generator's own CPU time."""

    counts: GeneratedCounts
    records: int
    seconds: float
    cpu_seconds: float  # this process's CPU time (the producer's librdkafka threads included)

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def cpu_share(self) -> float:
        """Cores the sending took on average (0.1 = a tenth of one core)."""
        return self.cpu_seconds / self.seconds if self.seconds else 0.0


def send(generator: ClickGenerator, producer, topic: str, count: int, paced: bool,
         progress=None, progress_every_s: float = 1.0) -> Sent:
    """Send `count` records, paced at the spec's rate if asked, and wait until all are acknowledged."""
    counts = GeneratedCounts()
    rate = generator.spec.rate
    started, cpu_started = time.perf_counter(), time.process_time()
    next_report = started + progress_every_s
    chunk = 500
    send_one = producer.send
    records = generator.records()
    for sent in range(0, count, chunk):
        for key, value, kind in itertools.islice(records, min(chunk, count - sent)):
            send_one(topic, value=value, key=key)
            counts.add(kind)
        done = min(sent + chunk, count)
        now = time.perf_counter()
        if paced:
            ahead = done / rate - (now - started)
            if ahead > 0:
                time.sleep(ahead)
                now = time.perf_counter()
        if progress and now >= next_report:
            progress(done, count, now - started)
            next_report = now + progress_every_s
    producer.flush()
    return Sent(counts, count, time.perf_counter() - started, time.process_time() - cpu_started)
