"""A hot-page alert as Alertmanager takes it (API v2, `POST /api/v2/alerts`): what `lakehouse notify`
posts for each alert record of `hot-pages`.

Its labels name the window (`alertname` HotPage, `pageId`, `windowStart`), so that every record of one
window, whether the fast path wrote it twice (its Kafka sink is at-least-once), raised its count, or the
bridge posted it again after a restart, is one alert to Alertmanager and, grouped by those labels
(conf/alertmanager.yml), one notification. The count, the threshold and the window's end are
annotations: they may change without making a new alert. `endsAt` makes it resolve by itself
`resolve_after` past its window's end, or past its first post when that came later (a bridge catching
up after Alertmanager was down must not post an alert already over).

    as_alertmanager_alert(alert, first_posted, timedelta(minutes=5), "https://grafana/d/x?page={pageId}")
    -> {"labels": {"alertname": "HotPage", "pageId": "/p", "windowStart": "2026-11-22T10:00:00.000Z"},
        "annotations": {"summary": "/p: 5,210 clicks in 5 s (threshold 5,000)", "clickCount": "5210", ...},
        "startsAt": "2026-11-22T10:00:05.012Z", "endsAt": "2026-11-22T10:05:05.000Z",
        "generatorURL": "https://grafana/d/x?page=%2Fp"}
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

from shared.alerts_topic import Alert

#: The alertname of a hot window: what conf/alertmanager.yml routes to the people who act on hot pages.
HOT_PAGE = "HotPage"


def instant(text: str) -> datetime:
    """An alert's ISO-8601 time ('2026-11-22T10:00:05.000Z') as an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def iso(moment: datetime) -> str:
    """An aware datetime as Alertmanager reads it: RFC 3339 in UTC, milliseconds."""
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def unfit(alert: Alert) -> str | None:
    """Why Alertmanager could not take `alert` as an alert (a time that is not ISO-8601 with a zone), or None.

        unfit(alert with windowEnd "soon") -> "windowEnd is not an ISO-8601 instant: 'soon'"
    """
    for name, text in (("windowStart", alert.window_start), ("windowEnd", alert.window_end),
                       ("emittedAt", alert.emitted_at)):
        try:
            if instant(text).tzinfo is None:
                return f"{name} has no time zone: {text!r}"
        except ValueError:
            return f"{name} is not an ISO-8601 instant: {text[:40]!r}"
    return None


def ends_at(alert: Alert, first_posted: datetime, resolve_after: timedelta) -> datetime:
    """When the alert resolves: `resolve_after` past its window's end, or past its first post if later."""
    return max(instant(alert.window_end), first_posted) + resolve_after


def link(template: str, alert: Alert) -> str:
    """`template` with {pageId}, {windowStart} and {windowEnd} filled in, each URL-encoded."""
    values = {"pageId": alert.page_id, "windowStart": alert.window_start, "windowEnd": alert.window_end}
    return template.format(**{name: quote(value, safe="") for name, value in values.items()})


def as_alertmanager_alert(alert: Alert, first_posted: datetime, resolve_after: timedelta,
                          link_template: str) -> dict[str, Any]:
    """The alert record `alert` as one alert of Alertmanager's API v2."""
    return {
        "labels": {"alertname": HOT_PAGE, "pageId": alert.page_id, "windowStart": alert.window_start},
        "annotations": {
            "summary": f"{alert.page_id}: {alert.click_count:,} clicks in 5 s (threshold {alert.threshold:,})",
            "clickCount": str(alert.click_count),
            "threshold": str(alert.threshold),
            "windowEnd": alert.window_end,
            "alertId": alert.alert_id,
        },
        "startsAt": alert.emitted_at,
        "endsAt": iso(ends_at(alert, first_posted, resolve_after)),
        "generatorURL": link(link_template, alert),
    }
