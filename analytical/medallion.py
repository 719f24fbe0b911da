"""The medallion's query: each micro-batch of the clicks topic read once and written to every layer.

  Kafka -> parse, silver's expectations, event-time watermark, arrival times observed
        -> per micro-batch, cached once: bronze/clicks (landed first, once per batch)
                                         -> silver/clicks + silver/quarantine (the events new to silver)
                                         -> gold/page_clicks_5s (those events' counts added, once per batch)

The records of a user being erased, or erased after the topic took them, land in no table; gold counts
them, as it keeps the counts of rows an erasure deleted (analytical.erasure). A batch waits before bronze
and before silver while an erasure deletes (analytical.erasure_hold).

One read and one checkpoint where three streams read each record three times (Kafka, bronze's Parquet,
silver's) and kept three checkpoints. Every write is safe to replay: a batch that fails after bronze
landed (a later layer's error, a kill) is run again from the checkpoint, and each table takes what it
lacks of it and nothing twice (analytical.writes). gold/page_clicks_hourly follows gold's changes in a
stream of its own.

`REBUILD` is the same query over bronze instead of Kafka, without the landing: what `lakehouse rebuild`
runs (analytical.pipeline) to recompute silver and gold from the source of truth.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from analytical import bronze_clicks, gold_page_clicks_5s, silver_clicks
from analytical.erasure_hold import ErasureHold
from analytical.erasure_requests import requests_under, without_erased
from analytical.tables import Table
from analytical.writes import batch_txns, cached, refuse_writes_of_another
from shared.checkpoints import batch_watermark_ms
from shared.config import Config
from shared.durations import spark_interval
from shared.progress import echo
from shared.query_progress import BATCH_OBSERVATIONS
from shared.storage import checkpoint_location
from shared.stream import Stream

#: The column the watermark follows: a valid event's time, null on an invalid record (Spark's watermark
#: takes the newest time it sees, so a record the parsing rejected can never move it).
EVENT_TIME_OF_VALID = "validEventTime"


def watermarked(parsed: DataFrame, config: Config) -> DataFrame:
    """Parsed rows under the analytical watermark on their valid events' time, with their Kafka append
    times observed (gold's freshness: gold_page_clicks_5s.observe_arrivals)."""
    valid = F.col("invalidReason").isNull()
    return (parsed.withColumn(EVENT_TIME_OF_VALID, F.when(valid, F.col("eventTime")))
            .withWatermark(EVENT_TIME_OF_VALID, spark_interval(config.analytical.watermark))
            .transform(gold_page_clicks_5s.observe_arrivals, valid))


def without_erased_records(rows: DataFrame, requests: DataFrame, table: Table) -> DataFrame:
    """A batch's rows for `table` without the records of users being erased, or erased after the topic
    took them (`without_erased`): `lakehouse forget` deletes what landed before its request and waits
    only for the batch then running, not for the query to read every record the topic held."""
    return without_erased(rows, requests, table.user_of_row(), bronze_clicks.KAFKA_TIMESTAMP)


def refuse_records_of_another_query(spark: SparkSession, path: str, query: str, checkpoint: str) -> None:
    """The query's first batch lands records only in an empty bronze or its own: a new checkpoint would read
    the topic from its start again and land every record it still holds a second time."""
    refuse_writes_of_another(
        spark, path, query,
        f"{bronze_clicks.TABLE} holds records that the query of the checkpoint {checkpoint} did not land, "
        "so reading the topic again would land them twice: restore that checkpoint, or start a new lake "
        "(another storage.root)")


def _writer(read: Callable[[SparkSession, Config, str], DataFrame], stream_name: str,
            land: bool) -> Callable[[SparkSession, Config, str, str], DataStreamWriter]:
    """A medallion writer from `read(spark, config, source root)`'s bronze rows: landed in bronze when `land`."""

    def writer(spark: SparkSession, config: Config, source_root: str, target_root: str) -> DataStreamWriter:
        records = read(spark, config, source_root)
        rows = records.transform(silver_clicks.parsed, config).transform(watermarked, config)
        bronze = bronze_clicks.TABLE.at(target_root).create(spark, records.schema) if land else None
        clicks, quarantine = silver_clicks.create(spark, rows, target_root)
        gold = gold_page_clicks_5s.TABLE.at(target_root).create(
            spark, rows.transform(silver_clicks.silver_clicks).transform(gold_page_clicks_5s.page_clicks_5s,
                                                                         config.hot_pages).schema)
        checkpoint = checkpoint_location(target_root, stream_name)
        txn_of = batch_txns(spark, checkpoint)
        hold = ErasureHold.under(target_root, config.storage.s3) if land else None

        def erasure_requests(batch_id: int, read: DataFrame | None = None) -> DataFrame | None:
            """The requests once no erasure holds the batch (analytical.erasure_hold): those of the erasure
            that held it are then read. `read`, when given, stands unless the batch held."""
            held = hold.wait_while_placed(batch_id, echo) if hold is not None else 0.0
            return requests_under(spark, target_root) if land and (read is None or held) else read

        def write_batch(batch: DataFrame, batch_id: int) -> None:
            txn = txn_of(batch_id)
            if batch_id == 0:
                if bronze is not None:
                    refuse_records_of_another_query(spark, bronze, txn.app_id, checkpoint)
                gold_page_clicks_5s.refuse_counts_of_another_query(spark, gold, txn.app_id, checkpoint)
            watermark = config.analytical.watermark
            erased = erasure_requests(batch_id)  # read again each batch: a new request

            def kept(rows: DataFrame, table: Table) -> DataFrame:  # what `table` may hold of `rows`
                return rows if erased is None else rows.transform(without_erased_records, erased, table)

            with cached(batch if land else batch.transform(silver_clicks.written_parts)) as rows:
                if bronze is not None:
                    bronze_clicks.land(kept(rows, bronze_clicks.TABLE), bronze, txn)
                    erased = erasure_requests(batch_id, erased)
                with cached(silver_clicks.new_events(rows, clicks, watermark, txn)) as new:
                    silver_clicks.write_batch(kept(rows, bronze_clicks.TABLE),
                                              kept(new, silver_clicks.TABLE), clicks, quarantine, watermark, txn)
                    if hold is not None:
                        hold.answer_if_placed(batch_id)
                    observed = gold_page_clicks_5s.add_clicks(new, gold, config, txn,  # counted, as erased rows are
                                                              batch_watermark_ms(spark, checkpoint, batch_id))
            BATCH_OBSERVATIONS.record(txn.app_id, batch_id, observed)

        return rows.writeStream.outputMode("append").foreachBatch(write_batch)

    return writer


def _stream(name: str, read: Callable[[SparkSession, Config, str], DataFrame], land: bool) -> Stream:
    writes = ((bronze_clicks.TABLE,) if land else ()) + (silver_clicks.TABLE, silver_clicks.QUARANTINE,
                                                         gold_page_clicks_5s.TABLE)
    return Stream(name, "medallion", _writer(read, name, land), trigger=lambda config: config.analytical.triggers.medallion,
                  lateness=lambda config: config.analytical.watermark, writes=writes,
                  reads=() if land else (bronze_clicks.TABLE,))


#: Kafka -> bronze, silver, the quarantine and gold's 5-second windows: the live medallion and its backfill.
STREAM = _stream("medallion", lambda spark, config, _root: bronze_clicks.read_kafka(spark, config), land=True)
#: bronze -> silver, the quarantine and gold's 5-second windows: a rebuild.
REBUILD = _stream("medallion_rebuild", bronze_clicks.read_bronze, land=False)
