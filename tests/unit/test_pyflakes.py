"""pyflakes' checks over every module, test and notebook (ruff's F rules, pyproject.toml): a name
imported twice hides the first, which a test of the crash suite once called with the other's arguments."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).with_name("ruff")
CHECKED = ("lakehouse", "operational", "analytical", "shared", "tests", "notebooks")


def ruff(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(RUFF), "check", "--no-cache", "--output-format", "concise", *CHECKED], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_no_module_test_or_notebook_has_a_pyflakes_finding():
    result = ruff(ROOT)

    assert result.returncode == 0, result.stdout + result.stderr


def test_a_name_imported_twice_is_found(tmp_path):
    for folder in CHECKED:
        (tmp_path / folder).mkdir()
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "tests" / "test_twice.py").write_text(
        "from tests.traffic import click\nfrom tests.helpers import click\n\nclick()\n")

    result = ruff(tmp_path)

    assert result.returncode == 1
    assert "tests/test_twice.py:2:27: F811" in result.stdout, result.stdout
