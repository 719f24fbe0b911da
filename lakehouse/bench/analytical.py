"""`lakehouse bench backfill`: how fast the medallion backfills, and whether history slows it down.

Traffic comes in blocks of N events, block i covering `span` seconds of event time from a fixed
start (block i+1 follows block i), each from `lakehouse generate` with its own seed and a little
late, duplicate and malformed data. Two fresh lakehouses (own topic, own storage root):

  1x:  history = block H-1;          backfill it; then block H arrives; time its backfill.
  Hx:  history = blocks 0 .. H-1;    backfill it (the throughput figure); then block H; time it.

Block H is the same data in both, so the two incremental times differ only by the history under
them; their ratio is the result (it should stay near 1). Each backfill runs in a fresh process
(`python -m lakehouse.bench.analytical run`), which reports per-layer rows and seconds, Spark's parts
of them and the CPU seconds its JVM spent on each, the peak resident memory of its JVM (VmHWM) and of
itself, and the JVM's heap at its highest.

After the Hx history's backfill come the medallion from bronze (`... rebuild`: the streams a rebuild
runs, from that bronze into a root of their own) and the floor (`... floor`, `run_floor`): the same work
from bronze to gold as a plain batch job, each in a fresh process. The summary holds the medallion's
speed from Kafka and from bronze as fractions of the floor's, the CPU each spent per event, and where
each query's time goes beside the floor's steps.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

from shared.config_loading import load_config, with_overrides
from shared.errors import LakehouseError
from shared import spark_internals
from lakehouse.bench.linux_process import cpu_seconds, process_memory_mb
from lakehouse.path_processes import TrafficProcess, child_options
from shared.processes import child_env, die_with_parent
from shared.runtime import MEDALLION, command_in
from shared.progress import Progress, echo as _progress

BLOCKS_START = datetime(2026, 1, 1, tzinfo=timezone.utc)


# -- one backfill (child process) ------------------------------------------------------------


def run_backfill(settings: list[str], from_bronze: bool = False) -> dict[str, Any]:
    """One backfill, query by query as `pipeline.backfill` runs them, with the CPU seconds its JVM
    spent on each (all its threads: tasks, JIT, GC) and the classes Spark generated and compiled for
    it. `from_bronze`: the streams a rebuild runs instead, from bronze into `storage.root/_from_bronze`."""
    from analytical import pipeline
    from analytical.registry import rebuilt, running
    from shared.spark import spark_session

    config = load_config(config_file(settings), overrides(settings))
    spark = spark_session(config, application="analytical")
    jvm_pid = spark_internals.jvm_pid(spark)
    started = time.monotonic()
    layers = []
    roots = {"source_root": config.storage.root, "target_root": config.path("_from_bronze")} if from_bronze else {}
    with jvm_memory_peaks(spark) as peaks:
        for stream in (rebuilt(running(config)) if from_bronze else running(config)):
            cpu_before, compiled_before = cpu_seconds(jvm_pid), spark_internals.generated_classes_compiled(spark)
            [run] = pipeline.backfill(spark, config, report=_progress, streams=[stream], **roots)
            layers.append({**run.as_dict(), "durations_ms": run.durations_ms,
                           "cpu_s": round(cpu_seconds(jvm_pid) - cpu_before, 2),
                           "generated_classes": spark_internals.generated_classes_compiled(spark) - compiled_before})
    return {
        "seconds": round(time.monotonic() - started, 3),
        "layers": layers,
        "jvm_peak_rss_mb": process_memory_mb(jvm_pid, "VmHWM"),
        **{f"jvm_peak_{part}_mb": mb for part, mb in peaks.items()},
        "python_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


@contextmanager
def jvm_memory_peaks(spark: Any, every_s: float = 0.5) -> Iterator[dict[str, float]]:
    """The highest of each JVM memory figure (shared.spark_internals.jvm_memory_mb: heap committed
    and used, non-heap committed) over the block, sampled every `every_s` by a thread: beside the
    JVM's peak RSS, they say how much of it was the heap."""
    peaks: dict[str, float] = {}
    done = threading.Event()

    def sample() -> None:
        while True:
            for part, mb in spark_internals.jvm_memory_mb(spark).items():
                peaks[part] = max(peaks.get(part, 0.0), mb)
            if done.wait(every_s):
                return

    sampler = threading.Thread(target=sample, name="jvm-memory-peaks", daemon=True)
    sampler.start()
    try:
        yield peaks
    finally:
        done.set()
        sampler.join()


#: The floor's steps, in order, each timed alone.
FLOOR_STEPS = ("parse", "silver", "gold_5s", "gold_hourly")


def run_floor(settings: list[str]) -> dict[str, Any]:
    """The work of a backfill from bronze to gold as a plain batch job: the floor the medallion is held to.

    It reads the bronze table a backfill filled, parses it with the shared parsing (the contract's
    validity checks included) and keeps what silver's tables take of it cached (as silver does),
    de-duplicates by eventId keeping the first copy, counts per page and window with the shared rule,
    rolls the windows up per hour, and writes each result over a Delta table declared like the
    medallion's (same schema, partitioning and statistics columns) under `storage.root/_floor`. What it
    leaves out is what the medallion adds for its guarantees: streaming, writes against history, state,
    expectations, a query's start and stop.
    """
    from analytical import bronze_clicks, gold_page_clicks_5s, gold_page_clicks_hourly, silver_clicks
    from shared.parsing import parse_clicks
    from shared.rule import dedupe_clicks
    from shared.spark import spark_session

    config = load_config(config_file(settings), overrides(settings))
    spark = spark_session(config, application="analytical")
    floor_root = config.path("_floor")
    seconds: dict[str, float] = {}
    rows: dict[str, int] = {}

    def write(frame, table) -> None:
        path = table.at(floor_root).create(spark, table.schema)  # a batch's aggregates may say nullable where a stream's do not
        frame.write.format("delta").mode("overwrite").save(path)
        rows[str(table)] = spark.read.format("delta").load(path).count()

    jvm_pid = spark_internals.jvm_pid(spark)
    cpu_before = cpu_seconds(jvm_pid)
    started = time.monotonic()
    parsed = (bronze_clicks.TABLE.at(config.storage.root).read(spark)
              .transform(parse_clicks, config.quality, bronze_clicks.KAFKA_TIMESTAMP)
              .transform(silver_clicks.written_parts).cache())
    rows[str(bronze_clicks.TABLE)] = parsed.count()
    seconds["parse"] = time.monotonic() - started
    events = parsed.transform(silver_clicks.silver_clicks).transform(
        dedupe_clicks, config.analytical.watermark, silver_clicks.FIRST_COPY)
    write(events, silver_clicks.TABLE)
    write(parsed.transform(silver_clicks.quarantined), silver_clicks.QUARANTINE)
    parsed.unpersist()
    seconds["silver"] = time.monotonic() - started - sum(seconds.values())
    silver = silver_clicks.TABLE.at(floor_root).read(spark).select("eventId", "pageId", "eventTime")
    write(silver.transform(gold_page_clicks_5s.page_clicks_5s, config.hot_pages), gold_page_clicks_5s.TABLE)
    seconds["gold_5s"] = time.monotonic() - started - sum(seconds.values())
    windows = gold_page_clicks_5s.TABLE.at(floor_root).read(spark)
    write(windows.transform(gold_page_clicks_hourly.as_inserted).transform(gold_page_clicks_hourly.roll_up_hours),
          gold_page_clicks_hourly.TABLE)
    seconds["gold_hourly"] = time.monotonic() - started - sum(seconds.values())
    return {
        "seconds": round(time.monotonic() - started, 3),
        "steps_s": {step: round(seconds[step], 3) for step in FLOOR_STEPS},
        "cpu_s": round(cpu_seconds(jvm_pid) - cpu_before, 2),
        "rows": rows,
        "jvm_peak_rss_mb": process_memory_mb(jvm_pid, "VmHWM"),
    }


# -- the command (parent process) ------------------------------------------------------------


def backfill_benchmark(settings: list[str], events: int, history: int, span_s: float) -> dict[str, Any]:
    base = load_config(config_file(settings), overrides(settings))
    run_id = f"{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:6]}"
    result: dict[str, Any] = {"events_per_block": events, "history_blocks": history, "block_span_s": span_s}
    scenarios = (("1x", [history - 1]), (f"{history}x", list(range(history))))
    # the blocks of history, a backfill, a block, a backfill; then from bronze and the floor
    steps = sum(len(blocks) + 3 for _, blocks in scenarios) + 2
    with Progress("bench backfill", total=steps, unit="steps") as progress:
        for label, blocks in scenarios:
            topic = f"bench-backfill-{run_id}-{label}"
            scenario = child_options(with_overrides(base, [f"kafka.topics.clicks={topic}",
                                                           f"storage.root={base.path('bench', run_id, label)}"]))
            _progress(f"bench: {label}: generating {len(blocks)} block(s) of {events:,} events of history")
            for block in blocks:
                generate_block(scenario, block, events, span_s)
                progress.advance(detail=f"{label}: block {block} generated")
            _progress(f"bench: {label}: backfilling the history")
            first = measured_backfill(scenario, progress)
            progress.advance(detail=f"{label}: history backfilled")
            if label == f"{history}x":  # from bronze, and the floor: the same history, the same bronze
                _progress(f"bench: {label}: the medallion from bronze, as a rebuild runs it")
                result["from_bronze"] = measured_backfill(scenario, progress, "rebuild")
                progress.advance(detail="from bronze measured")
                _progress(f"bench: {label}: the same work from bronze to gold as a plain batch job (the floor)")
                result["floor"] = measured_backfill(scenario, progress, "floor")
                progress.advance(detail="the floor measured")
            generate_block(scenario, history, events, span_s)
            progress.advance(detail=f"{label}: block {history} generated")
            _progress(f"bench: {label}: backfilling one new block on top")
            incremental = measured_backfill(scenario, progress)
            progress.advance(detail=f"{label}: new block backfilled")
            result[label] = {"history_backfill": first, "incremental_backfill": incremental}

    largest = result[f"{history}x"]["history_backfill"]
    from_bronze = result["from_bronze"]
    rows = history * events
    small, large = (result[key]["incremental_backfill"] for key in ("1x", f"{history}x"))
    floor = result["floor"]
    floor_per_s = floor["rows"]["bronze/clicks"] / floor["seconds"]
    backfills = [run for scenario in (result["1x"], result[f"{history}x"]) for run in scenario.values()]
    bronze_to_gold = rows / from_bronze["seconds"]
    kafka_to_gold = rows / largest["seconds"]
    result["summary"] = {
        "bronze_to_gold_events_per_s": round(bronze_to_gold),
        "kafka_to_gold_events_per_s": round(kafka_to_gold),
        "floor_events_per_s": round(floor_per_s),
        "bronze_to_gold_over_floor": round(bronze_to_gold / floor_per_s, 3),
        "kafka_to_gold_over_floor": round(kafka_to_gold / floor_per_s, 3),
        # the JVM's CPU per event: what a rate costs in cores (20,000/s at 50 us is one core)
        "cpu_us_per_event": {"floor": _per_event_us(floor["cpu_s"], floor["rows"]["bronze/clicks"]),
                             "bronze_to_gold": _per_event_us(_cpu_s(from_bronze), rows),
                             "kafka_to_gold": _per_event_us(_cpu_s(largest), rows)},
        "where_the_time_goes": {"medallion": _breakdown(largest), "from_bronze": _breakdown(from_bronze),
                                "floor_s": floor["steps_s"]},
        "incremental_s_1x": small["seconds"],
        f"incremental_s_{history}x": large["seconds"],
        f"incremental_ratio_{history}x_over_1x": round(large["seconds"] / small["seconds"], 3),
        "peak_jvm_rss_mb": max(run["jvm_peak_rss_mb"] or 0 for run in backfills),
        # the same backfills' heap at its highest: of the peak RSS, how much the heap held from the system
        **{f"peak_jvm_{part}_mb": max(run.get(f"jvm_peak_{part}_mb", 0.0) for run in backfills)
           for part in ("heap_committed", "heap_used", "non_heap_committed")},
        "floor_peak_jvm_rss_mb": floor["jvm_peak_rss_mb"],
    }
    return result


def _breakdown(run: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per layer of a backfill: its seconds, split into Spark's parts of its batches (the sink's work,
    planning, the offset and commit logs, ...) and what lies outside them (the query's start and stop)."""
    parts = {}
    for layer in run["layers"]:
        spark_ms = layer["durations_ms"]
        in_batches = spark_ms.get("triggerExecution", 0) / 1000
        parts[layer["query"]] = {"seconds": layer["seconds"], "cpu_s": layer["cpu_s"], "batches": layer["batches"],
                                 "generated_classes": layer["generated_classes"],
                                 "start_and_stop_s": round(layer["seconds"] - in_batches, 3),
                                 **{f"{part}_s": round(ms / 1000, 3) for part, ms in sorted(spark_ms.items())
                                    if part != "triggerExecution"}}
    return parts


def _cpu_s(run: dict[str, Any]) -> float:
    """The CPU seconds a backfill's JVM spent on its queries."""
    return sum(layer["cpu_s"] for layer in run["layers"])


def _per_event_us(cpu_s: float, events: int) -> float | None:
    return round(cpu_s / events * 1e6, 1) if events else None


def generate_block(settings: list[str], block: int, events: int, span_s: float) -> None:
    start = BLOCKS_START + timedelta(seconds=block * span_s)
    try:
        TrafficProcess(settings, "--events", str(events), "--rate", str(events / span_s), "--start-time", start.isoformat(),
                       "--seed", str(1000 + block), "--hot-pages", "0", "--late-fraction", "0.01",
                       "--duplicate-fraction", "0.01", "--malformed-fraction", "0.005").summary()
    except LakehouseError as error:
        raise LakehouseError(f"generating block {block} failed: {error}") from None


def measured_backfill(settings: list[str], progress: Progress, command: str = "run") -> dict[str, Any]:
    with progress.paused():  # the child shows each layer's progress on the same stderr
        # Delta's: in the medallion's runtime whichever interpreter runs the benchmark
        done = subprocess.run(command_in(MEDALLION, "lakehouse.bench.analytical", command, *settings),
                              stdout=subprocess.PIPE, text=True, env=child_env())
    if done.returncode != 0:
        raise LakehouseError(f"a backfill's {command} failed (exit {done.returncode}); its stderr is above")
    return json.loads(done.stdout)


def config_file(settings: list[str]) -> str | None:
    return next((s.removeprefix("--config=") for s in settings if s.startswith("--config=")), None)


def overrides(settings: list[str]) -> list[str]:
    return [s.removeprefix("--set=") for s in settings if s.startswith("--set=")]


def _main() -> int:
    parser = argparse.ArgumentParser(prog="python -m lakehouse.bench.analytical",
                                     description="One measured backfill (used by `lakehouse bench backfill`).")
    parser.add_argument("command", choices=["run", "rebuild", "floor"],
                        help="run: one backfill; rebuild: the streams a rebuild runs, from its bronze; "
                        "floor: their work as a plain batch job")
    parser.add_argument("--config")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    settings = ([f"--config={args.config}"] if args.config else []) + [f"--set={o}" for o in args.overrides]
    measured = run_floor(settings) if args.command == "floor" else run_backfill(settings, args.command == "rebuild")
    print(json.dumps(measured))
    return 0


if __name__ == "__main__":
    die_with_parent()
    sys.exit(_main())
