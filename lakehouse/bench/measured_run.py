"""One measured run of the fast path under load, in a process of its own.

`lakehouse bench` starts `python -m lakehouse.bench.measured_run run --profile P ...` once per
configuration and rate, with fresh topics (LogAppendTime) and a fresh checkpoint, so the
configurations compared start equal; the run prints its figures as one JSON object. The
comparisons built from these runs are in lakehouse/bench/operational.py, capacity.py and recovery.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from shared import spark_internals
from shared.config import Config, load_config, with_overrides
from shared.storage import local_folder
from shared.errors import LakehouseError
from lakehouse.bench.linux_process import cpu_seconds, machine_busy_seconds, process_memory_mb
from lakehouse.path_processes import child_options
from shared.processes import child_env, die_with_parent
from shared.progress import Progress, echo as say_progress
from shared.runtime import FAST_PATH, MEDALLION, command_in

#: The configurations compared, as overrides on top of the project's configuration ("tuned").
PROFILES: dict[str, list[str]] = {
    # The default: Spark 4.3's real-time mode, in the fast path's runtime.
    "real-time": ["operational.mode=real-time"],
    # The micro-batch engine as the project tunes it.
    "tuned": ["operational.mode=micro-batch"],
    # Spark's own defaults: 200 shuffle partitions, the HDFS-backed state store, no trigger interval.
    "spark-defaults": ["operational.mode=micro-batch", "spark.shuffle_partitions=200", "spark.state_store=hdfs",
                       "operational.trigger=0 seconds"],
    # The seed article's: RocksDB, one shuffle partition per core, a 5-second processing-time trigger.
    "seed": ["operational.mode=micro-batch", "spark.state_store=rocksdb",
             f"spark.shuffle_partitions={os.cpu_count() or 2}", "operational.trigger=5 seconds"],
}
_DURATION_PARTS = ("addBatch", "getBatch", "latestOffset", "queryPlanning", "walCommit", "commitOffsets")


# -- one measured run (child process) --------------------------------------------------------


def run_once(config: Config, settings: list[str], rate: float, seconds: float, hot_pages: int,
             measure_latency: bool, sample_every_s: float, drain_timeout_s: float,
             with_medallion: str | None = None, warmup_s: float = 0.0, scrape_every_s: float = 0.0) -> dict[str, Any]:
    """Start the fast path, offer `rate` events/s for `warmup_s` + `seconds`, wait until it drained,
    measure (time-to-alert over the windows that crossed after the warm-up).

    `with_medallion`: the four medallion streams run beside it, started and past their first
    micro-batch before the load begins; "shared": in the same application (FAIR pools);
    "separate": as `lakehouse analytical` in its own process under `nice`, as `lakehouse run` does.
    `scrape_every_s`: the fast path serves its Prometheus endpoint, which a real Prometheus scrapes
    this often (`scraped_endpoint`).
    """
    from operational import hot_pages as fast_path
    from lakehouse.bench.time_to_alert import time_to_alert
    from shared.kafka import consumer_for, ensure_topics
    from shared.spark import spark_session
    from shared.query_progress import ProgressSummary, batch_boundaries, records_behind
    from shared.stopping import stop_between_batches, stop_now

    run_id = f"{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:6]}"
    clicks, alerts = f"bench-{run_id}-clicks", f"bench-{run_id}-alerts"
    root = config.path("bench", run_id)
    config = with_overrides(config, [f"kafka.topics.clicks={clicks}", f"kafka.topics.alerts={alerts}",
                                     f"storage.root={root}"])
    ensure_topics(config.kafka, [clicks, alerts], timestamp_type="LogAppendTime")
    spark = spark_session(config, application="operational")
    jvm_pid = spark_internals.jvm_pid(spark)
    scraping, scrapes = ExitStack(), {}
    if scrape_every_s:
        scrapes = scraping.enter_context(scraped_endpoint(spark, config, scrape_every_s,
                                                          Path(local_folder(root) or tempfile.mkdtemp()) / "prometheus"))
    query = fast_path.start(spark, config)
    if config.operational.mode == "real-time":  # its first batch reports when it ends, a checkpoint interval on
        wait_until(lambda: query.status["isTriggerActive"], 300, "the first real-time batch to start", query)
    else:
        wait_until(lambda: query.lastProgress is not None, 300, "the first micro-batch", query)
    medallion, separate = [], None
    medallion_reports: list[ProgressSummary] = []  # the separate medallion's, of all its streams
    if with_medallion == "shared":
        from analytical import pipeline

        medallion = [start() for start in pipeline.starters(spark, config).values()]
        for stream in medallion:
            wait_until(lambda: stream.lastProgress is not None or stream.exception(), 300, f"{stream.name}'s first batch", query)
    elif with_medallion == "separate":
        from analytical.registry import STREAMS
        from lakehouse.path_processes import MedallionProcess

        separate = MedallionProcess(child_options(config), config.analytical.niceness, relay=lambda line: None,
                                    on_progress=lambda progress: medallion_reports.append(ProgressSummary.of(progress)))
        wait_until(lambda: len(separate.streams_with_progress) == len(STREAMS) or separate.ended, 300,
              "the separate medallion's first batches", query)
        if separate.ended:
            raise RuntimeError(f"the separate medallion process ended: {separate.failed}")

    offsets = consumer_for(config.kafka)
    from kafka import TopicPartition

    partitions = [TopicPartition(clicks, p) for p in sorted(offsets.partitions_for_topic(clicks))]

    def lag() -> int:
        last = query.lastProgress
        return records_behind(ProgressSummary.of(last) if last else None, offsets.end_offsets(partitions), clicks)

    load_started = datetime.now(timezone.utc)
    generator = subprocess.Popen(
        [sys.executable, "-m", "lakehouse.cli", "generate", "--format", "json", "--rate", str(rate), "--seconds", str(warmup_s + seconds),
         "--hot-pages", str(hot_pages), *child_options(config)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=child_env(),
    )
    started = time.monotonic()
    # The cores each part uses over the load: the machine's CPU is what the medallion competes for.
    cpu_parts = {"fast_path": jvm_pid, **({"medallion": separate.pid} if separate is not None else {})}
    cpu_before = {"machine": machine_busy_seconds()} | {part: cpu_seconds(pid) for part, pid in cpu_parts.items()}
    batches: dict[int, ProgressSummary] = {}
    samples: list[dict[str, Any]] = []
    next_sample = started
    # The events the fast path has read, of all the generator sends (exactly rate x its seconds).
    read = Progress("bench fast path", total=round(rate * (warmup_s + seconds)), unit="events")

    def collect() -> None:
        for progress in query.recentProgress:
            if progress["batchId"] not in batches:
                batch = batches[progress["batchId"]] = ProgressSummary.of(progress)
                read.advance(batch.input_rows)

    def caught_up() -> bool:
        collect()
        return lag() == 0

    with read:
        while generator.poll() is None:
            collect()
            if time.monotonic() >= next_sample:
                latest = ProgressSummary.of(query.lastProgress) if query.lastProgress else None
                samples.append({"t_s": round(time.monotonic() - started, 1), "lag": lag(),
                                "state_rows": latest.state_rows if latest else None,
                                # state rows are not counted by default (spark.rocksdb.count_rows): the state's size shows here
                                "state_files_mb": round(sum((op.get("customMetrics") or {}).get("rocksdbSstFileSize", 0)
                                                            for op in latest.operators) / 2**20, 1) if latest else None,
                                "jvm_rss_mb": process_memory_mb(jvm_pid),
                                **{f"jvm_{part}_mb": mb for part, mb in spark_internals.jvm_memory_mb(spark).items()}})
                next_sample += sample_every_s
            if query.exception():
                raise RuntimeError(f"the fast path failed: {query.exception()}")
            time.sleep(0.2)
        load_s = time.monotonic() - started
        cpu_after = {"machine": machine_busy_seconds()} | {part: cpu_seconds(pid) for part, pid in cpu_parts.items()}
        generated = json.loads(generator.stdout.read())
        cores = cores_used(cpu_before, cpu_after, load_s, generated["cpu_share"])
        drain_started = time.monotonic()
        load_ended = datetime.now(timezone.utc)
        # A real-time batch reports its progress when it ends, a checkpoint interval at most from now.
        # A batch's alerts are on the topic when it reports: caught up, every alert has left.
        wait_until(caught_up, drain_timeout_s, "the fast path to catch up", query)
        drain_s = time.monotonic() - drain_started
        collect()
    gold: dict[str, Any] = {}
    if separate is not None:  # gold catches up with the load's last clicks, or the wait ends
        from lakehouse.bench.freshness import GOLD_CATCH_UP_WAIT, LAST_CLICKS, caught_up_at, gold_freshness

        last_clicks = load_ended - LAST_CLICKS
        say_progress(f"bench: waiting up to {GOLD_CATCH_UP_WAIT.total_seconds():g} s for gold to hold the load's last clicks")
        deadline = time.monotonic() + GOLD_CATCH_UP_WAIT.total_seconds()
        while caught_up_at(list(medallion_reports), last_clicks) is None and time.monotonic() < deadline \
                and not separate.ended:
            time.sleep(0.5)
        reports = list(medallion_reports)
        gold = {"gold_freshness": gold_freshness(reports, load_started + timedelta(seconds=warmup_s), load_ended,
                                                 caught_up_at(reports, last_clicks))}
    # Stopped between micro-batches, where Spark has nothing to abort and log at ERROR; a real-time
    # query is always mid-batch, and is stopped at once with Spark's logs held quiet (a benchmark's
    # topics are its own: what a restart would replay does not matter).
    stop_between_batches(medallion)
    if separate is not None:
        separate.stop()
    (stop_now if config.operational.mode == "real-time" else stop_between_batches)([query])
    offsets.close()
    scraping.close()

    data = [p for _, p in sorted(batches.items()) if p.input_rows > 0]
    durations = [p.duration_ms for p in data]
    result: dict[str, Any] = {
        **delivery(rate, generated),
        "input_rate": round(sum(p.input_rows for p in data) / max(1e-9, sum(d / 1000 for d in durations)), 1)
        if durations else 0.0,
        "batches": len(data),
        "batch_ms_p50": statistics.median(durations) if durations else None,
        "batch_ms_max": max(durations) if durations else None,
        "duration_ms_p50": {part: statistics.median(p.durations_ms.get(part, 0) for p in data)
                            for part in _DURATION_PARTS} if data else {},
        "drain_s": round(drain_s, 1),
        "mode": config.operational.mode,
        "batch_ends": [batch_end(p) for p in data] if config.operational.mode == "real-time" else [],
        "cores_during_load": cores,
        "samples": samples,
        **scrapes,
        **gold,
    }
    if measure_latency:
        measured_from = load_started + timedelta(seconds=warmup_s)
        result |= time_to_alert(spark, config, measured_from)
        if config.operational.mode == "real-time":
            result["batch_boundaries"] = batch_boundaries(batches.values(), measured_from, load_ended)
    if local_folder(root) is not None:
        shutil.rmtree(local_folder(root), ignore_errors=True)
    return result


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


def batch_end(summary: Any) -> dict[str, Any]:
    """What a real-time batch's end cost, from its progress (a shared.query_progress.ProgressSummary):
    when it started, its length and its parts, and per state operator the rows it evicted and the time
    that took, against the rows it holds, with Spark's custom metrics as reported."""
    return {"batch": summary.batch_id, "input_rows": summary.input_rows,
            "started_at": summary.started_at.isoformat() if summary.started_at else None,
            "trigger_ms": summary.duration_ms, "planning_ms": summary.durations_ms.get("queryPlanning"),
            "durations_ms": summary.durations_ms,
            "operators": [{"name": op.get("operatorName"), "rows": op.get("numRowsTotal"),
                           "removed": op.get("numRowsRemoved"), "removal_ms": op.get("allRemovalsTimeMs"),
                           "update_ms": op.get("allUpdatesTimeMs"), "commit_ms": op.get("commitTimeMs"),
                           "removed_during_batch": (op.get("customMetrics") or {}).get("numRowsIncrementallyRemoved"),
                           "read_for_eviction": (op.get("customMetrics") or {}).get("numRowsReadDuringEviction"),
                           "custom_metrics": op.get("customMetrics") or {}}
                          for op in summary.operators]}


def cores_used(before: dict[str, float], after: dict[str, float], seconds: float,
               generator_share: float) -> dict[str, float]:
    """Cores each part used over `seconds`, from CPU seconds read before and after (the machine's
    busy time and each part's process tree) and the generator's own share of a core; `rest` is the
    machine's busy time no part accounts for: the broker, this process, anything else on the machine.

        cores_used({"machine": 0, "fast_path": 0}, {"machine": 150, "fast_path": 80}, 100, 0.2)
        == {"machine": 1.5, "fast_path": 0.8, "generator": 0.2, "rest": 0.5}
    """
    cores = {part: round((after[part] - before[part]) / seconds, 2) for part in before}
    cores["generator"] = round(generator_share, 2)
    cores["rest"] = round(cores["machine"] - sum(used for part, used in cores.items() if part != "machine"), 2)
    return cores


#: A run is valid only when the traffic delivered at least this share of the offered rate.
DELIVERED_SHARE = 0.95


def delivery(offered: float, generated: dict[str, Any]) -> dict[str, Any]:
    """What the traffic really did: offered and delivered rates (records acknowledged by the broker
    over the sending time), the generator's CPU share (of one core), and whether the run is valid."""
    delivered = generated["achieved_rate"]
    return {"offered_rate": offered, "delivered_rate": delivered, "generator_cpu_share": generated["cpu_share"],
            "valid": delivered >= DELIVERED_SHARE * offered}


def wait_until(condition, timeout_s: float, what: str, query=None) -> None:
    """Poll `condition` until it holds; a LakehouseError after `timeout_s`, or as soon as `query`
    (a StreamingQuery in this process, when given) has failed."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if query is not None and query.exception():
            raise LakehouseError(f"the fast path failed while waiting for {what}: {query.exception()}")
        if time.monotonic() > deadline:
            raise LakehouseError(f"gave up after {timeout_s:g} s waiting for {what}")
        time.sleep(0.1)


# -- the commands (parent process) ------------------------------------------------------------


#: Seconds of load before time-to-alert is measured: the JVM compiles the query's code meanwhile.
WARMUP_S = 10.0
#: Batch ends a start pays once, kept out of the steady state in real-time mode: the first commit of
#: a new checkpoint creates the state store's column families, and Spark snapshots the state there;
#: the second batch still plans with code the JVM has not compiled yet. Their windows are reported
#: apart, as `warmup` (operational/README.md, where it describes how each run is measured).
STARTUP_BATCH_ENDS = 2


def warmup_s(config: Config) -> float:
    """Seconds of load left out of time-to-alert for a run of `config`: WARMUP_S, and in real-time
    mode also the start's first STARTUP_BATCH_ENDS batch ends (a checkpoint interval each)."""
    if config.operational.mode != "real-time":
        return WARMUP_S
    return WARMUP_S + STARTUP_BATCH_ENDS * config.operational.real_time.checkpoint_interval.total_seconds()


def profile_config(profile: str, settings: list[str]) -> Config:
    """The configuration a run of `profile` gets from `settings` (--config=FILE, --set=KEY=VALUE)."""
    files = [item.split("=", 1)[1] for item in settings if item.startswith("--config=")]
    overrides = [item.split("=", 1)[1] for item in settings if item.startswith("--set=")]
    return load_config(files[-1] if files else None, [*overrides, *PROFILES[profile]])


def measured_run(profile: str, settings: list[str], rate: float, seconds: float, hot_pages: int,
           latency: bool, sample_every_s: float = 1.0, drain_timeout_s: float = 600,
           with_medallion: str | None = None, scrape_every_s: float = 0.0) -> dict[str, Any]:
    config = profile_config(profile, settings)
    runtime = FAST_PATH if config.operational.mode == "real-time" else MEDALLION
    warmup = warmup_s(config) if latency else 0.0
    command = command_in(runtime, "lakehouse.bench.measured_run", "run", "--profile", profile, "--rate", str(rate),
                         "--seconds", str(seconds), "--hot-pages", str(hot_pages), "--sample-every", str(sample_every_s),
                         "--drain-timeout", str(drain_timeout_s), "--warmup", str(warmup), *settings)
    if latency:
        command.append("--latency")
    if with_medallion:
        command.append(f"--with-medallion={with_medallion}")
        profile = f"{profile} with the medallion ({with_medallion} application)"
    if scrape_every_s:
        command.append(f"--scrape-every={scrape_every_s}")
        profile = f"{profile} with its Prometheus endpoint scraped every {scrape_every_s:g} s"
    say_progress(f"bench: {profile} at {rate:,.0f} events/s for {seconds:g} s"
              + (f" after {warmup:g} s of warm-up ..." if latency else " ..."))
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=child_env())
    if done.returncode != 0:
        raise LakehouseError(f"the {profile} run failed (exit {done.returncode}); its stderr is above")
    return json.loads(done.stdout)


def _main() -> int:
    parser = argparse.ArgumentParser(prog="python -m lakehouse.bench.measured_run",
                                     description="One measured run of the fast path (used by `lakehouse bench`).")
    parser.add_argument("command", choices=["run"])
    parser.add_argument("--profile", choices=list(PROFILES), required=True)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--hot-pages", type=int, required=True)
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--with-medallion", choices=["shared", "separate"])
    parser.add_argument("--sample-every", type=float, default=1.0)
    parser.add_argument("--drain-timeout", type=float, default=600)
    parser.add_argument("--warmup", type=float, default=0.0)
    parser.add_argument("--scrape-every", type=float, default=0.0)
    parser.add_argument("--config")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    settings = ([f"--config={args.config}"] if args.config else []) + [f"--set={o}" for o in args.overrides]
    config = load_config(args.config, [*args.overrides, *PROFILES[args.profile]])
    try:
        result = run_once(config, settings, args.rate, args.seconds, args.hot_pages, args.latency,
                          args.sample_every, args.drain_timeout, args.with_medallion, args.warmup,
                          args.scrape_every)
    except LakehouseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    die_with_parent()
    sys.exit(_main())
