"""The medallion as a whole: its streams in order, run continuously, as a backfill, or rebuilt.

  Kafka -> medallion -> bronze/clicks, silver/clicks + silver/quarantine, gold/page_clicks_5s
        -> gold_page_clicks_hourly -> gold/page_clicks_hourly

The streams are analytical.registry's, each declared in its own module (shared.stream.Stream):
a name (its query name and checkpoint folder), a layer, a trigger and a writer from a source root to
a target root. The roots are `storage.root` for the live tables; a rebuild points the target at a
staging root first.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from analytical import bronze_clicks, medallion
from analytical.registry import STREAMS, check_policies, rebuilt, running
from analytical.tables import delete_path, move_path
from shared.config import Config
from shared.durations import spark_interval
from shared.errors import LakehouseError
from shared.progress import Progress
from shared.spark import CHANGELOG_CHECKPOINTING, scheduler_pool, session_conf
from shared.checkpoints import read_checkpoint_log
from shared.storage import checkpoint_location
from shared.query_progress import ProgressSummary, RunningTotals
from shared.stopping import StopRequest
from shared.stream import Stream
from shared.streaming import supervise

#: The medallion's FAIR scheduler pool (conf/fairscheduler.xml), below the fast path's when both share an application.
POOL = "analytical"

Report = Callable[[str], None]


@dataclass(frozen=True)
class LayerRun:
    """What one stream did in a backfill."""

    name: str
    layer: str
    rows: int
    seconds: float
    batches: int
    dropped_by_watermark: int
    invalid: int
    failed_expectations: dict[str, int]
    #: Spark's batch durations summed by part (`triggerExecution` is the batches' whole time; the rest of
    #: `seconds` is the query's start and stop).
    durations_ms: dict[str, int] = field(default_factory=dict)
    #: What its state held after its last batch (Spark's numRowsTotal and memoryUsedBytes; 0 when stateless).
    state_rows: int = 0
    state_memory_bytes: int = 0
    watermark: str | None = None

    def as_dict(self) -> dict:
        return {"query": self.name, "layer": self.layer, "rows": self.rows, "seconds": round(self.seconds, 3),
                "batches": self.batches, "dropped_by_watermark": self.dropped_by_watermark,
                "invalid": self.invalid, "failed_expectations": self.failed_expectations,
                "state_rows": self.state_rows, "state_memory_bytes": self.state_memory_bytes,
                "watermark": self.watermark}


def start(spark: SparkSession, config: Config, stream: Stream, *, available_now: bool,
          source_root: str | None = None, target_root: str | None = None) -> StreamingQuery:
    """Start one stream; it resumes from its checkpoint under the target root when there is one."""
    check_policies(config)
    source_root = source_root or config.storage.root
    target_root = target_root or config.storage.root
    writer = stream.writer_at(spark, config, source_root, target_root)
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=spark_interval(stream.trigger(config)))
    changelog = str(config.analytical.state_changelog_checkpointing).lower()
    with session_conf(spark, {CHANGELOG_CHECKPOINTING: changelog}), scheduler_pool(spark, POOL):
        return writer.start()  # a query keeps the settings and the pool it started with


def starters(spark: SparkSession, config: Config) -> dict[str, Callable[[], StreamingQuery]]:
    """Query name -> a function that starts it continuously: what `supervise` runs."""
    return {stream.name: _starter(spark, config, stream, available_now=False) for stream in running(config)}


def run_continuously(spark: SparkSession, config: Config, seconds: float | None, report: Report,
                     on_status: Callable[[], None] | None = None, status_lines: bool = True) -> None:
    """All streams side by side, each on its trigger, until stopped or `seconds` pass."""
    supervise(starters(spark, config), config.analytical, seconds=seconds, report=report, on_status=on_status,
              status_lines=status_lines)


def backfill(spark: SparkSession, config: Config, report: Report, streams: Sequence[Stream] | None = None,
             source_root: str | None = None, target_root: str | None = None,
             stop: StopRequest | None = None) -> list[LayerRun]:
    """Each stream in turn with Trigger.AvailableNow: everything there is now, then stop.

    One stop (SIGINT/SIGTERM, or `stop`: the caller's) ends the whole backfill: the running stream
    between its batches (a second stop: at once), and no later stream starts; the next backfill goes
    on from the checkpoints. Each shows its rows read so far as a Progress (instead of supervise's
    status lines)."""
    streams = running(config) if streams is None else streams
    runs = []
    with StopRequest() if stop is None else nullcontext(stop) as stop:
        for position, stream in enumerate(streams):
            if stop.event.is_set():
                report(f"stop requested: {', '.join(later.name for later in streams[position:])} not run "
                       "(the next backfill runs them)")
                break
            started = time.monotonic()
            with Progress(f"[{stream.name}]", unit="rows") as progress:
                totals = supervise(
                    {stream.name: _starter(spark, config, stream, available_now=True,
                                           source_root=source_root, target_root=target_root)},
                    config.analytical, seconds=None, report=report, status_lines=not progress.shown,
                    on_tick=lambda by_name: _show(progress, by_name[stream.name]), stop=stop,
                )[stream.name]
                _show(progress, totals)
            run = LayerRun(stream.name, stream.layer, totals.rows, time.monotonic() - started,
                           totals.batches, totals.dropped_by_watermark, totals.invalid,
                           {name: count for name, count in totals.expectations.items() if count},
                           dict(totals.durations_ms), *_state_after(totals.latest))
            report(f"[{stream.name}] {run.rows:,} rows in {run.seconds:.1f} s")
            runs.append(run)
    return runs


def _state_after(latest: ProgressSummary | None) -> tuple[int, int, str | None]:
    return (0, 0, None) if latest is None else (latest.state_rows, latest.state_memory_bytes, latest.watermark)


def rebuild(spark: SparkSession, config: Config, report: Report,
            streams: tuple[Stream, ...] | None = None) -> list[LayerRun]:
    """Recompute silver and gold from bronze, from scratch, with fresh checkpoints.

    The medallion's query over bronze (analytical.medallion.REBUILD), then each stream that follows it,
    is built in turn under a staging root, `storage.root/_rebuild`, from the live tables, and published
    table by table with one overwrite commit each: a reader of a live table sees the old version or the
    rebuilt one, never a half-built one. A stream is published before the next one is built, because
    the next one's new checkpoint must follow the live table it reads (a Delta stream is tied to one
    table): silver and gold/page_clicks_5s, then the hourly table from the 5-second table's changes.
    The live medallion keeps its checkpoint: it goes on from the Kafka offsets bronze ends at. The
    streams must not run meanwhile. A stop (SIGINT/SIGTERM) publishes nothing more: the stream being
    built is left unpublished; run the rebuild again to finish.
    """
    live = config.storage.root
    staging = config.path("_rebuild")
    bronze = bronze_clicks.TABLE.at(live)
    if not bronze.exists(spark):
        raise LakehouseError(f"there is no bronze table at {bronze.path}: run `lakehouse analytical --available-now` "
                             "first")
    _refuse_an_unfinished_batch(spark, config)
    delete_path(spark, staging)
    building = rebuilt(running(config, STREAMS if streams is None else tuple(streams)))
    runs = []
    with StopRequest() as stop:
        for built, stream in enumerate(building, start=1):
            runs += backfill(spark, config, report, [stream], source_root=live, target_root=staging, stop=stop)
            if stop.event.is_set():  # its staged build may be partial: the live table stays as it was
                report(f"[rebuild] stop requested: {stream.name}'s tables not published, the live ones unchanged "
                       "from there on; run `lakehouse rebuild` again to finish")
                return runs
            _publish(spark, stream, staging, live, report)
            for later in building[built:]:  # they followed a table just replaced
                delete_path(spark, checkpoint_location(live, later.name))
    delete_path(spark, staging)
    return runs


def _refuse_an_unfinished_batch(spark: SparkSession, config: Config) -> None:
    """A rebuild starts only after the live medallion's last batch finished: that batch, run again
    after the rebuild, would add to gold the clicks the rebuild already counted from bronze."""
    log = read_checkpoint_log(spark, config.checkpoint(medallion.STREAM.name))
    if log and log.batches and not log.batches[-1].committed:
        raise LakehouseError(f"the {medallion.STREAM.name} query's batch {log.batches[-1].batch_id} did not finish: "
                             "run `lakehouse analytical --available-now` to finish it, then the rebuild")


def _publish(spark: SparkSession, stream: Stream, staging: str, live: str, report: Report) -> None:
    """Replace each live table by its staged build in one commit, and the stream's checkpoint (but the
    medallion's: the live one reads Kafka, the staged one read bronze)."""
    for table in stream.writes:
        table.at(live).create(spark, table.schema)  # its declared properties, which an overwrite keeps
        (
            spark.read.format("delta").load(table.at(staging).path)
            .write.format("delta").mode("overwrite").option("overwriteSchema", "true")
            .save(table.at(live).path)
        )
        report(f"[rebuild] published {table}")
    if stream is not medallion.REBUILD:
        move_path(spark, checkpoint_location(staging, stream.name), checkpoint_location(live, stream.name))


def _show(progress: Progress, totals: RunningTotals) -> None:
    """Rows read so far, of all the run will read when the source says so (bronze: Kafka's backlog)."""
    progress.update(totals.rows, total=totals.backlog)


def _starter(spark: SparkSession, config: Config, stream: Stream, **options) -> Callable[[], StreamingQuery]:
    return lambda: start(spark, config, stream, **options)
