"""`lakehouse generate` and `lakehouse inspect`: traffic onto the clicks topic, and a Spark look at it."""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta, timezone
from typing import Any

from lakehouse.cli.common import fraction, instant, output_options, positive, print_rows, say, table
from shared.config import Config


def cmd_generate(config: Config, args: argparse.Namespace) -> int:
    import random
    from dataclasses import replace

    from lakehouse.services.generator import DEFAULT_HOT_PAGES, ClickGenerator, TrafficSpec, hot_page_ids, send
    from shared.kafka import ensure_topics, producer_for
    from shared.progress import Progress

    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**31)
    spec = TrafficSpec.for_config(
        config,
        rate=args.rate,
        pages=args.pages,
        hot_pages=args.hot_pages or 0,
        hot_stagger=args.hot_stagger,
        late_fraction=args.late_fraction,
        duplicate_fraction=args.duplicate_fraction,
        malformed_fraction=args.malformed_fraction,
        seed=seed,
        start_time=args.start_time,
        think_time=timedelta(seconds=args.think_time),
        visit_clicks=args.visit_clicks,
        cart_probability=args.cart_probability,
        purchase_probability=args.purchase_probability,
        hot_uplift=args.hot_uplift,
        anonymous_fraction=args.anonymous_fraction,
    )
    if args.hot_pages is None:
        spec = replace(spec, hot_pages=min(DEFAULT_HOT_PAGES, spec.hot_pages_carried))
        if spec.hot_pages < DEFAULT_HOT_PAGES:
            say(f"note: --rate {args.rate:g} carries {spec.hot_pages} hot pages over the threshold "
                f"{config.hot_pages.threshold}, not {DEFAULT_HOT_PAGES}: raise --rate or lower hot_pages.threshold")
    generator = ClickGenerator(spec)
    threshold = config.hot_pages.threshold
    if generator.busiest_ordinary_page_per_window > threshold:
        say(
            f"warning: at this rate an ordinary page expects {generator.busiest_ordinary_page_per_window:.0f} "
            f"clicks per window, over the threshold {threshold}: use more --pages"
        )
    count = args.events if args.events is not None else round(args.rate * args.seconds)
    paced = args.events is None or args.paced
    topic = args.topic or config.kafka.topics.clicks
    ensure_topics(config.kafka, [topic])
    producer = producer_for(config.kafka)
    say(
        f"generating {count} records to {topic} "
        + (f"at {args.rate:g}/s" if paced else "as fast as possible")
        + f" (seed {seed}, {spec.hot_pages} hot pages over {threshold} per window, {args.pages} pages)"
    )
    with Progress("generate", total=count, unit="records") as progress:
        sent = send(generator, producer, topic, count, paced=paced,
                    progress=lambda done, total, seconds: progress.update(done))
        progress.update(sent.records)
    counts = sent.counts
    summary = {
        "topic": topic,
        "sent": count,
        "seconds": round(sent.seconds, 3),
        "achieved_rate": round(sent.rate, 1),
        "target_rate": args.rate if paced else None,
        "cpu_share": round(sent.cpu_share, 3),
        "seed": seed,
        "first_event_time": datetime.fromtimestamp(generator.start_ms / 1000, timezone.utc).isoformat(),
        "hot_pages": hot_page_ids(spec.hot_pages),
        "by_kind": dict(sorted(counts.by_kind.items())),
        "malformed_by_reason": dict(sorted(counts.malformed_by_reason.items())),
    }
    print_rows([summary], list(summary), args.format, document=summary, text=lambda: _sent_text(summary))
    return 0


def _sent_text(summary: dict[str, Any]) -> str:
    asked = f", {summary['target_rate']:,.0f}/s asked" if summary["target_rate"] else ""
    kinds = ", ".join(f"{kind} {count:,}" for kind, count in summary["by_kind"].items())
    return "\n".join([
        f"sent       {summary['sent']:,} records to {summary['topic']} in {summary['seconds']:,.1f} s "
        f"({summary['achieved_rate']:,.0f}/s achieved{asked})",
        f"hot pages  {', '.join(summary['hot_pages']) or 'none'}",
        f"by kind    {kinds}",
        f"events     from {summary['first_event_time']} (seed {summary['seed']})",
    ])


def cmd_inspect(config: Config, args: argparse.Namespace) -> int:
    from shared.spark import spark_session
    from lakehouse.topic_profile import profile_topic

    spark = spark_session(config)
    topic = args.topic or config.kafka.topics.clicks
    say(f"reading {topic} with Spark (batch) and applying the shared parsing and rule")
    profile = profile_topic(spark, config, topic, top=args.top)
    print_rows(profile["top_windows"], ["pageId", "windowStart", "clickCount", "isHot"], args.format,
               document=profile, text=lambda: _profile_text(profile, topic, config.hot_pages.threshold))
    return 0


def _profile_text(profile: dict[str, Any], topic: str, threshold: int) -> str:
    lines = [f"topic {topic}: {profile['records']} records, {profile['valid']} valid, "
             f"{profile['invalid']} invalid, {profile['distinct_events']} distinct events"]
    if profile["invalid_by_reason"]:
        lines += ["", "invalid records by reason:",
                  table([{"reason": k, "records": v} for k, v in profile["invalid_by_reason"].items()], ["reason", "records"])]
    lines += ["", f"event time from {profile['first_event_time']} to {profile['last_event_time']}; "
                  f"{profile['windows']} page windows, {profile['hot_windows']} hot (> {threshold})"]
    if profile["top_windows"]:
        lines += ["", "busiest windows (distinct events, after de-duplication):",
                  table(profile["top_windows"], ["pageId", "windowStart", "clickCount", "isHot"])]
    return "\n".join(lines)


def register(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add this area's commands to `lakehouse`."""
    generate = commands.add_parser(
        "generate", parents=[common, output_options("one row: the summary")], help="send synthetic clicks to the clicks topic",
        description="Send synthetic page clicks: ordinary pages with long-tailed popularity, hot pages over "
        "the threshold in every full window, and late, duplicate and malformed records on request. "
        "Prints a summary of what was sent and the rate achieved.")
    amount = generate.add_mutually_exclusive_group()
    amount.add_argument("--seconds", type=positive(float), default=10.0, help="send for this long at --rate (default 10)")
    amount.add_argument("--events", type=positive(int), help="send exactly N records, as fast as possible unless --paced")
    generate.add_argument("--rate", type=positive(float), default=20_000.0,
                          help="events per second of event time, and of wall time when paced (default 20000)")
    generate.add_argument("--paced", action="store_true", help="with --events: send at --rate instead of as fast as possible")
    generate.add_argument("--pages", type=positive(int), default=1000, help="ordinary pages (default 1000)")
    generate.add_argument("--hot-pages", type=int, help="pages above hot_pages.threshold in every full window "
                          "(default 3, or as many as --rate carries)")
    generate.add_argument("--hot-stagger", action="store_true",
                          help="hot page k of N has event times earlier by k/N of the window, so the hot pages cross "
                               "the threshold at instants spread over the window, not all at once (the benchmarks' "
                               "latency comparisons; within the window, so within a watermark at least as long)")
    generate.add_argument("--late-fraction", type=fraction, default=0.0,
                          help="share of events later than the fast path's watermark, within gold's (default 0)")
    generate.add_argument("--duplicate-fraction", type=fraction, default=0.0,
                          help="share of records that repeat a recent record byte for byte (default 0)")
    generate.add_argument("--malformed-fraction", type=fraction, default=0.0,
                          help="share of invalid records, every invalid shape in turn (default 0)")
    visits = generate.add_argument_group("visits", "who clicks: visitors who browse, add to cart and buy")
    visits.add_argument("--think-time", type=positive(float), default=10.0, metavar="SECONDS",
                        help="mean time between a visit's clicks (exponential; default 10)")
    visits.add_argument("--visit-clicks", type=positive(float), default=5.0,
                        help="mean clicks of a visit that ends without a purchase (default 5)")
    visits.add_argument("--cart-probability", type=fraction, default=0.0,
                        help="share of clicks that add to cart (default 0: every click a page view)")
    visits.add_argument("--purchase-probability", type=fraction, default=0.0,
                        help="chance that a click of a visit that has carted is a purchase, which ends it (default 0)")
    visits.add_argument("--hot-uplift", type=float, default=0.0,
                        help="the purchase chance raised by this share in visits that clicked a hot page (0.5: half "
                        "as likely again; default 0)")
    visits.add_argument("--anonymous-fraction", type=fraction, default=0.0,
                        help="share of clicks without a userId, in no visit (default 0)")
    generate.add_argument("--seed", type=int, help="same seed and start time, same records (default: random, printed)")
    generate.add_argument("--start-time", type=instant,
                          help="event time of the first event, ISO-8601 (default: start of the current window)")
    generate.add_argument("--topic", help="topic to send to (default: kafka.topics.clicks)")
    generate.set_defaults(handler=cmd_generate, runs_until_stopped=True)

    inspect = commands.add_parser(
        "inspect", parents=[common, output_options("the busiest windows")], help="profile a clicks topic with Spark: validity, duplicates, hot windows",
        description="Read a clicks topic with Spark (batch), apply the shared parsing and rule, and summarise: "
        "records, invalid ones by reason, distinct events, windows and hot windows.")
    inspect.add_argument("--topic", help="topic to read (default: kafka.topics.clicks)")
    inspect.add_argument("--top", type=positive(int), default=10, help="busiest windows to list (default 10)")
    inspect.set_defaults(handler=cmd_inspect)
