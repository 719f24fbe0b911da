"""`lakehouse reconcile`: the alerts on `hot-pages` against gold, every difference with its cause.

Per (pageId, windowStart) the highest alerted clickCount is compared with gold/page_clicks_5s.
Only windows that are closed in both paths are compared; the others are pending, each with what it
waits for (`pendingWindows`):

  - closed in the fast path: the window ends at or before the watermark its next batch drops late
    clicks with (the last committed batch's), so no later record can change its count there; or the
    fast path is stopped and its last batch read every click on the topic (after a clean stop), so
    it has counted everything there is;
  - closed in gold: the window ends at least `hot_pages.watermark` before the newest event time
    in the version of silver that the gold stream has read (from its checkpoint); or the medallion
    is stopped and bronze, silver and gold have each read everything before them.

For each window, the fast path's count is derived again from the data, record by record
(analytical.fast_path_model); gold's side is silver: the events gold counts. A window where the alert and gold disagree is explained when the derived count reproduces the
alerted one (or, without an alert, stays at or under the threshold). Its cause is the category of
record that accounts for most of the difference (CAUSES, in that order on a tie). A window the
data does not reproduce, such as an alert no record supports, is `unexplained`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analytical import bronze_clicks, gold_page_clicks_5s, silver_clicks
from analytical.closed_windows import (fast_path_still_counting, medallion_still_counting, silver_version_counted,
                                       topic_end)
from analytical.fast_path_history import FastPathHistory
from analytical.fast_path_model import fast_path_model, horizon, in_range, reported_count
from shared.alerts import ALERTING_QUERY
from shared.alerts_topic import AlertBook, latest_alerts
from shared.checkpoints import read_checkpoint_log
from shared.config import Config
from shared.rule import assign_window
from shared.schema import ALERT_TIMESTAMP_FORMAT

#: Every cause a difference can have, in the order that breaks ties. The text is the definition.
CAUSES: dict[str, str] = {
    "late_beyond_operational_watermark":
        "gold counts events that reached the fast path after its watermark had passed their event time",
    "duplicate_beyond_operational_dedup_horizon":
        "the fast path counted a copy of an event in another window or page than its first copy: it "
        "de-duplicates within each page's window, silver keeps the first copy of each eventId",
    "not_processed_by_operational":
        "gold counts events at Kafka offsets the fast path has not read (before its starting offsets, "
        "or after its last micro-batch)",
    "not_processed_by_analytical":
        "the fast path counted events that silver, in the version gold has read, does not hold yet",
    "late_beyond_analytical_watermark":
        "silver holds events that gold dropped as later than analytical.watermark",
}
UNEXPLAINED = "unexplained"

_OUTPUT_TIME = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
_WINDOW = ["pageId", "windowStart", "windowEnd"]


def reconcile(spark: SparkSession, config: Config, start: datetime | None = None,
              end: datetime | None = None) -> dict[str, Any]:
    """The reconciliation as a JSON-ready dict (keys in CONTRACT.md, "Reconciliation")."""
    hot = config.hot_pages
    root = config.storage.root
    gold = gold_page_clicks_5s.TABLE.at(root).read(spark)
    silver_version = silver_version_counted(spark, config)
    silver = silver_clicks.TABLE.at(root).read(spark, None if silver_version is None else str(silver_version))
    bronze = bronze_clicks.TABLE.at(root).read(spark)
    book = latest_alerts(config.kafka, config.kafka.topics.alerts)
    history = FastPathHistory.from_log(read_checkpoint_log(spark, config.checkpoint(ALERTING_QUERY)),
                                       config.kafka.topics.clicks)

    events = silver.select("eventId", "pageId", "eventTime").transform(in_range, start, end, horizon(config))
    newest_ms = silver.agg(F.unix_millis(F.max("eventTime"))).first()[0]
    gold_closed_ms = -1 if newest_ms is None else newest_ms - int(hot.watermark.total_seconds() * 1000)
    fast_closed_ms = -1 if history.closed_up_to_ms is None else history.closed_up_to_ms
    clicks_end = topic_end(config.kafka)
    open_paths = {"fast path": fast_path_still_counting(spark, config, history, clicks_end),
                  "gold": medallion_still_counting(spark, config, clicks_end)}

    with fast_path_model(spark, bronze, config, history, start, end) as records:
        windows = _window_ledger(records, events, gold, _alerts_frame(spark, book), hot.window)
        window_end = F.unix_millis("windowEnd")
        rows = (
            windows.where(F.col("operationalCount").isNotNull() | F.col("goldHot"))
            .transform(in_range, start, end, column="windowStart")
            .withColumn("openInFastPath", F.lit(open_paths["fast path"] is not None) & (window_end > fast_closed_ms))
            .withColumn("openInGold", F.lit(open_paths["gold"] is not None) & (window_end > gold_closed_ms))
            .withColumn("closed", ~F.col("openInFastPath") & ~F.col("openInGold"))
            .withColumn("windowStartText", F.date_format("windowStart", _OUTPUT_TIME))
            .orderBy("windowStart", "pageId")
            .collect()
        )
    closed_ms = min(fast_closed_ms, gold_closed_ms)
    return _verdict(rows, hot.threshold, book, history, silver_version, closed_ms, reported_count(config),
                    open_paths)


def _alerts_frame(spark: SparkSession, book: AlertBook) -> DataFrame:
    rows = [(a.page_id, a.window_start, a.click_count, a.threshold) for a in book.latest.values()]
    return spark.createDataFrame(rows, "pageId string, windowStartText string, operationalCount long, alertThreshold long") \
        .withColumn("windowStart", F.try_to_timestamp("windowStartText", F.lit(ALERT_TIMESTAMP_FORMAT))) \
        .drop("windowStartText")


def _window_ledger(records: DataFrame, events: DataFrame, gold: DataFrame, alerts: DataFrame, window) -> DataFrame:
    """Per window, what each path counted and the records that account for the difference."""
    records = records.transform(assign_window, window)
    events = events.transform(assign_window, window)
    counted = records.where(F.col("fate") == "counted")
    silver_ids = events.select("eventId").distinct().withColumn("inSilver", F.lit(True))
    copies = records.groupBy("eventId").agg(
        *(F.max(F.col("fate") == fate).alias(f"any_{fate}") for fate in ("counted", "late", "maybe_late", "unknown"))
    )
    matched_keys = counted.select("eventId", *_WINDOW).distinct().withColumn("matched", F.lit(True))
    missing_cause = (
        F.when(F.col("matched"), None)
        .when(F.col("any_counted"), "dup")  # counted, but a copy in another window
        .when(F.col("any_unknown"), "unknown")
        .when(F.col("any_maybe_late"), "maybe_late")
        .when(F.col("any_late"), "late")
        .otherwise("unprocessed")
    )
    gold_side = (
        events.join(matched_keys, ["eventId", *_WINDOW], "left")
        .join(copies, "eventId", "left")
        .withColumn("missing", missing_cause)
        .groupBy(*_WINDOW)
        .agg(
            F.count(F.lit(1)).alias("silverCount"),
            F.count_if(F.col("matched")).alias("matchedCount"),
            *(F.count_if(F.col("missing") == name).alias(f"missing_{name}")
              for name in ("dup", "unknown", "maybe_late", "late", "unprocessed")),
        )
    )
    fast_side = (
        records.join(silver_ids, "eventId", "left")
        .groupBy(*_WINDOW)
        .agg(
            F.count_if(F.col("fate") == "counted").alias("derivedCount"),
            F.count_if(F.col("fate") == "maybe_late").alias("maybeLateCount"),
            F.count_if(F.col("fate") == "unknown").alias("unknownCount"),
            F.count_if((F.col("fate") == "counted") & F.col("inSilver").isNull()).alias("notInSilver"),
        )
    )
    gold_rows = gold.select(*_WINDOW, F.col("clickCount").alias("goldCount"), F.col("isHot").alias("goldHot"))
    alert_rows = alerts.where(F.col("windowStart").isNotNull())
    return (
        gold_rows.join(alert_rows, ["pageId", "windowStart"], "full")
        .withColumn("windowEnd", F.coalesce("windowEnd", F.col("windowStart") + F.expr(
            f"INTERVAL {int(window.total_seconds() * 1000)} MILLISECONDS")))
        .join(gold_side, _WINDOW, "left")
        .join(fast_side, _WINDOW, "left")
        .fillna(0, subset=["goldCount", "silverCount", "matchedCount", "derivedCount", "maybeLateCount",
                           "unknownCount", "notInSilver", "missing_dup", "missing_unknown", "missing_maybe_late",
                           "missing_late", "missing_unprocessed"])
        .fillna(False, subset=["goldHot"])
    )


def _verdict(rows: list, threshold: int, book: AlertBook, history: FastPathHistory, silver_version: int | None,
             closed_ms: int, reported: Callable[[int], int | None] = lambda count: count,
             open_paths: dict[str, str | None] | None = None) -> dict[str, Any]:
    compared = matched = outside_history = 0
    mismatches, pending = [], []
    for row in rows:
        if not row.closed:
            waits = [path for path, still in (("fast path", row.openInFastPath), ("gold", row.openInGold)) if still]
            pending.append({"pageId": row.pageId, "windowStart": row.windowStartText,
                            "operationalCount": row.operationalCount, "goldCount": row.goldCount,
                            "openIn": waits, "why": {path: (open_paths or {}).get(path) for path in waits}})
            continue
        if row.unknownCount or row.missing_unknown:
            outside_history += 1  # read in micro-batches whose log is purged: the data cannot tell
            continue
        compared += 1
        if row.operationalCount == reported(row.goldCount):
            matched += 1
            continue
        mismatches.append(_explain(row, threshold, reported))
    by_cause = Counter(m["cause"] for m in mismatches)
    unexplained = by_cause.get(UNEXPLAINED, 0)
    return {
        "windowsCompared": compared,
        "matched": matched,
        "pending": len(pending),
        "pendingWindows": pending,
        "mismatches": mismatches,
        "byCause": dict(sorted(by_cause.items())),
        "unexplained": unexplained,
        "consistent": unexplained == 0,
        "outsideHistory": outside_history,
        "alertRecords": book.records,
        "invalidAlertRecords": len(book.invalid),
        "invalidAlerts": [{"partition": p, "offset": o, "why": why} for p, o, why in book.invalid[:20]],
        "operational": {"batchesInHistory": history.batches, "firstBatch": history.first_batch},
        "gold": {"silverVersionRead": silver_version},
        "closedUpTo": datetime.fromtimestamp(closed_ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        if closed_ms > 0 else None,  # a watermark of 0 has seen no event
    }


def _explain(row, threshold: int, reported: Callable[[int], int | None] = lambda count: count) -> dict[str, Any]:
    """One disagreeing window: its single cause, and the records behind it."""
    extra_duplicates = row.derivedCount - row.matchedCount - row.notInSilver
    contributions = {
        "late_beyond_operational_watermark": row.missing_late + row.missing_maybe_late,
        "duplicate_beyond_operational_dedup_horizon": row.missing_dup + extra_duplicates,
        "not_processed_by_operational": row.missing_unprocessed,
        "not_processed_by_analytical": row.notInSilver,
        "late_beyond_analytical_watermark": max(row.silverCount - row.goldCount, 0),
    }
    low, high = row.derivedCount, row.derivedCount + row.maybeLateCount
    if row.operationalCount is None:
        reproduced = low <= (row.alertThreshold or threshold)
    else:
        reproduced = (reported(low) or 0) <= row.operationalCount <= (reported(high) or 0)
    reproduced = reproduced and row.goldCount <= row.silverCount and any(contributions.values())
    cause = max(contributions, key=lambda name: contributions[name]) if reproduced else UNEXPLAINED
    return {
        "pageId": row.pageId,
        "windowStart": row.windowStartText,
        "operationalCount": row.operationalCount,
        "goldCount": row.goldCount,
        "cause": cause,
        "records": {name: count for name, count in contributions.items() if count},
        "derivedOperationalCount": low if low == high else [low, high],
    }

