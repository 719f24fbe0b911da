"""Who may write a query's checkpoint, and whether its query was stopped cleanly.

One process at a time writes a checkpoint: `exclusive` holds an OS file lock per query (`holder` says
who holds one). On an object store, where such a lock is a file of the machine that holds it, a query's
clean stop is marked on the root itself (`StoppedMarks`), so that a stopped query is told from one that
may run on another machine.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from shared.errors import LakehouseError
from shared.storage import local_folder, local_side


LOCK_SUFFIX = ".lock"


def _lock_folder(storage_root: str) -> Path:
    return local_side(storage_root, "_checkpoints")


def empty_keeping_locks(storage_root: str) -> None:
    """Delete everything under a local storage root except the checkpoint locks: the demo clears
    its folder while it holds them, and a lock file deleted and made again would admit a second
    process beside the first."""
    root = local_folder(storage_root)
    if root is None or not root.exists():
        return
    locks = _lock_folder(storage_root)
    doomed = [entry for entry in root.iterdir() if entry != locks]
    if locks.exists():
        doomed += [entry for entry in locks.iterdir() if not entry.name.endswith(LOCK_SUFFIX)]
    for entry in doomed:
        if entry.is_dir():
            shutil.rmtree(entry)
        else:
            entry.unlink()


#: How long a new holder waits for the Spark JVM of a holder that died to end by itself, before it
#: kills it: PySpark's JVM exits when its Python driver's pipe closes, a few seconds after.
ORPHAN_JVM_GRACE_S = 10.0


class Locks:
    """The checkpoint locks one process holds (see `exclusive`)."""

    def __init__(self, handles: list[Any]):
        self._handles = handles

    def record_jvm(self, jvm_pid: int) -> None:
        """Name this process's Spark JVM in the locks: a JVM can outlive its Python driver for a few
        seconds, and it still runs the queries then; the next holder waits for it to end."""
        for handle in self._handles:
            handle.write(f" jvm {jvm_pid}")
            handle.flush()


class StoppedMarks:
    """`_checkpoints/<query>.stopped` on the storage root itself: written when the process that ran the
    query has ended it cleanly, removed before any process starts it. An object-store root's lock is a
    file of the machine that runs the query (`exclusive`), so elsewhere nobody holding it says nothing;
    the mark says the query was stopped cleanly and has not been started since, wherever it ran.

        >>> marks = StoppedMarks("/tmp/lakehouse", None)
        >>> marks.path("hot_pages")
        '/tmp/lakehouse/_checkpoints/hot_pages.stopped'
    """

    def __init__(self, storage_root: str, s3: Any = None):
        from shared.object_store import root_file_system

        self._store = root_file_system(storage_root, s3)  # None: a root only Spark opens, no marks there

    def path(self, name: str) -> str:
        return f"{self._store[1]}/_checkpoints/{name}{STOPPED_SUFFIX}" if self._store else ""

    def clear(self, names: Sequence[str]) -> None:
        """Before the queries start: a mark left by their last clean stop goes (a LakehouseError if it cannot)."""
        from pyarrow import fs

        for name in names if self._store else ():
            files = self._store[0]
            try:
                if files.get_file_info(self.path(name)).type != fs.FileType.NotFound:
                    files.delete_file(self.path(name))
            except OSError as error:
                raise LakehouseError(f"the {name} query's stopped mark ({self.path(name)}) could not be removed before "
                                     f"it starts: {str(error).splitlines()[0]}") from None

    def write(self, names: Sequence[str], report: Callable[[str], None]) -> None:
        """After a clean stop of the queries, which the mark then says; one that cannot be written is said."""
        for name in names if self._store else ():
            files = self._store[0]
            try:
                files.create_dir(self.path(name).rsplit("/", 1)[0], recursive=True)
                with files.open_output_stream(self.path(name)) as mark:
                    mark.write(json.dumps({"pid": os.getpid(), "host": os.uname().nodename,
                                           "stoppedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}).encode())
            except OSError as error:
                report(f"warning: the {name} query's clean stop could not be marked at {self.path(name)} "
                       f"({str(error).splitlines()[0]}): `reconcile` counts it as possibly running elsewhere")

    def __contains__(self, name: str) -> bool:
        """Whether the query was stopped cleanly and not started since (False where that cannot be read)."""
        from pyarrow import fs

        try:
            return bool(self._store) and self._store[0].get_file_info(self.path(name)).type == fs.FileType.File
        except OSError:
            return False


#: The stopped mark's name beside a checkpoint (`StoppedMarks`).
STOPPED_SUFFIX = ".stopped"


@contextmanager
def exclusive(storage_root: str, query_names: Sequence[str], report: Callable[[str], None] = lambda message: None,
              orphan_grace_s: float = ORPHAN_JVM_GRACE_S, marks: StoppedMarks | None = None) -> Iterator[Locks]:
    """Hold a lock per query's checkpoint for the block: a second process that would write the same
    checkpoints is refused with the first one's pid, instead of two writers on one checkpoint.

    The lock is an OS file lock on `_checkpoints/<query>.lock` beside the checkpoint, released by
    the kernel when the process ends however it ends. Its Spark JVM (`Locks.record_jvm`) may run a
    little longer, still writing to the checkpoints: a new holder waits for that JVM to end
    (`orphan_grace_s`), then kills it. An object store cannot hold such a lock: an object-store
    root's locks are files on this machine (`shared.storage.local_side`), so they keep a second writer
    off only here; across machines the deployment runs one writer per checkpoint (DEPLOYMENT.md).
    The queries' stopped `marks` (on the root itself), when given, go as the block starts and are written
    when it ends without an error: its queries then stopped cleanly.
    """
    folder = _lock_folder(storage_root)
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as held:
        handles = []
        for name in query_names:
            handle = held.enter_context(open(folder / f"{name}{LOCK_SUFFIX}", "a+"))
            handle.seek(0)
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = handle.read().split(" jvm ")[0].strip() or "another process"
                raise LakehouseError(
                    f"the {name} query's checkpoint ({folder / name}) is in use by {owner}: "
                    "stop that run first (two writers would corrupt it)") from None
            _end_orphan_jvm(handle.read(), name, report, orphan_grace_s)
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}")
            handle.flush()
            handles.append(handle)
        if marks is not None:
            marks.clear(query_names)
        yield Locks(handles)
        if marks is not None:
            marks.write(query_names, report)
        for handle in handles:  # a block that ended normally has stopped its queries: no JVM of it writes on
            handle.seek(0)
            handle.truncate()
            handle.write(f"pid {os.getpid()}")
            handle.flush()


def holder(storage_root: str, name: str, marks: StoppedMarks | None = None) -> str | None:
    """Who holds the `name` query's checkpoint lock now ("pid N"), None when nobody does: whether that
    query runs. An object-store root's lock is held on this machine only: when nobody here holds it,
    the query may still run elsewhere, and "unknown" says so, unless its stopped mark (`marks`) says it
    was stopped cleanly and not started since."""
    path = _lock_folder(storage_root) / f"{name}{LOCK_SUFFIX}"
    if path.exists():
        with open(path) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return handle.read().split(" jvm ")[0].strip() or "another process"
            fcntl.flock(handle, fcntl.LOCK_UN)
    if local_folder(storage_root) is not None or (marks is not None and name in marks):
        return None
    return "unknown"


def _end_orphan_jvm(previous_holder: str, name: str, report: Callable[[str], None], grace_s: float) -> None:
    """Wait for the JVM a dead holder left behind (named in its lock), then kill it if it lingers."""
    words = previous_holder.split()
    if "jvm" not in words or words.index("jvm") + 1 >= len(words) or not words[words.index("jvm") + 1].isdigit():
        return
    pid = int(words[words.index("jvm") + 1])
    if not _is_java(pid):
        return
    report(f"waiting for the Spark JVM (pid {pid}) of the process that held the {name} checkpoint to end")
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _is_java(pid):
        time.sleep(0.1)
    if _is_java(pid):
        report(f"killing it: it did not end within {grace_s:g} s")
        os.kill(pid, signal.SIGKILL)
        while _is_java(pid):
            time.sleep(0.05)


def _is_java(pid: int) -> bool:
    """A live (not zombie) JVM process with this pid."""
    proc = Path("/proc") / str(pid)
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        command = (proc / "cmdline").read_bytes()
    except OSError:
        return False
    return state != "Z" and b"java" in command.split(b"\0")[0]
