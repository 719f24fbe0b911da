"""The import contract: what each part of the product may depend on, checked on the source.

  - the pure core (schema, parsing, rule, alerts) imports nothing of the command line, the services,
    the runtimes or the monitoring: it is the product's definition, importable anywhere;
  - the fast path (`operational.hot_pages`) reaches neither Delta nor Great Expectations, nor the
    medallion: it runs in the fast path's runtime (pyspark 4.3), where neither is installed.

Imports are followed transitively through the project's own modules, those inside functions too.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "operational", "analytical")
CORE = ("shared.schema", "shared.parsing", "shared.rule", "shared.alerts")
NOT_FOR_THE_CORE = ("shared.cli", "shared.services", "shared.runtime", "shared.spark", "shared.processes",
                    "shared.metrics", "shared.monitoring", "shared.streaming", "operational", "analytical",
                    "delta", "great_expectations")
NOT_FOR_THE_FAST_PATH = ("delta", "great_expectations", "analytical", "deltalake", "duckdb", "polars")


def source_of(module: str) -> Path | None:
    path = ROOT.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def direct_imports(module: str) -> frozenset[str]:
    path = source_of(module)
    if path is None:
        return frozenset()
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names if source_of(f"{node.module}.{alias.name}")}
    return frozenset(found)


def reached(module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        current = todo.pop()
        for name in direct_imports(current):
            if name not in seen:
                seen.add(name)
                if name.split(".")[0] in PACKAGES:
                    todo.append(name)
    return seen


def offending(modules: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden))


@pytest.mark.parametrize("module", CORE)
def test_the_pure_core_imports_nothing_of_the_platform(module):
    assert source_of(module) is not None
    assert offending(reached(module), NOT_FOR_THE_CORE) == []


def test_the_fast_path_needs_neither_delta_nor_great_expectations():
    modules = reached("operational.hot_pages")
    assert "shared.rule" in modules and "pyspark.sql" in modules  # the walk follows the imports
    assert offending(modules, NOT_FOR_THE_FAST_PATH) == []


def test_the_contract_catches_a_forbidden_import():
    """The medallion's modules do reach Delta: the same walk finds it there."""
    assert offending(reached("analytical.silver_clicks"), NOT_FOR_THE_FAST_PATH)
