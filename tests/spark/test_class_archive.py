"""The Spark JVM's class-data archive: used only when it fits this install."""

from __future__ import annotations


import shared.jvm as jvm
from shared.config_loading import load_config
from shared.spark import spark_conf


def _driver_options(config) -> str:
    return spark_conf(config)["spark.driver.extraJavaOptions"]


def test_the_archive_is_named_after_the_jars_so_an_upgrade_does_not_use_a_stale_one(monkeypatch, tmp_path):
    before = jvm.archive_path()
    upgraded = tmp_path / "delta-spark_2.13-9.9.9.jar"
    upgraded.write_bytes(b"a jar")
    monkeypatch.setattr(jvm, "jars", lambda kind: [upgraded])
    assert jvm.archive_path() != before


def test_a_jar_rebuilt_in_place_gets_a_new_archive(monkeypatch, tmp_path):
    """The fast path's processor jar is rebuilt under the same name; CDS would ignore the old archive."""
    operator = tmp_path / "lakehouse-operational.jar"
    operator.write_bytes(b"built once")
    monkeypatch.setattr(jvm, "jars", lambda kind: [operator])
    before = jvm.archive_path()
    operator.write_bytes(b"built again, longer")
    assert jvm.archive_path() != before


def test_the_driver_maps_the_archive_only_when_it_exists(monkeypatch, tmp_path):
    monkeypatch.setattr(jvm, "ARCHIVE_DIR", tmp_path)
    config = load_config()
    assert "SharedArchiveFile" not in _driver_options(config)
    jvm.archive_path().write_bytes(b"")
    assert f"-XX:SharedArchiveFile={jvm.archive_path()}" in _driver_options(config).split()
    assert "SharedArchiveFile" not in spark_conf(config, class_archive=False)["spark.driver.extraJavaOptions"]


def test_each_runtime_has_an_archive_of_its_own(monkeypatch):
    import shared.runtime as runtime

    medallion = jvm.archive_path()
    monkeypatch.setattr(runtime, "current", lambda: runtime.FAST_PATH)
    fast_path = jvm.archive_path()

    assert medallion.name.startswith("spark-medallion-") and fast_path.name.startswith("spark-fast-path-")
