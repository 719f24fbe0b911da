"""What the running queries are doing now, read from their processes' /metrics endpoints: the view
`lakehouse status` and the real-time fast path's console give between batch reports, which come
once per checkpoint interval in real-time mode.

    for row in running_queries(config.metrics):
        print(activity_line(row))
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterable
from typing import Any

from shared.config import MetricsConfig

#: Series read per query, by the column they fill.
_COLUMNS = {
    "lakehouse_query_up": "up",
    "lakehouse_query_real_time": "realTime",
    "lakehouse_kafka_lag_records": "lag",
    "lakehouse_batches_total": "batchesEnded",
    "lakehouse_input_rows_total": "rowsRead",
    "lakehouse_running_batch_records_read": "runningBatchRead",
    "lakehouse_alerts_emitted_total": "alerts",
    "lakehouse_last_progress_timestamp_seconds": "lastProgress",
    "lakehouse_last_alert_timestamp_seconds": "lastAlert",
    "lakehouse_batch_end_overdue_seconds": "batchEndOverdue",
}


def query_rows(exposition: str, now: float | None = None) -> list[dict[str, Any]]:
    """One row per query from a /metrics page (Prometheus' text format): the columns of `_COLUMNS`,
    the two timestamps turned into seconds ago."""
    from prometheus_client.parser import text_string_to_metric_families

    now = time.time() if now is None else now
    rows: dict[str, dict[str, Any]] = {}
    for family in text_string_to_metric_families(exposition):
        for sample in family.samples:
            column = _COLUMNS.get(sample.name)
            query = sample.labels.get("query")
            if column is None or query is None:
                continue
            row = rows.setdefault(query, {"query": query})
            row[column] = row.get(column, 0) + sample.value if column == "lag" else sample.value
    for row in rows.values():
        for stamp, ago in (("lastProgress", "secondsSinceProgress"), ("lastAlert", "secondsSinceAlert")):
            if stamp in row:
                row[ago] = round(now - row.pop(stamp), 1)
    return sorted(rows.values(), key=lambda row: row["query"])


def running_queries(settings: MetricsConfig, applications: Iterable[str] = ("operational", "analytical"),
                    timeout_s: float = 3.0) -> list[dict[str, Any]]:
    """The rows of every path's process that serves /metrics now (none when nothing runs)."""
    if not settings.enabled:
        return []
    rows = []
    for application in applications:
        url = f"http://{settings.bind_address}:{settings.port(application)}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as response:
                page = response.read().decode()
        except OSError:  # not running (or not serving): nothing live to say
            continue
        rows += [row | {"path": application} for row in query_rows(page)]
    return rows


def activity_line(row: dict[str, Any]) -> str:
    """A running query in one line, e.g. `[hot_pages] real-time, running: lag 12, batch read 48,120, ...`."""
    mode = "real-time" if row.get("realTime") else "micro-batch"
    parts = [f"lag {row['lag']:,.0f}" if "lag" in row else "lag n/a"]
    if "runningBatchRead" in row:
        parts.append(f"running batch read {row['runningBatchRead']:,.0f}")
    if "secondsSinceProgress" in row:
        parts.append(f"last activity {row['secondsSinceProgress']:,.1f} s ago")
    if "alerts" in row:
        parts.append(f"alerts {row['alerts']:,.0f}")
    if "secondsSinceAlert" in row:
        parts.append(f"last alert {row['secondsSinceAlert']:,.1f} s ago")
    if row.get("batchEndOverdue"):
        parts.append(f"BATCH END OVERDUE by {row['batchEndOverdue']:,.0f} s: its commit is not finishing (the "
                     "storage or a state upload failing; Spark's log says why)")
    state = "running" if row.get("up") else "down"
    return f"[{row['query']}] {mode}, {state}: " + ", ".join(parts)
