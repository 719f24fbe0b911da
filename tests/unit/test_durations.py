"""The duration table CI compares (tests/durations.py): read from pytest's JUnit XML, each tier's total,
the tests that grew past the baseline, and the rule that a test over two minutes says why."""

from __future__ import annotations

import ast
from pathlib import Path

from shared import PROJECT_ROOT
from tests.durations import (LONG_TEST_S, WHY_SO_LONG, Duration, compare, grown, main, read_baseline, read_junit,
                             table, tier_totals)

REPORT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.unit.test_cli" name="test_help" time="0.5">
  <properties><property name="tier" value="unit"/></properties></testcase>
<testcase classname="tests.integration.test_run" name="test_run_feeds[local]" time="80.25">
  <properties><property name="tier" value="integration"/><property name="busy_core_s" value="120.4"/></properties>
</testcase>
<testcase classname="tests.realtime.test_hostile_input" name="test_hostile" time="30">
  <properties><property name="tier" value="faults"/></properties></testcase>
</testsuite></testsuites>"""


def _report(tmp_path: Path) -> Path:
    path = tmp_path / "medallion.xml"
    path.write_text(REPORT)
    return path


def test_a_junit_report_gives_each_test_its_node_id_tier_and_seconds(tmp_path):
    assert read_junit([_report(tmp_path)]) == [
        Duration("tests/unit/test_cli.py::test_help", "unit", 0.5),
        Duration("tests/integration/test_run.py::test_run_feeds[local]", "integration", 80.25, 120.4),
        Duration("tests/realtime/test_hostile_input.py::test_hostile", "faults", 30.0)]


def test_the_table_totals_each_tier_in_run_order_and_lists_the_slowest_first(tmp_path):
    durations = read_junit([_report(tmp_path)])
    assert tier_totals(durations) == {"unit": (1, 0.5), "integration": (1, 80.25), "faults": (1, 30.0)}
    lines = table(durations, slowest=2).splitlines()
    assert lines[2:6] == ["| unit | 1 | 0 |", "| integration | 1 | 80 |", "| faults | 1 | 30 |", "| all | 3 | 111 |"]
    assert lines[-2:] == ["| `tests/integration/test_run.py::test_run_feeds[local]` | integration | 80 | 1.5 |",
                          "| `tests/realtime/test_hostile_input.py::test_hostile` | faults | 30 |  |"]


def test_over_budget_ci_names_the_tests_that_grew_and_within_it_says_so(tmp_path, capsys):
    report = _report(tmp_path)
    assert main(["save", str(report)]) == 0
    baseline_file = tmp_path / "durations.tsv"
    baseline_file.write_text(capsys.readouterr().out.replace("80.2", "60.0").replace("\t30.0", "\t25.0"))
    baseline = read_baseline(baseline_file)
    now = [*read_junit([report]), Duration("tests/unit/test_new.py::test_new", "unit", 12.0)]

    # 60 -> 80.25 grew by more than 10 s and a quarter; 25 -> 30 is within both; a new 12-s test is named
    assert [(d.test, was) for d, was in grown(baseline, now)] == [
        ("tests/integration/test_run.py::test_run_feeds[local]", 60.0), ("tests/unit/test_new.py::test_new", None)]
    over = compare(baseline, now, elapsed_s=2500, budget_s=2400)
    assert "over budget: the run took 2,500 s, its budget is 2,400 s" in over
    assert "  tests/integration/test_run.py::test_run_feeds[local] (integration): 60 s -> 80 s" in over
    assert "  tests/unit/test_new.py::test_new (unit): new -> 12 s" in over
    assert "grew" not in compare(baseline, now, elapsed_s=2000, budget_s=2400).split("within budget")[1]
    assert main(["compare", str(baseline_file), str(tmp_path / "missing.xml")]) == 2
    assert "no such report" in capsys.readouterr().err


def _docstrings() -> dict[str, str]:
    """pytest node id (without parameters) -> the test function's docstring, for every test module."""
    found = {}
    for module in (PROJECT_ROOT / "tests").rglob("test_*.py"):
        for node in ast.parse(module.read_text()).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found[f"{module.relative_to(PROJECT_ROOT)}::{node.name}"] = ast.get_docstring(node) or ""
    return found


def test_every_test_that_took_over_two_minutes_says_why_in_its_docstring():
    baseline = read_baseline(PROJECT_ROOT / ".ci" / "durations.tsv")
    docstrings = _docstrings()
    long_ones = {d.test.split("[")[0] for d in baseline.values() if d.seconds > LONG_TEST_S}
    assert long_ones <= set(docstrings), "a recorded test no longer exists: record the baseline again"
    silent = sorted(test for test in long_ones if WHY_SO_LONG not in docstrings[test])
    assert silent == [], f"over {LONG_TEST_S:g} s in .ci/durations.tsv, and no '{WHY_SO_LONG} ...' in the docstring"
