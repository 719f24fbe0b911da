"""What a streaming query has done, read from its checkpoint: the offsets and commits logs.

Spark writes, per micro-batch N, `offsets/N` before running it (the watermark the batch evicts
state with, then one line per source: the offsets the batch reads up to) and `commits/N` once
its output is written (the watermark the next batch will use). `sources/0/0` holds where a Kafka
source started. The format is Spark's own ("v1" then JSON lines) and has been stable since 2.x;
the query keeps `spark.sql.streaming.minBatchesToRetain` batches of it.

`lakehouse reconcile` reads the hot-pages stream's log to tell, from the data, which records the
fast path processed, in which batch, under which watermark; and a gold stream's log to know which
version of silver it has read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from shared.errors import LakehouseError
from shared.spark_internals import hadoop_file_system, read_small_file


@dataclass(frozen=True)
class Batch:
    batch_id: int
    watermark_ms: int  # batchWatermarkMs: the watermark this batch evicted state with
    end_offsets: tuple[Any, ...]  # per source, what it read up to (parsed JSON; None for "-")
    committed: bool


@dataclass(frozen=True)
class CheckpointLog:
    path: str
    batches: tuple[Batch, ...]  # the retained ones, by batch id
    initial_offsets: Any  # sources/0/0 (a Kafka source's starting offsets), None if absent

    @property
    def last_committed(self) -> Batch | None:
        return next((batch for batch in reversed(self.batches) if batch.committed), None)

    def read_up_to(self, topic: str) -> dict[int, int]:
        """Per partition of `topic`, where the last committed batch read to (where the query resumes),
        or where its source started when no batch has committed."""
        last = self.last_committed
        return kafka_offsets(last.end_offsets[0] if last and last.end_offsets else self.initial_offsets, topic)


def kafka_offsets(offsets: Any, topic: str) -> dict[int, int]:
    """{partition: offset} for `topic` from a Kafka source offset ({"topic": {"0": 42}})."""
    if not isinstance(offsets, dict):
        return {}
    return {int(partition): max(int(offset), 0) for partition, offset in offsets.get(topic, {}).items()}


def read_checkpoint_log(spark: SparkSession, checkpoint: str) -> CheckpointLog | None:
    """The retained batches of the checkpoint at `checkpoint`; None when there is none."""
    offsets = _whole_files(spark, f"{checkpoint}/offsets")
    if not offsets:
        return None
    committed = set(_whole_files(spark, f"{checkpoint}/commits"))
    batches = []
    for batch_id, text in sorted(offsets.items()):
        lines = text.strip().split("\n")  # "v1", the batch metadata, one line per source
        metadata = json.loads(lines[1])
        ends = tuple(None if line == "-" else json.loads(line) for line in lines[2:])
        batches.append(Batch(batch_id, int(metadata.get("batchWatermarkMs", 0)), ends, batch_id in committed))
    initial = _whole_files(spark, f"{checkpoint}/sources/0").get(0)
    initial_offsets = json.loads(initial.lstrip("\x00").strip().split("\n", 1)[1]) if initial else None
    return CheckpointLog(checkpoint, tuple(batches), initial_offsets)


def query_id(spark: SparkSession, checkpoint: str) -> str:
    """The id of the query the checkpoint belongs to (its `metadata` file): the same across restarts,
    new with a new checkpoint."""
    text = read_small_file(spark, f"{checkpoint}/metadata")
    if text is None:
        raise LakehouseError(f"no query has started from the checkpoint {checkpoint} (no metadata file)")
    return json.loads(text)["id"]


def batch_watermark_ms(spark: SparkSession, checkpoint: str, batch_id: int) -> int:
    """The event-time watermark batch `batch_id` runs under (its `offsets` file's batchWatermarkMs),
    from inside the batch: Spark writes the file before it runs the batch, and a replay reads the same."""
    text = read_small_file(spark, f"{checkpoint}/offsets/{batch_id}")
    if text is None:
        raise LakehouseError(f"batch {batch_id} has no offsets file under {checkpoint}")
    return int(json.loads(text.strip().split("\n")[1]).get("batchWatermarkMs", 0))


def _whole_files(spark: SparkSession, folder: str) -> dict[int, str]:
    """{batch id: text} for the numbered files of a log folder (Spark skips its hidden .crc files)."""
    if not _exists(spark, folder):  # asked first: Spark logs a stack trace for a missing folder
        return {}
    rows = (
        spark.read.text(folder, wholetext=True)
        .select(F.col("_metadata.file_name").alias("name"), "value")
        .collect()
    )
    return {int(row.name): row.value for row in rows if row.name.isdigit()}


def _exists(spark: SparkSession, folder: str) -> bool:
    file_system, path = hadoop_file_system(spark, folder)
    return file_system.exists(path)
