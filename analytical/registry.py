"""The medallion's streams and tables: the one list everything else derives from.

Each stream and table is declared once, in the module named after it (`STREAM`, `TABLE`): name,
layer, writer, expectation policy; path, explicit schema, partitioning, statistics, Z-order,
suite. This module only puts the streams in dependency order. Running, backfilling and rebuilding
(analytical.pipeline), `lakehouse check` (analytical.checks), `lakehouse maintain`
(analytical.maintenance), the `quality.policies` keys, `lakehouse run`'s latency benchmark and the
tests all read these lists.

CONTRIBUTING.md says how to add a table.
"""

from __future__ import annotations

from analytical import bronze_clicks, gold_page_clicks_5s, gold_page_clicks_hourly, silver_clicks
from analytical.tables import Table
from shared.config import Config
from shared.errors import ConfigError
from shared.stream import Stream

#: In dependency order: each stream reads what an earlier one writes.
STREAMS: tuple[Stream, ...] = (
    bronze_clicks.STREAM,
    silver_clicks.STREAM,
    gold_page_clicks_5s.STREAM,
    gold_page_clicks_hourly.STREAM,
)

#: Every table, in the order the streams write them.
TABLES: tuple[Table, ...] = tuple(table for stream in STREAMS for table in stream.writes)


def in_layer(layer: str, streams: tuple[Stream, ...] = STREAMS) -> list[Stream]:
    """The streams of one layer, in dependency order."""
    return [stream for stream in streams if stream.layer == layer]


def check_policies(config: Config, streams: tuple[Stream, ...] = STREAMS) -> None:
    """Refuse a `quality.policies` key that names no stream with expectations (a typo would
    otherwise leave the declared policy in force, silently)."""
    known = [stream.name for stream in streams if stream.policy is not None]
    for name in config.quality.policies:
        if name not in known:
            raise ConfigError(f"quality.policies.{name}: no stream of that name checks expectations "
                              f"(streams that do: {', '.join(known)})")
