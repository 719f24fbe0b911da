"""Check the machine before set-up: Python 3.10+, a JDK 17+ (java and javac), Maven. Standard library only.

Run as `python3 -m lakehouse.prerequisites` (the Makefile does, before anything is installed).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from shared.errors import MissingDependencyError


def check() -> list[str]:
    problems = []
    if sys.version_info < (3, 10):
        problems.append(f"Python 3.10+ is required, this is {sys.version.split()[0]}: set PYTHON=python3.11")
    try:
        from shared.jvm import java_executable

        java = Path(os.path.realpath(java_executable()))
        if not (java.parent / "javac").exists():
            problems.append(f"javac was not found beside {java} (a JRE, not a JDK): `make setup` compiles the "
                            "fast path's JVM operator with it; install a JDK 17+ (Debian/Ubuntu: apt-get install "
                            "openjdk-17-jdk-headless) or set JAVA_HOME to one")
    except MissingDependencyError as error:
        problems.append(str(error))
    if not shutil.which("mvn"):
        problems.append("mvn (Apache Maven 3.6+) was not found: install it (Debian/Ubuntu: apt-get install maven)")
    return problems


if __name__ == "__main__":
    found = check()
    for problem in found:
        print(f"error: {problem}", file=sys.stderr)
    sys.exit(1 if found else 0)
