"""`lakehouse bench forget`: one user erased from a lake of many events while both paths run under load.

A lake of its own (a clicks topic and a storage root) receives `events` generated clicks and is backfilled.
Then one measured run (lakehouse/bench/measured_run.py) starts the fast path and the medallion on that lake
as `lakehouse run` does, offers `rate` events/s, and `baseline_s` seconds into the measured load runs
`lakehouse forget` for a user of the lake; the load goes on `after_s` seconds more (the run waits for a
forget that outlasts it). The report: the backfill, the forget's seconds and rows, and the
fast path's time to alert over the windows that crossed before the forget and while it ran, with their p99s'
ratio. The two spans share one JVM, one lake and one load, so the ratio isolates the erasure's cost.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from contextlib import closing
from typing import Any

from lakehouse.bench.analytical import config_file, measured_backfill, overrides
from lakehouse.bench.measured_run import measured_run, profile_config, warmup_s
from lakehouse.path_processes import TrafficProcess, child_options
from shared.config_loading import load_config, with_overrides
from shared.errors import LakehouseError
from shared.kafka import consumer_for, ensure_topics
from shared.progress import Progress, echo as say_progress
from shared.storage import local_folder

#: The targets the erasure is held to: the forget's seconds, and the fast path's p99 time to alert while it
#: runs over the p99 before it.
FORGET_TARGET_S = 120.0
P99_RATIO_TARGET = 1.2
#: Clicks sent after the backfill, which the medallion's streams read first when the measured run starts them.
FIRST_BATCH_EVENTS = 100


def forget_benchmark(settings: list[str], events: int, rate: float, baseline_s: float, after_s: float,
                     hot_pages: int, profile: str) -> dict[str, Any]:
    base = load_config(config_file(settings), overrides(settings))
    run_id = f"{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:6]}"
    topic = f"bench-forget-{run_id}-clicks"
    lake = with_overrides(base, [f"kafka.topics.clicks={topic}", f"storage.root={base.path('bench', 'forget-' + run_id)}"])
    options = child_options(lake)
    ensure_topics(lake.kafka, [topic], timestamp_type="LogAppendTime")  # the measured run's time to alert reads it
    with Progress("bench forget", total=3, unit="steps") as progress:
        say_progress(f"bench: generating a lake of {events:,} events")
        sent = TrafficProcess(options, "--events", str(events), "--seed", "7", "--hot-pages", "0").summary()
        progress.advance(detail=f"{sent['sent']:,} events sent")
        user = first_user(lake, topic)
        say_progress("bench: backfilling the lake")
        backfill = measured_backfill(options, progress)
        progress.advance(detail="lake backfilled")
        # A few clicks more, for the medallion beside the load to start with: the run begins its load once
        # each of the medallion's streams has reported a batch, and a caught-up stream runs none.
        TrafficProcess(options, "--events", str(FIRST_BATCH_EVENTS), "--seed", "8", "--hot-pages", "0").summary()
        warmup = warmup_s(profile_config(profile, options))
        with progress.paused():
            run = measured_run(profile, options, rate, baseline_s + after_s, hot_pages, latency=True,
                               with_medallion="separate", lake=True, forget=(user, warmup + baseline_s))
        progress.advance(detail="forget measured under load")
    if local_folder(lake.storage.root) is not None:
        shutil.rmtree(local_folder(lake.storage.root), ignore_errors=True)
    forget = run.pop("forget")
    if forget["failed"]:
        raise LakehouseError(f"lakehouse forget failed beside the load: {forget['failed']}")
    spans = run.pop("time_to_alert_spans")
    before, during = spans["before_forget"]["p99_ms"], spans["during_forget"]["p99_ms"]
    ratio = round(during / before, 3) if before and during is not None else None
    return {
        "lake": {"events": events, "topic": topic, "backfill_s": backfill["seconds"],
                 "bronze_rows": next(layer["rows"] for layer in backfill["layers"] if layer["query"] == "medallion")},
        "forget": forget,
        "time_to_alert": spans,
        "summary": {"forget_s": forget["seconds"], "forget_target_s": FORGET_TARGET_S,
                    "p99_ms_before": before, "p99_ms_during": during, "p99_ratio": ratio,
                    "p99_ratio_target": P99_RATIO_TARGET,
                    "met": forget["seconds"] <= FORGET_TARGET_S and ratio is not None and ratio <= P99_RATIO_TARGET,
                    "missed_windows": sum(span["missed_windows"] for span in spans.values())},
        "run": {key: value for key, value in run.items() if key not in ("samples", "batch_ends", "batch_boundaries")},
    }


def first_user(config, topic: str) -> str:
    """The userId of the first click on `topic` that names one: a user the lake holds."""
    with closing(consumer_for(config.kafka, topic, consumer_timeout_ms=10_000)) as consumer:
        for record in consumer:
            try:
                user = json.loads(record.value).get("userId")
            except (ValueError, AttributeError):
                continue
            if isinstance(user, str) and user:
                return user
    raise LakehouseError(f"no click on {topic} names a user")
