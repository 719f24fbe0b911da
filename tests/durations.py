"""How long each test took, read from pytest's JUnit XML: the table CONTRIBUTING.md keeps beside the
tiers, the recorded baseline in `.ci/durations.tsv`, and CI's comparison with it.

    python -m tests.durations table .ci-results/*.xml      # each tier's total and the slowest 15, Markdown
    python -m tests.durations save .ci-results/*.xml       # the baseline: one line per test, to stdout
    python -m tests.durations compare .ci/durations.tsv .ci-results/*.xml --elapsed 2410 --budget 2400

`compare` is what `.ci/run` prints at its end: every tier's total against the baseline's, and when the
run took longer than its budget, the tests that grew since the baseline was recorded. A budget
exceeded is said, never met by leaving a suite out.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

from tests.tiers import ORDER

#: A test of the baseline has grown when it takes this much longer, in seconds and as a share of before.
GROWTH_S, GROWTH_SHARE = 10.0, 0.25
#: A test that takes longer says why in its docstring (tests/unit/test_durations.py holds it).
LONG_TEST_S = 120.0
#: The phrase that says it: "Its time: ..." in the docstring of a test over LONG_TEST_S.
WHY_SO_LONG = "Its time:"


class Duration(NamedTuple):
    test: str  # pytest's node id, e.g. tests/unit/test_cli.py::test_help
    tier: str
    seconds: float  # set-up, call and tear-down, as JUnit XML reports a test
    #: the core-seconds the machine was busy meanwhile (tests/tiers.py), every process's; None: not recorded
    busy_core_s: float | None = None

    @property
    def cores_busy(self) -> float | None:
        """The cores busy on average while it ran: near the machine's count, a test that works (or runs
        beside another); well under it, one that waits."""
        return None if self.busy_core_s is None or not self.seconds else self.busy_core_s / self.seconds


def read_junit(paths: Iterable[Path]) -> list[Duration]:
    """Every test case of the reports at `paths`, with the tier tests/tiers.py gave it."""
    found = []
    for path in paths:
        for case in ElementTree.parse(path).getroot().iter("testcase"):
            module = case.get("classname", "")  # a module's dotted name: the suite has no test classes
            test = f"{module.replace('.', '/')}.py::{case.get('name')}"
            properties = {prop.get("name"): prop.get("value") for prop in case.iter("property")}
            busy = properties.get("busy_core_s")
            found.append(Duration(test, properties.get("tier", "unit"), float(case.get("time", 0)),
                                  None if busy is None else float(busy)))
    return found


def read_baseline(path: Path) -> dict[str, Duration]:
    """The baseline `save` wrote: test, tier and seconds per line."""
    rows = [line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#")]
    return {test: Duration(test, tier, float(seconds)) for test, tier, seconds in rows}


def tier_totals(durations: Sequence[Duration]) -> dict[str, tuple[int, float]]:
    """Per tier, in the order they run: how many tests, and their seconds."""
    totals = {tier: (0, 0.0) for tier in ORDER}
    for duration in durations:
        count, seconds = totals.get(duration.tier, (0, 0.0))
        totals[duration.tier] = (count + 1, seconds + duration.seconds)
    return {tier: total for tier, total in totals.items() if total[0]}


def table(durations: Sequence[Duration], slowest: int = 15) -> str:
    """Markdown: each tier's tests and seconds, then the `slowest` tests with the cores busy meanwhile."""
    lines = ["| tier | tests | seconds |", "|---|---:|---:|"]
    lines += [f"| {tier} | {count} | {seconds:,.0f} |" for tier, (count, seconds) in tier_totals(durations).items()]
    lines += [f"| all | {len(durations)} | {sum(d.seconds for d in durations):,.0f} |", "",
              "| test | tier | seconds | cores busy |", "|---|---|---:|---:|"]
    lines += [f"| `{d.test}` | {d.tier} | {d.seconds:,.0f} | {'' if d.cores_busy is None else f'{d.cores_busy:.1f}'} |"
              for d in sorted(durations, key=lambda d: -d.seconds)[:slowest]]
    return "\n".join(lines)


def grown(baseline: dict[str, Duration], now: Sequence[Duration]) -> list[tuple[Duration, float | None]]:
    """The tests that take GROWTH_S and GROWTH_SHARE longer than in the baseline, or are new and take
    more than GROWTH_S; with their seconds before (None: new), most grown first."""
    found = []
    for duration in now:
        before = baseline.get(duration.test)
        limit = GROWTH_S if before is None else before.seconds + max(GROWTH_S, GROWTH_SHARE * before.seconds)
        if duration.seconds > limit:
            found.append((duration, None if before is None else before.seconds))
    return sorted(found, key=lambda pair: -(pair[0].seconds - (pair[1] or 0)))


def compare(baseline: dict[str, Duration], now: Sequence[Duration], elapsed_s: float | None,
            budget_s: float) -> str:
    """What CI prints at its end: the tiers against the baseline, and over budget, what grew."""
    before = tier_totals(list(baseline.values()))
    lines = ["tier          tests   seconds   baseline"]
    for tier, (count, seconds) in tier_totals(now).items():
        lines.append(f"{tier:<12} {count:>6} {seconds:>9,.0f} {before.get(tier, (0, 0.0))[1]:>10,.0f}")
    if elapsed_s is not None and elapsed_s > budget_s:
        lines.append(f"over budget: the run took {elapsed_s:,.0f} s, its budget is {budget_s:,.0f} s. "
                     "The tests that grew since the baseline (.ci/durations.tsv):")
        growth = grown(baseline, now)
        lines += [f"  {d.test} ({d.tier}): {'new' if was is None else f'{was:,.0f} s'} -> {d.seconds:,.0f} s"
                  for d, was in growth] or ["  none: the machine itself was slower than when it was recorded"]
    elif elapsed_s is not None:
        lines.append(f"within budget: {elapsed_s:,.0f} of {budget_s:,.0f} s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.durations", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    shown = commands.add_parser("table", help="Markdown: each tier's total and the slowest tests")
    shown.add_argument("--slowest", type=int, default=15)
    commands.add_parser("save", help="the baseline, one tab-separated line per test, to stdout")
    compared = commands.add_parser("compare", help="the tiers against a baseline; over budget, what grew")
    compared.add_argument("baseline", type=Path)
    compared.add_argument("--elapsed", type=float, help="the run's wall time in seconds")
    compared.add_argument("--budget", type=float, default=2400.0, help="its budget in seconds (default 2400)")
    for command in (shown, commands.choices["save"], compared):
        command.add_argument("reports", type=Path, nargs="+", help="pytest --junitxml files")
    args = parser.parse_args(argv)
    missing = [str(path) for path in args.reports if not path.is_file()]
    if missing:
        print(f"error: no such report: {', '.join(missing)}", file=sys.stderr)
        return 2
    durations = read_junit(args.reports)
    if args.command == "table":
        print(table(durations, args.slowest))
    elif args.command == "save":
        print("# test\ttier\tseconds (python -m tests.durations save)")
        for duration in sorted(durations, key=lambda d: (ORDER.index(d.tier), d.test)):
            print(f"{duration.test}\t{duration.tier}\t{duration.seconds:.1f}")
    else:
        baseline = read_baseline(args.baseline) if args.baseline.is_file() else {}
        print(compare(baseline, durations, args.elapsed, args.budget))
    return 0


if __name__ == "__main__":
    sys.exit(main())
