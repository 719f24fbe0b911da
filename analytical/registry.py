"""The medallion's streams and tables: the one list everything else derives from.

Each table is declared once, in the module named after it (`TABLE`: path, explicit schema, partitioning,
statistics, Z-order, suite, expectation policy), and each stream in the module named after it (`STREAM`:
name, layer, writer, the tables it writes): the medallion's query (analytical.medallion) and the
streams that follow its tables. This module only puts the streams in dependency order. Running, backfilling and rebuilding
(analytical.pipeline), `lakehouse check` (analytical.checks), `lakehouse maintain`
(analytical.maintenance), the `quality.policies` keys, `lakehouse run`'s latency benchmark and the
tests all read these lists.

CONTRIBUTING.md says how to add a table.
"""

from __future__ import annotations

from analytical import gold_page_clicks_hourly, gold_user_sessions, medallion
from analytical.tables import Table
from shared.config import Config
from shared.errors import ConfigError
from shared.stream import Stream

#: In dependency order: the medallion's query, then the streams that follow the tables it writes.
STREAMS: tuple[Stream, ...] = (
    medallion.STREAM,
    gold_page_clicks_hourly.STREAM,
    gold_user_sessions.STREAM,
)

#: Every table, in the order the streams write them.
TABLES: tuple[Table, ...] = tuple(table for stream in STREAMS for table in stream.writes)


def running(config: Config, streams: tuple[Stream, ...] = STREAMS) -> tuple[Stream, ...]:
    """The streams `config` runs: those it turns off (`sessions.enabled: false`) left out."""
    return tuple(stream for stream in streams if stream.enabled(config))


def written(config: Config) -> tuple[Table, ...]:
    """The tables the streams `config` runs write (TABLES without those of a stream it turns off)."""
    return tuple(table for stream in running(config) for table in stream.writes)


def rebuilt(streams: tuple[Stream, ...] = STREAMS) -> list[Stream]:
    """What a rebuild runs, in order: the medallion's query over bronze, then the streams that follow it."""
    return [medallion.REBUILD, *(stream for stream in streams if stream is not medallion.STREAM)]


def check_policies(config: Config, streams: tuple[Stream, ...] = STREAMS) -> None:
    """Refuse a `quality.policies` key that names no table whose writes check expectations (a typo would
    otherwise leave the declared policy in force, silently)."""
    known = [table.key for stream in streams for table in stream.writes if getattr(table, "policy", None)]
    for name in config.quality.policies:
        if name not in known:
            raise ConfigError(f"quality.policies.{name}: no table of that name checks expectations as it is "
                              f"written (tables that do: {', '.join(known)})")
