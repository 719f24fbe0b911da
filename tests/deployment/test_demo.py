"""`lakehouse demo` as a user runs it, on ports and folders of this test's own: it ends by itself with
exit 0 and stops the broker it started, and what it reports is held against the truth of its clicks
topic, read back here from a broker started again on its folder (tests/truth.py), not against what
the demo says it sent: the alerts topic holds each window's highest alert as the truth calls for,
the demo's count of alerted windows is the truth's hot windows, its top pages start with the hot
pages, and its reconciliation compares and matches every hot window.
"""

from __future__ import annotations

import re

from lakehouse.cli.demo import DEMO_PROFILE
from shared.config_loading import load_config
from tests.conftest import COMMAND_JVMS, free_port
from tests.helpers import assert_quiet, run_lakehouse
from tests.topics import read_to_end
from tests.truth import Truth, assert_alerts_as_the_oracle_says


def test_the_demo_runs_both_paths_and_reports_what_the_clicks_it_sent_say(tmp_path):
    """Its time: the whole demo as a user runs it (a broker and an Alertmanager, both paths in three JVMs,
    10 s of traffic, the backfill, the checks, the reconciliation and the notifications), then its broker
    started again to read the truth."""
    settings = [f"kafka.bootstrap_servers=127.0.0.1:{free_port()}", f"broker.run_dir={tmp_path / 'broker'}",
                f"storage.root={tmp_path / 'lake'}", f"metrics.operational_port={free_port()}",
                f"metrics.analytical_port={free_port()}", f"metrics.notify_port={free_port()}",
                f"alertmanager.run_dir={tmp_path / 'alertmanager'}", f"alertmanager.port={free_port()}",
                f"alertmanager.webhook_port={free_port()}", "spark.ui_enabled=false", *COMMAND_JVMS]
    options = [f"--set={item}" for item in settings]
    # ten seconds of traffic make two whole windows of each hot page; the fast path's shortest checkpoint
    # interval, since a clean stop lets the running batch end (README's first run stops the shipped one)
    demo = run_lakehouse("demo", "--seconds", "10", *options, "--set=operational.real_time.checkpoint_interval=5 seconds",
                         timeout=900)
    output = demo.stdout + demo.stderr
    assert demo.returncode == 0, output[-4000:]
    assert "Traceback" not in output
    assert_quiet(output)
    assert "the broker is stopped" in demo.stdout

    config = load_config(DEMO_PROFILE, overrides=settings)  # what the demo read: its profile, then --set
    started = run_lakehouse("kafka", "start", *options)  # the demo's broker again, its topics kept
    assert started.returncode == 0, started.stderr
    try:
        truth = Truth.of(read_to_end(config.kafka, config.kafka.topics.clicks))
        threshold = config.hot_pages.threshold
        hot_windows = truth.hot_windows_per_page(threshold)
        assert len(hot_windows) == 3, "the demo makes three hot pages"
        assert_alerts_as_the_oracle_says(config.kafka, config.kafka.topics.alerts, truth, threshold,
                                         real_time=config.operational.mode == "real-time")
    finally:
        stopped = run_lakehouse("kafka", "stop", *options)
        assert stopped.returncode == 0, stopped.stderr

    hot = sum(hot_windows.values())
    assert re.search(rf"\.\.\. {hot} alerted windows,", demo.stdout), demo.stdout
    top = re.findall(r"^   pageId (\S+) ", demo.stdout.split("== 5.")[1].split("== 6.")[0], re.M)
    assert set(top[:3]) == set(hot_windows), top
    assert re.search(r"(\d+) of \1 expectations passed", demo.stdout), demo.stdout
    verdict = demo.stdout.split("== 7.")[1].splitlines()[1]  # late clicks may explain a difference by cause
    assert verdict.startswith(f"   windows compared {hot}, matched "), verdict
    assert ", pending 0, " in verdict, verdict
    assert verdict.endswith("unexplained 0: consistent"), verdict
    # each hot window reached the receiver once, and nothing else fired
    assert f"   {hot} notifications for {hot} of the {hot} alerted windows" in demo.stdout, demo.stdout.split("== 8.")[-1]
    assert "anything else that fired: nothing" in demo.stdout
    assert "Alertmanager is stopped" in demo.stdout
