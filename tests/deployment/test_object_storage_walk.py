"""DEPLOYMENT.md's object-storage walk, run as written (tests/walks.py): README's first run with every
table and checkpoint on an S3 store of its own, which `storage start` starts and `storage stop` stops;
`reconcile` compares every alerted window there, the last batch's too, which only the clean stop's
marks on the store close."""

from __future__ import annotations

import shutil
import uuid

from shared.storage import local_side
from tests.conftest import free_port
from tests.walks import walk, walk_as_written


def test_deployments_object_storage_walk_ends_with_every_alerted_window_compared(tmp_path):
    """Its time: the same first run on an S3 store of its own (S3Proxy, a broker, `run`, 10 s of traffic,
    a backfill over S3's HTTP, `reconcile`), with 5-s real-time batches instead of the shipped 30 s."""
    steps = walk("DEPLOYMENT.md", "### Object storage: S3 and S3-compatible stores, `conf/s3.yaml`")
    assert ["export", "LAKEHOUSE_CONFIG=conf/s3.yaml"] in steps and ["lakehouse", "storage", "start"] in steps
    root = f"s3a://lakehouse/walk-{uuid.uuid4().hex[:10]}"  # (its locks here: .run/remote-roots/s3a/lakehouse/...)
    try:
        walk_as_written(steps, tmp_path, f"storage.s3.endpoint=http://127.0.0.1:{free_port()}",
                        f"storage.root={root}", f"object_store.run_dir={tmp_path / 's3'}",
                        "operational.real_time.checkpoint_interval=5 seconds")
    finally:
        shutil.rmtree(local_side(root, ""), ignore_errors=True)
