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
from analytical.quality import Suite, between, metrics_name, not_null, passing, unique, with_expectations
from analytical.tables import Prune, Table, upsert_stream
from shared.config import Config
from shared.rule import count_clicks_per_window
from shared.streaming import Stream

MINUTE = timedelta(minutes=1)


def suite(config: Config) -> Suite:
    return Suite(
        "gold/page_clicks_1m",
        on_write=(not_null("pageId"), between("clickCountPositive", "clickCount", min_value=1)),
        on_table=(unique("onePerPageAndMinute", "pageId", "windowStart"),),
    )


def page_clicks_1m(events: DataFrame) -> DataFrame:
    return events.transform(count_clicks_per_window, MINUTE)


def writer(spark: SparkSession, config: Config, source_root: str, target_root: str) -> DataStreamWriter:
    policy = STREAM.expectation_policy(config)
    minutes = (
        read_silver(spark, config, source_root)
        .transform(page_clicks_1m)
        .transform(with_expectations, suite(config), policy, metrics_name(STREAM.name))
    )
    return upsert_stream(minutes, TABLE, target_root, ("pageId", "windowStart"), Prune("windowStart", "windowStart"),
                         output_mode="update", keep=lambda rows: passing(rows, policy))


TABLE = Table(
    "gold/page_clicks_1m",
    StructType([
        StructField("pageId", StringType()),
        StructField("windowStart", TimestampType()),
        StructField("windowEnd", TimestampType()),
        StructField("clickCount", LongType(), nullable=False),
    ]),
    deletion_vectors=True,
    z_order=("pageId",),
    suite=suite,
)
STREAM = Stream("gold_page_clicks_1m", "gold", writer, writes=(TABLE,), policy="fail")
