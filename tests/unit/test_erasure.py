"""`lakehouse forget`'s pure parts: which ids a request names, and when a stream has read past a commit."""

from __future__ import annotations

import pytest

from analytical.erasure import read_before, requested_ids
from shared.errors import ConfigError


def test_a_request_names_each_id_once_in_order_and_refuses_an_empty_one():
    assert requested_ids(["u2", "u1", "u2"]) == ["u2", "u1"]
    with pytest.raises(ConfigError, match="user id 2 is empty"):
        requested_ids(["u1", "  "])
    with pytest.raises(ConfigError, match="no user id given"):
        requested_ids([])


@pytest.mark.parametrize(("offset", "read"), [
    ({"reservoirVersion": 8, "index": -1, "isStartingVersion": False}, True),  # at 8, nothing of 8 yet: 0..7 read
    ({"reservoirVersion": 9, "index": 2, "isStartingVersion": False}, True),
    ({"reservoirVersion": 7, "index": 3, "isStartingVersion": False}, False),  # inside 7
    ({"reservoirVersion": 8, "index": 4, "isStartingVersion": True}, False),  # still reading the snapshot of 8
    (None, False),
    ({"topic": {"0": 4}}, False),  # a Kafka offset names no version
])
def test_a_delta_source_has_read_before_a_version_once_its_offset_is_past_every_earlier_commit(offset, read):
    assert read_before(offset, 8) is read
