"""Table declarations that need a SparkSession: the schemas streams create, a drifted one refused, the
suites and names derived from each table's path."""

from __future__ import annotations

from datetime import datetime

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType
from pyspark.testing import assertSchemaEqual

from analytical import silver_clicks
from analytical.checks import suites
from analytical.registry import STREAMS, TABLES
from analytical.tables import Table
from operational import hot_pages
from shared.errors import LakehouseError
from tests.conftest import make_config
from tests.examples import gold_page_clicks_1m
from tests.unit.test_registry import CONTRACT_TABLES


def test_each_stream_builds_and_creates_its_tables_with_exactly_the_declared_schema(spark, tmp_path):
    config = make_config(f"storage.root={tmp_path}")
    root = config.storage.root
    # In dependency order, each on the empty tables the earlier ones created; then the example gold
    # table on top, and the fast path, which writes no table. Building a writer starts nothing.
    for stream in (*STREAMS, gold_page_clicks_1m.STREAM, hot_pages.STREAM):
        stream.writer(spark, config, root, root)
        for table in stream.writes:
            assertSchemaEqual(spark.read.format("delta").load(table.at(root).path).schema, table.schema, ignoreNullable=False)


def test_a_transform_that_drifts_from_its_declared_schema_is_refused_before_anything_is_written(spark, tmp_path):
    declared = Table("gold/example", StructType([StructField("pageId", StringType()),
                                                 StructField("clickCount", LongType(), nullable=False)]))
    drifted = StructType([StructField("pageId", StringType()), StructField("clickCount", LongType()),
                          StructField("extra", StringType())])
    with pytest.raises(LakehouseError) as refused:
        declared.at(str(tmp_path)).create(spark, drifted)
    assert "clickCount is bigint, declared bigint not null" in str(refused.value)
    assert "extra is not declared" in str(refused.value)
    assert not declared.at(str(tmp_path)).exists(spark)


@pytest.mark.parametrize("left", [[], ["_staged_commits/"], [".00000000000000000000.json.5f2c.tmp"]])
def test_a_table_whose_creation_was_killed_before_its_first_commit_is_created_by_the_next_start(spark, tmp_path, left):
    """A kill between the log's folder and the first commit leaves a `_delta_log` without a commit (what
    the crash suite's kill of `run` as it starts left on the object store): the next start creates the
    table, where Delta alone would refuse it for good (DELTA_TABLE_NOT_FOUND)."""
    log = tmp_path / "gold" / "example" / "_delta_log"
    log.mkdir(parents=True)
    for name in left:
        (log / name).mkdir() if name.endswith("/") else (log / name).write_text("{")
    declared = Table("gold/example", StructType([StructField("pageId", StringType())]))

    path = declared.at(str(tmp_path)).create(spark, declared.schema)

    assert declared.at(str(tmp_path)).exists(spark) and spark.read.format("delta").load(path).schema == declared.schema
    assert spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version").collect()[0][0] == 0


def test_a_table_made_before_a_column_was_declared_gets_it_in_its_place_and_keeps_its_rows(spark, tmp_path):
    """silver/clicks of a lake written before `eventType`: the next start adds the column after userId;
    the rows already there read it as null (the sessions read null as page_view)."""
    declared = silver_clicks.TABLE
    earlier = StructType([field for field in declared.schema.fields if field.name != "eventType"])
    path = declared.at(str(tmp_path)).path
    at = datetime(2026, 11, 22, 10)
    spark.createDataFrame([("e1", "/a", at, "u1", "clicks", 0, 7, at, at)], earlier) \
        .write.format("delta").save(path)

    declared.at(str(tmp_path)).create(spark, declared.schema)

    table = spark.read.format("delta").load(path)
    assert table.columns == declared.schema.fieldNames()
    assert [(row.eventId, row.userId, row.eventType, row.offset) for row in table.collect()] == [("e1", "u1", None, 7)]
    # the column, and the statistics' columns it declares (a table made before them follows them from then on)
    operations = [row.operation for row in spark.sql(f"DESCRIBE HISTORY delta.`{path}`").orderBy("version").collect()]
    assert operations == ["WRITE", "ADD COLUMNS", "SET TBLPROPERTIES"]
    assert spark.sql(f"DESCRIBE DETAIL delta.`{path}`").first()["properties"]["delta.dataSkippingStatsColumns"] == \
        ",".join(declared.stats_columns)
    declared.at(str(tmp_path)).create(spark, declared.schema)  # a second start adds nothing
    assert spark.sql(f"DESCRIBE HISTORY delta.`{path}`").count() == 3


def test_check_validates_the_suite_of_every_registered_table_that_declares_one():
    config = make_config()
    assert [suite.table for suite in suites(config)] == CONTRACT_TABLES[1:]
    with_example = [*TABLES, gold_page_clicks_1m.TABLE]
    assert [suite.table for suite in suites(config, with_example)][-1] == "gold/page_clicks_1m"


def test_every_name_of_a_table_derives_from_its_path():
    """The policy key, the module, the layer and the suite of each table, and the query and checkpoint of
    a stream that writes one table, are the contract's path spelled as each place needs it, written once
    in the table's declaration."""
    config = make_config()
    for table in (*TABLES, gold_page_clicks_1m.TABLE):
        assert table.key == table.name.replace("/", "_") and table.layer == table.name.split("/")[0]
        suite = table.suite(config)
        assert (suite is None) == (table.layer == "bronze"), table  # bronze keeps every record as it came
        assert suite is None or suite.table == table.name
    for stream in (*STREAMS[1:], gold_page_clicks_1m.STREAM):
        table = stream.writes[0]  # a stream that writes more than one table is named after its first
        assert (stream.name, stream.layer) == (table.key, table.layer)
        assert stream.writer.__module__.rsplit(".", 1)[-1] == stream.name
    assert STREAMS[0].writes == TABLES[:4] and STREAMS[0].name == "medallion"
    assert silver_clicks.QUARANTINE.suite(config).name == "silver_quarantine"
