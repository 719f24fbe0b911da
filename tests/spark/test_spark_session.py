"""The one Spark session has what every query needs: Delta, UTC, the configured state store."""

from shared import spark_internals
from tests.conftest import make_config


def test_delta_tables_write_read_and_time_travel(spark, tmp_path):
    path = make_config(f"storage.root={tmp_path}").path("smoke", "delta")
    spark.range(3).write.format("delta").save(path)
    spark.range(3, 5).write.format("delta").mode("append").save(path)

    assert spark.read.format("delta").load(path).count() == 5
    assert spark.read.format("delta").option("versionAsOf", 0).load(path).count() == 3
    assert [row.operation for row in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()] == ["WRITE", "WRITE"]


def test_session_settings_come_from_config(spark):
    conf, config = spark.conf, make_config()

    assert conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.sql.shuffle.partitions") == str(config.spark.shuffle_partitions)
    assert conf.get("spark.sql.streaming.stateStore.providerClass").endswith("RocksDBStateStoreProvider")
    assert conf.get("spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled") == "true"
    assert conf.get("spark.sql.streaming.stateStore.rocksdb.boundedMemoryUsage") == "true"
    assert conf.get("spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows") == "false"
    assert conf.get("spark.sql.streaming.checkpointFileManagerClass").endswith("FileSystemBasedCheckpointFileManager")


def test_a_stop_during_a_foreach_batch_call_is_recognised_without_overflowing_the_stack(spark):
    """Stopping a query while its foreachBatch function is in the JVM hands Spark a Python traceback
    holding the whole Java stack trace; Spark's own pattern for recognising that as a stop recurses
    per character. With Java's default 1 MB thread stack this 90 KB message overflows (the stream
    thread dies with a StackOverflowError); the session's thread stack must hold it."""
    proxy_error = spark._jvm.org.apache.spark.sql.execution.streaming.runtime.StreamExecution.PROXY_ERROR()
    traceback = ("py4j.protocol.Py4JJavaError: An error occurred while calling o42.execute.\n"
                 + "\tat org.apache.spark.sql.delta.commands.MergeIntoCommand.run(MergeIntoCommand.scala:123)\n" * 1000
                 + "java.lang.InterruptedException")

    assert proxy_error.findFirstIn(traceback).isDefined()


def test_the_jvm_memory_figures_are_the_heap_the_runtime_holds_and_uses(spark):
    runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
    memory = spark_internals.jvm_memory_mb(spark)
    committed_mb = runtime.totalMemory() / 2**20

    assert abs(memory["heap_committed"] - committed_mb) <= 64, (memory, committed_mb)  # a resize in between at most
    assert 0 < memory["heap_used"] <= memory["heap_committed"] <= runtime.maxMemory() / 2**20
    assert memory["non_heap_committed"] > 0
