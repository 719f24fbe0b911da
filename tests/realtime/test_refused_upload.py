"""A real-time batch end whose state upload the store refuses is on the console at once: the fast path
runs as `run` runs it (`supervise`) on an object store behind a proxy that, once the query has ended a
batch, answers every write under its state folder with 403 AccessDenied (as a bucket policy that
denies them would). Within one checkpoint interval the console says which query failed and the store's
own words; once the store takes the uploads again, the restart from the checkpoint ends batches again."""

from __future__ import annotations

import time
import uuid

import boto3

from operational import hot_pages
from shared.streaming import supervise
from tests.conftest import S3_CREDENTIALS
from tests.refusing_store import RefusingStore

#: The run's object store, reached by the query through the proxy: a bucket of its own, which S3A's
#: per-bucket settings send to the proxy while every other bucket of the run goes to the store.
BUCKET = "tests-refused-uploads"
CHECKPOINT_INTERVAL_S = 5
#: How late the first batch end after the arming may come, beyond its checkpoint interval.
BATCH_END_SLACK_S = 5


def test_a_state_upload_the_store_refuses_is_on_the_console_within_one_checkpoint_interval(
        spark, configured, object_store):
    """Its time: the query's start and first batch on the store, a refused batch end, the restart's
    backoff and its first batch."""
    endpoint = next(item.split("=", 1)[1] for item in object_store if item.startswith("storage.s3.endpoint="))
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      aws_access_key_id=S3_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                      aws_secret_access_key=S3_CREDENTIALS["AWS_SECRET_ACCESS_KEY"])
    if BUCKET not in {bucket["Name"] for bucket in s3.list_buckets()["Buckets"]}:
        s3.create_bucket(Bucket=BUCKET)

    with RefusingStore(endpoint) as store:
        spark._jsc.hadoopConfiguration().set(f"fs.s3a.bucket.{BUCKET}.endpoint", store.endpoint)
        config = configured("operational.mode=real-time", "operational.starting_offsets=earliest",
                            f"operational.real_time.checkpoint_interval={CHECKPOINT_INTERVAL_S} seconds",
                            "operational.restart_backoff_s=1", "operational.status_interval_s=0.5",
                            *object_store, f"storage.s3.endpoint={store.endpoint}",
                            f"storage.root=s3a://{BUCKET}/{uuid.uuid4().hex[:10]}")
        said: list[tuple[float, str]] = []
        armed_at: list[float] = []

        def hot_pages_query():
            return next((query for query in spark.streams.active if query.name == hot_pages.STREAM.name), None)

        def failed_lines() -> list[tuple[float, str]]:
            return [(at, line) for at, line in said if line.startswith("[hot_pages] failed (")]

        def refused_then_running_again() -> bool:
            query = hot_pages_query()
            if not armed_at:
                if query is not None and query.lastProgress is not None:  # it has ended a batch: refuse the next end
                    store.refuse = lambda path: "/_checkpoints/hot_pages/state/" in path
                    armed_at.append(time.monotonic())
                return False
            if not failed_lines():
                return time.monotonic() - armed_at[0] > 120  # (the assertions below say what did not happen)
            store.refuse = None
            restarted = [line for _, line in said if line.startswith("[hot_pages] started")][1:]
            return bool(restarted) and query is not None and query.lastProgress is not None

        supervise({"hot_pages": lambda: hot_pages.start(spark, config)}, config.operational, seconds=300,
                  report=lambda line: said.append((time.monotonic(), line)), status_lines=False,
                  until=refused_then_running_again,
                  real_time_batch=config.operational.real_time.checkpoint_interval)

    lines = "\n".join(line for _, line in said)
    assert armed_at and store.refused, f"no upload was refused:\n{lines}"
    (failed_at, failed), *_ = failed_lines() or [(None, f"no failure on the console:\n{lines}")]
    assert failed_at is not None, failed
    refused_at = store.refused[0][0]  # the batch end's first upload, the next batch end after the arming
    assert refused_at - armed_at[0] <= CHECKPOINT_INTERVAL_S + BATCH_END_SLACK_S, "the refused batch end came late"
    assert failed_at - refused_at <= CHECKPOINT_INTERVAL_S, (failed_at - refused_at, failed)
    assert "AccessDenied" in failed and "/_checkpoints/hot_pages/state/" in failed, failed
    assert len([line for _, line in said if line.startswith("[hot_pages] started")]) >= 2, lines
