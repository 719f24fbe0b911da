"""`lakehouse operational` and `lakehouse alerts` as a user runs them: signals, exit codes, output."""

import json
import signal
import subprocess

from shared.kafka import ensure_topics, producer_for
from tests.contract_oracle import alert_id
from tests.helpers import LAKEHOUSE, click, lakehouse_here, run_lakehouse, send, wait_for
from tests.topics import alert_records


def test_sigterm_stops_the_fast_path_cleanly_and_alerts_lists_what_it_raised(config, config_overrides, tmp_path):
    settings = [f"--set={o}" for o in config_overrides] + [
        "--set=hot_pages.threshold=2", "--set=operational.starting_offsets=earliest", "--set=operational.status_interval_s=1"]
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    producer = producer_for(config.kafka)
    for n in range(3):
        producer.send(config.kafka.topics.clicks, key=b"/cli",
                      value=json.dumps({"eventId": f"c{n}", "pageId": "/cli", "eventTime": "2026-11-22T10:00:01Z"}).encode())
    producer.send(config.kafka.topics.clicks, value=b"garbage")
    producer.close()

    log = tmp_path / "operational.log"
    with open(log, "w") as stderr:
        running = subprocess.Popen([LAKEHOUSE, "operational", *settings], stdout=subprocess.PIPE, stderr=stderr, text=True)
        try:
            wait_for(lambda: "invalid 1" in log.read_text(), 180, "a status line counting the invalid record")
            running.send_signal(signal.SIGTERM)
            assert running.wait(timeout=60) == 0
        finally:
            running.kill()
    output = log.read_text()
    assert "stop requested: stopping" in output and "Traceback" not in output

    shown = run_lakehouse("alerts", "--format", "json", *settings)
    assert shown.returncode == 0, shown.stderr
    (alert,) = json.loads(shown.stdout)
    assert (alert["pageId"], alert["clickCount"], alert["windowStart"]) == ("/cli", 3, "2026-11-22T10:00:00.000Z")
    expected = ["2026-11-22T10:00:00.000Z", "/cli", "3", "2", alert_id("/cli", "2026-11-22T10:00:00.000Z")]
    as_csv = lakehouse_here("alerts", "--format", "csv", *settings).stdout.splitlines()
    assert as_csv == ["windowStart,pageId,clickCount,threshold,alertId", ",".join(expected)]
    as_table = lakehouse_here("alerts", *settings).stdout.splitlines()
    assert as_table[0].split() == ["windowStart", "pageId", "clickCount", "threshold", "alertId"]
    assert [line.split() for line in as_table[2:]] == [expected]


def test_operational_for_some_seconds_ends_on_its_own_having_alerted(config, config_overrides):
    settings = [f"--set={o}" for o in config_overrides] + ["--set=hot_pages.threshold=2",
                                                           "--set=operational.starting_offsets=earliest"]
    ensure_topics(config.kafka, [config.kafka.topics.clicks, config.kafka.topics.alerts])
    send(config, *(click(f"s{n}", "/seconds", "10:00:01.000") for n in range(3)))

    ended = run_lakehouse("operational", "--seconds", "15", *settings, timeout=240)

    assert ended.returncode == 0, ended.stderr[-3000:]
    assert [(r["pageId"], r["clickCount"]) for r in alert_records(config)] == [("/seconds", 3)]


def test_alerts_on_a_missing_topic_says_so(config, config_overrides):
    result = run_lakehouse("alerts", *[f"--set={o}" for o in config_overrides])

    assert result.returncode == 2
    assert "does not exist" in result.stderr and "Traceback" not in result.stderr
