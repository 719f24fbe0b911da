"""A Spark user's ordinary setup against the two runtimes: a SPARK_HOME of the other runtime's Spark
is not used (each runtime runs its own), and a standalone master that cannot run the fast path is
refused at once, in one line, before anything starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from shared.alerts_topic import latest_alerts
from shared.kafka import ensure_topics
from shared.runtime import FAST_PATH, MEDALLION
from tests.deployment.clusters import lakehouse_on_clusters
from tests.helpers import LAKEHOUSE, click, run_lakehouse, send, wait_for


def _timed(*args: str, settings: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    began = time.monotonic()
    done = lakehouse_on_clusters(*args, settings=settings, timeout=90)
    return done, time.monotonic() - began


def test_real_time_mode_on_the_medallions_cluster_is_refused_at_once_in_one_line(medallion_cluster, config_overrides):
    settings, medallion_url = medallion_cluster
    on_the_medallions = [*config_overrides, *settings, "operational.mode=real-time",
                         f"operational.real_time.master={medallion_url}"]
    expected = (f"error: the fast path's Spark master {medallion_url} (operational.real_time.master) runs Spark "
                f"{MEDALLION.spark_version()}, and real-time mode runs the fast path on its runtime's Spark "
                f"{FAST_PATH.spark_version()}, driver and executors alike: set operational.real_time.master to a "
                f"cluster of Spark {FAST_PATH.spark_version().rsplit('.', 1)[0]}.x, or operational.mode: "
                "micro-batch to run on this one")
    for command in (["operational", "--seconds", "20"], ["run", "--seconds", "20"]):
        refused, took = _timed(*command, settings=on_the_medallions)
        assert (refused.returncode, refused.stderr.splitlines()) == (2, [expected]), refused.stderr
        assert took < 30, f"{command[0]} was refused after {took:.0f} s"

    # the fast path's own master, not started: nothing to register with
    fast_path_url = next(item for item in settings if item.startswith("operational.real_time.master="))
    absent, took = _timed("operational", "--seconds", "20",
                          settings=[*config_overrides, *settings, "operational.mode=real-time", fast_path_url])
    assert absent.returncode == 2 and took < 30
    assert absent.stderr.splitlines() == [
        f"error: no Spark master answers at {fast_path_url.split('=', 1)[1]} (operational.real_time.master): start it "
        "(`lakehouse cluster start` starts the embedded ones) or set operational.real_time.master to one that runs"]


def test_the_fast_path_alerts_on_its_own_spark_with_spark_home_set_to_the_medallions(config, config_overrides, tmp_path):
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    send(config, *(click(f"h{n}", "/home", f"10:00:01.{n:03d}") for n in range(3)))
    settings = [f"--set={item}" for item in (*config_overrides, "hot_pages.threshold=2", "operational.mode=real-time",
                                             "operational.starting_offsets=earliest",
                                             "operational.real_time.checkpoint_interval=5 seconds")]
    log = tmp_path / "operational.log"
    with open(log, "w") as stderr:
        running = subprocess.Popen([LAKEHOUSE, "operational", *settings], stdout=subprocess.DEVNULL, stderr=stderr,
                                   env={**os.environ, "SPARK_HOME": str(MEDALLION.spark_home())})
        try:
            wait_for(lambda: latest_alerts(config.kafka, config.kafka.topics.alerts).latest, 150,
                     "the alert of /home's window", every_s=2)
            running.send_signal(signal.SIGTERM)
            assert running.wait(timeout=90) == 0, log.read_text()
        finally:
            running.kill()
    output = log.read_text()
    assert "NoSuchMethodError" not in output and "Traceback" not in output, output
    (alert,) = latest_alerts(config.kafka, config.kafka.topics.alerts).latest.values()
    assert (alert.page_id, alert.click_count) == ("/home", 3)


def test_the_medallion_backfills_on_its_own_spark_with_spark_home_set_to_the_fast_paths(config, config_overrides):
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    send(config, *(click(f"b{n}", "/backfill", f"10:00:0{n}.000") for n in range(4)))
    backfill = run_lakehouse("analytical", "--available-now", *(f"--set={item}" for item in config_overrides),
                             env={**os.environ, "SPARK_HOME": str(FAST_PATH.spark_home())}, timeout=300)
    assert backfill.returncode == 0, backfill.stderr
    clicks = run_lakehouse("sql", "SELECT count(*) AS clicks FROM silver.clicks", "--format", "json",
                           *(f"--set={item}" for item in config_overrides))
    assert json.loads(clicks.stdout) == [{"clicks": 4}], clicks.stderr
