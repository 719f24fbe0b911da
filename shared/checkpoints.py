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

import fcntl
import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from shared.storage import local_folder, local_side
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


LOCK_SUFFIX = ".lock"


def _lock_folder(storage_root: str) -> Path:
    return local_side(storage_root, "_checkpoints")


def empty_keeping_locks(storage_root: str) -> None:
    """Delete everything under a local storage root except the checkpoint locks: the demo clears
    its folder while it holds them, and a lock file deleted and made again would admit a second
    process beside the first."""
    root = local_folder(storage_root)
    if root is None or not root.exists():
        return
    locks = _lock_folder(storage_root)
    doomed = [entry for entry in root.iterdir() if entry != locks]
    if locks.exists():
        doomed += [entry for entry in locks.iterdir() if not entry.name.endswith(LOCK_SUFFIX)]
    for entry in doomed:
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


#: How long a new holder waits for the Spark JVM of a holder that died to end by itself, before it
#: kills it: PySpark's JVM exits when its Python driver's pipe closes, a few seconds after.
ORPHAN_JVM_GRACE_S = 10.0


class Locks:
    """The checkpoint locks one process holds (see `exclusive`)."""

    def __init__(self, handles: list[Any]):
        self._handles = handles

    def record_jvm(self, jvm_pid: int) -> None:
        """Name this process's Spark JVM in the locks: a JVM can outlive its Python driver for a few
        seconds, and it still runs the queries then; the next holder waits for it to end."""
        for handle in self._handles:
            handle.write(f" jvm {jvm_pid}")
            handle.flush()


@contextmanager
def exclusive(storage_root: str, query_names: Sequence[str], report: Callable[[str], None] = lambda message: None,
              orphan_grace_s: float = ORPHAN_JVM_GRACE_S) -> Iterator[Locks]:
    """Hold a lock per query's checkpoint for the block: a second process that would write the same
    checkpoints is refused with the first one's pid, instead of two writers on one checkpoint.

    The lock is an OS file lock on `_checkpoints/<query>.lock` beside the checkpoint, released by
    the kernel when the process ends however it ends. Its Spark JVM (`Locks.record_jvm`) may run a
    little longer, still writing to the checkpoints: a new holder waits for that JVM to end
    (`orphan_grace_s`), then kills it. An object store cannot hold such a lock: an object-store
    root's locks are files on this machine (`shared.storage.local_side`), so they keep a second writer
    off only here; across machines the deployment runs one writer per checkpoint (DEPLOYMENT.md).
    """
    folder = _lock_folder(storage_root)
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as held:
        handles = []
        for name in query_names:
            handle = held.enter_context(open(folder / f"{name}{LOCK_SUFFIX}", "a+"))
            handle.seek(0)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = handle.read().split(" jvm ")[0].strip() or "another process"
                raise LakehouseError(
                    f"the {name} query's checkpoint ({folder / name}) is in use by {owner}: "
                    "stop that run first (two writers would corrupt it)") from None
            _end_orphan_jvm(handle.read(), name, report, orphan_grace_s)
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}")
            handle.flush()
            handles.append(handle)
        yield Locks(handles)
        for handle in handles:  # a block that ended normally has stopped its queries: no JVM of it writes on
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}")
            handle.flush()


def holder(storage_root: str, name: str) -> str | None:
    """Who holds the `name` query's checkpoint lock now ("pid N"), None when nobody does: whether that
    query runs. An object-store root's lock is held on this machine only: when nobody here holds it,
    the query may still run elsewhere, and "unknown" says so."""
    nobody = None if local_folder(storage_root) is not None else "unknown"
    path = _lock_folder(storage_root) / f"{name}{LOCK_SUFFIX}"
    if not path.exists():
        return nobody
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return handle.read().split(" jvm ")[0].strip() or "another process"
        fcntl.flock(handle, fcntl.LOCK_UN)
    return nobody


def _end_orphan_jvm(previous_holder: str, name: str, report: Callable[[str], None], grace_s: float) -> None:
    """Wait for the JVM a dead holder left behind (named in its lock), then kill it if it lingers."""
    words = previous_holder.split()
    if "jvm" not in words or words.index("jvm") + 1 >= len(words) or not words[words.index("jvm") + 1].isdigit():
        return
    pid = int(words[words.index("jvm") + 1])
    if not _is_java(pid):
        return
    report(f"waiting for the Spark JVM (pid {pid}) of the process that held the {name} checkpoint to end")
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _is_java(pid):
        time.sleep(0.1)
    if _is_java(pid):
        report(f"killing it: it did not end within {grace_s:g} s")
        os.kill(pid, signal.SIGKILL)
        while _is_java(pid):
            time.sleep(0.05)


def _is_java(pid: int) -> bool:
    """A live (not zombie) JVM process with this pid."""
    proc = Path("/proc") / str(pid)
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        command = (proc / "cmdline").read_bytes()
    except OSError:
        return False
    return state != "Z" and b"java" in command.split(b"\0")[0]
