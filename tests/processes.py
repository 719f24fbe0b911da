"""The machine's processes as the tests see them, read from /proc: a process tree, what is still
alive, a process's JVM children, the processes that belong to a folder.

    doomed = family(run.pid)
    os.kill(run.pid, signal.SIGKILL)
    wait_for(lambda: not alive(doomed), 30, "every process of the killed run to end")
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Process:
    pid: int
    parent: int
    state: str  # "Z": a zombie, which has ended
    name: str  # /proc/<pid>/comm: the program's name, e.g. "java"
    niceness: int = 0  # its scheduling priority's nice value (0..19 here)


def _read(pid: int) -> Process | None:
    """The process `pid`, None when there is none. /proc answers for a thread's id too (a thread of another
    process may have been given the id of a process that ended): that is no such process."""
    proc = Path("/proc") / str(pid)
    try:
        if f"\nTgid:\t{pid}\n" not in (proc / "status").read_text():
            return None
        fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()  # from the state on: proc(5)
        return Process(pid, int(fields[1]), fields[0], (proc / "comm").read_text().strip(), int(fields[16]))
    except (OSError, IndexError, ValueError):
        return None


def processes() -> Iterator[Process]:
    """Every process now (one that ends while it is read is left out)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (process := _read(int(entry.name))) is not None:
            yield process


def family(pid: int, among: list[Process] | None = None) -> set[int]:
    """`pid` and every process below it, now or in `among`, a snapshot taken once: two families
    read from one snapshot agree on a process started between two reads."""
    children: dict[int, list[int]] = {}
    for process in processes() if among is None else among:
        children.setdefault(process.parent, []).append(process.pid)
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        found.add(current)
        todo += children.get(current, [])
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of `pids` still running (a zombie has ended)."""
    return {pid for pid in pids if (process := _read(pid)) is not None and process.state != "Z"}


def child_jvms(pid: int) -> list[int]:
    """The java processes `pid` started itself."""
    return [process.pid for process in processes() if process.parent == pid and process.name == "java"]


def children_running(pid: int, words: str) -> list[int]:
    """The processes `pid` started itself whose command line holds `words`, e.g. `run`'s fast path:
    children_running(run.pid, "lakehouse.cli operational")."""
    return [process.pid for process in processes() if process.parent == pid and words in command_line(process.pid)]


def command_line(pid: int) -> str:
    """Its command line, its arguments joined by spaces ("" once it has ended)."""
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def command_lines_in(folder: str) -> list[str]:
    """The command lines of live processes that run in `folder` or name it (a cluster's daemons and
    their executors)."""
    found = []
    for process in processes():
        proc = Path("/proc") / str(process.pid)
        command = command_line(process.pid)
        try:
            cwd = os.readlink(proc / "cwd")
        except OSError:
            continue
        if folder in command or cwd.startswith(folder):
            found.append(command)
    return found


def jvms_now() -> list[str]:
    """Every live JVM, as `pid: command line` (its first 300 characters): what a test that waited in
    vain shows, in case another test left one behind to take the cores or a port."""
    return [f"{process.pid}: {command_line(process.pid)[:300]}" for process in processes()
            if process.name == "java" and process.state != "Z"]
