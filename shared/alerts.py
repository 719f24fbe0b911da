"""The alert record on `hot-pages` (CONTRACT.md, "Alerts"): key alertId, value a JSON object.

alertId is deterministic from (pageId, windowStart): the first 32 hex digits of
sha256("<pageId>|<windowStart as epoch milliseconds>"), so every record about one window, from any
run or restart, carries the same id and a consumer can keep the one with the highest clickCount.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from shared.schema import ALERT_TIMESTAMP_FORMAT

#: The fast path's query, which writes the alert records: its name, checkpoint folder and metrics label.
#: The medallion's reconciliation reads its checkpoint by this name.
ALERTING_QUERY = "hot_pages"

_JSON_OPTIONS = {"timestampFormat": ALERT_TIMESTAMP_FORMAT, "timeZone": "UTC"}


def alert_id(page_id: Column, window_start: Column) -> Column:
    """The deterministic id of a (page, window)."""
    identity = F.concat_ws("|", page_id, F.unix_millis(window_start).cast("string"))
    return F.substring(F.sha2(identity, 256), 1, 32)


def to_alert_records(hot: DataFrame, threshold: int) -> DataFrame:
    """Hot windows (pageId, windowStart, windowEnd, clickCount) -> Kafka `key` and `value` strings.

    emittedAt is the micro-batch's time in a stream (current_timestamp is fixed per batch).
    """
    value = F.struct(
        F.col("alertId"),
        F.col("pageId"),
        F.col("windowStart"),
        F.col("windowEnd"),
        F.col("clickCount").cast("long").alias("clickCount"),
        F.lit(threshold).cast("long").alias("threshold"),
        F.current_timestamp().alias("emittedAt"),
    )
    return hot.withColumn("alertId", alert_id(F.col("pageId"), F.col("windowStart"))).select(
        F.col("alertId").alias("key"), F.to_json(value, _JSON_OPTIONS).alias("value")
    )
