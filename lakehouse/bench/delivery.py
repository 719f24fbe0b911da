"""`lakehouse bench notify`: the hot-page alerts delivered to Alertmanager by the bridge (`lakehouse notify`), and
the fast path's time-to-alert with the bridge beside it and without (the targets and what they measured:
operational/README.md, "Delivery to Alertmanager").

The runs are lakehouse/bench/measured_run.py's, with Alertmanager and the bridge beside the fast path
(lakehouse/bench/notify_during_load.py): in pairs of runs, or in one run that pauses them in blocks.
"""

from __future__ import annotations

import random
from typing import Any

from lakehouse.bench.measured_run import measured_run, profile_config, warmup_s
from lakehouse.bench.operational import latency_figures, p99_ratio, pooled, run_outline, summary_line
from lakehouse.bench.time_to_alert import percentiles
from shared.progress import echo as say_progress

#: The delivery targets: p99 from an alert record's append to Alertmanager taking it, and the fast path's p99
#: with the bridge beside it over alone.
DELIVERY_P99_TARGET_MS = 100.0
BRIDGE_ISOLATION_TARGET = 1.1
#: Seconds of load after an outage's end: the bridge's next try (alerting.retry_max_delay), and its kills.
AFTER_OUTAGE_S = 30.0


def notify(settings: list[str], rate: float, seconds: float, hot_pages: int, profile: str, bridge_kills: int = 0,
           outage_s: float = 0.0, pairs: int = 1, interleave_s: float = 0.0) -> dict[str, Any]:
    """The fast path of `profile` alone, then with Alertmanager and the bridge beside it (as `lakehouse run`
    starts them), `pairs` times in turn (`paired`), or in one run that pauses them in blocks (`interleaved`):
    delivery from an alert record's append to Alertmanager taking it, each window's notifications, and the fast
    path's time-to-alert in both. With `bridge_kills` or `outage_s`, one more run under those faults (its load
    long enough to hold the outage) says whether every window still reached the receiver once.

    The hot pages cross at instants spread over the window (`--hot-stagger`): crossing all in the same
    millisecond, they gave a run one sample of its phase to the real-time batches' ends, and each
    configuration's p99 was whether that phase put a crossing in the pause at a batch's end."""
    report, targets = (interleaved(settings, rate, seconds, hot_pages, profile, interleave_s) if interleave_s
                       else paired(settings, rate, seconds, hot_pages, profile, pairs))
    if bridge_kills or outage_s:
        outage_after_s = warmup_s(profile_config(profile, settings)) + 10.0 if outage_s else 0.0
        faulted_s = max(seconds, outage_after_s + outage_s + AFTER_OUTAGE_S) if outage_s else seconds
        faulted = measured_run(profile, settings, rate, faulted_s, hot_pages, latency=True,
                               notify=(bridge_kills, outage_s, outage_after_s))
        say_progress(f"bench: {profile} with the bridge, under faults: " + delivery_line(faulted["notify"]))
        report["under_faults"] = {"seconds": faulted_s, "bridge_kills": bridge_kills, "outage_s": outage_s,
                                  "alerts_missed_by_the_fast_path": faulted.get("missed_windows"), **faulted["notify"]}
        targets["under_faults_every_window_notified_once"] = notified_once(faulted["notify"])
    report["targets_met"] = targets
    return report


def paired(settings: list[str], rate: float, seconds: float, hot_pages: int, profile: str,
           pairs: int) -> tuple[dict[str, Any], dict[str, bool]]:
    """`notify`'s runs alone and with the bridge, `pairs` times in turn, each configuration's runs pooled
    (`pooled`); the report and its targets."""
    alone_runs, beside_runs = [], []
    for pair in range(1, pairs + 1):
        of = f" ({pair} of {pairs})" if pairs > 1 else ""
        alone_runs.append(measured_run(profile, settings, rate, seconds, hot_pages, latency=True, keep_latencies=True,
                                       hot_stagger=True))
        say_progress(f"bench: {profile} alone{of}: " + summary_line(alone_runs[-1]))
        beside_runs.append(measured_run(profile, settings, rate, seconds, hot_pages, latency=True,
                                        notify=(0, 0, 0.0), keep_latencies=True, hot_stagger=True))
        say_progress(f"bench: {profile} with the bridge{of}: " + summary_line(beside_runs[-1]) + "; "
                     + delivery_line(beside_runs[-1]["notify"]))
    delivered = pooled_notify([run.pop("notify") for run in beside_runs])
    fast_alone, fast_beside = latency_figures(pooled(alone_runs)), latency_figures(pooled(beside_runs))
    ratio = p99_ratio(fast_beside, fast_alone)
    report = {"rate": rate, "seconds": seconds, "hot_pages": hot_pages, "profile": profile, "pairs": pairs,
              "notify": delivered,
              "fast_path": {"alone": fast_alone, "with_bridge": fast_beside},
              "fast_path_p99_with_bridge_over_alone": ratio}
    if pairs > 1:
        report["fast_path_p99_with_bridge_over_alone_per_pair"] = [
            p99_ratio(latency_figures(beside), latency_figures(alone)) for alone, beside in zip(alone_runs, beside_runs)]
        report["fast_path_runs"] = {"alone": [run_outline(run) for run in alone_runs],
                                    "with_bridge": [run_outline(run) for run in beside_runs]}
    return report, {
        "delivery_p99_under_100_ms": (delivered["delivery"]["p99_ms"] or float("inf")) < DELIVERY_P99_TARGET_MS,
        "fast_path_p99_kept": ratio is not None and ratio <= BRIDGE_ISOLATION_TARGET,
        "every_window_notified_once": notified_once(delivered),
        "both_runs_delivered_the_load": all(run["valid"] for run in (*alone_runs, *beside_runs)),
    }


def interleaved(settings: list[str], rate: float, seconds: float, hot_pages: int, profile: str,
                interleave_s: float) -> tuple[dict[str, Any], dict[str, bool]]:
    """`notify`'s one run with the bridge, Alertmanager and its receiver paused and resumed in blocks
    of `interleave_s` (lakehouse.bench.notify_during_load.interleaved_blocks): the fast path's windows that
    crossed in the blocks without them against those that crossed in the blocks with them, in one JVM and one
    stretch of the machine's time; the report and its targets. No delivery time: a record appended in a paused
    block waits for the next."""
    run = measured_run(profile, settings, rate, seconds, hot_pages, latency=True, notify=(0, 0, 0.0),
                       hot_stagger=True, interleave_s=interleave_s)
    spans = run.pop("interleaved")
    alone, beside = spans.pop("alone"), spans.pop("with_bridge")
    ratio = p99_ratio(beside, alone)
    ran = run.pop("interleaved_blocks")
    latencies = {running: [spans[f"block {n}"]["latencies_ms"] for n, block in enumerate(ran, 1)
                           if block["with_bridge"] == running] for running in (False, True)}
    interval = p99_ratio_interval(latencies[False], latencies[True])
    say_progress(f"bench: {profile} interleaved: p99 {alone['p99_ms']} ms in the blocks alone, "
                 f"{beside['p99_ms']} ms in those with the bridge (ratio {ratio}, 90% interval {interval})")
    delivered = run.pop("notify")
    blocks = [{**block, **{key: spans[f"block {n}"][key] for key in ("p50_ms", "p99_ms", "windows_over_threshold")}}
              for n, block in enumerate(ran, 1)]
    report = {"rate": rate, "seconds": seconds, "hot_pages": hot_pages, "profile": profile,
              "interleave_s": interleave_s, "notify": delivered,
              "fast_path": {"alone": alone, "with_bridge": beside, "whole_run": latency_figures(run)},
              "fast_path_p99_with_bridge_over_alone": ratio,
              "fast_path_p99_ratio_90_percent_interval": interval, "blocks": blocks}
    for figures in (alone, beside):
        figures.pop("latencies_ms")
    return report, {
        "fast_path_p99_kept": ratio is not None and ratio <= BRIDGE_ISOLATION_TARGET,
        "every_window_notified_once": notified_once(delivered),
        "the_run_delivered_the_load": bool(run["valid"]),
    }


#: The delivery figures that count windows: summed when runs are pooled (pooled_notify).
_DELIVERY_COUNTS = ("windows_alerted", "windows_at_alertmanager", "windows_notified_once",
                    "windows_notified_more_than_once", "notifications_for_no_alerted_window")


def pooled_notify(figures: list[dict[str, Any]]) -> dict[str, Any]:
    """The delivery figures of runs (`NotifyDuringLoad.figures`, kept with `latencies_ms`) as one: percentiles
    over every delivery, window counts summed, the windows listed as missing from each; without the latencies."""
    if len(figures) == 1:
        return {key: value for key, value in figures[0].items() if key != "latencies_ms"}
    latencies = sorted(value for run in figures for value in run["latencies_ms"])
    return {"delivery": {**percentiles(latencies), "records": len(latencies)},
            **{key: sum(run[key] for run in figures) for key in _DELIVERY_COUNTS},
            **{key: [window for run in figures for window in run[key]][:10]
               for key in ("windows_not_read_at_alertmanager", "windows_not_notified")},
            "faults": []}


#: Resamples of the blocks behind a p99 ratio's interval (p99_ratio_interval).
RESAMPLES = 2000


def p99_ratio_interval(alone_blocks: list[list[float]], beside_blocks: list[list[float]],
                       resamples: int = RESAMPLES, seed: int = 0) -> list[float] | None:
    """The 5th and 95th percentiles of the pooled p99 ratio (beside over alone) when each configuration's blocks
    are drawn again with replacement, `resamples` times: how far the ratio moves with which blocks happened to
    hold a bad batch end (a block bootstrap; the windows of one block are not independent, the blocks nearly are).
    None without blocks on either side.

        p99_ratio_interval([[10, 400], [12, 30]], [[11, 420], [12, 35]])  # [0.09, 14.0]: which block holds the 400
    """
    alone_blocks, beside_blocks = [block for block in alone_blocks if block], [block for block in beside_blocks if block]
    if not alone_blocks or not beside_blocks:
        return None
    draw = random.Random(seed)

    def pooled_p99(blocks: list[list[float]]) -> float:
        return percentiles(sorted(value for block in draw.choices(blocks, k=len(blocks)) for value in block))["p99_ms"]

    ratios = sorted(pooled_p99(beside_blocks) / pooled_p99(alone_blocks) for _ in range(resamples))
    return [round(ratios[int(0.05 * resamples)], 2), round(ratios[int(0.95 * resamples) - 1], 2)]


def notified_once(figures: dict[str, Any]) -> bool:
    """Every window the alerts topic holds reached the receiver, once."""
    return figures["windows_alerted"] > 0 and figures["windows_notified_once"] == figures["windows_alerted"]


def delivery_line(figures: dict[str, Any]) -> str:
    delivery = figures["delivery"]
    return (f"delivery p50 {delivery['p50_ms']} ms, p99 {delivery['p99_ms']} ms over {delivery['records']} records; "
            f"{figures['windows_notified_once']} of {figures['windows_alerted']} windows notified once, "
            f"{figures['windows_notified_more_than_once']} more than once")
