"""Small helpers the tests share: run the real `lakehouse` command, wait on a condition."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

LAKEHOUSE = str(Path(sys.executable).with_name("lakehouse"))


def run_lakehouse(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """The installed console script, as a user runs it; stdout and stderr captured as text."""
    return subprocess.run([LAKEHOUSE, *args], capture_output=True, text=True, env=env, timeout=timeout, check=False)


def lakehouse_here(*args: str) -> subprocess.CompletedProcess:
    """`lakehouse ARGS` run in this process (`lakehouse.cli.main`), on the run's SparkSession: the
    command's own code, output and exit code, without a Python and a JVM of its own. A command's
    wiring as a console script is tested by a `run_lakehouse` call of it; its other calls go here.
    Commands that run until stopped (`run`, `operational`) stay in subprocesses. The stop signals'
    handlers a command installs for itself are put back as they were: the test run's own stay."""
    import contextlib
    import io
    import signal

    from lakehouse.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(_keeping_the_runs_log_level(list(args)))
        except SystemExit as exit:  # argparse's usage errors
            code = exit.code if isinstance(exit.code, int) else 2
        finally:
            for signum, handler in handlers.items():
                signal.signal(signum, handler)
    return subprocess.CompletedProcess(["lakehouse", *args], code, stdout.getvalue(), stderr.getvalue())


def _keeping_the_runs_log_level(args: list[str]) -> list[str]:
    """`args` with the run's log level set beside their last --set (a subcommand's --set values replace
    those given before it), so that the command's session settings leave the run's session quiet."""
    level = "--set=spark.log_level=ERROR"
    for at in range(len(args) - 1, -1, -1):
        if args[at].startswith("--set=") or (args[at] == "--set" and at + 1 < len(args)):
            after = at + (1 if args[at].startswith("--set=") else 2)
            return [*args[:after], level, *args[after:]]
    return [level, *args]


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str, every_s: float = 0.1) -> None:
    """Poll `condition` every `every_s` until it holds; a costly condition (a Spark read) should
    poll slowly, or it takes the cores from the processes it waits for."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(every_s)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


def ahead_of_the_clock(event_id: str, page: str, minutes: float = 30) -> tuple[bytes, int]:
    """A click dated `minutes` ahead of this machine's clock, and the same instant as a Kafka
    CreateTime in milliseconds: a producer whose clock runs ahead (the broker accepts up to 1 hour)."""
    from datetime import datetime, timedelta, timezone

    at = datetime.now(timezone.utc) + timedelta(minutes=minutes)
    value = json.dumps({"eventId": event_id, "pageId": page,
                        "eventTime": at.isoformat(timespec="milliseconds").replace("+00:00", "Z")}).encode()
    return value, int(at.timestamp() * 1000)


def click(event_id: str, page: str, time: str, day: str = "2026-11-22", **extra: str) -> bytes:
    """A valid click event's Kafka value at `day`T`time`Z (extra fields are added as given)."""
    return json.dumps({"eventId": event_id, "pageId": page, "eventTime": f"{day}T{time}Z", **extra}).encode()


def send(config, *values: bytes | None, key: bytes = b"k", timestamp_ms: int | None = None) -> None:
    """Produce `values` to the config's clicks topic, in order, and wait until all are acknowledged.

    `timestamp_ms`: the records' CreateTime (the topic's default timestamp type), else the producer's clock."""
    from shared.kafka import producer_for

    producer = producer_for(config.kafka)
    for value in values:
        producer.send(config.kafka.topics.clicks, key=key, value=value, timestamp_ms=timestamp_ms)
    producer.flush()
    producer.close()


#: Warning lines a user may still meet in a command's output (OPERATIONS.md, "A quiet console"):
#: every other WARN or WARNING line is one nobody can act on and fails the tests that look.
EXPECTED_WARNINGS: tuple[str, ...] = (
    "StateStore: Loaded state store provider in loadTimeMs=",  # a loaded machine or a slow state store
)


def unwanted_warnings(output: str) -> list[str]:
    """The WARN/WARNING lines of `output` that are not on EXPECTED_WARNINGS."""
    return [line for line in output.splitlines()
            if re.search(r"\bWARN(ING)?\b", line) and not any(expected in line for expected in EXPECTED_WARNINGS)]


def assert_quiet(output: str) -> None:
    """No warning in `output` that no user can act on (OPERATIONS.md, "A quiet console"); the failure
    shows the lines, since a warning of a slow hour may not come again."""
    unwanted = unwanted_warnings(output)
    assert not unwanted, 'a warning no user can act on (OPERATIONS.md, "A quiet console"):\n' + "\n".join(unwanted[:20])


def assert_no_errors(output: str, context: int = 12) -> None:
    """No ERROR line and no Python traceback in `output`; the failure shows each with the lines after
    it (a stack trace, the traceback's frames), since the error of a slow hour may not come again."""
    lines = output.splitlines()
    hits = [index for index, line in enumerate(lines) if " ERROR " in line or "Traceback" in line]
    shown = [f"line {index + 1}:\n" + "\n".join(lines[index:index + context]) for index in hits[:5]]
    assert not hits, f"{len(hits)} error line(s); the first {len(shown)}:\n" + "\n...\n".join(shown)


def forget_the_batch_commit(checkpoint: str) -> None:
    """Delete a query's newest commit from its checkpoint, as if it had died before writing it."""
    commits = Path(checkpoint, "commits")
    last = max(int(entry.name) for entry in commits.iterdir() if entry.name.isdigit())
    for written in (commits / str(last), commits / f".{last}.crc"):
        written.unlink(missing_ok=True)


def files_holding(root: Path, text: str) -> list[str]:
    """The files under `root` (paths relative to it) that hold `text`: a Parquet file's every value
    decoded (its pages are compressed), any other file's bytes as they are (Delta's JSON log, checksums,
    checkpoints' offsets and state). What a data-protection officer's scan of a lake for a user's id finds."""
    import pyarrow.parquet as pq

    wanted = text.encode()

    def holds(value) -> bool:
        if isinstance(value, dict):
            return any(holds(item) for pair in value.items() for item in pair)
        if isinstance(value, (list, tuple)):
            return any(holds(item) for item in value)
        return wanted in value if isinstance(value, bytes) else isinstance(value, str) and text in value

    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        hit = any(holds(row) for row in pq.read_table(path).to_pylist()) if path.suffix == ".parquet" \
            else wanted in path.read_bytes()
        if hit:
            found.append(str(path.relative_to(root)))
    return found
