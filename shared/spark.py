"""The one place a SparkSession is made.

It carries everything every query needs: the Maven-resolved jars of this interpreter's runtime
(shared.runtime: Kafka connector, and Delta in the medallion's) as local paths in `spark.jars`, the
Delta extensions where Delta is installed, UTC as the session time zone (window bounds and
alert timestamps are UTC), the state store and shuffle partitions from config, quiet logs.
`spark.jars` and JVM options only take effect for the first session a process makes, which is why
nothing else in the project builds one.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING

from shared import PROJECT_ROOT
from shared.config import Config, SparkConfig, StorageConfig
from shared.object_store import S3Access, is_s3, require_reachable
from shared.storage import local_folder
from shared.jvm import class_archive_option, jars, java_executable
from shared.runtime import current as current_runtime
from shared.spark_jvm import launching

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CHANGELOG_CHECKPOINTING = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
#: How many micro-batches of offsets, commits and state versions a query keeps in its checkpoint.
BATCHES_TO_RETAIN = "spark.sql.streaming.minBatchesToRetain"
HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
#: Checkpoint writes through Hadoop's FileContext on the local file system rename via
#: getFileLinkStatus, which forks `readlink` for every file: tens of milliseconds per offset-log
#: and commit-log write each micro-batch, and again per state store commit. The
#: FileSystem-based manager renames with java.io.File. Used only for local storage roots.
LOCAL_CHECKPOINT_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


#: The driver's thread stack size (see spark_conf).
THREAD_STACK = "64m"

#: HotSpot options for every JVM that runs tasks (the driver, and a cluster's executors). By default
#: HotSpot never JIT-compiles a method of more than 8,000 bytes of bytecode and interprets it for
#: ever. Whole-stage code generation over a wide row (the parse of bronze's ten columns) emits one
#: such method per stage, which without this option runs interpreted (analytical/README.md, "Huge
#: generated methods").
JIT_OPTIONS = ("-XX:-DontCompileHugeMethods",)
#: HotSpot options for a JVM that lives a minute or two (`lakehouse forget`): its first compiler only.
#: The second, C2, spends cores on code that pays back over minutes of running it; a brief command's JVM
#: ends first, and beside `run` those cores are the fast path's (analytical/README.md, "Under two minutes").
BRIEF_JIT_OPTIONS = ("-XX:TieredStopAtLevel=1",)
#: The Spark settings that hold JVM options: the project's come first, then the configuration's own.
JAVA_OPTIONS_KEYS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
#: HotSpot's garbage collector per application, where it is not the JVM's default (G1, whose short
#: pauses suit the fast path). The medallion's work is throughput, batches of up to millions of rows
#: with a freshness of seconds to a minute: the parallel collector spends less CPU on the same work
#: (analytical/README.md, "The parallel collector"). A collector in the configuration's JVM options
#: replaces it: HotSpot refuses two.
COLLECTORS = {"analytical": "-XX:+UseParallelGC"}


#: Spark's setting for how many generated classes the JVM keeps compiled, and the project's value: a
#: medallion batch's ~190 and the literal variants of about 40 batches more (each batch's ranges are
#: new literals, so about 20 of its classes are new).
CODEGEN_CACHE_ENTRIES = "spark.sql.codegen.cache.maxEntries"
CODEGEN_CACHE_SIZE = 1000

#: A path's application: the section of the configuration whose `spark_conf` it adds to spark.conf.
Application = str


def spark_conf(config: Config, class_archive: bool = True, application: Application | None = None,
               in_driver: bool = False, application_settings: Mapping[str, str] = MappingProxyType({}),
               brief: bool = False) -> dict[str, str]:
    """The Spark settings for `config`, as data (what `spark_session` applies, in order); the
    driver maps this install's class-data archive when `class_archive` and it exists, and a `brief`
    command's JVMs compile with C1 only (BRIEF_JIT_OPTIONS). A path's
    `application` is named after it and gets `application_settings` (what its mode needs), then its
    `spark_conf` (on a cluster, the cores it takes), over spark.conf.
    `in_driver` runs the tasks in the driver's JVM (`local[1]`) whatever spark.master says: for a
    process that supervises others and writes only their progress, which must not hold a cluster's core."""
    spark = config.spark
    runtime = current_runtime()
    archive = class_archive_option() if class_archive else None
    jit = (*JIT_OPTIONS, *(BRIEF_JIT_OPTIONS if brief else ()))
    settings: dict[str, str] = {
        "spark.master": spark.master,
        "spark.app.name": f"{spark.app_name}-{application}" if application else spark.app_name,
        "spark.driver.memory": spark.driver_memory,
        "spark.jars": ",".join(str(jar) for jar in jars(runtime.jars)),
        "spark.driver.extraJavaOptions": " ".join([
            f"-Dlog4j2.configurationFile={PROJECT_ROOT / 'conf' / 'log4j2.properties'}",
            # A query stopped while its foreachBatch function is in the JVM gets an interrupt that
            # comes back through Py4J as a Python traceback holding the whole Java stack trace.
            # Spark matches it against StreamExecution.PROXY_ERROR, `((.|\r\n|\r|\n)*)...`, which
            # java.util.regex matches by recursion, a few frames per character: with the default
            # 1 MB thread stack the stop ends in a StackOverflowError on the stream thread
            # (reproduced: a MERGE in foreachBatch stopped mid-batch, 4 stops of 4).
            f"-Xss{THREAD_STACK}",
            f"-Dlakehouse.knownWarnings={'NEUTRAL' if spark.known_warnings == 'show' else 'DENY'}",
            *jit,
            *([archive] if archive else []),
        ]),
        "spark.executor.extraJavaOptions": " ".join(jit),
        "spark.sql.session.timeZone": "UTC",
        # A stateful query killed while it plans its first batch can leave state/ (the operator's
        # schema and metadata folders) written and offsets/ still empty. Spark 4.1 then refuses every
        # later start of that query (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY): the fast path would
        # never alert again. With no batch in the offset log nothing was committed, so the first
        # batch simply runs again (reproduced by the crash suite's kill during a start).
        "spark.sql.streaming.verifyCheckpointDirectoryEmptyOnStart": "false",
        "spark.sql.shuffle.partitions": str(spark.shuffle_partitions),
        # Spark keeps the classes it generates for plans in one JVM-wide cache, 100 by default. One
        # medallion batch needs about 190 (its writes, Delta's file filtering and commits), so each
        # batch evicted the last one's and compiled them all again, and the JIT compiled them again
        # (analytical/README.md, "Classes compiled again in every batch").
        CODEGEN_CACHE_ENTRIES: str(CODEGEN_CACHE_SIZE),
        # Delta rebuilds a table's snapshot from its log with 50 tasks by default: on a few cores that
        # is most of a small write's time.
        "spark.databricks.delta.snapshotPartitions": str(spark.shuffle_partitions),
        # VACUUM lists a table's folders with this many tasks (10000 by default): 45 s for a small
        # table on 2 cores, 4 s with one task per core.
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": str(spark.shuffle_partitions),
        "spark.ui.enabled": str(spark.ui_enabled).lower(),
        "spark.ui.showConsoleProgress": "false",
        # Both paths in one application (the isolation benchmark's "shared" layout; `lakehouse run`
        # runs them as two): each query runs in its path's pool (`scheduler_pool`).
        "spark.scheduler.mode": "FAIR",
        "spark.scheduler.allocation.file": str(PROJECT_ROOT / "conf" / "fairscheduler.xml"),
    }
    if runtime.delta:
        settings |= DELTA_SETTINGS
    settings |= _state_store_settings(spark) | _storage_settings(config.storage)
    project_java_options = {key: settings[key] for key in JAVA_OPTIONS_KEYS}
    settings |= {key: str(value) for key, value in spark.conf.items()}
    settings |= application_settings
    if application:
        settings |= {key: str(value) for key, value in getattr(config, application).spark_conf.items()}
    for key, ours in project_java_options.items():  # a trust store or an agent of the configuration's joins ours
        theirs = "" if settings[key] == ours else settings[key]
        collector = COLLECTORS.get(application or "", "")
        if collector and not re.search(r"-XX:\+Use\w+GC\b", theirs):
            ours = f"{ours} {collector}"
        settings[key] = f"{ours} {theirs}".strip()
    if in_driver:
        settings["spark.master"] = "local[1]"
    # A failed executor heartbeat is harmless only where the executor is in the driver's JVM: a local
    # master (conf/log4j2.properties says why).
    in_process = spark.known_warnings == "hide" and settings["spark.master"].startswith("local")
    settings["spark.driver.extraJavaOptions"] += f" -Dlakehouse.inProcessHeartbeat={'DENY' if in_process else 'NEUTRAL'}"
    return settings


#: What Delta needs in a session of the medallion's runtime.
DELTA_SETTINGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Delta's SQL parser drops the values of named parameters (`spark.sql(text, args=...)`) on
    # Spark 4.1: every `:name` is then UNBOUND_SQL_PARAMETER (delta-io/delta#7640). The
    # legacy substitution binds them after parsing, which the trend questions need.
    "spark.sql.legacy.parameterSubstitution.constantsOnly": "true",
}


def _state_store_settings(spark: SparkConfig) -> dict[str, str]:
    """The state store `spark.state_store` names, and RocksDB's settings."""
    if spark.state_store != "rocksdb":
        return {"spark.sql.streaming.stateStore.providerClass": HDFS_PROVIDER}
    prefix = "spark.sql.streaming.stateStore.rocksdb"
    return {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        CHANGELOG_CHECKPOINTING: str(spark.rocksdb.changelog_checkpointing).lower(),
        f"{prefix}.boundedMemoryUsage": str(spark.rocksdb.bounded_memory).lower(),
        f"{prefix}.maxMemoryUsageMB": str(spark.rocksdb.max_memory_mb),
        # Counting a state store's rows reads each key before it is written or removed, in the
        # fast path's eviction and in every gold batch (operational/ and analytical/README.md).
        f"{prefix}.trackTotalNumberOfRows": str(spark.rocksdb.count_rows).lower(),
    }


def _storage_settings(storage: StorageConfig) -> dict[str, str]:
    """What the storage root needs: a local folder's checkpoint file manager, S3's settings."""
    root = storage.root
    settings = {"spark.sql.streaming.checkpointFileManagerClass": LOCAL_CHECKPOINT_MANAGER} \
        if local_folder(root) is not None else {}
    return settings | (S3Access.of(storage.s3).spark_settings() if is_s3(root) else {})


def spark_session(config: Config, class_archive: bool = True, application: Application | None = None,
                  in_driver: bool = False, application_settings: Mapping[str, str] = MappingProxyType({}),
                  brief: bool = False):
    """Build (or return this process's) SparkSession for `config` (`class_archive`, `application`,
    `in_driver`, `application_settings`, `brief`: see spark_conf)."""
    require_reachable(config.storage.root, config.storage.s3)  # one line now, not a stack trace from a query
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # This runtime's own Spark, whatever the environment says: PySpark launches `$SPARK_HOME/bin/spark-submit`
    # when SPARK_HOME is set, and this Python against another Spark's JVM fails every query start.
    # Spark settings belong in the config (spark.conf); a spark-defaults.conf is still read from SPARK_CONF_DIR.
    os.environ["SPARK_HOME"] = str(current_runtime().spark_home())
    settings = spark_conf(config, class_archive, application, in_driver, application_settings, brief)
    if settings["spark.master"].startswith("local") or _on_loopback(settings["spark.master"]):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # one machine: no network interface guessing
    java = java_executable()
    os.environ.setdefault("JAVA_HOME", str(os.path.dirname(os.path.dirname(os.path.realpath(java)))))
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    with launching(quiet=config.spark.known_warnings == "hide"):  # the JVM starts now
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel(config.spark.log_level)
    return session


def _on_loopback(master: str) -> bool:
    """A cluster master on this machine's loopback (`spark://127.0.0.1:7077`): its executors reach the
    driver there too."""
    host = master.partition("://")[2].rsplit(":", 1)[0]
    return host in ("localhost", "::1") or host.startswith("127.")


@contextmanager
def session_conf(spark: "SparkSession", settings: dict[str, str]) -> Iterator[None]:
    """Set Spark settings for what starts inside the block, then put the previous values back."""
    previous = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


@contextmanager
def scheduler_pool(spark: "SparkSession", pool: str) -> Iterator[None]:
    """Queries started inside the block run their jobs in `pool`, one of conf/fairscheduler.xml's, each
    path's named after it (a stream keeps the pool it started with: Spark copies the thread's local properties into the query's thread)."""
    context = spark.sparkContext
    previous = context.getLocalProperty("spark.scheduler.pool")
    context.setLocalProperty("spark.scheduler.pool", pool)
    try:
        yield
    finally:
        context.setLocalProperty("spark.scheduler.pool", previous)
