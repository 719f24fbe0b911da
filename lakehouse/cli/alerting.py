"""`lakehouse notify` and `lakehouse alertmanager start|stop|status|notifications`: hot-page alerts
delivered through Alertmanager, and the embedded Alertmanager that receives them on a laptop."""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.cli.common import output_options, positive, print_rows, say, service_handlers
from shared.config import Config

NOTIFICATION_COLUMNS = ["receivedAt", "receiver", "status", "alertname", "labels"]


def _alertmanager(config: Config) -> Any:
    from lakehouse.services.alertmanager import EmbeddedAlertmanager

    return EmbeddedAlertmanager(config, log=say)


HANDLERS = service_handlers(_alertmanager)


def cmd_notify(config: Config, args: argparse.Namespace) -> int:
    import threading

    from lakehouse import notify

    stop = threading.Event()
    if args.seconds:
        threading.Timer(args.seconds, stop.set).start()
    try:
        return notify.main(config, stop)
    except KeyboardInterrupt:  # SIGINT or SIGTERM: what was not committed is posted again at the next start
        say("notify: stopped")
        return 0
    finally:
        stop.set()


def cmd_notifications(config: Config, args: argparse.Namespace) -> int:
    received = _alertmanager(config).notifications()
    rows = [{"receivedAt": kept["receivedAt"], "receiver": kept["body"].get("receiver"),
             "status": kept["body"].get("status"), "alertname": alert["labels"].get("alertname"),
             "labels": ",".join(f"{name}={value}" for name, value in sorted(alert["labels"].items())
                                if name != "alertname")}
            for kept in received for alert in kept["body"].get("alerts", [])]
    print_rows(rows, NOTIFICATION_COLUMNS, args.format, document=received)
    return 0


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    notify = commands.add_parser(
        "notify", parents=[common], help="deliver the hot-page alerts to Alertmanager",
        description="Read the alerts topic (its own consumer group, alerting.consumer_group) and post each alert to "
        "the Alertmanager at alerting.alertmanager_url (API v2), one alert per hot window, resolving by itself "
        "alerting.resolve_after past its window. Alertmanager down: retried, nothing skipped or committed meanwhile. "
        "Runs until stopped (SIGINT/SIGTERM, exit 0) or for --seconds; its metrics at metrics.notify_port.")
    notify.add_argument("--seconds", type=positive(float), help="stop after this long (default: run until stopped)")
    notify.set_defaults(handler=cmd_notify, runs_until_stopped=True)

    manager = commands.add_parser(
        "alertmanager", parents=[common], help="the embedded Alertmanager and its webhook receiver",
        description="Start, stop or inspect an Alertmanager on 127.0.0.1:alertmanager.port with the shipped routes "
        "(alertmanager.config_file) and a webhook receiver that keeps every notification (alertmanager.run_dir).")
    actions = manager.add_subparsers(dest="alertmanager_command", metavar="ACTION", required=True)
    actions.add_parser("start", parents=[common], help="start both; prints Alertmanager's URL",
                       description="Start Alertmanager and its webhook receiver unless they run; print Alertmanager's "
                       "URL once both answer.").set_defaults(handler=HANDLERS["start"], uses_secrets=False)
    actions.add_parser("stop", parents=[common], help="stop both: SIGTERM, then SIGKILL only if one hangs",
                       description="Stop Alertmanager and its webhook receiver and wait until they are gone; the "
                       "notifications received stay.").set_defaults(handler=HANDLERS["stop"], uses_secrets=False)
    actions.add_parser("status", parents=[common], help="say whether they run (exit 1 if not)",
                       description="Print whether Alertmanager answers and its receiver runs, with the "
                       "notifications kept; exit 1 when not.").set_defaults(handler=HANDLERS["status"], uses_secrets=False)
    actions.add_parser("notifications", parents=[common, output_options("one row per alert notified")],
                       help="the notifications the receiver has kept, oldest first",
                       description="Print each alert of each notification the webhook receiver has kept, oldest "
                       "first; --format json prints Alertmanager's notifications whole."
                       ).set_defaults(handler=cmd_notifications, uses_secrets=False)
