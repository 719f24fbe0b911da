"""The embedded single-node Apache Kafka broker (KRaft, broker and controller in one process).

For local runs, the demo and the tests: a real broker from the Maven-resolved jars in
`.jars/broker`, listening on the port of `kafka.bootstrap_servers`, with its data, log and pid file
under `broker.run_dir`. The storage is formatted on the first start; later starts reuse it, so
topics and offsets survive a restart.

It speaks what the clients are configured for (`kafka.security.protocol`): PLAINTEXT; SSL, TLS
from a certificate authority made at its first secured start (`<run_dir>/tls/ca.pem`, which clients
trust through `kafka.security.ssl_cafile`); or SASL_SSL as production brokers do, that TLS and SCRAM
users. The client user (`kafka.security.sasl_username`, its password from the environment) is created or
given its current password at every start; the broker's own user, for its listener's inter-broker
side, has a password made at format time that only the broker's files (mode 0600) hold.
"""

from __future__ import annotations

import base64
import secrets
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from pydantic import SecretStr

from shared import PROJECT_ROOT
from shared.config import Config, KafkaConfig
from shared.errors import ConfigError, LakehouseError, MissingDependencyError
from shared.jvm import JARS_DIR, jars, java_executable
from lakehouse.services.daemon import Daemon, free_port, require_free_ports
from lakehouse.services.tls import authority_in, write_private

_LOG4J = PROJECT_ROOT / "conf" / "broker-log4j2.properties"
#: The class that formats a new broker's storage and then runs it, and its jar (`make setup`).
_FORMAT_THEN_RUN = "lakehouse.services.FormatThenRun"
_FORMAT_THEN_RUN_JAR = "lakehouse-broker.jar"
_JVM_OPTIONS = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true"]
#: The broker's own SCRAM user (its listener's inter-broker side); never a client's.
BROKER_USER = "lakehouse-broker"
#: What the embedded broker speaks (kafka.security.protocol).
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_SSL")
_SCRAM = ("SCRAM-SHA-256", "SCRAM-SHA-512")


class BrokerError(LakehouseError):
    """The broker could not be started or stopped; the message carries the log's tail."""


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap: str
    answering: bool
    protocol: str = "PLAINTEXT"

    @property
    def healthy(self) -> bool:
        return self.running and self.answering

    def describe(self) -> str:
        if not self.running:
            return f"not running (bootstrap {self.bootstrap})"
        health = "answering" if self.answering else "not answering yet"
        return f"running, pid {self.pid}, bootstrap {self.bootstrap} ({self.protocol}), {health}"


class EmbeddedBroker:
    """Start, stop and inspect the broker whose files live in `config.broker.run_dir`."""

    def __init__(self, config: Config, log=print):
        self.kafka = config.kafka
        self.host, self.port = config.kafka.first_host_port
        self.bootstrap = f"{self.host}:{self.port}"
        self.protocol = config.kafka.security.protocol
        self.settings = config.broker
        self.partitions = config.kafka.partitions
        self.run_dir = Path(config.broker.run_dir)
        self.data_dir = self.run_dir / "data"
        self.properties = self.run_dir / "server.properties"
        self.tls_dir = self.run_dir / "tls"
        self._daemon = Daemon("broker", self.run_dir, marker=["kafka.Kafka", str(self.properties)])
        self.log_file = self._daemon.log_file
        self.pid_file = self._daemon.pid_file
        self._log = log

    # -- commands ---------------------------------------------------------------------------

    def start(self, die_with_caller: bool = False) -> str:
        """Start the broker unless it runs; return its bootstrap address once it answers.

        `die_with_caller`: the kernel kills the broker when this process dies, however it dies (the
        demo's broker); otherwise it runs on until `stop` (`lakehouse kafka start`)."""
        self._check_security()
        pid = self._daemon.running_pid()
        if pid:
            self._log(f"broker already running (pid {pid}), waiting until it answers")
            self._wait_until_answering(pid)
            self._upsert_client_user()
            return self.bootstrap
        self.pid_file.unlink(missing_ok=True)  # stale: its process is gone
        require_free_ports(self.host, {"kafka.bootstrap_servers": self.port,
                                       "the controller (server.properties)": self._controller_port()})
        java = java_executable()
        jars("broker")  # a clear error when set-up has not run
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._write_properties()
        command = [*self._java_command(java), "kafka.Kafka", str(self.properties)]
        if not (self.data_dir / "meta.properties").exists():
            command = self._formatting_first(command)
            (self.run_dir / "protocol").write_text(self.protocol + "\n")
        self._log(f"starting the Kafka broker on {self.bootstrap} ({self.protocol}; log: {self.log_file})")
        pid = self._daemon.start(command, die_with_caller=die_with_caller)
        try:
            self._wait_until_answering(pid)
            self._upsert_client_user()
        except BaseException:
            self.stop(quiet=True)
            raise
        return self.bootstrap

    def stop(self, quiet: bool = False) -> bool:
        """SIGTERM, wait up to broker.stop_timeout_s, SIGKILL only then. False if it was not running."""
        return self._daemon.stop_saying("the Kafka broker", self.settings.stop_timeout_s, log=self._log, quiet=quiet)

    def status(self) -> BrokerStatus:
        pid = self._daemon.running_pid()
        answering = bool(pid) and self._answers(timeout_s=5)
        return BrokerStatus(running=bool(pid), pid=pid, bootstrap=self.bootstrap, answering=answering,
                            protocol=self.protocol)

    # -- security ---------------------------------------------------------------------------

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        """Clients log in as SCRAM users, and the broker's listener as its own user."""
        return self.protocol == "SASL_SSL"

    def _check_security(self) -> None:
        security = self.kafka.security
        if self.protocol not in PROTOCOLS:
            raise ConfigError(f"kafka.security.protocol: the embedded broker speaks {', '.join(PROTOCOLS)}, "
                              f"not {self.protocol}")
        if self.sasl and security.sasl_mechanism not in _SCRAM:
            raise ConfigError(f"kafka.security.sasl_mechanism: the embedded broker's users are SCRAM users "
                              f"({' or '.join(_SCRAM)}), not {security.sasl_mechanism}")
        formatted = self._formatted_protocol()
        if formatted and formatted != self.protocol:
            raise ConfigError(
                f"broker.run_dir {self.run_dir} holds a broker formatted for {formatted}, and "
                f"kafka.security.protocol is {self.protocol}: give this broker its own broker.run_dir "
                "(conf/secured.yaml uses .run/kafka-secured), or delete that folder")

    def _formatted_protocol(self) -> str | None:
        if not (self.data_dir / "meta.properties").exists():
            return None
        marker = self.run_dir / "protocol"
        return marker.read_text().strip() if marker.exists() else "PLAINTEXT"

    @property
    def _broker_password_file(self) -> Path:
        return self.tls_dir / "broker-user.secret"

    def _broker_password(self) -> str:
        """The broker's own SCRAM password: made once, kept in a file only its owner reads."""
        path = self._broker_password_file
        if not path.exists():
            self.tls_dir.mkdir(parents=True, exist_ok=True)
            write_private(path, secrets.token_urlsafe(32).encode())
        return path.read_text().strip()

    def as_broker_user(self) -> KafkaConfig:
        """Client settings that log in as the broker's own user (readiness, user management), trusting
        its certificate authority."""
        if not self.tls:
            return self.kafka
        authority = authority_in(self.tls_dir, [self.host])
        own = {"sasl_username": BROKER_USER, "sasl_password": SecretStr(self._broker_password())} if self.sasl else {}
        security = self.kafka.security.model_copy(update={**own, "ssl_cafile": authority.ca})
        return self.kafka.model_copy(update={"security": security})

    def _upsert_client_user(self) -> None:
        """Create the client user, or set its password to the current one (from the environment)."""
        if not self.sasl:
            if self.tls:
                self._log(f"TLS without client login; clients trust {self.tls_dir / 'ca.pem'}")
            return
        from shared.kafka import set_scram_password

        security = self.kafka.security
        set_scram_password(self.as_broker_user(), security.sasl_mechanism, security.sasl_username,
                           security.sasl_password)
        self._log(f"SCRAM user {security.sasl_username} ready ({security.sasl_mechanism}); "
                  f"clients trust {self.tls_dir / 'ca.pem'}")

    # -- internals --------------------------------------------------------------------------

    def _answers(self, timeout_s: float) -> bool:
        from shared.kafka import broker_answers

        return broker_answers(self.as_broker_user(), timeout_s)

    def _java_command(self, java: str) -> list[str]:
        heap = f"{self.settings.heap_mb}m"
        return [
            java,
            f"-Xmx{heap}",
            f"-Xms{heap}",
            *_JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={_LOG4J}",
            f"-Dkafka.logs.dir={self.run_dir / 'logs'}",
            "-cp",
            str(JARS_DIR / "broker" / "*"),
        ]

    def _formatting_first(self, command: list[str]) -> list[str]:
        """`command` (a broker's start) made to format the storage first, in the same JVM
        (lakehouse/services/jvm: `FormatThenRun`, which `make setup` compiles into .jars/broker)."""
        if not (JARS_DIR / "broker" / _FORMAT_THEN_RUN_JAR).is_file():
            raise MissingDependencyError(f"no {_FORMAT_THEN_RUN_JAR} in {JARS_DIR / 'broker'}: run `make setup`")
        cluster_id = _new_cluster_id()
        self._log(f"formatting broker storage in {self.data_dir} (cluster id {cluster_id})")
        main = command.index("kafka.Kafka")
        command = [*command[:main], _FORMAT_THEN_RUN, *command[main:], cluster_id]
        if self.sasl:  # the broker's own user must exist before its listener can log in to itself (its
            # password file is written with server.properties)
            command += [self.kafka.security.sasl_mechanism, BROKER_USER, str(self._broker_password_file)]
        return command

    def _controller_port(self) -> int:
        """The controller's port: kept from the first start (it is part of the formatted quorum)."""
        if self.properties.exists():
            for line in self.properties.read_text().splitlines():
                if line.startswith("controller.quorum.bootstrap.servers="):
                    return int(line.rsplit(":", 1)[1])
        port = free_port(self.host)
        while port == self.port:  # the broker's own port is free until it starts: the OS may offer it
            port = free_port(self.host)
        return port

    def _write_properties(self) -> None:
        controller = f"{self.host}:{self._controller_port()}"
        listener = self.protocol
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": controller,
            "listeners": f"{listener}://{self.bootstrap},CONTROLLER://{controller}",
            "advertised.listeners": f"{listener}://{self.bootstrap}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": listener,
            "listener.security.protocol.map": f"CONTROLLER:PLAINTEXT,{listener}:{listener}",
            "log.dirs": str(self.data_dir),
            "num.partitions": str(self.partitions),
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "log.retention.ms": str(int(self.settings.retention.total_seconds() * 1000)),
            "log.roll.ms": str(int(self.settings.segment_roll.total_seconds() * 1000)),
            "log.segment.bytes": str(256 * 1024 * 1024),
        }
        if self.tls:
            settings |= self._tls_settings()
        if self.sasl:
            settings |= self._sasl_settings()
        text = "# Written by `lakehouse kafka start` from the project config; edits are overwritten.\n"
        write_private(self.properties, (text + "".join(f"{k}={v}\n" for k, v in settings.items())).encode())

    def _sasl_settings(self) -> dict[str, str]:
        from shared.kafka_settings import jaas_config

        mechanism = self.kafka.security.sasl_mechanism
        return {
            "sasl.enabled.mechanisms": mechanism,
            "sasl.mechanism.inter.broker.protocol": mechanism,
            f"listener.name.sasl_ssl.{mechanism.lower()}.sasl.jaas.config":
                jaas_config(mechanism, BROKER_USER, self._broker_password()),
        }

    def _tls_settings(self) -> dict[str, str]:
        authority = authority_in(self.tls_dir, [self.host])
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(authority.server),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(authority.ca),
            "ssl.client.auth": "none",
        }

    def _wait_until_answering(self, pid: int) -> None:
        deadline = time.monotonic() + self.settings.start_timeout_s
        while time.monotonic() < deadline:
            if self._daemon.running_pid() != pid:
                raise BrokerError(
                    f"the Kafka broker exited while starting; its log ends with:\n{self._daemon.log_tail()}")
            if self._answers(timeout_s=2):
                return
            time.sleep(0.25)
        raise BrokerError(
            f"the Kafka broker did not answer on {self.bootstrap} within "
            f"{self.settings.start_timeout_s:g} s (broker.start_timeout_s); its log ends with:\n"
            f"{self._daemon.log_tail()}"
        )


def _new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, not starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text
