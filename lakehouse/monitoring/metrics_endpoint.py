"""The series of a path's process served over HTTP, where Prometheus scrapes them: at
`metrics.bind_address` and the path's port (`metrics.operational_port`, `metrics.analytical_port`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from prometheus_client import start_http_server

from lakehouse.monitoring.metrics import LatestOffsets, QueryFacts, QueryMetrics
from lakehouse.monitoring.running_batches import LiveReadings
from shared.broker_readings import BrokerOffsets
from shared.config import MetricsConfig


def require_free_port(settings: MetricsConfig, application: str) -> None:
    """A ServiceError naming the key when the path's metrics port is taken (nothing when disabled)."""
    from lakehouse.services.daemon import require_free_ports

    if settings.enabled:
        require_free_ports(settings.bind_address, {f"metrics.{application}_port": settings.port(application)})


@contextmanager
def serving(settings: MetricsConfig, application: str, facts: Mapping[str, QueryFacts],
            latest_offsets: LatestOffsets | None = None, live: LiveReadings | None = None) -> Iterator[QueryMetrics | None]:
    """`QueryMetrics` for the path's `application` (operational, analytical), served over HTTP on
    its configured port while the block runs; None when `metrics.enabled` is false. `live`: the
    session's running batches (real-time queries are followed between their reports)."""
    if not settings.enabled:
        yield None
        return
    require_free_port(settings, application)
    newest = latest_offsets.newest_timestamp if isinstance(latest_offsets, BrokerOffsets) else None
    metrics = QueryMetrics(facts, latest_offsets, live=live, newest_record_time=newest)
    server, thread = start_http_server(settings.port(application), addr=settings.bind_address,
                                       registry=metrics.registry)
    try:
        yield metrics
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        if isinstance(latest_offsets, BrokerOffsets):
            latest_offsets.close()
