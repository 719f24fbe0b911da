"""The two Spark runtimes, one per application, and which one this interpreter is.

The medallion (and everything that reads Delta: quality, reconciliation, notebooks) runs on pyspark
4.1 with Delta, in `.venv`; the fast path runs on pyspark 4.3, whose real-time mode alerts within tens
of milliseconds, in `.venv-fast` (Delta has no build for 4.3). `make setup` makes both. A command that
needs the other runtime starts itself there (`command_in`): `lakehouse operational` typed in the
medallion's virtualenv runs its query in the fast path's.

    >>> current().name in ("medallion", "fast-path")
    True
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from shared import PROJECT_ROOT
from shared.errors import MissingDependencyError

#: The first pyspark release whose real-time mode runs stateful queries (aggregations, dropDuplicates).
REAL_TIME_SINCE = (4, 3)


@dataclass(frozen=True)
class Runtime:
    """A Spark runtime: its virtualenv, its Maven-resolved jars and what it can run."""

    name: str
    #: Its virtualenv; `LAKEHOUSE_<NAME>_PYTHON` names another interpreter (a cluster's image).
    venv: Path
    #: `.jars/<jars>`: the folder `make setup` fills from conf/jars/<jars>.xml (pom.xml's module of that name).
    jars: str
    #: Delta Lake is installed (the session gets Delta's extension and catalog).
    delta: bool

    @property
    def python(self) -> Path:
        override = os.environ.get(f"LAKEHOUSE_{self.name.upper().replace('-', '_')}_PYTHON")
        return Path(override) if override else self.venv / "bin" / "python"

    def spark_home(self) -> Path:
        """Its pyspark's folder, whose `jars/` hold its Spark: the SPARK_HOME of every Spark this runtime
        runs (its drivers, shared.spark; its cluster daemons, lakehouse.services.cluster)."""
        return Path(self._pyspark()[0]).parent

    def spark_version(self) -> str:
        """Its pyspark's version, e.g. `4.3.0`: the Spark its drivers and a cluster of its own run."""
        return self._pyspark()[1]

    def _pyspark(self) -> tuple[str, str]:
        """(pyspark's `__init__.py`, its version), read without importing pyspark, in its interpreter."""
        if self == current():
            return _pyspark_here()
        return _pyspark_of(str(self.require()), self.name)

    def require(self) -> Path:
        """Its interpreter, or a clear error saying how to install it."""
        if not self.python.exists():
            raise MissingDependencyError(
                f"the {self.name} runtime is not installed ({self.python} is missing): run `make setup`")
        return self.python


MEDALLION = Runtime("medallion", PROJECT_ROOT / ".venv", "spark", delta=True)
FAST_PATH = Runtime("fast-path", PROJECT_ROOT / ".venv-fast", "fast", delta=False)
RUNTIMES = (MEDALLION, FAST_PATH)


def pyspark_version() -> tuple[int, int]:
    """This interpreter's pyspark (major, minor), read without importing pyspark."""
    from importlib.metadata import version

    major, minor, *_ = version("pyspark").split(".")
    return int(major), int(minor)


def _pyspark_here() -> tuple[str, str]:
    from importlib.metadata import version
    from importlib.util import find_spec

    return find_spec("pyspark").origin, version("pyspark")


@cache
def _pyspark_of(python: str, name: str) -> tuple[str, str]:
    import subprocess

    found = subprocess.run([python, "-c", "from shared.runtime import _pyspark_here; print(*_pyspark_here(), sep='\\n')"],
                           capture_output=True, text=True, cwd=PROJECT_ROOT)
    if found.returncode != 0:
        raise MissingDependencyError(f"the {name} runtime has no pyspark ({python}): run `make setup`")
    origin, version = found.stdout.splitlines()[-2:]
    return origin, version


def current() -> Runtime:
    """The runtime this interpreter is: the fast path's from pyspark 4.3 on, else the medallion's."""
    return FAST_PATH if pyspark_version() >= REAL_TIME_SINCE else MEDALLION


def real_time_available() -> bool:
    """This interpreter's Spark runs stateful real-time queries."""
    return pyspark_version() >= REAL_TIME_SINCE


def command_in(runtime: Runtime, module: str, *args: str) -> list[str]:
    """`python -m module args` in `runtime`'s interpreter."""
    return [str(runtime.require() if runtime != current() else sys.executable), "-m", module, *args]
