"""`lakehouse forget` on a lake the medallion built from crafted records on the real broker: the user's rows
gone from every table, and the user's id found in no file under the root by a scan of the test's own
(Parquet decoded column by column, everything else read as bytes); every other row as it was, the request
recorded by its hash only, a second run removing nothing, and the streams carrying on after it."""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from delta.tables import DeltaTable

from analytical import medallion, pipeline
from analytical.bronze_clicks import TABLE as BRONZE
from analytical.erasure import erase
from analytical.erasure_hold import ErasureHold
from analytical.erasure_requests import TABLE as REQUESTS
from analytical.gold_page_clicks_5s import TABLE as GOLD_5S
from analytical.gold_user_sessions import TABLE as USER_SESSIONS
from analytical.silver_clicks import TABLE as SILVER
from shared.errors import LakehouseError
from tests.erasure_lake import FORGOTTEN, OTHERS, REMOVED, SETTINGS, THEIRS, every_row, without_the_user
from tests.helpers import click, files_holding, lakehouse_here, send, wait_for

UNREAD = click("f6", "/c", "10:06:10", userId=FORGOTTEN)


def test_forget_erases_every_row_and_byte_of_the_user_and_nothing_else(spark, configured, config_overrides):
    """Its time: four backfills (the lake, the medallion alone that leaves the sessions behind, their catch-up,
    the streams after the erasure), three erasures (refused, done, again as a command) and three scans of
    every file of the lake."""
    lake = configured(*SETTINGS, topics=("clicks",))
    root = lake.storage.root
    send(lake, *THEIRS, *OTHERS)
    pipeline.backfill(spark, lake, report=lambda line: None)
    # The sessions' stream stopped behind silver would read files the erasure deletes: refused, nothing deleted.
    send(lake, click("o9", "/c", "10:04:55", userId="u2"))
    pipeline.backfill(spark, lake, report=lambda line: None, streams=[medallion.STREAM])
    held = every_row(spark, root)
    with pytest.raises(LakehouseError, match="gold_user_sessions has not read silver/clicks up to version .* and is "
                                             "not running: catch it up first"):
        erase(spark, lake, [FORGOTTEN], report=lambda line: None)
    assert every_row(spark, root) == held
    pipeline.backfill(spark, lake, report=lambda line: None)
    before = every_row(spark, root)
    assert files_holding(Path(root), FORGOTTEN), "the lake holds the user before the erasure: the scan can see them"
    silver_version = DeltaTable.forPath(spark, SILVER.at(root).path).history(1).first().version
    # A click of the user the stopped medallion has not read: the erasure does not wait for it, and it never lands
    send(lake, UNREAD)

    rows = {row["table"]: row["rowsRemoved"] for row in erase(spark, lake, [FORGOTTEN], report=lambda line: None)}

    assert rows == REMOVED
    # Only the sessions' state still has them: its retained versions, which the stream alone rewrites (CONTRACT.md)
    left = files_holding(Path(root), FORGOTTEN)
    assert left and all(path.startswith("_checkpoints/gold_user_sessions/state/") for path in left), left
    after = every_row(spark, root)
    expected = without_the_user(before)
    assert {name: len(held) for name, held in expected.items()} != {name: len(held) for name, held in before.items()}
    assert after == expected, "a row of another user, or of gold, changed"

    request = REQUESTS.at(root).read(spark).collect()
    assert [(r.userIdSha256, dict(r.rowsRemoved)) for r in request] == [
        (hashlib.sha256(FORGOTTEN.encode()).hexdigest(), rows)]
    assert request[0].completedAt >= request[0].requestedAt
    assert not list(Path(root, "ops").glob("erasure_hold*")), "the erasure lifted its hold on the medallion"

    old = lakehouse_here("sql", "SELECT count(*) AS n FROM silver.clicks", f"--version=silver.clicks={silver_version}",
                         *(f"--set={item}" for item in (*config_overrides, *SETTINGS)))
    assert old.returncode == 2 and old.stderr.count("\n") == 1, old.stderr
    assert "data file of the version asked is gone: an erasure (`lakehouse forget`" in old.stderr, old.stderr

    # Again, as a user types it: nothing left to remove, and when the topic drops the user's records
    options = [f"--set={item}" for item in (*config_overrides, *SETTINGS)]
    again = lakehouse_here("forget", "--user-id", FORGOTTEN, "--format", "json", *options)
    assert again.returncode == 0, again.stderr
    answer = json.loads(again.stdout)
    assert {row["table"]: row["rowsRemoved"] for row in answer["tables"]} == dict.fromkeys(rows, 0)
    assert every_row(spark, root) == after
    requests = sorted((r.requestedAt, dict(r.rowsRemoved)) for r in REQUESTS.at(root).read(spark).collect())
    assert [removed for _, removed in requests] == [rows, dict.fromkeys(rows, 0)], "the second request: 0 rows each"
    kept = lake.broker.retention + lake.broker.segment_roll  # the topic's retention.ms and segment.ms, as the broker has them
    drops_by = datetime.fromisoformat(answer["topicDropsTheRecordsBy"].replace("Z", "+00:00"))
    assert abs(drops_by - (datetime.now(timezone.utc) + kept)) < timedelta(minutes=2), answer
    assert "drops the user's records by" in again.stderr
    # In this process, on its running session, it leaves the test run's priority as it is (tests/conftest.py checks);
    # a forget that starts its JVM lowers itself (tests/deployment/test_benchmarks.py's bench forget).
    assert "erased on the JVM already running in this process" in again.stderr, again.stderr

    for bad, says in ((["--user-id", ""], "user id 1 is empty"), (["--ids-file", f"{root}/none.txt"], "--ids-file"),
                      (["--user-id", "u1", f"--set=storage.root={root}/elsewhere"], "is not a lake")):
        refused = lakehouse_here("forget", *options, *bad)  # the last --set of a key wins
        assert refused.returncode == 2 and says in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr

    # The streams read on past the erasure's commits; the user's session the state held open closes unwritten;
    # the click they had not read lands in no table, and gold counts it, as it kept the erased clicks' counts.
    send(lake, click("o7", "/c", "10:06:00", userId="u2"), click("o8", "/z", "10:09:00", userId="u9"))
    runs = {run.name: run.rows for run in pipeline.backfill(spark, lake, report=lambda line: None)}
    assert runs["medallion"] == 3 and {row[0] for row in SILVER.at(root).read(spark).select("eventId").collect()} == {
        "o1", "o2", "o3", "o4", "o6", "o7", "o8", "o9"}
    counted = {(row.pageId, row.windowStart.strftime("%H:%M:%S"), row.clickCount)
               for row in GOLD_5S.at(root).read(spark).where("pageId = '/c'").collect()}
    assert ("/c", "10:06:10", 1) in counted, counted
    left = files_holding(Path(root), FORGOTTEN)
    assert all(path.startswith("_checkpoints/gold_user_sessions/state/") for path in left), left
    sessions = {(row.userId, row.sessionStart.strftime("%H:%M:%S")) for row in USER_SESSIONS.at(root).read(spark).collect()}
    assert ("u9", "10:05:00") in sessions and FORGOTTEN not in {user for user, _ in sessions}, sessions


def test_the_medallion_writes_nothing_while_an_erasure_holds_it_and_everything_once_lifted(spark, configured):
    lake = configured(topics=("clicks",))
    root = lake.storage.root
    send(lake, *OTHERS)
    hold = ErasureHold.under(root, None)
    placed = hold.place(120.0)
    seen: dict[str, object] = {}

    def while_it_holds() -> None:  # beside the backfill, which runs in the main thread (it handles signals)
        try:
            wait_for(lambda: hold.held_at(placed) is not None, 120, "the medallion's first batch holds")
            seen["batch"] = hold.held_at(placed)
            seen["landed"] = (BRONZE.at(root).read(spark).count(), SILVER.at(root).read(spark).count())
        finally:
            hold.lift()

    watcher = threading.Thread(target=while_it_holds)
    watcher.start()
    pipeline.backfill(spark, lake, report=lambda line: None, streams=[medallion.STREAM])
    watcher.join(10)

    assert seen == {"batch": 0, "landed": (0, 0)}, "held before it wrote anything"
    assert BRONZE.at(root).read(spark).count() == len(OTHERS), "lifted: every record landed"
