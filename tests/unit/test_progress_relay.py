"""The relay that passes the fast path's progress reports to the medallion's process, which records
them (`lakehouse run` in real-time mode starts no JVM of its own for that)."""

from __future__ import annotations

import json
import os

from lakehouse.path_processes import ProgressRelay


def test_reports_arrive_in_order_one_json_line_each_and_end_closes_the_stream():
    read_end, write_end = os.pipe()
    relay = ProgressRelay()
    relay.forward({"name": "hot_pages", "batchId": 0})  # before a reader is attached: kept, not lost
    relay.attach(os.fdopen(write_end, "w"))
    relay.forward({"name": "hot_pages", "batchId": 1})
    relay.end()
    with os.fdopen(read_end) as reader:
        lines = reader.read().splitlines()  # returns at end of stream: end() closed it
    assert [json.loads(line)["batchId"] for line in lines] == [0, 1]


def test_a_reader_that_went_away_costs_the_sender_nothing():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the medallion's process ended
    relay = ProgressRelay()
    relay.attach(os.fdopen(write_end, "w"))
    relay.forward({"name": "hot_pages", "batchId": 0})  # neither raises nor blocks
    relay.end()
    relay._writer.join(timeout=5)
    assert not relay._writer.is_alive()
