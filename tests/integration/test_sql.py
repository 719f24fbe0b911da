"""`lakehouse sql` on a lake Spark wrote: the answer at each version and moment is the one counted
here from the rows written, and anything but a SELECT is refused with one line, the lake unchanged."""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime, timedelta, timezone

from analytical.gold_page_clicks_5s import TABLE as GOLD_PAGE_CLICKS_5S
from tests.helpers import lakehouse_here, run_lakehouse


CLICKS_PER_PAGE = "SELECT pageId, sum(clickCount) AS clicks FROM gold.page_clicks_5s GROUP BY pageId ORDER BY pageId"


def _windows(start: datetime, counts: dict[str, int]) -> list[tuple]:
    return [(page, start, start + timedelta(seconds=5), count, count > 3) for page, count in counts.items()]


def _sql(root, *args: str, console_script: bool = False):
    """`lakehouse sql` on the lake at `root`: in this process, or as the installed console script."""
    if console_script:
        return run_lakehouse(f"--set=storage.root={root}", "sql", *args, timeout=120)
    return lakehouse_here(f"--set=storage.root={root}", "sql", *args)


def _answer(root, *args: str) -> list[dict]:
    done = _sql(root, *args, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _per_page(*batches: list[tuple]) -> list[dict]:
    totals: Counter[str] = Counter()
    for batch in batches:
        for page, _, _, count, _ in batch:
            totals[page] += count
    return [{"pageId": page, "clicks": totals[page]} for page in sorted(totals)]


def test_sql_answers_at_each_version_and_moment_and_refuses_anything_but_a_select(spark, tmp_path):
    root = tmp_path / "lake"
    path = GOLD_PAGE_CLICKS_5S.at(str(root)).create(spark, GOLD_PAGE_CLICKS_5S.schema)  # version 0, empty
    first = _windows(datetime(2026, 11, 22, 10, 0, 0, tzinfo=timezone.utc), {"/a": 5, "/b": 2})
    second = _windows(datetime(2026, 11, 22, 10, 0, 5, tzinfo=timezone.utc), {"/a": 1, "/c": 7})
    for rows in (first, second):  # versions 1 and 2
        spark.createDataFrame(rows, GOLD_PAGE_CLICKS_5S.schema).write.format("delta").mode("append").save(path)
    history = {row.version: row.timestamp for row in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()}

    assert _answer(root, CLICKS_PER_PAGE) == _per_page(first, second)
    assert _answer(root, CLICKS_PER_PAGE, "--version", "gold.page_clicks_5s=1") == _per_page(first)
    assert _answer(root, CLICKS_PER_PAGE, "--as-of", history[1].isoformat()) == _per_page(first)
    assert _answer(root, CLICKS_PER_PAGE, "--version", "gold.page_clicks_5s=0") == []

    hot = _answer(root, "SELECT pageId, windowStart, windowEnd FROM gold.page_clicks_5s WHERE isHot ORDER BY windowStart")
    assert hot == [{"pageId": "/a", "windowStart": "2026-11-22T10:00:00.000Z", "windowEnd": "2026-11-22T10:00:05.000Z"},
                   {"pageId": "/c", "windowStart": "2026-11-22T10:00:05.000Z", "windowEnd": "2026-11-22T10:00:10.000Z"}]
    as_csv = _sql(root, CLICKS_PER_PAGE, "--format", "csv", console_script=True)
    assert as_csv.stdout.splitlines() == ["pageId,clicks", "/a,6", "/b,2", "/c,7"]

    refusals = {
        "DELETE FROM gold.page_clicks_5s": "error: lakehouse sql runs one read-only query (SELECT, WITH ... SELECT); got DELETE",
        "SELECT 1; DROP TABLE gold.page_clicks_5s": "error: lakehouse sql runs one read-only query (SELECT, WITH ... SELECT); got SELECT, DROP",
        f"COPY (SELECT 1) TO '{tmp_path}/out.csv'": "error: lakehouse sql runs one read-only query (SELECT, WITH ... SELECT); got COPY",
        "SELEC 1": 'error: bad SQL: Parser Error: syntax error at or near "SELEC"',
        "SELECT * FROM gold.page_clicks_1m": "error: Catalog Error: Table with name page_clicks_1m does not exist! (tables: gold.page_clicks_5s)",
        "SELECT * FROM read_csv('/etc/hostname')": 'error: Permission Error: Cannot access file "/etc/hostname" - file system operations are disabled by configuration',
    }
    for query, message in refusals.items():
        refused = _sql(root, query)
        assert (refused.returncode, refused.stderr.strip().splitlines()[-1]) == (2, message), query
    assert not (tmp_path / "out.csv").exists()
    assert spark.read.format("delta").load(path).count() == len(first) + len(second)
    missing = _sql(root, CLICKS_PER_PAGE, "--version", "silver.clicks=0")
    assert (missing.returncode, missing.stderr.strip()) == (
        2, "error: --version names no table of this lake: silver.clicks (tables: gold.page_clicks_5s)")
