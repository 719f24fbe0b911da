"""A lake with a table that has no commit yet: what a stream leaves when it fails or is stopped
before its first commit (its folder and `_delta_log` made, no commit in it). Every question is
answered from the tables that have commits, and the one without is named in one line, never a
traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

from analytical import pipeline
from analytical.delta_log import NO_COMMIT_YET
from analytical.gold_page_clicks_hourly import TABLE as GOLD_PAGE_CLICKS_HOURLY
from analytical.registry import running
from shared.kafka import ensure_topics
from tests.helpers import click, lakehouse_here, send


def test_a_table_without_a_commit_is_named_in_one_line_and_every_other_table_still_answers(
        spark, config, config_overrides):
    ensure_topics(config.kafka, [config.kafka.topics.clicks])
    sent = {"/a": 3, "/b": 2}
    send(config, *(click(f"{page}-{n}", page, f"10:00:0{n}.000") for page, count in sent.items()
                   for n in range(count)))
    # Every stream but the hourly gold one commits; that one is left as a failed first start leaves it.
    pipeline.backfill(spark, config, lambda line: None, [stream for stream in running(config)
                                                         if GOLD_PAGE_CLICKS_HOURLY not in stream.writes])
    (Path(config.path(str(GOLD_PAGE_CLICKS_HOURLY))) / "_delta_log" / "_staged_commits").mkdir(parents=True)
    settings = [f"--set={item}" for item in config_overrides]

    def ask(*args: str):
        done = lakehouse_here(*args, *settings)
        assert "Traceback" not in done.stderr, done.stderr
        return done

    total = ask("sql", "--format", "json", "SELECT pageId, sum(clickCount) AS clicks FROM gold.page_clicks_5s "
                "GROUP BY pageId ORDER BY pageId")
    assert total.returncode == 0, total.stderr
    assert {row["pageId"]: row["clicks"] for row in json.loads(total.stdout)} == sent
    left_out = [line for line in total.stderr.splitlines() if "gold.page_clicks_hourly" in line]
    assert len(left_out) == 1 and NO_COMMIT_YET in left_out[0], total.stderr

    hourly_asked = ask("sql", "SELECT count(*) FROM gold.page_clicks_hourly")
    assert hourly_asked.returncode == 2
    assert hourly_asked.stderr.strip().splitlines()[-1].startswith("error: ") and NO_COMMIT_YET in hourly_asked.stderr

    top = ask("query", "top-pages", "--format", "json")
    assert top.returncode == 0, top.stderr
    assert {row["pageId"]: row["clicks"] for row in json.loads(top.stdout)} == sent

    status = ask("status")  # the in-process backfill records no progress: one line, exit 2
    assert status.returncode == 2 and "no progress recorded" in status.stderr, status.stderr

    checked = ask("check", "--format", "json")
    assert checked.returncode == 0, checked.stderr
    result = json.loads(checked.stdout)
    assert list(result["skipped"]) == [str(GOLD_PAGE_CLICKS_HOURLY)] and NO_COMMIT_YET in result["skipped"][
        str(GOLD_PAGE_CLICKS_HOURLY)]
    assert {row["table"] for row in result["expectations"]} == {"silver/clicks", "silver/quarantine",
                                                                "gold/page_clicks_5s"}
    assert result["success"] is True
