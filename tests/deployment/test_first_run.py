"""README's "Your first run, step by step", run as written (tests/walks.py) on the embedded default."""

from __future__ import annotations

from tests.walks import walk, walk_as_written


def test_the_readmes_first_run_works_as_written(tmp_path):
    """Its time: README's walk as written, each step a command of its own (a broker, `run`, 10 s of
    traffic, a backfill, the questions, the checks), and Ctrl-C lets the shipped 30-s real-time batch
    end, which this walk is the one test to wait for."""
    walk_as_written(walk("README.md", "## Your first run, step by step"), tmp_path)
