"""The Spark JVM this process launches: its output, its end with this process, and its own shutdown
when this process ends normally (shared.spark makes the session inside `launching`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from shared.processes import dying_with_parent
from shared.spark_internals import disconnect_py4j

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@contextmanager
def launching(quiet: bool = True) -> Iterator[None]:
    """The block in which PySpark launches this process's Spark JVM (`SparkSession.builder.getOrCreate`):
    the JVM's stdout goes to stderr, it dies with this process, and `quiet` drops its start-up noise
    (JVM_NOISE). A block that ends normally made the session: at exit the JVM is let to end on its own."""
    global _session_made
    with _stdout_to_stderr(), _dying_with_this_process(JVM_NOISE if quiet else ()):
        yield
    _session_made = True


_launched_jvm: "subprocess.Popen | None" = None
#: Whether this process's session was made (the JVM it launched reached a working SparkContext).
_session_made = False

#: What the JVM itself prints that no user can act on (log4j's own noise is filtered in
#: conf/log4j2.properties): Spark's launcher always adds the incubating vector module, and the JVM
#: announces it at every start.
JVM_NOISE = (b"WARNING: Using incubator modules: jdk.incubator.vector",)


def _relay_stderr(pipe, noise: tuple[bytes, ...]) -> None:
    """Copy the JVM's stderr (Spark's log lines) to this process's, line by line, without `noise`."""
    for line in iter(pipe.readline, b""):
        if line.strip() not in noise:
            os.write(2, line)

#: How long a process that ends normally waits for its Spark JVM's own shutdown (see below).
JVM_EXIT_WAIT_S = 60


@contextmanager
def _dying_with_this_process(noise: tuple[bytes, ...] = ()) -> Iterator[None]:
    """Have the kernel SIGKILL the Spark JVM that PySpark launches when this process dies.

    Left to itself the JVM notices its driver's death when its stdin closes and then runs Spark's
    shutdown hooks, its queries still writing meanwhile, for seconds on a loaded machine, during
    which a restart waits for the checkpoints. PySpark offers no hook on the
    launch, so its `Popen` is wrapped for the duration of the launch only. The signal follows the
    thread that started the JVM, so only the main thread (which lives as long as the process) arms it.

    A process that ends normally must still let the JVM run those hooks (they delete Spark's
    temporary folders): at exit it closes the JVM's stdin and waits for it, as PySpark's gateway
    expects, before the kernel's signal can cut it short.

    The JVM ignores SIGINT and SIGTERM (PySpark's own launch ignores only SIGINT): a stop sent to
    every process at once (a terminal's Ctrl-C to the group, systemd's control-group stop) reaches
    this process, which stops its queries cleanly through the JVM and then lets it end; without
    this, the JVM ran its shutdown hooks under the clean stop and took the session with it.
    """
    import atexit
    import threading

    from pyspark import java_gateway

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    launch = java_gateway.Popen

    def launch_dying_with_us(command, preexec_fn=None, **kwargs):
        global _launched_jvm

        def deaf_to_stops() -> None:  # in the child, before exec: HotSpot keeps a stop signal ignored at its start
            if preexec_fn is not None:
                preexec_fn()
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, signal.SIG_IGN)

        _launched_jvm = launch(dying_with_parent(command), stderr=subprocess.PIPE, preexec_fn=deaf_to_stops, **kwargs)
        threading.Thread(target=_relay_stderr, args=(_launched_jvm.stderr, noise), name="jvm-stderr",
                         daemon=True).start()
        atexit.register(_let_the_jvm_exit, _launched_jvm)
        return _launched_jvm

    java_gateway.Popen = launch_dying_with_us
    try:
        yield
    finally:
        java_gateway.Popen = launch


def stop_and_await_jvm(spark: "SparkSession") -> None:
    """Stop `spark` and wait for the JVM this process launched to exit (its shutdown hooks run)."""
    spark.stop()
    if _launched_jvm is not None:
        _let_the_jvm_exit(_launched_jvm)


def _let_the_jvm_exit(jvm: "subprocess.Popen") -> None:
    if jvm.poll() is None and not _session_made:
        # Its start was interrupted (a stop while the command started): it may not read its stdin
        # yet, its shutdown hooks would fail on the half-made context, and nothing ran to shut down.
        jvm.kill()
        jvm.wait()
        return
    if jvm.poll() is None and jvm.stdin is not None:
        _quiet_accumulator_server()
        disconnect_py4j()
        jvm.stdin.close()
        try:
            jvm.wait(timeout=JVM_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            pass  # the kernel kills it as this process ends


def _quiet_accumulator_server() -> None:
    """PySpark's accumulator server reads from a socket the JVM closes as it exits; while this
    process still lives, that read fails and socketserver prints the traceback to stderr, after the
    command's last word. This process is ending: the server's errors no longer matter."""
    from pyspark import accumulators

    for name in ("AccumulatorTCPServer", "AccumulatorUnixServer"):
        server_class = getattr(accumulators, name, None)
        if server_class is not None:
            server_class.handle_error = lambda self, request, client_address: None


@contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Point file descriptor 1 at stderr for a while.

    The JVM that PySpark launches inherits it: what Spark or Delta print (VACUUM's "Deleted N
    files", ...) goes to stderr with the logs, and stdout carries only the command's results.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
