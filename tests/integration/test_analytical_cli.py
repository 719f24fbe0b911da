"""Trend queries on a crafted history, and the medallion's commands as a user runs them.

One crafted history, two backfills (so gold has an older version). The questions are asked
in-process (one JVM) and through the `lakehouse` command (formats, --as-of, maintain): each command
once as the installed console script, its other calls in this process on the run's session
(tests.helpers.lakehouse_here). Expected answers are counted by hand from the records.
"""

from __future__ import annotations

import csv
import io
import json
import pathlib
import re
import shlex
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone

import pytest

from analytical import pipeline, trends
from analytical.gold_page_clicks_5s import TABLE as GOLD_PAGE_CLICKS_5S
from analytical.registry import STREAMS
from analytical.sql import SqlLake
from shared import PROJECT_ROOT
from shared.kafka import ensure_topics
from tests.conftest import make_config
from tests.helpers import click, lakehouse_here, run_lakehouse, send
from tests.readers import assert_every_table_reads_alike, tables_under


def lakehouse(overrides, *args, console_script: bool = False):
    """`lakehouse ARGS --set OVERRIDES`, which must succeed: in this process, or as the installed
    console script (a process and a JVM of its own) where the call tests the command's wiring."""
    command = run_lakehouse if console_script else lakehouse_here
    result = command(*args, *(f"--set={item}" for item in overrides))
    assert result.returncode == 0, result.stderr
    return result


def query_json(overrides, *args):
    return json.loads(lakehouse(overrides, "query", *args, "--format", "json").stdout)


@pytest.fixture(scope="module")
def history(spark, broker_overrides, tmp_path_factory):
    """Day 1, 10:00: /a 5 clicks (hot), /b 2; 11:00: /a 4 (hot), /b 1. Day 2, 09:00: /b 5 (hot) + 1.

    Built once for the module with two in-process backfills, so gold has an older version (returned
    with the --set values); the tests only read it, except the last, whose maintain changes no answer.
    """
    overrides = [*broker_overrides, f"kafka.topics.clicks=clicks-{uuid.uuid4().hex[:10]}",
                 f"storage.root={tmp_path_factory.mktemp('lakehouse')}", "spark.ui_enabled=false",
                 "hot_pages.threshold=3", "sessions.enabled=true"]  # every stream, the sessions' included
    config = make_config(*overrides)
    ensure_topics(config.kafka, [config.kafka.topics.clicks])
    send(config,
         *(click(f"a{n}", "/a", f"10:00:0{n}.000") for n in range(5)),
         *(click(f"b{n}", "/b", f"10:00:0{n}.500") for n in range(2)),
         *(click(f"c{n}", "/a", f"11:00:1{n}.000") for n in range(4)),
         click("d0", "/b", "11:00:20.000"))
    pipeline.backfill(spark, config, report=lambda line: None)
    day_one_version = max(_gold_versions(config.storage.root))
    send(config, *(click(f"e{n}", "/b", f"09:00:0{n}.000", day="2026-11-23") for n in range(6)))
    pipeline.backfill(spark, config, report=lambda line: None)
    assert max(_gold_versions(config.storage.root)) > day_one_version
    return config, overrides, day_one_version


def ask(spark, config, name, start=None, end=None, as_of=None, **values):
    """Question `name` asked by Spark and by DuckDB (in this process) of the lake, at a version when
    `as_of`: both engines must give the same rows."""
    windows = GOLD_PAGE_CLICKS_5S.at(config.storage.root).read(spark, as_of=as_of)
    rows, _ = trends.answer(trends.on_spark(windows, name, start, end, **values))
    lake = SqlLake(config.storage.root, versions={"gold.page_clicks_5s": int(as_of)} if as_of else None)
    assert trends.on_duckdb(lake, name, start, end, **values)[1] == rows
    return rows


def test_top_pages_over_a_range_and_all_time(spark, history):
    config, _, _ = history
    day_one = ask(spark, config, "top-pages", start=datetime(2026, 11, 22, tzinfo=timezone.utc),
                  end=datetime(2026, 11, 23, tzinfo=timezone.utc), limit=10)
    assert [(row["pageId"], row["clicks"], row["hotWindows"], row["peakWindowClicks"]) for row in day_one] == [
        ("/a", 9, 2, 5), ("/b", 3, 0, 2)]
    everything = ask(spark, config, "top-pages", limit=1)
    assert [(row["pageId"], row["clicks"]) for row in everything] == [("/a", 9)]  # a tie with /b: by pageId


def test_a_page_trend_per_hour_and_per_day(spark, history):
    config, _, _ = history
    hours = ask(spark, config, "trend", page="/b", bucket="hour")
    assert [(row["bucketStart"], row["clicks"], row["hotWindows"]) for row in hours] == [
        ("2026-11-22T10:00:00.000Z", 2, 0), ("2026-11-22T11:00:00.000Z", 1, 0), ("2026-11-23T09:00:00.000Z", 6, 1)]
    days = ask(spark, config, "trend", page="/b", bucket="day")
    assert [(row["bucketStart"], row["clicks"]) for row in days] == [
        ("2026-11-22T00:00:00.000Z", 3), ("2026-11-23T00:00:00.000Z", 6)]


def test_the_query_command_gives_hot_windows_in_csv_and_as_of_an_older_version(history):
    _, overrides, day_one_version = history
    result = lakehouse(overrides, "query", "hot-windows", "--format", "csv", console_script=True)
    assert "(DuckDB, in this process)" in result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [(row["pageId"], row["windowStart"], row["clickCount"]) for row in rows] == [
        ("/a", "2026-11-22T10:00:00.000Z", "5"), ("/a", "2026-11-22T11:00:10.000Z", "4"),
        ("/b", "2026-11-23T09:00:00.000Z", "5")]
    by_spark = lakehouse(overrides, "query", "hot-windows", "--format", "csv", "--engine", "spark")
    assert "(Spark" in by_spark.stderr and by_spark.stdout == result.stdout

    for engine in ("duckdb", "spark"):
        older = query_json(overrides, "hot-windows", "--as-of", str(day_one_version), "--engine", engine)
        assert [row["pageId"] for row in older] == ["/a", "/a"], engine


def _readme_sql_examples() -> list[list[str]]:
    """The `lakehouse sql` commands of README's "Any question in SQL", as a user would type them."""
    section = (PROJECT_ROOT / "README.md").read_text().split("### Any question in SQL")[1]
    commands: list[list[str]] = []
    for token in shlex.split(section.split("```bash")[1].split("```")[0], comments=True):
        if token == "lakehouse":
            commands.append([])
        else:
            commands[-1].append(token)
    return commands


def _rows(example: list[str], output: str) -> list[dict]:
    """A `lakehouse sql` answer in the format `example` asks for, each value as text; timestamps (ISO-8601)
    as instants."""
    form = example[example.index("--format") + 1] if "--format" in example else "table"
    if form == "json":
        rows = [{key: str(value) for key, value in row.items()} for row in json.loads(output)]
    elif form == "csv":
        rows = list(csv.DictReader(io.StringIO(output)))
    else:  # a header, a rule of dashes, then one line per row (no value here holds a space)
        header, _, *lines = output.strip().splitlines()
        rows = [dict(zip(header.split(), line.split())) for line in lines]
    return [{key: _instant(value) for key, value in row.items()} for row in rows]


def _instant(value: str) -> str | datetime:
    if re.fullmatch(r"\d{4}-\d\d-\d\dT\S+", value):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


def test_sql_gives_the_answer_spark_gives_now_and_at_an_older_version(spark, history):
    config, overrides, day_one_version = history
    per_page = ("SELECT pageId, sum(clickCount) AS clicks, count_if(isHot) AS hotWindows, "
                "max(clickCount) AS peakWindowClicks FROM gold.page_clicks_5s GROUP BY pageId ORDER BY clicks DESC, pageId")
    assert json.loads(lakehouse(overrides, "sql", per_page, "--format", "json").stdout) == ask(
        spark, config, "top-pages", limit=10)
    older = ["--version", f"gold.page_clicks_5s={day_one_version}"]
    assert json.loads(lakehouse(overrides, "sql", per_page, *older, "--format", "json").stdout) == ask(
        spark, config, "top-pages", as_of=str(day_one_version), limit=10)


def test_a_second_backfill_adds_nothing_then_maintain_compacts_and_a_trend_reads_few_files(spark, history):
    """Its time: a second backfill of every stream, then `maintain` as a user runs it (a console
    script with a JVM of its own: OPTIMIZE, Z-order and VACUUM of seven tables), then a trend by Spark;
    in a busy run, about two minutes."""
    config, history, _ = history
    again = json.loads(lakehouse(history, "analytical", "--available-now", "--format", "json").stdout)
    assert [layer["query"] for layer in again] == [stream.name for stream in STREAMS]
    assert all(layer["rows"] == 0 for layer in again)
    result = json.loads(lakehouse(history, "maintain", "--format", "json", console_script=True).stdout)
    gold = next(row for row in result if row["table"] == "gold/page_clicks_5s")
    assert gold["zOrderBy"] == "windowStart" and gold["filesAfter"] < gold["filesBefore"]
    assert {row["table"] for row in result} == {"bronze/clicks", "silver/clicks", "silver/quarantine",
                                                "gold/page_clicks_5s", "gold/page_clicks_hourly",
                                                "gold/user_sessions", "gold/page_conversion"}
    trend = lakehouse(history, "query", "trend", "--page", "/a", "--engine", "spark")
    files_read = int(re.search(r"(\d+) data files read", trend.stderr).group(1))
    assert 1 <= files_read <= gold["filesAfter"]
    assert [row.split()[1] for row in trend.stdout.splitlines()[2:]] == ["5", "4"]  # clicks per hour, as a table
    # Compacted and Z-ordered, and with ops/stream_progress (its maps) written by the commands:
    # every table still reads the same outside Spark.
    assert "ops/stream_progress" in tables_under(config.storage.root)
    assert_every_table_reads_alike(spark, config.storage.root)


def test_a_missing_table_says_which_backfill_to_run(config_overrides):
    result = run_lakehouse("query", "top-pages", *(f"--set={item}" for item in config_overrides))
    assert result.returncode == 2
    assert "lakehouse analytical --available-now" in result.stderr


def _gold_versions(root: str) -> list[int]:
    return [int(path.stem) for path in pathlib.Path(root, "gold/page_clicks_5s/_delta_log").glob("*.json")]


def test_query_over_a_range_and_as_of_a_time_from_the_command_line(history):
    _, overrides, day_one_version = history
    day_one = query_json(overrides, "top-pages", "--from", "2026-11-22T00:00:00Z", "--to", "2026-11-23T00:00:00Z")
    assert [(row["pageId"], row["clicks"]) for row in day_one] == [("/a", 9), ("/b", 3)]  # /b's day-2 clicks left out
    # An instant between gold's day-one commit and the next (their log files' times, which is what a
    # Delta reader goes by): the day-one version answers.
    log = pathlib.Path(overrides_root(overrides), "gold/page_clicks_5s/_delta_log")
    written = [(log / f"{version:020d}.json").stat().st_mtime for version in (day_one_version, day_one_version + 1)]
    at = datetime.fromtimestamp(sum(written) / 2, timezone.utc).isoformat(timespec="milliseconds")
    older = query_json(overrides, "hot-windows", "--as-of", at)
    assert [(row["pageId"], row["clickCount"]) for row in older] == [("/a", 5), ("/a", 4)]


def overrides_root(overrides: list[str]) -> str:
    return next(item.split("=", 1)[1] for item in overrides if item.startswith("storage.root="))


def _readme_sql_examples_answer_as_counted_by_hand(overrides: list[str]) -> None:
    """README's SQL questions, as written, on every table, each answer in the format the example asks
    for. Asked once the third day's two clicks on /s have gone through a backfill from the command
    line, its batches alone in ops/stream_progress (the history's backfills ran in process)."""
    examples = _readme_sql_examples()
    assert len(examples) == 5 and all(example[0] == "sql" for example in examples)
    answers = [_rows(example, lakehouse(overrides, *example).stdout) for example in examples]
    day_one, day_two = datetime(2026, 11, 22, tzinfo=timezone.utc), datetime(2026, 11, 23, tzinfo=timezone.utc)
    assert answers[:4] == [
        [],  # no page of the /product/ family
        [{"hourOfDay": "9", "hotWindows": "1"}, {"hourOfDay": "10", "hotWindows": "1"},  # /s's 2 clicks: not hot
         {"hourOfDay": "11", "hotWindows": "1"}],
        [],  # no record quarantined
        # closed hours only (CONTRACT.md): the third day's 09:00 hour is still open
        [{"hourStart": day_one + timedelta(hours=10), "clicks": "7", "hotWindows": "1"},  # /a 5 + /b 2
         {"hourStart": day_two + timedelta(hours=9), "clicks": "6", "hotWindows": "1"},
         {"hourStart": day_one + timedelta(hours=11), "clicks": "5", "hotWindows": "1"}],  # /a 4 + /b 1
    ]
    # the medallion read the two clicks from the topic, the hourly stream the one window they made
    # (gold/page_clicks_5s's change feed: s0 and s1 at 09:00:0x), the sessions the two events from silver
    assert [(row["queryName"], row["records"], row["largestBatch"]) for row in answers[4]] == [
        ("gold_page_clicks_hourly", "1", "1"), ("gold_user_sessions", "2", "2"), ("medallion", "2", "2")]


def test_status_counts_each_querys_batches_of_the_last_minutes_in_every_format(spark, history):
    """A backfill records its progress; a query's row from two hours ago counts only over 180 minutes;
    README's SQL examples give the answers counted by hand. (It adds a day of clicks to the module's
    history: the tests before it have asked their questions.)"""
    from pyspark.sql import functions as F

    from lakehouse.monitoring.stream_progress import table_location

    config, overrides, _ = history
    send(config, *(click(f"s{n}", "/s", f"09:00:0{n}.000", day="2026-11-24") for n in range(2)))  # a later day
    lakehouse(overrides, "analytical", "--available-now", "--format", "json")  # each stream records a batch
    _readme_sql_examples_answer_as_counted_by_hand(overrides)
    path = table_location(config)
    two_hours_ago = datetime.now(timezone.utc) - timedelta(hours=2)
    (spark.read.format("delta").load(path).limit(1)
     .withColumn("queryName", F.lit("retired_query")).withColumn("timestamp", F.lit(two_hours_ago))
     .write.format("delta").mode("append").save(path))
    recorded = [(row.queryName, datetime.fromtimestamp(row.micros / 1e6, timezone.utc)) for row in
                spark.read.format("delta").load(path).select("queryName", F.unix_micros("timestamp").alias("micros"))
                .collect()]

    def batches_since(minutes: int) -> dict[str, int]:
        since = datetime.now(timezone.utc) - timedelta(minutes=minutes)
        return dict(Counter(name for name, at in recorded if at >= since))

    for minutes in (60, 180):
        rows = json.loads(lakehouse(overrides, "status", "--minutes", str(minutes), "--format", "json").stdout)
        assert {row["queryName"]: row["batches"] for row in rows} == batches_since(minutes), minutes
    assert "retired_query" not in batches_since(60) and batches_since(180)["retired_query"] == 1
    assert {stream.name for stream in STREAMS} <= set(batches_since(60))

    as_csv = list(csv.DictReader(io.StringIO(lakehouse(overrides, "status", "--format", "csv").stdout)))
    assert {row["queryName"]: int(row["batches"]) for row in as_csv} == batches_since(60)
    as_table = lakehouse(overrides, "status", console_script=True).stdout.splitlines()
    assert as_table[0].split()[:2] == ["queryName", "batches"]
    assert {line.split()[0]: int(line.split()[1]) for line in as_table[2:] if line.strip()} == batches_since(60)


def test_maintain_vacuums_the_files_no_retained_version_needs_and_no_vacuum_keeps_them(spark, configured,
                                                                                        config_overrides):
    from deltalake import DeltaTable
    from urllib.parse import unquote

    lake = configured("hot_pages.threshold=3", topics=("clicks",))
    overrides = [*config_overrides, "hot_pages.threshold=3", "analytical.vacuum_retention=0 hours"]
    for minute in range(2):  # two backfills: two versions of gold, each with its own files
        send(lake, *(click(f"v{minute}-{n}", "/v", f"10:0{minute}:0{n}.000") for n in range(3)))
        pipeline.backfill(spark, lake, report=lambda line: None)
    gold = pathlib.Path(lake.storage.root, "gold/page_clicks_5s")

    def on_disk() -> set[str]:
        return {str(path.relative_to(gold)) for path in gold.rglob("*.parquet") if "_delta_log" not in path.parts}

    before = on_disk()
    kept = json.loads(lakehouse(overrides, "maintain", "--no-vacuum", "--format", "json").stdout)
    assert all("vacuumRetentionHours" not in row for row in kept)
    assert on_disk() > before, "compaction writes new files and deletes none"

    vacuumed = json.loads(lakehouse(overrides, "maintain", "--format", "json").stdout)
    assert {row["vacuumRetentionHours"] for row in vacuumed} == {0}
    newest = {str(pathlib.Path(unquote(uri.removeprefix("file://"))).relative_to(gold))
              for uri in DeltaTable(str(gold)).file_uris()}  # delta-rs reads the log itself
    assert on_disk() == newest and len(newest) < len(before)


def test_a_query_that_fails_at_every_restart_gives_up_after_max_restarts_with_exit_2(spark, configured,
                                                                                       config_overrides):
    """Records the medallion has not read are deleted from the topic (retention did it, say): with
    fail_on_data_loss, each restart of its query fails the same way, and after max_restarts the command
    exits 2 with the query's error as its last line."""
    from kafka import TopicPartition

    from shared.kafka import admin_client, topic_offsets

    lake = configured("hot_pages.threshold=3", topics=("clicks",))
    send(lake, *(click(f"x{n}", "/x", f"10:00:0{n}.000") for n in range(3)))
    pipeline.backfill(spark, lake, report=lambda line: None)
    send(lake, *(click(f"y{n}", "/x", f"10:01:0{n}.000") for n in range(3)))
    ends = {partition: latest for partition, (_, latest) in topic_offsets(lake.kafka, lake.kafka.topics.clicks).items()}
    with admin_client(lake.kafka) as admin:
        admin.delete_records({TopicPartition(lake.kafka.topics.clicks, p): end for p, end in ends.items()})
    send(lake, *(click(f"z{n}", "/x", f"10:02:0{n}.000") for n in range(3)))

    result = run_lakehouse("analytical", "--available-now", *(f"--set={item}" for item in (
        *config_overrides, "analytical.fail_on_data_loss=true", "analytical.max_restarts=2",
        "analytical.restart_backoff_s=0.1")), timeout=300)

    assert result.returncode == 2, result.stderr[-3000:]
    assert "restart 1/2" in result.stderr and "restart 2/2" in result.stderr and "restart 3/2" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        "error: the medallion query failed: KafkaIllegalStateException: Some data may have been lost")
