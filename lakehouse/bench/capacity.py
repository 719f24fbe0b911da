"""`lakehouse bench capacity`: the highest delivered rate whose time-to-alert p99 meets an SLA.

Each rate is one measured run of `lakehouse.bench.measured_run` (a fresh process, topics and checkpoint,
a warm-up, then time-to-alert); this module only chooses the rates and the load's shape.
"""

from __future__ import annotations

import math
from typing import Any

from lakehouse.bench.operational import latency_figures, say_progress, summary_line
from lakehouse.bench.measured_run import measured_run
from shared.config import Config


def capacity(config: Config, settings: list[str], profiles: list[str], sla_ms: float, start_rate: float,
             min_windows: int = 60, resolution: float = 1.15, max_runs: int = 8) -> dict[str, Any]:
    """Per profile, the highest delivered rate whose time-to-alert p99 is at or under `sla_ms`.

    A search over rates: up by half from `start_rate` while runs meet the SLA, down by half while
    they do not, then bisection until the passing and failing rates are within `resolution` of each
    other (or `max_runs` runs). Each run has enough hot pages and seconds for `min_windows` alerted
    windows; a run whose traffic did not deliver the offered rate is invalid and counts as a miss
    (the machine could not offer that load, so it cannot be claimed).
    """
    window_s = config.hot_pages.window.total_seconds()
    lowest = load_shape(config, 1.0)[2]
    report: dict[str, Any] = {"sla_ms": sla_ms, "min_alerted_windows": min_windows, "configs": {}}
    for profile in profiles:
        tried: list[dict[str, Any]] = []

        def meets(rate: float) -> bool:
            hot_pages, _, _ = load_shape(config, rate)
            seconds = math.ceil(min_windows / hot_pages) * window_s + window_s
            run = measured_run(profile, settings, rate, seconds, hot_pages, latency=True)
            met = bool(run["valid"] and run["alerts"] >= min_windows and run["p99_ms"] is not None
                       and run["p99_ms"] <= sla_ms)
            tried.append({"rate": rate, "meets_sla": met, "hot_pages": hot_pages, "seconds": seconds}
                         | {key: value for key, value in latency_figures(run).items() if key != "details"}
                         | {"batch_ms_p50": run["batch_ms_p50"]})
            say_progress(f"bench: {profile} at {rate:,.0f}/s: {summary_line(run)} -> "
                      f"{'meets' if met else 'misses'} the {sla_ms:g} ms SLA")
            return met

        passing, failing = search_rates(meets, max(start_rate, lowest), lowest, resolution, max_runs)
        best = max((t["delivered_rate"] for t in tried if t["meets_sla"]), default=None)
        report["configs"][profile] = {"capacity_rate": best, "highest_passing_offered": passing,
                                      "lowest_failing_offered": failing, "tried": tried}
    return report


def load_shape(config: Config, rate: float) -> tuple[int, float, float]:
    """(hot pages, their share of the traffic, the lowest rate with one hot page) for `rate`: as many
    hot pages as the traffic allows (the generator's 80% limit), at most 8."""
    from lakehouse.services.generator import TrafficSpec

    per_page = TrafficSpec.for_config(config, 1.0).hot_rate_per_page
    lowest = math.ceil(per_page / 0.8)
    hot_pages = max(1, min(8, int(0.8 * rate / per_page)))
    return hot_pages, hot_pages * per_page / rate, lowest


def search_rates(meets, start: float, lowest: float, resolution: float, max_runs: int) -> tuple[float | None, float | None]:
    """(highest rate that met, lowest that missed) after an exponential then bisecting search."""
    passing = failing = None
    rate, runs = start, 0
    while runs < max_runs:
        runs += 1
        if meets(rate):
            passing = rate
        else:
            failing = rate
        if passing is not None and failing is not None:
            if failing / passing <= resolution:
                break
            rate = round(math.sqrt(passing * failing), -2)
            if rate in (passing, failing):
                break
        elif passing is not None:
            rate = round(passing * 1.5, -2)
        else:
            if rate <= lowest:
                break
            rate = max(lowest, round(rate / 2, -2))
    return passing, failing
