"""`lakehouse demo`, `lakehouse config` and `lakehouse service`."""

from __future__ import annotations

import argparse
from typing import Any

from lakehouse.cli.common import positive
from shared.config import Config
from shared.config_loading import render


def cmd_demo(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.cli.demo import run_demo

    return run_demo(config, seconds=args.seconds, rate=args.rate, verbose=getattr(args, "verbose", False),
                    overrides=getattr(args, "overrides", []))


def cmd_config(config: Config, args: argparse.Namespace) -> int:
    print(render(config), end="")
    return 0



def cmd_service(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.service import container_settings, systemd_unit

    render_for = systemd_unit if args.manager == "systemd" else container_settings
    print(render_for(config, getattr(args, "config", None)), end="")
    return 0


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    demo = commands.add_parser(
        "demo", parents=[common], help="the whole story, end to end, on the embedded default (a few minutes)",
        description="Start the embedded broker, run both paths side by side on fresh demo topics while synthetic "
        "traffic with hot pages (and a little late, duplicate and malformed data) arrives, backfill the medallion, "
        "then show the alerts with time-to-alert, a trend query, the expectations and the reconciliation, and stop "
        "what it started. Tables go under storage.root/demo.")
    demo.add_argument("--seconds", type=positive(float), default=60.0, help="seconds of traffic (default 60)")
    demo.add_argument("--rate", type=positive(float), default=8_000.0, help="events per second (default 8000)")
    demo.set_defaults(handler=cmd_demo, runs_until_stopped=True)

    service = commands.add_parser(
        "service", parents=[common], help="lakehouse run as a service: a systemd unit, a container's settings",
        description="Print a systemd unit for `lakehouse run` (systemd), or a container's entrypoint and stop grace "
        "period (container), for this configuration: the stop timeout covers the longest clean stop, which the "
        "fast path's checkpoint interval sets (DEPLOYMENT.md, \"As a service\").")
    service.add_argument("manager", choices=["systemd", "container"])
    service.set_defaults(handler=cmd_service, uses_secrets=False)

    commands.add_parser("config", parents=[common], help="print the effective configuration (secrets masked)",
                        description="Print the configuration after layering and overrides, secrets masked."
                        ).set_defaults(handler=cmd_config)
