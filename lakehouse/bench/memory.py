"""Memory of a process as Linux reports it (/proc/<pid>/status), for the benchmarks."""

from __future__ import annotations


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
