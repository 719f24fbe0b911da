"""How a streaming query is declared: its name, layer, writer and the tables it writes (`Stream`), and
what a start function may return instead of a query (`Stage`). Both paths declare their queries this
way, one per module, beside the transform; `shared.streaming.supervise` runs them as a command."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol

from shared.config import Config
from shared.storage import checkpoint_location


class Output(Protocol):
    """What a stream writes: a Delta table (analytical.tables.Table) or anything else with a name."""

    name: str


#: (spark, config, source root, target root) -> the stream's DataStreamWriter, before its query
#: name, checkpoint and trigger: a rebuild points the same writer at other roots.
Writer = Callable[[Any, Config, str, str], Any]


@dataclass(frozen=True)
class Stream:
    """One streaming query, declared once beside its transform, in the module named after it.

    Both paths declare their queries this way; the medallion's registry (analytical.registry) lists
    its streams, and everything that runs, rebuilds, checks or measures them reads these fields.
    """

    #: Its query name, its checkpoint folder (<root>/_checkpoints/<name>) and its key in
    #: `quality.policies`.
    name: str
    #: The part of its path it belongs to: the medallion's `bronze`, `silver` or `gold` (its place in
    #: a rebuild), or the path's own name for a path of one query.
    layer: str
    writer: Writer
    #: Its processing-time trigger when it runs continuously (0: the next batch as soon as one ends),
    #: from the configuration: `operational.trigger`, `analytical.triggers.<layer>`.
    trigger: Callable[[Config], timedelta] = field(compare=False)
    #: How far its event-time watermark stays behind the newest event it has seen.
    lateness: Callable[[Config], timedelta] = field(compare=False)
    #: The Delta tables it writes, in the order it creates them.
    writes: tuple[Output, ...] = ()
    #: The Delta tables it streams from (an erasure waits for it to have read what it rewrites).
    reads: tuple[Output, ...] = ()
    #: Whether the configuration runs it (`sessions.enabled`); a stream that is off starts nowhere.
    enabled: Callable[[Config], bool] = field(default=lambda config: True, compare=False)

    def writer_at(self, spark: Any, config: Config, source_root: str, target_root: str) -> Any:
        """Its writer, named, with its checkpoint under `target_root`: all it lacks is a trigger."""
        return (
            self.writer(spark, config, source_root, target_root)
            .queryName(self.name)
            .option("checkpointLocation", checkpoint_location(target_root, self.name))
        )


@dataclass(frozen=True)
class Stage:
    """What a start function may return instead of a query: a query that runs first, and what starts
    once it has finished on its own (a real-time start that catches up first: operational.catch_up).
    `supervise` says `why` as `query` starts, and `note` as `then` starts."""

    query: Any
    then: Callable[[], Any]
    why: str
    note: str
