"""The unit tier: pure Python, no JVM. A test here that asks for Spark, or starts a JVM (Spark's
launcher or `java`), fails with where it belongs instead of slowing the tier down."""

from __future__ import annotations

import os
import sys

import pytest

_JVM_LAUNCHERS = ("java", "spark-submit", "spark-class")
_unit_test_running = False


def _refuse_a_jvm(event: str, args: tuple) -> None:
    if event != "subprocess.Popen" or not _unit_test_running:
        return
    argv = args[1] if isinstance(args[1], (list, tuple)) else [args[1]]
    path = str(args[0] or (argv[0] if argv else ""))
    program = os.path.basename(path)
    if program in _JVM_LAUNCHERS and not (program == "java" and _is_a_script(path)):
        raise RuntimeError(f"the unit tier starts no JVM ({program}): move this test to tests/spark or tests/integration")


def _is_a_script(path: str) -> bool:
    """A stand-in `java` a test writes (a shell script), not the JVM."""
    try:
        with open(path, "rb") as program:
            return program.read(2) == b"#!"
    except OSError:
        return False


sys.addaudithook(_refuse_a_jvm)  # an audit hook cannot be removed: it acts only while a unit test runs


@pytest.fixture(autouse=True)
def _no_jvm():
    global _unit_test_running
    _unit_test_running = True
    yield
    _unit_test_running = False


@pytest.fixture(scope="session")
def spark():
    pytest.fail("the unit tier starts no JVM: a test that needs a SparkSession belongs in tests/spark")
