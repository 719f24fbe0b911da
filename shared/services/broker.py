"""The embedded single-node Apache Kafka broker (KRaft, broker and controller in one process).

For local runs, the demo and the tests: a real broker from the Maven-resolved jars in
`.jars/broker`, listening on the port of `kafka.bootstrap_servers`, with its data, log and pid file
under `broker.run_dir`. The storage is formatted on the first start; later starts reuse it, so
topics and offsets survive a restart.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from shared import PROJECT_ROOT
from shared.config import Config
from shared.errors import LakehouseError
from shared.jvm import JARS_DIR, jars, java_executable
from shared.processes import dying_with_parent

_LOG4J = PROJECT_ROOT / "conf" / "broker-log4j2.properties"
_JVM_OPTIONS = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true"]


class BrokerError(LakehouseError):
    """The broker could not be started or stopped; the message carries the log's tail."""


@dataclass(frozen=True)
class BrokerStatus:
    running: bool
    pid: int | None
    bootstrap: str
    answering: bool

    def describe(self) -> str:
        if not self.running:
            return f"not running (bootstrap {self.bootstrap})"
        health = "answering" if self.answering else "not answering yet"
        return f"running, pid {self.pid}, bootstrap {self.bootstrap}, {health}"


class EmbeddedBroker:
    """Start, stop and inspect the broker whose files live in `config.broker.run_dir`."""

    def __init__(self, config: Config, log=print):
        self.host, self.port = config.kafka.first_host_port
        self.bootstrap = f"{self.host}:{self.port}"
        self.settings = config.broker
        self.partitions = config.kafka.partitions
        self.run_dir = Path(config.broker.run_dir)
        self.data_dir = self.run_dir / "data"
        self.log_file = self.run_dir / "broker.log"
        self.pid_file = self.run_dir / "broker.pid"
        self.properties = self.run_dir / "server.properties"
        self._log = log
        self._process: subprocess.Popen | None = None

    # -- commands ---------------------------------------------------------------------------

    def start(self, die_with_caller: bool = False) -> str:
        """Start the broker unless it runs; return its bootstrap address once it answers.

        `die_with_caller`: the kernel kills the broker when this process dies, however it dies (the
        demo's broker); otherwise it runs on until `stop` (`lakehouse kafka start`)."""
        pid = self._running_pid()
        if pid:
            self._log(f"broker already running (pid {pid}), waiting until it answers")
            self._wait_until_answering(pid)
            return self.bootstrap
        self.pid_file.unlink(missing_ok=True)  # stale: its process is gone
        for port in (self.port, self._controller_port()):
            if _port_in_use(self.host, port):
                raise BrokerError(
                    f"port {port} on {self.host} is in use by another process: stop it, or choose "
                    "another port with --set kafka.bootstrap_servers=127.0.0.1:<port>"
                )
        java = java_executable()
        jars("broker")  # a clear error when set-up has not run
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._write_properties()
        if not (self.data_dir / "meta.properties").exists():
            self._format(java)
        self._log(f"starting the Kafka broker on {self.bootstrap} (log: {self.log_file})")
        with open(self.log_file, "ab") as log:
            command = [*self._java_command(java), "kafka.Kafka", str(self.properties)]
            self._process = subprocess.Popen(
                dying_with_parent(command) if die_with_caller else command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # SIGINT to the CLI must not reach the broker
            )
        self.pid_file.write_text(str(self._process.pid))
        try:
            self._wait_until_answering(self._process.pid)
        except BaseException:
            self.stop(quiet=True)
            raise
        return self.bootstrap

    def stop(self, quiet: bool = False) -> bool:
        """SIGTERM, wait up to broker.stop_timeout_s, SIGKILL only then. False if it was not running."""
        pid = self._running_pid()
        if not pid:
            self.pid_file.unlink(missing_ok=True)
            if not quiet:
                self._log("broker not running")
            return False
        if not quiet:
            self._log(f"stopping the Kafka broker (pid {pid})")
        self._signal(pid, signal.SIGTERM)
        if not self._wait_for_exit(pid, self.settings.stop_timeout_s):
            self._log(f"broker did not stop within {self.settings.stop_timeout_s:g} s, killing it")
            self._signal(pid, signal.SIGKILL)
            self._wait_for_exit(pid, 10)
        self.pid_file.unlink(missing_ok=True)
        if not quiet:
            self._log("broker stopped")
        return True

    def status(self) -> BrokerStatus:
        pid = self._running_pid()
        answering = bool(pid) and _answers_metadata(self.bootstrap, timeout_s=5)
        return BrokerStatus(running=bool(pid), pid=pid, bootstrap=self.bootstrap, answering=answering)

    # -- internals --------------------------------------------------------------------------

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

    def _format(self, java: str) -> None:
        cluster_id = _new_cluster_id()
        self._log(f"formatting broker storage in {self.data_dir} (cluster id {cluster_id})")
        command = [
            *self._java_command(java),
            "kafka.tools.StorageTool",
            "format",
            "--standalone",
            "--ignore-formatted",
            "--cluster-id",
            cluster_id,
            "--config",
            str(self.properties),
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise BrokerError(
                "formatting the broker storage failed:\n" + _tail((result.stdout + result.stderr).splitlines())
            )

    def _controller_port(self) -> int:
        """The controller's port: kept from the first start (it is part of the formatted quorum)."""
        if self.properties.exists():
            for line in self.properties.read_text().splitlines():
                if line.startswith("controller.quorum.bootstrap.servers="):
                    return int(line.rsplit(":", 1)[1])
        return _free_port(self.host)

    def _write_properties(self) -> None:
        controller = f"{self.host}:{self._controller_port()}"
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.bootstrap.servers": controller,
            "listeners": f"PLAINTEXT://{self.bootstrap},CONTROLLER://{controller}",
            "advertised.listeners": f"PLAINTEXT://{self.bootstrap}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
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
            "log.retention.hours": "168",
            "log.segment.bytes": str(256 * 1024 * 1024),
        }
        text = "# Written by `lakehouse kafka start` from the project config; edits are overwritten.\n"
        self.properties.write_text(text + "".join(f"{k}={v}\n" for k, v in settings.items()))

    def _running_pid(self) -> int | None:
        """The pid in the pid file if that process is alive and is this broker, else None."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        if self._process is not None and self._process.pid == pid and self._process.poll() is not None:
            return None
        command = _command_line(pid)
        if command and "kafka.Kafka" in command and str(self.properties) in command:
            return pid
        return None

    def _wait_until_answering(self, pid: int) -> None:
        deadline = time.monotonic() + self.settings.start_timeout_s
        while time.monotonic() < deadline:
            if self._running_pid() != pid:
                raise BrokerError(f"the Kafka broker exited while starting; its log ends with:\n{self._log_tail()}")
            if _answers_metadata(self.bootstrap, timeout_s=2):
                return
            time.sleep(0.25)
        raise BrokerError(
            f"the Kafka broker did not answer on {self.bootstrap} within "
            f"{self.settings.start_timeout_s:g} s (broker.start_timeout_s); its log ends with:\n{self._log_tail()}"
        )

    def _wait_for_exit(self, pid: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process is not None and self._process.pid == pid:
                try:
                    self._process.wait(timeout=0.2)
                    return True
                except subprocess.TimeoutExpired:
                    continue
            if _command_line(pid) is None:
                return True
            time.sleep(0.2)
        return False

    @staticmethod
    def _signal(pid: int, signum: int) -> None:
        try:
            os.killpg(pid, signum)
        except ProcessLookupError:
            pass
        except PermissionError:
            os.kill(pid, signum)

    def _log_tail(self) -> str:
        try:
            return _tail(self.log_file.read_text(errors="replace").splitlines())
        except OSError:
            return "  (no log written)"


def _tail(lines: list[str], count: int = 25) -> str:
    return "\n".join("  " + line for line in lines[-count:])


def _new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, URL-safe base64 without padding, not starting with '-'."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not text.startswith("-"):
            return text


def _command_line(pid: int) -> str | None:
    """The process's command line, or None when no such process runs (zombies count as gone)."""
    proc = Path(f"/proc/{pid}")
    if proc.exists():
        try:
            if ") Z" in (proc / "stat").read_text():
                return None
            return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return None
    result = subprocess.run(["ps", "-p", str(pid), "-o", "command="], capture_output=True, text=True)
    return result.stdout.strip() or None


def _port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _answers_metadata(bootstrap: str, timeout_s: float) -> bool:
    from shared.kafka import broker_answers

    return broker_answers(bootstrap, timeout_s)
