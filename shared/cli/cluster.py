"""`lakehouse cluster start|stop|status`: the embedded Spark standalone cluster."""

from __future__ import annotations

import argparse
import json
from typing import Any

from shared.cli.common import say
from shared.config import Config


def cmd_cluster_start(config: Config, args: argparse.Namespace) -> int:
    from shared.services.cluster import StandaloneCluster

    cluster = StandaloneCluster(config, log=say)
    print(cluster.start())
    say(f"web UI: {cluster.web_ui}; run commands on it with --config conf/standalone.yaml")
    return 0


def cmd_cluster_stop(config: Config, args: argparse.Namespace) -> int:
    from shared.services.cluster import StandaloneCluster

    StandaloneCluster(config, log=say).stop()
    return 0


def cmd_cluster_status(config: Config, args: argparse.Namespace) -> int:
    from shared.services.cluster import StandaloneCluster

    status = StandaloneCluster(config, log=say).status()
    print(json.dumps(status.as_dict(), indent=2) if args.format == "json" else status.describe())
    return 0 if status.healthy else 1


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    cluster = commands.add_parser(
        "cluster", help="the embedded Spark standalone cluster (a master and workers)", parents=[common],
        description="Start, stop or inspect a Spark standalone cluster on this machine, from the installed "
        "pyspark: a master and cluster.workers workers (ports, cores and memory from the cluster section). "
        "conf/standalone.yaml runs every command on it.")
    actions = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    actions.add_parser(
        "start", parents=[common], help="start the master and workers; prints the master URL",
        description="Start the master and the workers that do not run yet, wait until every worker has "
        "registered (cluster.start_timeout_s), and print the master URL.",
    ).set_defaults(handler=cmd_cluster_start, uses_secrets=False)
    actions.add_parser(
        "stop", parents=[common], help="stop the workers (and their executors), then the master",
        description="Stop every worker with the executors it launched, then the master: SIGTERM, then SIGKILL "
        "only if one hangs (cluster.stop_timeout_s).",
    ).set_defaults(handler=cmd_cluster_stop, uses_secrets=False)
    status = actions.add_parser(
        "status", parents=[common], help="workers, cores and applications (exit 1 unless all workers are alive)",
        description="Print the master, its workers, the cores in use and the running applications; exit 1 "
        "unless the master and every worker run and the workers are registered.")
    status.add_argument("--format", choices=["text", "json"], default="text")
    status.set_defaults(handler=cmd_cluster_status, uses_secrets=False)
