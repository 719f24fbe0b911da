"""Config: layering, typed overrides, secrets from the environment, errors that name the key."""

import types
from datetime import timedelta
from pathlib import Path

import pytest

from shared import PROJECT_ROOT
from shared.config_loading import load_config, render
from shared.config_layers import apply_override, as_overrides, read_yaml
from shared.storage import local_folder
from shared.errors import ConfigError


def test_embedded_default_has_the_contract_keys():
    config = load_config()

    assert config.kafka.topics.clicks == "page-clicks"
    assert config.kafka.topics.alerts == "hot-pages"
    assert config.hot_pages.window == timedelta(seconds=5)
    assert config.hot_pages.watermark == timedelta(seconds=5)
    assert config.hot_pages.threshold == 5000
    assert config.analytical.watermark == timedelta(minutes=10)
    assert config.kafka.partitions == 2


def test_a_file_states_only_what_differs_and_set_wins_over_it(tmp_path):
    profile = tmp_path / "profile.yaml"
    profile.write_text("hot_pages:\n  threshold: 100\nkafka:\n  topics:\n    alerts: my-alerts\n")

    config = load_config(profile, ["hot_pages.threshold=7", "hot_pages.window=10s"])

    assert config.hot_pages.threshold == 7
    assert config.hot_pages.window == timedelta(seconds=10)
    assert config.kafka.topics.alerts == "my-alerts"
    assert config.kafka.topics.clicks == "page-clicks"


def test_config_file_from_the_environment(tmp_path, monkeypatch):
    profile = tmp_path / "profile.yaml"
    profile.write_text("hot_pages:\n  threshold: 123\n")
    monkeypatch.setenv("LAKEHOUSE_CONFIG", str(profile))

    assert load_config().hot_pages.threshold == 123


def test_relative_paths_are_taken_from_the_project_root(tmp_path):
    config = load_config(overrides=["storage.root=some/where", f"broker.run_dir={tmp_path}"])

    assert config.storage.root.endswith("/some/where") and config.storage.root.startswith("/")
    assert load_config(overrides=["storage.root=s3a://bucket/x"]).path("gold", "t") == "s3a://bucket/x/gold/t"


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ("hot_pages.threshold=lots", ["hot_pages.threshold", "lots"]),
        ("hot_pages.threshold=-1", ["hot_pages.threshold", "greater than or equal to 0"]),
        ("hot_pages.window=5 parsecs", ["hot_pages.window", "5 parsecs"]),
        ("hot_pages.window=0s", ["hot_pages.window", "must be longer than 0"]),
        ("analytical.watermark=soon", ["analytical.watermark"]),
        ("kafka.bootstrap_servers=localhost", ["kafka.bootstrap_servers"]),
        ("kafka.topics.clicks=", ["kafka.topics.clicks"]),
        ("kafka.partitions=0", ["kafka.partitions"]),
        ("spark.state_store=memory", ["spark.state_store", "rocksdb"]),
        ("hot_pages.treshold=5", ["hot_pages.treshold", "unknown key"]),
        ("kafka.security.protocol=SASL_SSL", ["kafka.security", "sasl_mechanism", "sasl_password"]),
        ("hot_pages=3", ["hot_pages", "section"]),
        ("hot_pages.watermark=later", ["hot_pages.watermark", "later"]),
        ("hot_pages.watermark=-5 seconds", ["hot_pages.watermark", "-5 seconds"]),
        ("kafka.security.protocol=TLS", ["kafka.security.protocol", "'SSL'", "TLS"]),
        ("operational.mode=fast", ["operational.mode", "'real-time' or 'micro-batch'", "fast"]),
        ("operational.real_time.checkpoint_interval=2 seconds",
         ["operational.real_time.checkpoint_interval", "at least 5 seconds"]),
        ("operational.real_time.task_slots=1", ["operational.real_time.task_slots", "greater than or equal to 2"]),
        ("operational.max_restarts=-1", ["operational.max_restarts", "greater than or equal to 0"]),
        ("operational.restart_backoff_s=-2", ["operational.restart_backoff_s", "greater than or equal to 0"]),
        ("quality.max_clock_skew=a while", ["quality.max_clock_skew", "a while"]),
        ("quality.earliest_event_time=2020-01-01T00:00:00", ["quality.earliest_event_time", "time zone"]),
        ("quality.policies.silver_clicks=ignore", ["quality.policies.silver_clicks", "'warn', 'drop' or 'fail'"]),
        ("analytical.vacuum_retention=soon", ["analytical.vacuum_retention", "soon"]),
        ("metrics.operational_port=0", ["metrics.operational_port", "greater than or equal to 1"]),
        ("metrics.analytical_port=70000", ["metrics.analytical_port", "less than or equal to 65535"]),
    ],
)
def test_a_bad_value_names_the_key_and_what_is_wrong(override, names):
    with pytest.raises(ConfigError) as error:
        load_config(overrides=[override])

    for name in names:
        assert name in str(error.value)


def test_a_set_without_equals_is_explained():
    with pytest.raises(ConfigError, match="expected dotted.key=value"):
        load_config(overrides=["hot_pages.threshold"])


def test_a_missing_or_broken_file_is_explained(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("hot_pages: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(broken)


def test_secrets_come_from_the_environment_and_are_masked(monkeypatch):
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "clicks-app")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "s3cr3t-value")

    config = load_config("conf/cluster.yaml")

    assert config.kafka.security.sasl_password.get_secret_value() == "s3cr3t-value"
    assert "s3cr3t-value" not in render(config)
    assert config.kafka.security.sasl_username == "clicks-app"


def test_a_missing_environment_variable_names_the_key_and_the_variable(monkeypatch):
    monkeypatch.delenv("KAFKA_SASL_PASSWORD", raising=False)
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "clicks-app")

    with pytest.raises(ConfigError, match=r"kafka\.security\.sasl_password: environment variable KAFKA_SASL_PASSWORD"):
        load_config("conf/cluster.yaml")


def test_security_is_rendered_for_both_clients(monkeypatch):
    from shared.kafka_settings import client_settings, spark_options

    monkeypatch.setenv("KAFKA_SASL_USERNAME", "clicks-app")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", 'pa"ss')
    kafka = load_config("conf/cluster.yaml").kafka

    python_side = client_settings(kafka)
    spark_side = spark_options(kafka)

    assert python_side["security_protocol"] == spark_side["kafka.security.protocol"] == "SASL_SSL"
    assert python_side["sasl_plain_password"] == 'pa"ss'
    assert 'password="pa\\"ss";' in spark_side["kafka.sasl.jaas.config"]
    assert "ScramLoginModule" in spark_side["kafka.sasl.jaas.config"]
    assert spark_side["kafka.ssl.truststore.location"] == python_side["ssl_cafile"] == "/etc/kafka/ca.pem"


def test_with_overrides_revalidates_and_keeps_secrets(monkeypatch):
    from shared.config_loading import with_overrides

    monkeypatch.setenv("KAFKA_SASL_USERNAME", "u")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "p")
    config = load_config("conf/cluster.yaml")

    changed = with_overrides(config, ["kafka.topics.clicks=run-1", "hot_pages.window=10s"])

    assert changed.kafka.topics.clicks == "run-1" and changed.hot_pages.window == timedelta(seconds=10)
    assert changed.kafka.security.sasl_password.get_secret_value() == "p"
    with pytest.raises(ConfigError, match="hot_pages.threshold"):
        with_overrides(config, ["hot_pages.threshold=-5"])


def test_a_child_gets_the_whole_configuration_in_one_file_without_the_secrets(monkeypatch):
    from shared.config_loading import with_overrides, write_for_child

    monkeypatch.setenv("KAFKA_SASL_USERNAME", "u")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "the-password")
    config = with_overrides(load_config("conf/cluster.yaml", ["hot_pages.threshold=77"]), ["kafka.topics.clicks=run-1"])

    handed = write_for_child(config)

    assert "the-password" not in handed.read_text() and "${KAFKA_SASL_PASSWORD}" in handed.read_text()
    assert handed.stat().st_mode & 0o077 == 0 or handed.parent.stat().st_mode & 0o077 == 0
    read_by_the_child = load_config(handed)
    assert read_by_the_child == config
    assert (read_by_the_child.kafka.topics.clicks, read_by_the_child.hot_pages.threshold) == ("run-1", 77)
    assert read_by_the_child.kafka.security.sasl_password.get_secret_value() == "the-password"


@pytest.mark.parametrize("root, folder", [
    ("/data/lakehouse", "/data/lakehouse"), ("file:/data/lakehouse", "/data/lakehouse"),
    ("file:///data/lakehouse", "/data/lakehouse"), ("s3a://bucket/lakehouse", None),
    ("hdfs://namenode:8020/lakehouse", None), ("abfss://c@account.dfs.core.windows.net/x", None),
])
def test_one_test_says_which_storage_roots_are_local_folders(root, folder):
    assert local_folder(root) == (None if folder is None else Path(folder))


def test_a_file_uri_root_is_not_taken_for_a_path_under_the_project():
    assert load_config(overrides=["storage.root=file:/data/lakehouse"]).storage.root == "file:/data/lakehouse"
    assert load_config(overrides=["storage.root=relative/lake"]).storage.root == str(PROJECT_ROOT / "relative/lake")


@pytest.mark.parametrize("profile", sorted(path.name for path in (PROJECT_ROOT / "conf").glob("*.yaml")))
def test_every_shipped_profile_is_a_valid_config(profile, monkeypatch):
    """The profiles that cannot run here (a multi-node cluster, YARN, Kubernetes) are at least valid
    configs: every key known, every value of the right type, the paths' applications' settings strings."""
    monkeypatch.setenv("KAFKA_SASL_USERNAME", "clicks-app")
    monkeypatch.setenv("KAFKA_SASL_PASSWORD", "p")

    config = load_config(PROJECT_ROOT / "conf" / profile)

    from shared.spark import spark_conf

    for application in ("operational", "analytical"):
        settings = spark_conf(config, class_archive=False, application=application)
        assert settings["spark.app.name"].endswith(application)
        assert all(settings[key] == str(value) for key, value in getattr(config, application).spark_conf.items())


def test_state_rows_are_counted_only_when_the_configuration_asks_in_either_application():
    from shared.spark import spark_conf

    counting = "spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows"
    asked = load_config(None, ["spark.rocksdb.count_rows=true"])
    for application in ("operational", "analytical"):
        assert spark_conf(load_config(), class_archive=False, application=application)[counting] == "false"
        assert spark_conf(asked, class_archive=False, application=application)[counting] == "true"


def test_the_jvm_keeps_more_generated_classes_than_a_medallion_batch_compiles_unless_the_configuration_says():
    from shared.spark import CODEGEN_CACHE_ENTRIES, spark_conf

    for application in ("operational", "analytical", None):
        assert int(spark_conf(load_config(), class_archive=False, application=application)[CODEGEN_CACHE_ENTRIES]) >= 400
    assert spark_conf(load_config(None, [f"spark.conf.{CODEGEN_CACHE_ENTRIES}=50"]),
                      class_archive=False)[CODEGEN_CACHE_ENTRIES] == "50"


@pytest.mark.parametrize("key", ["spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"])
def test_the_configurations_jvm_options_join_the_projects_instead_of_replacing_them(key):
    from shared.spark import spark_conf

    shipped = spark_conf(load_config(), class_archive=False)[key].split()
    assert "-XX:-DontCompileHugeMethods" in shipped  # the parse's generated code is JIT-compiled

    options = spark_conf(load_config(None, [f"spark.conf.{key}=-Djavax.net.ssl.trustStore=/etc/store.jks"]),
                         class_archive=False)[key].split()
    assert "-XX:-DontCompileHugeMethods" in options and "-Djavax.net.ssl.trustStore=/etc/store.jks" in options


@pytest.mark.parametrize("key", ["spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"])
def test_the_medallions_jvms_run_the_parallel_collector_unless_the_configuration_names_one(key):
    from shared.spark import spark_conf

    def collectors(application: str | None, *overrides: str) -> list[str]:
        options = spark_conf(load_config(None, list(overrides)), class_archive=False, application=application)[key]
        return [option for option in options.split() if option.startswith("-XX:+Use") and option.endswith("GC")]

    assert collectors("analytical") == ["-XX:+UseParallelGC"]
    assert collectors("operational") == collectors(None) == []  # the JVM's default, G1: the fast path's short pauses
    assert collectors("analytical", f"spark.conf.{key}=-XX:+UseG1GC -Xlog:gc") == ["-XX:+UseG1GC"]  # HotSpot takes one
    assert collectors("analytical", f"spark.conf.{key}=-Xlog:gc") == ["-XX:+UseParallelGC"]


def test_commands_that_use_no_credential_load_a_profile_without_them(monkeypatch):
    monkeypatch.delenv("KAFKA_SASL_USERNAME", raising=False)
    monkeypatch.delenv("KAFKA_SASL_PASSWORD", raising=False)

    with pytest.raises(ConfigError, match="KAFKA_SASL_USERNAME is not set"):
        load_config(PROJECT_ROOT / "conf" / "secured.yaml")
    config = load_config(PROJECT_ROOT / "conf" / "secured.yaml", secrets=False)  # `lakehouse kafka stop`
    assert config.kafka.security.sasl_username == "${KAFKA_SASL_USERNAME}"


def test_a_layer_as_set_items_gives_the_same_config_as_the_file():
    demo = PROJECT_ROOT / "conf" / "demo.yaml"
    items = as_overrides(read_yaml(demo))
    assert "kafka.topics.clicks=demo-page-clicks" in items
    assert load_config(None, items) == load_config(demo)
    nested = {"a": {"flag": True, "none": None, "list": [1, 2], "colon": "x: y", "duration": "30s"}}
    rebuilt: dict = {}
    for item in as_overrides(nested):
        apply_override(rebuilt, item)
    assert rebuilt == nested


def test_tls_without_sasl_gives_every_client_tls_and_the_ca_and_no_credentials(tmp_path):
    """`kafka.security.protocol: SSL`: encrypted, the broker authenticated by the CA, no SASL login."""
    from shared.kafka_settings import client_settings, producer_settings, spark_options

    ca = tmp_path / "ca.pem"
    kafka = load_config(overrides=["kafka.security.protocol=SSL", f"kafka.security.ssl_cafile={ca}"]).kafka

    assert client_settings(kafka)["security_protocol"] == "SSL" and client_settings(kafka)["ssl_cafile"] == str(ca)
    spark = spark_options(kafka)
    assert spark["kafka.security.protocol"] == "SSL" and spark["kafka.ssl.truststore.location"] == str(ca)
    assert producer_settings(kafka)["security.protocol"] == "ssl"
    rendered = {**client_settings(kafka), **spark, **producer_settings(kafka)}
    assert [key for key in rendered if "sasl" in key.lower()] == []



def _constrained_keys(model=None, prefix: str = ""):
    """(dotted key, a value outside its declared constraint) for every key of the configuration model
    that constrains its value: a choice, a bound, a length, a pattern or a duration."""
    import typing

    import annotated_types
    from pydantic import BaseModel

    from shared.config import Config

    for name, field in (model or Config).model_fields.items():
        key, choices = prefix + name, [a for a in typing.get_args(field.annotation) if a is not type(None)]
        inner = choices if typing.get_origin(field.annotation) in (typing.Union, types.UnionType) else [field.annotation]
        if len(inner) == 1 and isinstance(inner[0], type) and issubclass(inner[0], BaseModel):
            yield from _constrained_keys(inner[0], key + ".")
            continue
        if any(typing.get_origin(kind) is typing.Literal for kind in inner):
            yield key, "no-such-choice"
        elif timedelta in inner:
            yield key, "soon"
        for constraint in field.metadata:
            bad = {annotated_types.Ge: lambda c: c.ge - 1, annotated_types.Gt: lambda c: c.gt,
                   annotated_types.Le: lambda c: c.le + 1, annotated_types.Lt: lambda c: c.lt,
                   annotated_types.MinLen: lambda c: ""}.get(type(constraint))
            if bad is not None:
                yield key, str(bad(constraint))
            elif getattr(constraint, "pattern", None):
                yield key, "!not valid!"


@pytest.mark.parametrize(("key", "value"), sorted(set(_constrained_keys())))
def test_every_constrained_key_refuses_a_value_outside_its_constraint_naming_the_key(key, value):
    with pytest.raises(ConfigError) as error:
        load_config(overrides=[f"{key}={value}"])
    assert key in str(error.value)


@pytest.mark.parametrize("key", ["spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"])
def test_a_brief_commands_jvms_compile_with_c1_only_and_the_streams_with_both(key):
    from shared.spark import spark_conf

    def options(brief: bool) -> list[str]:
        return spark_conf(load_config(), class_archive=False, application="analytical", brief=brief)[key].split()

    assert "-XX:TieredStopAtLevel=1" in options(brief=True) and "-XX:-DontCompileHugeMethods" in options(brief=True)
    assert not [option for option in options(brief=False) if option.startswith("-XX:TieredStopAtLevel")]
