"""Kafka clients built from config: kafka-python for admin and consuming in Python, librdkafka
(confluent-kafka) for producing, and Spark's Kafka source of the clicks topic, each with the settings
`shared.kafka_settings` renders; every client checks first that a broker answers with this client's
security (`shared.kafka_probe`), in one line instead of a 30-second timeout.
"""

from __future__ import annotations

from datetime import timedelta

import itertools
import logging
import socket
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from typing import Any, Iterator, Literal

from shared.config import KafkaConfig, KafkaSourceSettings
from shared.errors import BrokerUnreachableError, LakehouseError
from shared.kafka_probe import KafkaSecurityError, security_problem
from shared.kafka_settings import client_settings, producer_settings, spark_options

TimestampType = Literal["CreateTime", "LogAppendTime"]

# kafka-python logs every failed connection attempt at ERROR; our callers report failures themselves.
logging.getLogger("kafka").setLevel(logging.CRITICAL)


def read_clicks_stream(spark: Any, kafka: KafkaConfig, source: KafkaSourceSettings, *, headers: bool = False) -> Any:
    """The clicks topic as a streaming DataFrame of Kafka records, with a path's source settings."""
    reader = (
        spark.readStream.format("kafka")
        .options(**spark_options(kafka))
        .option("subscribe", kafka.topics.clicks)
        .option("includeHeaders", str(headers).lower())
        .option("startingOffsets", source.starting_offsets)
        .option("failOnDataLoss", str(source.fail_on_data_loss).lower())
    )
    if source.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", source.max_offsets_per_trigger)
    if source.min_partitions:
        reader = reader.option("minPartitions", source.min_partitions)
    return reader.load()


def _unreachable(kafka: KafkaConfig, error: Exception | str) -> BrokerUnreachableError:
    why = error if isinstance(error, str) else type(error).__name__
    return BrokerUnreachableError(
        f"no Kafka broker answers at {kafka.bootstrap_servers} ({why}): "
        "start the embedded one with `lakehouse kafka start`, or fix kafka.bootstrap_servers"
    )


def _connection_error(server: str, timeout_s: float) -> str | None:
    """None when `server` (host:port) accepts a TCP connection, else why not."""
    host, port = server.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return None
    except OSError as error:
        return error.strerror or type(error).__name__


def wait_until_reachable(kafka: KafkaConfig, timeout_s: float, report: Callable[[str], None]) -> None:
    """Like `require_reachable`, but waiting up to `timeout_s` for a broker that is down (restarting)."""
    deadline = time.monotonic() + timeout_s
    for attempt in itertools.count():
        try:
            return require_reachable(kafka)
        except BrokerUnreachableError:  # (a broker that answers and refuses us is not waited for)
            if time.monotonic() >= deadline:
                raise
            if attempt == 0:
                report(f"waiting up to {timeout_s:g} s for a Kafka broker at {kafka.bootstrap_servers}")
            time.sleep(2)


def require_reachable(kafka: KafkaConfig, timeout_s: float = 3.0) -> None:
    """Fail fast when no bootstrap server accepts a connection (kafka-python would wait ~30 s), or
    when the one that does refuses this client's security (`shared.kafka_probe`: one clear message)."""
    errors = []
    for server in kafka.bootstrap_servers.split(","):
        error = _connection_error(server, timeout_s)
        if error is None:
            problem = security_problem(kafka, server)
            if problem:
                raise KafkaSecurityError(problem)
            return
        errors.append(error)
    raise _unreachable(kafka, ", ".join(sorted(set(errors))))


def broker_answers(kafka: KafkaConfig, timeout_s: float) -> bool:
    """True when a broker at `kafka`'s first bootstrap server answers a metadata request in time,
    with `kafka`'s security (TLS, credentials).

    A TCP connect comes first: kafka-python must not be handed a port nobody listens on.
    """
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    if _connection_error(kafka.bootstrap_servers.split(",")[0], timeout_s) is not None:
        return False
    admin = None
    try:
        timeout_ms = int(timeout_s * 1000)
        admin = KafkaAdminClient(**client_settings(kafka), request_timeout_ms=timeout_ms)
        admin.describe_cluster()
        return True
    except (KafkaError, OSError, ValueError):
        return False
    finally:
        if admin is not None:
            admin.close()


def set_scram_password(kafka: KafkaConfig, mechanism: str, username: str, password: Any) -> None:
    """Create SCRAM user `username`, or give it `password` (a SecretStr), logged in as `kafka`'s user."""
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient({key: value for key, value in producer_settings(kafka).items() if key in _ADMIN_SETTINGS}
                        | {"logger": logging.getLogger("kafka.librdkafka")})
    upsert = UserScramCredentialUpsertion(
        username, ScramCredentialInfo(getattr(ScramMechanism, mechanism.replace("-", "_")), 8192),
        password.get_secret_value().encode())
    for future in admin.alter_user_scram_credentials([upsert], request_timeout=30).values():
        try:
            future.result(timeout=60)
        except Exception as error:  # a KafkaException or a timeout: say which user and why
            raise LakehouseError(f"could not set the password of Kafka user {username}: {error}") from None


_ADMIN_SETTINGS = {"bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.username", "sasl.password",
                   "ssl.ca.location"}


@contextmanager
def admin_client(kafka: KafkaConfig) -> Iterator[Any]:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    require_reachable(kafka)
    try:
        admin = KafkaAdminClient(**client_settings(kafka), request_timeout_ms=15_000)
    except KafkaError as error:
        raise _unreachable(kafka, error) from None
    try:
        yield admin
    finally:
        admin.close()


def records_kept_for(kafka: KafkaConfig, topic: str) -> timedelta | None:
    """The longest a record stays on `topic` once appended, as the broker has it set: retention.ms plus
    segment.ms (Kafka deletes whole segments, and a segment's newest record must be past the retention);
    None when the topic keeps records forever (retention.ms -1)."""
    from kafka.admin import ConfigResource, ConfigResourceType

    with admin_client(kafka) as admin:
        described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic, {"retention.ms": None,
                                                                                            "segment.ms": None})],
                                           config_filter="all")
    settings = {key: int(entry["value"]) for key, entry in described["topic"][topic].items()}
    if settings["retention.ms"] < 0:
        return None
    return timedelta(milliseconds=settings["retention.ms"] + settings["segment.ms"])


def ensure_topics(
    kafka: KafkaConfig, names: Iterable[str], timestamp_type: TimestampType | None = None
) -> list[str]:
    """Create the topics that do not exist yet, with `kafka.partitions` partitions and, if given,
    `message.timestamp.type`. Returns the names it created; existing topics are left as they are.
    """
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    configs = {"message.timestamp.type": timestamp_type} if timestamp_type else {}
    with admin_client(kafka) as admin:
        missing = sorted(set(names) - set(admin.list_topics()))
        if not missing:
            return []
        topics = [
            NewTopic(name, num_partitions=kafka.partitions, replication_factor=kafka.replication_factor,
                     topic_configs=configs)
            for name in missing
        ]
        try:
            admin.create_topics(topics, timeout_ms=30_000)
        except TopicAlreadyExistsError:
            pass  # created meanwhile by someone else: fine
        admin.wait_for_topics(missing, timeout_ms=30_000)
    return missing


def topic_offsets(kafka: KafkaConfig, topic: str) -> dict[int, tuple[int, int]]:
    """Per partition, (earliest, latest) offsets: how many records a topic holds right now."""
    from kafka import TopicPartition

    consumer = consumer_for(kafka)
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            raise LakehouseError(f"topic {topic} does not exist on {kafka.bootstrap_servers}")
        assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
        earliest = consumer.beginning_offsets(assigned)
        latest = consumer.end_offsets(assigned)
        return {tp.partition: (earliest[tp], latest[tp]) for tp in assigned}
    finally:
        consumer.close()


class Producer:
    """The project's producer: librdkafka through confluent-kafka, with the `kafka.producer` settings.

    kafka-python's KafkaProducer.send costs tens of times librdkafka's CPU per record: at the rates
    the generator sends, enough to take the cores of the Spark job it feeds. `send` queues a record (waiting while the local queue is full); `flush` waits until every
    queued record is acknowledged or failed for good and raises, naming the error, when any failed.
    """

    def __init__(self, kafka: KafkaConfig, **overrides: Any):
        from confluent_kafka import Producer as LibrdkafkaProducer

        self.delivered = 0
        self.failed = 0
        self._unpolled = 0
        self._last_error: str | None = None
        self._kafka = kafka
        # librdkafka logs each failed connection to stderr; its errors reach `flush` instead
        self._client = LibrdkafkaProducer(producer_settings(kafka) | overrides | {
            "error_cb": self._on_error, "logger": logging.getLogger("kafka.librdkafka")})

    def _on_error(self, error) -> None:
        self._last_error = error.str()

    def _on_delivery(self, error, message) -> None:
        if error is None:
            self.delivered += 1
        else:
            self.failed += 1
            self._last_error = error.str()

    def send(self, topic: str, value: bytes | None, key: bytes | None = None, timestamp_ms: int | None = None,
             partition: int | None = None) -> None:
        """`partition`: this one instead of the key's (a test that fills partitions unevenly)."""
        options = {"timestamp": timestamp_ms} if timestamp_ms is not None else {}
        if partition is not None:
            options["partition"] = partition
        while True:
            try:
                self._client.produce(topic, value, key, on_delivery=self._on_delivery, **options)
                break
            except BufferError:  # the local queue is full: let librdkafka send some
                self._client.poll(0.05)
        self._unpolled += 1
        if self._unpolled >= 1000:  # serve delivery reports now and then (each poll costs a few µs)
            self._client.poll(0)
            self._unpolled = 0

    def flush(self, timeout_s: float = 60.0) -> None:
        left = self._client.flush(timeout_s)
        if left or self.failed:
            why = self._last_error or f"no acknowledgement within {timeout_s:g} s"
            raise LakehouseError(f"{self.failed + left:,} records were not delivered to Kafka at "
                                 f"{self._kafka.bootstrap_servers}: {why}")

    def close(self, timeout_s: float = 60.0) -> None:
        """Flush (librdkafka frees the client when it is collected)."""
        self.flush(timeout_s)


def producer_for(kafka: KafkaConfig, **overrides: Any) -> Producer:
    """The producer for `kafka` (`overrides`: librdkafka settings by their own names)."""
    require_reachable(kafka)
    return Producer(kafka, **overrides)


def consumer_for(kafka: KafkaConfig, *topics: str, **overrides: Any):
    """A kafka-python consumer without a group (nothing committed), reading from the earliest offset."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    settings = client_settings(kafka) | {"auto_offset_reset": "earliest", "enable_auto_commit": False}
    require_reachable(kafka)
    try:
        return KafkaConsumer(*topics, **(settings | overrides))
    except KafkaError as error:
        raise _unreachable(kafka, error) from None
