"""The registry and the declarations: each stream writes exactly the tables and schemas it declares,
policies come from the declarations unless configured, and everything that lists tables reads the
registry."""

from __future__ import annotations

import pytest
from pyspark.testing import assertSchemaEqual
from pyspark.sql.types import LongType, StringType, StructField, StructType

from analytical import gold_page_clicks_5s, silver_clicks
from analytical.checks import suites
from analytical.registry import STREAMS, TABLES, check_policies, in_layer
from analytical.tables import Table, is_delta_table
from operational import hot_pages
from shared.errors import ConfigError, LakehouseError
from tests.conftest import make_config
from tests.examples import gold_page_clicks_1m

#: CONTRACT.md's tables, in the order their streams write them: what users and readers rely on.
CONTRACT_TABLES = ["bronze/clicks", "silver/clicks", "silver/quarantine", "gold/page_clicks_5s",
                   "gold/page_clicks_hourly"]


def test_the_registry_holds_the_contracts_tables_in_dependency_order():
    assert [table.name for table in TABLES] == CONTRACT_TABLES
    assert [stream.layer for stream in STREAMS] == ["bronze", "silver", "gold", "gold"]
    assert [stream.name for stream in in_layer("gold")] == ["gold_page_clicks_5s", "gold_page_clicks_hourly"]


def test_each_stream_builds_and_creates_its_tables_with_exactly_the_declared_schema(spark, tmp_path):
    config = make_config(f"storage.root={tmp_path}")
    root = config.storage.root
    # In dependency order, each on the empty tables the earlier ones created; then the example gold
    # table on top, and the fast path, which writes no table. Building a writer starts nothing.
    for stream in (*STREAMS, gold_page_clicks_1m.STREAM, hot_pages.STREAM):
        stream.writer(spark, config, root, root)
        for table in stream.writes:
            assertSchemaEqual(spark.read.format("delta").load(table.path(root)).schema, table.schema, ignoreNullable=False)


def test_a_transform_that_drifts_from_its_declared_schema_is_refused_before_anything_is_written(spark, tmp_path):
    declared = Table("gold/example", StructType([StructField("pageId", StringType()),
                                                 StructField("clickCount", LongType(), nullable=False)]))
    drifted = StructType([StructField("pageId", StringType()), StructField("clickCount", LongType()),
                          StructField("extra", StringType())])
    with pytest.raises(LakehouseError) as refused:
        declared.create(spark, str(tmp_path), drifted)
    assert "clickCount is bigint, declared bigint not null" in str(refused.value)
    assert "extra is not declared" in str(refused.value)
    assert not is_delta_table(spark, declared.path(str(tmp_path)))


def test_a_stream_keeps_its_declared_policy_unless_the_config_names_it():
    assert silver_clicks.STREAM.expectation_policy(make_config()) == "drop"
    assert gold_page_clicks_5s.STREAM.expectation_policy(make_config()) == "fail"
    overridden = make_config("quality.policies.gold_page_clicks_5s=warn")
    assert gold_page_clicks_5s.STREAM.expectation_policy(overridden) == "warn"
    assert silver_clicks.STREAM.expectation_policy(overridden) == "drop"
    check_policies(overridden)


def test_a_policy_for_a_stream_that_does_not_exist_names_the_key():
    with pytest.raises(ConfigError, match=r"quality\.policies\.gold_page_clicks_5: no stream of that name"):
        check_policies(make_config("quality.policies.gold_page_clicks_5=warn"))
    with pytest.raises(ConfigError, match=r"quality\.policies\.bronze_clicks"):  # bronze checks no expectations
        check_policies(make_config("quality.policies.bronze_clicks=warn"))


def test_check_validates_the_suite_of_every_registered_table_that_declares_one():
    config = make_config()
    assert [suite.table for suite in suites(config)] == CONTRACT_TABLES[1:]
    with_example = [*TABLES, gold_page_clicks_1m.TABLE]
    assert [suite.table for suite in suites(config, with_example)][-1] == "gold/page_clicks_1m"


def test_every_name_of_a_table_derives_from_its_path():
    """The query, checkpoint and policy key, the module, the layer and the suite of each table are the
    contract's path spelled as each place needs it, written once in the table's declaration."""
    expected = {"bronze_clicks": ("bronze", "bronze/clicks"), "silver_clicks": ("silver", "silver/clicks"),
                "gold_page_clicks_5s": ("gold", "gold/page_clicks_5s"),
                "gold_page_clicks_hourly": ("gold", "gold/page_clicks_hourly"),
                "gold_page_clicks_1m": ("gold", "gold/page_clicks_1m")}
    config = make_config()
    for stream in (*STREAMS, gold_page_clicks_1m.STREAM):
        layer, path = expected[stream.name]
        assert (stream.layer, stream.writes[0].name) == (layer, path)
        assert stream.writer.__module__.rsplit(".", 1)[-1] == stream.name
        suite = stream.writes[0].suite(config)
        assert (suite is None) == (layer == "bronze"), stream.name  # bronze keeps every record as it came
        assert suite is None or suite.table == path
    assert silver_clicks.QUARANTINE.suite(config).name == "silver_quarantine"
