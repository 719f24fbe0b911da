"""The Spark JVM's class-data archive: used only when it fits this install."""

from __future__ import annotations

from pathlib import Path

import shared.class_archive as class_archive
from shared.config import load_config
from shared.spark import spark_conf


def _driver_options(config) -> str:
    return spark_conf(config)["spark.driver.extraJavaOptions"]


def test_the_archive_is_named_after_the_jars_so_an_upgrade_does_not_use_a_stale_one(monkeypatch):
    before = class_archive.archive_path()
    monkeypatch.setattr(class_archive, "jars", lambda kind: [Path("delta-spark_2.13-9.9.9.jar")])
    assert class_archive.archive_path() != before


def test_the_driver_maps_the_archive_only_when_it_exists(monkeypatch, tmp_path):
    monkeypatch.setattr(class_archive, "ARCHIVE_DIR", tmp_path)
    config = load_config()
    assert "SharedArchiveFile" not in _driver_options(config)
    class_archive.archive_path().write_bytes(b"")
    assert f"-XX:SharedArchiveFile={class_archive.archive_path()}" in _driver_options(config).split()
    assert "SharedArchiveFile" not in spark_conf(config, class_archive=False)["spark.driver.extraJavaOptions"]
