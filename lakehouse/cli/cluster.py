"""`lakehouse cluster start|stop|status`: the embedded Spark standalone cluster."""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.cli.common import output_options, print_rows, say
from shared.config import Config


def cmd_cluster_start(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.services.cluster import embedded_clusters

    for cluster in embedded_clusters(config, log=say):
        print(cluster.start())
        say(f"{cluster.name}'s web UI: {cluster.web_ui}")
    say("run commands on the clusters with --config conf/standalone.yaml")
    return 0


def cmd_cluster_stop(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.services.cluster import embedded_clusters

    for cluster in reversed(embedded_clusters(config, log=say)):
        cluster.stop()
    return 0


def cmd_cluster_status(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.services.cluster import embedded_clusters

    statuses = [cluster.status() for cluster in embedded_clusters(config, log=say)]
    healthy = all(status.healthy for status in statuses)
    clusters = [status.as_dict() for status in statuses]
    print_rows(clusters, ["runtime", "master_url", "healthy", "alive_workers", "cores", "cores_used", "web_ui"],
               args.format, document={"healthy": healthy, "clusters": clusters},
               text=lambda: "\n".join(status.describe() for status in statuses))
    return 0 if healthy else 1


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    cluster = commands.add_parser(
        "cluster", help="the embedded Spark standalone cluster (a master and workers)", parents=[common],
        description="Start, stop or inspect the Spark standalone clusters on this machine: the medallion's, "
        "from its runtime's pyspark (a master and cluster.workers workers), and the fast path's, from its "
        "runtime's Spark for real-time mode (cluster.fast_path; a cluster runs one Spark version). Ports, "
        "cores and memory come from the cluster section; conf/standalone.yaml runs every command on them.")
    actions = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    actions.add_parser(
        "start", parents=[common], help="start the masters and workers; prints each master's URL",
        description="Start the masters and the workers that do not run yet, wait until every worker has "
        "registered (cluster.start_timeout_s), and print each master's URL, the medallion's first.",
    ).set_defaults(handler=cmd_cluster_start, uses_secrets=False)
    actions.add_parser(
        "stop", parents=[common], help="stop the workers (and their executors), then the masters",
        description="Stop every worker with the executors it launched, then its master: SIGTERM, then SIGKILL "
        "only if one hangs (cluster.stop_timeout_s).",
    ).set_defaults(handler=cmd_cluster_stop, uses_secrets=False)
    status = actions.add_parser(
        "status", parents=[common, output_options("one row per cluster")], help="workers, cores and applications (exit 1 unless all workers are alive)",
        description="Print each cluster's master, its workers, the cores in use and the running applications; "
        "exit 1 unless every master and worker runs and the workers are registered.")
    status.set_defaults(handler=cmd_cluster_status, uses_secrets=False)
