"""Benchmarks of the fast path: time-to-alert, sustainable throughput, memory over a long run, and
gold's freshness with the fast path beside it (`freshness`: lakehouse/bench/freshness.py computes it).

Each is a series of measured runs (lakehouse/bench/measured_run.py: a fresh process, topics and
checkpoint per run, so the configurations compared start equal), one after another on the same
generated load; the parent prints one JSON object. Ratios from one invocation are the result:
absolute times drift on a shared machine.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from lakehouse.bench.freshness import FRESHNESS_P99_TARGET_S
from lakehouse.bench.measured_run import measured_run
from lakehouse.bench.time_to_alert import SLOWEST, percentiles
from lakehouse.bench.under_load import DELIVERED_SHARE
from shared.errors import LakehouseError
from shared.progress import echo as say_progress


#: The scrape-cost run: the fast path serving its Prometheus endpoint to a real Prometheus that
#: scrapes it this often (15 s is the shipped interval: every second bounds the cost from above).
SCRAPED = "tuned+scraped"
SCRAPE_EVERY_S = 1.0

#: The isolation runs: the medallion in the fast path's application, or in its own niced one.
WITH_MEDALLION = {"tuned+medallion-shared": "shared", "tuned+medallion-separate": "separate"}
#: The isolation target: p99 time-to-alert with the medallion beside the fast path, over p99 alone.
ISOLATION_TARGET = 1.2


def latency(settings: list[str], rate: float, seconds: float, hot_pages: int, profiles: list[str],
            with_medallion: bool = False, scraped: bool = False) -> dict[str, Any]:
    """Time-to-alert per profile; with `with_medallion`, the fast path alone ("tuned") against the same
    with the medallion streams beside it, in its application and in a separate one, and p99 ratios;
    with `scraped`, "tuned" without and with its Prometheus endpoint scraped every second."""
    results = {}
    runs = [(name, None, 0.0) for name in profiles]
    if with_medallion:
        runs = [("tuned", None, 0.0), *((name, where, 0.0) for name, where in WITH_MEDALLION.items())]
    if scraped:
        runs = [("tuned", None, 0.0), (SCRAPED, None, SCRAPE_EVERY_S)]
    for profile, medallion, scrape_every_s in runs:
        try:
            run = measured_run("tuned" if medallion or scrape_every_s else profile, settings, rate, seconds, hot_pages,
                               latency=True, with_medallion=medallion, scrape_every_s=scrape_every_s)
        except LakehouseError as failed:  # the other configurations' figures still count
            results[profile] = {"valid": False, "error": str(failed)}
            say_progress(f"bench: {profile}: FAILED: {failed}")
            continue
        results[profile] = latency_figures(run)
        say_progress(f"bench: {profile}: " + summary_line(run))
    ratios = {}
    tuned = results.get("tuned", {}).get("p99_ms")
    real_time = results.get("real-time", {}).get("p99_ms")
    for profile, result in results.items():
        if profile != "tuned" and tuned and result.get("p99_ms") is not None:
            ratios[f"{profile}_p99_over_tuned"] = round(result["p99_ms"] / tuned, 2)
        if profile != "real-time" and real_time and result.get("p99_ms") is not None:
            ratios[f"{profile}_p99_over_real_time"] = round(result["p99_ms"] / real_time, 2)
    report = {"rate": rate, "seconds": seconds, "hot_pages": hot_pages, "configs": results, "ratios": ratios}
    if with_medallion:
        report["isolation_target_met"] = {name: ratios[f"{name}_p99_over_tuned"] <= ISOLATION_TARGET
                                          for name in WITH_MEDALLION if f"{name}_p99_over_tuned" in ratios}
    return report


def freshness(settings: list[str], rate: float, seconds: float, hot_pages: int, profile: str) -> dict[str, Any]:
    """The fast path of `profile` alone, then with the medallion beside it (a separate application, as
    `lakehouse run` starts it): gold's freshness, the fast path's time-to-alert in both, and the targets."""
    alone = measured_run(profile, settings, rate, seconds, hot_pages, latency=True)
    say_progress(f"bench: {profile} alone: " + summary_line(alone))
    beside = measured_run(profile, settings, rate, seconds, hot_pages, latency=True, with_medallion="separate")
    say_progress(f"bench: {profile} with the medallion: " + summary_line(beside))
    gold = beside.pop("gold_freshness", {})  # reported once, at the top
    cores = {"alone": alone.pop("cores_during_load"), "with_medallion": beside.pop("cores_during_load")}
    fast_alone, fast_beside = latency_figures(alone), latency_figures(beside)
    ratio = p99_ratio(fast_beside, fast_alone)
    return {
        "rate": rate, "seconds": seconds, "hot_pages": hot_pages, "profile": profile,
        "gold_freshness": gold,
        "fast_path": {"alone": fast_alone, "with_medallion": fast_beside},
        "fast_path_p99_with_medallion_over_alone": ratio,
        "cores_during_load": cores,
        "targets_met": {
            "gold_freshness_p99_under_60_s": gold.get("p99_s") is not None and gold["p99_s"] < FRESHNESS_P99_TARGET_S,
            "gold_caught_up_after_the_load": gold.get("caught_up_s_after_load") is not None,
            "fast_path_p99_kept": ratio is not None and ratio <= ISOLATION_TARGET,
            "both_runs_delivered_the_load": bool(alone["valid"] and beside["valid"]),
        },
    }


def run_outline(run: dict[str, Any]) -> dict[str, Any]:
    """One run of a pooled configuration, in brief: its own percentiles, its three slowest windows, and how
    long each of its real-time batches lasted (its checkpoint interval, plus what its end cost)."""
    return {**{key: run.get(key) for key in ("p50_ms", "p95_ms", "p99_ms")},
            "slowest_windows": run.get("slowest_windows", [])[:3],
            "batch_ms": [batch["trigger_ms"] for batch in run.get("batch_ends", [])]}


#: A latency run's figures that count windows: summed when runs are pooled.
_COUNTS = ("alerts", "missed_windows", "warmup_windows", "windows_over_threshold", "alerts_without_crossing")


def pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Latency runs of one configuration (kept with `latencies_ms`) as one run: percentiles over the windows
    of them all, so that a stall weighs as the windows it delayed and not as one run's whole p99; counts
    summed; valid when each run was, with the traffic of the run that delivered the least of its offer.
    One run is itself.

        pooled([first, second])["p99_ms"]  # the p99 of first's and second's windows together
    """
    if len(runs) == 1:
        return runs[0]
    latencies = sorted(value for run in runs for value in run["latencies_ms"])
    least = min(runs, key=lambda run: run["delivered_rate"] / run["offered_rate"])
    return {**{key: least[key] for key in _TRAFFIC}, "valid": all(run["valid"] for run in runs),
            **percentiles(latencies), "latencies_ms": latencies,
            **{key: sum(run.get(key) or 0 for run in runs) for key in _COUNTS}, "runs": len(runs),
            "slowest_windows": sorted((window for run in runs for window in run.get("slowest_windows", [])),
                                      key=lambda window: -window["latencyMs"])[:SLOWEST]}


def p99_ratio(beside: dict[str, Any], alone: dict[str, Any]) -> float | None:
    """p99 with something beside the fast path over p99 alone (latency_figures of each); None when either
    run has no figures."""
    return (round(beside["p99_ms"] / alone["p99_ms"], 2)
            if alone.get("p99_ms") and beside.get("p99_ms") is not None else None)


_FIGURES = ("p50_ms", "p95_ms", "p99_ms", "p999_ms", "max_ms", "alerts", "missed_windows", "batch_boundaries", "warmup")
_TRAFFIC = ("valid", "offered_rate", "delivered_rate", "input_rate")


def latency_figures(run: dict[str, Any]) -> dict[str, Any]:
    """A latency run as reported: the traffic, then the figures only when the run is valid (the
    load it measured was the load offered); the rest under details."""
    figures = {key: run[key] for key in _TRAFFIC} | ({key: run[key] for key in _FIGURES if key in run}
                                                      if run["valid"] else {})
    return figures | {"details": {key: value for key, value in run.items()
                                  if key not in (*_FIGURES, *_TRAFFIC, "samples", "latencies_ms")
                                  or (key in _FIGURES and not run["valid"])}}


def summary_line(run: dict[str, Any]) -> str:
    traffic = f"{run['delivered_rate']:,.0f} of {run['offered_rate']:,.0f} events/s delivered"
    if not run["valid"]:
        return f"INVALID: {traffic} (less than {DELIVERED_SHARE:.0%})"
    return f"p50 {run['p50_ms']} ms, p99 {run['p99_ms']} ms, {run['alerts']} alerted windows ({traffic})"


def throughput(settings: list[str], rates: list[float], seconds: float, hot_pages: int,
               measure: Callable[[float], dict[str, Any]] | None = None) -> dict[str, Any]:
    """The highest offered rate whose Kafka lag does not grow over `seconds` (rates tried in order,
    up to the first one not sustained). `measure` runs the load at a rate: a measured run of the
    "tuned" profile unless given (tests/unit/test_benchmarks.py gives its own)."""
    if measure is None:
        def measure(rate: float) -> dict[str, Any]:
            return measured_run("tuned", settings, rate, seconds, hot_pages, latency=False, drain_timeout_s=300)

    steps, best = [], None
    for rate in rates:
        step = throughput_step(measure(rate))
        steps.append(step)
        say_progress(f"bench: {rate:,.0f}/s offered ({step['delivered_rate']:,.0f} delivered): lag growth "
                     f"{step['lag_growth_per_s']:,.0f}/s -> {'sustained' if step['sustained'] else 'NOT sustained'}"
                     f"{'' if step['valid'] else ' (INVALID run)'}")
        if not step["sustained"] or not step["valid"]:
            break
        best = step["delivered_rate"]
    return {"seconds": seconds, "hot_pages": hot_pages, "max_sustained_rate": best, "steps": steps}


def throughput_step(run: dict[str, Any]) -> dict[str, Any]:
    """A measured run as a throughput step: sustained when the Kafka lag sampled after the first 10 s
    grows by less than 2% of the delivered rate per second and ends below 3 s of it."""
    lags = [(s["t_s"], s["lag"]) for s in run["samples"] if s["t_s"] >= 10]
    slope = _slope(lags)
    delivered = run["delivered_rate"]
    return ({key: run[key] for key in ("valid", "offered_rate", "delivered_rate", "generator_cpu_share", "input_rate")}
            | {"lag_growth_per_s": round(slope, 1), "final_lag": lags[-1][1] if lags else None,
               "batch_ms_p50": run["batch_ms_p50"],
               "sustained": slope < 0.02 * delivered and (lags[-1][1] if lags else 0) < 3 * delivered})


def memory(settings: list[str], rate: float, seconds: float, hot_pages: int, profile: str = "real-time") -> dict[str, Any]:
    run = measured_run(profile, settings, rate, seconds, hot_pages, latency=False, sample_every_s=15)
    samples = run["samples"]
    half = [s for s in samples if s["t_s"] >= seconds / 2]
    first_half = [s for s in samples if s["t_s"] < seconds / 2 and s["t_s"] >= 60]

    def spread(key: str, rows: list) -> dict[str, Any]:
        values = [r[key] for r in rows if r[key] is not None]
        return {"min": min(values), "max": max(values)} if values else {}

    return {
        "config": profile, "rate": rate, "seconds": seconds, **{key: run[key] for key in _TRAFFIC},
        "batch_ms_p50": run["batch_ms_p50"],
        "state_rows": {"after_1_min_first_half": spread("state_rows", first_half), "second_half": spread("state_rows", half)},
        "state_files_mb": {"after_1_min_first_half": spread("state_files_mb", first_half),
                           "second_half": spread("state_files_mb", half)},
        # real-time mode: what each batch end's eviction read, which is the de-duplication state's rows
        "state_rows_read_at_batch_ends": [max((op["read_for_eviction"] or 0) for op in end["operators"])
                                          for end in run["batch_ends"]],
        **{key: {"after_1_min_first_half": spread(key, first_half), "second_half": spread(key, half)}
           for key in ("jvm_rss_mb", "jvm_heap_committed_mb", "jvm_heap_used_mb", "jvm_non_heap_committed_mb")},
        "samples": samples,
    }


def _slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of y over x (0 for fewer than 3 points)."""
    if len(points) < 3:
        return 0.0
    xs, ys = zip(*points)
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0
