"""The fast path's mode, decided once: the one place that reads `operational.mode`.

Micro-batch mode runs on any Spark, in the medallion's runtime too; real-time mode needs Spark 4.3's,
the fast path's own runtime, where its session takes settings of its own and a stop lets the running
batch end. Everything that differs between the two is a field of `FastPathMode`, which the rest of the
product asks instead of the configuration:

    mode = fast_path_mode(config)
    if not mode.runs_here():                 # real-time mode, in the medallion's interpreter
        command = command_in(mode.runtime, "lakehouse.cli", "operational")
    spark = spark_session(config, application="operational", application_settings=mode.session_settings)
    supervise(..., real_time_batch=mode.real_time_batch)

(The reconciliation, in the medallion, models how the fast path counted from the same configuration:
analytical.fast_path_model.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from shared.config import Config
from shared.runtime import FAST_PATH, MEDALLION, Runtime, real_time_available


@dataclass(frozen=True)
class FastPathMode:
    """How the fast path runs under one configuration."""

    name: Literal["micro-batch", "real-time"]
    #: The runtime it is measured and run in by default: the fast path's for real-time mode.
    runtime: Runtime
    #: What its SparkSession adds to spark.conf, before `operational.spark_conf`.
    session_settings: Mapping[str, str]
    #: A real-time batch's length (its checkpoint interval), which a clean stop waits out; None in
    #: micro-batch mode, whose batches are short enough to end at a stop (`stop_at_batch_end`).
    real_time_batch: timedelta | None

    @property
    def real_time(self) -> bool:
        return self.real_time_batch is not None

    def runs_here(self) -> bool:
        """Whether this interpreter's Spark runs it: any does micro-batch, Spark 4.3's real-time."""
        return not self.real_time or real_time_available()

    def stop(self, queries: list[Any]) -> None:
        """Stop its queries as a measurement ends: now in real-time mode (a batch ends only at its
        interval), at the end of the running batch in micro-batch mode."""
        from shared.stopping import stop_at_batch_end, stop_now

        (stop_now if self.real_time else stop_at_batch_end)(queries)


def fast_path_mode(config: Config) -> FastPathMode:
    """The fast path's mode under `config`."""
    if config.operational.mode == "micro-batch":
        return FastPathMode("micro-batch", MEDALLION, {}, None)
    return FastPathMode("real-time", FAST_PATH, real_time_settings(config), config.operational.real_time.checkpoint_interval)


def real_time_settings(config: Config) -> dict[str, str]:
    """What the fast path's application needs in real-time mode: a task slot for every long-running
    task (one per source partition and per shuffle partition, all at once; never taken away by
    dynamic allocation), few shuffle partitions, and state eviction spread over the batch. Applied
    after spark.conf (a profile's `spark.cores.max: 1` for every other application must not cap it)."""
    real_time = config.operational.real_time
    settings = {
        "spark.sql.shuffle.partitions": str(real_time.shuffle_partitions),
        # Evict closed windows' rows as clicks arrive, not all at the batch end, where alerting stops
        # meanwhile (operational/README.md, "The batch boundary").
        "spark.sql.streaming.statefulOperator.incrementalCleanupFactor": str(real_time.evictions_per_record),
        # What real-time mode requires of a checkpoint's state, set for the whole application so that a
        # catch-up micro-batch (operational.catch_up) that starts a new checkpoint writes it too.
        "spark.sql.streaming.stateStore.checkpointFormatVersion": "2",
    }
    if real_time.master:  # a cluster of its own: it holds task_slots cores for as long as it runs
        settings |= {"spark.master": real_time.master, "spark.cores.max": str(real_time.task_slots),
                     "spark.dynamicAllocation.enabled": "false"}
    elif config.spark.master.startswith("local"):
        settings["spark.master"] = f"local[{real_time.task_slots}]"
    return settings
