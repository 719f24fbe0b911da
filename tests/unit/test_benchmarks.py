"""The benchmarks' own logic, without Spark: the capacity search, and that a run whose traffic did
not deliver the offered rate is reported as invalid rather than as a figure."""

from __future__ import annotations

import os
import time
from datetime import datetime, timedelta, timezone

import pytest

from lakehouse.bench.freshness import caught_up_at, freshness_figures, gold_freshness, layer_figures, weighted_quantile
from lakehouse.bench.delivery import p99_ratio_interval, pooled_notify
from lakehouse.bench.operational import latency_figures, p99_ratio, pooled, run_outline, throughput
from lakehouse.bench.time_to_alert import from_nearest
from lakehouse.bench.notify_during_load import interleaved_blocks
from lakehouse.bench.linux_process import cpu_seconds, machine_busy_seconds
from lakehouse.bench.under_load import cores_used, delivery
from lakehouse.bench.capacity import load_shape, search_rates
from shared.query_progress import ProgressSummary
from tests.conftest import make_config


def search(capacity: float, start: float = 20_000, lowest: float = 1_900, max_runs: int = 8):
    tried: list[float] = []

    def meets(rate: float) -> bool:
        tried.append(rate)
        return rate <= capacity

    return (*search_rates(meets, start, lowest, 1.15, max_runs), tried)


@pytest.mark.parametrize("capacity", [2_500, 9_000, 13_000, 19_999, 31_000])
def test_the_search_brackets_the_capacity_within_the_resolution(capacity):
    passing, failing, tried = search(capacity)

    assert passing is not None and failing is not None
    assert passing <= capacity < failing
    assert failing / passing <= 1.15 or len(tried) == 8
    assert len(set(tried)) == len(tried)  # never the same rate twice


def test_when_even_the_lowest_rate_misses_there_is_no_capacity():
    passing, failing, tried = search(capacity=1_000)

    assert passing is None and failing == 1_900 and tried[-1] == 1_900


def test_the_search_stops_after_its_runs():
    passing, failing, tried = search(capacity=10**9, max_runs=3)

    assert tried == [20_000, 30_000, 45_000] and passing == 45_000 and failing is None


def test_a_run_that_did_not_deliver_the_offered_rate_is_invalid_and_has_no_figures():
    figures = {"p50_ms": 300, "p95_ms": 700, "p99_ms": 900, "max_ms": 950, "alerts": 80, "input_rate": 9_000.0,
               "batch_ms_p50": 400}
    short = latency_figures(figures | delivery(20_000, {"achieved_rate": 18_999.0, "cpu_share": 0.3}))
    enough = latency_figures(figures | delivery(20_000, {"achieved_rate": 19_001.0, "cpu_share": 0.3}))

    assert short["valid"] is False and "p99_ms" not in short and short["delivered_rate"] == 18_999.0
    assert enough["valid"] is True and enough["p99_ms"] == 900 and enough["offered_rate"] == 20_000


def a_latency_run(latencies_ms: list[float], delivered_rate: float = 19_900.0) -> dict:
    """A latency run of 20,000 events/s offered, as measured_run keeps it for pooling: one window per latency."""
    return {"valid": delivered_rate >= 19_000, "offered_rate": 20_000.0, "delivered_rate": delivered_rate,
            "input_rate": delivered_rate, "latencies_ms": sorted(latencies_ms), "p99_ms": sorted(latencies_ms)[-1],
            "alerts": len(latencies_ms), "missed_windows": 1, "warmup_windows": 3, "windows_over_threshold": 101,
            "alerts_without_crossing": 0, "batch_boundaries": {"ends": 5}}


def test_pooled_runs_weigh_a_stall_as_the_windows_it_delayed_and_sum_their_counts():
    calm, stalled = a_latency_run([10.0] * 100), a_latency_run([10.0] * 98 + [5000.0, 5000.0], delivered_rate=19_500)

    both = latency_figures(pooled([calm, stalled]))

    # 200 windows, 2 of them stalled: the 198th by rank (p99) is a calm one; the stall stays in the max
    assert (both["p50_ms"], both["p99_ms"], both["p999_ms"], both["max_ms"]) == (10.0, 10.0, 5000.0, 5000.0)
    assert (both["alerts"], both["missed_windows"], both["details"]["warmup_windows"]) == (200, 2, 6)
    assert both["valid"] is True and both["delivered_rate"] == 19_500 and "latencies_ms" not in both["details"]
    assert pooled([calm]) is calm
    assert pooled([calm, a_latency_run([10.0], delivered_rate=15_000)])["valid"] is False


def test_pooled_runs_list_the_slowest_windows_of_them_all_and_each_says_how_far_it_crossed_from_a_batch_end():
    def slow(latency_ms: int) -> dict:
        return {"pageId": f"/p{latency_ms}", "crossedAt": "2026-12-07T08:00:00+00:00", "latencyMs": latency_ms}

    calm = a_latency_run([10.0] * 10) | {"slowest_windows": [slow(40), slow(30)]}
    stalled = a_latency_run([10.0] * 10) | {"slowest_windows": [slow(900), slow(20)]}
    assert [window["latencyMs"] for window in pooled([calm, stalled])["slowest_windows"]] == [900, 40, 30, 20]
    outline = run_outline(stalled | {"batch_ends": [{"trigger_ms": 30_350}, {"trigger_ms": 31_900}]})
    assert outline["batch_ms"] == [30_350, 31_900] and [w["latencyMs"] for w in outline["slowest_windows"]] == [900, 20]

    ends = [datetime(2026, 12, 7, 8, 0, 30, tzinfo=timezone.utc), datetime(2026, 12, 7, 8, 1, 0, tzinfo=timezone.utc)]
    assert from_nearest(datetime(2026, 12, 7, 8, 0, 29, 960_000, tzinfo=timezone.utc), ends) == -40
    assert from_nearest(datetime(2026, 12, 7, 8, 0, 50, tzinfo=timezone.utc), ends) == -10_000
    assert from_nearest(datetime(2026, 12, 7, 8, 1, 0, 250_000, tzinfo=timezone.utc), ends) == 250
    assert from_nearest(datetime(2026, 12, 7, 8, 0, 0, tzinfo=timezone.utc), []) is None


def test_pooled_deliveries_take_every_record_and_name_what_each_run_missed():
    runs = [{"latencies_ms": [5.0, 7.0], "windows_alerted": 4, "windows_at_alertmanager": 4, "windows_notified_once": 4,
             "windows_notified_more_than_once": 0, "notifications_for_no_alerted_window": 0,
             "windows_not_read_at_alertmanager": [], "windows_not_notified": [], "faults": []},
            {"latencies_ms": [9.0, 300.0], "windows_alerted": 3, "windows_at_alertmanager": 2, "windows_notified_once": 2,
             "windows_notified_more_than_once": 1, "notifications_for_no_alerted_window": 0,
             "windows_not_read_at_alertmanager": ["/p 10:00:05"], "windows_not_notified": [], "faults": []}]

    both = pooled_notify(runs)

    assert both["delivery"] == {"p50_ms": 7.0, "p95_ms": 300.0, "p99_ms": 300.0, "p999_ms": 300.0, "max_ms": 300.0,
                                "records": 4}
    assert (both["windows_alerted"], both["windows_at_alertmanager"], both["windows_notified_once"],
            both["windows_notified_more_than_once"]) == (7, 6, 6, 1)
    assert both["windows_not_read_at_alertmanager"] == ["/p 10:00:05"] and "latencies_ms" not in both
    assert "latencies_ms" not in pooled_notify(runs[:1]) and runs[0]["latencies_ms"] == [5.0, 7.0], "its input as given"


def test_a_p99_ratio_needs_both_runs_figures():
    assert p99_ratio({"p99_ms": 33.0}, {"p99_ms": 30.0}) == 1.1
    assert p99_ratio({"p99_ms": 33.0}, {"valid": False}) is None and p99_ratio({}, {"p99_ms": 30.0}) is None


def a_run_at(rate: float, lag_growth_per_s: float, valid: bool = True) -> dict:
    """A measured run's figures: its lag sampled each second for 20 s, growing at `lag_growth_per_s`."""
    return {"valid": valid, "offered_rate": rate, "delivered_rate": rate * 0.999, "generator_cpu_share": 0.1,
            "input_rate": rate, "batch_ms_p50": 100,
            "samples": [{"t_s": t, "lag": 50 + lag_growth_per_s * t} for t in range(21)]}


@pytest.mark.parametrize("growth, validity, tried, best", [
    ({500: 0, 2000: 0, 4000: 0}, {}, [500, 2000, 4000], 4000 * 0.999),  # every rate kept: the last is the best
    ({500: 0, 2000: 500, 4000: 0}, {}, [500, 2000], 500 * 0.999),  # 2,000/s grew its lag: no higher rate tried
    ({500: 0, 2000: 0, 4000: 0}, {2000: False}, [500, 2000], 500 * 0.999),  # kept up, but not offered the rate
    ({500: 100, 2000: 0, 4000: 0}, {}, [500], None),  # not even the first
])
def test_throughput_climbs_the_rates_until_one_is_not_sustained_and_reports_the_last_kept(growth, validity, tried, best):
    report = throughput([], [500, 2000, 4000], 20, 1,
                        measure=lambda rate: a_run_at(rate, growth[rate], validity.get(rate, True)))

    assert [step["offered_rate"] for step in report["steps"]] == tried
    assert report["max_sustained_rate"] == best
    assert [step["sustained"] for step in report["steps"]] == [growth[rate] == 0 for rate in tried]


def test_each_rate_gets_as_many_hot_pages_as_the_traffic_allows():
    config = make_config()  # threshold 5000 per 5 s: a hot page takes 1.5 x 5001 / 5 = 1500.3 clicks/s
    hot_pages, share, lowest = load_shape(config, 20_000)

    assert (hot_pages, lowest) == (8, 1876)
    assert share == pytest.approx(8 * 1500.3 / 20_000)
    assert load_shape(config, 1_900)[0] == 1
    assert load_shape(config, 5_000)[0] == 2


def test_records_behind_counts_what_the_last_report_had_not_read_of_every_partition():
    from kafka import TopicPartition

    from shared.query_progress import ProgressSummary, records_behind

    end = {TopicPartition("clicks", 0): 100, TopicPartition("clicks", 1): 50}
    report = lambda offsets: ProgressSummary.of({"batchId": 0, "sources": [{"endOffset": {"clicks": offsets}}]})  # noqa: E731
    assert records_behind(None, end, "clicks") == 150  # no report yet: all of it
    assert records_behind(report({"0": 100, "1": 49}), end, "clicks") == 1
    assert records_behind(report({"0": 100}), end, "clicks") == 50  # a partition it has not read yet
    assert records_behind(report({"0": 100, "1": 50}), end, "clicks") == 0
    assert records_behind(report({"0": 120, "1": 51}), end, "clicks") == 0  # read past `end`: not negative


def test_real_time_latency_is_measured_after_the_starts_first_two_batch_ends():
    from lakehouse.bench.measured_run import warmup_s

    assert warmup_s(make_config("operational.mode=micro-batch")) == 10.0
    assert warmup_s(make_config("operational.mode=real-time", "operational.real_time.checkpoint_interval=30 seconds")) == 70.0
    assert warmup_s(make_config("operational.mode=real-time", "operational.real_time.checkpoint_interval=5 seconds")) == 20.0


def test_a_backfills_layer_time_splits_into_sparks_parts_and_its_start_and_stop():
    from lakehouse.bench.analytical import _breakdown

    silver = {"query": "silver_clicks", "seconds": 20.0, "cpu_s": 31.5, "batches": 2, "generated_classes": 180,
              "durations_ms": {"triggerExecution": 14_500, "addBatch": 12_000, "queryPlanning": 900, "walCommit": 300}}
    parts = _breakdown({"layers": [silver]})["silver_clicks"]

    assert parts == {"seconds": 20.0, "cpu_s": 31.5, "batches": 2, "generated_classes": 180, "start_and_stop_s": 5.5, "addBatch_s": 12.0,
                     "queryPlanning_s": 0.9, "walCommit_s": 0.3}


def test_running_totals_sum_each_part_of_the_batches_durations_once_per_batch():
    from shared.query_progress import RunningTotals

    def progress(batch_id: int, add_batch_ms: int) -> dict:
        return {"batchId": batch_id, "name": "silver_clicks", "numInputRows": 10,
                "durationMs": {"triggerExecution": add_batch_ms + 100, "addBatch": add_batch_ms}}

    totals = RunningTotals()
    totals.add([progress(0, 1_000)])
    totals.add([progress(0, 1_000), progress(1, 2_500)])  # recentProgress still holds batch 0

    assert dict(totals.durations_ms) == {"triggerExecution": 3_700, "addBatch": 3_500}


def gold_batch(batch: int, started: str, duration_ms: int, clicks: int, kafka_times: list[int]) -> ProgressSummary:
    return ProgressSummary.of({"name": "gold_page_clicks_5s", "batchId": batch, "timestamp": started,
                               "durationMs": {"triggerExecution": duration_ms},
                               "observedMetrics": {"arrivals": {"clicks": clicks, "kafkaTimes": kafka_times}}})


T0_MS = 1795773600000  # 2026-11-27T10:00:00Z


def test_a_weighted_quantile_is_the_first_value_whose_weight_reaches_the_share():
    assert weighted_quantile([(5.0, 1.0), (1.0, 3.0)], 0.75) == 1.0
    assert weighted_quantile([(5.0, 1.0), (1.0, 3.0)], 0.80) == 5.0
    assert weighted_quantile([(2.0, 1.0)], 0.99) == 2.0
    assert weighted_quantile([], 0.5) is None


def test_gold_freshness_weighs_each_batchs_quantiles_by_its_clicks_and_keeps_to_the_window():
    start = datetime(2026, 11, 27, 10, 0, 0, tzinfo=timezone.utc)
    batches = [
        # ends 10:00:30 (before the window): not counted
        gold_batch(0, "2026-11-27T10:00:20.000Z", 10_000, 1_000, [T0_MS] * 100),
        # ends 10:01:10, 900 clicks appended at 10:01:00: 10 s each
        gold_batch(1, "2026-11-27T10:01:05.000Z", 5_000, 900, [T0_MS + 60_000] * 100),
        # ends 10:02:40, 100 clicks appended at 10:01:40: 60 s each
        gold_batch(2, "2026-11-27T10:02:30.000Z", 10_000, 100, [T0_MS + 100_000] * 100),
        # ends 10:03:10, after the window's end
        gold_batch(3, "2026-11-27T10:03:00.000Z", 10_000, 100, [T0_MS + 170_000] * 100),
    ]

    figures = freshness_figures(batches, start + timedelta(seconds=60), start + timedelta(seconds=170))

    assert figures == {"clicks": 1_000, "batches": 2, "p50_s": 10.0, "p99_s": 60.0, "max_s": 60.0,
                       "p99_s_by_minute": [10.0, 60.0]}
    # without batch 2, the window's minute 1 has no batch (a medallion that writes gold in few, long
    # batches); batch 3, which ends 10:03:10 with clicks appended at 10:02:50, is in minute 2
    sparse = freshness_figures([batches[1], batches[3]], start + timedelta(seconds=60), start + timedelta(seconds=230))
    assert sparse["p99_s_by_minute"] == [10.0, None, 20.0]


def test_gold_has_caught_up_once_a_batch_holds_the_loads_last_clicks():
    batches = [gold_batch(0, "2026-11-27T10:00:00.000Z", 5_000, 10, [T0_MS - 9_000] * 99 + [T0_MS - 4_000]),
               gold_batch(1, "2026-11-27T10:00:10.000Z", 5_000, 10, [T0_MS + 1_000] * 99 + [T0_MS + 8_000]),
               gold_batch(2, "2026-11-27T10:00:20.000Z", 5_000, 10, [T0_MS + 12_000] * 100)]
    load_ended = datetime(2026, 11, 27, 10, 0, 9, tzinfo=timezone.utc)

    assert caught_up_at(batches, load_ended - timedelta(seconds=2)) == datetime(2026, 11, 27, 10, 0, 15,
                                                                                tzinfo=timezone.utc)
    assert caught_up_at(batches[:1], load_ended - timedelta(seconds=2)) is None
    run = gold_freshness(batches[:1], load_ended - timedelta(seconds=60), load_ended, None)
    assert run["caught_up_s_after_load"] is None and run["measured_s"] == 60.0


def test_each_layers_batches_in_the_window_say_how_busy_it_was():
    silver = [ProgressSummary.of({"name": "silver_clicks", "batchId": n, "timestamp": f"2026-11-27T10:00:{start}.000Z",
                                  "durationMs": {"triggerExecution": ms}})
              for n, (start, ms) in enumerate([("00", 10_000), ("10", 20_000), ("50", 4_000)])]
    start = datetime(2026, 11, 27, 10, 0, 0, tzinfo=timezone.utc)

    # the third batch ends at 10:00:54, after the window
    assert layer_figures(silver, start, start + timedelta(seconds=50)) == {
        "silver_clicks": {"batches": 2, "median_s": 15.0, "max_s": 20.0, "busy_share": 0.6}}


def test_cores_used_are_cpu_seconds_over_the_load_and_the_rest_is_the_machines_unaccounted_time():
    before = {"machine": 1000.0, "fast_path": 400.0, "medallion": 100.0}
    after = {"machine": 1180.0, "fast_path": 460.0, "medallion": 190.0}

    cores = cores_used(before, after, 100.0, 0.12)

    assert cores == {"machine": 1.8, "fast_path": 0.6, "medallion": 0.9, "generator": 0.12, "rest": 0.18}


def test_cpu_seconds_count_a_childs_work_and_the_machine_counts_it_too():
    """A busy child of this process shows in this process's tree and in the machine's busy time."""
    import subprocess
    import sys

    tree, own, machine = cpu_seconds(os.getpid()), time.process_time(), machine_busy_seconds()
    child = subprocess.Popen([sys.executable, "-c", "import time\nend = time.process_time() + 0.5\n"
                              "while time.process_time() < end: pass\ninput()"], stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while cpu_seconds(child.pid) < 0.5 and time.monotonic() < deadline:
            time.sleep(0.05)
        children = (cpu_seconds(os.getpid()) - tree) - (time.process_time() - own)
        assert children >= 0.45  # the child's half second, counted while it lives
        assert machine_busy_seconds() - machine >= 0.45
    finally:
        child.communicate(b"\n", timeout=30)


def test_a_session_is_held_for_a_visit_the_gap_and_the_watermark_and_the_plateau_is_the_visits_of_that_time():
    from lakehouse.bench.sessions_state import expected_plateau, held_seconds

    config = make_config("sessions.gap=30 minutes", "analytical.watermark=10 minutes")
    # the generator's visits: 5 clicks, 10 s apart -> 50 s; + 1,800 s + 600 s
    assert held_seconds(config) == 2450
    # 20,000 events/s in visits of 5 clicks: 4,000 visits start each second, each held 2,450 s
    assert expected_plateau(config, 20_000) == 9_800_000


def test_interleaved_blocks_alternate_without_with_with_without_and_leave_a_partial_block_out():
    blocks = interleaved_blocks(70, 335, 60)
    assert blocks == [(70, 130, False), (130, 190, True), (190, 250, True), (250, 310, False)]
    assert [running for _, _, running in interleaved_blocks(0, 80, 10)] == [False, True, True, False] * 2
    assert interleaved_blocks(10, 15, 10) == []


def test_the_p99_ratio_interval_resamples_whole_blocks():
    calm = [[10.0] * 99 + [100.0]] * 6
    assert p99_ratio_interval(calm, calm) == [1.0, 1.0]
    assert p99_ratio_interval(calm, [[2 * value for value in block] for block in calm]) == [2.0, 2.0]
    # one block of four with a bad batch end on each side: which blocks a draw holds moves the ratio both ways
    stalled = [[10.0] * 95 + [900.0] * 5]
    low, high = p99_ratio_interval(calm[:3] + stalled, calm[:3] + stalled)
    assert low < 1.0 < high, (low, high)
    assert p99_ratio_interval([], calm) is None and p99_ratio_interval([[]], calm) is None
