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
    #: `.jars/<jars>`: the folder `make setup` fills from pom.xml's profile of that name.
    jars: str
    #: Delta Lake is installed (the session gets Delta's extension and catalog).
    delta: bool

    @property
    def python(self) -> Path:
        override = os.environ.get(f"LAKEHOUSE_{self.name.upper().replace('-', '_')}_PYTHON")
        return Path(override) if override else self.venv / "bin" / "python"

    def spark_home(self) -> Path:
        """Its pyspark's folder, whose `jars/` hold its Spark: SPARK_HOME for the cluster daemons that
        run this runtime's Spark (shared.services.cluster)."""
        if self == current():
            import pyspark

            return Path(pyspark.__file__).parent
        import subprocess

        found = subprocess.run([str(self.require()), "-c", "import pyspark; print(pyspark.__file__)"],
                               capture_output=True, text=True)
        if found.returncode != 0:
            raise MissingDependencyError(f"the {self.name} runtime has no pyspark ({self.python}): run `make setup`")
        return Path(found.stdout.strip()).parent

    def require(self) -> Path:
        """Its interpreter, or a clear error saying how to install it."""
        if not self.python.exists():
            raise MissingDependencyError(
                f"the {self.name} runtime is not installed ({self.python} is missing): run `make setup`")
        return self.python


MEDALLION = Runtime("medallion", PROJECT_ROOT / ".venv", "spark", delta=True)
FAST_PATH = Runtime("fast-path", PROJECT_ROOT / ".venv-fast", "fast", delta=False)


def pyspark_version() -> tuple[int, int]:
    """This interpreter's pyspark (major, minor), read without importing pyspark."""
    from importlib.metadata import version

    major, minor, *_ = version("pyspark").split(".")
    return int(major), int(minor)


def current() -> Runtime:
    """The runtime this interpreter is: the fast path's from pyspark 4.3 on, else the medallion's."""
    return FAST_PATH if pyspark_version() >= REAL_TIME_SINCE else MEDALLION


def real_time_available() -> bool:
    """This interpreter's Spark runs stateful real-time queries."""
    return pyspark_version() >= REAL_TIME_SINCE


def command_in(runtime: Runtime, module: str, *args: str) -> list[str]:
    """`python -m module args` in `runtime`'s interpreter."""
    return [str(runtime.require() if runtime != current() else sys.executable), "-m", module, *args]
