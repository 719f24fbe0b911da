"""What the fault tests send: `Traffic` produces clicks in real time from a thread, a hot page far
over the threshold, many ordinary pages far under it, exact duplicates, late events and hostile
records of many kinds (`hostile`). What they mean is computed from the topic afterwards by
tests/truth.py, not from this module's intentions.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from datetime import datetime, timezone

from shared.errors import LakehouseError

HOT_PAGE = "/hot"


def iso(micros: int) -> str:
    return datetime.fromtimestamp(micros / 1_000_000, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_micros() -> int:
    return time.time_ns() // 1000


def click(page, at_micros: int, event_id=None, **extra) -> bytes:
    return json.dumps({"eventId": event_id or uuid.uuid4().hex, "pageId": page, "eventTime": iso(at_micros),
                       **extra}).encode()


def hostile(rng: random.Random, page: str = HOT_PAGE) -> bytes | None:
    """One hostile record aimed at `page`: invalid in one of many ways, or valid in an unusual form.

    The invalid ones were each, at some point, taken for a click (issue 12's fuzzing): types other
    than the contract's, trailing content, event times that would move a watermark to year 9999
    or hold it at year 1."""
    now = now_micros()
    good = click(page, now)
    body = json.loads(good)
    kind = rng.randrange(22)
    if kind == 0:
        return None
    if kind == 1:
        return b"\xff\xfe" + good
    if kind == 2:
        return good + b' {"eventId":"' + uuid.uuid4().hex.encode() + b'"}'
    if kind == 3:
        return good + b"\x00"
    if kind == 4:
        return good + b"trailing"
    if kind == 5:
        return good[:-1]
    if kind == 6:
        return json.dumps([body]).encode()
    if kind == 7:
        return json.dumps(body | {"eventId": rng.choice([True, [1], {"id": 1}, None, "", "  "])}).encode()
    if kind == 8:
        return json.dumps(body | {"pageId": rng.choice([True, False, [page], {"p": page}, None, ""])}).encode()
    if kind == 9:
        return json.dumps({"eventId": uuid.uuid4().hex, "pageId": True, "eventTime": iso(now)}).encode()
    if kind == 10:
        return json.dumps(body | {"eventTime": "9999-12-31T23:59:59.999Z"}).encode()
    if kind == 11:
        return json.dumps(body | {"eventTime": "0001-01-01T00:00:00.000Z"}).encode()
    if kind == 12:
        return json.dumps(body | {"eventTime": iso(now + 2 * 3_600_000_000)}).encode()  # 2 hours ahead
    if kind == 13:
        return json.dumps(body | {"eventTime": rng.choice(["", "yesterday", "2026-13-01T00:00:00Z", iso(now)[:-1],
                                                             now // 1000])}).encode()
    if kind == 14:
        return json.dumps(body | {"userId": rng.choice([True, [1], {"u": 1}])}).encode()
    if kind == 15:
        return good.replace(b'"pageId"', b'"pageId":"x","pageId"', 1)
    if kind == 16:
        return json.dumps(body | {"pageId": "p" * 257}).encode()
    if kind == 17:
        return b"\xef\xbb\xbf" + good
    if kind == 18:
        return rng.randbytes(rng.randrange(1, 60))
    if kind == 19:  # valid: JSON whitespace around the object
        return b" \n\t\r" + good + b"\r\n "
    if kind == 20:  # valid: a number as eventId, a numeric userId, unknown fields
        return json.dumps(body | {"eventId": rng.randrange(10**15, 10**16), "userId": 7, "x": [1, {"y": None}]}).encode()
    return json.dumps({"eventId": uuid.uuid4().hex, "pageId": page}).encode()  # no eventTime


class Traffic(threading.Thread):
    """Clicks in real time until stopped, at about `rate` records per second.

    Per second: `hot_rate` clicks on the hot page (a multiple of 10), the rest spread over `pages` ordinary pages,
    and a share of duplicates (a recent record's exact bytes again), late events (`late_by_s` old,
    on ordinary pages) and hostile records. With `users`, most valid clicks carry one of that many userIds
    and an eventType (a page view, given or left out, an add-to-cart or a purchase), so that the users'
    sessions are many and short. Sends go through the project's producer (librdkafka), which
    retries through a broker restart; records whose send failed for good are counted, and the truth is
    taken from the topic, not from this thread's intentions.
    """

    def __init__(self, kafka_config, topic: str, *, rate: int = 100, hot_rate: int = 20, pages: int = 200,
                 duplicate: float = 0.02, late: float = 0.01, hostile_share: float = 0.03, late_by_s: int = 30,
                 users: int = 0, seed: int = 12):
        super().__init__(daemon=True)
        from shared.kafka import producer_for

        self.producer = producer_for(kafka_config, **{"acks": "all", "reconnect.backoff.max.ms": 1000, "linger.ms": 5})
        self.topic, self.rate, self.hot_rate, self.pages = topic, rate, hot_rate, pages
        self.duplicate, self.late, self.hostile_share, self.users = duplicate, late, hostile_share, users
        self.late_by_micros = late_by_s * 1_000_000
        self.rng = random.Random(seed)
        self.stopping = threading.Event()
        self.sent = 0
        self.failed = 0
        self._recent: list[bytes] = []

    def _visit(self) -> dict:
        """A click's userId and eventType: none without `users`, else a tenth anonymous."""
        rng = self.rng
        if not self.users or rng.random() < 0.1:
            return {}
        kind = rng.choices(("page_view", None, "add_to_cart", "purchase"), weights=(40, 40, 15, 5))[0]
        return {"userId": f"u{rng.randrange(self.users)}", **({"eventType": kind} if kind else {})}

    def _one(self, index: int) -> bytes | None:
        rng, now = self.rng, now_micros()
        if index < self.hot_rate / 10:
            return click(HOT_PAGE, now, **self._visit())
        draw = rng.random()
        if draw < self.duplicate and self._recent:
            return rng.choice(self._recent)
        if draw < self.duplicate + self.late:
            return click(f"/p{rng.randrange(self.pages)}", now - self.late_by_micros, **self._visit())
        if draw < self.duplicate + self.late + self.hostile_share:
            return hostile(rng)
        return click(f"/p{rng.randrange(self.pages)}", now, **self._visit())

    def run(self) -> None:
        per_tick = self.rate // 10
        next_tick = time.monotonic()
        while not self.stopping.is_set():
            for index in range(per_tick):
                value = self._one(index)
                if value is not None and value.startswith(b"{") and self.rng.random() < 0.2:
                    self._recent = (self._recent + [value])[-50:]
                self.producer.send(self.topic, value=value)
            next_tick += 0.1
            self.stopping.wait(max(0.0, next_tick - time.monotonic()))
        try:
            self.producer.flush(timeout_s=180)
        except LakehouseError:
            pass  # counted in failed below; the truth is read from the topic
        self.sent, self.failed = self.producer.delivered, self.producer.failed

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=240)


