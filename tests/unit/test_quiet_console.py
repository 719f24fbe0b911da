"""The log4j filters that silence known-harmless warnings: each drops its warning as Spark words it,
and lets every other message of the same logger through."""

from __future__ import annotations

import re

import pytest

from shared import PROJECT_ROOT
from tests.helpers import assert_no_errors, assert_quiet

# Messages as Spark 4.1 and 4.3 log them (copied from real runs), by logger.
SILENCED = {
    "org.apache.spark.scheduler.TaskSetManager":
        "[queryId = 8110b] [batchId = 10] Lost task 0.0 in stage 31.0 (TID 42) (localhost executor driver): "
        "TaskKilled (Job 12 cancelled Query hot_pages [id = 8110b9ea-c222-4383-9ba9-565d344c8ea3, "
        "runId = 4d0b1f8f-ee0c-4728-adab-33dff1140c8c] was stopped SQLSTATE: XXKDA)",
    "org.apache.hadoop.util.Shell": "Interrupted while joining on: Thread[Thread-123,5,main]",
    "org.apache.spark.scheduler.DAGScheduler":
        "Failed to cancel job group 4d0b1f8f-ee0c-4728-adab-33dff1140c8c. Cannot find active jobs for it.",
    "org.apache.spark.sql.execution.CacheManager": "Asked to cache already cached data.",
    "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor":
        "Current batch is falling behind. The trigger interval is 1000 milliseconds, but spent 1841 milliseconds",
    "org.apache.spark.storage.BlockManager": "Block rdd_412_0 already exists on this machine; not re-adding it",
    "org.apache.spark.sql.execution.streaming.state.StateStore":
        "Error running maintenance task, processUnloadedOnly=false",
    "org.apache.spark.executor.Executor": "Issue communicating with driver in heartbeater",
}
# Warnings of the same loggers that a user must see.
SHOWN = {
    "org.apache.spark.scheduler.TaskSetManager":
        "Lost task 0.0 in stage 31.0 (TID 42) (localhost executor driver): java.lang.OutOfMemoryError: Java heap space",
    "org.apache.spark.sql.execution.CacheManager": "Cache of table silver.clicks failed",
    "org.apache.hadoop.util.Shell": "Did not find winutils.exe",
    "org.apache.spark.storage.BlockManager": "Putting block rdd_412_0 failed due to exception java.io.IOException.",
    "org.apache.spark.sql.execution.streaming.state.StateStore":
        "Error doing maintenance on provider: StateStoreProviderId[ storeId=StateStoreId[ operatorId=0, "
        "partitionId=1, storeName=default ], queryRunId=ffeaa5e9-721c-4bdb-8b60-1b0bb9eb1af4 ]. Closing it.",
    "org.apache.spark.executor.Executor": "Failed to dump thread for task 42",
}


def message_filters() -> dict[str, re.Pattern]:
    """conf/log4j2.properties' RegexFilter per logger name, compiled as log4j does (whole message)."""
    properties = dict(line.split(" = ", 1) for line in (PROJECT_ROOT / "conf" / "log4j2.properties")
                      .read_text().splitlines() if " = " in line and not line.startswith("#"))
    filters = {}
    for key, value in properties.items():
        if key.endswith(".filter.message.regex"):
            logger = key.removesuffix(".filter.message.regex")
            filters[properties[f"{logger}.name"]] = re.compile(value.replace("\\\\", "\\"))
    return filters


@pytest.mark.parametrize("logger", sorted(SILENCED))
def test_a_known_harmless_warning_is_silenced(logger):
    assert message_filters()[logger].fullmatch(SILENCED[logger])


@pytest.mark.parametrize("logger", sorted(SHOWN))
def test_another_warning_of_the_same_logger_still_shows(logger):
    assert not message_filters()[logger].fullmatch(SHOWN[logger])


def test_every_silenced_warning_is_listed_for_users():
    listed = (PROJECT_ROOT / "OPERATIONS.md").read_text()
    for logger in message_filters():
        assert f"`{logger.rsplit('.', 1)[1]}:" in listed, f"{logger} is silenced but OPERATIONS.md does not say so"


@pytest.mark.parametrize(("overrides", "heartbeat_warnings"), [
    ([], "DENY"),  # the shipped local master: the executor is in the driver's JVM
    (["spark.master=spark://10.0.0.5:7077"], "NEUTRAL"),  # a cluster's executor that loses its driver
    (["spark.known_warnings=show"], "NEUTRAL"),
])
def test_a_failed_heartbeat_is_hidden_only_where_the_executor_is_in_the_drivers_jvm(overrides, heartbeat_warnings):
    from shared.config_loading import load_config
    from shared.spark import spark_conf

    options = spark_conf(load_config(None, overrides), class_archive=False)["spark.driver.extraJavaOptions"]
    assert f"-Dlakehouse.inProcessHeartbeat={heartbeat_warnings}" in options.split()


def test_a_console_that_is_not_quiet_fails_with_the_lines_that_broke_it():
    loaded = "22:29:34 WARN StateStore: Loaded state store provider in loadTimeMs=2400"
    assert_quiet(f"12:00:01 INFO started\n{loaded}")  # on EXPECTED_WARNINGS: a loaded machine
    with pytest.raises(AssertionError) as failed:
        assert_quiet(f"{loaded}\n22:29:35 WARN NettyRpcEnv: Ignored message: true\nWARNING: a Python one")
    assert str(failed.value).splitlines()[1:] == ["22:29:35 WARN NettyRpcEnv: Ignored message: true",
                                                  "WARNING: a Python one"]


def test_an_error_fails_with_its_stack_trace_not_the_logs_tail():
    assert_no_errors("12:00:01 INFO started\n12:00:02 WARN an error-free warning\nerrors 0")
    trace = ["12:00:03 ERROR MicroBatchExecution: Query medallion terminated with error",
             "java.io.InterruptedIOException: s3a://tests/x: interrupted", "\tat org.apache.hadoop.fs.s3a.Invoker"]
    with pytest.raises(AssertionError) as failed:
        assert_no_errors("\n".join(["12:00:01 INFO started", *trace, *["later"] * 50, "[medallion] Traceback (most recent call last):"]),
                         context=3)
    said = str(failed.value)
    assert said.startswith("2 error line(s)") and "line 2:\n" + "\n".join(trace) in said and "line 55:" in said
