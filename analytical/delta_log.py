"""What a Delta table's `_delta_log` folder says about the table, read without Spark or delta-rs.

A table's folder and its `_delta_log` exist before its first commit: a stream creates them as it
starts, and one that fails or is stopped before committing (storage refusing the write, a kill)
leaves them so. No reader opens such a table (delta-rs: "No files in log segment"), so the readers
ask here first and leave it out, saying so with `NO_COMMIT_YET`.

    >>> is_commit_or_checkpoint("00000000000000000000.json"), is_commit_or_checkpoint("_staged_commits")
    (True, False)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

#: Why a table has a log but no commit, and what ends that: said wherever such a table is left out.
NO_COMMIT_YET = "no commit yet: its stream failed or was stopped before its first commit; its next start or backfill makes one"

#: A commit (`00000000000000000000.json`), or a checkpoint (classic, multi-part or V2).
_COMMIT_OR_CHECKPOINT = re.compile(r"^\d{20}\.(json|checkpoint(\.\d+\.\d+)?\.parquet|checkpoint\.[\w-]+\.(json|parquet))$")


def is_commit_or_checkpoint(file_name: str) -> bool:
    """Whether a file of `_delta_log` is a commit or a checkpoint: one of them makes the folder a table."""
    return _COMMIT_OR_CHECKPOINT.match(file_name) is not None


def commit_path(table: str, version: int) -> str:
    """The file of a table's commit `version`."""
    return f"{table}/_delta_log/{version:020}.json"


@dataclass(frozen=True)
class AddedFile:
    """A data file a commit added: its path relative to the table (decoded), and its statistics when
    the commit wrote them (`records`; `newest`: a column's maxValues as written, text for a timestamp)."""

    path: str
    records: int | None
    newest: dict[str, Any]


def added_files(commit: str) -> tuple[str | None, list[AddedFile]]:
    """A commit's `userMetadata` and the data files it added.

        >>> added_files('{"commitInfo":{"userMetadata":"q/7"}}\\n{"add":{"path":"part-0%3A1.parquet"}}')
        ('q/7', [AddedFile(path='part-0:1.parquet', records=None, newest={})])
    """
    user_metadata, files = None, []
    for line in commit.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "commitInfo" in action:
            user_metadata = action["commitInfo"].get("userMetadata")
        elif "add" in action:
            stats = json.loads(action["add"].get("stats") or "{}")
            files.append(AddedFile(unquote(action["add"]["path"]), stats.get("numRecords"), stats.get("maxValues", {})))
    return user_metadata, files
