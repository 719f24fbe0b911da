"""The JVMs a run started, per tier and per test, from the log `.ci/count-jvms` writes (one line per
`java` started: the time, the test running then, its short arguments).

    python -m tests.jvm_starts /tmp/count-jvms.XXXX/starts.tsv [--top 25] [--json]

A JVM that ends at once is counted apart: a `java -version` (how the project checks the JDK), and
Spark's launcher (`org.apache.spark.launcher.Main`, which spark-submit runs to build the command of
the JVM it then starts).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from tests.tiers import ORDER, TIERS


def read(path: Path) -> list[tuple[str, str]]:
    """(test node id or "" outside a test, arguments) per `java` started."""
    starts = []
    for line in path.read_text().splitlines():
        _, test, arguments = (line.split("\t") + ["", ""])[:3]
        test = "" if test == "none" else test.rsplit(" (", 1)[0]  # "tests/x.py::test_y (call)"
        starts.append((test, arguments.strip()))
    return starts


def tier(test: str) -> str:
    """A test's tier by its folder (tests/tiers.py); "set-up" outside any test."""
    parts = test.split("/")
    return TIERS.get(parts[1], "other") if test and len(parts) > 2 else "set-up"


LAUNCHER = "org.apache.spark.launcher.Main"


def summary(starts: list[tuple[str, str]], top: int = 25) -> dict:
    probes = sum(arguments == "-version" for _, arguments in starts)
    launchers = sum(LAUNCHER in arguments.split() for _, arguments in starts)
    jvms = [(test, arguments) for test, arguments in starts
            if arguments != "-version" and LAUNCHER not in arguments.split()]
    per_tier = Counter(tier(test) for test, _ in jvms)
    return {"jvm_starts": len(jvms), "version_probes": probes, "spark_launchers": launchers,
            "per_tier": {name: per_tier[name] for name in (*ORDER, "set-up", "other") if per_tier[name]},
            "per_test": dict(Counter(test for test, _ in jvms if test).most_common(top))}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.jvm_starts", description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path)
    parser.add_argument("--top", type=int, default=25, help="the tests that started the most (default 25)")
    args = parser.parse_args(argv)
    if not args.log.is_file():
        print(f"error: no such log: {args.log}", file=sys.stderr)
        return 2
    print(json.dumps(summary(read(args.log), args.top), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
