"""Tables and checkpoints on S3 or an S3-compatible store (MinIO, Ceph, S3Proxy): the settings, said
once and rendered for every client that opens the store.

`storage.s3` holds what a profile may fix; each key left null falls back to the standard AWS
environment, so a user's existing settings work unchanged:

    endpoint           $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL   (null: AWS itself)
    region             $AWS_REGION, $AWS_DEFAULT_REGION           (null: us-east-1)
    access_key_id      $AWS_ACCESS_KEY_ID                         (null: the clients' own provider chain:
    secret_access_key  $AWS_SECRET_ACCESS_KEY                      profile, web identity, instance role)
    session_token      $AWS_SESSION_TOKEN
    path_style_access  (S3-compatible servers mostly need true)

Plain HTTP follows from an `http://` endpoint. The same `S3Access` becomes Spark's `fs.s3a.*`
settings (both runtimes, driver and executors), delta-rs's storage options and pyarrow's file
system (the questions answered without a JVM, and the probe every command makes before it starts).

    >>> access = S3Access.of(config.storage.s3, {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000"})
    >>> access.spark_settings()["spark.hadoop.fs.s3a.connection.ssl.enabled"]
    'false'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from pydantic import Field, SecretStr

from shared.config_layers import Section
from shared.errors import ConfigError, LakehouseError
from shared.storage import local_folder, scheme

#: The storage-root schemes the product opens: a local folder, S3 through Hadoop's S3A connector
#: (`s3://` is read as `s3a://`, as EMR and delta-rs spell it), and HDFS (Spark only: a YARN cluster's).
S3_SCHEMES = ("s3a", "s3")
LOCAL_SCHEMES = ("", "file")
SPARK_ONLY_SCHEMES = ("hdfs",)
DEFAULT_REGION = "us-east-1"


class S3Settings(Section):
    endpoint: str | None = Field(pattern=r"^https?://[^/\s]+/?$")
    region: str | None
    access_key_id: str | None
    secret_access_key: SecretStr | None
    session_token: SecretStr | None
    path_style_access: bool


class EmbeddedStoreConfig(Section):
    """The embedded S3-compatible store (`lakehouse storage ...`, lakehouse.services.object_store)."""

    run_dir: Path
    heap_mb: int = Field(ge=64)
    start_timeout_s: float = Field(gt=0)
    stop_timeout_s: float = Field(gt=0)


def require_known_scheme(root: str) -> str:
    """`root` when this product can open it, else a ConfigError naming storage.root."""
    found = scheme(root)
    if found not in (*LOCAL_SCHEMES, *S3_SCHEMES, *SPARK_ONLY_SCHEMES):
        raise ConfigError(f"storage.root: {root} has the scheme {found}://, which this product does not open: "
                          "use a local folder, s3a://bucket/prefix, s3://bucket/prefix or hdfs://...")
    if found in S3_SCHEMES and not urlparse(root).netloc:
        raise ConfigError(f"storage.root: {root} names no bucket: write s3a://bucket/prefix")
    return root


def is_s3(root: str) -> bool:
    return scheme(root) in S3_SCHEMES


def bucket_and_key(root: str) -> tuple[str, str]:
    """('bucket', 'prefix/x') for `s3a://bucket/prefix/x`."""
    parsed = urlparse(root)
    return parsed.netloc, parsed.path.strip("/")


@dataclass(frozen=True)
class S3Access:
    """How to reach the store: the settings with the environment's fallbacks applied."""

    endpoint: str | None
    region: str
    access_key_id: str | None
    secret_access_key: str | None = field(repr=False)  # never in a log line or a traceback
    session_token: str | None = field(repr=False)
    path_style_access: bool

    @classmethod
    def of(cls, settings: S3Settings, environment: Mapping[str, str] | None = None) -> "S3Access":
        env = os.environ if environment is None else environment

        def secret(value: SecretStr | None, variable: str) -> str | None:
            return value.get_secret_value() if value is not None else env.get(variable) or None

        access = cls(
            endpoint=(settings.endpoint or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None),
            region=settings.region or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or DEFAULT_REGION,
            access_key_id=settings.access_key_id or env.get("AWS_ACCESS_KEY_ID") or None,
            secret_access_key=secret(settings.secret_access_key, "AWS_SECRET_ACCESS_KEY"),
            session_token=secret(settings.session_token, "AWS_SESSION_TOKEN"),
            path_style_access=settings.path_style_access,
        )
        if bool(access.access_key_id) != bool(access.secret_access_key):
            given, missing = (("access_key_id", "secret_access_key") if access.access_key_id
                              else ("secret_access_key", "access_key_id"))
            raise ConfigError(f"storage.s3.{missing}: not set, but storage.s3.{given} is (or its AWS_ variable): "
                              "give both, or neither to use the AWS provider chain")
        return access

    @property
    def plain_http(self) -> bool:
        return bool(self.endpoint) and self.endpoint.startswith("http://")

    def spark_settings(self) -> dict[str, str]:
        """Hadoop's S3A settings as Spark passes them to the driver and every executor; `s3://`
        opened by S3A too."""
        prefix = "spark.hadoop.fs.s3a."
        settings = {
            "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "spark.hadoop.fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
            f"{prefix}endpoint.region": self.region,
            f"{prefix}path.style.access": str(self.path_style_access).lower(),
            f"{prefix}connection.ssl.enabled": str(not self.plain_http).lower(),
            # A local file (the state store's files of each batch) uploaded as every other write is, by the
            # synchronous client, not the transfer manager's asynchronous (Netty) one, which took moto's
            # interim `100 Continue` for its answer and failed ("Status Code: 100"): the SDK asks for one on
            # every upload, whatever fs.s3a.connection.expect.continue says (DEPLOYMENT.md, "Stores tested").
            f"{prefix}optimized.copy.from.local.enabled": "false",
        }
        if self.endpoint:
            settings[f"{prefix}endpoint"] = self.endpoint
        if self.access_key_id:
            settings |= {f"{prefix}access.key": self.access_key_id, f"{prefix}secret.key": self.secret_access_key}
            if self.session_token:
                settings |= {f"{prefix}session.token": self.session_token, f"{prefix}aws.credentials.provider":
                             "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"}
        return settings

    def delta_rs_options(self) -> dict[str, str]:
        """delta-rs's storage options (object_store's AWS keys)."""
        options = {"AWS_REGION": self.region,
                   "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": str(not self.path_style_access).lower()}
        if self.endpoint:
            options |= {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ALLOW_HTTP": str(self.plain_http).lower()}
        if self.access_key_id:
            options |= {"AWS_ACCESS_KEY_ID": self.access_key_id, "AWS_SECRET_ACCESS_KEY": self.secret_access_key}
            if self.session_token:
                options["AWS_SESSION_TOKEN"] = self.session_token
        return options

    def pyarrow_filesystem(self, timeout_s: float = 10.0) -> Any:
        """pyarrow's S3 file system for these settings, answering within `timeout_s` or failing."""
        from pyarrow import fs

        endpoint = urlparse(self.endpoint) if self.endpoint else None
        return fs.S3FileSystem(
            access_key=self.access_key_id, secret_key=self.secret_access_key, session_token=self.session_token,
            region=self.region, endpoint_override=endpoint.netloc if endpoint else None,
            scheme=endpoint.scheme if endpoint else "https",
            force_virtual_addressing=not self.path_style_access and endpoint is None,
            connect_timeout=timeout_s, request_timeout=timeout_s,
            retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=1))


def root_file_system(root: str, s3: S3Settings | None) -> tuple[Any, str] | None:
    """pyarrow's file system that holds the storage root, and the root's path in it: S3 with the `s3`
    settings, or this machine's for a local root; None for a root only Spark opens (hdfs://). What reads
    or writes under the root without Spark uses it (SQL on the lake, the stopped marks of the checkpoints).

        >>> files, base = root_file_system("/tmp/lakehouse", None)
        >>> base
        '/tmp/lakehouse'
    """
    from pyarrow import fs

    if is_s3(root):
        if s3 is None:
            raise ConfigError(f"storage.root: {root} is on S3, and no storage.s3 settings were given to reach it")
        bucket, key = bucket_and_key(root)
        return S3Access.of(s3).pyarrow_filesystem(), f"{bucket}/{key}".rstrip("/")
    local = local_folder(root)
    # A file system of pyarrow's own: delta-rs's would abort the process at its exit.
    return None if local is None else (fs.LocalFileSystem(), str(local.resolve()))


class ObjectStoreError(LakehouseError):
    """The object store under storage.root cannot be used: unreachable, refused, or no such bucket."""


_reachable: set[tuple[str, S3Access]] = set()


def require_reachable(root: str, settings: S3Settings) -> None:
    """For an S3 root: ObjectStoreError, in one line, unless its bucket answers (once per process)."""
    if not is_s3(root):
        return
    access = S3Access.of(settings)
    bucket = bucket_and_key(root)[0]
    if (bucket, access) in _reachable:
        return
    problem = store_problem(root, access)
    if problem:
        raise ObjectStoreError(problem)
    _reachable.add((bucket, access))


def store_problem(root: str, access: S3Access, timeout_s: float = 10.0) -> str | None:
    """None when `root`'s bucket answers these credentials, else what is wrong, in one line."""
    bucket, _ = bucket_and_key(root)
    where = access.endpoint or f"AWS S3 ({access.region})"
    try:
        info = access.pyarrow_filesystem(timeout_s).get_file_info(bucket)
    except OSError as error:
        text = str(error)
        lowered = text.lower()
        if any(word in lowered for word in ("access_denied", "accessdenied", "invalidaccesskeyid", "signature",
                                            "forbidden", "http status 403")):
            return (f"the object store at {where} refuses these credentials for bucket {bucket}: check "
                    "storage.s3.access_key_id / secret_access_key (or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)")
        if any(word in lowered for word in ("curl", "connect", "resolve", "timed out", "timeout", "network")):
            return (f"no object store answers at {where}: start it (`lakehouse storage start` for the embedded "
                    f"one) or fix storage.s3.endpoint (or AWS_ENDPOINT_URL)")
        return f"the object store at {where} cannot open bucket {bucket}: {text.splitlines()[0]}"
    if info.type.name == "NotFound":
        return (f"the bucket {bucket} does not exist at {where}: create it (`lakehouse storage start` creates "
                "the embedded store's) or fix storage.root")
    return None
