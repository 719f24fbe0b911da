"""What the fast path did under one load of a benchmark (`Load`): its batches' reports, samples of its
lag, state and memory, the cores each part used, what the traffic delivered; and the figures a run
reports from them (lakehouse.bench.measured_run runs the load).
"""

from __future__ import annotations

import statistics
import time
from contextlib import closing
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from lakehouse.bench.linux_process import cpu_seconds, machine_busy_seconds, process_memory_mb
from lakehouse.path_processes import TrafficProcess, child_options
from shared import spark_internals
from shared.config import Config
from shared.errors import LakehouseError
from shared.progress import Progress

_DURATION_PARTS = ("addBatch", "getBatch", "latestOffset", "queryPlanning", "walCommit", "commitOffsets")


@dataclass
class Load:
    """What the fast path did under one load: its batches' reports, the samples taken meanwhile, the
    cores each part used, what the generator sent, and when the load began, ended and was drained."""

    batches: dict[int, Any]
    samples: list[dict[str, Any]]
    cores: dict[str, float]
    generated: dict[str, Any]
    started_at: datetime
    ended_at: datetime
    drain_s: float

    @classmethod
    def offered(cls, spark: Any, config: Config, query: Any, medallion_pid: int | None, rate: float, seconds: float,
                hot_pages: int, sample_every_s: float, drain_timeout_s: float, hot_stagger: bool = False) -> "Load":
        """Offer `rate` events/s for `seconds`, sampling the fast path every `sample_every_s`, then wait
        until it has read every event. `hot_stagger`: the hot pages cross at instants spread over the window
        (`lakehouse generate --hot-stagger`)."""
        from kafka import TopicPartition

        from shared.kafka import consumer_for
        from shared.query_progress import ProgressSummary, records_behind

        clicks = config.kafka.topics.clicks
        jvm_pid = spark_internals.jvm_pid(spark)
        offsets = consumer_for(config.kafka)
        partitions = [TopicPartition(clicks, p) for p in sorted(offsets.partitions_for_topic(clicks))]

        def lag() -> int:
            last = query.lastProgress
            return records_behind(ProgressSummary.of(last) if last else None, offsets.end_offsets(partitions), clicks)

        started_at = datetime.now(timezone.utc)
        generator = TrafficProcess(child_options(config), "--rate", str(rate), "--seconds", str(seconds),
                                   "--hot-pages", str(hot_pages), *["--hot-stagger"] * hot_stagger)
        started = time.monotonic()
        # The cores each part uses over the load: the machine's CPU is what the medallion competes for.
        cpu_parts = {"fast_path": jvm_pid, **({"medallion": medallion_pid} if medallion_pid else {})}
        cpu_before = {"machine": machine_busy_seconds()} | {part: cpu_seconds(pid) for part, pid in cpu_parts.items()}
        batches: dict[int, ProgressSummary] = {}
        samples: list[dict[str, Any]] = []
        next_sample = started
        # The events the fast path has read, of all the generator sends (exactly rate x its seconds).
        read = Progress("bench fast path", total=round(rate * seconds), unit="events")

        def collect() -> None:
            for progress in query.recentProgress:
                if progress["batchId"] not in batches:
                    batch = batches[progress["batchId"]] = ProgressSummary.of(progress)
                    read.advance(batch.input_rows)

        def caught_up() -> bool:
            collect()
            return lag() == 0

        with read, closing(offsets):
            while not generator.ended:
                collect()
                if time.monotonic() >= next_sample:
                    samples.append(_sample(spark, query, jvm_pid, time.monotonic() - started, lag()))
                    next_sample += sample_every_s
                if query.exception():
                    raise RuntimeError(f"the fast path failed: {query.exception()}")
                time.sleep(0.2)
            load_s = time.monotonic() - started
            cpu_after = {"machine": machine_busy_seconds()} | {part: cpu_seconds(pid) for part, pid in cpu_parts.items()}
            generated = generator.summary()
            drain_started, ended_at = time.monotonic(), datetime.now(timezone.utc)
            # A real-time batch reports its progress when it ends, a checkpoint interval at most from now.
            # A batch's alerts are on the topic when it reports: caught up, every alert has left.
            wait_until(caught_up, drain_timeout_s, "the fast path to catch up", query)
            drain_s = time.monotonic() - drain_started
            collect()
        return cls(batches, samples, cores_used(cpu_before, cpu_after, load_s, generated["cpu_share"]), generated,
                   started_at, ended_at, drain_s)

    def figures(self, rate: float, mode: Any) -> dict[str, Any]:
        """The run's figures, the batches that read events only."""
        data = [p for _, p in sorted(self.batches.items()) if p.input_rows > 0]
        durations = [p.duration_ms for p in data]
        return {
            **delivery(rate, self.generated),
            "input_rate": round(sum(p.input_rows for p in data) / max(1e-9, sum(d / 1000 for d in durations)), 1)
            if durations else 0.0,
            "batches": len(data),
            "batch_ms_p50": statistics.median(durations) if durations else None,
            "batch_ms_max": max(durations) if durations else None,
            "duration_ms_p50": {part: statistics.median(p.durations_ms.get(part, 0) for p in data)
                                for part in _DURATION_PARTS} if data else {},
            "drain_s": round(self.drain_s, 1),
            "mode": mode.name,
            "batch_ends": [batch_end(p) for p in data] if mode.real_time else [],
            "cores_during_load": self.cores,
            "samples": self.samples,
        }


def _sample(spark: Any, query: Any, jvm_pid: int, at_s: float, lag: int) -> dict[str, Any]:
    """The fast path's lag, state and memory now."""
    from shared.query_progress import ProgressSummary

    latest = ProgressSummary.of(query.lastProgress) if query.lastProgress else None
    return {"t_s": round(at_s, 1), "lag": lag,
            "state_rows": latest.state_rows if latest else None,
            # state rows are not counted by default (spark.rocksdb.count_rows): the state's size shows here
            "state_files_mb": round(sum((op.get("customMetrics") or {}).get("rocksdbSstFileSize", 0)
                                        for op in latest.operators) / 2**20, 1) if latest else None,
            "jvm_rss_mb": process_memory_mb(jvm_pid),
            **{f"jvm_{part}_mb": mb for part, mb in spark_internals.jvm_memory_mb(spark).items()}}


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
