"""Expectations on real Delta tables: the streams' policies as they write, and `lakehouse check`.

Threshold 3. The suites are the tables' own (analytical.quality); a table is corrupted on purpose
with Delta SQL to prove the check can fail.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from analytical import pipeline
from analytical.checks import check
from analytical.gold_page_clicks_5s import TABLE as GOLD_PAGE_CLICKS_5S
from analytical import medallion
from analytical.silver_clicks import QUARANTINE as SILVER_QUARANTINE
from analytical.silver_clicks import TABLE as SILVER_CLICKS
from shared.errors import LakehouseError
from shared.kafka import ensure_topics
from tests.conftest import make_config
from tests.helpers import ahead_of_the_clock, click, lakehouse_here, run_lakehouse, send


SKEW = "quality.max_clock_skew=1 minute"


def send_with_one_ahead(config, *before: bytes) -> None:
    """`before`, then the event of silver's expectation that the parsing cannot check: from a producer
    whose clock runs 30 minutes ahead, on a CreateTime topic, it is within the skew of its Kafka
    timestamp but not of its ingest time (tests allow 1 minute of skew here). Dated as it is sent: made
    as the module is collected, it was no longer ahead once a slow run reached the test 30 minutes on."""
    send(config, *before)
    ahead, created = ahead_of_the_clock("e-ahead", "/a")
    send(config, ahead, timestamp_ms=created)


def lake(config_overrides, *overrides: str):
    settings = make_config(*config_overrides, "hot_pages.threshold=3", SKEW, *overrides)
    ensure_topics(settings.kafka, [settings.kafka.topics.clicks])
    return settings


def silver_backfill(spark, config) -> pipeline.LayerRun:
    """Backfill the medallion's query (the hourly table plays no part in silver's expectations)."""
    [run] = pipeline.backfill(spark, config, lambda line: None, [medallion.STREAM])
    return run


@pytest.mark.parametrize("policy", ["warn", "drop"])
def test_silver_applies_its_expectations_as_it_writes_and_reports_them_in_progress(spark, config_overrides, policy):
    config = lake(config_overrides, f"quality.policies.silver_clicks={policy}")
    send_with_one_ahead(config, click("e1", "/a", "10:00:01.000"), click("e2", "/a", "10:00:02.000"))

    run = silver_backfill(spark, config)

    assert run.failed_expectations == {"silver_clicks.eventTimeNotAheadOfIngest": 1}
    silver = {row.eventId for row in SILVER_CLICKS.at(config.storage.root).read(spark).collect()}
    quarantine = [(row.reason, json.loads(row.value)["eventId"])
                  for row in SILVER_QUARANTINE.at(config.storage.root).read(spark).collect()]
    if policy == "warn":
        assert silver == {"e1", "e2", "e-ahead"} and quarantine == []
    else:
        assert silver == {"e1", "e2"} and quarantine == [("failed_expectation", "e-ahead")]


def test_the_fail_policy_stops_the_stream_naming_the_expectation(spark, config_overrides):
    config = lake(config_overrides, "quality.policies.silver_clicks=fail")
    send_with_one_ahead(config, click("e1", "/a", "10:00:01.000"))

    with pytest.raises(LakehouseError, match="eventTimeNotAheadOfIngest"):
        silver_backfill(spark, config)
    assert SILVER_CLICKS.at(config.storage.root).read(spark).count() == 0


def test_check_passes_on_the_medallion_and_fails_with_exit_1_on_a_corrupted_gold_table(spark, config_overrides):
    config = lake(config_overrides)
    send(config, *(click(f"a{n}", "/a", f"10:00:0{n}.000") for n in range(1, 5)),
         *(click(f"b{n}", "/b", f"10:00:0{n}.500") for n in range(1, 3)), click("late-hour", "/a", "11:30:00.000"))
    pipeline.backfill(spark, config, report=lambda line: None)

    rows, docs, skipped = check(spark, config, report=lambda line: None)

    assert [row["expectation"] for row in rows if not row["success"]] == [] and skipped == {}
    assert {row["table"] for row in rows} == {"silver/clicks", "silver/quarantine", "gold/page_clicks_5s",
                                              "gold/page_clicks_hourly"}
    index = Path(docs.removeprefix("file://"))
    assert index.is_file() and index.is_relative_to(Path(config.storage.root) / "_quality")

    gold = f"delta.`{config.storage.root}/{GOLD_PAGE_CLICKS_5S}`"
    spark.sql(f"UPDATE {gold} SET isHot = NOT isHot WHERE pageId = '/b'")  # 2 clicks marked hot
    spark.sql(f"INSERT INTO {gold} SELECT * FROM {gold} WHERE pageId = '/a'")  # the window twice
    run = run_lakehouse("check", "--format", "json", *(f"--set={item}" for item in (*config_overrides,
                                                                                     "hot_pages.threshold=3")))

    assert run.returncode == 1, run.stderr
    result = json.loads(run.stdout)
    failed = {(row["table"], row["expectation"], row["unexpected"]) for row in result["expectations"] if not row["success"]}
    # /a has two windows (10:00:00 and 11:30:00), now twice each: GX counts every row of a repeated
    # key. Hour 10:00 is closed: /a's hour no longer equals its doubled windows (clicks, hot windows),
    # and /b's window, now marked hot, no longer matches its hour's hot windows.
    assert failed == {("gold/page_clicks_5s", "isHotOverThreshold", 1),
                      ("gold/page_clicks_5s", "onePerPageAndWindow", 4),
                      ("gold/page_clicks_hourly", "clicksEqualItsWindows", 1),
                      ("gold/page_clicks_hourly", "hotWindowsEqualItsWindows", 2)}
    assert "Data Docs: file://" in run.stderr

    as_csv = lakehouse_here("check", "--format", "csv", *(f"--set={item}" for item in (*config_overrides,
                                                                                       "hot_pages.threshold=3")))
    assert as_csv.returncode == 1, as_csv.stderr
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    assert {(row["table"], row["expectation"], int(row["unexpected"])) for row in rows if row["success"] == "False"} == failed
    assert len(rows) == len(result["expectations"])
