"""Where the JVM side lives: the `java` to run, the Maven-resolved jars under `.jars/`, and the
Spark JVM's class-data archive beside them.

`make setup` fills `.jars/spark` (for Spark's `spark.jars`) and `.jars/broker` (the embedded
Kafka broker's classpath) from pom.xml. The two folders never mix: the broker's Kafka and Scala
versions differ from Spark's.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from shared import PROJECT_ROOT
from shared.errors import MissingDependencyError

JARS_DIR = Path(os.environ.get("LAKEHOUSE_JARS_DIR", PROJECT_ROOT / ".jars"))
MIN_JAVA = 17
_INSTALL_JAVA = "install a JDK 17 or newer (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless) or set JAVA_HOME"


def java_executable() -> str:
    """The `java` binary (JAVA_HOME first, then PATH), checked to be version 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    candidate = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not candidate or not Path(candidate).exists():
        raise MissingDependencyError(f"java was not found: {_INSTALL_JAVA}")
    found = Path(candidate).stat()
    try:
        output = _version_output(candidate, found.st_mtime_ns, found.st_size)
    except OSError as error:
        raise MissingDependencyError(f"{candidate} cannot run ({error.strerror}): {_INSTALL_JAVA}") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', output)
    major = int(match.group(1)) if match else 0
    if major == 1 and match and match.group(2):  # "1.8.0_x" style
        major = int(match.group(2))
    if major < MIN_JAVA:
        found = output.splitlines()[0] if output else "unknown version"
        raise MissingDependencyError(f"java {MIN_JAVA}+ is required, {candidate} is {found}: {_INSTALL_JAVA}")
    return candidate


@functools.cache
def _version_output(java: str, mtime_ns: int, size: int) -> str:
    """What `java -version` prints, asked once per binary (its time and size tell a replaced one): a
    process that starts Spark, a broker and a store asks for `java` each time, and each asking is a JVM."""
    return subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False).stderr


def jars(kind: str) -> list[Path]:
    """The jars of `.jars/<kind>` ('spark', 'fast' or 'broker'); a clear error when set-up has not run."""
    folder = JARS_DIR / kind
    found = sorted(folder.glob("*.jar"))
    if not found:
        raise MissingDependencyError(
            f"no jars in {folder}: run `make setup` (it resolves them with Maven from pom.xml)"
        )
    return found


#: Where `python -m lakehouse.class_archive` writes the Spark JVM's class-data archive.
ARCHIVE_DIR = JARS_DIR / "class-archive"


def archive_path() -> Path:
    """The Spark JVM's class-data archive (`lakehouse.class_archive`) for this runtime's `java`, pyspark
    and Spark jars (where they are, their sizes and times: what CDS checks of the class path); it may
    not exist yet. A new, moved or rebuilt install (the fast path's processor jar) gets a new name, so
    a stale archive, which the JVM would ignore, is never kept in its place."""
    import pyspark

    from shared.runtime import current

    runtime = current()
    identity = "\n".join([os.path.realpath(java_executable()), pyspark.__version__, pyspark.__file__,
                          *(f"{path} {stat.st_size} {stat.st_mtime_ns}"
                            for path in jars(runtime.jars) for stat in [path.stat()])])
    return ARCHIVE_DIR / f"{archive_prefix(runtime.name)}{hashlib.sha256(identity.encode()).hexdigest()[:16]}.jsa"


def archive_prefix(runtime: str) -> str:
    """The start of the names of a runtime's archives: each runtime has its own, one at a time."""
    return f"spark-{runtime}-"


def class_archive_option() -> str | None:
    """`-XX:SharedArchiveFile=...` when this install's archive exists, else None."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path}" if path.is_file() else None
