"""An example gold table, made only in tests: clicks per page and minute.

It exists to show, and to test, what a new gold table costs: this one module (its transform, its
`TABLE` and its `STREAM`) and one line in the registry's `STREAMS`. Nothing else names it: the
backfill, the rebuild, `lakehouse check` and `lakehouse maintain` take it from the registry. The
tests pass `(*STREAMS, STREAM)` where the product uses `analytical.registry.STREAMS`.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

from analytical.gold_page_clicks_5s import read_silver
from analytical.silver_clicks import TABLE as SILVER_CLICKS
from analytical.quality import Suite, between, not_null, unique
from analytical.tables import Table
from analytical.writes import Prune, checked_upsert_stream
from shared.config import Config
from shared.rule import count_clicks_per_window

MINUTE = timedelta(minutes=1)


def suite(config: Config) -> Suite:
    return Suite(
        on_write=(not_null("pageId"), between("clickCountPositive", "clickCount", min_value=1)),
        on_table=(unique("onePerPageAndMinute", "pageId", "windowStart"),),
    )


def page_clicks_1m(events: DataFrame) -> DataFrame:
    return events.transform(count_clicks_per_window, MINUTE)


def writer(spark: SparkSession, config: Config, source_root: str, target_root: str) -> DataStreamWriter:
    minutes = read_silver(spark, config, source_root).transform(page_clicks_1m)
    return checked_upsert_stream(minutes, STREAM, config, target_root, ("pageId", "windowStart"),
                                 Prune("windowStart", "windowStart"), output_mode="update")


TABLE = Table(
    "gold/page_clicks_1m",
    StructType([
        StructField("pageId", StringType()),
        StructField("windowStart", TimestampType()),
        StructField("windowEnd", TimestampType()),
        StructField("clickCount", LongType(), nullable=False),
    ]),
    z_order=("pageId",),
    expectations=suite,
    policy="fail",
)
STREAM = TABLE.stream(writer, reads=(SILVER_CLICKS,))
