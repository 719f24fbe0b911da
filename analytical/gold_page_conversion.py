"""`gold/page_conversion`: per page, hour and whether the page was hot, the sessions that viewed it and
those of them that purchased after: the question the hot-page alerts exist for, one small table.

  the sessions a batch of gold_user_sessions writes (their events' pages and times, their last purchase)
  -> per session and page: its first event on the page, and whether a purchase came at or after it
  -> that event's 5-second window in gold/page_clicks_5s: hot or not
  -> per page, hour of that first view and hot or not: sessions, converted sessions
  -> added to the table's counts, once per batch (analytical.writes.upsert with a Txn)

A session "viewed" a page when it has an event on it (any type: a purchase on a page is on it); it
counts once per page, in the hour of its first event there, and under `viewedWhileHot` as gold marks
that event's window. It "converted" from the page when it holds a purchase at or after that first view.
The conversion rate is `convertedSessions / sessions`; a day's, or hot against not, is a sum over the
table's rows, which stay as many as pages x hours x 2 however many sessions there are.

A session is final when written (gold/user_sessions), and its first views lie before its end, past
which the medallion's watermark has moved: gold's window is closed by then, except for a click late by
more than the batch between the two streams, which could still raise a window to hot after the session
was counted under not hot.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType, TimestampType

from analytical import gold_page_clicks_5s
from analytical.quality import Suite, between, not_null, unique
from analytical.tables import Table
from analytical.writes import Prune, Txn, counts_added, upsert
from shared.config import Config
from shared.durations import spark_interval
from shared.rule import assign_window

KEYS = ("pageId", "hourStart", "viewedWhileHot")
PRUNE = Prune("hourStart", "hourStart")
#: What the table takes of a session beside its keys (analytical.gold_user_sessions adds them): its events'
#: (eventTime, pageId), and its last purchase's time.
VISITS, LAST_PURCHASE_AT = "_visits", "_lastPurchaseAt"


def first_views(sessions: DataFrame) -> DataFrame:
    """Sessions with VISITS and LAST_PURCHASE_AT -> userId, sessionStart, pageId, firstViewAt, converted:
    one row per session and page it viewed.

        u1's session: /a at 10:00, /b at 10:01, /a at 10:02, a purchase at 10:01:30
        -> (/a, 10:00, converted), (/b, 10:01, converted)
    """
    visit = F.col("visit")
    return (
        sessions.select("userId", "sessionStart", LAST_PURCHASE_AT, F.explode(VISITS).alias("visit"))
        .groupBy("userId", "sessionStart", visit["pageId"].alias("pageId"))
        .agg(F.min(visit["eventTime"]).alias("firstViewAt"), F.max(LAST_PURCHASE_AT).alias(LAST_PURCHASE_AT))
        .select("userId", "sessionStart", "pageId", "firstViewAt",
                F.coalesce(F.col(LAST_PURCHASE_AT) >= F.col("firstViewAt"), F.lit(False)).alias("converted"))
    )


def while_hot(views: DataFrame, windows: DataFrame, config: Config) -> DataFrame:
    """First views with viewedWhileHot: whether gold marks the 5-second window of each view hot (a window
    gold does not hold counts as not)."""
    hot = windows.select("pageId", "windowStart", "isHot")
    return (views.withColumn("eventTime", F.col("firstViewAt")).transform(assign_window, config.hot_pages.window)
            .join(hot, ["pageId", "windowStart"], "left")
            .withColumn("viewedWhileHot", F.coalesce(F.col("isHot"), F.lit(False)))
            .drop("eventTime", "windowStart", "windowEnd", "isHot"))


def page_conversion(views: DataFrame) -> DataFrame:
    """First views with viewedWhileHot -> pageId, hourStart, viewedWhileHot, sessions, convertedSessions."""
    return (views.groupBy("pageId", F.date_trunc("hour", "firstViewAt").alias("hourStart"), "viewedWhileHot")
            .agg(F.count(F.lit(1)).alias("sessions"), F.count_if("converted").alias("convertedSessions")))


def add_sessions(sessions: DataFrame, config: Config, windows_root: str, path: str, txn: Txn) -> None:
    """Add a batch of written sessions (with VISITS and LAST_PURCHASE_AT) to the table at `path`, once per
    `txn`; the hot windows from gold/page_clicks_5s under `windows_root`, read in the views' range only."""
    spark = sessions.sparkSession
    # every first view lies within its session: the sessions' own bounds, without exploding them twice
    bounds = sessions.agg(F.min("sessionStart"), F.max("lastEventTime")).first()
    if bounds[0] is None:
        return
    views = sessions.transform(first_views)
    window = F.expr(f"INTERVAL {spark_interval(config.hot_pages.window)}")
    windows = gold_page_clicks_5s.TABLE.at(windows_root).read(spark).where(
        F.col("windowStart").between(F.lit(bounds[0]) - window, F.lit(bounds[1])))
    counts = views.transform(while_hot, windows, config).transform(page_conversion)
    upsert(counts, path, KEYS, PRUNE, txn=txn,
           combine=lambda held, batch: counts_added(held, batch, KEYS, ("sessions", "convertedSessions")))


def suite(config: Config) -> Suite:
    """Counts that can be rates: at least one session, no more converted than viewed; one row per cell."""
    return Suite(
        on_write=(
            not_null("pageId"),
            not_null("hourStart"),
            between("sessionsPositive", "sessions", min_value=1),
            between("convertedWithinSessions", "convertedOverSessions", max_value=0),
        ),
        on_table=(unique("onePerPageHourAndHot", *KEYS),),
        derive=lambda rows: rows.withColumn("convertedOverSessions", F.col("convertedSessions") - F.col("sessions")),
    )


TABLE = Table(
    "gold/page_conversion",
    StructType([
        StructField("pageId", StringType()),
        StructField("hourStart", TimestampType()),
        StructField("viewedWhileHot", BooleanType(), nullable=False),
        StructField("sessions", LongType(), nullable=False),
        StructField("convertedSessions", LongType(), nullable=False),
    ]),
    z_order=("hourStart",),
    expectations=suite,
)
