"""The reconciliation's model of the fast path: what it did to every valid record of bronze, derived
again from the data, record by record.

Every valid record of bronze is placed in the hot-pages micro-batch that read its Kafka offset (the
stream's checkpoint log keeps, per batch, the offsets it read up to and its watermark); a record
the stream never read is not processed; one whose event time was at or before the previous
batch's watermark was dropped as late; a copy of an eventId counts once per page and window (the
fast path counts each window's distinct eventIds), so a copy stamped with another window or page
than its first copy counts there too.

In real-time mode a window's highest alert record carries the largest doubling of the crossing count
that the window reached (`shared.rule.alerted_count`), so that is what each count is compared as; and
its watermark moves only at batch ends, so a batch counts every click after the watermark it started
with, even one its own later clicks have put behind the watermark (no click is "maybe late" there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from analytical.bronze_clicks import KAFKA_TIMESTAMP
from analytical.fast_path_history import FastPathHistory
from shared.config import Config
from shared.parsing import parse_clicks, valid_clicks
from shared.rule import DISTINCT_PER, alerted_count, assign_window

_MICROS = 1000
_BUCKET = 100_000  # offsets per join bucket when placing records in micro-batches


def reported_count(config: Config) -> Callable[[int], int | None]:
    """The count a window's highest alert record carries when the window's count is `count`: the
    count itself in micro-batch mode (each batch writes it), the largest doubling of the crossing
    count not above it in real-time mode (CONTRACT.md, "Alerts")."""
    if config.operational.mode == "real-time":
        return lambda count: alerted_count(count, config.hot_pages.threshold)
    return lambda count: count


@contextmanager
def fast_path_model(spark: SparkSession, bronze: DataFrame, config: Config, history: FastPathHistory,
                    start: datetime | None = None, end: datetime | None = None) -> Iterator[DataFrame]:
    """The reconciliation's model of the fast path: every valid bronze record with what the fast path
    did to it (`fate`: counted, late, maybe_late, duplicate, unprocessed, unknown), cached for the block.

    It restates the rule's streaming semantics (late dropping, the de-duplication horizon) record by
    record; tests/spark/test_rule_agreement.py holds it against the fast path's own transform.
    """
    placed = _place_in_batches(spark, bronze, config, history, start, end, horizon(config)).persist()
    try:
        yield _mark_duplicates(placed, config.hot_pages.window)
    finally:
        placed.unpersist()


def horizon(config: Config) -> Column:
    """How far beyond [start, end) an event can still matter: copies within gold's watermark."""
    return F.expr(f"INTERVAL {int(config.analytical.watermark.total_seconds())} SECONDS")


def in_range(rows: DataFrame, start: datetime | None, end: datetime | None, margin=timedelta(0),
              column: str = "eventTime") -> DataFrame:
    """Rows whose `column` is in [start - margin, end + margin); either bound may be open. Events
    that can matter for windows in [start, end) have copies within the dedup horizon (`margin`); a
    window is in the range by its start (`column="windowStart"`, no margin)."""
    if start is not None:
        rows = rows.where(F.col(column) >= F.lit(start) - margin)
    if end is not None:
        rows = rows.where(F.col(column) < F.lit(end) + margin)
    return rows


def _place_in_batches(spark: SparkSession, bronze: DataFrame, config: Config, history: FastPathHistory,
                      start: datetime | None, end: datetime | None, margin) -> DataFrame:
    """Every valid bronze record with the micro-batch that read it and what the watermark did (`fate`).

    unprocessed: never read; unknown: read in a batch whose history is purged; late: at or before
    the watermark the batch filtered late rows with (the previous batch's); maybe_late: between that
    and the batch's own watermark (Spark's choice between the two is an implementation detail, so
    both outcomes are allowed); counted, until `_mark_duplicates` looks at the copies.
    """
    records = (
        bronze.where(F.col("topic") == config.kafka.topics.clicks)
        .transform(parse_clicks, config.quality, KAFKA_TIMESTAMP)
        .transform(valid_clicks)
        .select("eventId", "pageId", "eventTime", "partition", "offset")
        .transform(in_range, start, end, margin)
        .withColumn("bucket", F.floor(F.col("offset") / _BUCKET))
    )
    ranges = spark.createDataFrame(
        history.ranges,
        "rangePartition int, rangeStart long, rangeEnd long, batchId long, lateWm long, evictWm long",
    ).withColumn("rangeBucket", F.explode(F.sequence(
        F.floor(F.col("rangeStart") / _BUCKET), F.floor(F.greatest(F.col("rangeEnd") - 1, F.col("rangeStart")) / _BUCKET))))
    offset = F.col("offset")
    placed = records.join(
        F.broadcast(ranges),
        (F.col("partition") == F.col("rangePartition")) & (F.col("bucket") == F.col("rangeBucket"))
        & (offset >= F.col("rangeStart")) & (offset < F.col("rangeEnd")),
        "left",
    ).drop("bucket", "rangeBucket", "rangePartition", "rangeStart", "rangeEnd")
    micros = F.unix_micros("eventTime")
    late, maybe_late = micros <= F.col("lateWm") * _MICROS, micros <= F.col("evictWm") * _MICROS
    if config.operational.mode == "real-time":
        # The watermark moves only at batch ends: a batch counts every click after the watermark it
        # started with, however far its own clicks move the event time on.
        maybe_late = F.lit(False)
        if config.operational.real_time.state_operator == "transform-with-state":
            # One processor, which drops a click whose window ended at or before that watermark.
            window_us = int(config.hot_pages.window.total_seconds() * 1_000_000)
            late = (F.floor(micros / window_us) + 1) * window_us <= F.col("evictWm") * _MICROS
    return placed.withColumn(
        "fate",
        F.when(F.col("batchId").isNull(), "unprocessed")
        .when(F.col("lateWm") < 0, "unknown")
        .when(late, "late")
        .when(maybe_late, "maybe_late")
        .otherwise("counted"),
    )


def _mark_duplicates(placed: DataFrame, window: timedelta) -> DataFrame:
    """`placed` with fate `duplicate` for the copies the fast path's count did not add.

    A page's window counts the set of its eventIds, and a window is evicted only once the watermark
    has passed its end (after which its events are late): a counted copy adds nothing when its
    page's window holds the eventId from an earlier record; a maybe-late copy adds nothing when
    the window counted the eventId, and at most one maybe-late copy of an eventId can add one.
    """
    fate = F.col("fate")
    candidate = fate.isin("counted", "maybe_late")
    copies = Window.partitionBy(*DISTINCT_PER).orderBy(  # counted copies first, then maybe-late ones
        F.when(fate == "counted", 0).when(fate == "maybe_late", 1).otherwise(2), "batchId", "partition", "offset")
    return (
        placed.transform(assign_window, window)
        .withColumn("_copy", F.when(candidate, F.row_number().over(copies)))
        .withColumn("fate", F.when(F.col("_copy") > 1, "duplicate").otherwise(F.col("fate")))
        .drop("_copy", "windowStart", "windowEnd")
    )
