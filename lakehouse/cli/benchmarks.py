"""`lakehouse bench latency|freshness|notify|capacity|recovery|throughput|memory|backfill|sessions|forget`: each prints one JSON
object."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lakehouse.cli.common import passthrough, positive
from shared.config import Config
from shared.errors import LakehouseError


def _profiles(configs: str) -> list[str]:
    from lakehouse.bench.measured_run import PROFILES

    profiles = [name.strip() for name in configs.split(",") if name.strip()]
    unknown = sorted(set(profiles) - set(PROFILES))
    if unknown or not profiles:
        raise LakehouseError(f"--configs: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(PROFILES)}")
    return profiles


def cmd_bench_latency(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.bench.operational import latency
    from shared.kafka import require_reachable

    profiles = _profiles(args.configs)
    _load_is_possible(config, [args.rate], args.hot_pages)
    require_reachable(config.kafka)  # before a child process starts its Spark
    runs = on_each_root(config, args, lambda options: latency(
        options, args.rate, args.seconds, args.hot_pages, profiles, with_medallion=args.with_medallion,
        scraped=args.scraped))
    print(json.dumps(runs, indent=2))
    reports = runs["runs"].values() if args.against else [runs]
    failed = [name for report in reports for name, result in report["configs"].items() if "error" in result]
    if failed:  # the figures of the others are above; this says which run has none, and why (stderr above)
        raise LakehouseError(f"the {', '.join(failed)} run{'s' if len(failed) > 1 else ''} failed")
    return 0


def cmd_bench_freshness(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.bench.operational import freshness
    from shared.kafka import require_reachable

    profile = _one_profile(args.config_name)
    _load_is_possible(config, [args.rate], args.hot_pages)
    require_reachable(config.kafka)
    print(json.dumps(freshness(passthrough(config, args), args.rate, args.seconds, args.hot_pages, profile), indent=2))
    return 0


def cmd_bench_notify(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.bench.delivery import notify
    from lakehouse.services.alertmanager import installed
    from shared.kafka import require_reachable

    profile = _one_profile(args.config_name)
    _load_is_possible(config, [args.rate], args.hot_pages)
    if args.interleave and args.pairs > 1:
        raise LakehouseError("--interleave runs one run instead of pairs: give --pairs or --interleave, not both")
    if args.interleave and args.seconds < 2 * args.interleave:
        raise LakehouseError(f"--interleave {args.interleave:g}: --seconds ({args.seconds:g}) holds fewer than two "
                             "blocks, one without the bridge and one with it")
    installed()  # before any run starts its JVM
    require_reachable(config.kafka)
    print(json.dumps(notify(passthrough(config, args), args.rate, args.seconds, args.hot_pages, profile,
                            args.bridge_kills, args.outage, args.pairs, args.interleave or 0.0), indent=2))
    return 0


def cmd_bench_capacity(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.bench.capacity import capacity
    from shared.kafka import require_reachable

    profiles = _profiles(args.configs)
    require_reachable(config.kafka)
    print(json.dumps(capacity(config, passthrough(config, args), profiles, args.sla_ms, args.start_rate, args.min_windows,
                              max_runs=args.max_runs), indent=2))
    return 0


def cmd_bench_throughput(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.bench.operational import throughput
    from shared.kafka import require_reachable

    rates = [float(rate) for rate in args.rates.split(",")]
    _load_is_possible(config, rates, args.hot_pages)
    require_reachable(config.kafka)
    print(json.dumps(throughput(passthrough(config, args), rates, args.seconds, args.hot_pages), indent=2))
    return 0


def cmd_bench_backfill(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.bench.analytical import backfill_benchmark

    print(json.dumps(on_each_root(config, args, lambda options: backfill_benchmark(
        options, args.events, args.history, args.span)), indent=2))
    return 0


def cmd_bench_sessions(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.bench.sessions_state import sessions_benchmark
    from shared.kafka import require_reachable

    require_reachable(config.kafka)
    print(json.dumps(sessions_benchmark(passthrough(config, args), args.rate, args.minutes, args.step), indent=2))
    return 0


def cmd_bench_forget(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.bench.forget import forget_benchmark
    from shared.kafka import require_reachable

    profile = _one_profile(args.config_name)
    _load_is_possible(config, [args.rate], args.hot_pages)
    require_reachable(config.kafka)
    print(json.dumps(forget_benchmark(passthrough(config, args), args.events, args.rate, args.baseline, args.after,
                                      args.hot_pages, profile), indent=2))
    return 0


def on_each_root(config: Config, args: argparse.Namespace, run: Any) -> dict[str, Any]:
    """`run(options)`'s report; with --against ROOT, one run on storage.root and one on ROOT, one after
    the other in this command, as {"runs": {root: report, ...}}: a comparison of two storages (a
    local folder and an object store) under the same load on the same machine at the same time."""
    from shared.config_loading import with_overrides
    from shared.object_store import require_reachable

    if not args.against:
        return run(passthrough(config, args))
    for root in (config.storage.root, args.against):
        require_reachable(root, config.storage.s3)
    return {"runs": {root: run(passthrough(with_overrides(config, [f"storage.root={root}"]), args))
                     for root in (config.storage.root, args.against)}}


def _against_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--against", metavar="ROOT",
                        help="also run it with storage.root=ROOT (e.g. a local folder against an s3a:// root), "
                        "right after: one report per root under \"runs\"")


def cmd_bench_memory(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.bench.operational import memory

    _load_is_possible(config, [args.rate], args.hot_pages)
    profile = _one_profile(args.config_name)
    print(json.dumps(memory(passthrough(config, args), args.rate, args.seconds, args.hot_pages, profile), indent=2))
    return 0


def cmd_bench_recovery(config: Config, args: argparse.Namespace) -> int:
    from lakehouse.bench.recovery import recovery
    from shared.kafka import require_reachable

    if args.kill_after >= args.seconds:
        raise LakehouseError(f"--kill-after ({args.kill_after:g}) must be less than --seconds ({args.seconds:g})")
    _load_is_possible(config, [args.rate], args.hot_pages)
    profile = _one_profile(args.config_name)
    require_reachable(config.kafka)
    print(json.dumps(recovery(passthrough(config, args), profile, args.rate, args.seconds, args.kill_after, args.hot_pages),
                     indent=2))
    return 0


def _load_is_possible(config: Config, rates: list[float], hot_pages: int) -> None:
    """Refuse a load the generator would refuse (e.g. too many hot pages for the rate at this
    threshold) before any child process or Spark starts, with the generator's own message."""
    from lakehouse.services.generator import TrafficSpec

    for rate in rates:
        TrafficSpec.for_config(config, rate, hot_pages=hot_pages).validated()


def _load_arguments(parser: argparse.ArgumentParser, seconds: float, hot_pages: int) -> None:
    """--rate, --seconds and --hot-pages: the generated load a fast-path benchmark offers."""
    parser.add_argument("--rate", type=positive(float), default=20_000.0, help="events/s offered (default 20000)")
    parser.add_argument("--seconds", type=positive(float), default=seconds, help=f"load, in seconds (default {seconds:g})")
    parser.add_argument("--hot-pages", type=int, default=hot_pages, help=f"hot pages in the load (default {hot_pages})")


def _configs_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--configs", default="real-time,tuned,spark-defaults,seed",
                        help="comma-separated: real-time (Spark 4.3's real-time mode), tuned (micro-batch), "
                        "spark-defaults, seed (default: all four)")


def _one_config_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--configs", dest="config_name", default="real-time",
                        help="one configuration: real-time (default), tuned, spark-defaults or seed")


def _one_profile(config_name: str) -> str:
    """The one configuration a single-configuration benchmark runs."""
    profiles = _profiles(config_name)
    if len(profiles) > 1:
        raise LakehouseError(f"--configs: this benchmark runs one configuration, not {len(profiles)}")
    return profiles[0]


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    bench = commands.add_parser("bench", parents=[common], help="benchmarks; each prints one JSON object",
                                description="Benchmarks. Each run uses fresh topics, tables and checkpoints.")
    bench_commands = bench.add_subparsers(dest="bench_command", metavar="BENCHMARK", required=True)
    bench_latency = bench_commands.add_parser(
        "latency", parents=[common], help="time-to-alert under several configurations, same load",
        description="Time-to-alert (Kafka append of the crossing click -> Kafka append of the first alert) "
        "for each configuration in turn, on the same generated load; p50/p95/p99/p99.9/max, missed windows, "
        "the real-time batch boundaries inside the load, and p99 ratios to tuned and to real-time.")
    _load_arguments(bench_latency, seconds=60.0, hot_pages=8)
    _configs_argument(bench_latency)
    bench_latency.add_argument("--with-medallion", action="store_true",
                               help="instead of --configs: the fast path alone, then with the four medallion streams "
                               "beside it in its own application (FAIR pools), then in a separate application under "
                               "nice (as `lakehouse run` starts it); p99 ratios over alone (target 1.2)")
    bench_latency.add_argument("--scraped", action="store_true",
                               help="instead of --configs: tuned without its Prometheus endpoint, then with it, scraped "
                               "every second by a real Prometheus (make setup installs it); the p99 ratio is the "
                               "scrape's cost")
    _against_argument(bench_latency)
    bench_latency.set_defaults(handler=cmd_bench_latency)
    bench_freshness = bench_commands.add_parser(
        "freshness", parents=[common], help="gold's freshness at peak traffic, with the fast path beside it",
        description="The fast path alone, then with the medallion beside it in its own application under nice "
        "(as `lakehouse run` starts them), on the same generated load. Reports gold's freshness (the seconds from a "
        "click's Kafka append to the end of the gold batch that wrote its window: p50, p99, max and p99 per minute), "
        "how long after the load's end gold had every click, and the fast path's time-to-alert in both runs "
        "(targets: p99 freshness under 60 s; the fast path's p99 with the medallion within 1.2x of alone).")
    _load_arguments(bench_freshness, seconds=600.0, hot_pages=8)
    _one_config_argument(bench_freshness)
    bench_freshness.set_defaults(handler=cmd_bench_freshness)
    bench_notify = bench_commands.add_parser(
        "notify", parents=[common], help="hot-page alerts delivered to Alertmanager, and the fast path beside the bridge",
        description="The fast path alone, then with an embedded Alertmanager and `lakehouse notify` beside it (as "
        "`lakehouse run` starts them), on the same generated load. Reports the delivery time (an alert record's Kafka "
        "append -> Alertmanager taking its post, read from Alertmanager's own updatedAt), each alerted window's "
        "notifications at the webhook receiver, and the fast path's time-to-alert in both runs (targets: delivery p99 "
        "under 100 ms; the fast path's p99 with the bridge within 1.1x of alone; every window notified once). "
        "The hot pages cross the threshold at instants spread over the window (`lakehouse generate --hot-stagger`), so "
        "that both runs' windows meet the real-time batches' ends alike; each run lists its slowest windows, how far "
        "from a batch's end each crossed. With --pairs N, the two runs N times in turn, each configuration's windows "
        "pooled; with --interleave SECONDS, one run instead, with the bridge, Alertmanager and its receiver paused and "
        "resumed in blocks of SECONDS (without, with, with, without, ...), the windows of the blocks without them "
        "against those of the blocks with them; with --bridge-kills or --outage, one more run under those faults.")
    _load_arguments(bench_notify, seconds=60.0, hot_pages=8)
    _one_config_argument(bench_notify)
    bench_notify.add_argument("--pairs", type=positive(int), default=1, metavar="N",
                              help="run alone and with the bridge N times in turn, each one's percentiles over the "
                              "windows of all its runs (default 1)")
    bench_notify.add_argument("--interleave", type=positive(float), metavar="SECONDS",
                              help="one run instead of pairs: the bridge, Alertmanager and its receiver paused (SIGSTOP) "
                              "and resumed in blocks of SECONDS after the warm-up, the fast path's time-to-alert per "
                              "block; no delivery times (a record of a paused block waits for the next). Give at "
                              "least two real-time checkpoint intervals, and --seconds for at least four blocks")
    bench_notify.add_argument("--bridge-kills", type=positive(int), default=0, metavar="N",
                              help="in a third run: kill -9 the bridge N times, spread over the load, each restarted at once")
    bench_notify.add_argument("--outage", type=positive(float), default=0.0, metavar="SECONDS",
                              help="in a third run: Alertmanager stopped for SECONDS, then started again (the load lasts "
                              "long enough to hold it)")
    bench_notify.set_defaults(handler=cmd_bench_notify)
    bench_capacity = bench_commands.add_parser(
        "capacity", parents=[common], help="highest delivered rate whose time-to-alert p99 meets an SLA",
        description="For each configuration, search over rates for the highest delivered rate at which "
        "time-to-alert p99 stays at or under --sla-ms, each rate over at least --min-windows alerted windows "
        "(hot pages and seconds are chosen per rate); a run whose traffic did not deliver 95%% of the offered "
        "rate is invalid and counts as a miss. One JSON object with every rate tried.")
    bench_capacity.add_argument("--sla-ms", type=positive(float), default=1000.0, help="p99 target (default 1000)")
    _configs_argument(bench_capacity)
    bench_capacity.add_argument("--start-rate", type=positive(float), default=20_000.0,
                                help="the first rate tried (default 20000)")
    bench_capacity.add_argument("--min-windows", type=positive(int), default=60,
                                help="alerted windows per rate (default 60)")
    bench_capacity.add_argument("--max-runs", type=positive(int), default=6, help="runs per configuration (default 6)")
    bench_capacity.set_defaults(handler=cmd_bench_capacity)
    bench_recovery = bench_commands.add_parser(
        "recovery", parents=[common], help="kill -9 of the fast path under load: time to the next alert, replay",
        description="Run the fast path under --rate for --seconds, kill it with SIGKILL --kill-after seconds into the "
        "load and start it again at once; report the seconds from the restart to the first alert of a window that "
        "crossed after it, the clicks replayed, the alert records written twice and the windows missed.")
    _load_arguments(bench_recovery, seconds=150.0, hot_pages=8)
    bench_recovery.add_argument("--kill-after", type=positive(float), default=60.0,
                                help="seconds into the load of the kill (default 60)")
    _one_config_argument(bench_recovery)
    bench_recovery.set_defaults(handler=cmd_bench_recovery)
    bench_throughput = bench_commands.add_parser(
        "throughput", parents=[common], help="highest offered rate sustained without Kafka lag growing",
        description="Offer each rate in turn for --seconds; stop at the first whose Kafka lag grows.")
    bench_throughput.add_argument("--rates", default="10000,20000,25000,30000", help="rates to try, in order")
    bench_throughput.add_argument("--seconds", type=positive(float), default=60.0)
    bench_throughput.add_argument("--hot-pages", type=int, default=3)
    bench_throughput.set_defaults(handler=cmd_bench_throughput)
    bench_memory = bench_commands.add_parser(
        "memory", parents=[common], help="state rows and driver JVM RSS over a long run",
        description="Run the fast path at --rate for --seconds, sampling state rows and the driver JVM's RSS.")
    _load_arguments(bench_memory, seconds=600.0, hot_pages=3)
    _one_config_argument(bench_memory)
    bench_memory.set_defaults(handler=cmd_bench_memory)
    bench_backfill = bench_commands.add_parser(
        "backfill", parents=[common], help="medallion backfill: events/s and growth with history",
        description="Backfill N events from bronze to gold with AvailableNow (events per second), then time an "
        "incremental backfill of the same N new events on top of 1x and of --history x N events of history "
        "(the ratio shows whether a backfill slows down as the tables grow). Then the floor: the same work from "
        "bronze to gold as a plain batch job (no streaming, writes against history or state), and the medallion's speed as a fraction "
        "of it, with where each layer's time goes. Reports peak memory.")
    bench_backfill.add_argument("--events", type=positive(int), default=200_000, help="N (default 200000)")
    bench_backfill.add_argument("--history", type=positive(int), default=10, help="the larger history, in N (default 10)")
    bench_backfill.add_argument("--span", type=positive(float), default=3600.0,
                                help="seconds of event time each block of N events covers (default 3600)")
    _against_argument(bench_backfill)
    bench_backfill.set_defaults(handler=cmd_bench_backfill)
    bench_sessions = bench_commands.add_parser(
        "sessions", parents=[common], help="the open sessions' state as event time goes on: bounded or not",
        description="Send --minutes of event time at --rate, --step seconds at a time, each step backfilled by the "
        "medallion's streams in one process that keeps the sessions' state; after each step, the sessions the "
        "state holds, its memory and the JVM's, against the plateau the visits, the gap and the watermark give.")
    bench_sessions.add_argument("--rate", type=positive(float), default=20_000.0,
                                help="events per second of event time (default 20000)")
    bench_sessions.add_argument("--minutes", type=positive(float), default=30.0,
                                help="minutes of event time (default 30)")
    bench_sessions.add_argument("--step", type=positive(float), default=60.0,
                                help="seconds of event time a step sends and backfills (default 60)")
    bench_sessions.set_defaults(handler=cmd_bench_sessions)
    bench_forget = bench_commands.add_parser(
        "forget", parents=[common], help="one user erased from a large lake while both paths run under load",
        description="Generate --events clicks into a topic and lake of their own and backfill them; then run the "
        "fast path and the medallion on that lake as `lakehouse run` does, offer --rate events/s, and --baseline "
        "seconds into the measured load run `lakehouse forget` for a user of the lake. Reports the forget's seconds "
        "and rows, and the fast path's time to alert before the forget and while it ran (targets: the forget under "
        "120 s; the p99 while it runs within 1.2x of the p99 before).")
    bench_forget.add_argument("--events", type=positive(int), default=2_000_000, help="the lake's events (default 2000000)")
    bench_forget.add_argument("--rate", type=positive(float), default=8_000.0, help="events/s offered (default 8000)")
    bench_forget.add_argument("--baseline", type=positive(float), default=60.0,
                              help="seconds of measured load before the forget starts (default 60)")
    bench_forget.add_argument("--after", type=positive(float), default=150.0,
                              help="seconds of load after the forget starts, which it should end within (default 150)")
    bench_forget.add_argument("--hot-pages", type=int, default=3, help="hot pages in the load (default 3)")
    _one_config_argument(bench_forget)
    bench_forget.set_defaults(handler=cmd_bench_forget)
