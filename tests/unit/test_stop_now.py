"""A second stop ends a command within seconds even when its stop hangs (a query's write stuck on the
storage does not answer Spark's stop): shared.stopping.StopRequest exits the process then."""

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from shared import PROJECT_ROOT

#: The stop-now deadline in the child (the shipped one is STOP_NOW_WITHIN_S): the tests wait it out.
WITHIN_S = 1.0
#: A command whose clean stop never ends: it takes the first stop and then hangs.
HANGING_STOP = f"""
import sys, time
from shared import stopping
stopping.STOP_NOW_WITHIN_S = {WITHIN_S}
with stopping.StopRequest() as stop:
    print("listening", flush=True)
    while not stop.event.is_set():
        time.sleep(0.05)
    print("stopping", flush=True)
    time.sleep(600)  # a stop stuck in a write
"""


@contextmanager
def listening() -> Iterator[subprocess.Popen]:
    """The command above, once it listens for stops; killed at the end."""
    process = subprocess.Popen([sys.executable, "-c", HANGING_STOP], cwd=PROJECT_ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "listening\n"
        yield process
    finally:
        process.kill()
        process.wait()


def test_a_second_stop_ends_a_command_whose_stop_hangs_within_seconds():
    with listening() as process:
        process.send_signal(signal.SIGTERM)
        assert process.stdout.readline() == "stopping\n"
        process.send_signal(signal.SIGTERM)
        second_stop = time.monotonic()
        code = process.wait(timeout=WITHIN_S + 20)
        assert time.monotonic() - second_stop < WITHIN_S + 5
        assert code == 130 and "exiting now" in process.stderr.read()


def test_a_parent_asking_twice_to_stop_is_one_stop():
    with listening() as process:
        process.send_signal(signal.SIGUSR1)
        assert process.stdout.readline() == "stopping\n"
        process.send_signal(signal.SIGUSR1)  # systemd's SIGTERM reached it too: still the one clean stop
        time.sleep(WITHIN_S + 1)  # what would have ended it, had the second counted
        assert process.poll() is None
