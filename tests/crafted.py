"""Crafted clicks that each way of counting the rule must count alike (tests/spark/test_rule_agreement.py,
and the fast path's JVM processor in tests/realtime): the windows' expected counts are in the tests."""

from __future__ import annotations

from datetime import datetime

from tests.helpers import click

#: The topic the crafted records are read from.
TOPIC = "page-clicks"


def records() -> list[bytes | None]:
    """Valid clicks over three windows and two pages, exact copies, copies in another partition's
    offsets, copies stamped with another window or page, clicks on the windows' bounds, and invalid
    records that must count nowhere."""
    values = [click(f"a{n}", "/a", f"10:00:0{n}.000") for n in range(5)]          # /a 10:00:00: 5
    values += [click("a1", "/a", "10:00:01.000"), click("a3", "/a", "10:00:03.000")]  # copies
    values += [click("b0", "/b", "10:00:04.999"), click("b1", "/b", "10:00:05.000")]  # either side of a bound
    values += [click(f"c{n}", "/a", f"10:00:1{n}.500") for n in range(3)]          # /a 10:00:10: 3
    values += [click("c0", "/a", "10:00:10.500"), click("n1", "/b", "10:00:05.000", userId="u1")]
    # copies stamped with another window, and with another page: each counts there once more
    values += [click("a2", "/a", "10:00:07.000"), click("a4", "/b", "10:00:04.000"), click("a4", "/b", "10:00:04.000")]
    values += [None, b"\xff", b"{}", b'{"eventId":"x","pageId":"/a","eventTime":"10:00"}',
               b'{"eventId":true,"pageId":"/a","eventTime":"2026-11-22T10:00:01Z"}',
               click("t1", "/a", "10:00:02.000") + b" trailing"]
    return values


def as_one_partition(spark):
    """`records()` as a Kafka source's frame: one partition, in offset order, all received at 10:00:30."""
    received = datetime.fromisoformat("2026-11-22 10:00:30")
    return spark.createDataFrame([(b"k", value, TOPIC, 0, offset, received) for offset, value in enumerate(records())],
                                 "key binary, value binary, topic string, partition int, offset long, timestamp timestamp")
