"""The embedded S3-compatible object store: S3Proxy serving a local folder over the S3 protocol.

For local runs and the tests of the object-store deployment: a real server (S3Proxy, from the
Maven-resolved jars in `.jars/s3proxy`) speaking S3 over plain HTTP on the loopback port of
`storage.s3.endpoint`, with the bucket of `storage.root` created, its objects under
`object_store.run_dir/data`. It accepts one identity: the configured S3 credentials
(`storage.s3`, or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY), written only to its own
properties file (mode 0600). Started and stopped like the broker (`lakehouse storage ...`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from shared import PROJECT_ROOT
from shared.config import Config
from shared.errors import ConfigError
from shared.jvm import jars, java_executable
from shared.object_store import S3Access, bucket_and_key, is_s3, store_problem
from lakehouse.services.daemon import Daemon, ServiceError, require_free_ports
from lakehouse.services.tls import write_private

MAIN_CLASS = "org.gaul.s3proxy.Main"
_LOGBACK = PROJECT_ROOT / "conf" / "s3proxy-logback.xml"
_LOOPBACK = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class StoreStatus:
    running: bool
    pid: int | None
    endpoint: str
    bucket: str
    problem: str | None  # None: the bucket answers the configured credentials

    @property
    def healthy(self) -> bool:
        return self.running and self.problem is None

    def describe(self) -> str:
        if not self.running:
            return f"not running (endpoint {self.endpoint})"
        health = f"bucket {self.bucket} answering" if self.problem is None else self.problem
        return f"running, pid {self.pid}, endpoint {self.endpoint}, {health}"


class EmbeddedObjectStore:
    """Start, stop and inspect the store whose files live in `config.object_store.run_dir`."""

    def __init__(self, config: Config, log=print):
        self.root = config.storage.root
        if not is_s3(self.root):
            raise ConfigError(f"storage.root: {self.root} is not on S3; the embedded store serves s3a://bucket/prefix "
                              "roots (`--config conf/s3.yaml`)")
        self.access = S3Access.of(config.storage.s3)
        endpoint = urlparse(self.access.endpoint or "")
        if endpoint.scheme != "http" or endpoint.hostname not in _LOOPBACK or not endpoint.port:
            raise ConfigError(f"storage.s3.endpoint: the embedded store listens on this machine over plain HTTP: "
                              f"set it to http://127.0.0.1:<port> (conf/s3.yaml), not {self.access.endpoint}")
        self.host, self.port = endpoint.hostname, endpoint.port
        self.endpoint = self.access.endpoint
        self.bucket = bucket_and_key(self.root)[0]
        self.settings = config.object_store
        self.run_dir = Path(self.settings.run_dir)
        self.data_dir = self.run_dir / "data"
        self.properties = self.run_dir / "s3proxy.properties"
        self._daemon = Daemon("s3proxy", self.run_dir, marker=[MAIN_CLASS, str(self.properties)])
        self.log_file = self._daemon.log_file
        self._log = log

    def start(self, die_with_caller: bool = False) -> str:
        """Start the store unless it runs, with the bucket made; return its endpoint once the
        bucket answers the configured credentials.

        `die_with_caller`: the kernel kills it when this process dies, however it dies (a test's
        store); otherwise it runs on until `stop` (`lakehouse storage start`)."""
        if not self.access.access_key_id:
            raise ConfigError("storage.s3.access_key_id: the embedded store accepts one identity and none is set: "
                              "export AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (values of your choice)")
        (self.data_dir / self.bucket).mkdir(parents=True, exist_ok=True)  # a folder is a bucket to S3Proxy
        pid = self._daemon.running_pid()
        if pid:
            self._log(f"object store already running (pid {pid}), waiting until it answers")
        else:
            self._daemon.pid_file.unlink(missing_ok=True)  # stale: its process is gone
            require_free_ports(self.host, {"storage.s3.endpoint": self.port})
            java = java_executable()
            classpath = ":".join(str(jar) for jar in jars("s3proxy"))
            self._write_properties()
            self._log(f"starting the object store on {self.endpoint}, bucket {self.bucket} (log: {self.log_file})")
            pid = self._daemon.start([java, f"-Xmx{self.settings.heap_mb}m", "-XX:+UseSerialGC",
                                      f"-Dlogback.configurationFile={_LOGBACK}", "-cp", classpath,
                                      MAIN_CLASS, "--properties", str(self.properties)],
                                     die_with_caller=die_with_caller)
        try:
            self._wait_until_answering(pid)
        except BaseException:
            self.stop(quiet=True)
            raise
        return self.endpoint

    def stop(self, quiet: bool = False) -> bool:
        """SIGTERM, wait up to object_store.stop_timeout_s, SIGKILL only then. False if it was not running."""
        return self._daemon.stop_saying("the object store", self.settings.stop_timeout_s, log=self._log, quiet=quiet)

    def status(self) -> StoreStatus:
        pid = self._daemon.running_pid()
        problem = store_problem(self.root, self.access, timeout_s=5) if pid else None
        return StoreStatus(bool(pid), pid, self.endpoint, self.bucket, problem)

    def _write_properties(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        lines = {
            "s3proxy.endpoint": f"http://{self.host}:{self.port}",
            "s3proxy.authorization": "aws-v2-or-v4",
            "s3proxy.identity": self.access.access_key_id,
            "s3proxy.credential": self.access.secret_access_key,
            "jclouds.provider": "filesystem",
            "jclouds.filesystem.basedir": str(self.data_dir.resolve()),
        }
        write_private(self.properties, "".join(f"{key}={value}\n" for key, value in lines.items()).encode())

    def _wait_until_answering(self, pid: int) -> None:
        deadline = time.monotonic() + self.settings.start_timeout_s
        problem = None
        while time.monotonic() < deadline:
            if self._daemon.running_pid() != pid:
                raise ServiceError(f"the object store exited at start; its log ({self.log_file}) ends:\n"
                                   f"{self._daemon.log_tail()}")
            problem = store_problem(self.root, self.access, timeout_s=2)
            if problem is None:
                return
            time.sleep(0.2)
        raise ServiceError(f"the object store did not answer within {self.settings.start_timeout_s:g} s "
                           f"(object_store.start_timeout_s): {problem}; its log ({self.log_file}) ends:\n"
                           f"{self._daemon.log_tail()}")
