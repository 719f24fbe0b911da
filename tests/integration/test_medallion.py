"""The medallion on the real broker and real Delta tables: crafted records in, tables checked.

Threshold 3 here (a window of 4 distinct clicks is hot); the analytical watermark is the default
10 minutes. Every backfill is the real `pipeline.backfill` (Trigger.AvailableNow, layer by layer).
Expected values are written out by hand from the crafted records, or recomputed from silver with
plain Spark SQL that does not go through the code under test.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from analytical import medallion, pipeline
from analytical.maintenance import maintain
from analytical.bronze_clicks import TABLE as BRONZE_CLICKS
from analytical.gold_page_clicks_5s import TABLE as GOLD_PAGE_CLICKS_5S
from analytical.gold_page_clicks_hourly import TABLE as GOLD_PAGE_CLICKS_HOURLY
from analytical.registry import STREAMS, running, written
from analytical.silver_clicks import QUARANTINE as SILVER_QUARANTINE
from analytical.silver_clicks import TABLE as SILVER_CLICKS
from analytical.tables import Table
from shared.query_progress import ProgressSummary
from tests.examples import gold_page_clicks_1m
from tests.helpers import click, forget_the_batch_commit, send
from tests.readers import assert_every_table_reads_alike


@pytest.fixture
def lake(configured):
    return configured("hot_pages.threshold=3", topics=("clicks",))


def backfill(spark, config) -> dict[str, int]:
    """Run the backfill; rows processed per query."""
    return {run.name: run.rows for run in pipeline.backfill(spark, config, report=lambda line: None)}


#: The registry with one more gold table, declared in one module of the tests' own.
WITH_EXAMPLE = (*STREAMS, gold_page_clicks_1m.STREAM)


def table(spark, config, declared: Table):
    return declared.at(config.storage.root).read(spark)


def gold_counts(spark, config) -> dict[tuple[str, str], int]:
    rows = table(spark, config, GOLD_PAGE_CLICKS_5S).select(
        "pageId", F.date_format("windowStart", "HH:mm:ss").alias("start"), "clickCount").collect()
    return {(row.pageId, row.start): row.clickCount for row in rows}


def versions(spark, config) -> dict[Table, int]:
    from delta.tables import DeltaTable

    return {table: DeltaTable.forPath(spark, table.at(config.storage.root).path).history(1).first()["version"]
            for table in written(config)}


MALFORMED = {
    b"not json at all": "not_json",
    b"[1, 2]": "not_object",
    b'{"pageId": "/a", "eventTime": "2026-11-22T10:00:01Z"}': "missing_event_id",
    b'{"eventId": "m4", "pageId": "", "eventTime": "2026-11-22T10:00:01Z"}': "empty_page_id",
    b'{"eventId": "m5", "pageId": "/a", "eventTime": "yesterday"}': "bad_event_time",
    b"\xff\xfe\x00{": "not_utf8",
}


@pytest.mark.parametrize("batch_cap", [None, 4], ids=["one batch", "batches of at most 4 records"])
def test_bronze_keeps_every_record_and_silver_splits_them_into_events_and_quarantine(spark, configured, batch_cap):
    """With a cap on a batch's records, the same records in three batches give the same tables: the
    duplicate, in the last batch, is found against what silver holds from the first."""
    lake = configured("hot_pages.threshold=3", f"analytical.max_offsets_per_trigger={batch_cap or 'null'}",
                      topics=("clicks",))
    valid = [click("e1", "/a", "10:00:01.000"), click("e2", "/a", "10:00:02.000"),
             click("e3", "/b", "10:00:03.000", campaign="winter")]  # a field the schema does not know
    duplicate = click("e1", "/a", "10:00:01.000")
    produced = [*valid, *MALFORMED, duplicate, None]  # one key: one partition, in this order
    send(lake, *produced)

    runs = {run.name: run for run in pipeline.backfill(spark, lake, report=lambda line: None)}

    assert runs["medallion"].rows == len(produced)
    assert runs["medallion"].batches == (1 if batch_cap is None else 3)
    bronze = table(spark, lake, BRONZE_CLICKS).orderBy("partition", "offset").collect()
    assert [row.value for row in bronze] == [bytes(v) if v is not None else None for v in produced]
    assert {row.key for row in bronze} == {b"k"}
    assert all(row.topic == lake.kafka.topics.clicks and row.kafkaTimestamp and row.ingestTime for row in bronze)
    assert json.loads(bronze[2].value)["campaign"] == "winter"  # the new field survives in bronze

    silver = table(spark, lake, SILVER_CLICKS)
    assert sorted((r.eventId, r.pageId) for r in silver.collect()) == [("e1", "/a"), ("e2", "/a"), ("e3", "/b")]
    first_copy = silver.where("eventId = 'e1'").first()
    assert first_copy.offset == 0 and first_copy.topic == lake.kafka.topics.clicks

    quarantine = {(bytes(row.value) if row.value is not None else None): row.reason
                  for row in table(spark, lake, SILVER_QUARANTINE).collect()}
    assert quarantine == {**MALFORMED, None: "null_value"}


def test_gold_5s_equals_a_plain_recount_of_silver_and_marks_hot_windows(spark, lake):
    send(lake, *(click(f"a{n}", "/a", f"10:00:0{n}.000") for n in range(5)),  # 5 clicks: hot
         *(click(f"b{n}", "/b", f"10:00:0{n}.500") for n in range(3)),  # 3: not hot
         click("a0", "/a", "10:00:00.000"),  # a duplicate
         click("c1", "/c", "10:00:07.000"))
    backfill(spark, lake)

    gold = table(spark, lake, GOLD_PAGE_CLICKS_5S)
    silver = table(spark, lake, SILVER_CLICKS)
    recount = (
        silver.groupBy("pageId", (F.floor(F.unix_millis("eventTime") / 5000) * 5000).alias("startMs"))
        .agg(F.countDistinct("eventId").alias("clickCount"))
        .select("pageId", F.timestamp_millis("startMs").alias("windowStart"),
                F.timestamp_millis(F.col("startMs") + 5000).alias("windowEnd"),
                F.col("clickCount"), (F.col("clickCount") > 3).alias("isHot"))
    )
    assert_df_equality(gold, recount, ignore_row_order=True, ignore_nullable=True)
    assert gold_counts(spark, lake) == {("/a", "10:00:00"): 5, ("/b", "10:00:00"): 3, ("/c", "10:00:05"): 1}
    assert [r.pageId for r in gold.where("isHot").collect()] == ["/a"]


def test_a_late_event_within_the_watermark_corrects_gold_and_a_later_one_stays_in_silver(spark, lake):
    send(lake, click("x1", "/x", "10:00:01.000"), click("y1", "/y", "10:20:00.000"))
    backfill(spark, lake)
    assert gold_counts(spark, lake)[("/x", "10:00:00")] == 1

    # Event time has reached 10:20, so the watermark is 10:10: 10:15 is late but within it,
    # 10:00 is beyond it.
    send(lake, click("y0", "/y", "10:15:02.000"), click("x2", "/x", "10:00:02.000"))
    runs = {run.name: run for run in pipeline.backfill(spark, lake, report=lambda line: None)}

    counts = gold_counts(spark, lake)
    assert counts[("/y", "10:15:00")] == 1
    assert counts[("/x", "10:00:00")] == 1  # x2 is too late for gold
    assert runs["medallion"].dropped_by_watermark == 1  # and reported so
    assert table(spark, lake, SILVER_CLICKS).where("eventId = 'x2'").count() == 1
    assert runs["medallion"].rows == 2
    assert_every_table_reads_alike(spark, lake.storage.root)


def medallion_only(spark, config) -> None:
    """A backfill of the medallion's query alone: the tests of its batches need no hourly stream."""
    pipeline.backfill(spark, config, report=lambda line: None, streams=[medallion.STREAM])


def forget_the_delta_commit(spark, path: str) -> None:
    """Delete a Delta table's newest commit, as if the writer had died before making it."""
    log = Path(path, "_delta_log")
    last = max(entry.name for entry in log.glob("*.json")).removesuffix(".json")
    for entry in log.iterdir():
        if last in entry.name:
            entry.unlink()
    spark._jvm.org.apache.spark.sql.delta.DeltaLog.clearCache()  # the session's snapshot has that commit


def test_a_batch_run_again_after_any_of_its_writes_adds_nothing_and_loses_nothing(spark, lake):
    """A crash after some of a batch's writes and before its checkpoint's commit: on restart Spark runs the
    batch again. Bronze and gold write once per batch (the query's id, the batch id: `writes.Txn`); silver
    finds the batch's new events against its version before the batch, so gold still gets the clicks
    whose silver write was done before the crash and its own was not."""
    send(lake, click("a1", "/a", "10:00:01.000"), click("a2", "/a", "10:00:02.000"), b"bad")
    medallion_only(spark, lake)
    forget_the_batch_commit(lake.checkpoint("medallion"))  # every write done, the batch not committed
    medallion_only(spark, lake)
    assert gold_counts(spark, lake) == {("/a", "10:00:00"): 2}
    assert (table(spark, lake, BRONZE_CLICKS).count(), table(spark, lake, SILVER_CLICKS).count(),
            table(spark, lake, SILVER_QUARANTINE).count()) == (3, 2, 1)

    send(lake, click("b1", "/b", "10:00:03.000"), click("a1", "/a", "10:00:01.000"))  # a1 again: a copy
    medallion_only(spark, lake)
    forget_the_batch_commit(lake.checkpoint("medallion"))
    # ... and gold's write lost too: the crash came between silver's commit and gold's.
    forget_the_delta_commit(spark, GOLD_PAGE_CLICKS_5S.at(lake.storage.root).path)
    assert gold_counts(spark, lake) == {("/a", "10:00:00"): 2}
    medallion_only(spark, lake)

    assert gold_counts(spark, lake) == {("/a", "10:00:00"): 2, ("/b", "10:00:00"): 1}
    assert (table(spark, lake, BRONZE_CLICKS).count(), table(spark, lake, SILVER_CLICKS).count()) == (5, 3)


def test_the_medallion_refuses_to_land_again_what_a_deleted_checkpoint_landed(spark, lake):
    send(lake, click("a1", "/a", "10:00:01.000"))
    backfill(spark, lake)
    shutil.rmtree(lake.checkpoint("medallion"))

    with pytest.raises(Exception, match="would land them twice"):
        backfill(spark, lake)
    assert gold_counts(spark, lake) == {("/a", "10:00:00"): 1}
    assert table(spark, lake, BRONZE_CLICKS).count() == 1


def test_maintain_drops_the_deletion_vectors_of_a_gold_table_made_with_them(spark, lake):
    """A lake from before gold stopped using deletion vectors: maintain purges and drops them, and
    deltalake then reads the rows Spark reads."""
    send(lake, *(click(f"a{n}", "/a", f"10:00:0{n}.000") for n in range(4)), click("b0", "/b", "10:00:01.000"))
    backfill(spark, lake)
    path = GOLD_PAGE_CLICKS_5S.at(lake.storage.root).path
    spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    spark.sql(f"UPDATE delta.`{path}` SET isHot = isHot WHERE pageId = '/a'")  # a write under the old protocol
    detail = f"DESCRIBE DETAIL delta.`{path}`"
    assert "deletionVectors" in spark.sql(detail).first()["tableFeatures"]
    before = gold_counts(spark, lake)
    assert before == {("/a", "10:00:00"): 4, ("/b", "10:00:00"): 1}

    maintain(spark, lake, lambda line: None, vacuum=False, tables=[GOLD_PAGE_CLICKS_5S])

    assert "deletionVectors" not in spark.sql(detail).first()["tableFeatures"]
    assert gold_counts(spark, lake) == before
    assert_every_table_reads_alike(spark, lake.storage.root)


def test_a_backfill_after_downtime_takes_everything_and_a_second_one_adds_nothing(spark, lake):
    send(lake, *(click(f"a{n}", "/a", f"10:00:0{n}.000") for n in range(4)))
    backfill(spark, lake)
    send(lake, *(click(f"b{n}", "/a", f"10:00:0{n}.500") for n in range(3)), b"garbage")  # while "down"

    rows = backfill(spark, lake)
    assert rows == {"medallion": 4, "gold_page_clicks_hourly": 2}
    assert gold_counts(spark, lake) == {("/a", "10:00:00"): 7}
    before = versions(spark, lake)

    again = backfill(spark, lake)
    assert again == dict.fromkeys(again, 0)
    assert versions(spark, lake) == before


def stop_when(said: str):
    """A report that sends this process SIGTERM (as a service manager's stop would) once a line says `said`."""
    def report(line: str) -> None:
        if said in line:
            os.kill(os.getpid(), signal.SIGTERM)
    return report


def test_a_stop_ends_a_backfill_at_its_running_layer_and_a_stopped_rebuild_publishes_nothing(spark, lake):
    send(lake, *(click(f"a{n}", "/a", f"10:00:0{n}.000") for n in range(4)), click("b0", "/b", "10:00:01.000"))

    stopped = pipeline.backfill(spark, lake, report=stop_when("[medallion] started"))
    assert [run.name for run in stopped] == ["medallion"], "a stream started after the stop"
    assert not GOLD_PAGE_CLICKS_HOURLY.at(lake.storage.root).exists(spark)

    # the next backfill goes on from the checkpoint: the records the stopped one did not read
    assert stopped[0].rows + backfill(spark, lake)["medallion"] == 5
    assert gold_counts(spark, lake) == {("/a", "10:00:00"): 4, ("/b", "10:00:00"): 1}
    before = versions(spark, lake)

    rebuilt = pipeline.rebuild(spark, lake, report=stop_when("[medallion_rebuild] started"))
    assert [run.name for run in rebuilt] == ["medallion_rebuild"]
    assert versions(spark, lake) == before, "a stopped rebuild published a table"
    assert gold_counts(spark, lake) == {("/a", "10:00:00"): 4, ("/b", "10:00:00"): 1}


def test_closed_hours_sum_their_5_second_windows(spark, lake):
    send(lake,
         *(click(f"a{n}", "/a", f"10:00:0{n}.000") for n in range(5)),  # hot window
         *(click(f"b{n}", "/a", f"10:30:00.{n}00") for n in range(2)),
         *(click(f"c{n}", "/b", f"10:59:59.{n}00") for n in range(3)),
         click("d1", "/a", "11:20:00.000"))  # moves the watermark to 11:10: hour 10 closes, hour 11 does not
    backfill(spark, lake)

    hourly = {(r.pageId, r.hourStart.hour): r for r in table(spark, lake, GOLD_PAGE_CLICKS_HOURLY).collect()}
    assert set(hourly) == {("/a", 10), ("/b", 10)}
    assert (hourly[("/a", 10)].clickCount, hourly[("/a", 10)].hotWindows, hourly[("/a", 10)].peakWindowClicks) == (7, 1, 5)
    assert (hourly[("/b", 10)].clickCount, hourly[("/b", 10)].hotWindows, hourly[("/b", 10)].peakWindowClicks) == (3, 0, 3)

    summed = (
        table(spark, lake, GOLD_PAGE_CLICKS_5S).where("windowStart < '2026-11-22 11:00:00'")
        .groupBy("pageId", F.date_trunc("hour", "windowStart").alias("hourStart"))
        .agg(F.sum("clickCount").alias("clickCount"), F.sum(F.col("isHot").cast("long")).alias("hotWindows"),
             F.max("clickCount").alias("peakWindowClicks"))
    )
    hours = table(spark, lake, GOLD_PAGE_CLICKS_HOURLY).select(*summed.columns)
    assert_df_equality(hours, summed, ignore_row_order=True, ignore_nullable=True)


def test_a_rebuild_from_bronze_gives_the_gold_the_incremental_runs_built_new_gold_tables_included(spark, lake,
                                                                                                   monkeypatch):
    send(lake, *(click(f"a{n}", "/a", f"10:00:0{n}.000") for n in range(5)), click("z", "/z", "10:00:09.000"))
    backfill(spark, lake)
    send(lake, *(click(f"b{n}", "/b", f"10:20:0{n}.000") for n in range(2)), click("a0", "/a", "10:00:00.000"),
         click("late", "/a", "10:15:01.000"), click("h", "/b", "11:31:00.000"), b"{}")
    backfill(spark, lake)
    # What the clicks sent say: a0's copy is one event; nothing is behind gold's watermark (10 minutes).
    events = {"a0", "a1", "a2", "a3", "a4", "z", "b0", "b1", "late", "h"}
    windows = {("/a", "10:00:00"): 5, ("/z", "10:00:05"): 1, ("/b", "10:20:00"): 2, ("/a", "10:15:00"): 1,
               ("/b", "11:31:00"): 1}
    quarantined = [(b"{}", "missing_event_id")]

    def silver_and_quarantine() -> tuple[set[str], list[tuple[bytes, str]]]:
        return ({row.eventId for row in table(spark, lake, SILVER_CLICKS).collect()},
                [(bytes(row.value), row.reason) for row in table(spark, lake, SILVER_QUARANTINE).collect()])

    assert (silver_and_quarantine(), gold_counts(spark, lake)) == ((events, quarantined), windows)
    built = {name: table(spark, lake, name) for name in (GOLD_PAGE_CLICKS_5S, GOLD_PAGE_CLICKS_HOURLY)}
    built = {name: spark.createDataFrame(frame.collect(), frame.schema) for name, frame in built.items()}
    # Silver gone wrong (a row lost, the quarantine emptied): the rebuild makes it again from bronze.
    spark.sql(f"DELETE FROM delta.`{SILVER_CLICKS.at(lake.storage.root).path}` WHERE eventId = 'z'")
    spark.sql(f"DELETE FROM delta.`{SILVER_QUARANTINE.at(lake.storage.root).path}`")

    # Interrupted once silver and gold's 5-s windows are published and the hourly stream's checkpoint is
    # gone, then run again, as its docstring says to.
    build = pipeline.backfill

    def interrupted_at_gold(spark_, config, report, streams, **options):
        if any(stream.layer == "gold" for stream in streams):
            raise RuntimeError("interrupted while gold is built")
        return build(spark_, config, report, streams, **options)

    monkeypatch.setattr(pipeline, "backfill", interrupted_at_gold)
    with pytest.raises(RuntimeError, match="interrupted while gold is built"):
        pipeline.rebuild(spark, lake, lambda line: None, WITH_EXAMPLE)
    monkeypatch.setattr(pipeline, "backfill", build)
    assert silver_and_quarantine() == (events, quarantined)
    gold_version = versions(spark, lake)[GOLD_PAGE_CLICKS_5S]
    # The registry with one more gold table: the rebuild builds it from bronze with the others.
    pipeline.rebuild(spark, lake, lambda line: None, WITH_EXAMPLE)

    assert (silver_and_quarantine(), gold_counts(spark, lake)) == ((events, quarantined), windows)
    for name, before in built.items():
        assert_df_equality(table(spark, lake, name), before, ignore_row_order=True, ignore_nullable=True)
    from delta.tables import DeltaTable

    publish = DeltaTable.forPath(spark, f"{lake.storage.root}/{GOLD_PAGE_CLICKS_5S}").history(1).first()
    assert publish["version"] == gold_version + 1  # one commit: readers see the old gold or the new
    assert publish["operationParameters"]["mode"] == "Overwrite"
    example = gold_page_clicks_1m.TABLE
    minutes_of_windows = (
        table(spark, lake, GOLD_PAGE_CLICKS_5S)
        .groupBy("pageId", F.date_trunc("minute", "windowStart").alias("windowStart"))
        .agg(F.sum("clickCount").alias("clickCount"))
    )
    assert_df_equality(table(spark, lake, example).drop("windowEnd"), minutes_of_windows, ignore_row_order=True,
                       ignore_nullable=True, ignore_column_order=True)
    [maintained] = maintain(spark, lake, lambda line: None, vacuum=False, tables=[example])
    assert maintained["table"] == example.name and maintained["zOrderBy"] == "pageId"

    # The rebuilt checkpoints carry on: new data goes through every layer once.
    send(lake, click("a9", "/a", "10:00:04.900"), click("n", "/n", "11:31:01.000"))
    rows = backfill(spark, lake)
    assert rows["medallion"] == 2
    # The 5-s table's one change since, /n's window, replaced its minute, 11:31, where /b's window is:
    # the hourly stream reads /n's window added and /b's removed and added unchanged.
    assert rows["gold_page_clicks_hourly"] == 3
    counts = gold_counts(spark, lake)
    assert counts[("/a", "10:00:00")] == 5  # a9 is past the watermark (11:21): silver only
    assert counts[("/n", "11:31:00")] == 1


def test_the_streams_run_continuously_and_bring_new_clicks_to_gold(spark, lake):
    from shared.config_loading import with_overrides
    from tests.helpers import wait_for

    fast = with_overrides(lake, ["analytical.triggers.medallion=500 ms",
                                 "analytical.triggers.gold=500 ms"])
    queries = [pipeline.start(spark, fast, stream, available_now=False) for stream in running(fast)]
    try:
        sent_at = time.time()  # the producer stamps each record (CreateTime) when it sends it
        send(fast, *(click(f"a{n}", "/a", f"10:00:0{n}.000") for n in range(4)), b"oops")

        def gold_has_all_four() -> bool:
            assert all(query.exception() is None for query in queries)
            return gold_counts(spark, fast).get(("/a", "10:00:00")) == 4

        wait_for(gold_has_all_four, 120, "the four clicks to reach gold")
        send(fast, click("a9", "/a", "10:00:04.500"))
        wait_for(lambda: gold_counts(spark, fast).get(("/a", "10:00:00")) == 5, 120, "the fifth click")
        assert table(spark, fast, SILVER_QUARANTINE).count() == 1
        assert table(spark, fast, GOLD_PAGE_CLICKS_5S).where("isHot").count() == 1

        # Gold's freshness: every valid click measured once, each between its append and the end of a
        # batch whose report is already here.
        [gold] = [query for query in queries if query.name == "medallion"]
        wait_for(lambda: sum(ProgressSummary.of(p).arrived_clicks for p in gold.recentProgress) == 5, 60,
                 "gold's reports of the five clicks")
        read_at = time.time()
        freshness = [seconds for p in gold.recentProgress for seconds, _ in ProgressSummary.of(p).freshness_s]
        assert freshness and all(0 < seconds <= read_at - sent_at for seconds in freshness), freshness
    finally:
        for query in queries:
            query.stop()
