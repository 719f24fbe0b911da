"""Configuration: YAML in `conf/`, read once, validated, handed down as typed values.

Layers, each on top of the one before:
  1. `conf/local.yaml`, the embedded default (the only place defaults are written);
  2. the file given with `--config` (or `$LAKEHOUSE_CONFIG`), stating only what differs;
  3. each `--set dotted.key=value`, the value read as YAML (`--set hot_pages.threshold=100`).
Then `${NAME}` in any string is replaced by the environment variable NAME, so secrets never sit in
a file. Every error names the dotted key and what is wrong with it.
"""

from __future__ import annotations

import atexit
import copy
import os
import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from shared import PROJECT_ROOT
from shared.durations import parse_duration, spark_interval
from shared.config_layers import Section, apply_override, deep_merge, describe, read_yaml, substitute_environment
from shared.errors import ConfigError
from shared.object_store import EmbeddedStoreConfig, S3Settings, require_known_scheme
from shared.storage import checkpoint_location, location

DEFAULT_CONFIG = PROJECT_ROOT / "conf" / "local.yaml"
CONFIG_ENV_VAR = "LAKEHOUSE_CONFIG"

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
    bronze: Duration
    silver: Duration
    gold: Duration


class AnalyticalConfig(KafkaSourceSettings):
    watermark: PositiveDuration
    triggers: AnalyticalTriggers
    max_files_per_trigger: int = Field(gt=0)
    state_changelog_checkpointing: bool
    vacuum_retention: Duration
    niceness: int = Field(ge=0, le=19)
    spark_conf: ApplicationConf


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


class MetricsConfig(Section):
    """The Prometheus endpoint of the long-running commands (lakehouse.monitoring.metrics)."""

    enabled: bool
    bind_address: str = Field(min_length=1)
    operational_port: int = Field(ge=1, le=65535)
    analytical_port: int = Field(ge=1, le=65535)

    @model_validator(mode="after")
    def _one_port_per_path(self) -> "MetricsConfig":
        if self.operational_port == self.analytical_port:
            raise ValueError("operational_port and analytical_port must differ: `lakehouse run` serves both at once")
        return self

    def port(self, application: str) -> int:
        return self.operational_port if application == "operational" else self.analytical_port


class Config(Section):
    kafka: KafkaConfig
    storage: StorageConfig
    spark: SparkConfig
    hot_pages: HotPagesConfig
    operational: OperationalConfig
    analytical: AnalyticalConfig
    quality: QualityConfig
    broker: BrokerConfig
    object_store: EmbeddedStoreConfig
    cluster: ClusterConfig
    metrics: MetricsConfig
    #: The layers as read, `${NAME}` references unsubstituted: what a child process is handed
    #: (`write_for_child`), so that no secret is written to a file.
    _document: dict[str, Any] | None = PrivateAttr(default=None)

    def path(self, *parts: str) -> str:
        """A location under `storage.root` (a local path or a URI), e.g. path('bronze', 'clicks')."""
        return location(self.storage.root, *parts)

    def checkpoint(self, query_name: str) -> str:
        """Where the query called `query_name` keeps its checkpoint: storage.root/_checkpoints/<name>."""
        return checkpoint_location(self.storage.root, query_name)


def load_config(path: str | os.PathLike[str] | None = None, overrides: Sequence[str] = (),
                secrets: bool = True) -> Config:
    """Read the layers, substitute the environment, validate. Raises ConfigError.

    `secrets=False`: for commands that use no credential (stopping a broker, the cluster's commands),
    a `${NAME}` whose variable is not set stays as written instead of stopping the command."""
    raw = read_yaml(DEFAULT_CONFIG)
    path = path or os.environ.get(CONFIG_ENV_VAR) or None
    if path and Path(path).resolve() != DEFAULT_CONFIG:
        raw = deep_merge(raw, read_yaml(Path(path)))
    for item in overrides:
        apply_override(raw, item)
    document = copy.deepcopy(raw)
    raw = substitute_environment(raw, required=secrets)
    try:
        config = Config.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(describe(error)) from None
    return _with_document(_resolve_local_paths(config), document)


def with_overrides(config: Config, overrides: Sequence[str]) -> Config:
    """`config` with `--set`-style overrides applied and validated again (e.g. a run's own topics)."""
    raw = config.model_dump()
    document = copy.deepcopy(config._document)
    for item in overrides:
        apply_override(raw, item)
        if document is not None:
            apply_override(document, item)
    try:
        return _with_document(_resolve_local_paths(Config.model_validate(raw)), document)
    except ValidationError as error:
        raise ConfigError(describe(error)) from None


def _with_document(config: Config, document: dict[str, Any] | None) -> Config:
    config._document = document
    return config


def write_for_child(config: Config) -> Path:
    """`config` as one file a child process reads with `--config FILE`, instead of the layers and
    `--set` items re-typed: the layers as read, with every override, `${NAME}` left for the child to
    take from the environment it inherits. Readable by this user only; removed when this process ends.
    """
    if config._document is None:
        raise ConfigError("this configuration was not read from its layers (load_config): it cannot be handed on")
    folder = Path(tempfile.mkdtemp(prefix="lakehouse-config-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config._document, sort_keys=False), encoding="utf-8")
    return path


def render(config: Config) -> str:
    """The effective configuration as YAML, secrets masked."""
    data = config.model_dump(mode="json")
    return yaml.safe_dump(data, sort_keys=False)


def _resolve_local_paths(config: Config) -> Config:
    """Relative local paths taken from the project root, whatever the working folder."""
    root = config.storage.root
    if urlparse(root).scheme == "" and not Path(root).is_absolute():
        root = str(PROJECT_ROOT / root)
    security = config.kafka.security
    return config.model_copy(update={
        "kafka": config.kafka.model_copy(update={"security": _anchored(security, "ssl_cafile")}),
        "storage": config.storage.model_copy(update={"root": root}),
        "broker": _anchored(config.broker, "run_dir"),
        "object_store": _anchored(config.object_store, "run_dir"),
        "cluster": _anchored(config.cluster, "run_dir"),
        "quality": _anchored(config.quality, "docs_dir"),
    })


def _anchored(section: Section, key: str) -> Section:
    """`section` with its path `key`, when set and relative, taken from the project root."""
    path = getattr(section, key)
    if path is None or path.is_absolute():
        return section
    return section.model_copy(update={key: PROJECT_ROOT / path})
