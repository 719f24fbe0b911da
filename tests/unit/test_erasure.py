"""`lakehouse forget`'s pure parts: which ids a request names, when a stream has read past a commit, and the
hold that keeps the medallion's writes off while it deletes (on a local folder, no Spark)."""

from __future__ import annotations

import threading
import time

import pytest

from analytical.erasure import read_before, requested_ids
from analytical.erasure_hold import ErasureHold
from tests.helpers import wait_for
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


def test_a_hold_keeps_the_medallions_batch_waiting_until_lifted_and_says_at_which_batch(tmp_path):
    hold = ErasureHold.under(str(tmp_path), None)
    placed = hold.place(60.0)
    said: list[str] = []
    medallion = threading.Thread(target=hold.wait_while_placed, args=(7, said.append))
    medallion.start()
    wait_for(lambda: hold.held_at(placed) is not None, 10, "the batch answers the hold", every_s=0.02)

    assert hold.held_at(placed) == 7 and medallion.is_alive()
    assert hold.held_at("another hold") is None
    hold.lift()
    medallion.join(5)
    assert not medallion.is_alive(), "lifted: the batch goes on"
    assert said == ["[medallion] batch 7 holds its writes while an erasure deletes (at most 60 s)"]
    assert hold.held_at(placed) is None and sorted(path.name for path in (tmp_path / "ops").iterdir()) == []


def test_a_hold_whose_time_is_up_or_that_is_not_one_holds_nothing(tmp_path):
    hold = ErasureHold.under(str(tmp_path), None)
    placed = hold.place(0.3)  # as a forget killed -9 leaves it
    started = time.monotonic()
    assert hold.wait_while_placed(1, lambda line: None) < 2 and time.monotonic() - started >= 0.25
    assert hold.held_at(placed) == 1
    assert hold.wait_while_placed(2, lambda line: None) == pytest.approx(0, abs=0.1), "past its time"
    (tmp_path / "ops" / "erasure_hold.json").write_text("{not json")
    assert hold.wait_while_placed(3, lambda line: None) == pytest.approx(0, abs=0.1)
    hold.lift()
    hold.lift()  # nothing left to lift: no error


def test_a_batch_past_the_erased_tables_answers_a_hold_at_once_and_none_is_answered_when_none_is_placed(tmp_path):
    hold = ErasureHold.under(str(tmp_path), None)
    hold.answer_if_placed(4)
    assert not (tmp_path / "ops").exists(), "no hold: nothing answered"
    placed = hold.place(60.0)
    started = time.monotonic()
    hold.answer_if_placed(5)
    assert hold.held_at(placed) == 5 and time.monotonic() - started < 1, "answered without waiting"
