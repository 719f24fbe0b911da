"""What `lakehouse cluster status` concludes from the processes and from the master's own report."""

from __future__ import annotations

from lakehouse.services.cluster import ClusterStatus


def master_report(*states: str, apps=()) -> dict:
    return {"workers": [{"state": state} for state in states], "cores": len(states), "coresused": len(apps),
            "activeapps": [{"name": name, "cores": 1, "state": "RUNNING"} for name in apps]}


def status(worker_pids, report) -> ClusterStatus:
    return ClusterStatus(runtime="medallion", master_url="spark://h:1", web_ui="http://h:2", master_pid=10, worker_pids=worker_pids,
                         master=report)


def test_healthy_needs_every_worker_process_and_every_worker_registered_alive():
    assert status([11, 12], master_report("ALIVE", "ALIVE")).healthy
    assert not status([11, None], master_report("ALIVE", "ALIVE")).healthy  # killed, the master not told yet
    assert not status([11, 12], master_report("ALIVE", "DEAD")).healthy  # running, but lost to the master
    assert not status([11, 12], master_report("ALIVE")).healthy  # one not registered yet


def test_a_stopped_master_is_not_running_and_a_running_one_lists_workers_and_applications():
    stopped = ClusterStatus(runtime="fast-path", master_url="spark://h:1", web_ui="http://h:2", master_pid=None,
                            worker_pids=[None])
    assert not stopped.healthy and stopped.describe() == "fast-path: not running (master spark://h:1)"

    running = status([11, None], master_report("ALIVE", "DEAD", apps=["app-operational"]))
    lines = running.describe().splitlines()
    assert lines[0].startswith("medallion: master spark://h:1 (pid 10)")
    assert lines[0].endswith("1 of 2 workers alive, 1 of 2 cores in use")
    assert lines[1:] == ["  worker 1: pid 11", "  worker 2: not running",
                         "  application app-operational: 1 cores, RUNNING"]
    assert running.as_dict()["applications"] == [{"name": "app-operational", "cores": 1, "state": "RUNNING"}]
