"""`lakehouse kafka start|stop|status|topics`: the embedded single-node broker."""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.cli.common import output_options, print_rows, say, service_handlers
from shared.config import Config


def _broker(config: Config) -> Any:
    from lakehouse.services.broker import EmbeddedBroker

    return EmbeddedBroker(config, log=say)


HANDLERS = service_handlers(_broker)


def cmd_kafka_start(config: Config, args: argparse.Namespace) -> int:
    from shared.kafka import ensure_topics

    bootstrap = _broker(config).start()
    topics = [config.kafka.topics.clicks, config.kafka.topics.alerts]
    created = ensure_topics(config.kafka, topics, timestamp_type=args.timestamp_type)
    if created:
        stamp = f", {args.timestamp_type}" if args.timestamp_type else ""
        say(f"created topics {', '.join(created)} ({config.kafka.partitions} partitions{stamp})")
    print(bootstrap)
    return 0


def cmd_kafka_topics(config: Config, args: argparse.Namespace) -> int:
    from shared.kafka import admin_client, topic_offsets

    with admin_client(config.kafka) as admin:
        names = sorted(name for name in admin.list_topics() if not name.startswith("__"))
    rows = []
    for name in names:
        offsets = topic_offsets(config.kafka, name)
        records = sum(latest - earliest for earliest, latest in offsets.values())
        rows.append({"topic": name, "partitions": len(offsets), "records": records})
    print_rows(rows, ["topic", "partitions", "records"], args.format)
    return 0



def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    kafka = commands.add_parser("kafka", help="the embedded single-node Kafka broker", parents=[common],
                                description="Start, stop or inspect the embedded Kafka broker (KRaft).")
    kafka_commands = kafka.add_subparsers(dest="kafka_command", metavar="ACTION", required=True)
    start = kafka_commands.add_parser(
        "start", parents=[common], help="start it (formats storage the first time); prints the bootstrap address",
        description="Start the broker unless it runs, create the configured topics that do not exist yet "
        "(kafka.partitions partitions), and print the bootstrap address once it answers.")
    start.add_argument("--timestamp-type", choices=["CreateTime", "LogAppendTime"],
                       help="message.timestamp.type of the topics it creates (default: the broker's, CreateTime)")
    start.set_defaults(handler=cmd_kafka_start)
    kafka_commands.add_parser("stop", parents=[common], help="stop it: SIGTERM, then SIGKILL only if it hangs",
                              description="Stop the broker and wait until its process is gone.").set_defaults(
                                  handler=HANDLERS["stop"], uses_secrets=False)
    kafka_commands.add_parser("status", parents=[common], help="say whether it runs and answers (exit 1 if not)",
                              description="Print whether the broker runs and answers metadata requests; exit 1 when it does not."
                              ).set_defaults(handler=HANDLERS["status"])
    topics = kafka_commands.add_parser("topics", parents=[common, output_options()], help="list topics with their record counts",
                                       description="List the broker's topics, partitions and records held.")
    topics.set_defaults(handler=cmd_kafka_topics)
