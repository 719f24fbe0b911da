"""What a Delta table's `_delta_log` folder says about the table, read without Spark or delta-rs.

A table's folder and its `_delta_log` exist before its first commit: a stream creates them as it
starts, and one that fails or is stopped before committing (storage refusing the write, a kill)
leaves them so. No reader opens such a table (delta-rs: "No files in log segment"), so the readers
ask here first and leave it out, saying so with `NO_COMMIT_YET`.

    >>> is_commit_or_checkpoint("00000000000000000000.json"), is_commit_or_checkpoint("_staged_commits")
    (True, False)
"""

from __future__ import annotations

import re

#: Why a table has a log but no commit, and what ends that: said wherever such a table is left out.
NO_COMMIT_YET = "no commit yet: its stream failed or was stopped before its first commit; its next start or backfill makes one"

#: A commit (`00000000000000000000.json`), or a checkpoint (classic, multi-part or V2).
_COMMIT_OR_CHECKPOINT = re.compile(r"^\d{20}\.(json|checkpoint(\.\d+\.\d+)?\.parquet|checkpoint\.[\w-]+\.(json|parquet))$")


def is_commit_or_checkpoint(file_name: str) -> bool:
    """Whether a file of `_delta_log` is a commit or a checkpoint: one of them makes the folder a table."""
    return _COMMIT_OR_CHECKPOINT.match(file_name) is not None
