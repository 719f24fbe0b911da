"""`lakehouse storage start|stop|status`: the embedded S3-compatible object store."""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.cli.common import say, service_handlers
from shared.config import Config


def _store(config: Config) -> Any:
    from lakehouse.services.object_store import EmbeddedObjectStore

    return EmbeddedObjectStore(config, log=say)


HANDLERS = service_handlers(_store)


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    storage = commands.add_parser(
        "storage", help="the embedded S3-compatible object store (S3Proxy)", parents=[common],
        description="Start, stop or inspect the embedded S3-compatible store that serves storage.root "
        "(s3a://bucket/prefix) at storage.s3.endpoint (http://127.0.0.1:<port>): `--config conf/s3.yaml`.")
    actions = storage.add_subparsers(dest="storage_command", metavar="ACTION", required=True)
    actions.add_parser(
        "start", parents=[common], help="start it with the bucket made; prints the endpoint",
        description="Start the store unless it runs, make storage.root's bucket, and print the endpoint once the "
        "bucket answers the configured credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or storage.s3)."
    ).set_defaults(handler=HANDLERS["start"])
    actions.add_parser("stop", parents=[common], help="stop it: SIGTERM, then SIGKILL only if it hangs",
                       description="Stop the store and wait until its process is gone; its objects stay."
                       ).set_defaults(handler=HANDLERS["stop"], uses_secrets=False)
    actions.add_parser("status", parents=[common], help="say whether it runs and its bucket answers (exit 1 if not)",
                       description="Print whether the store runs and storage.root's bucket answers the configured "
                       "credentials; exit 1 when not.").set_defaults(handler=HANDLERS["status"])
