"""`lakehouse notify`: the bridge from the alerts topic to Alertmanager, so that hot pages reach people.

  hot-pages (its own consumer group's committed offsets; a new group: the records of the last
  `alerting.resolve_after`)
  -> each record checked against the alert contract (shared.alerts_topic.parse_alert) and for times
     Alertmanager can read: one that is not an alert is said in one line with its offset, counted, and
     not posted; so is one Alertmanager refuses (HTTP 400), once the others of its post are taken
  -> the records a poll returned, as Alertmanager's alerts (operational.alertmanager_alerts), in one
     POST /api/v2/alerts; a post Alertmanager does not take (down, an error) is tried again, waiting
     twice as long each time up to `alerting.retry_max_delay`, and nothing is read meanwhile
  -> the offsets committed once Alertmanager has the alerts: a bridge killed at any point posts again
     what it had not committed, which Alertmanager takes as the same alerts
  -> every alert still active posted again each `alerting.repost_interval`, with the endsAt of its first
     post: an Alertmanager restarted meanwhile has lost them (it keeps only what it notified)

It reads with its own consumer, in its own process: the fast path never waits for it. Its metrics
(`lakehouse_notify_*`) are served at `metrics.bind_address:metrics.notify_port`.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from operational.alertmanager_alerts import as_alertmanager_alert, instant, unfit
from shared.alerts_topic import Alert, parse_alert
from shared.config import Config
from shared.errors import ConfigError, LakehouseError
from shared.kafka import consumer_for

#: From the Kafka append of an alert record to Alertmanager's answer to its post.
DELIVERY_SECONDS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30, 60, 300)


class DeliveryError(LakehouseError):
    """A post Alertmanager did not take: unreachable, an error status, or not an Alertmanager."""


class RefusedAlerts(DeliveryError):
    """Alertmanager answered that the alerts themselves are wrong (HTTP 400 or 422): posting them again
    cannot help."""


class DeliveryMetrics:
    """The bridge's series, in their own registry (served by lakehouse.monitoring.metrics_endpoint)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.posted = Counter("lakehouse_notify_alerts_posted", "Alerts Alertmanager took (posts again included)",
                              registry=self.registry)
        self.failures = Counter("lakehouse_notify_post_failures", "Posts Alertmanager did not take; each is retried",
                                registry=self.registry)
        self.invalid = Counter("lakehouse_notify_invalid_records", "Records of the alerts topic that are not alerts",
                               registry=self.registry)
        self.pending = Gauge("lakehouse_notify_pending_alerts", "Alerts read and not yet taken by Alertmanager",
                             registry=self.registry)
        self.active = Gauge("lakehouse_notify_active_alerts", "Alerts posted that have not resolved yet",
                            registry=self.registry)
        self.delivery = Histogram("lakehouse_notify_delivery_seconds",
                                  "From an alert record's Kafka append to Alertmanager taking it (first post)",
                                  buckets=DELIVERY_SECONDS_BUCKETS, registry=self.registry)


def post_alerts(url: str, alerts: list[dict[str, Any]], timeout_s: float) -> None:
    """POST `alerts` to the Alertmanager at `url` (API v2); DeliveryError, in one line, when it does not take them."""
    request = urllib.request.Request(f"{url}/api/v2/alerts", data=json.dumps(alerts).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):
            return
    except urllib.error.HTTPError as error:
        detail = error.read().decode(errors="replace").strip()[:200]
        refused = RefusedAlerts if error.code in (400, 422) else DeliveryError
        raise refused(f"Alertmanager at {url} refused the alerts: HTTP {error.code} {detail}") from None
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise DeliveryError(f"Alertmanager at {url} does not answer ({reason})") from None


def check_alertmanager(url: str, timeout_s: float) -> str | None:
    """None when `url` is an Alertmanager that answers; else why not, in one line. An answer that is not
    Alertmanager's (a wrong URL) is a ConfigError: retrying cannot mend it."""
    try:
        with urllib.request.urlopen(f"{url}/api/v2/status", timeout=timeout_s) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise ConfigError(f"alerting.alertmanager_url: {url} is not an Alertmanager's API v2 "
                          f"(GET /api/v2/status answered HTTP {error.code})") from None
    except (urllib.error.URLError, OSError) as error:
        return f"Alertmanager at {url} does not answer ({getattr(error, 'reason', error)})"
    except ValueError:
        raise ConfigError(f"alerting.alertmanager_url: {url} is not an Alertmanager (GET /api/v2/status is not JSON)") from None
    if not isinstance(body, dict) or "versionInfo" not in body:
        raise ConfigError(f"alerting.alertmanager_url: {url} is not an Alertmanager (GET /api/v2/status has no versionInfo)")
    return None


@dataclass
class ActiveAlerts:
    """The alerts posted that have not resolved: each window's latest record and its first post's time."""

    alerts: dict[str, tuple[Alert, datetime]] = field(default_factory=dict)

    def first_posted(self, alert: Alert, now: datetime) -> datetime:
        """When Alertmanager first took `alert`'s window; `now` for a window it has not taken yet."""
        return self.alerts.get(alert.alert_id, (alert, now))[1]

    def take(self, alert: Alert, now: datetime) -> None:
        """Keep `alert`, which Alertmanager has just taken (a window's record, maybe again), or the window's
        record with a higher count, and the time its window was first taken."""
        known, first = self.alerts.get(alert.alert_id, (alert, now))
        self.alerts[alert.alert_id] = (max(known, alert, key=lambda record: record.click_count), first)

    def still_active(self, now: datetime, resolve_after: timedelta) -> list[tuple[Alert, datetime]]:
        """Those whose endsAt is still ahead; the others are forgotten."""
        self.alerts = {key: (alert, first) for key, (alert, first) in self.alerts.items()
                       if max(instant(alert.window_end), first) + resolve_after > now}
        return list(self.alerts.values())


class Bridge:
    """Reads the alerts topic and posts to Alertmanager until `stop` is set (see the module)."""

    def __init__(self, config: Config, metrics: DeliveryMetrics, log=print):
        if config.alerting.alertmanager_url is None:
            raise ConfigError("alerting.alertmanager_url is not set: name the Alertmanager to post to, e.g. "
                              "--set alerting.alertmanager_url=http://127.0.0.1:9093 (lakehouse alertmanager start)")
        self.config, self.metrics, self.log = config, metrics, log
        self.settings = config.alerting
        self.url = config.alerting.alertmanager_url
        self.topic = config.kafka.topics.alerts
        self.active = ActiveAlerts()

    def run(self, stop: threading.Event) -> None:
        timeout = self.settings.post_timeout.total_seconds()
        problem = check_alertmanager(self.url, timeout)
        if problem:
            self.log(f"notify: {problem}; posting as soon as it does (nothing is skipped meanwhile)")
        # the broker answers a fetch as soon as a record arrives (fetch.min.bytes 1), however long it may hold
        # an empty one: a record waits for no timer, and an idle bridge wakes twice a second
        consumer = consumer_for(self.config.kafka, group_id=self.settings.consumer_group, fetch_max_wait_ms=500,
                                fetch_min_bytes=1)
        try:
            self._assign(consumer, stop)
            last_repost = time.monotonic()
            while not stop.is_set():
                batches = consumer.poll(timeout_ms=100)
                records = [record for batch in batches.values() for record in batch]
                if records:
                    self._deliver(records, stop)
                    if stop.is_set():
                        return  # not delivered: not committed either
                    consumer.commit()
                if time.monotonic() - last_repost >= self.settings.repost_interval.total_seconds():
                    self._repost(stop)
                    last_repost = time.monotonic()
        finally:
            consumer.close(autocommit=False)

    def _assign(self, consumer, stop: threading.Event) -> None:
        """Every partition of the topic, at the group's committed offset, or, for a new group, at the records
        of the last alerting.resolve_after (older alerts would post resolved)."""
        from kafka import TopicPartition

        said = False
        while not (partitions := consumer.partitions_for_topic(self.topic)):
            if not said:
                self.log(f"notify: waiting for the topic {self.topic} (the fast path creates it)")
                said = True
            if stop.wait(1):
                return
            consumer.topics()  # refreshes the metadata
        assigned = [TopicPartition(self.topic, partition) for partition in sorted(partitions)]
        consumer.assign(assigned)
        since = int((datetime.now(timezone.utc) - self.settings.resolve_after).timestamp() * 1000)
        recent = consumer.offsets_for_times({partition: since for partition in assigned})
        ends = consumer.end_offsets(assigned)
        for partition in assigned:
            committed = consumer.committed(partition)
            start = recent.get(partition)
            consumer.seek(partition, committed if committed is not None else start.offset if start else ends[partition])

    def _deliver(self, records: list, stop: threading.Event) -> None:
        fresh: list[Alert] = []
        for record in records:
            alert, why = parse_alert(record.value, record.partition, record.offset, record.timestamp)
            if alert is not None and (why := unfit(alert) or ""):
                alert = None
            if alert is None:
                self.metrics.invalid.inc()
                self.log(f"notify: {self.topic} partition {record.partition} offset {record.offset} is not an "
                         f"alert ({why}): not posted")
                continue
            fresh.append(alert)
        if not fresh:
            return
        # endsAt counted from the post that Alertmanager takes, not from the read: an alert read as Alertmanager
        # went down for longer than resolve_after would otherwise arrive already resolved, and notify no one
        self._post(lambda now: [as_alertmanager_alert(alert, self.active.first_posted(alert, now),
                                                      self.settings.resolve_after, self.settings.link)
                                for alert in fresh], stop)
        if not stop.is_set():
            accepted = datetime.now(timezone.utc)
            for alert in fresh:
                self.active.take(alert, accepted)
                self.metrics.delivery.observe(max(accepted.timestamp() - alert.kafka_timestamp_ms / 1000, 0))

    def _repost(self, stop: threading.Event) -> None:
        active = self.active.still_active(datetime.now(timezone.utc), self.settings.resolve_after)
        self.metrics.active.set(len(active))
        if active:
            self._post(lambda now: [as_alertmanager_alert(alert, first, self.settings.resolve_after, self.settings.link)
                                    for alert, first in active], stop)

    def _post(self, alerts_at: Callable[[datetime], list[dict[str, Any]]], stop: threading.Event) -> None:
        """Post the alerts `alerts_at` gives for the moment of each try, until Alertmanager takes them, or
        `stop`; each failure said once, and its end. Alerts it refuses as wrong are posted one by one, and
        each it refuses alone is said, counted and passed."""
        delay, failing = 0.1, False
        self.metrics.pending.set(len(alerts_at(datetime.now(timezone.utc))))
        while not stop.is_set():
            alerts = alerts_at(datetime.now(timezone.utc))
            try:
                post_alerts(self.url, alerts, self.settings.post_timeout.total_seconds())
            except RefusedAlerts as error:
                if len(alerts) > 1:
                    for alert in alerts:
                        self._post(lambda now, alert=alert: [alert], stop)
                else:
                    self.metrics.invalid.inc()
                    self.log(f"notify: {error}; the alert {alerts[0]['annotations'].get('alertId')} is not posted")
                self.metrics.pending.set(0)
                return
            except DeliveryError as error:
                self.metrics.failures.inc()
                if not failing:
                    self.log(f"notify: {error}; trying again, up to every "
                             f"{self.settings.retry_max_delay.total_seconds():g} s (alerting.retry_max_delay)")
                    failing = True
                stop.wait(delay)
                delay = min(delay * 2, self.settings.retry_max_delay.total_seconds())
                continue
            if failing:
                self.log(f"notify: Alertmanager at {self.url} took the alerts again")
            self.metrics.posted.inc(len(alerts))
            self.metrics.pending.set(0)
            return


def main(config: Config, stop: threading.Event) -> int:
    """Run the bridge, its metrics served, until `stop`: what `lakehouse notify` does."""
    from prometheus_client import start_http_server

    metrics = DeliveryMetrics()
    settings = config.metrics
    server = None
    if settings.enabled:
        try:
            server, _ = start_http_server(settings.notify_port, settings.bind_address, registry=metrics.registry)
        except OSError as error:
            raise ConfigError(f"metrics.notify_port: {settings.bind_address}:{settings.notify_port} cannot serve the "
                              f"bridge's metrics ({error}): another process holds it") from None
    try:
        Bridge(config, metrics, log=lambda line: print(line, file=sys.stderr, flush=True)).run(stop)
    finally:
        if server is not None:
            server.shutdown()
    return 0
