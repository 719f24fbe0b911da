"""Both paths with every table and checkpoint on an S3-compatible object store, on two servers written
apart (the project's embedded S3Proxy, and moto's server): `run` under traffic, a backfill, `rebuild`,
`check`, `forget`, `reconcile`, `query` and `sql` in both engines, `status`, `maintain`, the tables read from
outside by deltalake, Polars and DuckDB; and the one-line refusals of a store that cannot be used."""

from __future__ import annotations

import json
import os
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from analytical.bronze_clicks import TABLE as BRONZE_CLICKS
from analytical.silver_clicks import QUARANTINE as SILVER_QUARANTINE
from analytical.silver_clicks import TABLE as SILVER_CLICKS
from shared.kafka import ensure_topics
from shared.config_loading import with_overrides
from shared.storage import local_side
from tests.conftest import S3_CREDENTIALS, SECOND_STORE_BUCKET, free_port
from tests.helpers import files_holding, lakehouse_here, run_lakehouse, send
from tests.readers import assert_every_table_reads_alike
from tests.run_scenario import (ENDING_HOT, alerted, expected_alerts, expected_windows, gold, run_on_crafted_traffic,
                                run_options, windows_closed_by_the_newest_click)


#: What runs on each server after `run`: on the embedded one, every command that writes; on the second,
#: what DEPLOYMENT.md's table of tested stores promises (both paths, a backfill, `reconcile`, `sql`).
COMMANDS_ON = {"S3Proxy": (["analytical", "--available-now"], ["rebuild"], ["check"], ["maintain"]),
               "moto": (["analytical", "--available-now"],)}
#: A user only the quarantine knows (bronze keeps the records; silver and gold never see them), whom `forget`
#: erases from the store: the crafted clicks name no user, and the oracle's windows stay as they are.
FORGOTTEN = "s3-user"
QUARANTINED_RECORDS = [json.dumps({"eventId": f"q{n}", "userId": FORGOTTEN, "eventTime": "not a time"}).encode()
                       for n in range(2)]


@pytest.mark.parametrize("server", list(COMMANDS_ON))
def test_both_paths_on_the_object_store_alone_give_local_modes_answers_to_every_command(
        spark, config, config_overrides, server, request, tmp_path):
    """Its time: `run` and `rebuild` each start their own JVMs on the store, and every other command's
    reads and writes go over S3's HTTP, slower than a local disk's for Delta's many small files (and
    moto's server, in Python, is slower than S3Proxy)."""
    if server == "S3Proxy":
        store, s3_root = request.getfixturevalue("object_store"), request.getfixturevalue("s3_root")
    else:
        store = request.getfixturevalue("second_object_store")
        s3_root = f"s3a://{SECOND_STORE_BUCKET}/{uuid.uuid4().hex[:10]}"
    on_s3 = [*store, f"storage.root={s3_root}"]
    s3_config = with_overrides(config, on_s3)
    options = run_options([*config_overrides, *on_s3], "operational.mode=real-time",
                          "operational.real_time.checkpoint_interval=5 seconds")

    if server == "S3Proxy":
        ensure_topics(s3_config.kafka, [s3_config.kafka.topics.clicks])
        send(s3_config, *QUARANTINED_RECORDS)
    output = run_on_crafted_traffic(spark, s3_config, options, tmp_path / "run.log", real_time=True, clicks=ENDING_HOT)

    assert "Traceback" not in output
    assert alerted(s3_config) == expected_alerts(real_time=True, clicks=ENDING_HOT)
    assert gold(spark, s3_config) == expected_windows(ENDING_HOT)
    # a backfill, a rebuild of silver and gold from bronze (staged on the store, published in one commit each),
    # the checks and the maintenance: `run` and `rebuild` as a user runs them, each building its own session
    # from the configuration; the others in this process (their console scripts are tested on a local root)
    for command in COMMANDS_ON[server]:
        done = (run_lakehouse(*command, *options, timeout=600) if command == ["rebuild"]
                else lakehouse_here(*command, *options))
        assert done.returncode == 0, f"{command}: {done.stderr[-3000:]}"
    if server == "S3Proxy":
        assert_the_user_is_forgotten_on_the_store(s3_root, store, options)
    assert gold(spark, s3_config) == expected_windows(ENDING_HOT), "gold after the backfill (and the rebuild)"
    assert BRONZE_CLICKS.at(s3_root).read(spark).count() == len(ENDING_HOT), "bronze: every record sent"
    assert {row.eventId for row in SILVER_CLICKS.at(s3_root).read(spark).select("eventId").collect()} == {
        event_id for event_id, _, _ in ENDING_HOT}, "silver: each event once"
    # Every alerted window compared, the last one too, which no watermark closes: both paths stopped cleanly
    # (their marks on the store say so, where no lock here can) having read every click.
    verdict = json.loads(lakehouse_here("reconcile", "--format", "json", *options).stdout)
    alerted_windows = len(expected_alerts(clicks=ENDING_HOT))
    assert alerted_windows > len(set(expected_alerts()) & set(windows_closed_by_the_newest_click()))
    assert (verdict["windowsCompared"], verdict["matched"], verdict["pending"], verdict["unexplained"]) == (
        alerted_windows, alerted_windows, 0, 0), json.dumps(verdict, indent=1)

    sql = lakehouse_here("sql", "SELECT pageId, windowStart, clickCount FROM gold.page_clicks_5s", "--format", "json",
                         *options)
    assert sql.returncode == 0, sql.stderr
    assert {(row["pageId"], datetime.fromisoformat(row["windowStart"].replace("Z", "+00:00"))): row["clickCount"]
            for row in json.loads(sql.stdout)} == expected_windows(ENDING_HOT)
    here = [tmp_path, local_side(s3_root, "")]
    assert [path for folder in here for path in Path(folder).rglob("_delta_log")] == [], "a table on the local disk"
    assert [path for folder in here for path in Path(folder).rglob("offsets")] == [], "a checkpoint on the local disk"
    if server != "S3Proxy":
        return

    by_engine = {}
    for engine in ("duckdb", "spark"):
        answered = lakehouse_here("query", "top-pages", "--engine", engine, "--format", "json", *options)
        assert answered.returncode == 0, answered.stderr
        by_engine[engine] = json.loads(answered.stdout)
    totals = {}
    for (page, _), count in expected_windows(ENDING_HOT).items():
        totals[page] = totals.get(page, 0) + count
    assert by_engine["duckdb"] == by_engine["spark"]
    assert {row["pageId"]: row["clicks"] for row in by_engine["duckdb"]} == totals
    status = lakehouse_here("status", "--format", "json", *options)
    assert status.returncode == 0, status.stderr
    assert {row["queryName"] for row in json.loads(status.stdout)} >= {"hot_pages", "medallion"}

    environment = {**os.environ, "AWS_ENDPOINT_URL": s3_config.storage.s3.endpoint}
    assert_every_table_reads_alike(spark, s3_root, environment)
    assert sorted(path.name for path in local_side(s3_root, "").iterdir()) == ["_checkpoints", "_quality"], (
        "only the checkpoints' locks and the quality project live here")


def assert_the_user_is_forgotten_on_the_store(s3_root: str, store: list[str], options: list[str]) -> None:
    """`forget` on the store removes the user's records from bronze and the quarantine, and no object of the
    lake holds the id afterwards (S3Proxy keeps each object as a file under its run_dir's data folder)."""
    objects = Path(dict(item.split("=", 1) for item in store)["object_store.run_dir"], "data",
                   s3_root.removeprefix("s3a://"))
    assert files_holding(objects, FORGOTTEN), "the user's records reached the store"
    forgot = lakehouse_here("forget", "--user-id", FORGOTTEN, "--format", "json", *options)
    assert forgot.returncode == 0, forgot.stderr[-3000:]
    removed = {row["table"]: row["rowsRemoved"] for row in json.loads(forgot.stdout)["tables"]}
    assert {table: rows for table, rows in removed.items() if rows} == {
        BRONZE_CLICKS.name: len(QUARANTINED_RECORDS), SILVER_QUARANTINE.name: len(QUARANTINED_RECORDS)}, removed
    assert files_holding(objects, FORGOTTEN) == []


def test_a_store_that_cannot_be_used_is_said_in_one_line_before_spark_starts(
        config_overrides, object_store, s3_root, tmp_path):
    def refusal(*settings: str, env: dict[str, str] | None = None) -> str:
        done = run_lakehouse("analytical", "--available-now", *(f"--set={item}" for item in (
            *config_overrides, *object_store, f"storage.root={s3_root}", *settings)), env=env, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
        return done.stderr.strip().splitlines()[-1]

    port = free_port()
    assert refusal(f"storage.s3.endpoint=http://127.0.0.1:{port}").startswith(
        f"error: no object store answers at http://127.0.0.1:{port}")
    wrong = {**os.environ, "AWS_SECRET_ACCESS_KEY": "not-" + S3_CREDENTIALS["AWS_SECRET_ACCESS_KEY"]}
    assert "refuses these credentials for bucket tests" in refusal(env=wrong)
    assert "the bucket no-such-bucket does not exist" in refusal("storage.root=s3a://no-such-bucket/x")
    assert refusal("storage.root=gs://bucket/x").startswith("error: storage.root: gs://bucket/x has the scheme gs://")
    assert not list(tmp_path.rglob("*")), "nothing written"


def test_storage_start_status_and_stop_as_a_user_runs_them_leave_no_process(tmp_path):
    """The store's own commands, on a port and folder of this test's: start prints the endpoint with the
    bucket made, a second start is harmless, status says so (exit 0, exit 1 once stopped), stop ends it."""
    import re

    from tests.processes import alive

    endpoint = f"http://127.0.0.1:{free_port()}"
    settings = [f"--set=storage.s3.endpoint={endpoint}", "--set=storage.s3.path_style_access=true",
                f"--set=object_store.run_dir={tmp_path / 's3'}", "--set=storage.root=s3a://cli-bucket/lake"]
    environment = {**os.environ, **S3_CREDENTIALS}
    try:
        started = run_lakehouse("storage", "start", *settings, env=environment)
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == endpoint
        again = run_lakehouse("storage", "start", *settings, env=environment)
        assert again.returncode == 0 and again.stdout.strip() == endpoint and "already running" in again.stderr
        status = run_lakehouse("storage", "status", *settings, env=environment)
        assert status.returncode == 0, status.stdout + status.stderr
        pid = int(re.search(r"pid (\d+)", status.stdout).group(1))
        assert alive({pid}) and endpoint in status.stdout
    finally:
        stopped = run_lakehouse("storage", "stop", *settings, env=environment)
    assert stopped.returncode == 0, stopped.stderr
    assert not alive({pid})
    after = run_lakehouse("storage", "status", *settings, env=environment)
    assert after.returncode == 1, after.stdout
