"""The calls into Spark's private Python API (`_jvm`, `_jsc`, `_jsq`) that a clean stop of a real-time
query needs, each with why no public call does the job. Another Spark version may change any of them:
they are what to look at first after an upgrade.
"""

from __future__ import annotations

from typing import Any


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
