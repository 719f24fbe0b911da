"""`gold/user_sessions`: one row per visit of a known user, ended by inactivity, final when written.

  silver/clicks (Delta stream) -> events with a userId -> watermark on eventTime
  -> per user, Spark's session window with a gap per event (`session_gap`) -> the session's figures
  -> written once the watermark has passed the session's end (append output mode)

A session is the analysts' unit of a visit (GA4 and Snowplow model it the same way): a user's events
chained while each follows the one before within the gap of that earlier event, `sessions.gap`, or
`sessions.gap_by_event_type` for its type. Spark's `session_window` takes the gap per row: each event
opens the interval [eventTime, eventTime + its gap], intervals of a user that overlap or touch merge,
and the session ends where the latest of its intervals does: an event exactly at that end still joins
the session, an event later than that starts a new one.

A user's sessions that the state held open when `lakehouse forget` erased the user are not written when they
close (analytical.erasure_requests). Silver holds each event once, so a copy is never counted twice; an event without a userId cannot be
sessionized and is left out (`anonymous_events` observes how many each batch read). The watermark is
`analytical.watermark`, as gold's: a late event within it still joins or extends its session, and a
session is written only when no event within the watermark can change it, so a row here is final. A
backfill and a live run therefore write the same rows. A session is written once, so each batch's are
appended, once per batch (a Txn): a replayed batch adds nothing, and a live batch writes only its own
sessions, however many the table holds of the minutes they started in.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType, TimestampType

from analytical import gold_page_conversion, silver_clicks
from analytical.erasure_requests import requests_under, without_forgotten
from analytical.gold_page_conversion import LAST_PURCHASE_AT, VISITS
from analytical.quality import (FAILED_EXPECTATION, Suite, between, equal, metrics_name, not_null, passing, unique,
                                with_expectations)
from analytical.tables import Table
from analytical.writes import Prune, append, batch_txns, cached
from shared.config import Config, SessionsConfig
from shared.durations import spark_interval
from shared.rule import with_event_time_watermark
from shared.schema import EventType
from shared.storage import checkpoint_location

PRUNE = Prune("sessionStart", "sessionStart")
#: What each batch observes of the events it reads: those of known users and the anonymous ones.
SESSION_METRICS = "user_sessions_events"

#: The order of a session's events: by eventTime, ties broken by eventId (one landing page, one exit page).
_ORDER = ("eventTime", "eventId")


def event_type_or_default(events: DataFrame) -> DataFrame:
    """eventType as the contract reads it: a null (a silver row written before the column) is a page view."""
    return events.withColumn("eventType", F.coalesce(F.col("eventType"), F.lit(EventType.PAGE_VIEW.value)))


def session_gap(sessions: SessionsConfig) -> Column:
    """The inactivity gap after each event, as Spark's interval text: per its type, else the default.

        gap 30 minutes, {purchase: 5 minutes} -> '5 minutes' for a purchase, '30 minutes' otherwise
    """
    gap: Column | None = None
    for event_type, duration in sessions.gap_by_event_type.items():
        matches = F.col("eventType") == F.lit(event_type)
        gap = F.when(matches, F.lit(spark_interval(duration))) if gap is None else \
            gap.when(matches, F.lit(spark_interval(duration)))
    default = F.lit(spark_interval(sessions.gap))
    return default if gap is None else gap.otherwise(default)


def _count(event_type: EventType) -> Column:
    return F.count_if(F.col("eventType") == F.lit(event_type.value))


def user_sessions(events: DataFrame, sessions: SessionsConfig) -> DataFrame:
    """Events of known users (eventId, pageId, eventTime, userId, eventType) -> one row per session, in
    the table's columns (`sessions_with_visits`, without what the conversion takes of it)."""
    return events.transform(sessions_with_visits, sessions).drop(VISITS, LAST_PURCHASE_AT)


def sessions_with_visits(events: DataFrame, sessions: SessionsConfig) -> DataFrame:
    """Events of known users (eventId, pageId, eventTime, userId, eventType) -> one row per session, with
    VISITS and LAST_PURCHASE_AT.

    sessionStart is its first event's time, sessionEnd when it closed (the latest of its events' time
    plus gap), lastEventTime its last event's.

        u1: /a view 10:00:00, /b add_to_cart 10:00:20, /b purchase 10:01:00 (gap 30 minutes)
        -> u1, 10:00:00, 10:31:00, 10:01:00, events 3, pages 2, landing /a, exit /b, page views 1,
           add-to-carts 1, purchases 1, converted, engaged
    """
    engaged_after_s = sessions.engaged_after.total_seconds()
    duration_s = (F.unix_micros("lastEventTime") - F.unix_micros("sessionStart")) / 1_000_000
    return (
        events.transform(event_type_or_default)
        .groupBy("userId", F.session_window("eventTime", session_gap(sessions)).alias("session"))
        .agg(
            F.min("eventTime").alias("sessionStart"),
            F.max("eventTime").alias("lastEventTime"),
            F.count(F.lit(1)).alias("events"),
            F.collect_list(F.struct("eventTime", "pageId")).alias(VISITS),
            F.max(F.when(F.col("eventType") == F.lit(EventType.PURCHASE.value), F.col("eventTime"))).alias(LAST_PURCHASE_AT),
            F.min_by("pageId", F.struct(*_ORDER)).alias("landingPage"),
            F.max_by("pageId", F.struct(*_ORDER)).alias("exitPage"),
            _count(EventType.PAGE_VIEW).alias("pageViews"),
            _count(EventType.ADD_TO_CART).alias("addToCarts"),
            _count(EventType.PURCHASE).alias("purchases"),
        )
        .select(
            "userId", "sessionStart", F.col("session.end").alias("sessionEnd"), "lastEventTime", "events",
            F.size(F.array_distinct(F.transform(VISITS, lambda visit: visit["pageId"]))).cast("long").alias("pages"),
            "landingPage", "exitPage", "pageViews", "addToCarts", "purchases",
            (F.col("purchases") > 0).alias("converted"),
            F.coalesce((duration_s > F.lit(engaged_after_s)) | (F.col("pageViews") >= sessions.engaged_page_views)
                       | (F.col("purchases") > 0), F.lit(False)).alias("engaged"),
            VISITS, LAST_PURCHASE_AT,
        )
    )


def known_users(events: DataFrame) -> DataFrame:
    """The events with a userId, the only ones a session can hold; how many had none is observed."""
    anonymous = F.col("userId").isNull()
    return (events.observe(SESSION_METRICS, F.count_if(~anonymous).alias("known_user_events"),
                           F.count_if(anonymous).alias("anonymous_events"))
            .where(~anonymous))


def read_events(spark: SparkSession, config: Config, source_root: str) -> DataFrame:
    """silver/clicks under `source_root` as a stream of the events sessions are made of, under the
    analytical watermark."""
    return (
        silver_clicks.TABLE.at(source_root).read_stream(spark, config)
        .select("eventId", "pageId", "eventTime", "userId", "eventType")
        .transform(with_event_time_watermark, config.analytical.watermark)
    )


def writer(spark: SparkSession, config: Config, source_root: str, target_root: str) -> DataStreamWriter:
    """silver/clicks under `source_root` -> gold/user_sessions and gold/page_conversion under `target_root`
    (the hot windows from gold/page_clicks_5s under `source_root`).

    Each batch's sessions are checked against the suite as they stream, then written over gold/user_sessions
    and added to gold/page_conversion, each once per batch."""
    policy = TABLE.expectation_policy(config)
    rows = (read_events(spark, config, source_root).transform(known_users)
            .transform(sessions_with_visits, config.sessions)
            .transform(with_expectations, TABLE.suite(config), policy, metrics_name(TABLE.key)))
    sessions_path = TABLE.at(target_root).create(spark, rows.drop(VISITS, LAST_PURCHASE_AT, FAILED_EXPECTATION).schema)
    conversion_path = gold_page_conversion.TABLE.at(target_root).create(spark, gold_page_conversion.TABLE.schema)
    txn_of = batch_txns(spark, checkpoint_location(target_root, STREAM.name))

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        txn = txn_of(batch_id)
        written = passing(batch, policy)
        if (requests := requests_under(spark, target_root)) is not None:  # sessions held open across an erasure
            written = written.transform(without_forgotten, requests, "sessionStart")
        with cached(written) as sessions:
            append(sessions.drop(VISITS, LAST_PURCHASE_AT), sessions_path, PRUNE, txn)
            gold_page_conversion.add_sessions(sessions, config, source_root, conversion_path, txn)

    return rows.writeStream.outputMode("append").foreachBatch(write_batch)


def suite(config: Config) -> Suite:
    """Sane sessions as they are written; one row per user and start across the table."""
    return Suite(
        on_write=(
            not_null("userId"),
            not_null("sessionStart"),
            between("eventsPositive", "events", min_value=1),
            between("pagesWithinEvents", "pagesOverEvents", max_value=0),
            between("typedWithinEvents", "typedOverEvents", max_value=0),
            between("endAfterLastEvent", "secondsFromLastEventToEnd", min_value=0),
            equal("convertedIsAPurchase", "converted", "hasPurchase"),
        ),
        on_table=(unique("onePerUserAndStart", "userId", "sessionStart"),),
        derive=lambda rows: rows.withColumn("pagesOverEvents", F.col("pages") - F.col("events"))
        .withColumn("typedOverEvents", F.col("pageViews") + F.col("addToCarts") + F.col("purchases") - F.col("events"))
        .withColumn("secondsFromLastEventToEnd",
                    (F.unix_micros("sessionEnd") - F.unix_micros("lastEventTime")) / 1_000_000)
        .withColumn("hasPurchase", F.col("purchases") > 0),
    )


TABLE = Table(
    "gold/user_sessions",
    StructType([
        StructField("userId", StringType()),
        StructField("sessionStart", TimestampType()),
        StructField("sessionEnd", TimestampType()),
        StructField("lastEventTime", TimestampType()),
        StructField("events", LongType(), nullable=False),
        StructField("pages", LongType(), nullable=False),
        StructField("landingPage", StringType()),
        StructField("exitPage", StringType()),
        StructField("pageViews", LongType(), nullable=False),
        StructField("addToCarts", LongType(), nullable=False),
        StructField("purchases", LongType(), nullable=False),
        StructField("converted", BooleanType(), nullable=False),
        StructField("engaged", BooleanType(), nullable=False),
    ]),
    stats_columns=("sessionStart", "sessionEnd"),
    z_order=("sessionStart",),
    expectations=suite,
    policy="fail",
    user_of_row=lambda: F.col("userId"),
    rows_of_users=lambda user_ids: F.col("userId").isin(list(user_ids)),
)
STREAM = TABLE.stream(writer, reads=(silver_clicks.TABLE,), enabled=lambda config: config.sessions.enabled,
                      also_writes=(gold_page_conversion.TABLE,))
