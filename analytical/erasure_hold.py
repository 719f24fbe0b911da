"""`ops/erasure_hold.json`: the live medallion holds its writes while `lakehouse forget` deletes rows.

Delta lets no delete commit over an append to a partition the delete read (Serializable, OSS Delta's only
isolation level), and each of the medallion's batches appends to the day's partitions of bronze, silver and
the quarantine. Beside a running medallion an erasure's delete lost that race and was done again, tens of
seconds each time. So `forget` places a hold, and the medallion answers it at its next step that writes
to those tables (`ops/erasure_hold.held.json`: from which batch on none of its writes beats a delete) and
waits until the hold is lifted or its time is up; `forget` deletes, then lifts it. A batch between its
bronze and silver writes holds there, so that `forget` waits for the write running at its request and not
for the whole batch; one that has written silver answers at once and writes gold, which is not erased.

  forget:    request recorded -> hold placed -> the batch running then committed, or an answer -> deletes -> lifted
  medallion: batch N: hold? -> requests read -> bronze -> hold? -> requests read again if it held -> silver
             -> answered, if a hold is in place -> gold

The hold only spares retries: a delete is retried whatever happens, and a hold a killed `forget` left ends
by itself (`erasure.hold_timeout`). A root pyarrow cannot open (hdfs://) has no hold.

    hold = ErasureHold.under("/tmp/lakehouse", None)
    placed = hold.place(120.0)       # forget
    hold.wait_while_placed(7, print)  # the medallion's batch 7: returns once lifted
    hold.held_at(placed)             # -> 7
    hold.lift()
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from shared.object_store import S3Settings, root_file_system

#: The hold's file and the medallion's answer to it, under the storage root.
HOLD = "ops/erasure_hold.json"
HELD = "ops/erasure_hold.held.json"
#: How often a holding batch looks whether the hold is lifted.
POLL_S = 0.25


@dataclass(frozen=True)
class ErasureHold:
    """The hold under one storage root, read and written with pyarrow's file system (no Spark)."""

    files: Any
    base: str

    @classmethod
    def under(cls, root: str, s3: S3Settings | None) -> ErasureHold | None:
        store = root_file_system(root, s3)
        return None if store is None else cls(*store)

    def place(self, seconds: float) -> str:
        """Ask the medallion to hold its writes for at most `seconds`; the hold's id."""
        hold = uuid.uuid4().hex
        self._write(HOLD, {"id": hold, "until": time.time() + seconds})
        return hold

    def held_at(self, hold: str) -> int | None:
        """The batch the medallion holds at under the hold `hold`, None when no batch does (yet)."""
        held = self._read(HELD)
        return int(held["batch"]) if held is not None and held.get("hold") == hold else None

    def lift(self) -> None:
        """End the hold (and the medallion's answer): its batch goes on."""
        for name in (HOLD, HELD):
            try:
                self.files.delete_file(self._path(name))
            except FileNotFoundError:
                pass

    def wait_while_placed(self, batch_id: int, report: Callable[[str], None]) -> float:
        """The medallion's side, before its batch `batch_id` writes a table an erasure deletes from: while a
        hold is in place and its time not up, answer it, say so once and wait. The seconds held."""
        started, answered = time.monotonic(), None
        while (placed := self._live()) is not None:
            if placed["id"] != answered:
                answered = self._answer(placed, batch_id)
                report(f"[medallion] batch {batch_id} holds its writes while an erasure deletes "
                       f"(at most {max(0.0, placed['until'] - time.time()):.0f} s)")
            time.sleep(POLL_S)
        return time.monotonic() - started

    def answer_if_placed(self, batch_id: int) -> None:
        """The medallion's side, once its batch `batch_id` has written every table an erasure deletes from:
        a hold in place is answered at once (the batch writes on, to gold only)."""
        if (placed := self._live()) is not None:
            self._answer(placed, batch_id)

    def _answer(self, placed: dict[str, Any], batch_id: int) -> str:
        """Tell the hold's erasure that no write of batch `batch_id` or after beats its deletes."""
        self._write(HELD, {"hold": placed["id"], "batch": batch_id})
        return placed["id"]

    def _live(self) -> dict[str, Any] | None:
        placed = self._read(HOLD)
        return placed if placed is not None and time.time() < float(placed["until"]) else None

    def _path(self, name: str) -> str:
        return f"{self.base}/{name}"

    def _read(self, name: str) -> dict[str, Any] | None:
        try:
            with self.files.open_input_stream(self._path(name)) as held:
                return json.loads(held.read())
        except (FileNotFoundError, ValueError):  # none, or not one of ours: no hold
            return None

    def _write(self, name: str, content: dict[str, Any]) -> None:
        """Whole or not at all: written aside, then moved in place (a reader never sees half of it)."""
        path = self._path(name)
        self.files.create_dir(path.rsplit("/", 1)[0], recursive=True)
        aside = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
        with self.files.open_output_stream(aside) as out:
            out.write(json.dumps(content).encode())
        self.files.move(aside, path)
