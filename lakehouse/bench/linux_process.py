"""Memory and CPU of processes as Linux reports them (/proc), for the benchmarks.

CPU is read as seconds a process tree has run, so that a benchmark can say how many of the
machine's cores each part of a run used over its load:

    before = cpu_seconds(pid)
    ...  # the load
    cores = (cpu_seconds(pid) - before) / elapsed_seconds
"""

from __future__ import annotations

import os
from pathlib import Path

_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def process_memory_mb(pid: int, field: str = "VmRSS") -> float | None:
    """VmRSS (resident now) or VmHWM (peak resident) of `pid` in MB; None when unreadable."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat after the command's name (which may hold spaces): field 3 (state) first."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def process_tree(pid: int) -> set[int]:
    """`pid` and every living descendant (a `lakehouse` child runs its JVM as a child of its own)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))) is not None:
            parents[int(entry.name)] = int(fields[1])
    tree, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, its_parent in parents.items() if its_parent == parent and child not in tree]
        tree.update(children)
        frontier.extend(children)
    return tree


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of `pid` and of every living descendant; a process already gone counts 0."""
    total_ticks = 0
    for member in process_tree(pid):
        if (fields := _stat_fields(member)) is not None:
            total_ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total_ticks / _TICKS_PER_SECOND


def jvm_niceness(pid: int) -> set[int]:
    """The nice values the JVMs among `pid` and its descendants run at: the priority the work runs at."""
    values = set()
    for member in process_tree(pid):
        try:
            is_java = Path(f"/proc/{member}/comm").read_text().strip() == "java"
        except OSError:
            continue
        if is_java and (fields := _stat_fields(member)) is not None:
            values.add(int(fields[16]))  # nice (field 19 of stat)
    return values


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (all but idle and I/O wait), summed over its cores."""
    values = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle, iowait = values[3], values[4]
    return (sum(values[:8]) - idle - iowait) / _TICKS_PER_SECOND
