"""S3 settings: the profile's keys, the AWS environment's fallbacks, each client's rendering, and the
roots and settings refused before anything starts."""

import pytest

from shared.checkpoint_locks import exclusive, holder
from shared.config_loading import load_config
from shared.errors import ConfigError, LakehouseError
from shared.object_store import S3Access, bucket_and_key, is_s3

S3_PROFILE = ["storage.root=s3a://lake-bucket/prod/clicks", "storage.s3.path_style_access=true"]


def access(*overrides: str, environment: dict[str, str] | None = None) -> S3Access:
    return S3Access.of(load_config(None, [*S3_PROFILE, *overrides]).storage.s3, environment or {})


def test_the_aws_environment_fills_what_the_profile_leaves_null():
    found = access(environment={"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1",
                                "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalr"})

    assert (found.endpoint, found.region, found.access_key_id, found.secret_access_key) == (
        "http://127.0.0.1:9000", "eu-west-1", "AKIDEXAMPLE", "wJalr")
    assert found.plain_http


def test_the_profile_wins_over_the_environment_and_the_s3_specific_endpoint_over_the_general_one():
    environment = {"AWS_ENDPOINT_URL": "http://general:1", "AWS_ENDPOINT_URL_S3": "https://s3-only:2",
                   "AWS_DEFAULT_REGION": "ap-south-1"}

    assert access(environment=environment).endpoint == "https://s3-only:2"
    assert access(environment=environment).region == "ap-south-1"
    assert access("storage.s3.endpoint=http://mine:3", environment=environment).endpoint == "http://mine:3"
    assert access(environment={}).region == "us-east-1"


def test_spark_gets_s3a_settings_for_plain_http_path_style_and_static_keys():
    settings = access(environment={"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "id",
                                   "AWS_SECRET_ACCESS_KEY": "secret"}).spark_settings()

    assert settings["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert settings["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert settings["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert (settings["spark.hadoop.fs.s3a.access.key"], settings["spark.hadoop.fs.s3a.secret.key"]) == ("id", "secret")
    assert settings["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"  # s3:// roots too


def test_without_keys_every_client_keeps_its_own_provider_chain():
    found = access(environment={})

    assert not any("access.key" in key or "secret" in key for key in found.spark_settings())
    assert "AWS_ACCESS_KEY_ID" not in found.delta_rs_options()
    assert "spark.hadoop.fs.s3a.endpoint" not in found.spark_settings()  # AWS itself


def test_delta_rs_gets_the_same_endpoint_credentials_and_addressing():
    options = access(environment={"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "id",
                                  "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"}).delta_rs_options()

    assert options == {"AWS_REGION": "us-east-1", "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
                       "AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ALLOW_HTTP": "true",
                       "AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret", "AWS_SESSION_TOKEN": "token"}


def test_a_key_without_its_secret_names_the_missing_key():
    with pytest.raises(ConfigError, match=r"storage\.s3\.secret_access_key: not set"):
        access(environment={"AWS_ACCESS_KEY_ID": "id"})


def test_a_secret_comes_from_the_environment_by_name(monkeypatch):
    monkeypatch.setenv("MY_S3_SECRET", "from-env")

    found = access("storage.s3.access_key_id=id", "storage.s3.secret_access_key=${MY_S3_SECRET}")

    assert found.secret_access_key == "from-env"


@pytest.mark.parametrize("root, message", [
    ("gs://bucket/x", r"storage\.root: gs://bucket/x has the scheme gs://"),
    ("s3a:///x", r"storage\.root: s3a:///x names no bucket"),
])
def test_a_root_this_product_cannot_open_is_refused_with_its_key(root, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, [f"storage.root={root}"])


def test_an_endpoint_that_is_not_a_url_names_its_key():
    with pytest.raises(ConfigError, match=r"storage\.s3\.endpoint"):
        load_config(None, ["storage.s3.endpoint=127.0.0.1:9000"])


def test_roots_and_buckets():
    assert is_s3("s3a://b/x") and is_s3("s3://b/x") and not is_s3("/tmp/x") and not is_s3("file:/tmp/x")
    assert bucket_and_key("s3a://bucket/a/b/") == ("bucket", "a/b")


def test_an_object_store_roots_checkpoints_are_locked_on_this_machine(tmp_path, monkeypatch):
    monkeypatch.setattr("shared.storage.REMOTE_ROOTS_HERE", tmp_path)
    root = "s3a://bucket-for-locks/prefix"

    assert holder(root, "bronze_clicks") == "unknown", "nobody here holds it: it may run elsewhere"
    with exclusive(root, ["bronze_clicks"]):
        assert (tmp_path / "s3a" / "bucket-for-locks" / "prefix" / "_checkpoints" / "bronze_clicks.lock").exists()
        with pytest.raises(LakehouseError, match="checkpoint .* is in use by pid"):
            with exclusive(root, ["bronze_clicks"]):
                pass


def test_the_secret_shows_neither_in_the_settings_repr_nor_in_the_effective_config(monkeypatch):
    from shared.config_loading import render

    monkeypatch.setenv("MY_S3_SECRET", "do-not-print-me")
    config = load_config(None, [*S3_PROFILE, "storage.s3.access_key_id=id",
                                "storage.s3.secret_access_key=${MY_S3_SECRET}"])

    assert S3Access.of(config.storage.s3, {}).secret_access_key == "do-not-print-me"
    assert "do-not-print-me" not in repr(S3Access.of(config.storage.s3, {})) + render(config)
