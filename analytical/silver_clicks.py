"""`silver/clicks` and `silver/quarantine`: each record parsed once, split into clean events and the rest.

  a micro-batch of records (analytical.medallion) -> shared parsing
      -> valid:   de-duplicated by eventId -> silver/clicks (and what is new there, to gold)
      -> invalid: raw bytes + reason       -> silver/quarantine

`silver/clicks` holds each valid event once, typed, with the Kafka coordinates and timestamp of
its first copy (the earliest by Kafka timestamp, partition and offset). Two records are the same event when they share an
eventId and their event times lie within `analytical.watermark` of each other: a retry re-sends
the same event, so its copies carry the same eventTime however far apart they arrive, and the
horizon is event time, not arrival. Within one micro-batch the shared rule's batch de-duplication
keeps one row per eventId outright, so only two different events that reuse an eventId more than
the watermark apart can come out differently depending on how bronze was split into batches.

`silver/quarantine` holds every record the parsing rejects, with its raw key and value and the
InvalidReason: nothing that reached Kafka is dropped on the way to silver.

The medallion checks `suite`'s expectations on each valid event under its policy (declared `drop`;
`quality.policies.silver_clicks` overrides it; analytical.quality): under `drop`, an event that
breaks one goes to the quarantine with reason `failed_expectation` instead of silver/clicks.

Both are appended to once per micro-batch (analytical.writes.Txn): silver/clicks with the events it does
not hold yet (analytical.writes.new_rows), the quarantine with the batch's invalid records, which no other
batch of the query holds (a record's Kafka offset, or bronze's file, is read by one batch), so only a
replay of the same batch could repeat them. The events new to silver are found against silver as it was
before the batch's own write, so a batch replayed after a failure of a later layer hands gold the same
events again.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from analytical.quality import (
    FAILED_EXPECTATION,
    Suite,
    between,
    in_set,
    length_between,
    metrics_name,
    not_null,
    unique,
    with_expectations,
)
from analytical import bronze_clicks
from analytical.bronze_clicks import KAFKA_TIMESTAMP
from analytical.tables import Table
from analytical.writes import Prune, Txn, append, new_rows, version_before
from shared.config import Config
from shared.durations import spark_interval
from shared.parsing import EVENT_COLUMNS, invalid_clicks, parse_clicks, valid_clicks
from shared.rule import dedupe_clicks, same_event
from shared.schema import EVENT_SCHEMA, MAX_PAGE_ID_LENGTH, InvalidReason

KAFKA_COORDINATES = ["topic", "partition", "offset", KAFKA_TIMESTAMP, "ingestTime"]
#: The Kafka coordinates' columns as bronze declares them.
_COORDINATE_FIELDS = [field for field in bronze_clicks.TABLE.schema.fields if field.name in KAFKA_COORDINATES]
#: Of the copies of an event in one micro-batch, silver keeps the one Kafka took first.
FIRST_COPY = ("kafkaTimestamp", "partition", "offset")


def suite(config: Config) -> Suite:
    """What every row of silver/clicks must satisfy; the eventIds must be unique across the table.

    The shared parsing already bounds the event time by the Kafka timestamp, so the first six hold
    for every row a stream writes under today's config; `lakehouse check` still tells when a table
    written under other bounds breaks them. eventTimeNotAheadOfIngest is what the parsing cannot
    check: on a topic with CreateTime timestamps the Kafka timestamp is the producer's clock, and
    the time bronze ingested the record is the lakehouse's own.
    """
    ahead = (F.unix_micros("eventTime") - F.unix_micros(KAFKA_TIMESTAMP)) / 1_000_000
    ahead_of_ingest = (F.unix_micros("eventTime") - F.unix_micros("ingestTime")) / 1_000_000
    quality = config.quality
    skew_seconds = quality.max_clock_skew.total_seconds()
    return Suite(
        on_write=(
            not_null("eventId"),
            not_null("pageId"),
            not_null("eventTime"),
            length_between("pageIdLength", "pageId", 1, MAX_PAGE_ID_LENGTH),
            between("eventTimeNotBeforeEarliest", "eventTime", min_value=quality.earliest_event_time),
            between("eventTimeNotAheadOfKafka", "eventSecondsAheadOfKafka", max_value=skew_seconds),
            between("eventTimeNotAheadOfIngest", "eventSecondsAheadOfIngest", max_value=skew_seconds),
        ),
        on_table=(unique("eventIdUnique", "eventId"),),
        derive=lambda rows: rows.withColumn("eventSecondsAheadOfKafka", ahead)
        .withColumn("eventSecondsAheadOfIngest", ahead_of_ingest),
    )


def quarantine_suite(config: Config) -> Suite:
    """Every quarantined record has a reason from the documented set and its Kafka coordinates."""
    return Suite(
        on_write=(
            not_null("reason"),
            in_set("reasonDocumented", "reason", [reason.value for reason in InvalidReason]),
            not_null("offset"),
        ),
        on_table=(unique("oneRowPerRecord", "topic", "partition", "offset"),),
    )


def with_silver_expectations(parsed: DataFrame, config: Config) -> DataFrame:
    """Check the valid events as the stream reads them; under `drop`, make the failing ones invalid."""
    policy = TABLE.expectation_policy(config)
    checked = parsed.transform(with_expectations, TABLE.suite(config), policy, metrics_name(TABLE.key),
                               applies=F.col("invalidReason").isNull())
    if policy != "drop":
        return checked.drop(FAILED_EXPECTATION)
    return checked.withColumn(
        "invalidReason",
        F.when(F.col(FAILED_EXPECTATION).isNotNull(), F.lit(InvalidReason.FAILED_EXPECTATION.value))
        .otherwise(F.col("invalidReason")),
    ).drop(FAILED_EXPECTATION)


def silver_clicks(parsed: DataFrame) -> DataFrame:
    """The valid events of parsed bronze rows, typed, with their Kafka coordinates."""
    return parsed.transform(valid_clicks).select(*EVENT_COLUMNS, *KAFKA_COORDINATES)


def quarantined(parsed: DataFrame) -> DataFrame:
    """The invalid records of parsed bronze rows: raw key and value, reason, Kafka coordinates."""
    return parsed.transform(invalid_clicks).select(
        "key", "value", F.col("invalidReason").alias("reason"), *KAFKA_COORDINATES
    )


def written_parts(parsed: DataFrame) -> DataFrame:
    """What the two tables take of parsed bronze rows: the event's columns, the coordinates and the
    reason of every row, and the raw key and value of the invalid ones only (null on a valid row).

    A rebuild caches a micro-batch of bronze as these for its writes: a valid record's raw bytes (its
    columns hold them) and its headers would be most of that cache, and neither table keeps them.
    """
    invalid = F.col("invalidReason").isNotNull()
    return parsed.select(*EVENT_COLUMNS, *KAFKA_COORDINATES, "invalidReason",
                         *(F.when(invalid, F.col(raw)).alias(raw) for raw in ("key", "value")))


def parsed(records: DataFrame, config: Config) -> DataFrame:
    """Bronze rows parsed (shared.parsing) and checked against silver's expectations."""
    return records.transform(parse_clicks, config.quality, KAFKA_TIMESTAMP).transform(with_silver_expectations, config)


def create(spark: SparkSession, rows: DataFrame, root: str) -> tuple[str, str]:
    """Both tables under `root`, created unless there, for parsed rows; their paths."""
    return (TABLE.at(root).create(spark, rows.transform(silver_clicks).schema),
            QUARANTINE.at(root).create(spark, rows.transform(quarantined).schema))


def _prune(watermark: timedelta) -> Prune:
    """Where an event's earlier copies can be in silver/clicks: within the watermark of its event time."""
    return Prune("eventTime", "eventTime", spark_interval(watermark))


def new_events(rows: DataFrame, clicks_path: str, watermark: timedelta, txn: Txn) -> DataFrame:
    """The events of a micro-batch of parsed rows that silver/clicks did not hold before the batch's own
    write (`txn`), one row each, in its columns: what the batch adds to silver, and gold counts.

    Found against the table's version before that write, so evaluated again, after the write or in a
    replay of the batch, it gives the same events."""
    spark = rows.sparkSession
    valid = rows.transform(silver_clicks)
    events = valid.transform(dedupe_clicks, watermark, FIRST_COPY)
    before = spark.read.format("delta").option(
        "versionAsOf", version_before(spark, clicks_path, txn)).load(clicks_path)
    new = new_rows(events, before, ("eventId",), same_event(watermark), _prune(watermark), bounds_from=valid)
    return before.limit(0) if new is None else new


def write_batch(rows: DataFrame, new: DataFrame, clicks_path: str, quarantine_path: str, watermark: timedelta,
                txn: Txn) -> None:
    """A micro-batch of parsed rows into both tables, safe to replay: its `new_events` to silver/clicks
    and its invalid records, if any, to the quarantine, each once per `txn`."""
    append(new, clicks_path, _prune(watermark), txn)
    invalid = rows.transform(quarantined)
    if not invalid.isEmpty():  # no commit for a batch without one
        append(invalid, quarantine_path, Prune("offset", "offset"), txn)


TABLE = Table(
    "silver/clicks",
    # The event's fields, nullable as the parsed columns are (the parsing, not the schema, keeps
    # nulls out of silver), then the coordinates of the record's first copy.
    StructType([*(StructField(field.name, field.dataType) for field in EVENT_SCHEMA.fields), *_COORDINATE_FIELDS]),
    stats_columns=("eventTime", "pageId", KAFKA_TIMESTAMP),
    z_order=("eventTime",),  # the MERGE finds an event's copies by an eventTime range
    expectations=suite,
    policy="drop",
    user_of_row=lambda: F.col("userId"),
    rows_of_users=lambda user_ids: F.col("userId").isin(list(user_ids)),
)
QUARANTINE = Table(
    "silver/quarantine",
    StructType([
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("reason", StringType()),
        *_COORDINATE_FIELDS,
    ]),
    stats_columns=("offset", KAFKA_TIMESTAMP, "ingestTime"),
    expectations=quarantine_suite,
    user_of_row=lambda: bronze_clicks.record_user_id("value"),
    rows_of_users=lambda user_ids: bronze_clicks.may_name("value", user_ids),
)
