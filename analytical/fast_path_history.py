"""The fast path's batch history, read from its checkpoint: per Kafka partition, the offset range each
hot-pages batch read and the watermarks it ran with. The reconciliation places every bronze record in
the batch that read it (`analytical.reconciliation`); `analytical.closed_windows` asks how far the
last committed batch read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from shared.checkpoints import CheckpointLog, kafka_offsets


@dataclass(frozen=True)
class FastPathHistory:
    """Per Kafka partition, the offset ranges of the hot-pages micro-batches, with their watermarks."""

    ranges: list[tuple[int, int, int, int, int, int]]  # partition, start, end, batchId, lateWm, evictWm
    closed_up_to_ms: int | None  # windows ending at or before this are final in the fast path
    batches: int
    first_batch: int | None
    read_up_to: dict[int, int] = field(default_factory=dict)  # per partition, where its last committed batch read to

    @classmethod
    def from_log(cls, log: CheckpointLog | None, topic: str) -> "FastPathHistory":
        if log is None:
            return cls([], None, 0, None, {})
        ranges = []
        previous = None
        for batch in log.batches:
            ends = kafka_offsets(batch.end_offsets[0] if batch.end_offsets else None, topic)
            if previous is not None and previous.batch_id == batch.batch_id - 1:
                starts, late_ms = kafka_offsets(previous.end_offsets[0], topic), previous.watermark_ms
            elif batch.batch_id == 0:
                starts, late_ms = kafka_offsets(log.initial_offsets, topic), 0
            else:  # its predecessor's entry was purged: the batch's start and late watermark are unknown
                starts, late_ms = {}, None
            for partition, end in ends.items():
                start = starts.get(partition, 0 if late_ms is not None else -1)
                ranges.append((partition, max(start, 0), end, batch.batch_id,
                               -1 if late_ms is None else late_ms, batch.watermark_ms))
            previous = batch
        last = log.last_committed
        return cls(ranges, last.watermark_ms if last else None, len(log.batches),
                   log.batches[0].batch_id if log.batches else None, log.read_up_to(topic))
