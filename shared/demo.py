"""`lakehouse demo`: what the product does so far, end to end, on the embedded default.

Starts the embedded broker (unless one runs), sends 15 seconds of shop traffic with three hot
pages and a little late, duplicate and malformed data to a fresh demo topic, then reads it back
with Spark through the shared parsing and rule, and stops the broker it started.
"""

from __future__ import annotations

import sys
import time

from shared.config import Config

DEMO_TOPIC = "demo-page-clicks"


def run_demo(config: Config, seconds: float, rate: float) -> int:
    from shared.broker import EmbeddedBroker
    from shared.cli import main
    from shared.kafka import admin_client

    def step(title: str) -> None:
        print(f"\n== {title}", flush=True)

    started_at = time.monotonic()
    broker = EmbeddedBroker(config, log=lambda message: print(f"   {message}", file=sys.stderr))
    was_running = broker.status().running
    settings = [f"--set=kafka.bootstrap_servers={config.kafka.bootstrap_servers}",
                f"--set=broker.run_dir={config.broker.run_dir}"]
    try:
        step("1. the embedded Kafka broker")
        if main(["kafka", "start", *settings]) != 0:
            return 1
        with admin_client(config.kafka) as admin:
            if DEMO_TOPIC in admin.list_topics():
                admin.delete_topics([DEMO_TOPIC])
                deadline = time.monotonic() + 30
                while DEMO_TOPIC in admin.list_topics() and time.monotonic() < deadline:
                    time.sleep(0.2)  # deletion is asynchronous: recreate only once it is gone
                print(f"   emptied {DEMO_TOPIC} from an earlier demo", file=sys.stderr)

        step(f"2. {seconds:g} s of synthetic clicks at {rate:,.0f}/s: 3 hot pages, 1% late, 1% duplicate, 0.5% malformed")
        code = main(["generate", "--seconds", str(seconds), "--rate", str(rate), "--hot-pages", "3",
                     "--late-fraction", "0.01", "--duplicate-fraction", "0.01", "--malformed-fraction", "0.005",
                     "--topic", DEMO_TOPIC, *settings])
        if code != 0:
            return code

        step("3. what both paths will see: the topic read by Spark through the shared parsing and rule")
        code = main(["inspect", "--topic", DEMO_TOPIC, "--top", "8", *settings])
        if code != 0:
            return code
    finally:
        if not was_running:
            step("4. clean stop")
            broker.stop()
    print(f"\ndemo done in {time.monotonic() - started_at:.0f} s. Next: `make test`; "
          "`.venv/bin/lakehouse --help` lists the commands.")
    return 0
