"""Every promise of CONTRACT.md has tests: CONTRIBUTING.md's table "What tests each promise" has a row
for every command (read from the real parser), every table of the registry and the erasure requests, every `sessions.*` and `erasure.*` key, every
reconciliation cause and every exit code, and
every test it names exists; every parse reason is a case of the parsing's table test."""

from __future__ import annotations

import argparse
import ast
import re
from functools import cache

from analytical.reconciliation import CAUSES, UNEXPLAINED
from analytical.erasure_requests import TABLE as ERASURE_REQUESTS
from analytical.registry import TABLES
from lakehouse.cli import build_parser
from shared import PROJECT_ROOT
from shared.config import ErasureConfig, SessionsConfig
from shared.parsing import PARSE_REASONS

EXIT_CODES = ("exit 0", "exit 1", "exit 2")


def commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[str]:
    """Every leaf command of `parser`, as a user types it after `lakehouse`."""
    actions = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not actions:
        return [" ".join(path)]
    return [leaf for action in actions for name, child in action.choices.items() for leaf in commands(child, (*path, name))]


@cache
def rows() -> dict[str, list[str]]:
    """The table's rows: promise (its backticked or leading words) -> the tests it names."""
    section = (PROJECT_ROOT / "CONTRIBUTING.md").read_text().split("### What tests each promise", 1)[1]
    found = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 2 or cells[0] in ("promise", "---"):
            continue
        promise = cells[0].replace("`", "").split(":")[0].strip()
        found[promise] = [name.strip() for name in cells[1].split(",") if name.strip()]
    return found


def test_every_command_cause_and_exit_code_has_a_row():
    promised = [f"lakehouse {command}" for command in commands(build_parser())]
    promised += [f"cause {cause}" for cause in [*CAUSES, UNEXPLAINED]] + ["outsideHistory", *EXIT_CODES]
    promised += [f"table {table.name}" for table in (*TABLES, ERASURE_REQUESTS)]
    promised += [f"key sessions.{key}" for key in SessionsConfig.model_fields]
    promised += [f"key erasure.{key}" for key in ErasureConfig.model_fields]
    assert [promise for promise in promised if not rows().get(promise)] == []
    assert [promise for promise in rows() if promise not in promised] == [], "a row for no promise"


def test_every_test_a_row_names_exists():
    defined: dict[str, set[str]] = {}
    missing = []
    for promise, tests in rows().items():
        for test in tests:
            module, _, name = test.partition("::")
            path = PROJECT_ROOT / module
            if module not in defined:
                defined[module] = {node.name for node in ast.walk(ast.parse(path.read_text()))
                                   if isinstance(node, ast.FunctionDef)} if path.is_file() else set()
            if not re.fullmatch(r"test_\w+", name) or name not in defined[module]:
                missing.append(f"{promise}: {test}")
    assert missing == []


def test_every_parse_reason_is_a_case_of_the_parsings_table_test():
    source = (PROJECT_ROOT / "tests/spark/test_parsing.py").read_text()
    cases = next(node.value for node in ast.parse(source).body
                 if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CASES")
    reasons = {element.elts[2].value for element in cases.elts if isinstance(element.elts[2], ast.Constant)}
    assert {reason.value for reason in PARSE_REASONS} - reasons == set()
