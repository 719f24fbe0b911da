"""One measured run of the fast path under load, in a process of its own.

`lakehouse bench` starts `python -m lakehouse.bench.measured_run run --profile P ...` once per
configuration and rate, with fresh topics (LogAppendTime) and a fresh checkpoint, so the
configurations compared start equal; the run prints its figures as one JSON object. The
comparisons built from these runs are in lakehouse/bench/operational.py, delivery.py, capacity.py and recovery.py.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from shared.config import Config
from shared.config_loading import load_config, with_overrides
from shared.storage import local_folder
from shared.errors import LakehouseError
from lakehouse.bench.forget_during_load import ForgetDuringLoad
from lakehouse.bench.notify_during_load import NotifyDuringLoad
from lakehouse.bench.scraped_endpoint import scraped_endpoint
from lakehouse.bench.under_load import Load, wait_until
from lakehouse.path_processes import child_options
from shared.processes import child_env, die_with_parent
from shared.progress import echo as say_progress
from operational.mode import fast_path_mode
from shared.runtime import command_in

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


#: How long a run waits, after its load, for a `forget` started during it.
FORGET_WAIT_S = 600.0


# -- one measured run (child process) --------------------------------------------------------


def run_once(config: Config, settings: list[str], rate: float, seconds: float, hot_pages: int,
             measure_latency: bool, sample_every_s: float, drain_timeout_s: float,
             with_medallion: str | None = None, warmup_s: float = 0.0, scrape_every_s: float = 0.0,
             lake: bool = False, forget: ForgetDuringLoad | None = None,
             notify: NotifyDuringLoad | None = None, hot_stagger: bool = False) -> dict[str, Any]:
    """Start the fast path, offer `rate` events/s for `warmup_s` + `seconds`, wait until it drained,
    measure (time-to-alert over the windows that crossed after the warm-up).

    `with_medallion`: the four medallion streams run beside it, started and past their first
    micro-batch before the load begins; "shared": in the same application (FAIR pools);
    "separate": as `lakehouse run` runs it (lakehouse.both_paths), in its own process under `nice`.
    `scrape_every_s`: the fast path serves its Prometheus endpoint, which a real Prometheus scrapes
    this often (`scraped_endpoint`).
    `lake`: the load goes to the configured clicks topic and the run to the configured storage root, kept
    after it (a lake the medallion beside goes on writing), instead of fresh ones.
    `forget`: a `lakehouse forget` started during the load, which the run waits for; time-to-alert is then
    also given before it and while it ran.
    `notify`: Alertmanager and the bridge beside the fast path, from before the load until every window the
    load alerted has reached Alertmanager's receiver; their figures under "notify".
    `hot_stagger`: the hot pages cross at instants spread over the window (`lakehouse generate --hot-stagger`).
    """
    from operational import hot_pages as fast_path
    from lakehouse.bench.notify_during_load import SETTLE_S
    from lakehouse.bench.time_to_alert import (first_appends_per_count, from_nearest, time_to_alert,
                                               time_to_alert_in_spans, window_latencies)
    from shared.kafka import ensure_topics
    from shared.spark import spark_session
    from shared.query_progress import batch_boundaries

    run_id = f"{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:6]}"
    alerts = f"bench-{run_id}-alerts"
    clicks, root = ((config.kafka.topics.clicks, config.storage.root) if lake
                    else (f"bench-{run_id}-clicks", config.path("bench", run_id)))
    config = with_overrides(config, [f"kafka.topics.clicks={clicks}", f"kafka.topics.alerts={alerts}",
                                     f"storage.root={root}"])
    ensure_topics(config.kafka, [clicks, alerts], timestamp_type="LogAppendTime")
    mode = fast_path_mode(config)
    spark = spark_session(config, application="operational", application_settings=mode.session_settings)
    with ExitStack() as scraping:
        scrapes = scraping.enter_context(scraped_endpoint(
            spark, config, scrape_every_s, Path(local_folder(root) or tempfile.mkdtemp()) / "prometheus")) \
            if scrape_every_s else {}
        query = fast_path.start(spark, config)
        if mode.real_time:  # its first batch reports when it ends, a checkpoint interval on
            wait_until(lambda: query.status["isTriggerActive"], 300, "the first real-time batch to start", query)
        else:
            wait_until(lambda: query.lastProgress is not None, 300, "the first micro-batch", query)
        with _medallion_beside(spark, config, with_medallion, query) as medallion, \
                (notify.beside(config, Path(local_folder(root) or tempfile.mkdtemp()) / "alertmanager")
                 if notify else nullcontext()):
            if forget is not None:
                forget.start(config)
            load = Load.offered(spark, config, query, medallion.process.pid if medallion.process else None, rate, warmup_s + seconds, hot_pages, sample_every_s,
                                 drain_timeout_s, hot_stagger)
            if forget is not None:
                forget.wait(FORGET_WAIT_S)
            gold = _gold_freshness(medallion, load, warmup_s) if medallion.process is not None else {}
            if notify is not None:
                appended = first_appends_per_count(spark, config)
                say_progress(f"bench: waiting up to {SETTLE_S:g} s for every alerted window to reach Alertmanager's receiver")
                notify.settle({(page, start) for page, start, _ in appended})
                result_notify = notify.figures(appended, load.started_at + timedelta(seconds=warmup_s))
        # Stopped between micro-batches, where Spark has nothing to abort and log at ERROR; a real-time
        # query is always mid-batch, and is stopped at once with Spark's logs held quiet (a benchmark's
        # topics are its own: what a restart would replay does not matter).
        mode.stop([query])
    result = {**load.figures(rate, mode), **scrapes, **gold}
    if measure_latency:
        measured_from = load.started_at + timedelta(seconds=warmup_s)
        windows = window_latencies(spark, config).collect()
        result |= time_to_alert(spark, config, measured_from, windows)
        if mode.real_time:
            result["batch_boundaries"] = batch_boundaries(load.batches.values(), measured_from, load.ended_at)
            ends = [summary.ended_at for summary in load.batches.values() if summary.ended_at is not None]
            for window in result["slowest_windows"]:
                window["from_batch_end_ms"] = from_nearest(datetime.fromisoformat(window["crossedAt"]), ends)
        if notify is not None and notify.interleave_s:
            result["interleaved"] = time_to_alert_in_spans(windows, notify.interleaved_spans(), keep_latencies=True)
            result["interleaved_blocks"] = [{"start": start.isoformat(), "seconds": round((end - start).total_seconds(), 1),
                                             "with_bridge": running} for start, end, running in notify.blocks]
        if forget is not None and forget.started_at is not None:
            result["time_to_alert_spans"] = time_to_alert_in_spans(windows, {
                "before_forget": [(measured_from, forget.started_at)],
                "during_forget": [(forget.started_at, forget.ended_at or load.ended_at)]})
    if forget is not None:
        result["forget"] = forget.figures()
    if notify is not None:
        result["notify"] = result_notify
    if local_folder(root) is not None and not lake:
        shutil.rmtree(local_folder(root), ignore_errors=True)
    return result


@dataclass
class _Beside:
    """The medallion beside the measured fast path: its queries in this application ("shared"), or its
    process ("separate") and that process's progress reports."""

    queries: list[Any] = field(default_factory=list)
    process: Any = None
    reports: list[Any] = field(default_factory=list)


@contextmanager
def _medallion_beside(spark: Any, config: Config, with_medallion: str | None, query: Any) -> Iterator[_Beside]:
    """The medallion started as `with_medallion` says (run_once), past its first batches; stopped
    between its batches when the block ends."""
    from shared.query_progress import ProgressSummary
    from shared.stopping import stop_at_batch_end

    beside = _Beside()
    if with_medallion == "shared":
        from analytical import pipeline

        beside.queries = [start() for start in pipeline.starters(spark, config).values()]
        try:
            for stream in beside.queries:
                wait_until(lambda: stream.lastProgress is not None or stream.exception(), 300,
                           f"{stream.name}'s first batch", query)
            yield beside
        finally:
            stop_at_batch_end(beside.queries)
    elif with_medallion == "separate":
        from analytical.registry import running
        from lakehouse.both_paths import BothPaths

        # Its stderr passed on, so that a medallion ending mid-run shows why beside the bench's progress.
        paths = BothPaths(config, child_options(config), relay=lambda line: say_progress(f"medallion: {line}"))
        with paths.started(on_progress=lambda progress: beside.reports.append(ProgressSummary.of(progress))):
            beside.process = paths.medallion
            wait_until(lambda: len(beside.process.streams_with_progress) == len(running(config)) or beside.process.ended, 300,
                       "the separate medallion's first batches", query)
            if beside.process.ended:
                raise RuntimeError(f"the separate medallion process ended: {beside.process.failed}")
            yield beside
    else:
        yield beside


def _gold_freshness(medallion: _Beside, load: Load, warmup_s: float) -> dict[str, Any]:
    """Gold's freshness over the load (lakehouse.bench.freshness), once gold holds the load's last
    clicks or the wait for it ends."""
    from lakehouse.bench.freshness import GOLD_CATCH_UP_WAIT, LAST_CLICKS, caught_up_at, gold_freshness

    last_clicks = load.ended_at - LAST_CLICKS
    say_progress(f"bench: waiting up to {GOLD_CATCH_UP_WAIT.total_seconds():g} s for gold to hold the load's last clicks")
    deadline = time.monotonic() + GOLD_CATCH_UP_WAIT.total_seconds()
    while caught_up_at(list(medallion.reports), last_clicks) is None and time.monotonic() < deadline \
            and not medallion.process.ended:
        time.sleep(0.5)
    reports = list(medallion.reports)
    return {"gold_freshness": gold_freshness(reports, load.started_at + timedelta(seconds=warmup_s), load.ended_at,
                                             caught_up_at(reports, last_clicks))}


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
    if not fast_path_mode(config).real_time:
        return WARMUP_S
    return WARMUP_S + STARTUP_BATCH_ENDS * config.operational.real_time.checkpoint_interval.total_seconds()


def profile_config(profile: str, settings: list[str]) -> Config:
    """The configuration a run of `profile` gets from `settings` (--config=FILE, --set=KEY=VALUE)."""
    files = [item.split("=", 1)[1] for item in settings if item.startswith("--config=")]
    overrides = [item.split("=", 1)[1] for item in settings if item.startswith("--set=")]
    return load_config(files[-1] if files else None, [*overrides, *PROFILES[profile]])


def measured_run(profile: str, settings: list[str], rate: float, seconds: float, hot_pages: int,
           latency: bool, sample_every_s: float = 1.0, drain_timeout_s: float = 600,
           with_medallion: str | None = None, scrape_every_s: float = 0.0, lake: bool = False,
           forget: tuple[str, float] | None = None, notify: tuple[int, float, float] | None = None,
           keep_latencies: bool = False, hot_stagger: bool = False, interleave_s: float = 0.0) -> dict[str, Any]:
    """One run of `run_once` in a process of its own, in the runtime of `profile`'s fast path; `forget`:
    (user, seconds after the load began); `notify`: Alertmanager and the bridge beside it, with (kills of the
    bridge, seconds of Alertmanager outage, seconds into the load it begins). `keep_latencies`: each window's
    time to alert (and each delivery's) stays in the result, as `latencies_ms`, for runs pooled later.
    `hot_stagger`: as run_once's. `interleave_s`: with `notify`, the bridge and Alertmanager paused and resumed in
    blocks of that many seconds after the warm-up (NotifyDuringLoad), each block's time-to-alert under "interleaved"."""
    config = profile_config(profile, settings)
    runtime = fast_path_mode(config).runtime
    warmup = warmup_s(config) if latency else 0.0
    command = command_in(runtime, "lakehouse.bench.measured_run", "run", "--profile", profile, "--rate", str(rate),
                         "--seconds", str(seconds), "--hot-pages", str(hot_pages), "--sample-every", str(sample_every_s),
                         "--drain-timeout", str(drain_timeout_s), "--warmup", str(warmup), *settings)
    if latency:
        command.append("--latency")
    if hot_stagger:
        command.append("--hot-stagger")
    if with_medallion:
        command.append(f"--with-medallion={with_medallion}")
        profile = f"{profile} with the medallion ({with_medallion} application)"
    if lake:
        command.append("--lake")
    if forget:
        command += [f"--forget-user={forget[0]}", f"--forget-after={forget[1]}"]
        profile = f"{profile} with lakehouse forget after {forget[1]:g} s"
    if notify:
        command += ["--notify", f"--bridge-kills={notify[0]}", f"--outage={notify[1]}", f"--outage-after={notify[2]}",
                    f"--interleave={interleave_s}"]
        faults = [f"{notify[0]} kill -9 of the bridge"] * bool(notify[0]) + \
                 [f"Alertmanager down {notify[1]:g} s"] * bool(notify[1])
        faults += [f"paused and resumed in blocks of {interleave_s:g} s"] * bool(interleave_s)
        profile = f"{profile} with the bridge to Alertmanager" + (f" ({', '.join(faults)})" if faults else "")
    if scrape_every_s:
        command.append(f"--scrape-every={scrape_every_s}")
        profile = f"{profile} with its Prometheus endpoint scraped every {scrape_every_s:g} s"
    say_progress(f"bench: {profile} at {rate:,.0f} events/s for {seconds:g} s"
              + (f" after {warmup:g} s of warm-up ..." if latency else " ..."))
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=child_env())
    if done.returncode != 0:
        raise LakehouseError(f"the {profile} run failed (exit {done.returncode}); its stderr is above")
    result = json.loads(done.stdout)
    if not keep_latencies:
        for figures in (result, result.get("notify") or {}):
            figures.pop("latencies_ms", None)
    return result


def _main() -> int:
    parser = argparse.ArgumentParser(prog="python -m lakehouse.bench.measured_run",
                                     description="One measured run of the fast path (used by `lakehouse bench`).")
    parser.add_argument("command", choices=["run"])
    parser.add_argument("--profile", choices=list(PROFILES), required=True)
    parser.add_argument("--rate", type=float, required=True)
    parser.add_argument("--seconds", type=float, required=True)
    parser.add_argument("--hot-pages", type=int, required=True)
    parser.add_argument("--latency", action="store_true")
    parser.add_argument("--hot-stagger", action="store_true")
    parser.add_argument("--with-medallion", choices=["shared", "separate"])
    parser.add_argument("--sample-every", type=float, default=1.0)
    parser.add_argument("--drain-timeout", type=float, default=600)
    parser.add_argument("--warmup", type=float, default=0.0)
    parser.add_argument("--scrape-every", type=float, default=0.0)
    parser.add_argument("--lake", action="store_true")
    parser.add_argument("--forget-user")
    parser.add_argument("--forget-after", type=float, default=0.0)
    parser.add_argument("--notify", action="store_true")
    parser.add_argument("--bridge-kills", type=int, default=0)
    parser.add_argument("--outage", type=float, default=0.0)
    parser.add_argument("--outage-after", type=float, default=0.0)
    parser.add_argument("--interleave", type=float, default=0.0)
    parser.add_argument("--config")
    parser.add_argument("--set", action="append", default=[], dest="overrides")
    args = parser.parse_args()
    settings = ([f"--config={args.config}"] if args.config else []) + [f"--set={o}" for o in args.overrides]
    config = load_config(args.config, [*args.overrides, *PROFILES[args.profile]])
    try:
        result = run_once(config, settings, args.rate, args.seconds, args.hot_pages, args.latency,
                          args.sample_every, args.drain_timeout, args.with_medallion, args.warmup,
                          args.scrape_every, args.lake,
                          ForgetDuringLoad(args.forget_user, args.forget_after) if args.forget_user else None,
                          NotifyDuringLoad(args.warmup + args.seconds, args.bridge_kills, args.outage, args.outage_after,
                                           args.interleave, interleave_from_s=args.warmup)
                          if args.notify else None, args.hot_stagger)
    except LakehouseError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    die_with_parent()
    sys.exit(_main())
