"""Which commits of a Delta table a stream reading it must read: `reconcile` counts a stopped
medallion as caught up when only commits that move no row follow the version it read."""

from __future__ import annotations

from delta.tables import DeltaTable

from analytical.closed_windows import _changes_data


def test_an_append_or_a_delete_changes_data_and_a_compaction_does_not(spark, tmp_path):
    path = str(tmp_path / "table")
    for rows in ([(1,), (2,)], [(3,)]):  # versions 0 and 1: two appends, two files
        spark.createDataFrame(rows, "n INT").write.format("delta").mode("append").save(path)
    table = DeltaTable.forPath(spark, path)
    table.optimize().executeCompaction()  # version 2: one file for two, no row moved
    table.delete("n = 3")  # version 3

    assert [row.operation for row in table.history().orderBy("version").collect()] == [
        "WRITE", "WRITE", "OPTIMIZE", "DELETE"]
    assert _changes_data(spark, path, range(1, 2)) and _changes_data(spark, path, range(3, 4))
    assert not _changes_data(spark, path, range(2, 3)), "a compaction is nothing a stream reads"
    assert not _changes_data(spark, path, range(4, 4)), "no commit, no change"
    assert _changes_data(spark, path, range(2, 4))
    assert _changes_data(spark, path, range(9, 10)), "a commit whose file is gone counts as a change"
