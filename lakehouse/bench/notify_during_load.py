"""The bridge to Alertmanager beside a measured run's load (lakehouse/bench/measured_run.py), as `lakehouse run`
starts it: an embedded Alertmanager with the shipped routes and its webhook receiver, and `lakehouse notify` in a
process of its own; with faults when asked (the bridge killed, Alertmanager stopped for a while).
`lakehouse bench notify` compares the fast path with and without it (lakehouse/bench/delivery.py).

When Alertmanager took each post is read from Alertmanager itself: its API v2 gives each alert its `updatedAt`,
the moment the latest post of it arrived, and the annotations that post carried. Polled every `POLL_S`, the
first `updatedAt` seen for a window with a given click count is when the post of the first record that carried
that count arrived; against that record's Kafka append (LogAppendTime: both clocks are this machine's), it is
the delivery time. The reads run in a process of their own (`python -m lakehouse.bench.notify_during_load
URL FILE`), not in the measured fast path's driver. What reached people is what the webhook receiver kept.

Interleaved (`interleave_s`), the bridge, Alertmanager and its receiver are paused (SIGSTOP) and resumed (SIGCONT) in
blocks of the load, so that one fast path, in one JVM and one stretch of the machine's time, is measured both without
them and with them: a run's worst real-time batch end, which sets its p99, then falls in both. No delivery is timed
then (a paused block holds its records back), so the reads do not run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from lakehouse.path_processes import NotifyProcess, child_options
from lakehouse.services.alertmanager import EmbeddedAlertmanager
from operational.alertmanager_alerts import HOT_PAGE, instant
from shared.config import Config
from shared.config_loading import with_overrides
from shared.processes import child_env, die_with_parent
from shared.progress import echo as say_progress

#: How often Alertmanager's alerts are read (each read is every active alert): a post is seen unless the next
#: record of its window, with another count, was posted before the read; its `updatedAt` is exact.
POLL_S = 0.25
#: How long, after the load, every alerted window may take to be notified (Alertmanager's group_wait is 1 s;
#: after an outage the bridge's next try may be alerting.retry_max_delay away).
SETTLE_S = 120.0

#: A record of the alerts topic as the delivery is measured against: its window and click count.
Posted = tuple[str, str, int]  # (pageId, windowStart, clickCount)


@dataclass
class NotifyDuringLoad:
    """Alertmanager and `lakehouse notify` beside the load; Alertmanager stopped `outage_after_s` into the load
    for `outage_s`, and `bridge_kills` kill -9 of the bridge (each restarted at once) spread over the load after
    that, while it posts. Or, with `interleave_s`, all of them paused and resumed in blocks of that many seconds
    from `interleave_from_s` into the load to its end (`interleaved_blocks`)."""

    load_s: float
    bridge_kills: int = 0
    outage_s: float = 0.0
    outage_after_s: float = 0.0
    interleave_s: float = 0.0
    interleave_from_s: float = 0.0
    faults: list[dict[str, Any]] = field(default_factory=list)
    #: The interleaved blocks' starts as they ran, with whether the bridge and Alertmanager ran in each.
    _switches: list[tuple[datetime, bool]] = field(default_factory=list)
    _blocks_ended_at: datetime | None = None
    _blocks_done: threading.Event = field(default_factory=threading.Event)
    manager: EmbeddedAlertmanager | None = None
    began: datetime | None = None
    _seen_file: Path | None = None

    @contextmanager
    def beside(self, config: Config, folder: Path) -> Iterator[None]:
        """Alertmanager (its files under `folder`) and the bridge, running until the block ends; the faults
        start with the block."""
        self.manager = EmbeddedAlertmanager(with_overrides(config, [f"alertmanager.run_dir={folder}"]),
                                            log=lambda line: say_progress(f"bench: {line}"))
        url = self.manager.start(die_with_caller=True)
        config = with_overrides(config, [f"alerting.alertmanager_url={url}",
                                         f"alerting.consumer_group=bench-notify-{uuid.uuid4().hex[:6]}"])
        bridge = [NotifyProcess(child_options(config), relay=say_progress)]  # its lines begin "notify:"
        # The reads time each delivery; interleaved, no delivery is timed (a paused block holds its records back),
        # and the blocks with the bridge hold what `lakehouse run` adds, not the benchmark's own reads.
        self._seen_file = None if self.interleave_s else folder / "received.jsonl"
        watcher = subprocess.Popen([sys.executable, "-m", "lakehouse.bench.notify_during_load", url, str(self._seen_file)],
                                   env=child_env()) if self._seen_file else None
        stop = threading.Event()
        status = self.manager.status()
        beside = [status.pid, status.receiver_pid, bridge[0].pid]
        faults = threading.Thread(target=self._interleave, args=(beside, stop), daemon=True) if self.interleave_s \
            else threading.Thread(target=self._faults, args=(config, bridge, stop), daemon=True)
        self.began = datetime.now(timezone.utc)
        faults.start()
        try:
            yield
        finally:
            if self.interleave_s:  # all of them resumed first, so that they can stop
                stop.set()
                faults.join(timeout=10)
            # stopped before the faults' thread ends: the kernel kills what a thread started when that thread ends
            # (prctl PR_SET_PDEATHSIG), and a bridge or Alertmanager it restarted must stop cleanly instead
            bridge[0].stop()
            self.manager.stop(quiet=True)
            if watcher is not None:
                watcher.terminate()
                watcher.wait()
            stop.set()
            faults.join(timeout=self.outage_s + 60)

    @property
    def received(self) -> dict[Posted, datetime]:
        """Per window and click count, the first `updatedAt` the reads saw (`watch`)."""
        seen: dict[Posted, datetime] = {}
        written = self._seen_file.read_text() if self._seen_file and self._seen_file.exists() else ""
        for line in written.split("\n")[:-1]:  # whole lines: the reads go on meanwhile
            page, start, count, updated_at = json.loads(line)
            seen.setdefault((page, start, count), instant(updated_at))
        return seen

    def _faults(self, config: Config, bridge: list[NotifyProcess], stop: threading.Event) -> None:
        began = time.monotonic()
        posting_from = self.outage_after_s + self.outage_s if self.outage_s else 0.0
        events = [(posting_from + (self.load_s - posting_from) * (n + 1) / (self.bridge_kills + 1), "kill")
                  for n in range(self.bridge_kills)]
        if self.outage_s:
            events += [(self.outage_after_s, "stop"), (posting_from, "start")]
        for at_s, fault in sorted(events):
            if stop.wait(max(at_s - (time.monotonic() - began), 0)):
                return
            say_progress(f"bench: {at_s:.0f} s into the load: " + {
                "kill": "kill -9 of the bridge, started again at once", "stop": "Alertmanager stopped",
                "start": "Alertmanager started again"}[fault])
            if fault == "kill":
                bridge[0].crash()
                bridge[0] = NotifyProcess(child_options(config), relay=say_progress)
            elif fault == "stop":
                self.manager.stop(quiet=True)
            else:
                self.manager.start(die_with_caller=True)
            self.faults.append({"at_s": round(time.monotonic() - began, 1), "fault": fault})
        stop.wait()  # what it restarted lives as long as this thread (see `beside`)

    def _interleave(self, pids: list[int | None], stop: threading.Event) -> None:
        """The processes `pids` paused and resumed per `interleaved_blocks`; left running when the blocks, or the
        load, end."""
        began = time.monotonic()
        try:
            for start_s, _, running in interleaved_blocks(self.interleave_from_s, self.load_s, self.interleave_s):
                if stop.wait(max(start_s - (time.monotonic() - began), 0)):
                    return
                _signal(pids, signal.SIGCONT if running else signal.SIGSTOP)
                self._switches.append((datetime.now(timezone.utc), running))
            stop.wait(max(self.load_s - (time.monotonic() - began), 0))
        finally:
            self._blocks_ended_at = datetime.now(timezone.utc)
            _signal(pids, signal.SIGCONT)
            self._blocks_done.set()

    @property
    def blocks(self) -> list[tuple[datetime, datetime, bool]]:
        """The interleaved blocks as they ran: (start, end, whether the bridge and Alertmanager ran); each ends
        where the next began, the last where the load did."""
        ends = [start for start, _ in self._switches[1:]] + [self._blocks_ended_at or datetime.now(timezone.utc)]
        return [(start, end, running) for (start, running), end in zip(self._switches, ends)]

    def interleaved_spans(self) -> dict[str, list[tuple[datetime, datetime]]]:
        """The blocks without the bridge ("alone"), those with it ("with_bridge"), and each block on its own
        ("block N"), for time_to_alert_in_spans."""
        return {"alone": [(start, end) for start, end, running in self.blocks if not running],
                "with_bridge": [(start, end) for start, end, running in self.blocks if running],
                **{f"block {n}": [(start, end)] for n, (start, end, _) in enumerate(self.blocks, 1)}}

    def settle(self, alerted: set[tuple[str, str]]) -> None:
        """Until every window in `alerted` (pageId, windowStart) has reached the receiver, at most SETTLE_S."""
        deadline = time.monotonic() + SETTLE_S
        if self.interleave_s:
            self._blocks_done.wait(SETTLE_S)  # the load has ended: all of them run again
        while not set(self.manager.notified_windows(since=self.began)) >= alerted and time.monotonic() < deadline:
            time.sleep(0.5)

    def figures(self, appended: dict[Posted, datetime], measured_from: datetime) -> dict[str, Any]:
        """Delivery over the records appended from `measured_from` on (`appended`: each window and count's first
        append), and what reached the receiver for every window alerted; without the reads (interleaved), only
        the latter."""
        from lakehouse.bench.time_to_alert import percentiles

        alerted = {(page, start) for page, start, _ in appended}
        notified = self.manager.notified_windows(since=self.began)
        reached = {
            "windows_alerted": len(alerted),
            "windows_notified_once": sum(1 for window in alerted if notified[window] == 1),
            "windows_notified_more_than_once": sum(1 for window in alerted if notified[window] > 1),
            "windows_not_notified": sorted(f"{page} {start}" for page, start in alerted - set(notified))[:10],
            "notifications_for_no_alerted_window": sum(n for window, n in notified.items() if window not in alerted),
            "faults": self.faults,
        }
        if self._seen_file is None:
            return reached
        received = self.received
        latencies = sorted(round((received[posted] - at).total_seconds() * 1000, 1)
                           for posted, at in appended.items() if at >= measured_from and posted in received)
        at_alertmanager = {(page, start) for page, start, _ in received}
        return {
            "delivery": {**percentiles(latencies), "records": len(latencies)},
            "latencies_ms": latencies,
            "windows_at_alertmanager": len(alerted & at_alertmanager),
            "windows_not_read_at_alertmanager": sorted(f"{page} {start}" for page, start in alerted - at_alertmanager)[:10],
            **reached,
        }


def interleaved_blocks(from_s: float, until_s: float, block_s: float) -> list[tuple[float, float, bool]]:
    """Blocks of `block_s` from `from_s` to `until_s` (seconds into the load): (start, end, with the bridge), in
    the order without, with, with, without, and again, so that a drift over the load (the machine warming, a
    topic growing) weighs on both alike.

        interleaved_blocks(10, 50, 10)  # [(10, 20, False), (20, 30, True), (30, 40, True), (40, 50, False)]
    """
    count = int((until_s - from_s) // block_s)
    return [(from_s + n * block_s, from_s + (n + 1) * block_s, n % 4 in (1, 2)) for n in range(count)]


def _signal(pids: list[int | None], signum: int) -> None:
    for pid in pids:
        if pid:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass  # ended: the figures say what it did not deliver


def watch(url: str, file: Path) -> None:
    """Until killed: every POLL_S, Alertmanager's HotPage alerts; each (pageId, windowStart, clickCount) seen for
    the first time appended to `file` with its `updatedAt`, as a JSON line."""
    query = urllib.parse.urlencode({"filter": f'alertname="{HOT_PAGE}"'})
    seen: set[Posted] = set()
    with file.open("a", encoding="utf-8") as lines:
        while True:
            time.sleep(POLL_S)
            try:
                with urllib.request.urlopen(f"{url}/api/v2/alerts?{query}", timeout=2) as response:
                    alerts = json.loads(response.read())
            except (urllib.error.URLError, OSError, ValueError):
                continue  # down (the outage): what it takes after is seen then
            for alert in alerts:
                labels, annotations = alert["labels"], alert["annotations"]
                posted = (labels["pageId"], labels["windowStart"], int(annotations["clickCount"]))
                if posted not in seen:
                    seen.add(posted)
                    lines.write(json.dumps([*posted, alert["updatedAt"]]) + "\n")
                    lines.flush()


if __name__ == "__main__":
    die_with_parent()
    watch(sys.argv[1], Path(sys.argv[2]))
