"""Fixtures for the whole run: one SparkSession, one real Kafka broker, per-test topics and storage.

The broker is the project's own embedded broker (lakehouse.services.broker), started once on a free port with
its files in a temporary folder, and stopped when the run ends; the pytest processes of one `make test` share
one (SHARED_BROKER).

A test's tier is its folder, and CI lets no test skip: tests/tiers.py.
"""

from __future__ import annotations

import json
import os
import random
import socket
import uuid
from pathlib import Path

import pytest

from shared.config import Config

from shared.config_loading import load_config
from shared.processes import stop_signals_interrupt
from shared.runtime import real_time_available
from tests.tiers import (AFTER_PIDS, pytest_collection_modifyitems, pytest_runtest_makereport,  # noqa: F401
                         pytest_runtest_protocol, wait_until_ended)


#: The pytest processes `make test` runs beside this one, read before the first tier that waits for them
#: takes the variable away.
AFTER_LANES = {int(pid) for pid in os.environ.get(AFTER_PIDS, "").split()}


def pytest_configure(config):
    """A run stopped with SIGTERM (a service manager, CI's timeout, `kill`) ends as one stopped with
    Ctrl-C, as a command does (`stop_signals_interrupt`): the running test's `finally` blocks and every
    fixture's teardown run, so the clusters, brokers and commands the tests started end with it."""
    stop_signals_interrupt()


#: The ports free_port has handed out in this process: two servers of one run never get the same one.
_given_ports: set[int] = set()


def free_port() -> int:
    """A loopback port free now, below the kernel's ephemeral range, not handed out before.

    Ports are often chosen long before a server binds them (the metrics ports, once per run). A port
    from the ephemeral range can meanwhile become the local end of one of the run's many client
    connections (Kafka, Spark's RPC, Py4J), and the server's bind then fails."""
    ephemeral = Path("/proc/sys/net/ipv4/ip_local_port_range")
    highest = min(int(ephemeral.read_text().split()[0]) if ephemeral.exists() else 32_768, 32_768)
    for _ in range(200):
        port = random.randrange(max(1_024, highest - 20_000), highest)
        if port in _given_ports:
            continue
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        _given_ports.add(port)
        return port
    raise RuntimeError("no free loopback port below the ephemeral range")


#: Crafted events carry fixed dates (2026-11-22 10:00 UTC) that may lie ahead of the machine's
#: clock, so silver's clock-skew expectation is widened to ten years (87600 hours) in tests.
#: The fast path runs in the mode of the interpreter's runtime: real-time in the fast path's (the
#: tests in tests/realtime), micro-batch in the medallion's (whose tests start it in-process).
#: The sessions stream is on only in the tests that are about it (each medallion run would otherwise start one
#: more stateful query: CONTRIBUTING.md, "What the suite costs").
TEST_SETTINGS = ("spark.ui_enabled=false", "quality.max_clock_skew=87600 hours",
                 f"operational.mode={'real-time' if real_time_available() else 'micro-batch'}", "sessions.enabled=false")


#: What the commands a test starts add to their Spark JVMs (drivers, and a cluster's executors): C1's
#: compiled code only. Such a JVM lives seconds to a few minutes on a handful of clicks, where C2's
#: compiling costs more CPU than its faster code wins back (a backfill's JVM took 26 CPU-s instead of 48),
#: and 2 cores are the suite's limit (CONTRIBUTING.md, "What the suite costs"). C1 alone gets a 48-MB code
#: cache, which a `run` fills within a minute and then interprets: hence the tiered default's 240 MB. The
#: run's own session, which lives as long as the run, keeps C2.
C1_ONLY = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
COMMAND_JVMS = (f"spark.conf.spark.driver.extraJavaOptions={C1_ONLY}",
                f"spark.conf.spark.executor.extraJavaOptions={C1_ONLY}")


def make_config(*overrides: str) -> Config:
    """The embedded default with test-friendly settings, plus `overrides`."""
    return load_config(overrides=[*TEST_SETTINGS, "spark.log_level=ERROR", *overrides])


@pytest.fixture(autouse=True)
def _priority_kept():
    """A test leaves the test run's priority as it found it: each process a later test starts inherits it
    (a command called in this process, tests.helpers.lakehouse_here, could lower it for good)."""
    before = os.nice(0)
    yield
    assert os.nice(0) == before, f"the test left the test run at nice {os.nice(0)}, not {before}"


@pytest.fixture(scope="session")
def spark():
    from operational.mode import fast_path_mode
    from shared.spark import spark_session

    config = make_config()
    session = spark_session(config, application="operational", application_settings=fast_path_mode(config).session_settings) \
        if real_time_available() else spark_session(config)
    yield session
    session.stop()


#: A folder that the pytest processes of one `make test` share their broker through: the one that also
#: has SHARED_BROKER_OWNER set starts it as its session starts and writes where it listens there (its
#: other pytests wait for that), and stops it once the others have ended (tiers.AFTER_PIDS).
SHARED_BROKER = "LAKEHOUSE_TESTS_BROKER"
SHARED_BROKER_OWNER = "LAKEHOUSE_TESTS_BROKER_OWNER"
#: How long a pytest waits for the broker its owner starts: the owner's own start comes first.
SHARED_BROKER_WAIT_S = 180


def _start_broker(run_dir: Path) -> tuple[list[str], object]:
    """A broker on a free port with its files in `run_dir`, killed by the kernel when this process dies
    however it dies (kill -9, its make stopped): (its --set values, the broker)."""
    from lakehouse.services.broker import EmbeddedBroker

    overrides = [f"kafka.bootstrap_servers=127.0.0.1:{free_port()}", f"broker.run_dir={run_dir}"]
    broker = EmbeddedBroker(make_config(*overrides), log=lambda message: None)
    broker.start(die_with_caller=True)
    return overrides, broker


def pytest_sessionstart(session):
    if (folder := os.environ.get(SHARED_BROKER)) and os.environ.get(SHARED_BROKER_OWNER):
        overrides, session.config.shared_broker = _start_broker(Path(folder) / "broker")
        (Path(folder) / "overrides.tmp").write_text(json.dumps(overrides))
        (Path(folder) / "overrides.tmp").rename(Path(folder) / "overrides.json")  # whole, or not there


def pytest_sessionfinish(session):
    if broker := getattr(session.config, "shared_broker", None):
        wait_until_ended(AFTER_LANES)  # the others' tests use it to their last
        broker.stop(quiet=True)


def _shared_broker(folder: Path) -> list[str]:
    from tests.helpers import wait_for

    written = folder / "overrides.json"
    wait_for(written.exists, SHARED_BROKER_WAIT_S, f"the broker in {folder}, which the pytest with "
             f"{SHARED_BROKER_OWNER} set starts (it did not start, or failed to start it)", every_s=0.2)
    return json.loads(written.read_text())


@pytest.fixture(scope="session")
def broker_overrides(request, tmp_path_factory) -> list[str]:
    """--set values that point at the run's broker (started on first use and stopped at the end, or
    shared with the other pytests of one `make test`: SHARED_BROKER), and at this process's own
    Prometheus ports for the commands (not a running lakehouse's)."""
    metrics = [f"metrics.operational_port={free_port()}", f"metrics.analytical_port={free_port()}",
               f"metrics.notify_port={free_port()}"]
    if folder := os.environ.get(SHARED_BROKER):
        yield [*_shared_broker(Path(folder)), *metrics]
        return
    overrides, broker = _start_broker(tmp_path_factory.mktemp("broker"))
    yield [*overrides, *metrics]
    broker.stop(quiet=True)


@pytest.fixture
def config(broker_overrides, tmp_path: Path) -> Config:
    """This test's config: the run's broker, its own topics and its own storage root."""
    suffix = uuid.uuid4().hex[:10]
    return make_config(
        *broker_overrides,
        f"kafka.topics.clicks=clicks-{suffix}",
        f"kafka.topics.alerts=alerts-{suffix}",
        f"storage.root={tmp_path / 'lakehouse'}",
    )


@pytest.fixture
def config_overrides(broker_overrides, config) -> list[str]:
    """The same settings as `config`, as --set arguments for the CLI."""
    return [
        *broker_overrides,
        f"kafka.topics.clicks={config.kafka.topics.clicks}",
        f"kafka.topics.alerts={config.kafka.topics.alerts}",
        f"storage.root={config.storage.root}",
        *TEST_SETTINGS,
        *COMMAND_JVMS,
    ]


@pytest.fixture
def configured(config_overrides):
    """This test's configuration with `settings` on top, its topics made: one lake per test.

        settings = configured("hot_pages.threshold=3", "operational.starting_offsets=earliest")
    """
    from shared.kafka import ensure_topics

    def configure(*settings: str, topics: tuple[str, ...] = ("clicks", "alerts")) -> Config:
        made = make_config(*config_overrides, *settings)
        ensure_topics(made.kafka, [getattr(made.kafka.topics, topic) for topic in topics])
        return made

    return configure


@pytest.fixture
def start_query():
    """`start_query(begin, *args)` calls `begin(*args)` (a query's start, e.g. `hot_pages.start`) and
    returns the query; every query started so is stopped when the test ends, however it ends."""
    started = []

    def start(begin, *args):
        query = begin(*args)
        started.append(query)
        return query

    yield start
    for query in reversed(started):
        query.stop()


#: The run's object store's identity (any values do: the embedded store accepts the configured one).
S3_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "lakehouse-tests", "AWS_SECRET_ACCESS_KEY": uuid.uuid4().hex}


@pytest.fixture(scope="session")
def object_store(tmp_path_factory, spark) -> list[str]:
    """--set values (without storage.root) for the run's S3-compatible store: the project's embedded
    S3Proxy on a free port with a bucket `tests`, started on first use, stopped at the end. Its
    credentials go into this process's environment, where every command the tests start finds them
    as a user's shell holds them; the test SparkSession gets the same S3A settings."""
    import os

    from shared.object_store import S3Access
    from lakehouse.services.object_store import EmbeddedObjectStore

    os.environ.update(S3_CREDENTIALS)
    overrides = [f"storage.s3.endpoint=http://127.0.0.1:{free_port()}", "storage.s3.path_style_access=true",
                 f"object_store.run_dir={tmp_path_factory.mktemp('s3')}"]
    settings = make_config(*overrides, "storage.root=s3a://tests/")
    store = EmbeddedObjectStore(settings, log=lambda message: None)
    store.start(die_with_caller=True)
    hadoop = spark._jsc.hadoopConfiguration()
    for key, value in S3Access.of(settings.storage.s3).spark_settings().items():
        hadoop.set(key.removeprefix("spark.hadoop."), value)
    yield overrides
    store.stop(quiet=True)


@pytest.fixture
def s3_root(object_store) -> str:
    """This test's own storage root on the run's object store."""
    return f"s3a://tests/{uuid.uuid4().hex[:10]}"


#: The bucket of the second S3 implementation (`second_object_store`).
SECOND_STORE_BUCKET = "tests-moto"


@pytest.fixture(scope="session")
def second_object_store(tmp_path_factory, spark, object_store) -> list[str]:
    """--set values (without storage.root) for a second S3 implementation, written apart from the
    first: moto's standalone server (in memory, from PyPI) on a free port, with a bucket
    SECOND_STORE_BUCKET that the test SparkSession reaches there (S3A's per-bucket settings); the
    credentials are the run's (moto takes any). Killed with this process, stopped at the end."""
    import subprocess
    import sys

    import boto3
    import botocore.exceptions

    from shared.object_store import S3Access
    from shared.processes import dying_with_parent
    from tests.helpers import wait_for

    port = free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "w") as output:
        server = subprocess.Popen(dying_with_parent([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                                     "-p", str(port)]), stdout=output, stderr=subprocess.STDOUT)
    overrides = [f"storage.s3.endpoint=http://127.0.0.1:{port}", "storage.s3.path_style_access=true"]
    access = S3Access.of(make_config(*overrides).storage.s3)
    client = boto3.client("s3", endpoint_url=access.endpoint, region_name=access.region)

    def bucket_made() -> bool:
        try:
            client.create_bucket(Bucket=SECOND_STORE_BUCKET)
            return True
        except botocore.exceptions.EndpointConnectionError:
            assert server.poll() is None, f"moto's server ended:\n{log.read_text()[-2000:]}"
            return False

    wait_for(bucket_made, 60, f"moto's server to answer on port {port}", every_s=0.2)
    hadoop = spark._jsc.hadoopConfiguration()
    for key, value in access.spark_settings().items():
        if key.startswith("spark.hadoop.fs.s3a."):
            hadoop.set(f"fs.s3a.bucket.{SECOND_STORE_BUCKET}.{key.removeprefix('spark.hadoop.fs.s3a.')}", value)
    yield overrides
    server.terminate()
    server.wait(10)


@pytest.fixture(scope="session")
def alertmanager_tools() -> dict:
    """Alertmanager's programs (`make setup` installs Debian's package); a skip with the reason when absent."""
    from lakehouse.services.alertmanager import ALERTMANAGER

    programs = ALERTMANAGER.ensure()
    if programs is None:
        pytest.skip(ALERTMANAGER.why)
    return programs


def embedded_alertmanager(run_dir: Path, *settings: str):
    """An Alertmanager with its webhook receiver on ports of their own, its files under `run_dir` (not started);
    `settings`: more --set values (alertmanager.config_file, say)."""
    from lakehouse.services.alertmanager import EmbeddedAlertmanager

    settings = make_config(f"alertmanager.run_dir={run_dir}", f"alertmanager.port={free_port()}",
                           f"alertmanager.webhook_port={free_port()}", *settings)
    return EmbeddedAlertmanager(settings, log=lambda line: None)


@pytest.fixture(scope="session")
def alertmanager(alertmanager_tools, tmp_path_factory):
    """One Alertmanager for the run (the shipped routes), dying with pytest: tests tell their alerts apart
    by their own pages."""
    embedded = embedded_alertmanager(tmp_path_factory.mktemp("alertmanager"))
    embedded.start(die_with_caller=True)
    yield embedded
    embedded.stop(quiet=True)
