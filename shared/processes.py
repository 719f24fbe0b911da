"""Child processes end with the command that started them, however it ends.

A clean stop (SIGINT, SIGTERM, the end of `--seconds`) stops children in order: each command does
that itself. This module covers the rest: SIGKILL and the OOM killer give the parent no chance to
clean up, and a child that outlives it keeps its checkpoint locks, so a restart is refused until
someone finds it. Linux's parent-death signal (`prctl(PR_SET_PDEATHSIG)`) has the kernel kill the
child the moment its parent dies:

  - a `lakehouse` child (Python) is started with `env=child_env()`, which names its parent;
    the child arms the signal itself as it starts (`die_with_parent`, called by the CLI's `main`),
    which is safer than arming it between fork and exec in a parent that runs JVM threads;
  - any other child (the broker's JVM, the Spark JVM that PySpark launches: `shared.spark`) is
    started through `setpriv --pdeathsig KILL` (util-linux).

The kernel's parent is the thread that started the child: a child started from a thread is killed when that
thread ends, so a thread that (re)starts a child lives as long as the child should.
"""

from __future__ import annotations

import ctypes
import logging
import os
import shutil
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from shared.errors import MissingDependencyError

PARENT_ENV = "LAKEHOUSE_PARENT_PID"
_PR_SET_PDEATHSIG = 1


def child_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a `lakehouse` child process (`python -m lakehouse.cli ...` or a benchmark's
    child) that must die with this one: `env` (default: this process's) naming this process. Without
    SPARK_HOME: a child may run the other runtime, and each runtime's Spark is its own (shared.spark)."""
    inherited = {key: value for key, value in (os.environ if env is None else env).items() if key != "SPARK_HOME"}
    return {**inherited, PARENT_ENV: str(os.getpid())}


def die_with_parent() -> None:
    """When this process was started with `child_env()`: have the kernel SIGKILL it when its parent dies.

    The parent is named by pid, and checked after arming: a parent that died before the signal was
    armed has left this process to init, and it exits at once instead of running orphaned.
    """
    expected = os.environ.pop(PARENT_ENV, None)
    if not expected or not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return  # not allowed here: the parent still stops it on a clean exit
    if os.getppid() != int(expected):
        os._exit(1)


#: How a `lakehouse` command asks a `lakehouse` child of its own to stop: a first stop however many
#: times it comes (the child may have had the user's SIGTERM or Ctrl-C too: systemd's control-group
#: stop and a terminal's Ctrl-C reach every process at once, and a second SIGTERM means "stop now").
PARENT_STOP = signal.SIGUSR1
#: ... and to stop now, when the user stopped the parent a second time.
PARENT_STOP_NOW = signal.SIGUSR2
#: Every signal a command takes as a stop request.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, PARENT_STOP, PARENT_STOP_NOW)


def stop_signals_interrupt() -> None:
    """SIGTERM interrupts as Ctrl-C does (KeyboardInterrupt) until a command listens for stop requests
    (`shared.stopping.StopRequest`): a stop that arrives while a command is still starting unwinds
    through its cleanup and ends it cleanly, instead of ending the process where it stands.

    Py4J logs an interrupted call to the JVM as an error with its traceback; here that is the stop
    the command asked for, and the command says so itself, so that record is dropped."""
    for signum in (signal.SIGTERM, PARENT_STOP, PARENT_STOP_NOW):
        signal.signal(signum, signal.default_int_handler)
    for name in ("", "py4j.clientserver", "py4j.java_gateway"):  # a logger's filter sees only its own records
        logging.getLogger(name).addFilter(_not_an_interrupted_jvm_call)


def _not_an_interrupted_jvm_call(record: logging.LogRecord) -> bool:
    """False for Py4J's record of a call the stop interrupted (its message, or a KeyboardInterrupt
    anywhere in its exception's chain: the connection's shutdown after the interrupted call)."""
    if record.getMessage() == "KeyboardInterrupt while sending command.":
        return False
    error = record.exc_info[1] if record.exc_info else None
    while error is not None:
        if isinstance(error, KeyboardInterrupt):
            return False
        error = error.__cause__ or error.__context__
    return True


@contextmanager
def stops_deferred(instead: threading.Event | None = None) -> Iterator[None]:
    """A stop (SIGINT, SIGTERM, PARENT_STOP) that arrives during the block takes effect as the block ends: a
    KeyboardInterrupt then, as `stop_signals_interrupt` would have raised at once; or, given
    `instead`, that event set (the caller still has work to finish before it stops).

    For a command's start-up work in the JVM (the Spark session's launch, a Delta table's first
    commit): a KeyboardInterrupt abandons the Py4J call but not the job behind it, which then fails
    as the JVM shuts down under it, in errors and stack traces nobody can act on. A second stop
    raises at once, as a second Ctrl-C stops a running command now: a start that hangs (a cluster
    master that does not answer) can still be ended. Main thread only.
    """
    requested: list[int] = []

    def defer(signum: int, frame: Any) -> None:
        if signum == PARENT_STOP_NOW or (requested and signum != PARENT_STOP):
            raise KeyboardInterrupt
        requested.append(signum)

    previous = {signum: signal.signal(signum, defer) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if requested and instead is not None:
        instead.set()
    elif requested:
        raise KeyboardInterrupt


def dying_with_parent(command: Sequence[str]) -> list[str]:
    """`command` prefixed so that the kernel kills it when the process that starts it dies."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise MissingDependencyError(
            "setpriv was not found: install util-linux (Debian/Ubuntu: apt-get install util-linux)")
    return [setpriv, "--pdeathsig", "KILL", "--", *command]
