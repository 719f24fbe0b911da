"""The layers are import-linter's contracts in pyproject.toml: the application (`lakehouse`) above the
two paths, which do not import each other, above `shared`; a pure core; a fast path without Delta;
the fast path's mode asked of one module; no import cycle. Each contract is also broken on purpose, in a copy of the source, to show it can fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lakehouse", "operational", "analytical", "shared")
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_every_contract_is_kept():
    result = lint_imports(ROOT)

    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 kept, 0 broken" in result.stdout


@pytest.mark.parametrize("module, line, contract", [
    ("analytical/reconciliation.py", "from operational import hot_pages", "The application runs the two paths"),
    ("shared/storage.py", "import lakehouse.cli", "The application runs the two paths"),
    ("shared/rule.py", "from shared.config import Config", "The product's core"),
    ("shared/alerts.py", "import yaml", "The product's core"),
    ("operational/hot_pages.py", "import delta", "The fast path runs in Spark 4.3's runtime"),
    ("shared/kafka_settings.py", "from shared import kafka", "No import cycle"),
    ("lakehouse/services/broker.py", "from operational.mode import fast_path_mode", "The fast path's mode is decided once"),
])
def test_a_contract_breaks_when_its_rule_is_broken(tmp_path, module, line, contract):
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    with (tmp_path / module).open("a") as source:
        source.write(f"\n{line}\n")

    result = lint_imports(tmp_path)

    assert result.returncode == 1, result.stdout
    broken = " ".join(result.stdout.partition("Broken contracts")[2].split())
    assert contract in broken, result.stdout


def test_the_fast_paths_mode_is_read_from_the_configuration_in_two_modules_only():
    """operational.mode decides it; the reconciliation models how the fast path counted from the same
    setting (the medallion cannot import the fast path). Everything else asks operational.mode."""
    readers = sorted(str(path.relative_to(ROOT)) for package in PACKAGES for path in (ROOT / package).rglob("*.py")
                     if ".operational.mode " in path.read_text() or ".operational.mode\n" in path.read_text())
    assert readers == ["analytical/fast_path_model.py", "operational/mode.py"]
