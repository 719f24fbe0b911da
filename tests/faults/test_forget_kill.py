"""A `lakehouse forget` killed with SIGKILL at a random moment, then run again: the lake ends as one
uninterrupted erasure leaves it, computed here from the records sent (tests/erasure_lake.py)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
from pathlib import Path

from analytical import pipeline
from analytical.erasure_requests import TABLE as REQUESTS
from tests.erasure_lake import FORGOTTEN, OTHERS, REMOVED, SETTINGS, THEIRS, every_row, without_the_user
from tests.faults.test_crashes import SEED_VARIABLE, fault_seed
from tests.helpers import LAKEHOUSE, files_holding, lakehouse_here, send, wait_for
from tests.processes import alive, family

#: The kill falls this long after the command started: its JVM's start (about 10 s here), the waits and
#: counts, the deletes and the file deletions of the four tables.
KILL_WITHIN_S = (2.0, 40.0)


def test_a_forget_killed_at_a_random_moment_then_run_again_leaves_the_lake_of_one_uninterrupted(
        spark, configured, config_overrides, tmp_path):
    lake = configured(*SETTINGS, topics=("clicks",))
    root = lake.storage.root
    send(lake, *THEIRS, *OTHERS)
    pipeline.backfill(spark, lake, report=lambda line: None)
    before = every_row(spark, root)
    seed = fault_seed()
    kill_after = random.Random(seed).uniform(*KILL_WITHIN_S)
    print(f"\nkill after {kill_after:.1f} s, seed {seed} ({SEED_VARIABLE}={seed} replays it)", flush=True)
    options = [f"--set={item}" for item in (*config_overrides, *SETTINGS)]

    log = tmp_path / "forget.log"
    with open(log, "w") as stderr:
        forget = subprocess.Popen([LAKEHOUSE, "forget", "--user-id", FORGOTTEN, *options], stdout=subprocess.DEVNULL,
                                  stderr=stderr)
    try:
        forget.wait(timeout=kill_after)  # killed at its moment, or already done
    except subprocess.TimeoutExpired:
        pass
    doomed = family(forget.pid)
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    forget.wait()
    wait_for(lambda: not alive(doomed), 30, "every process of the killed forget to end")
    print(f"forget's log when killed:\n{log.read_text()[-1500:]}", flush=True)

    again = lakehouse_here("forget", "--user-id", FORGOTTEN, *options)

    assert again.returncode == 0, again.stderr
    assert every_row(spark, root) == without_the_user(before)
    assert [path for path in files_holding(Path(root), FORGOTTEN) if not path.startswith("_checkpoints/")] == []
    requests = REQUESTS.at(root).read(spark).collect()
    assert len(requests) == 1 and requests[0].completedAt is not None, "one request, closed by the second run"
    # Each table's rows counted when its delete committed, by whichever run committed it.
    assert dict(requests[0].rowsRemoved) == REMOVED, requests
