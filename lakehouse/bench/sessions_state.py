"""`lakehouse bench sessions`: whether the open sessions' state stays bounded as event time goes on.

Event time arrives one step at a time: each step, `lakehouse generate` sends `step` seconds of visits at
`rate` events/s, right after the step before (`analytical.generate_block`, one block per step), and the
medallion's streams backfill them, the sessions' included, in one process that lives through the run,
so that the sessions' state is carried from step to step as a live run carries it from batch to batch.
After each step: the sessions the state holds (Spark's numRowsTotal) and their memory, the watermark,
the sessions written so far, and the JVM's resident memory and heap.

A session is held from its first event until the watermark has passed its end. The generator's visits
are `visit_clicks` clicks `think_time` apart, so at a rate R about R / visit_clicks visits start each
second, each held for about its own length, the gap and the watermark: once event time has run past
that, the state stops growing, near `expected_plateau`. Each step's generator starts its own visitors, so
visits are cut at a step's end: more and shorter than the formula's, and the plateau is higher.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from typing import Any

from lakehouse.bench.analytical import config_file, generate_block, overrides
from lakehouse.bench.linux_process import process_memory_mb
from lakehouse.path_processes import child_options
from lakehouse.services.generator import TrafficSpec
from shared import spark_internals
from shared.config import Config
from shared.config_loading import load_config, with_overrides
from shared.errors import LakehouseError
from shared.processes import child_env, die_with_parent
from shared.progress import Progress, echo as _progress
from shared.runtime import MEDALLION, command_in

def held_seconds(config: Config) -> float:
    """How long a session stays in the state, by the module's formula: a visit, the gap, the watermark."""
    visit = TrafficSpec.visit_clicks * TrafficSpec.think_time
    return (visit + config.sessions.gap + config.analytical.watermark).total_seconds()


def expected_plateau(config: Config, rate: float) -> int:
    """Sessions held once event time has run past `held_seconds`: the visits started in that time."""
    return round(rate / TrafficSpec.visit_clicks * held_seconds(config))


def run_steps(settings: list[str], rate: float, steps: int, step_s: float) -> dict[str, Any]:
    """The steps in this process (a child of the benchmark): generate, backfill, sample."""
    from analytical import gold_user_sessions, pipeline
    from shared.spark import spark_session

    config = load_config(config_file(settings), overrides(settings))
    if not config.sessions.enabled:
        raise LakehouseError("sessions.enabled is false: there is no sessions' state to measure")
    spark = spark_session(config, application="analytical")
    jvm_pid = spark_internals.jvm_pid(spark)
    samples = []
    with Progress("bench sessions", total=steps, unit="steps") as progress:
        for step in range(steps):
            generate_block(settings, step, round(rate * step_s), step_s)
            with progress.paused():
                runs = {run.name: run for run in pipeline.backfill(spark, config, report=lambda line: None)}
            sessions = runs[gold_user_sessions.STREAM.name]
            samples.append({
                "event_time_s": round((step + 1) * step_s),
                "state_sessions": sessions.state_rows,
                "state_memory_mb": round(sessions.state_memory_bytes / 2**20, 1),
                "watermark": sessions.watermark,
                "sessions_written": gold_user_sessions.TABLE.at(config.storage.root).read(spark).count(),
                "backfill_s": round(sum(run.seconds for run in runs.values()), 1),
                "jvm_rss_mb": process_memory_mb(jvm_pid, "VmRSS"),
                "jvm_heap_used_mb": spark_internals.jvm_memory_mb(spark).get("heap_used"),
            })
            progress.advance(detail=f"{samples[-1]['event_time_s']} s of event time, "
                                    f"{sessions.state_rows:,} sessions held")
    return {"samples": samples}


def sessions_benchmark(settings: list[str], rate: float, minutes: float, step_s: float) -> dict[str, Any]:
    base = load_config(config_file(settings), overrides(settings))
    run_id = f"{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:6]}"
    steps = max(1, round(minutes * 60 / step_s))
    # RocksDB counts the state's rows only when asked (`spark.rocksdb.count_rows`): here they are the figure
    scenario = child_options(with_overrides(base, [f"kafka.topics.clicks=bench-sessions-{run_id}",
                                                   f"storage.root={base.path('bench', run_id)}",
                                                   "spark.rocksdb.count_rows=true"]))
    _progress(f"bench sessions: {steps} steps of {step_s:g} s of event time at {rate:,.0f} events/s")
    done = subprocess.run(command_in(MEDALLION, "lakehouse.bench.sessions_state", "--rate", str(rate),
                                     "--steps", str(steps), "--step", str(step_s), *scenario),
                          stdout=subprocess.PIPE, text=True, env=child_env())
    if done.returncode != 0:
        raise LakehouseError(f"the sessions benchmark's run failed (exit {done.returncode}); its stderr is above")
    samples = json.loads(done.stdout)["samples"]
    held_s = held_seconds(base)
    settled = [sample for sample in samples if sample["event_time_s"] > held_s]
    return {
        "rate": rate, "step_s": step_s, "steps": steps,
        "gap_s": base.sessions.gap.total_seconds(), "watermark_s": base.analytical.watermark.total_seconds(),
        "samples": samples,
        "summary": {
            "expected_plateau_sessions": expected_plateau(base, rate),
            "settles_after_s": round(held_s),
            "peak_state_sessions": max(sample["state_sessions"] for sample in samples),
            "peak_state_memory_mb": max(sample["state_memory_mb"] for sample in samples),
            "peak_jvm_rss_mb": max(sample["jvm_rss_mb"] or 0 for sample in samples),
            # after it settles, the state's growth from the first such step to the last (None: it never settled)
            "settled_steps": len(settled),
            "settled_growth": round(settled[-1]["state_sessions"] / max(settled[0]["state_sessions"], 1) - 1, 3)
            if len(settled) > 1 else None,
        },
    }


def _main() -> int:
    parser = argparse.ArgumentParser(prog="python -m lakehouse.bench.sessions_state",
                                     description="The steps of `lakehouse bench sessions` in one process.")
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--step", type=float, required=True)
    parser.add_argument("--config")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    settings = ([f"--config={args.config}"] if args.config else []) + [f"--set={o}" for o in args.overrides]
    print(json.dumps(run_steps(settings, args.rate, args.steps, args.step)))
    return 0


if __name__ == "__main__":
    die_with_parent()
    sys.exit(_main())
