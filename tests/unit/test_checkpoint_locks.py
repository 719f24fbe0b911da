"""The checkpoint locks: one writer per checkpoint, even while the holder clears its folder (a dead
holder's JVM: tests/spark/test_orphan_jvm.py)."""

from __future__ import annotations

import json
import os

import pytest

from shared.checkpoint_locks import StoppedMarks, empty_keeping_locks, exclusive, holder
from shared.errors import LakehouseError


def test_a_second_holder_is_refused_with_the_first_ones_pid(tmp_path):
    with exclusive(str(tmp_path), ["hot_pages"]):
        with pytest.raises(LakehouseError, match=r"hot_pages query's checkpoint .* is in use by pid \d+"):
            with exclusive(str(tmp_path), ["hot_pages"]):
                pass
    with exclusive(str(tmp_path), ["hot_pages"]):  # released when the block ends
        pass


def test_clearing_the_folder_keeps_the_held_locks_and_removes_everything_else(tmp_path):
    (tmp_path / "gold" / "page_clicks_5s").mkdir(parents=True)
    (tmp_path / "gold" / "page_clicks_5s" / "part-0.parquet").write_bytes(b"old")
    with exclusive(str(tmp_path), ["hot_pages"]):
        (tmp_path / "_checkpoints" / "hot_pages" / "offsets").mkdir(parents=True)

        empty_keeping_locks(str(tmp_path))

        assert sorted(path.name for path in tmp_path.rglob("*")) == ["_checkpoints", "hot_pages.lock"]
        with pytest.raises(LakehouseError, match="in use by pid"):  # still held: a second demo is refused
            with exclusive(str(tmp_path), ["hot_pages"]):
                pass


def test_a_holder_that_ended_normally_leaves_no_jvm_for_the_next_one_to_wait_for(tmp_path):
    """A block that ends normally has stopped its queries: its JVM, which may live on (a process that
    runs several commands on one session), is no orphan the next holder must wait for or kill."""
    lock = tmp_path / "_checkpoints" / "hot_pages.lock"
    with exclusive(str(tmp_path), ["hot_pages"]) as locks:
        locks.record_jvm(os.getpid())  # a live process, standing in for the JVM
        assert lock.read_text() == f"pid {os.getpid()} jvm {os.getpid()}"
    assert lock.read_text() == f"pid {os.getpid()}"
    with pytest.raises(RuntimeError):
        with exclusive(str(tmp_path), ["hot_pages"]) as locks:
            locks.record_jvm(os.getpid())
            raise RuntimeError("a holder that failed")
    assert lock.read_text().endswith(f"jvm {os.getpid()}"), "a failed holder's JVM may still write: named"


def test_a_clean_end_marks_the_queries_stopped_and_a_start_or_a_failed_block_leaves_no_mark(tmp_path):
    root = str(tmp_path)
    marks = StoppedMarks(root, None)
    mark = tmp_path / "_checkpoints" / "hot_pages.stopped"

    with exclusive(root, ["hot_pages"], marks=marks):
        assert not mark.exists() and "hot_pages" not in marks
    assert json.loads(mark.read_text())["pid"] == os.getpid() and "hot_pages" in marks

    with exclusive(root, ["hot_pages"], marks=marks):
        assert not mark.exists(), "a started query is not stopped: its mark goes before it starts"
    with pytest.raises(RuntimeError):
        with exclusive(root, ["hot_pages"], marks=marks):
            raise RuntimeError("a query failed")
    assert not mark.exists() and "hot_pages" not in marks, "no clean stop, no mark"


def test_an_object_store_query_nobody_here_holds_is_stopped_only_when_its_mark_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr("shared.storage.REMOTE_ROOTS_HERE", tmp_path / "here")
    root, marked_elsewhere = "s3a://bucket/prefix", StoppedMarks(str(tmp_path / "store"), None)

    assert holder(root, "hot_pages") == holder(root, "hot_pages", marked_elsewhere) == "unknown"
    with exclusive(str(tmp_path / "store"), ["hot_pages"], marks=marked_elsewhere):  # a run elsewhere, stopped
        pass
    assert holder(root, "hot_pages", marked_elsewhere) is None
    with exclusive(root, ["hot_pages"]):
        assert holder(root, "hot_pages", marked_elsewhere) == f"pid {os.getpid()}", "held here: running here"
