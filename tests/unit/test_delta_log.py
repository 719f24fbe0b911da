"""Which files of a `_delta_log` make its folder a table (analytical.delta_log)."""

import pytest

from analytical.delta_log import is_commit_or_checkpoint


@pytest.mark.parametrize("name", [
    "00000000000000000000.json",
    "00000000000000000010.checkpoint.parquet",
    "00000000000000000010.checkpoint.0000000001.0000000002.parquet",
    "00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
])
def test_a_commit_or_a_checkpoint_makes_a_table(name):
    assert is_commit_or_checkpoint(name)


@pytest.mark.parametrize("name", [
    "_staged_commits", "_commits", "_last_checkpoint", "00000000000000000000.crc", ".00000000000000000000.json.crc",
    "00000000000000000000.json.tmp", "0000000000000000000.json", "00000000000000000003.00000000000000000005.compacted.json",
])
def test_anything_else_in_the_log_does_not(name):
    assert not is_commit_or_checkpoint(name)
