"""What the command modules share: output, argument types, and a monitored Spark session."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any

from shared.config import Config
from shared.spark_internals import jvm_pid


def say(message: str) -> None:
    from shared.progress import echo  # to stderr, above an open progress bar instead of through it

    echo(message)


def table(rows: list[dict], columns: list[str]) -> str:
    widths = {c: max([len(c), *(len(str(row.get(c, ""))) for row in rows)]) for c in columns}
    lines = ["  ".join(c.ljust(widths[c]) for c in columns), "  ".join("-" * widths[c] for c in columns)]
    lines += ["  ".join(str(row.get(c, "")).ljust(widths[c]) for c in columns) for row in rows]
    return "\n".join(lines)


#: The one output convention of every command that prints a result (`--format`).
FORMATS = ("table", "json", "csv")


def output_options(rows: str = "the rows") -> argparse.ArgumentParser:
    """`--format table|json|csv`: a table (or text) for people, the whole result as JSON for programs,
    its rows (`rows`) as CSV for spreadsheets."""
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--format", choices=FORMATS, default="table",
                        help=f"table (default), json (the whole result) or csv ({rows})")
    return output


def print_rows(rows: list[dict], columns: list[str], output: str, document: Any = None,
               text: Callable[[], str] | None = None) -> None:
    """Print a result as `output` asks: json prints `document` (default: the rows), csv the rows'
    `columns`, table `text()` (default: a table of the rows)."""
    if output == "json":
        print(json.dumps(rows if document is None else document, indent=2, default=str))
    elif output == "csv":
        import csv

        writer = csv.DictWriter(sys.stdout, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    else:
        print(text() if text else table(rows, columns))


def fraction(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def positive(kind: type) -> Callable[[str], float | int]:
    def parse(text: str):
        value = kind(text)
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
        return value

    return parse


def instant(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an ISO-8601 time such as 2026-11-22T10:00:00Z, got {text}")
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


@contextmanager
def monitored(config: Config, application: str, echo: Callable[[str], None] | None = None,
              stopped_while_starting: threading.Event | None = None,
              application_settings: Mapping[str, str] = MappingProxyType({})) -> Iterator[tuple[Any, Any]]:
    """The checkpoints of the path's queries (`application`: `operational` or `analytical`,
    lakehouse.catalog) held by this process, a SparkSession for the path (with `application_settings`:
    what its mode needs, operational.mode), and while the block runs
    every query's progress recorded to ops/stream_progress (where the runtime has Delta; the fast
    path's parent records it otherwise), given to `echo` and served to Prometheus
    (lakehouse.monitoring.metrics).

    A stop during the start ends the command (KeyboardInterrupt) as the start ends, unless
    `stopped_while_starting` is given: then it is set and the block still runs, to record what it must."""
    from lakehouse.catalog import queries_by_path
    from shared.checkpoint_locks import StoppedMarks, exclusive
    from shared.processes import stops_deferred
    from lakehouse.monitoring.live_consumers import consumer_readings
    from shared.broker_readings import BrokerOffsets
    from lakehouse.monitoring.metrics import QueryFacts
    from lakehouse.monitoring.metrics_endpoint import require_free_port, serving
    from lakehouse.monitoring.stream_progress import recording, table_location
    from shared.query_events import watching
    from shared.runtime import current
    from shared.spark import spark_session

    streams = queries_by_path(config)[application]
    marks = StoppedMarks(config.storage.root, config.storage.s3)
    with exclusive(config.storage.root, [stream.name for stream in streams], report=say, marks=marks) as locks, \
            ExitStack() as started:
        require_free_port(config.metrics, application)  # said before Spark takes seconds to start
        with stops_deferred(stopped_while_starting):  # a stop meanwhile ends the start between two JVM calls
            spark = spark_session(config, application=application, application_settings=application_settings)
            locks.record_jvm(jvm_pid(spark))
            facts = {stream.name: QueryFacts.of(config, stream) for stream in streams}  # suites need the session
            metrics = started.enter_context(serving(config.metrics, application, facts, BrokerOffsets(config.kafka),
                                                    live=lambda: consumer_readings(spark)))
            recorder = started.enter_context(
                recording(spark, table_location(config) if current().delta else None, echo))
            started.enter_context(watching(spark, recorder, metrics))
        if metrics:
            say(f"metrics: http://{config.metrics.bind_address}:{config.metrics.port(application)}/metrics")
        yield spark, recorder


def said_status(status: Any) -> int:
    """A service's status command: its status in one line on stdout; exit 0 when it is healthy, else 1."""
    print(status.describe())
    return 0 if status.healthy else 1


Handler = Callable[[Config, argparse.Namespace], int]


def service_handlers(service: Callable[[Config], Any]) -> dict[str, Handler]:
    """The `start`, `stop` and `status` commands of an embedded service (`service(config)` builds it, with
    its log to stderr): start prints where it answers, stop waits until its process is gone, status says
    it in one line and exits 1 when it is not healthy."""
    def start(config: Config, args: argparse.Namespace) -> int:
        print(service(config).start())
        return 0

    def stop(config: Config, args: argparse.Namespace) -> int:
        service(config).stop()
        return 0

    def status(config: Config, args: argparse.Namespace) -> int:
        return said_status(service(config).status())

    return {"start": start, "stop": stop, "status": status}


def passthrough(config: Config, args: argparse.Namespace) -> list[str]:
    """What a child `lakehouse` process (a path's, a benchmark's) is given: `config`, this command's
    configuration, as one file (shared.config_loading.write_for_child), and --verbose when this command has it."""
    from lakehouse.path_processes import child_options

    return child_options(config, verbose=getattr(args, "verbose", False))


def window_range_options() -> argparse.ArgumentParser:
    """--from/--to: the windows a question (query, reconcile) covers, by their start."""
    window_range = argparse.ArgumentParser(add_help=False)
    window_range.add_argument("--from", dest="start", type=instant, help="first window start included (ISO-8601)")
    window_range.add_argument("--to", dest="end", type=instant, help="window starts before this")
    return window_range
