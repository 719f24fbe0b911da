"""The composed transforms and the write helpers that make replays harmless, on tiny hand-made frames.

Expected values are worked out here by hand from the rows each test writes, never by the code
under test.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from chispa import assert_df_equality
from pyspark.sql import functions as F

from analytical.gold_page_clicks_5s import page_clicks_5s
from analytical import writes
from analytical.tables import create_if_missing
from analytical.writes import Prune, new_rows, upsert
from operational.hot_pages import hot_page_alerts
from shared.rule import same_event
from tests.conftest import make_config
from tests.contract_oracle import alert_id
from tests.helpers import click

KAFKA_SCHEMA = "key binary, value binary, timestamp timestamp"
EVENTS_SCHEMA = "eventId string, pageId string, eventTime timestamp"


def at(text: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-22 {text}")


def test_the_fast_path_alerts_a_window_over_the_threshold_once_with_its_distinct_count(spark):
    """Threshold 3. /hot at 10:00:00-05: four events, one of them sent twice, and one invalid record;
    /hot at 10:00:05-10: three events (equal to the threshold: not hot); /cold: one event."""
    config = make_config("hot_pages.threshold=3")
    records = [click(f"h{n}", "/hot", f"10:00:0{n}.000") for n in range(4)]
    records += [click("h1", "/hot", "10:00:01.000"), b'{"eventId":"h9","pageId":"/hot"}']
    records += [click(f"n{n}", "/hot", f"10:00:0{5 + n}.000") for n in range(3)]
    records += [click("c0", "/cold", "10:00:02.000")]
    frame = spark.createDataFrame([(b"k", value, at("10:00:30")) for value in records], KAFKA_SCHEMA)

    alerts = [(row.key, json.loads(row.value)) for row in
              frame.transform(hot_page_alerts, config.hot_pages, config.quality).collect()]

    hot_alert_id = alert_id("/hot", "2026-11-22T10:00:00.000Z")
    assert [(key, alert["pageId"], alert["windowStart"], alert["windowEnd"], alert["clickCount"], alert["threshold"])
            for key, alert in alerts] == [
        (hot_alert_id, "/hot", "2026-11-22T10:00:00.000Z", "2026-11-22T10:00:05.000Z", 4, 3)]


def test_gold_counts_each_page_and_window_and_marks_hot_strictly_over_the_threshold(spark):
    config = make_config("hot_pages.threshold=2")
    events = spark.createDataFrame(
        [("a1", "/a", at("10:00:00")), ("a2", "/a", at("10:00:04.999")), ("a3", "/a", at("10:00:01")),
         ("a4", "/a", at("10:00:05")), ("b1", "/b", at("10:00:02")), ("b2", "/b", at("10:00:03"))],
        EVENTS_SCHEMA)
    expected = spark.createDataFrame(
        [("/a", at("10:00:00"), at("10:00:05"), 3, True), ("/a", at("10:00:05"), at("10:00:10"), 1, False),
         ("/b", at("10:00:00"), at("10:00:05"), 2, False)],
        "pageId string, windowStart timestamp, windowEnd timestamp, clickCount long, isHot boolean")
    actual = events.transform(page_clicks_5s, config.hot_pages)
    assert_df_equality(actual.select(*expected.columns), expected, ignore_row_order=True, ignore_nullable=True)


def test_the_pruning_range_spans_the_batch_with_its_margin_and_is_none_when_empty(spark):
    batch = spark.createDataFrame([("a", at("10:00:02")), ("b", at("10:07:00"))], "id string, eventTime timestamp")
    prune = Prune("eventTime", "eventTime", margin="10 minutes")
    condition = prune.condition(batch)
    assert condition.startswith("t.`eventTime` BETWEEN TIMESTAMP'2026-11-22")
    lower, upper = condition.split(" BETWEEN ")[1].split(" AND ")
    assert "10:00:02" in lower and lower.endswith("- INTERVAL 10 minutes")
    assert "10:07:00" in upper and upper.endswith("+ INTERVAL 10 minutes")
    assert prune.condition(batch.limit(0)) is None
    assert Prune("offset", "id").condition(spark.createDataFrame([(7,), (3,)], "id long")) == "t.`offset` BETWEEN 3 AND 7"


def insert_new(batch, path: str, keys: tuple[str, ...], match: str, prune: Prune) -> None:
    """Append what `new_rows` finds `batch` adds to the table at `path`, as silver's writes do."""
    new = new_rows(batch, batch.sparkSession.read.format("delta").load(path), keys, match, prune)
    if new is not None:
        new.write.format("delta").mode("append").save(path)


def test_new_rows_are_only_unseen_rows_so_a_replayed_batch_adds_nothing(spark, tmp_path):
    path = str(tmp_path / "silver")
    create_if_missing(spark, path, spark.createDataFrame([], EVENTS_SCHEMA).schema)
    prune = Prune("eventTime", "eventTime", margin="10 minutes")
    first = spark.createDataFrame([("e1", "/a", at("10:00:00")), ("e2", "/a", at("10:00:01"))], EVENTS_SCHEMA)
    insert_new(first, path, ("eventId",), "t.eventId = s.eventId", prune)
    insert_new(first, path, ("eventId",), "t.eventId = s.eventId", prune)  # the replay
    second = spark.createDataFrame([("e2", "/b", at("10:00:02")), ("e3", "/a", at("10:00:03"))], EVENTS_SCHEMA)
    insert_new(second, path, ("eventId",), "t.eventId = s.eventId", prune)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count()
    insert_new(first.limit(0), path, ("eventId",), "t.eventId = s.eventId", prune)  # an empty batch: no commit

    rows = sorted((r.eventId, r.pageId) for r in spark.read.format("delta").load(path).collect())
    assert rows == [("e1", "/a"), ("e2", "/a"), ("e3", "/a")]  # e2's first copy kept
    assert spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count() == history


def test_new_rows_hold_a_reused_key_that_match_tells_apart_and_keep_rows_out_of_the_range(spark, tmp_path):
    """Rows sharing a key hash with the batch are only candidates: `match` decides, within the range."""
    path = str(tmp_path / "silver")
    create_if_missing(spark, path, spark.createDataFrame([], EVENTS_SCHEMA).schema)
    prune = Prune("eventTime", "eventTime", margin="10 minutes")
    history = spark.createDataFrame([("e1", "/a", at("10:00:00")), ("e2", "/a", at("10:00:00"))], EVENTS_SCHEMA)
    insert_new(history, path, ("eventId",), same_event(timedelta(minutes=10)), prune)
    batch = spark.createDataFrame([("e1", "/b", at("10:25:00")),   # e1 again, 25 minutes later: another event
                                   ("e2", "/b", at("10:09:00")),   # e2's copy within the horizon: known
                                   ("e4", "/b", at("10:09:30"))], EVENTS_SCHEMA)
    insert_new(batch, path, ("eventId",), same_event(timedelta(minutes=10)), prune)

    rows = sorted((r.eventId, r.pageId) for r in spark.read.format("delta").load(path).collect())
    assert rows == [("e1", "/a"), ("e1", "/b"), ("e2", "/a"), ("e4", "/b")]


def test_upsert_writes_absolute_counts_so_a_replay_changes_nothing_and_a_correction_replaces(spark, tmp_path):
    path = str(tmp_path / "gold")
    schema = "pageId string, windowStart timestamp, clickCount long"
    create_if_missing(spark, path, spark.createDataFrame([], schema).schema)
    prune = Prune("windowStart", "windowStart")
    batch = spark.createDataFrame([("/a", at("10:00:00"), 3), ("/b", at("10:00:00"), 1)], schema)
    upsert(batch, path, ("pageId", "windowStart"), prune)
    upsert(batch, path, ("pageId", "windowStart"), prune)  # the replay
    correction = spark.createDataFrame([("/a", at("10:00:00"), 4), ("/a", at("10:00:05"), 1)], schema)
    upsert(correction, path, ("pageId", "windowStart"), prune)

    rows = sorted((r.pageId, r.windowStart, r.clickCount) for r in spark.read.format("delta").load(path).collect())
    assert rows == [("/a", at("10:00:00"), 4), ("/a", at("10:00:05"), 1), ("/b", at("10:00:00"), 1)]


def test_a_batch_with_nothing_in_its_range_is_appended_in_files_of_narrow_ranges_and_its_replay_replaces(
        spark, tmp_path, monkeypatch):
    """Hours 12 and 00 of one day, then hour 18 on top, then hour 12 again: the first two find the table
    empty in their range and append, sorted, 20 rows a file, so that each of the first batch's files
    holds one of its two hours (one task writes both); the replay of hour 12 finds its rows and
    replaces them, changing nothing, in files of hour 12 alone."""
    path = str(tmp_path / "gold")
    schema = "pageId string, windowStart timestamp, clickCount long"
    create_if_missing(spark, path, spark.createDataFrame([], schema).schema)
    prune = Prune("windowStart", "windowStart")
    early = [(f"/p{n}", at(f"00:00:{n:02d}"), n + 1) for n in range(20)]
    noon = [(f"/p{n}", at(f"12:00:{n:02d}"), n + 100) for n in range(20)]
    evening = [("/p0", at("18:00:00"), 7)]
    monkeypatch.setattr(writes, "FILE_ROWS", 20)
    upsert(spark.createDataFrame(noon + early, schema).coalesce(1), path, ("pageId", "windowStart"), prune)
    upsert(spark.createDataFrame(evening, schema), path, ("pageId", "windowStart"), prune)
    upsert(spark.createDataFrame(noon, schema), path, ("pageId", "windowStart"), prune)  # a replay

    table = spark.read.format("delta").load(path)
    rows = sorted((r.pageId, r.windowStart, r.clickCount) for r in table.collect())
    assert rows == sorted(early + noon + evening)
    history = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()
    assert [(h.operation, h.operationParameters["mode"]) for h in history[1:]] == [
        ("WRITE", "Append"), ("WRITE", "Append"), ("WRITE", "Overwrite")]  # after the table's creation
    per_file = (table.where("windowStart < TIMESTAMP'2026-11-22 18:00:00'")
                .groupBy(F.col("_metadata.file_name")).agg(F.min("windowStart"), F.max("windowStart")).collect())
    assert sorted({(low.hour, high.hour) for _, low, high in per_file}) == [(0, 0), (12, 12)]


def test_the_replaced_cells_are_the_batch_s_minutes_with_adjacent_ones_joined(spark):
    """Windows at 10:01:55, 09:52:30, 10:00:00 and 10:00:05 (twice) and one without a start: minute
    09:52 alone, and 10:00 with 10:01 as one range. Times are read and written in the session's time
    zone, as the range's text is."""
    starts = ["2026-11-22 10:01:55", "2026-11-22 09:52:30", "2026-11-22 10:00:00", "2026-11-22 10:00:05",
              "2026-11-22 10:00:05", None]
    batch = spark.createDataFrame([(start,) for start in starts], "start string").select(
        F.to_timestamp("start").alias("windowStart"))

    assert writes._cells(batch, Prune("windowStart", "windowStart")) == (
        "(`windowStart` >= TIMESTAMP'2026-11-22 09:52:00.000000'"
        " AND `windowStart` < TIMESTAMP'2026-11-22 09:53:00.000000')"
        " OR (`windowStart` >= TIMESTAMP'2026-11-22 10:00:00.000000'"
        " AND `windowStart` < TIMESTAMP'2026-11-22 10:02:00.000000')")
    assert writes._cells(batch.where("windowStart IS NULL"), Prune("windowStart", "windowStart")) is None


def test_a_correction_rewrites_the_minutes_it_changes_and_leaves_older_rows_in_their_file(spark, tmp_path):
    """One file holds minutes 10:00 and 10:05, as a live batch writes them. Two corrections of minute
    10:05 follow: the first splits 10:00's rows out of that file, the second leaves them there. A
    MERGE would have carried 10:00's rows into the file it writes each time, as every row it copies."""
    path = str(tmp_path / "gold")
    schema = "pageId string, windowStart timestamp, clickCount long"
    create_if_missing(spark, path, spark.createDataFrame([], schema).schema)
    prune = Prune("windowStart", "windowStart")
    keys = ("pageId", "windowStart")
    upsert(spark.createDataFrame([("/a", at("10:00:00"), 1), ("/a", at("10:05:00"), 1)], schema).coalesce(1),
           path, keys, prune)
    upsert(spark.createDataFrame([("/a", at("10:05:00"), 2)], schema), path, keys, prune)

    def file_of(window: str) -> str:
        [row] = (spark.read.format("delta").load(path).where(F.col("windowStart") == at(window))
                 .select("_metadata.file_name").collect())
        return row.file_name

    ten = file_of("10:00:00")
    upsert(spark.createDataFrame([("/a", at("10:05:00"), 3), ("/b", at("10:05:05"), 1)], schema), path, keys, prune)

    assert file_of("10:00:00") == ten
    rows = sorted((r.pageId, r.windowStart, r.clickCount) for r in spark.read.format("delta").load(path).collect())
    assert rows == [("/a", at("10:00:00"), 1), ("/a", at("10:05:00"), 3), ("/b", at("10:05:05"), 1)]


def test_a_write_made_once_is_found_past_other_writers_commits_and_made_again_only_when_missing(spark, tmp_path,
                                                                                               monkeypatch):
    """A batch run again after a restart writes only when its commit is not in the table. Its commit
    is looked for back to the query's commit of an earlier batch, past the commits of other writers
    (one more than the first page of history read, here of 2 commits)."""
    monkeypatch.setattr(writes, "HISTORY_PAGE", 2)
    path = str(tmp_path / "table")
    rows = spark.createDataFrame([(1,)], "n int")
    prune = Prune("n", "n")
    rows.write.format("delta").save(path)  # version 0
    for batch in (0, 1):  # versions 1, 2
        writes.append(rows, path, prune, writes.Txn("query", batch, may_be_written=False))
    for _ in range(writes.HISTORY_PAGE + 1):  # versions 3 to 5: maintenance, another writer
        rows.write.format("delta").mode("append").save(path)

    def count() -> int:
        return spark.read.format("delta").load(path).count()

    assert writes.commit_of(spark, path, writes.Txn("query", 1)) == 2
    assert writes.commit_of(spark, path, writes.Txn("query", 2)) is None
    assert writes.commit_of(spark, path, writes.Txn("another", 1)) is None
    writes.append(rows, path, prune, writes.Txn("query", 1))  # replayed, written: nothing
    assert count() == 6
    writes.append(rows, path, prune, writes.Txn("query", 2))  # replayed, never written: written
    assert count() == 7 and writes.commit_of(spark, path, writes.Txn("query", 2)) == 6
    assert writes.version_before(spark, path, writes.Txn("query", 2)) == 5  # what its first attempt read
    assert writes.version_before(spark, path, writes.Txn("query", 3)) == 6  # not written yet: the newest
