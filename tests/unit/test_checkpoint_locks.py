"""The checkpoint locks: one writer per checkpoint, even while the holder clears its folder."""

from __future__ import annotations

import pytest

from shared.checkpoints import empty_keeping_locks, exclusive
from shared.errors import LakehouseError


def test_a_second_holder_is_refused_with_the_first_ones_pid(tmp_path):
    with exclusive(str(tmp_path), ["hot_pages"]):
        with pytest.raises(LakehouseError, match=r"hot_pages query's checkpoint .* is in use by pid \d+"):
            with exclusive(str(tmp_path), ["hot_pages"]):
                pass
    with exclusive(str(tmp_path), ["hot_pages"]):  # released when the block ends
        pass


def test_clearing_the_folder_keeps_the_held_locks_and_removes_everything_else(tmp_path):
    (tmp_path / "gold" / "page_clicks_5s").mkdir(parents=True)
    (tmp_path / "gold" / "page_clicks_5s" / "part-0.parquet").write_bytes(b"old")
    with exclusive(str(tmp_path), ["hot_pages"]):
        (tmp_path / "_checkpoints" / "hot_pages" / "offsets").mkdir(parents=True)

        empty_keeping_locks(str(tmp_path))

        assert sorted(path.name for path in tmp_path.rglob("*")) == ["_checkpoints", "hot_pages.lock"]
        with pytest.raises(LakehouseError, match="in use by pid"):  # still held: a second demo is refused
            with exclusive(str(tmp_path), ["hot_pages"]):
                pass


def test_the_jvm_a_dead_holder_left_behind_is_awaited_then_killed(tmp_path):
    """A holder killed with SIGKILL releases its lock at once, but its Spark JVM may still run its
    queries for a moment: the next holder must not write beside it. A real JVM stands in for it."""
    import subprocess
    import time

    from shared.jvm import java_executable

    program = tmp_path / "Linger.java"
    program.write_text("class Linger { public static void main(String[] a) throws Exception "
                       "{ System.out.println(\"up\"); Thread.sleep(600_000); } }")
    jvm = subprocess.Popen([java_executable(), str(program)], stdout=subprocess.PIPE, text=True)
    try:
        assert jvm.stdout.readline().strip() == "up"
        locks = tmp_path / "_checkpoints"
        locks.mkdir()
        (locks / "hot_pages.lock").write_text(f"pid 999999999 jvm {jvm.pid}")  # its Python is gone
        said = []

        started = time.monotonic()
        with exclusive(str(tmp_path), ["hot_pages"], report=said.append, orphan_grace_s=1):
            # Killed: no thread of it runs any more (the kernel may still be reaping the last ones).
            assert jvm.wait(timeout=5) == -9, "the lingering JVM was ended before the lock was taken"
        assert 1 <= time.monotonic() - started < 10
        assert said[0].startswith(f"waiting for the Spark JVM (pid {jvm.pid})") and "killing it" in said[1]
    finally:
        jvm.kill()
        jvm.wait()
