"""The fast path's Prometheus endpoint scraped by a real Prometheus during a measured run
(`lakehouse bench latency --scraped`: what serving and being scraped costs the fast path)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from shared.config import Config
from shared.errors import LakehouseError


@contextmanager
def scraped_endpoint(spark: Any, config: Config, every_s: float, folder: Path) -> Iterator[dict[str, Any]]:
    """The fast path's Prometheus endpoint as `lakehouse operational` serves it, scraped every
    `every_s` by a real Prometheus (lakehouse.services.prometheus) with the shipped scrape job. The
    dict it yields receives, at the end, how many scrapes there were and their mean duration."""
    from operational.hot_pages import STREAM
    from shared.broker_readings import BrokerOffsets
    from lakehouse.monitoring.metrics import QueryFacts
    from lakehouse.monitoring.metrics_endpoint import serving
    from shared.query_events import watching
    from lakehouse.services.prometheus import missing_reason, tools
    from lakehouse.services.prometheus_server import PrometheusServer

    if tools() is None:
        raise LakehouseError(f"a scraped run needs Prometheus: {missing_reason()}")
    settings = config.metrics
    scrape = {"global": {"scrape_interval": f"{every_s:g}s", "scrape_timeout": f"{every_s:g}s"},
              "scrape_configs": [{"job_name": "lakehouse", "static_configs": [
                  {"targets": [f"{settings.bind_address}:{settings.operational_port}"],
                   "labels": {"path": "operational"}}]}]}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "prometheus.yml").write_text(json.dumps(scrape))  # JSON is YAML
    facts = {STREAM.name: QueryFacts.of(config, STREAM)}
    with serving(settings, "operational", facts, BrokerOffsets(config.kafka)) as metrics, watching(spark, metrics), \
            PrometheusServer(folder / "prometheus.yml", folder / "tsdb", log_file=folder / "prometheus.log") as server:
        scrapes: dict[str, Any] = {}
        yield scrapes
        for key, expr in (("scrapes", "count_over_time(up[1d])"), ("scrapes_up", "sum_over_time(up[1d])"),
                          ("scrape_ms_mean", "1000 * avg_over_time(scrape_duration_seconds[1d])")):
            found = server.query(expr)
            scrapes[key] = round(float(found[0]["value"][1]), 1) if found else None
