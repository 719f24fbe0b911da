"""`lakehouse bench recovery`: what a crash of the fast path costs, measured under load.

The fast path (`lakehouse operational`, in its mode's runtime) runs on fresh topics under generated
traffic; `--kill-after` seconds into the load it is killed with SIGKILL (its Spark JVM dies with it)
and started again at once. The restarted query replays from its last committed offsets (in
real-time mode, up to one checkpoint interval of clicks) and writes the alert records of what it
replays again, with the same alertIds. Measured from the topics afterwards (time-to-alert as
CONTRACT.md defines it, lakehouse/bench/time_to_alert.py):

- `recovery_s`: from the restart to the first alert of a window that crossed after the restart;
- `first_alert_after_restart_s`: from the restart to the first alert record of any window;
- `replayed_records`: clicks read twice (the topic's end at the kill, less where the restarted
  query began), and `killed_s_after_commit`: how long before the kill the last batch had ended;
- `alert_records_written_twice`: records with the same alertId and clickCount on the topic twice;
- `missed_windows`, and time-to-alert for the windows that crossed in the first minute after the
  restart and for those after it.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import Any

from lakehouse.bench.measured_run import profile_config
from lakehouse.bench.under_load import delivery, wait_until
from shared.progress import echo as say_progress
from shared.config import Config
from shared.config_loading import with_overrides
from shared.errors import LakehouseError
from lakehouse.path_processes import PathProcess, TrafficProcess, child_options
from shared.query_progress import ProgressSummary, records_behind
from operational.mode import fast_path_mode
from shared.runtime import command_in

#: Windows that crossed this long after the restart are "after the first minute".
SETTLED_S = 60.0


def recovery(settings: list[str], profile: str, rate: float, seconds: float, kill_after_s: float,
             hot_pages: int, drain_timeout_s: float = 300) -> dict[str, Any]:
    """Run the fast path of `profile` under `rate` events/s for `seconds`, kill -9 it `kill_after_s`
    into the load, start it again at once, and measure the recovery from the topics."""
    from kafka import TopicPartition

    from shared.kafka import consumer_for, ensure_topics

    run_id = f"{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:6]}"
    clicks, alerts = f"recovery-{run_id}-clicks", f"recovery-{run_id}-alerts"
    base = profile_config(profile, settings)
    per_run = [f"kafka.topics.clicks={clicks}", f"kafka.topics.alerts={alerts}",
               f"storage.root={base.path('bench', run_id)}", "operational.starting_offsets=earliest"]
    config = with_overrides(base, per_run)
    ensure_topics(config.kafka, [clicks, alerts], timestamp_type="LogAppendTime")
    command = command_in(fast_path_mode(config).runtime, "lakehouse.cli", "operational", "--progress-json", *child_options(config))
    reports: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], [])
    said_while_restarting: list[tuple[datetime, str]] = []  # what the restarted process said, with when

    def fast_path(run: int) -> PathProcess:
        def relay(line: str) -> None:
            if run == 1 and not _query_started(said_while_restarting):
                said_while_restarting.append((datetime.now(timezone.utc), line))

        return PathProcess(command, relay=relay, on_progress=reports[run].append)

    offsets = consumer_for(config.kafka)
    partitions = [TopicPartition(clicks, p) for p in sorted(offsets.partitions_for_topic(clicks))]
    say_progress(f"bench recovery: {profile} at {rate:,.0f} events/s for {seconds:g} s, kill -9 after {kill_after_s:g} s")
    first = fast_path(0)
    generator = TrafficProcess(child_options(config), "--rate", str(rate), "--seconds", str(seconds),
                               "--hot-pages", str(hot_pages))
    load_started = time.monotonic()
    second = None
    try:
        wait_until(lambda: time.monotonic() - load_started >= kill_after_s or first.ended, kill_after_s + 5, "the kill")
        if first.ended:
            raise LakehouseError(f"the fast path ended before the kill: {first.failed}")
        end_at_kill = offsets.end_offsets(partitions)
        first.crash()
        restarted_at = datetime.now(timezone.utc)
        second = fast_path(1)
        say_progress(f"bench recovery: killed after {kill_after_s:g} s of load ({len(reports[0])} batches had "
                     "ended), started again at once")
        generated = generator.summary()
        wait_until(lambda: second.ended or records_behind(ProgressSummary.of(reports[1][-1]) if reports[1] else None,
                                                          offsets.end_offsets(partitions), clicks) == 0,
                   drain_timeout_s, "the restarted fast path to catch up")
        if second.ended:
            raise LakehouseError(f"the restarted fast path ended: {second.failed}")
    finally:
        generator.kill()
        for run in (first, second):
            if run is not None:
                run.stop()
    offsets.close()
    began = (reports[1][0]["sources"][0].get("startOffset") or {}).get(clicks) or {}
    last_commit = ProgressSummary.of(reports[0][-1]).ended_at if reports[0] else None
    return {"config": profile, "mode": fast_path_mode(config).name, "rate": rate, "seconds": seconds,
            "kill_after_s": kill_after_s, **delivery(rate, generated),
            "checkpoint_interval_s": config.operational.real_time.checkpoint_interval.total_seconds(),
            "killed_s_after_commit": round((restarted_at - last_commit).total_seconds(), 1) if last_commit else None,
            "replayed_records": sum(max(0, end_at_kill[tp] - int(began.get(str(tp.partition), 0))) for tp in partitions),
            "alert_records_written_twice": _written_twice(config, alerts),
            "restart": _restart_timeline(restarted_at, reports[1], said_while_restarting),
            **_from_the_topics(config, restarted_at)}


def _query_started(said: list[tuple[datetime, str]]) -> datetime | None:
    """When the process said its query started, if it has."""
    return next((moment for moment, line in said if "] started (query id" in line), None)


def _restart_timeline(restarted_at: datetime, reports: list[dict[str, Any]],
                      said: list[tuple[datetime, str]]) -> dict[str, Any]:
    """Where a restart's time goes before its first batch reads: the process, its JVM and session up
    to the query's start (`query_started_s`, with what the process said meanwhile and when), then the
    first batch's own parts (its progress report)."""
    first = ProgressSummary.of(reports[0]) if reports else None

    def since(moment: datetime | None) -> float | None:
        return round((moment - restarted_at).total_seconds(), 3) if moment else None

    return {"query_started_s": since(_query_started(said)),
            "said": [f"{since(moment):.1f} s: {line}" for moment, line in said],
            "first_batch_started_s": since(first.started_at) if first else None,
            "first_batch_ms": {part: first.durations_ms.get(part) for part in ("queryPlanning", "latestOffset", "walCommit")}
            | {"state_load": sum((op.get("customMetrics") or {}).get("rocksdbLoadLatencyMs", 0) for op in first.operators)}
            if first else None}


def _from_the_topics(config: Config, restarted_at: datetime) -> dict[str, Any]:
    from lakehouse.bench.time_to_alert import naive_local, percentiles, window_latencies
    from shared.spark import spark_session

    windows = window_latencies(spark_session(config), config).collect()
    restart = naive_local(restarted_at)
    settled = restart + timedelta(seconds=SETTLED_S)
    after = [row for row in windows if row.crossedAt is not None and row.crossedAt >= restart]
    alerted_after = [row.firstAlertAt for row in after if row.firstAlertAt is not None]
    any_after = [row.firstAlertAt for row in windows if row.firstAlertAt is not None and row.firstAlertAt >= restart]

    def figures(rows: list) -> dict[str, Any]:
        return {"windows": len(rows), **percentiles(sorted(r.latencyMs for r in rows if r.latencyMs is not None))}

    return {
        "recovery_s": round((min(alerted_after) - restart).total_seconds(), 3) if alerted_after else None,
        "first_alert_after_restart_s": round((min(any_after) - restart).total_seconds(), 3) if any_after else None,
        "windows_over_threshold": sum(1 for row in windows if row.crossedAt is not None),
        "missed_windows": sum(1 for row in windows if row.crossedAt is not None and row.firstAlertAt is None),
        "first_minute_after_restart": figures([r for r in after if r.crossedAt < settled]),
        "after_the_first_minute": figures([r for r in after if r.crossedAt >= settled]),
    }


def _written_twice(config: Config, topic: str) -> int:
    """Alert records whose (alertId, clickCount) an earlier record on `topic` already had."""
    from shared.kafka import consumer_for

    reader = consumer_for(config.kafka, topic, consumer_timeout_ms=2000)
    try:
        seen = Counter((record.key, json.loads(record.value).get("clickCount")) for record in reader)
    finally:
        reader.close()
    return sum(count - 1 for count in seen.values())
