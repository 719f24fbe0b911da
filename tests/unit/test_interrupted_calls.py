"""A stop while a command starts interrupts a call into the JVM: Py4J's records of that are dropped,
every other record kept."""

import logging
import sys

from shared.processes import _not_an_interrupted_jvm_call


def record(message: str, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord("py4j.clientserver", logging.ERROR, __file__, 1, message, None, exc_info)


def test_the_interrupted_call_and_the_shutdown_after_it_are_dropped_and_other_errors_kept():
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise BrokenPipeError(32, "Broken pipe")
    except BrokenPipeError:
        shutdown_after_the_interrupt = sys.exc_info()
    try:
        raise BrokenPipeError(32, "Broken pipe")
    except BrokenPipeError:
        a_real_failure = sys.exc_info()

    assert not _not_an_interrupted_jvm_call(record("KeyboardInterrupt while sending command."))
    assert not _not_an_interrupted_jvm_call(record("Exception occurred while shutting down connection",
                                                   shutdown_after_the_interrupt))
    assert _not_an_interrupted_jvm_call(record("Exception occurred while shutting down connection", a_real_failure))
    assert _not_an_interrupted_jvm_call(record("anything else"))


def test_a_stop_during_a_deferred_block_ends_it_at_its_end_and_a_second_stop_at_once():
    import os
    import signal

    import pytest

    from shared.processes import stops_deferred

    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    steps = []
    with pytest.raises(KeyboardInterrupt):
        with stops_deferred():
            os.kill(os.getpid(), signal.SIGTERM)  # delivered to this (main) thread before kill returns
            steps.append("the call in flight finished")
    assert steps == ["the call in flight finished"]

    with pytest.raises(KeyboardInterrupt):
        with stops_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)  # a second stop: now
            steps.append("not reached")
    assert steps == ["the call in flight finished"]
    assert {signum: signal.getsignal(signum) for signum in handlers} == handlers, "the handlers are restored"
