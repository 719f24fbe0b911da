"""What the notebooks in notebooks/ share: their configuration, a Spark session, and traffic.

Every notebook starts with `setting_up()`: the embedded default (or $LAKEHOUSE_CONFIG on top of
it), its own topics and a `notebooks` folder under the storage root, so that running them never
touches the demo's or a real deployment's data; the embedded broker is started when none answers.
The notebooks' kernel is the medallion's runtime (pyspark 4.1 with Delta), so the fast path they start
runs in micro-batch mode; real-time mode needs the fast path's runtime (`lakehouse operational`).
"""

from __future__ import annotations

from typing import Any

from shared.config import Config

from shared.config_loading import load_config, with_overrides

CLICKS = "notebook-page-clicks"
ALERTS = "notebook-hot-pages"
#: Sessions that close within a notebook's traffic: visitors who click every second, sessions ended after
#: 5 s without a click (1 s after a purchase), written once a minute of event time has passed them.
SESSIONS = ("sessions.enabled=true", "sessions.gap=5 seconds", "sessions.gap_by_event_type={purchase: 1 seconds}",
            "analytical.watermark=1 minute")


def setting_up() -> tuple[Config, Any]:
    """(config, spark) for a notebook; the broker is started if none answers, the topics created."""
    from lakehouse.services.broker import EmbeddedBroker
    from shared.kafka import broker_answers, ensure_topics
    from shared.spark import spark_session

    base = load_config()
    config = with_overrides(base, [f"kafka.topics.clicks={CLICKS}", f"kafka.topics.alerts={ALERTS}",
                                   f"storage.root={base.path('notebooks')}", "operational.starting_offsets=earliest",
                                   "hot_pages.threshold=500", "operational.mode=micro-batch", *SESSIONS])
    if not broker_answers(config.kafka, timeout_s=3):
        EmbeddedBroker(config, log=print).start()
    ensure_topics(config.kafka, [CLICKS, ALERTS], timestamp_type="LogAppendTime")
    return config, spark_session(config)


def send_traffic(config: Config, seconds: float = 10, rate: float = 2000, hot_pages: int = 3,
                 paced: bool = True, seed: int = 7) -> dict[str, int]:
    """`seconds` of generated clicks at `rate` (paced, or as fast as it sends), with hot pages, a little bad
    data, and visitors who add to cart and buy, twice as often after clicking a hot page."""
    from datetime import timedelta

    from lakehouse.services.generator import ClickGenerator, TrafficSpec, send
    from shared.kafka import producer_for

    spec = TrafficSpec.for_config(config, rate, hot_pages=hot_pages, late_fraction=0.01, duplicate_fraction=0.01,
                                  malformed_fraction=0.005, seed=seed, think_time=timedelta(seconds=1),
                                  cart_probability=0.1, purchase_probability=0.2, hot_uplift=1.0,
                                  anonymous_fraction=0.05)
    sent = send(ClickGenerator(spec), producer_for(config.kafka), CLICKS, int(seconds * rate), paced=paced)
    return dict(sent.counts.by_kind)
