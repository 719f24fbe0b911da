"""Check the machine before set-up: Python 3.10+, Java 17+, Maven. Standard library only.

Run as `python3 -m lakehouse.prerequisites` (the Makefile does, before anything is installed).
"""

from __future__ import annotations

import shutil
import sys

from shared.errors import MissingDependencyError


def check() -> list[str]:
    problems = []
    if sys.version_info < (3, 10):
        problems.append(f"Python 3.10+ is required, this is {sys.version.split()[0]}: set PYTHON=python3.11")
    try:
        from shared.jvm import java_executable

        java_executable()
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
