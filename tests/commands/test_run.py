"""`lakehouse run` as a user runs it: the fast path, the medallion beside it as a low-priority process,
one console view and one progress table for both, one writer per checkpoint."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from lakehouse.catalog import QUERIES as CATALOG_QUERIES
from lakehouse.catalog import queries_by_path
from shared.kafka import ensure_topics
from lakehouse.monitoring.stream_progress import TABLE as PROGRESS, table_location
from lakehouse.services.broker import EmbeddedBroker
from tests.conftest import embedded_alertmanager, free_port, make_config
from tests.helpers import (LAKEHOUSE, ahead_of_the_clock, assert_no_errors, assert_quiet, click, files_holding, lakehouse_here,
                           run_lakehouse, send, wait_for)
from tests.processes import alive, command_line, family, processes
from tests.topics import alert_records, read_to_end
from tests.run_scenario import (CLICKS, DAY, alerted, expected_alerts, expected_windows, gold, run_on_crafted_traffic,
                                run_options, windows_closed_by_the_newest_click)


#: Every query of both paths, from the catalog (the first test turns the sessions on, which the tests' settings turn off).
QUERIES = {query.name for query in CATALOG_QUERIES}
#: The queries a run has under the tests' settings.
RUN_QUERIES = {query.name for queries in queries_by_path(make_config()).values() for query in queries}


def settings(config_overrides, *more: str) -> list[str]:
    return run_options(config_overrides, *more)


#: A user's clicks sent while `run` runs, then erased by `lakehouse forget` beside it: a page of their own,
#: under the threshold, in a window no other click is in.
GONE_USER, GONE = "u-gone-42", [("g1", "/gone", "10:00:26.000"), ("g2", "/gone", "10:00:27.000")]


def test_run_feeds_both_paths_records_progress_and_refuses_a_second_writer(
        spark, config, config_overrides, tmp_path, alertmanager_tools):
    """Also `lakehouse forget` while run runs, its sessions' stream reading the silver the erasure rewrites;
    and its bridge to an Alertmanager of the test's own, which notifies each hot window once.

    Its time: run's three processes and two JVMs started and stopped, a second run refused, and a forget
    beside them (a JVM of its own on two busy cores, its wait for the medallion's running batch)."""
    manager = embedded_alertmanager(tmp_path / "alertmanager")
    manager.start(die_with_caller=True)
    options = settings(config_overrides, "analytical.niceness=3", "sessions.enabled=true",
                       f"alerting.alertmanager_url={manager.url}")
    root = Path(config.storage.root)

    def the_medallion_yields_a_second_run_is_refused_and_a_user_is_forgotten(run) -> None:
        now = list(processes())
        everything = family(run.pid, now)
        medallion = family(next(pid for pid in everything if "--progress-json" in command_line(pid)), now)
        niceness = {process.pid: process.niceness for process in now if process.pid in everything}
        assert {niceness[pid] for pid in medallion & set(niceness)} == {3}, "the medallion's process and its JVM, niced"
        assert {niceness[pid] for pid in set(niceness) - medallion} == {0}, "the fast path's, not"
        second = run_lakehouse("run", "--seconds", "5", *options, timeout=120)
        assert second.returncode == 2, second.stderr
        assert "is in use by pid" in second.stderr and "stop that run first" in second.stderr

        send(config, *(click(event_id, page, time, day=DAY, userId=GONE_USER) for event_id, page, time in GONE))
        forgotten = lakehouse_here("forget", "--user-id", GONE_USER, "--format", "json", *options)
        assert forgotten.returncode == 0, forgotten.stderr
        removed = {row["table"]: row["rowsRemoved"] for row in json.loads(forgotten.stdout)["tables"]}
        landed = removed["bronze/clicks"]  # 0 when the medallion read them after the request: they never land
        # silver's 0 too when the medallion held between its bronze and silver writes: it then writes silver without them
        assert landed in (0, len(GONE)) and removed["silver/clicks"] in (0, landed), forgotten.stderr
        assert removed == {"bronze/clicks": landed, "silver/clicks": removed["silver/clicks"], "silver/quarantine": 0,
                           "gold/user_sessions": 0}, forgotten.stderr
        # Its sessions' state still holds the open session (CONTRACT.md, Erasure); no table does.
        assert [path for path in files_holding(root, GONE_USER) if not path.startswith("_checkpoints/")] == []
        hot = {(page, start.strftime("%Y-%m-%dT%H:%M:%S.000Z")) for page, start in expected_alerts()}
        wait_for(lambda: set(manager.notified_windows()) == hot, 60, "each hot window notified through Alertmanager")
        assert set(manager.notified_windows().values()) == {1}, manager.notified_windows()

    try:
        output = run_on_crafted_traffic(spark, config, options, tmp_path / "run.log",
                                        while_running=the_medallion_yields_a_second_run_is_refused_and_a_user_is_forgotten)
    finally:
        manager.stop(quiet=True)

    assert "stop requested: stopping" in output and "Traceback" not in output
    assert_quiet(output)
    assert all(f"  {name} " in output for name in QUERIES), "one console view of both processes' queries"
    assert alerted(config) == expected_alerts(), "the erased user's clicks alerted nothing"
    assert gold(spark, config) == expected_windows([*CLICKS, *GONE]), "gold keeps the erased user's counts"
    assert [path for path in files_holding(root, GONE_USER) if not path.startswith("_checkpoints/")] == []

    status = lakehouse_here("status", "--format", "json", *options)
    assert status.returncode == 0, status.stderr
    summary = {row["queryName"]: row for row in json.loads(status.stdout)}
    assert set(summary) == QUERIES
    assert summary["hot_pages"]["batches"] >= 2 and summary["hot_pages"]["errors"] == 0
    assert summary["hot_pages"]["batchMsP50"] > 0
    # status read the progress in its own process (DuckDB): one batch per progress row recorded
    progress = spark.read.format("delta").load(config.path(*PROGRESS.split("/"))).where("batchId IS NOT NULL")
    recorded = Counter(row.queryName for row in progress.select("queryName").collect())
    assert {name: row["batches"] for name, row in summary.items()} == dict(recorded)


def test_in_real_time_mode_run_starts_the_fast_path_in_its_runtime_and_records_its_progress(
        spark, config, config_overrides, tmp_path):
    options = settings(config_overrides, "operational.mode=real-time", "operational.real_time.checkpoint_interval=5 seconds")

    output = run_on_crafted_traffic(spark, config, options, tmp_path / "run.log", real_time=True)

    assert "hot pages (real-time)" in output and "Traceback" not in output
    assert_quiet(output)
    assert "[hot_pages] real-time, running: lag " in output, "between batch reports the console says what it does"
    assert "is aborting" not in output, "stopping mid-batch logs the cancelled writers at ERROR unless silenced"
    assert alerted(config) == expected_alerts(real_time=True) != expected_alerts()  # /run's 5 clicks alert as 4
    assert gold(spark, config) == expected_windows()
    status = lakehouse_here("status", "--format", "json", *options)
    assert status.returncode == 0, status.stderr
    summary = {row["queryName"]: row for row in json.loads(status.stdout)}
    assert set(summary) == RUN_QUERIES, "the fast path's progress, recorded by run itself"
    assert summary["hot_pages"]["batches"] >= 1 and summary["hot_pages"]["errors"] == 0

    # Real-time alerts carry the largest doubling reached (/run's 5 clicks: 4), which the reconciliation
    # expects from gold's count: every hot window closed in both paths is compared and matches.
    reconciled = lakehouse_here("reconcile", "--format", "json", *options)
    assert reconciled.returncode == 0, reconciled.stderr
    verdict = json.loads(reconciled.stdout)
    hot_and_closed = len(set(expected_alerts()) & set(windows_closed_by_the_newest_click()))
    assert hot_and_closed == 2
    assert (verdict["windowsCompared"], verdict["matched"], verdict["pending"], verdict["unexplained"]) == (
        hot_and_closed, hot_and_closed, 0, 0), json.dumps(verdict, indent=1)


def test_when_one_query_fails_run_stops_the_others_and_exits_2_with_its_error(config, config_overrides):
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    ahead, created = ahead_of_the_clock("e-ahead", "/a")  # the producer's clock 30 minutes ahead
    send(config, ahead, timestamp_ms=created)

    result = run_lakehouse("run", *settings(config_overrides, "quality.policies.silver_clicks=fail",
                                            "quality.max_clock_skew=1 minute"), timeout=300)

    assert result.returncode == 2, result.stderr[-3000:]
    # Spark logs the failure with its stack traces on the way; the command's last word is one line.
    assert result.stderr.strip().splitlines()[-1] == (
        "error: the medallion query failed: expectation failed on silver/clicks (policy fail): "
        "eventTimeNotAheadOfIngest")


def test_a_broker_that_is_down_stops_run_at_once_with_a_clear_message(config_overrides):
    down = f"kafka.bootstrap_servers=127.0.0.1:{free_port()}"
    result = run_lakehouse("run", *(f"--set={item}" for item in (*config_overrides, down)), timeout=120)

    assert result.returncode == 2, result.stderr
    assert "no Kafka broker answers at 127.0.0.1:" in result.stderr and "Traceback" not in result.stderr


def test_the_demo_stops_at_once_with_a_clear_message_when_its_broker_cannot_start(tmp_path):
    with socket.socket() as squatter:  # something that is not a Kafka broker holds the demo's port
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        settings = [f"kafka.bootstrap_servers=127.0.0.1:{port}", f"broker.run_dir={tmp_path / 'broker'}",
                    f"storage.root={tmp_path / 'lake'}"]
        result = run_lakehouse("demo", *(f"--set={item}" for item in settings), timeout=120)

    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"error: port {port} on 127.0.0.1 is in use")
    assert "Traceback" not in result.stderr
    assert not EmbeddedBroker(make_config(*settings), log=lambda message: None).status().running, "nothing left running"


def stopped_while_starting(command: str, options: list[str], log: Path, starting: Callable[[subprocess.Popen], bool],
                           what: str, every_s: float = 0.5) -> tuple[str, set[int]]:
    """`lakehouse COMMAND OPTIONS`, sent SIGTERM the moment `starting(process)` holds (`what`): its output,
    once it has exited 0, and the processes it had started by then."""
    with open(log, "w") as stderr:
        process = subprocess.Popen([LAKEHOUSE, command, *options], stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        wait_for(lambda: starting(process) or process.poll() is not None, 120, what, every_s=every_s)
        started = family(process.pid)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0, log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
    output = log.read_text()
    assert "stop requested while starting: stopped" in output and "Traceback" not in output, output
    return output, started


def test_a_stop_while_run_is_starting_is_a_clean_stop_that_ends_every_process_it_started(
        config, config_overrides, tmp_path):
    """SIGTERM before `run` listens for stops (here: while its Spark session's JVM starts, in micro-batch
    mode, where the fast path runs in run's own process; in real-time mode run starts no JVM) still stops
    it cleanly: exit 0, no traceback, nothing it started left running."""
    log = tmp_path / "run.log"
    _, started = stopped_while_starting(
        "run", settings(config_overrides, "operational.mode=micro-batch"), log,
        lambda running: len(family(running.pid)) > 1, "run to start its Spark session's JVM", every_s=0.05)
    wait_for(lambda: not alive(started), 30, "every process run started to end")


def test_a_stop_during_the_medallions_first_commit_lets_that_commit_finish_then_stops_cleanly(
        config, config_overrides, tmp_path):
    """A stop that lands while a path starts (here: while the medallion's progress table gets its first
    commit, a Spark job) waits for the JVM call in flight: no job abandoned under a shutting-down JVM,
    no error or stack trace, and the commit it was making is whole."""
    progress_table = Path(table_location(config))
    output, _ = stopped_while_starting(
        "analytical", settings(config_overrides), tmp_path / "analytical.log", lambda _: progress_table.exists(),
        "the medallion to start writing its progress table", every_s=0.01)
    assert_no_errors(output)
    assert_quiet(output)
    assert (progress_table / "_delta_log" / f"{0:020}.json").exists(), "the first commit was finished, not abandoned"


#: The console's line for a hot-pages query started as it runs: no catch-up's reason after its id.
REAL_TIME_STARTED = re.compile(r"^\[hot_pages\] started \(query id [0-9a-f-]+\)$", re.MULTILINE)


#: How a stop reaches `run`: systemd's default (KillMode=control-group: SIGTERM to every process of the
#: unit at once), a container runtime's (SIGTERM to the main process only), a terminal's Ctrl-C (SIGINT
#: to the foreground process group).
STOPS = {
    "systemd": lambda pid: os.killpg(pid, signal.SIGTERM),
    "container": lambda pid: os.kill(pid, signal.SIGTERM),
    "terminal": lambda pid: os.killpg(pid, signal.SIGINT),
}


def committed_batches(root: str) -> dict[str, set[int]]:
    """Each query's committed batch ids, from its checkpoint's `commits` folder."""
    return {folder.name: {int(entry.name) for entry in (folder / "commits").iterdir() if entry.name.isdigit()}
            for folder in Path(root, "_checkpoints").iterdir() if (folder / "commits").is_dir()}


def test_a_clean_stop_in_real_time_mode_ends_with_the_running_batch_and_a_restart_resends_no_alert(
        spark, config, config_overrides, tmp_path):
    """Stopped each way a stop reaches it (`STOPS`), under traffic, and started again each time.

    Its time: three starts of `run` (two JVMs each), each until two more windows alerted in real time,
    and each stop waits for the running 10-s batch to end and commit."""
    from tests.traffic import Traffic
    from tests.truth import SHIPPED_BOUNDS

    # the shipped bounds, which the traffic's hostile records are made against: under the tests' 10-year
    # skew its clicks dated 2 hours ahead are valid and hold the watermark there, so all later clicks are late
    # and the medallion's shipped triggers: its query is then seldom in a batch when a stop comes (a stop
    # lets the running batch end, however busy the query: shared/stopping.stop_at_batch_end)
    options = settings(config_overrides, *SHIPPED_BOUNDS, "operational.mode=real-time",
                       "operational.real_time.checkpoint_interval=10 seconds", "hot_pages.threshold=10",
                       "analytical.triggers.medallion=5 seconds",
                       "analytical.triggers.gold=10 seconds")
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    traffic = Traffic(config.kafka, config.kafka.topics.clicks, rate=200, hot_rate=20, seed=29)  # 100 hot clicks a window
    traffic.start()

    def alerted_windows() -> int:
        return len(alerted(config)) if read_to_end(config.kafka, config.kafka.topics.alerts) else 0

    try:
        for way, stop in STOPS.items():  # run, stopped under traffic, and again: each restart resumes where the stop ended
            log = tmp_path / f"run-{way}.log"
            with open(log, "w") as stderr:
                running = subprocess.Popen([LAKEHOUSE, "run", *options], stdout=subprocess.DEVNULL, stderr=stderr,
                                           start_new_session=True)
                try:
                    # past any catch-up of the backlog (its alerts all leave as it ends, and the real-time
                    # query starts then): the stop is to land in a real-time batch
                    wait_for(lambda: REAL_TIME_STARTED.search(log.read_text()), 180, "the real-time query", every_s=1)
                    enough = alerted_windows() + 2
                    wait_for(lambda: alerted_windows() >= enough, 180, f"{enough} alerted windows", every_s=1)
                    started = family(running.pid)
                    stop(running.pid)
                    assert running.wait(timeout=10 + 60 + 60) == 0, f"{way}: {log.read_text()[-3000:]}"
                    wait_for(lambda: not alive(started), 10, f"every process of the run stopped the {way} way to end")
                finally:
                    if running.poll() is None:
                        os.killpg(running.pid, signal.SIGKILL)
    finally:
        traffic.stop()

    records = alert_records(config)
    sent = Counter((record["alertId"], record["clickCount"]) for record in records)
    assert len(sent) >= 4 * 3, "the hot page's windows, each with records at its crossing and doublings"
    assert [key for key, times in sent.items() if times > 1] == [], "an alert record sent again after a restart"
    recorded = {(row.queryName, row.batchId) for row in spark.read.format("delta").load(table_location(config))
                .where("batchId IS NOT NULL").select("queryName", "batchId").collect()}
    lost = {query: sorted(batch for batch in batches if (query, batch) not in recorded)
            for query, batches in committed_batches(config.storage.root).items()}
    assert {query: batches for query, batches in lost.items() if batches} == {}, "committed batches with no progress row"
    for log in sorted(tmp_path.glob("run-*.log")):
        output = log.read_text()
        assert "stopping at the end of the running batch" in output and "its last batch committed" in output, output
        assert "Traceback" not in output and "could not append" not in output, output
        assert_quiet(output)
