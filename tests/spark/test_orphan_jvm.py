"""A dead checkpoint holder's JVM: awaited, then killed (a real JVM stands in for it)."""

from __future__ import annotations

from shared.checkpoint_locks import exclusive


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
