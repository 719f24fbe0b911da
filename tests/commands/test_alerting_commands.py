"""`lakehouse alertmanager start|status|notifications|stop` and `lakehouse notify` as a user runs them: an
Alertmanager and its receiver started (twice is harmless) and stopped with no process left, the bridge
delivering the alert records the test wrote, each window notified once, and the refusals in one line."""

from __future__ import annotations

import json
import uuid

from tests.conftest import free_port
from tests.helpers import run_lakehouse, wait_for
from tests.integration.test_notify import alert_record, write
from tests.processes import alive


def test_alertmanager_and_notify_as_a_user_runs_them(configured, alertmanager_tools, tmp_path):
    run_dir = tmp_path / "alertmanager"
    embedded = [f"--set=alertmanager.run_dir={run_dir}", f"--set=alertmanager.port={free_port()}",
                f"--set=alertmanager.webhook_port={free_port()}"]
    config = configured(topics=("alerts",))
    pages = f"/cli{uuid.uuid4().hex[:6]}"
    write(config, alert_record(f"{pages}/a", 0), alert_record(f"{pages}/a", 0, count=300), alert_record(f"{pages}/b", 5))
    topic = f"--set=kafka.topics.alerts={config.kafka.topics.alerts}"
    broker = f"--set=kafka.bootstrap_servers={config.kafka.bootstrap_servers}"
    pids: set[int] = set()
    try:
        started = run_lakehouse("alertmanager", "start", *embedded)
        assert started.returncode == 0, started.stderr
        url = started.stdout.strip()
        assert url.startswith("http://127.0.0.1:")
        again = run_lakehouse("alertmanager", "start", *embedded)
        assert again.returncode == 0 and again.stdout.strip() == url and "already running" in again.stderr, again.stderr
        pids |= {int((run_dir / name).read_text()) for name in ("alertmanager.pid", "webhook-receiver.pid")}
        assert alive(pids)
        status = run_lakehouse("alertmanager", "status", *embedded)
        assert status.returncode == 0 and status.stdout.startswith("running, pid"), status.stdout

        notify = run_lakehouse("notify", "--seconds", "8", broker, topic, f"--set=alerting.alertmanager_url={url}",
                               f"--set=alerting.consumer_group=cli-{uuid.uuid4().hex[:6]}",
                               f"--set=metrics.notify_port={free_port()}")
        assert notify.returncode == 0, notify.stderr

        def windows() -> list[tuple[str, str]]:
            listed = run_lakehouse("alertmanager", "notifications", "--format", "json", *embedded)
            assert listed.returncode == 0, listed.stderr
            return sorted((alert["labels"]["pageId"], alert["labels"]["windowStart"]) for kept in json.loads(listed.stdout)
                          for alert in kept["body"]["alerts"] if alert["labels"]["pageId"].startswith(pages))

        wait_for(lambda: len(windows()) >= 2, 30, "both windows notified")
        assert windows() == [(f"{pages}/a", "2026-11-22T10:00:00.000Z"), (f"{pages}/b", "2026-11-22T10:00:05.000Z")]

        for words, says in ((["notify", broker, topic], "alerting.alertmanager_url is not set"),
                            (["notify", broker, topic, f"--set=alerting.alertmanager_url={url}/nothing-here"],
                             "is not an Alertmanager's API v2")):
            refused = run_lakehouse(*words, f"--set=metrics.notify_port={free_port()}", timeout=120)
            assert refused.returncode == 2 and says in refused.stderr and refused.stderr.count("\n") == 1, refused.stderr
    finally:
        stopped = run_lakehouse("alertmanager", "stop", *embedded)
    assert stopped.returncode == 0 and "Alertmanager stopped" in stopped.stderr, stopped.stderr
    assert not alive(pids)
    assert run_lakehouse("alertmanager", "status", *embedded).returncode == 1
