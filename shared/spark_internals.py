"""Every call into Spark's private Python API (`_jvm`, `_jsc`, `_jdf`, `_jsq`, Py4J's gateway), in one
place, each with why no public call does the job. Another Spark version may change any of them: they
are what to look at first after an upgrade.

The JVM's launch and exit (`shared.spark`: `pyspark.java_gateway.Popen` wrapped so that the JVM dies
with this process; Py4J's client marked disconnected at exit) are hooks of the session factory and
stay there; `disconnect_py4j` is the call they make.
"""

from __future__ import annotations

from typing import Any


def jvm_pid(spark: Any) -> int:
    """The pid of the session's JVM. A checkpoint lock records it, so that a restart can end the JVM
    of a killed command that still writes (shared.checkpoints); the benchmarks read its memory.
    PySpark does not say which process it launched."""
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def jvm_memory_mb(spark: Any) -> dict[str, float]:
    """The session's JVM memory in MB, as the JVM accounts for it: `heap_committed`, what the heap
    holds from the system (it grows towards -Xmx, `spark.driver_memory`), `heap_used`, what is in it
    now, and `non_heap_committed` (classes' metadata, compiled code). Beside the process's resident
    size, they tell a heap growing into its bound from memory that grows outside the JVM's
    accounting (RocksDB, direct buffers). PySpark reports no JVM memory; the JVM's MBeans do."""
    memory = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getMemoryMXBean()
    heap, non_heap = memory.getHeapMemoryUsage(), memory.getNonHeapMemoryUsage()
    return {name: round(value / 2**20, 1) for name, value in (
        ("heap_committed", heap.getCommitted()), ("heap_used", heap.getUsed()),
        ("non_heap_committed", non_heap.getCommitted()))}


def generated_classes_compiled(spark: Any) -> int:
    """How many classes Spark's code generation has compiled in the session's JVM so far: each is a
    miss of its JVM-wide cache (`spark.sql.codegen.cache.maxEntries`), Janino's work on the driver, then
    the JIT's. The benchmarks count them per query. Spark reports them only as a metrics source,
    which this project does not register."""
    metrics = spark.sparkContext._jvm.org.apache.spark.metrics.source.CodegenMetrics
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


def hadoop_file_system(spark: Any, path: str) -> tuple[Any, Any]:
    """Hadoop's FileSystem for `path` and the Hadoop Path, with the session's Hadoop configuration:
    checkpoint folders and a rebuild's table moves on whatever storage the session reaches (S3A
    included). PySpark has no file-system API."""
    hadoop_path = spark._jvm.org.apache.hadoop.fs.Path(path)
    return hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration()), hadoop_path


def read_small_file(spark: Any, path: str) -> str | None:
    """The whole text of a small file on whatever storage the session reaches; None when it is missing.
    One request, no Spark job: what a micro-batch can afford to read of its own checkpoint."""
    file_system, hadoop_path = hadoop_file_system(spark, path)
    if not file_system.exists(hadoop_path):
        return None
    stream = file_system.open(hadoop_path)
    try:
        return spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
    finally:
        stream.close()


def executed_plan(frame: Any) -> Any:
    """The physical plan a finished query ran, with its nodes' metrics (the files a scan read):
    PySpark offers only `explain()`'s text, before the metrics."""
    return frame._jdf.queryExecution().executedPlan()


def py4j_gateway(spark: Any) -> tuple[Any, Any]:
    """Py4J's gateway and the JVM view, for calling the JVM's platform MBean server by reflection
    (lakehouse.monitoring.live_consumers: the Kafka consumers' live metrics, which no Spark API exposes)."""
    context = spark.sparkContext
    return context._gateway, context._jvm


def jvm_root_log_level(context: Any) -> str:
    """The JVM's root log4j level: `SparkContext.setLogLevel` sets it but cannot read it back, and a
    temporary silence must put it back as it was."""
    return str(context._jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel())


def running_task_count(context: Any) -> int:
    """Tasks running on the executors now. PySpark's status tracker counts active stages' tasks, and a
    cancelled stage stops counting while its tasks still end (and log)."""
    tracker = context._jsc.sc().statusTracker()
    return sum(info.numRunningTasks() for info in tracker.getExecutorInfos())


def query_execution_thread(query: Any) -> Any:
    """The JVM thread that runs a streaming query's batches: whether it still runs after the query is
    marked terminated (`awaitTermination` then answers at once)."""
    return query._jsq.streamingQuery().queryExecutionThread()


def mark_terminated(query: Any) -> bool:
    """Mark a query terminated without cancelling its running batch, as Spark's own stop does first
    (there is no public call for it); False when this Spark does not let it be done."""
    from pyspark import SparkContext

    try:
        state = query._jsq.streamingQuery().state()
        package = state.get().getClass().getPackage().getName()  # the stream's lifecycle states' package
        lang = SparkContext._active_spark_context._jvm.java.lang
        state.set(lang.Class.forName(f"{package}.TERMINATED$").getField("MODULE$").get(None))
        return True
    except Exception:  # another Spark's internals: the query is stopped where it is instead
        return False


def disconnect_py4j() -> None:
    """Mark Py4J's client disconnected: used as the JVM exits (shared.spark), when a Python proxy
    collected meanwhile would otherwise still call it and log an error with a traceback."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None:
        SparkContext._gateway._gateway_client.is_connected = False


def jvm_dataset_transform(frame: Any, class_name: str, method: str, *args: Any) -> Any:
    """`frame` through a static JVM method that takes a Dataset (and `args`) and returns one, as a
    DataFrame: the fast path's transformWithState operator is written for the JVM (real-time mode runs no
    Python one), and PySpark has no call that applies a JVM Dataset transform. A clear error when the
    class is not on spark.jars.

        counts = jvm_dataset_transform(events, "lakehouse.operational.RunningDistinctCounts", "of", 5000)
    """
    from py4j.java_gateway import JavaClass
    from pyspark.sql import DataFrame

    from shared.errors import MissingDependencyError

    spark = frame.sparkSession
    owner = spark.sparkContext._jvm
    for part in class_name.split("."):
        owner = getattr(owner, part)
    if not isinstance(owner, JavaClass):
        raise MissingDependencyError(f"the JVM class {class_name} is not on this session's spark.jars: "
                                     "run `make setup` (it compiles operational/jvm into .jars/fast)")
    return DataFrame(getattr(owner, method)(frame._jdf, *args), spark)
