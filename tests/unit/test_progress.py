"""Progress of long work (shared.progress): plain lines off a terminal, a bar on one, the mode forced by
LAKEHOUSE_PROGRESS; and where a backfill's counts come from (shared.streaming: the Kafka backlog, and
supervise's `on_tick`). No Spark: the clock is injected, the queries are stand-ins."""

from __future__ import annotations

import io
import os
import signal
import threading
import time

import pytest

from shared import query_progress, streaming
from shared.query_errors import first_line
from shared.stopping import stop_at_batch_end
from shared.stream import Stage
from shared.errors import BrokerUnreachableError, LakehouseError
from shared.progress import ENV, ChangedRows, Progress, echo, tracked
from tests.conftest import make_config


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def unforced(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)


def line(label: str, done: int, total: int | None, unit: str, elapsed: float, detail: str = "") -> str:
    """The plain line expected for these inputs."""
    of = f" / {total:,} {unit} ({100 * done / total:.1f}%)" if total else f" {unit}"
    rate = done / elapsed
    shown_rate = f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"
    return f"{label}: {done:,}{of}, {shown_rate} {unit}/s, {elapsed:,.0f} s" + (f", {detail}" if detail else "")


def run(stream: io.StringIO, updates: list[tuple[float, int]], **options) -> Progress:
    clock = Clock()
    with Progress("[bronze_clicks]", stream=stream, clock=clock, **options) as progress:
        for now, done in updates:
            clock.now = now
            progress.update(done)
    return progress


def test_plain_lines_the_first_then_at_most_one_per_interval_and_always_the_last():
    out = io.StringIO()
    updates = [(1, 1_000), (5, 5_000), (11, 11_000), (12, 11_500), (20, 12_345)]

    run(out, updates, total=50_000, unit="rows", interval_s=10)

    assert out.getvalue().splitlines() == [
        line("[bronze_clicks]", 1_000, 50_000, "rows", 1),      # the first
        line("[bronze_clicks]", 11_000, 50_000, "rows", 11),    # 10 s after it; 5 s was too soon
        line("[bronze_clicks]", 12_345, 50_000, "rows", 20),    # the last, on close, 9 s after
    ]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_a_plain_line_reads_as_documented():
    out = io.StringIO()

    run(out, [(10, 12_345)], total=50_000, unit="rows")

    assert out.getvalue() == "[bronze_clicks]: 12,345 / 50,000 rows (24.7%), 1,234 rows/s, 10 s\n"


def test_without_a_total_a_plain_line_has_the_count_a_small_rate_and_the_detail():
    out, clock = io.StringIO(), Clock()
    progress = Progress("maintain", unit="tables", stream=out, clock=clock)
    clock.now = 8
    progress.update(2, detail="silver/clicks")
    clock.now = 9
    progress.close()
    progress.close()  # once only

    assert out.getvalue().splitlines() == [line("maintain", 2, None, "tables", 8, "silver/clicks"),
                                           line("maintain", 2, None, "tables", 9, "silver/clicks")]
    assert out.getvalue().splitlines()[0] == "maintain: 2 tables, 0.25 tables/s, 8 s, silver/clicks"


def test_advance_adds_to_the_count_and_a_total_learnt_later_is_shown():
    out, clock = io.StringIO(), Clock()
    with Progress("generate", unit="records", stream=out, clock=clock) as progress:
        clock.now = 2
        progress.advance(300)
        progress.advance(200)
        progress.update(progress.done, total=2_000)

    assert out.getvalue().splitlines() == [line("generate", 300, None, "records", 2),
                                           line("generate", 500, 2_000, "records", 2)]


def test_tracked_names_the_item_being_worked_on_and_ends_at_the_total(capsys):
    seen = list(tracked(["bronze/clicks", "silver/clicks", "gold/page_clicks_5s"], "maintain", unit="tables"))

    lines = capsys.readouterr().err.splitlines()
    assert seen == ["bronze/clicks", "silver/clicks", "gold/page_clicks_5s"]
    assert lines[0].startswith("maintain: 0 / 3 tables (0.0%), ") and lines[0].endswith(", bronze/clicks")
    assert lines[-1].startswith("maintain: 3 / 3 tables (100.0%), ") and lines[-1].endswith(" s")
    assert len(lines) == 2  # within 10 s, only the first and the last


def test_on_a_terminal_a_bar_is_drawn_in_place_with_the_count():
    terminal = Terminal()

    progress = run(terminal, [(1, 1_234)], total=5_000, unit="rows")

    assert progress.mode == "bar"
    output = terminal.getvalue()
    assert "\r" in output and "[bronze_clicks]" in output and "1234/5000" in output
    assert output.endswith("\n")  # the bar is left in place, the cursor below it


def test_a_message_goes_above_an_open_bar_instead_of_through_it():
    terminal = Terminal()
    with Progress("[silver_clicks]", total=10, unit="rows", stream=terminal) as progress:
        progress.update(3)
        echo("[silver_clicks] finished", stream=terminal)

    before, message, after = terminal.getvalue().partition("[silver_clicks] finished\n")
    assert message and before.endswith("\r")  # the bar cleared: the message on a line of its own
    assert after.startswith("\r[silver_clicks]:")  # and the bar drawn again below it


def test_off_prints_nothing_even_on_a_terminal(monkeypatch):
    monkeypatch.setenv(ENV, "off")
    terminal, plain = Terminal(), io.StringIO()

    shown = [run(stream, [(1, 10), (30, 20)], total=20, unit="rows").shown for stream in (terminal, plain)]

    assert shown == [False, False]
    assert terminal.getvalue() == plain.getvalue() == ""


def test_plain_can_be_forced_on_a_terminal_and_a_bar_off_one(monkeypatch):
    monkeypatch.setenv(ENV, "plain")
    terminal = Terminal()
    run(terminal, [(10, 12_345)], total=50_000, unit="rows")
    # one line: the last says nothing the first did not
    assert terminal.getvalue() == "[bronze_clicks]: 12,345 / 50,000 rows (24.7%), 1,234 rows/s, 10 s\n"

    monkeypatch.setenv(ENV, "bar")
    log = io.StringIO()
    assert run(log, [(1, 7)], total=9, unit="rows").mode == "bar" and "\r" in log.getvalue()


def test_an_unknown_mode_is_refused_with_the_choices(monkeypatch):
    monkeypatch.setenv(ENV, "fancy")

    with pytest.raises(LakehouseError, match="LAKEHOUSE_PROGRESS must be one of plain, bar, off, got 'fancy'"):
        Progress("x", stream=io.StringIO())


# -- where a backfill's counts come from (shared.streaming) ----------------------------------


def kafka_batch(batch_id: int, rows: int, start: dict | None, latest: dict) -> dict:
    return {"batchId": batch_id, "numInputRows": rows,
            "sources": [{"description": "KafkaV2[Subscribe[clicks]]", "startOffset": start, "latestOffset": latest}]}


def test_the_backlog_is_the_latest_offsets_minus_the_start_over_every_partition():
    progress = kafka_batch(4, 0, {"clicks": {"0": 10, "1": 20}}, {"clicks": {"0": 160, "1": 95}})

    assert query_progress.ProgressSummary.of(progress).backlog == (160 - 10) + (95 - 20)


@pytest.mark.parametrize("start, latest", [
    (None, {"clicks": {"0": 5}}),                                # the first batch ever: no start offsets
    ({"clicks": {"0": 1}}, {"clicks": {"0": 5, "1": 9}}),        # a partition with no start
    ({"sourceVersion": 1, "reservoirVersion": 3}, None),         # a Delta source
])
def test_no_backlog_when_the_offsets_do_not_give_it_exactly(start, latest):
    assert query_progress.ProgressSummary.of(kafka_batch(0, 1, start, latest)).backlog is None


class FakeQuery:
    """A query whose batches appear one per poll, then ends."""

    id = "fake"
    status = {"isTriggerActive": False}

    def __init__(self, batches: list[dict]) -> None:
        self.batches, self.polls = batches, 0

    @property
    def recentProgress(self) -> list[dict]:
        self.polls += 1
        return self.batches[:self.polls]

    @property
    def isActive(self) -> bool:
        return self.polls < len(self.batches)

    def exception(self) -> None:
        return None

    def awaitTermination(self, timeout: float | None = None) -> bool:
        return not self.isActive

    def stop(self) -> None:
        pass


def test_supervise_ticks_with_the_running_totals_and_the_first_batch_backlog_is_the_total(monkeypatch):
    monkeypatch.setattr(streaming, "TICK_S", 0.0)
    start, latest = {"clicks": {"0": 100}}, {"clicks": {"0": 400}}
    query = FakeQuery([kafka_batch(n, 100, {"clicks": {"0": 100 * (n + 1)}} if n else start, latest) for n in range(3)])
    ticks: list[tuple[int, int | None]] = []

    totals = streaming.supervise(
        {"bronze_clicks": lambda: query}, make_config().analytical, seconds=None, report=lambda line: None,
        on_tick=lambda by_name: ticks.append((by_name["bronze_clicks"].rows, by_name["bronze_clicks"].backlog)))

    assert ticks == [(100, 300), (200, 300), (300, 300)]
    assert totals["bronze_clicks"].rows == totals["bronze_clicks"].backlog == 300


def test_a_progress_report_is_read_once_into_the_fields_every_reader_uses():
    report = {
        "name": "hot_pages", "id": "q", "runId": "r", "batchId": 7, "timestamp": "2026-11-22T10:00:00.000Z",
        "numInputRows": 90, "inputRowsPerSecond": 30.0, "processedRowsPerSecond": 45.0,
        "durationMs": {"triggerExecution": 2500, "queryPlanning": 40},
        "eventTime": {"watermark": "2026-11-22T09:59:50.000Z"},
        "stateOperators": [{"numRowsTotal": 5, "memoryUsedBytes": 100, "numRowsDroppedByWatermark": 2},
                           {"numRowsTotal": 3, "memoryUsedBytes": 50, "numRowsDroppedByWatermark": 1}],
        "sources": [{"startOffset": {"clicks": {"0": 10}}, "endOffset": {"clicks": {"0": 100}},
                     "latestOffset": {"clicks": {"0": 120}},
                     "metrics": {"avgOffsetsBehindLatest": "20.0", "maxOffsetsBehindLatest": "20"}}],
        "sink": {"numOutputRows": 4},
        "observedMetrics": {"parsed_clicks": {"records": 90, "invalid": 3, "not_json": 2, "bad_event_time": 1,
                                              "empty_page_id": 0}},
    }
    summary = query_progress.ProgressSummary.of(report)

    assert (summary.name, summary.batch_id, summary.input_rows, summary.sink_rows) == ("hot_pages", 7, 90, 4)
    assert summary.invalid_by_reason == {"not_json": 2, "bad_event_time": 1} and summary.invalid == 3
    assert (summary.state_rows, summary.state_memory_bytes, summary.dropped_by_watermark) == (8, 150, 3)
    assert summary.processed_offsets == {("clicks", 0): 100} and summary.latest_offsets == {("clicks", 0): 120}
    assert (summary.lag, summary.max_offsets_behind, summary.backlog) == (20.0, 20, 110)
    assert summary.ended_at.isoformat() == "2026-11-22T10:00:02.500000+00:00"
    assert query_progress.records_behind(summary, {("clicks", 0): 150, ("other", 0): 9}, "clicks") == 50


def test_the_clicks_a_processor_drops_as_late_itself_count_as_dropped_by_the_watermark():
    report = {"name": "hot_pages", "batchId": 3, "stateOperators": [{"numRowsDroppedByWatermark": 0}],
              "observedMetrics": {query_progress.LATE_METRICS: {"late": 21}}}

    assert query_progress.ProgressSummary.of(report).dropped_by_watermark == 21


def test_what_a_batch_observes_inside_foreach_batch_joins_its_own_report_only():
    observations = query_progress.BatchObservations(limit=2)
    observations.record("q1", 7, {query_progress.LATE_METRICS: {"late": 3},
                                  "expectations_gold": {"policy": "warn", "rows": 9, "clickCountPositive": 2}})
    observations.record("q1", 7, {query_progress.LATE_METRICS: {"late": 4}})  # the replay's, over the first
    observations.record("q2", 7, {query_progress.LATE_METRICS: {"late": 5}})

    assert observations.of("q1", 7) == {query_progress.LATE_METRICS: {"late": 4}}
    assert observations.of("q1", 8) == {} and observations.of(None, 7) == {}
    observations.record("q3", 1, {})
    assert observations.of("q1", 7) == {}  # beyond the limit, the oldest goes


def test_a_report_reads_its_batch_s_observations_as_if_spark_had_made_them(monkeypatch):
    observations = query_progress.BatchObservations()
    monkeypatch.setattr(query_progress, "BATCH_OBSERVATIONS", observations)
    observations.record("q", 4, {query_progress.LATE_METRICS: {"late": 2},
                                 "expectations_gold_page_clicks_5s": {"policy": "warn", "rows": 9, "windowLength": 1}})
    report = {"id": "q", "name": "gold_page_clicks_5s", "batchId": 4, "observedMetrics": {"arrivals": {"clicks": 9}}}

    summary = query_progress.ProgressSummary.of(report)

    assert (summary.dropped_by_watermark, summary.expectations, summary.arrived_clicks) == (2, {"gold_page_clicks_5s.windowLength": 1}, 9)
    assert set(summary.data["observedMetrics"]) == {"arrivals", query_progress.LATE_METRICS,
                                                    "expectations_gold_page_clicks_5s"}
    assert query_progress.ProgressSummary.of({**report, "batchId": 5}).dropped_by_watermark == 0


def test_gold_freshness_is_each_quantile_of_the_clicks_kafka_times_up_to_the_batch_end():
    # A batch from 10:00:00 to 10:00:04 (its end 1795773604000 ms after the epoch is 2026-11-27T10:00:04Z)
    # read 300 clicks; 100 quantiles of their Kafka times, the oldest 10:00:00.500 and the rest 10:00:02.
    kafka_times = [1795773600500] + [1795773602000] * 99
    report = {"name": "gold_page_clicks_5s", "batchId": 4, "timestamp": "2026-11-27T10:00:00.000Z",
              "durationMs": {"triggerExecution": 4000},
              "observedMetrics": {query_progress.ARRIVAL_METRICS: {"clicks": 300, "kafkaTimes": kafka_times}}}

    freshness = query_progress.ProgressSummary.of(report).freshness_s

    assert freshness == [(3.5, 3.0)] + [(2.0, 3.0)] * 99


def test_a_batch_without_clicks_or_without_their_kafka_times_has_no_freshness():
    empty = {"name": "gold_page_clicks_5s", "batchId": 5, "timestamp": "2026-11-27T10:00:00.000Z",
             "durationMs": {"triggerExecution": 10},
             "observedMetrics": {query_progress.ARRIVAL_METRICS: {"clicks": 0, "kafkaTimes": None}}}
    not_observed = {"name": "silver_clicks", "batchId": 5, "timestamp": "2026-11-27T10:00:00.000Z",
                    "durationMs": {"triggerExecution": 10}}

    assert query_progress.ProgressSummary.of(empty).freshness_s == []
    assert query_progress.ProgressSummary.of(not_observed).freshness_s == []


def test_a_status_row_prints_when_it_says_something_new_and_its_clocks_do_not_count():
    printed: list[str] = []
    rows = ChangedRows(printed.append)
    rows("  bronze_clicks   batch 3  lag 0\n  silver_clicks   batch 2  lag 0")
    rows("  bronze_clicks   batch 3  lag 0\n  silver_clicks   batch 3  lag 0")
    rows("[hot_pages] real-time, running: lag 0, last alert 1.5 s ago")
    rows("[hot_pages] real-time, running: lag 0, last alert 11.5 s ago")
    rows("[hot_pages] real-time, running: lag 12, last alert 12.0 s ago")
    assert printed == ["  bronze_clicks   batch 3  lag 0", "  silver_clicks   batch 2  lag 0",
                       "  silver_clicks   batch 3  lag 0",
                       "[hot_pages] real-time, running: lag 0, last alert 1.5 s ago",
                       "[hot_pages] real-time, running: lag 12, last alert 12.0 s ago"]


def test_a_stage_runs_its_first_query_to_its_end_then_the_next_one_and_counts_both_batches_once(monkeypatch):
    monkeypatch.setattr(streaming, "TICK_S", 0.0)
    catch_up = FakeQuery([kafka_batch(n, 100, None, None) for n in range(2)])
    real_time = FakeQuery([kafka_batch(n, 10, None, None) for n in range(2, 5)])
    follows: list[bool] = []  # whether the first query had ended when the next one was started

    def then():
        follows.append(not catch_up.isActive)
        return real_time

    said: list[str] = []
    totals = streaming.supervise(
        {"hot_pages": lambda: Stage(catch_up, then, why="a backlog", note="caught up")},
        make_config().operational, seconds=None, report=said.append, status_lines=False)

    assert follows == [True]
    assert said[:2] == ["[hot_pages] started (query id fake): a backlog", "[hot_pages] caught up"]
    assert said[2] == "[hot_pages] started (query id fake)" and said[-1] == "[hot_pages] finished"
    assert (totals["hot_pages"].batches, totals["hot_pages"].rows) == (5, 230)


def test_a_stop_that_arrives_as_a_stage_ends_starts_no_next_query(monkeypatch):
    """A stop landing as the catch-up ends: a query started then would be stopped in its start."""
    monkeypatch.setattr(streaming, "TICK_S", 0.0)

    class EndsWithAStop(FakeQuery):
        @property
        def isActive(self) -> bool:
            if self.polls >= len(self.batches):
                os.kill(os.getpid(), signal.SIGINT)  # a Ctrl-C, just after the loop's check for one
                return False
            return True

    catch_up = EndsWithAStop([kafka_batch(n, 100, None, None) for n in range(2)])
    said: list[str] = []
    streaming.supervise(
        {"hot_pages": lambda: Stage(catch_up, lambda: pytest.fail("the next step started"),
                                              why="a backlog", note="caught up")},
        make_config().operational, seconds=None, report=said.append, status_lines=False)

    assert said == ["[hot_pages] started (query id fake): a backlog",
                    "[hot_pages] caught up; stop requested: stopped before the next step"]


def test_a_stage_whose_next_start_finds_the_broker_down_is_restarted_from_its_starter_after_the_backoff(monkeypatch):
    """The broker killed as the catch-up's micro-batch ends: its last batch needed no broker, but the next
    step's start asks the broker how old the backlog is. That is a broker restarting, not the end of the
    command: the query starts again from its starter once the backoff has passed."""
    monkeypatch.setattr(streaming, "TICK_S", 0.0)
    monkeypatch.setattr(streaming, "POLL_S", 0.01)  # the restart is due at once: no poll's wait for it
    settings = make_config("operational.restart_backoff_s=0.01").operational
    starts: list[str] = []

    def broker_down():
        starts.append("next step")
        raise BrokerUnreachableError("no Kafka broker answers at 127.0.0.1:9092 (Connection refused)")

    def start_caught_up():
        starts.append("starter")
        if len(starts) == 1:
            return Stage(FakeQuery([kafka_batch(0, 100, None, None)]), broker_down, why="a backlog", note="caught up")
        return FakeQuery([kafka_batch(n, 10, None, None) for n in range(1, 3)])

    said: list[str] = []
    totals = streaming.supervise({"hot_pages": start_caught_up}, settings, seconds=None,
                                 report=said.append, status_lines=False)

    assert starts == ["starter", "next step", "starter"]
    assert said[2] == ("[hot_pages] failed (the start after caught up: no Kafka broker answers at 127.0.0.1:9092 "
                       "(Connection refused)); restart 1/8 from its checkpoint in 0.01 s")
    assert said[-1] == "[hot_pages] finished" and totals["hot_pages"].rows == 120


def test_a_first_start_that_finds_the_broker_down_is_retried_and_another_lakehouse_error_ends_the_command(monkeypatch):
    """The broker went down between the command's check and its query's start: retried. A setting that
    cannot work (real-time mode on the wrong Spark) fails every start: the command ends at once."""
    monkeypatch.setattr(streaming, "POLL_S", 0.01)
    settings = make_config("operational.restart_backoff_s=0.01").operational
    starts: list[str] = []

    def start_after_the_broker_is_back():
        starts.append("start")
        if len(starts) == 1:
            raise BrokerUnreachableError("no Kafka broker answers at 127.0.0.1:9092 (Connection refused)")
        return FakeQuery([kafka_batch(0, 10, None, None)])

    totals = streaming.supervise({"hot_pages": start_after_the_broker_is_back}, settings, seconds=None,
                                 report=lambda line: None, status_lines=False)
    assert len(starts) == 2 and totals["hot_pages"].rows == 10

    def wrong_spark():
        starts.append("start")
        raise LakehouseError("operational.mode is real-time, which needs Spark 4.3")

    starts.clear()
    with pytest.raises(LakehouseError, match="needs Spark 4.3"):
        streaming.supervise({"hot_pages": wrong_spark}, settings, seconds=None, report=lambda line: None,
                            status_lines=False)
    assert starts == ["start"]


def test_a_restart_whose_start_fails_is_tried_again_after_the_backoff_until_max_restarts():
    """The broker killed under a running query: the query fails, and its restart's start fails too while
    the broker is still down (its probe says no broker answers). That start is one more failure in the
    row, tried again after a longer backoff, not the end of the command; a start that keeps failing
    ends it after max_restarts with what failed."""

    class Failed(FakeQuery):
        def exception(self) -> str:
            return "org.apache.kafka.common.errors.TimeoutException: the broker went away"

    settings = make_config("operational.restart_backoff_s=0.01", "operational.max_restarts=3").operational
    starts: list[str] = []

    def start_while_the_broker_is_down_twice():
        starts.append("start")
        if len(starts) == 1:
            return Failed([kafka_batch(0, 10, None, None)])
        if len(starts) <= 3:
            raise LakehouseError("no Kafka broker answers at 127.0.0.1:9092 (Connection refused)")
        return FakeQuery([kafka_batch(n, 10, None, None) for n in range(1, 3)])

    said: list[str] = []
    totals = streaming.supervise({"hot_pages": start_while_the_broker_is_down_twice}, settings, seconds=None,
                                 report=said.append, status_lines=False)

    assert len(starts) == 4 and said[-1] == "[hot_pages] finished"
    assert [line.split(";")[1].strip() for line in said if "; restart" in line] == [
        "restart 1/3 from its checkpoint in 0.01 s", "restart 2/3 from its checkpoint in 0.02 s",
        "restart 3/3 from its checkpoint in 0.04 s"]
    assert "its restart failed: no Kafka broker answers" in said[2]
    assert totals["hot_pages"].rows == 30

    starts.clear()
    with pytest.raises(LakehouseError, match="the hot_pages query failed: its restart failed: no Kafka broker answers"):
        streaming.supervise({"hot_pages": lambda: starts.append("start") or (
            Failed([kafka_batch(0, 10, None, None)]) if len(starts) == 1 else
            (_ for _ in ()).throw(LakehouseError("no Kafka broker answers at 127.0.0.1:9092 (Connection refused)")))},
            settings, seconds=None, report=said.append, status_lines=False)
    assert len(starts) == 4, "the first start and three restarts"


def test_a_first_start_that_storage_fails_is_retried_and_the_other_streams_start_meanwhile():
    """The object store answers 503 as `run` starts: the failed start is one failure in the row, retried
    after the backoff like a restart's, not a traceback that ends the command, and the streams after it
    start as usual."""

    class Py4JJavaError(Exception):  # how a JVM's IOException reaches Python
        pass

    settings = make_config("analytical.restart_backoff_s=0.01").analytical
    starts: list[str] = []

    def start_after_a_hiccup():
        starts.append("bronze")
        if len(starts) == 1:
            raise Py4JJavaError("An error occurred while calling o71.start.\n: java.io.IOException: 503 Slow Down")
        return FakeQuery([kafka_batch(n, 10, None, None) for n in range(2)])

    said: list[str] = []
    totals = streaming.supervise(
        {"bronze_clicks": start_after_a_hiccup, "silver_clicks": lambda: FakeQuery([kafka_batch(0, 5, None, None)])},
        settings, seconds=None, report=said.append, status_lines=False)

    assert said[:2] == [
        "[bronze_clicks] failed (its start failed: An error occurred while calling o71.start.); "
        "restart 1/8 from its checkpoint in 0.01 s",
        "[silver_clicks] started (query id fake)"]
    assert len(starts) == 2 and (totals["bronze_clicks"].rows, totals["silver_clicks"].rows) == (20, 5)


def test_a_first_start_that_sparks_analysis_refuses_ends_the_command_at_once_in_one_line():
    """A refusal of the plan, the checkpoint or the table comes back at every start: no retries, one line."""

    class AnalysisException(Exception):
        pass

    class DeltaAnalysisException(AnalysisException):  # Delta's, as pyspark raises it
        pass

    starts: list[str] = []

    def refused():
        starts.append("gold")
        raise DeltaAnalysisException("[DELTA_TABLE_NOT_FOUND] Delta table `gold` doesn't exist.\nJVM stacktrace: ...")

    with pytest.raises(LakehouseError) as raised:
        streaming.supervise({"gold_page_clicks_5s": refused}, make_config().analytical, seconds=None,
                            report=lambda line: None, status_lines=False)
    assert str(raised.value) == ("the gold_page_clicks_5s query could not start: "
                                 "[DELTA_TABLE_NOT_FOUND] Delta table `gold` doesn't exist.")
    assert starts == ["gold"]


class Captured(Exception):
    """A Java exception as pyspark captures it: its message, and its cause's, in `_desc` and `_cause`."""

    def __init__(self, desc: str, cause: "Captured | None" = None):
        super().__init__(desc)
        self._desc, self._cause = desc, cause


def test_a_failure_line_carries_the_storages_own_words_from_the_root_of_sparks_error():
    s3 = Captured("software.amazon.awssdk.services.s3.model.S3Exception: Access Denied (Service: S3, Status Code: 403)")
    denied = Captured("java.nio.file.AccessDeniedException: x/_checkpoints/hot_pages/state/0/0/2.changelog: Writing "
                      f"Object on x/...: {s3._desc}:AccessDenied\n\tat org.apache.hadoop.fs.s3a.S3AUtils", s3)
    spark = Captured("org.apache.spark.SparkException: [CANNOT_WRITE_STATE_STORE.CANNOT_COMMIT] Error writing state "
                     "store files. SQLSTATE: 58030", denied)
    failed = Captured("[CANNOT_WRITE_STATE_STORE.CANNOT_COMMIT] Error writing state store files. SQLSTATE: 58030\n"
                      "=== Streaming Query ===\nIdentifier: hot_pages", spark)

    assert first_line(failed) == (
        "[CANNOT_WRITE_STATE_STORE.CANNOT_COMMIT] Error writing state store files. SQLSTATE: 58030: caused by "
        "java.nio.file.AccessDeniedException: x/_checkpoints/hot_pages/state/0/0/2.changelog: Writing Object on x/...: "
        "software.amazon.awssdk.services.s3.model.S3Exception: Access Denied (Service: S3, Status Code: 403):AccessDenied")
    assert first_line(s3) == s3._desc, "no cause: the first line alone"
    assert first_line(Captured("java.io.IOException: 503 Slow Down", Captured("503 Slow Down"))) == \
        "java.io.IOException: 503 Slow Down", "a cause its message already holds"
    in_a_batch_function = Captured(
        "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
        '  File "medallion.py", line 90, in write_batch\n'
        "py4j.protocol.Py4JJavaError: An error occurred while calling o3660.save.\n"
        ": org.apache.spark.sql.kafka010.KafkaIllegalStateException: Some data may have been lost because they are "
        "not available in Kafka any more;\neither the data was aged out by Kafka\n"
        "\tat org.apache.spark.sql.kafka010.KafkaExceptions$.couldNotReadOffsetRange(KafkaExceptions.scala:101)")
    assert first_line(in_a_batch_function) == ("KafkaIllegalStateException: Some data may have been lost because they "
                                               "are not available in Kafka any more;"), "the job's words, not Py4J's"


class BusyQuery:
    """A query that is always in a batch (its trigger starts the next one as one ends), or never."""

    def __init__(self, name: str, in_a_batch: bool) -> None:
        self.name, self.id, self.stopped = name, f"id-{name}", False
        self.status = {"isTriggerActive": in_a_batch}

    @property
    def isActive(self) -> bool:
        return not self.stopped

    def stop(self) -> None:
        self.stopped = True


def test_a_stop_that_finds_a_query_in_a_batch_all_along_stops_it_there_and_says_so():
    busy, idle = BusyQuery("silver_clicks", in_a_batch=True), BusyQuery("gold_page_clicks_5s", in_a_batch=False)
    lines: list[str] = []
    stop_at_batch_end([busy, idle], wait_s=0.05, report=lines.append)
    assert busy.stopped and idle.stopped
    assert lines == ["[silver_clicks] still in a batch after 0.05 s: stopped in the running batch (nothing is lost: a "
                     "restart runs that batch again)"]


def test_a_second_stop_stops_a_query_in_a_batch_at_once_instead_of_waiting_for_the_batch_end():
    busy = BusyQuery("bronze_clicks", in_a_batch=True)
    hurry = threading.Event()
    lines: list[str] = []
    threading.Timer(0.2, hurry.set).start()
    started = time.monotonic()
    stop_at_batch_end([busy], wait_s=20, report=lines.append, hurry=hurry)
    assert busy.stopped and time.monotonic() - started < 10, "the second stop was not heard"
    assert lines == ["[bronze_clicks] stopping at the end of the running batch (within 20 s); stop again to stop now",
                     "[bronze_clicks] stopped again: stopped in the running batch (nothing is lost: a restart runs "
                     "that batch again)"]
