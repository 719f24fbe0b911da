"""A class-data archive for the Spark JVM: every command's Spark starts seconds sooner.

A Spark driver on a few cores spends most of its start loading and verifying the same classes
from pyspark's jars. Java's application class-data sharing (CDS) keeps them, parsed and
verified, in a file the JVM maps at start. `make setup` writes one (`python -m lakehouse.class_archive`)
by running a small Spark and Delta workload under `-XX:ArchiveClassesAtExit`; `shared.spark` then
starts every driver with `-XX:SharedArchiveFile` when the archive for this install exists
(`shared.jvm.archive_path`).

An archive fits one JVM and one class path only, so its name carries a fingerprint of both (the
`java` binary, pyspark's version and the jars of `.jars/spark`): after an upgrade the old one is
simply not used (`make setup` writes the new one). Without an archive everything works, more slowly.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from shared.jvm import ARCHIVE_DIR, archive_path, archive_prefix
from shared.runtime import RUNTIMES, current


def write_archive(report=print) -> Path:
    """Run a small Spark and Delta workload in this process's JVM and keep its classes (about 40 s)."""
    from shared.config_loading import load_config, with_overrides
    from shared.spark import spark_session
    from shared.spark_jvm import stop_and_await_jvm

    target = archive_path()
    if target.is_file():
        report(f"class archive: {target} is up to date")
        return target
    ARCHIVE_DIR.mkdir(parents=True, exist_ok=True)
    others = [archive_prefix(runtime.name) for runtime in RUNTIMES if runtime != current()]
    for stale in ARCHIVE_DIR.glob("*.jsa"):  # this runtime's older archives, and any of no runtime
        if not any(stale.name.startswith(prefix) for prefix in others):
            stale.unlink()
    partial = target.with_suffix(".partial")
    with tempfile.TemporaryDirectory(prefix="class-archive-") as scratch:
        config = with_overrides(load_config(), [
            f"storage.root={scratch}", "spark.ui_enabled=false", "spark.log_level=ERROR",
            # what CDS cannot keep (signed jars, generated classes) it lists as warnings: errors only
            f"spark.conf.spark.driver.defaultJavaOptions=-XX:ArchiveClassesAtExit={partial} -Xlog:disable -Xlog:all=error:stderr"])
        report(f"class archive: running a small Spark workload of the {current().name} runtime (about 40 s)")
        spark = spark_session(config, class_archive=False)
        if current().delta:
            table = str(Path(scratch) / "table")
            spark.range(1000).selectExpr("id % 7 AS key", "id").write.format("delta").save(table)
            spark.read.format("delta").load(table).groupBy("key").count().collect()
        else:  # the fast path's transform on a few crafted Kafka records
            fast_path_workload(spark, config)
        stop_and_await_jvm(spark)
    if not partial.is_file():
        raise RuntimeError(f"the JVM wrote no class archive at {partial}")
    partial.rename(target)
    report(f"class archive: {target} ({target.stat().st_size / 2**20:.0f} MiB)")
    return target


def fast_path_workload(spark, config) -> None:
    """The fast path's whole transform (parsing, its state operator, alert records) over a static frame
    of Kafka-shaped records, so that the classes a fast-path restart loads are in its archive."""
    import json
    from datetime import datetime, timezone

    from operational.hot_pages import alerting_transform
    from operational.mode import fast_path_mode

    now = datetime.now(timezone.utc)
    values = [json.dumps({"eventId": f"e{n}", "pageId": f"/p{n % 3}", "eventTime": now.isoformat()}).encode()
              for n in range(50)] + [b"not a click"]
    kafka = spark.createDataFrame([(None, value, "clicks", 0, offset, now, 0) for offset, value in enumerate(values)],
                                  "key binary, value binary, topic string, partition int, offset long, "
                                  "timestamp timestamp, timestampType int")
    kafka.transform(alerting_transform(fast_path_mode(config), config.operational.real_time), config.hot_pages,
                    config.quality).collect()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lakehouse.class_archive",
        description="Write the Spark JVM's class-data archive for this install (make setup runs it); "
                    "commands start about 8 s sooner with it. Does nothing when it is up to date.")
    parser.parse_args(argv)
    try:
        write_archive()
    except Exception as error:  # an optimisation: set-up goes on without it
        print(f"class archive: not written ({error}); commands work without it, more slowly", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
