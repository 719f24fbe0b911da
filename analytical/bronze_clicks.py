"""`bronze/clicks`: every Kafka record of the clicks topic exactly as it came, append-only.

The raw key and value bytes are kept (not decoded), so a non-UTF-8 or otherwise malformed payload
survives, and so does any field a newer producer adds: bronze is what silver and gold are rebuilt
from. Kafka's coordinates (topic, partition, offset), its timestamp and headers come along, and
the time the record was ingested.

Partitioned by `ingestDate`, the UTC day the record landed: every micro-batch writes into one
partition (event time would scatter late events into old partitions and cannot be read from an
invalid record at all), and retention or a re-ingest of a day works on whole partitions. Silver
streams the table in commit order and never needs to prune it.

Exactly once: the medallion's query (analytical.medallion) lands each micro-batch first, as a write
made once (analytical.writes.Txn: its query's id, the batch id): a batch replayed after a failure of a
later layer finds its commit and lands nothing again.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from operator import or_

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DateType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from analytical.tables import Table
from analytical.writes import Txn
from shared.config import Config
from shared.kafka import read_clicks_stream

#: The Kafka timestamp's column here (a Kafka source calls it `timestamp`).
KAFKA_TIMESTAMP = "kafkaTimestamp"

TABLE = Table(
    "bronze/clicks",
    StructType([
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField(KAFKA_TIMESTAMP, TimestampType()),
        StructField("kafkaTimestampType", IntegerType()),
        StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                     StructField("value", BinaryType())]))),
        StructField("ingestTime", TimestampType(), nullable=False),
        StructField("ingestDate", DateType(), nullable=False),
    ]),
    partition_by=("ingestDate",),
    stats_columns=("partition", "offset", KAFKA_TIMESTAMP, "ingestTime"),
    user_of_row=lambda: record_user_id("value"),
    rows_of_users=lambda user_ids: may_name("value", user_ids),
)

#: In bytes that are not JSON, the text of the first `"userId":"..."` (JSON's escapes kept as written).
_USER_ID_IN_TEXT = r'"userId"\s*:\s*"((?:[^"\\]|\\.)*)"'


def record_user_id(value: str) -> Column:
    """The user a raw record's bytes (column `value`) name: its JSON's `userId` (a number as its text), or,
    in bytes that do not parse as JSON, the string after its first `"userId":`. A record the parsing
    rejects is still its user's: bronze and the quarantine erase it with the valid ones.

        {"eventId":"e1","pageId":"/a","eventTime":"...","userId":"u1"}   -> u1
        {"eventId":"e2","userId":"u1","pageId":                            -> u1 (truncated: not JSON)
        {"eventId":"e3","pageId":"/a","eventTime":"..."}                  -> null
    """
    text = F.col(value).cast("string")
    in_text = F.regexp_extract(text, _USER_ID_IN_TEXT, 1)
    return F.coalesce(F.get_json_object(text, "$.userId"),
                      F.when(F.get_json_object(text, "$").isNull() & (in_text != ""), in_text))


def may_name(value: str, user_ids: Sequence[str]) -> Column:
    r"""Whether a raw record's bytes (column `value`) may name one of `user_ids` (`record_user_id`), found
    without parsing them: they hold an id as written, or a backslash (JSON may spell an id with escapes),
    or no `"userId":"` (a userId spaced out, a number, or none). Every record of the users passes, and few
    others: `record_user_id` decides on those, where parsing every record would cost three times as much.

        {"eventId":"e1","userId":"u1",...}, ["u1"] -> true;  ["u2"] -> false
        {"eventId":"e2","userId":"\u0075\u0031",...}, ["u2"] -> true (escapes: parsed to tell)
    """
    text = F.col(value).cast("string")  # the bytes as they are, not decoded: a search, not a parse
    spelled = [text.contains(F.lit(user_id)) for user_id in user_ids]
    return reduce(or_, spelled, text.contains(F.lit("\\")) | ~text.contains(F.lit('"userId":"')))


def to_bronze(records: DataFrame) -> DataFrame:
    """Kafka source rows -> bronze rows: raw bytes, coordinates, Kafka timestamp, ingest time."""
    return records.select(
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias(KAFKA_TIMESTAMP),
        F.col("timestampType").alias("kafkaTimestampType"),
        "headers",
        F.current_timestamp().alias("ingestTime"),
    ).withColumn("ingestDate", F.to_date("ingestTime"))


def read_kafka(spark: SparkSession, config: Config) -> DataFrame:
    """The clicks topic as a stream of bronze rows."""
    return read_clicks_stream(spark, config.kafka, config.analytical, headers=True).transform(to_bronze)


def read_bronze(spark: SparkSession, config: Config, root: str) -> DataFrame:
    """bronze/clicks under `root` as a stream of its rows, in commit order: what a rebuild reads."""
    return TABLE.at(root).read_stream(spark, config)


def land(rows: DataFrame, path: str, txn: Txn) -> None:
    """Append a micro-batch's rows (bronze's columns, and others it drops) to the table at `path`, once per `txn`."""
    txn.save(rows.sparkSession, rows.select(*TABLE.schema.fieldNames()).write.format("delta").mode("append")
             .partitionBy(*TABLE.partition_by), path)
