"""The configuration's model: one typed section per part of the product (kafka, storage, spark, the
two paths, quality, the embedded services, metrics), validated as it is read, every error naming the
dotted key and what is wrong with it. Where a configuration comes from (`conf/`, `--set`, `${NAME}`)
is shared.config_loading.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)

from shared.durations import parse_duration, spark_interval
from shared.config_layers import Section
from shared.object_store import EmbeddedStoreConfig, S3Settings, require_known_scheme
from shared.storage import checkpoint_location, location


def _longer_than_zero(duration: timedelta) -> timedelta:
    if duration <= timedelta(0):
        raise ValueError("must be longer than 0")
    return duration


Duration = Annotated[timedelta, BeforeValidator(parse_duration), PlainSerializer(spark_interval, when_used="json")]
PositiveDuration = Annotated[Duration, AfterValidator(_longer_than_zero)]


MemorySize = Annotated[str, Field(pattern=r"^\d+[kmgtKMGT]?$")]


class Topics(Section):
    clicks: str = Field(min_length=1)
    alerts: str = Field(min_length=1)


class KafkaSecurity(Section):
    """Client security, written once and rendered for kafka-python and for Spark (shared.kafka)."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None
    sasl_username: str | None
    sasl_password: SecretStr | None
    ssl_cafile: Path | None

    @model_validator(mode="after")
    def _sasl_needs_credentials(self) -> "KafkaSecurity":
        if self.protocol.startswith("SASL_"):
            missing = [
                name
                for name in ("sasl_mechanism", "sasl_username", "sasl_password")
                if not getattr(self, name)
            ]
            if missing:
                raise ValueError(
                    f"protocol {self.protocol} needs {', '.join(missing)} "
                    "(take the password from the environment: sasl_password: ${KAFKA_SASL_PASSWORD})"
                )
        return self


class ProducerSettings(Section):
    linger_ms: int = Field(ge=0)
    batch_size: int = Field(gt=0)
    compression_type: Literal["gzip", "snappy", "lz4", "zstd"] | None
    acks: Literal[0, 1, "all"]


class KafkaConfig(Section):
    bootstrap_servers: str = Field(pattern=r"^[^\s,:]+:\d{1,5}(,[^\s,:]+:\d{1,5})*$")
    topics: Topics
    partitions: int = Field(ge=1)
    replication_factor: int = Field(ge=1)
    security: KafkaSecurity
    producer: ProducerSettings

    @property
    def first_host_port(self) -> tuple[str, int]:
        host, port = self.bootstrap_servers.split(",")[0].rsplit(":", 1)
        return host, int(port)


class StorageConfig(Section):
    root: Annotated[str, Field(min_length=1), AfterValidator(require_known_scheme)]
    s3: S3Settings


class RocksDBSettings(Section):
    changelog_checkpointing: bool
    bounded_memory: bool
    max_memory_mb: int = Field(gt=0)
    count_rows: bool


class SparkConfig(Section):
    master: str = Field(min_length=1)
    app_name: str = Field(min_length=1)
    driver_memory: MemorySize
    log_level: Literal["ALL", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF"]
    #: Spark's and the JVM's known-harmless warnings (conf/log4j2.properties): hidden unless `show`.
    known_warnings: Literal["hide", "show"]
    ui_enabled: bool
    shuffle_partitions: int = Field(ge=1)
    state_store: Literal["rocksdb", "hdfs"]
    rocksdb: RocksDBSettings
    conf: dict[str, str | int | float | bool]


class HotPagesConfig(Section):
    window: PositiveDuration
    watermark: Duration
    threshold: int = Field(ge=0)


class Supervision(Section):
    """How `lakehouse` runs a path's queries (shared.streaming.supervise): status, restarts, backoff."""

    status_interval_s: float = Field(gt=0)
    max_restarts: int = Field(ge=0)
    restart_backoff_s: float = Field(ge=0)


class KafkaSourceSettings(Supervision):
    """How a path reads the clicks topic."""

    starting_offsets: Literal["latest", "earliest"]
    max_offsets_per_trigger: int | None = Field(gt=0)
    min_partitions: int | None = Field(gt=0)
    fail_on_data_loss: bool


#: Spark settings one path's application adds to spark.conf (spark.cores.max on a cluster, ...).
ApplicationConf = dict[str, str | int | float | bool]


class RealTimeSettings(Section):
    """The fast path in Spark's real-time mode (CONTRACT.md, "The rule")."""

    #: trigger(realTime=...): how long one long-running batch lasts, so how often offsets and state
    #: are committed and how much a crash replays. Spark refuses less than 5 seconds.
    checkpoint_interval: Duration
    #: Concurrent tasks the application holds (a local master's threads, a cluster's cores): every
    #: source partition and shuffle partition holds one for the whole batch.
    task_slots: int = Field(ge=2)
    #: The fast path's own Spark master in real-time mode (a cluster running the fast path's Spark);
    #: None: spark.master, or local[task_slots] when that is local.
    master: str | None = None
    shuffle_partitions: int = Field(ge=1)
    #: With drop-duplicates: closed windows' state rows evicted per click read, during the batch (0: all at its end).
    evictions_per_record: int = Field(ge=0)
    #: What keeps the distinct count: transform-with-state, one JVM processor (operational/jvm) that
    #: clears each closed window during the batch; drop-duplicates, Spark's dropDuplicates then a count,
    #: whose eviction ends with a scan of its whole state at each batch end.
    state_operator: Literal["transform-with-state", "drop-duplicates"]
    #: A start whose oldest unread click is older than this reads its backlog in one micro-batch
    #: first (operational.catch_up): real-time tasks read each partition at its own pace, and a batch
    #: end mid-backlog would move the watermark past the slower partitions' clicks.
    catch_up_after: Duration

    @field_validator("checkpoint_interval")
    @classmethod
    def _at_least_five_seconds(cls, value: timedelta) -> timedelta:
        if value < timedelta(seconds=5):
            raise ValueError("Spark's real-time mode needs at least 5 seconds")
        return value


class OperationalConfig(KafkaSourceSettings):
    #: real-time: Spark 4.3's real-time mode (the fast path's runtime, .venv-fast); micro-batch: the
    #: micro-batch engine on either runtime, for deployments that cannot run Spark 4.3.
    mode: Literal["real-time", "micro-batch"]
    real_time: RealTimeSettings
    trigger: Duration
    spark_conf: ApplicationConf
    batches_to_retain: int = Field(ge=1)


class AnalyticalTriggers(Section):
    #: The medallion's query: Kafka to bronze, silver and gold's 5-second windows.
    medallion: Duration
    #: The streams that follow it: gold/page_clicks_hourly, and any gold table that reads another.
    gold: Duration


class AnalyticalConfig(KafkaSourceSettings):
    watermark: PositiveDuration
    triggers: AnalyticalTriggers
    max_files_per_trigger: int = Field(gt=0)
    state_changelog_checkpointing: bool
    vacuum_retention: Duration
    niceness: int = Field(ge=0, le=19)
    spark_conf: ApplicationConf


class SessionsConfig(Section):
    """gold/user_sessions (analytical.gold_user_sessions): a known user's visit, ended by inactivity."""

    enabled: bool
    #: A session ends this long after its last event, unless `gap_by_event_type` names that event's type.
    gap: PositiveDuration
    #: Per eventType, the inactivity gap after such an event (e.g. {purchase: 5 minutes}).
    gap_by_event_type: dict[Annotated[str, Field(min_length=1, max_length=64)], PositiveDuration]
    #: A session is engaged when it lasts longer than this (first to last event), has `engaged_page_views`
    #: page views or more, or a purchase.
    engaged_after: Duration
    engaged_page_views: int = Field(ge=1)


class ErasureConfig(Section):
    """`lakehouse forget` (analytical.erasure)."""

    #: How long it waits for a running stream to read what the erasure rewrites before it gives up.
    catch_up_timeout: PositiveDuration
    #: How long the live medallion holds its writes while it deletes, at most (analytical.erasure_hold).
    hold_timeout: PositiveDuration
    #: The priority it lowers itself to (`nice`), between the fast path's and the medallion's.
    niceness: int = Field(ge=0, le=19)


ExpectationPolicy = Literal["warn", "drop", "fail"]


class QualityConfig(Section):
    docs_dir: Path | None
    earliest_event_time: datetime
    max_clock_skew: Duration
    #: Per stream name, what a row that breaks an expectation does: overrides the policy the
    #: stream declares (shared.stream.Stream.policy); analytical.registry rejects unknown names.
    policies: dict[str, ExpectationPolicy]

    @field_validator("earliest_event_time")
    @classmethod
    def _with_zone(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("give a time zone, e.g. 2000-01-01T00:00:00Z")
        return value


class BrokerConfig(Section):
    run_dir: Path
    heap_mb: int = Field(ge=128)
    #: How long its topics keep a record (log.retention.ms): the latest a record `lakehouse forget` erased
    #: from the lake stays on the topic, with `segment_roll`.
    retention: PositiveDuration
    #: How often a partition's log starts a new segment (log.roll.ms): Kafka drops whole segments, so a record
    #: goes at most retention + segment_roll after it came.
    segment_roll: PositiveDuration
    start_timeout_s: float = Field(gt=0)
    stop_timeout_s: float = Field(gt=0)


class FastPathClusterConfig(Section):
    """The fast path's cluster beside the medallion's: a standalone cluster runs one Spark version,
    and real-time mode needs the fast path's on its executors."""

    enabled: bool
    master_port: int = Field(ge=1, le=65535)
    webui_port: int = Field(ge=1, le=65535)
    workers: int = Field(ge=1, le=64)
    #: Together at least operational.real_time.task_slots: real-time tasks hold their slots all batch.
    worker_cores: int = Field(ge=1)


class ClusterConfig(Section):
    run_dir: Path
    host: str = Field(min_length=1)
    master_port: int = Field(ge=1, le=65535)
    webui_port: int = Field(ge=1, le=65535)
    workers: int = Field(ge=1, le=64)
    worker_cores: int = Field(ge=1)
    worker_memory: MemorySize
    daemon_memory: MemorySize
    start_timeout_s: float = Field(gt=0)
    stop_timeout_s: float = Field(gt=0)
    fast_path: FastPathClusterConfig


class AlertingConfig(Section):
    """Hot-page alerts delivered through Alertmanager (`lakehouse notify`, lakehouse.notify)."""

    #: Alertmanager's base URL (http://host:9093), whose API v2 the bridge posts to; null: no delivery,
    #: and `lakehouse run` runs no bridge.
    alertmanager_url: str | None
    #: A hot window's alert resolves this long after its window ends, or after it is posted, if later.
    resolve_after: PositiveDuration
    #: The link each alert carries for a human to follow; {pageId}, {windowStart} and {windowEnd} are filled in.
    link: str = Field(min_length=1)
    #: The Kafka consumer group whose committed offsets say what the bridge has delivered.
    consumer_group: str = Field(min_length=1)
    #: Retries of a post Alertmanager did not take wait twice as long each time, up to this.
    retry_max_delay: PositiveDuration
    #: How long one post may take before it counts as failed.
    post_timeout: PositiveDuration
    #: How often the alerts not yet resolved are posted again (an Alertmanager restarted has lost them).
    repost_interval: PositiveDuration

    @field_validator("alertmanager_url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http:// or https:// URL (e.g. http://127.0.0.1:9093)")
        return None if value is None else value.rstrip("/")


class EmbeddedAlertmanagerConfig(Section):
    """The embedded Alertmanager and its webhook receiver (`lakehouse alertmanager ...`)."""

    run_dir: Path
    config_file: Path
    port: int = Field(ge=1, le=65535)
    webhook_port: int = Field(ge=1, le=65535)
    start_timeout_s: float = Field(gt=0)
    stop_timeout_s: float = Field(gt=0)


class MetricsConfig(Section):
    """The Prometheus endpoint of the long-running commands (lakehouse.monitoring.metrics)."""

    enabled: bool
    bind_address: str = Field(min_length=1)
    operational_port: int = Field(ge=1, le=65535)
    analytical_port: int = Field(ge=1, le=65535)
    #: `lakehouse notify`, and `lakehouse run`'s bridge to Alertmanager.
    notify_port: int = Field(ge=1, le=65535)

    @model_validator(mode="after")
    def _one_port_per_path(self) -> "MetricsConfig":
        ports = (self.operational_port, self.analytical_port, self.notify_port)
        if len(set(ports)) < len(ports):
            raise ValueError("operational_port, analytical_port and notify_port must differ: `lakehouse run` serves "
                             "them at once")
        return self

    def port(self, application: str) -> int:
        """The port of a path's application (`<application>_port`)."""
        return getattr(self, f"{application}_port")


class Config(Section):
    kafka: KafkaConfig
    storage: StorageConfig
    spark: SparkConfig
    hot_pages: HotPagesConfig
    operational: OperationalConfig
    analytical: AnalyticalConfig
    sessions: SessionsConfig
    erasure: ErasureConfig
    quality: QualityConfig
    broker: BrokerConfig
    object_store: EmbeddedStoreConfig
    cluster: ClusterConfig
    metrics: MetricsConfig
    alerting: AlertingConfig
    alertmanager: EmbeddedAlertmanagerConfig
    #: The layers as read, `${NAME}` references unsubstituted: what a child process is handed
    #: (`write_for_child`), so that no secret is written to a file.
    _document: dict[str, Any] | None = PrivateAttr(default=None)

    def path(self, *parts: str) -> str:
        """A location under `storage.root` (a local path or a URI), e.g. path('bronze', 'clicks')."""
        return location(self.storage.root, *parts)

    def checkpoint(self, query_name: str) -> str:
        """Where the query called `query_name` keeps its checkpoint: storage.root/_checkpoints/<name>."""
        return checkpoint_location(self.storage.root, query_name)
