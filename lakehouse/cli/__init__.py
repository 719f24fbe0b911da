"""`lakehouse`, the command line: one module per area, each command's handler beside its parser.

Each command reads the config once and hands typed values down.

Results go to stdout, progress and errors to stderr; a user-facing failure exits non-zero with one
clear message. Heavy imports (pyspark, kafka-python) happen inside the commands that need them, so
`lakehouse --help` and `lakehouse kafka status` stay fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from lakehouse.cli.common import say
from shared.config_loading import load_config
from shared.errors import LakehouseError
from lakehouse.cli import (alerting, analytical, benchmarks, broker, cluster, general, operational, quality, questions,
                           run, storage, traffic)

#: In the order `lakehouse --help` lists them.
AREAS = (broker, storage, cluster, traffic, operational, run, alerting, analytical, questions, quality, benchmarks, general)


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    options = common.add_argument_group("configuration")
    # SUPPRESS: a subcommand's parser must not reset what was given before the subcommand.
    options.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS,
                         help="YAML layered on conf/local.yaml (default: $LAKEHOUSE_CONFIG if set)")
    options.add_argument("--set", metavar="KEY=VALUE", action="append", default=argparse.SUPPRESS, dest="overrides",
                         help="override one dotted key, e.g. --set hot_pages.threshold=100 (repeatable)")
    options.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                         help="also print the warnings hidden as harmless (--set spark.known_warnings=show)")

    parser = argparse.ArgumentParser(
        prog="lakehouse",
        description="Clickstream lakehouse: hot-page alerts and a Delta medallion from one Kafka topic.",
        parents=[common],
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    for area in AREAS:
        area.register(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from shared.processes import die_with_parent, stop_signals_interrupt

    die_with_parent()  # started by another lakehouse command: end with it, however it ends
    stop_signals_interrupt()
    args = build_parser().parse_args(argv)
    try:
        overrides = [*getattr(args, "overrides", []), *(["spark.known_warnings=show"] if getattr(args, "verbose", False) else [])]
        config = load_config(getattr(args, "config", None), overrides,
                             secrets=getattr(args, "uses_secrets", True))
        return args.handler(config, args)
    except LakehouseError as error:
        say(f"error: {error}")
        return error.exit_code
    except KeyboardInterrupt:
        if getattr(args, "runs_until_stopped", False):  # stopped before it listened for stops: as clean
            say("stop requested while starting: stopped")
            return 0
        say("interrupted")
        return 130
    except BrokenPipeError:  # the reader went away (`lakehouse alerts --follow | head`): not an error
        sys.stdout = open(os.devnull, "w")
        return 0
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] in {"pyspark", "delta", "kafka", "great_expectations", "yaml", "pydantic"}:
            say(f"error: the Python package {error.name} is not installed here: run `make setup` "
                    "and use .venv/bin/lakehouse")
            return 2
        raise

