"""A Spark look at a clicks topic: what the shared parsing and rule make of what is on it.

Used by `lakehouse inspect` and the demo. A batch read (earliest to latest offsets), so it shows
the whole topic as both paths will see it: validity, duplicates, windows and hot windows.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from shared.config import Config, KafkaConfig
from shared.kafka_settings import spark_options
from shared.parsing import parse_clicks, valid_clicks
from shared.rule import count_clicks_per_window, dedupe_clicks, mark_hot


def read_topic(spark: SparkSession, kafka: KafkaConfig, topic: str) -> DataFrame:
    """Every record on `topic` now, with Kafka's columns (key, value, topic, partition, offset, timestamp)."""
    return (
        spark.read.format("kafka")
        .options(**spark_options(kafka))
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )


def profile_topic(spark: SparkSession, config: Config, topic: str, top: int = 10) -> dict[str, Any]:
    parsed = read_topic(spark, config.kafka, topic).transform(parse_clicks, config.quality).cache()
    windows = None
    try:
        totals = parsed.agg(
            F.count(F.lit(1)).alias("records"),
            F.count("eventId").alias("valid"),
            F.count_distinct("eventId").alias("distinct_events"),
            F.min("eventTime").alias("first_event_time"),
            F.max("eventTime").alias("last_event_time"),
        ).first()
        reasons = parsed.where(F.col("invalidReason").isNotNull()).groupBy("invalidReason").count().collect()
        windows = (
            parsed.transform(valid_clicks)
            .transform(dedupe_clicks, config.hot_pages.watermark)
            .transform(count_clicks_per_window, config.hot_pages.window)
            .transform(mark_hot, config.hot_pages.threshold)
            .cache()
        )
        window_totals = windows.agg(F.count(F.lit(1)).alias("windows"), F.count_if("isHot").alias("hot")).first()
        busiest = windows.orderBy(F.desc("clickCount"), "pageId", "windowStart").limit(top).collect()
    finally:
        parsed.unpersist()
        if windows is not None:
            windows.unpersist()
    return {
        "records": totals["records"],
        "valid": totals["valid"],
        "invalid": totals["records"] - totals["valid"],
        "distinct_events": totals["distinct_events"],
        "invalid_by_reason": {row["invalidReason"]: row["count"] for row in sorted(reasons, key=lambda r: r[0])},
        "first_event_time": totals["first_event_time"],
        "last_event_time": totals["last_event_time"],
        "windows": window_totals["windows"],
        "hot_windows": window_totals["hot"],
        "top_windows": [
            {"pageId": r["pageId"], "windowStart": r["windowStart"], "clickCount": r["clickCount"], "isHot": r["isHot"]}
            for r in busiest
        ],
    }
