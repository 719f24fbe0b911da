"""Every query and table the product has, in one place: per path (the `lakehouse` command that runs
it), its queries; the fast path's one query, the medallion's streams in dependency order
(`analytical.registry`); and every table, the one each query's progress goes to included.

    >>> [query.name for query in QUERIES]
    ['hot_pages', 'medallion', 'gold_page_clicks_hourly', 'gold_user_sessions']
"""

from __future__ import annotations

from analytical.registry import STREAMS as MEDALLION_STREAMS
from analytical.registry import TABLES as MEDALLION_TABLES
from analytical.registry import running
from lakehouse.monitoring.stream_progress import TABLE as STREAM_PROGRESS
from operational.hot_pages import STREAM as HOT_PAGES
from shared.config import Config
from shared.stream import Stream

#: Per path, named as its command and its /metrics `path` label, the queries it may run.
QUERIES_BY_PATH: dict[str, tuple[Stream, ...]] = {"operational": (HOT_PAGES,), "analytical": MEDALLION_STREAMS}
QUERIES: tuple[Stream, ...] = tuple(query for queries in QUERIES_BY_PATH.values() for query in queries)


def queries_by_path(config: Config) -> dict[str, tuple[Stream, ...]]:
    """QUERIES_BY_PATH as `config` runs them: a stream it turns off left out (analytical.registry.running)."""
    return {path: running(config, queries) for path, queries in QUERIES_BY_PATH.items()}
#: Every table under the storage root, by its path there (CONTRACT.md, "Tables").
TABLES: tuple[str, ...] = (*(table.name for table in MEDALLION_TABLES), STREAM_PROGRESS)
