"""ops/stream_progress: every progress of every query, kept in Delta, and never a reason to stop one."""

from __future__ import annotations

import json

from lakehouse.monitoring.stream_progress import recording
from shared.query_events import watching
from tests.helpers import wait_for


def _stream_through(spark, config, name: str, rows: int) -> None:
    source = config.path("source")
    spark.range(rows).write.format("delta").mode("append").save(source)
    query = (spark.readStream.format("delta").load(source).writeStream.format("noop").queryName(name)
             .option("checkpointLocation", config.path("_checkpoints", name)).trigger(availableNow=True).start())
    query.awaitTermination()


def test_each_progress_is_appended_to_the_delta_table_with_its_figures(spark, config):
    path = config.path("ops", "stream_progress")
    with recording(spark, path) as recorder, watching(spark, recorder):
        _stream_through(spark, config, "monitored", rows=7)
        wait_for(lambda: "monitored" in recorder.latest, 60, "the listener's progress event")
    # leaving the block flushed the queue

    (row,) = spark.read.format("delta").load(path).where("queryName = 'monitored'").collect()
    assert (row.batchId, row.numInputRows, row.error) == (0, 7, None)
    assert row.durationMs["triggerExecution"] > 0 and json.loads(row.progress)["numInputRows"] == 7


def test_a_failed_append_keeps_the_rows_for_the_next_flush(spark, config, tmp_path, capsys):
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the table should be")
    with recording(spark, config.path("ops", "stream_progress")) as recorder, watching(spark, recorder):
        recorder.path = str(blocked)
        _stream_through(spark, config, "kept", rows=3)
        wait_for(lambda: "kept" in recorder.latest, 60, "the listener's progress event")

        assert recorder.flush() == 0
        assert "could not append 1 progress rows" in capsys.readouterr().err
        recorder.path = config.path("ops", "stream_progress")
        assert recorder.flush() == 1

    kept = spark.read.format("delta").load(config.path("ops", "stream_progress")).where("queryName = 'kept'")
    assert kept.count() == 1
