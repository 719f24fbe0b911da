"""Silver's search for earlier copies in what its query holds of its recent batches (analytical.recent_keys):
the same events as a search of the table, whatever is held, and started over whenever it might not be."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from analytical import bronze_clicks, silver_clicks
from analytical.writes import Txn
from tests.conftest import make_config

CONFIG = make_config()
WATERMARK = CONFIG.analytical.watermark  # 10 minutes
#: bronze/clicks' columns that silver reads, as bronze declares them
BRONZE = StructType([field for field in bronze_clicks.TABLE.schema.fields
                     if field.name in ("key", "value", "topic", "partition", "offset", "kafkaTimestamp", "ingestTime")])


class Silver:
    """silver/clicks under a test's root, written batch after batch as the medallion's query does."""

    def __init__(self, spark, root: str) -> None:
        self.spark, self.offset, self.batches = spark, 0, 0
        self.recent = silver_clicks.recent_events()
        self.clicks, self.quarantine = silver_clicks.create(spark, self.records([]), root)

    def records(self, events: list[tuple[str, str]]):
        """(eventId, 'HH:MM:SS') clicks of page /a as bronze rows, each at the next offset."""
        rows = []
        for event_id, time in events:
            when = datetime.fromisoformat(f"2026-11-22 {time}")
            value = f'{{"eventId":"{event_id}","pageId":"/a","eventTime":"2026-11-22T{time}Z"}}'.encode()
            rows.append((b"k", value, "t", 0, self.offset, when + timedelta(seconds=1), when + timedelta(seconds=2)))
            self.offset += 1
        return self.spark.createDataFrame(rows, BRONZE).transform(silver_clicks.parsed, CONFIG)

    def write(self, events: list[tuple[str, str]], recent: bool = True) -> list[str]:
        """One batch of the query (`recent`: with what it holds); the eventIds it added, sorted."""
        rows = self.records(events).cache()
        txn = Txn("query", self.batches, may_be_written=False)
        self.batches += 1
        held = self.recent if recent else None
        new = silver_clicks.new_events(rows, self.clicks, WATERMARK, txn, held).cache()
        added = sorted(row.eventId for row in new.collect())
        silver_clicks.write_batch(rows, new, self.clicks, self.quarantine, WATERMARK, txn)
        if held is not None:
            held.added(self.spark, self.clicks, txn.user_metadata)
        return added

    def copies(self) -> dict[str, int]:
        rows = self.spark.read.format("delta").load(self.clicks).groupBy("eventId").count().collect()
        return {row.eventId: row["count"] for row in rows}


@pytest.fixture
def silver(spark, tmp_path):
    return Silver(spark, str(tmp_path / "lake"))


def test_an_earlier_copy_held_in_memory_is_found_and_one_too_far_apart_is_a_new_event(silver):
    assert silver.write([("a", "10:00:00"), ("b", "10:00:01")]) == ["a", "b"]
    [piece] = silver.recent.pieces  # the batch's own rows, held for the next one
    assert piece.count == 2
    # a again (a retry), b reused 11 minutes later (another event: beyond the watermark), c new
    assert silver.write([("a", "10:00:00"), ("b", "10:11:01"), ("c", "10:00:02")]) == ["b", "c"]
    assert silver.copies() == {"a": 1, "b": 2, "c": 1}


def test_what_was_written_before_the_query_held_anything_is_still_searched_in_the_table(silver):
    assert silver.write([("old", "09:55:00"), ("x", "10:00:00")], recent=False) == ["old", "x"]
    # A new query run: nothing held; every row of the table is older than what it will hold.
    assert silver.write([("x", "10:00:00"), ("y", "10:00:05")]) == ["y"]
    assert silver.recent.low_micros is not None and len(silver.recent.pieces) == 1
    # A late copy of an event from before the run, and a copy of one held
    assert silver.write([("old", "09:55:00"), ("y", "10:00:05"), ("z", "10:00:06")]) == ["z"]
    assert silver.copies() == {"old": 1, "x": 1, "y": 1, "z": 1}


def test_another_writers_commit_or_a_commit_not_the_batch_s_makes_the_next_batch_start_over(silver, spark):
    assert silver.write([("a", "10:00:00")]) == ["a"]
    held_version = silver.recent.version
    # Another writer (an erasure, a maintenance job) changes the table under the query
    spark.read.format("delta").load(silver.clicks).where("eventId = 'a'") \
        .withColumn("eventId", F.lit("e")).write.format("delta").mode("append").save(silver.clicks)
    assert silver.write([("e", "10:00:00"), ("a", "10:00:00"), ("f", "10:00:01")]) == ["f"]
    assert silver.recent.version == held_version + 2  # read the other writer's version, then its own commit
    # A batch whose next commit is not its own (another writer's came first) holds nothing after it
    silver.recent.read = silver.recent.version - 1
    silver.recent.added(spark, silver.clicks, Txn("query", 9).user_metadata)
    assert silver.recent.pieces == [] and silver.recent.version is None
    assert silver.write([("a", "10:00:00"), ("f", "10:00:01"), ("g", "10:00:02")]) == ["g"]
    assert silver.copies() == {"a": 1, "e": 1, "f": 1, "g": 1}
