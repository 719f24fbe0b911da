"""`lakehouse generate` against the real broker, read back by Spark through the Kafka connector.

N records sent are N records on the topic; the same seed and start time give the same bytes; and
the shared parsing finds exactly the malformed records the generator meant, by reason.
"""

import json
from collections import Counter

from lakehouse.cli import main
from shared.kafka import topic_offsets
from lakehouse.topic_profile import profile_topic, read_topic
from tests.conftest import make_config
from tests.contract_oracle import Bounds, expected_reason
from tests.topics import read_to_end


START = "2026-11-22T10:00:00Z"


def generate(capsys, overrides, *args) -> dict:
    code = main(["generate", "--format", "json", *args, *(f"--set={o}" for o in overrides)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def records_by_partition(spark, config, topic) -> dict:
    rows = read_topic(spark, config.kafka, topic).select("partition", "offset", "key", "value").collect()
    return {p: [(bytes(r.key), r.value and bytes(r.value)) for r in sorted(rows, key=lambda r: r.offset) if r.partition == p]
            for p in {r.partition for r in rows}}


def test_generated_records_are_read_back_exactly_and_a_seed_reproduces_them(spark, config, config_overrides, capsys):
    first_topic, second_topic = config.kafka.topics.clicks, config.kafka.topics.clicks + "-again"
    args = ["--events", "3000", "--seed", "42", "--start-time", START, "--hot-pages", "1", "--rate", "2000",
            "--late-fraction", "0.05", "--duplicate-fraction", "0.05", "--malformed-fraction", "0.05"]

    first = generate(capsys, config_overrides + ["hot_pages.threshold=100"], *args, "--topic", first_topic)
    second = generate(capsys, config_overrides + ["hot_pages.threshold=100"], *args, "--topic", second_topic)

    assert first["sent"] == 3000 and sum(first["by_kind"].values()) == 3000
    held = topic_offsets(config.kafka, first_topic)
    assert sum(latest - earliest for earliest, latest in held.values()) == 3000
    assert len(held) == config.kafka.partitions
    first_records = records_by_partition(spark, config, first_topic)
    assert sum(len(records) for records in first_records.values()) == 3000
    assert first_records == records_by_partition(spark, config, second_topic)
    assert first["by_kind"] == second["by_kind"]


def test_the_shared_parsing_finds_what_the_generator_meant(spark, config, config_overrides, capsys):
    summary = generate(capsys, config_overrides + ["hot_pages.threshold=100"], "--events", "4000", "--seed", "7",
                       "--start-time", START, "--rate", "1000", "--hot-pages", "2",
                       "--duplicate-fraction", "0.05", "--malformed-fraction", "0.1")

    profile = profile_topic(spark, make_config(*config_overrides, "hot_pages.threshold=100"), config.kafka.topics.clicks)

    # The contract's reading of each record on the topic (tests/contract_oracle.py), the generator's
    # intent and the shared parsing agree.
    settings = make_config(*config_overrides)
    bounds = Bounds(int(settings.quality.earliest_event_time.timestamp() * 1_000_000),
                    int(settings.quality.max_clock_skew.total_seconds() * 1_000_000))
    read_back = read_to_end(config.kafka, config.kafka.topics.clicks)
    by_contract = Counter(reason for record in read_back
                          if (reason := expected_reason(record.value, record.timestamp_ms * 1000, bounds)))
    assert profile["records"] == len(read_back) == 4000
    assert profile["invalid_by_reason"] == dict(by_contract) == summary["malformed_by_reason"]
    assert profile["valid"] == 4000 - summary["by_kind"]["malformed"]
    # every duplicate repeats an event already counted
    assert profile["distinct_events"] == profile["valid"] - summary["by_kind"]["duplicate"]
    # 4 s of event time from 10:00:00, all in one window: both hot pages are over 100 in it
    hot = [w for w in profile["top_windows"] if w["isHot"]]
    assert {w["pageId"] for w in hot} == {"/promo/flash-sale-1", "/promo/flash-sale-2"}


def test_inspect_summarises_a_topic_as_the_records_sent_say(config, config_overrides):
    """Crafted records, counted here: /a's window has 5 distinct clicks and a copy (hot over 3), /b's 2,
    and two records the contract rejects."""
    from shared.kafka import ensure_topics
    from tests.helpers import click, run_lakehouse, send

    ensure_topics(config.kafka, [config.kafka.topics.clicks])
    send(config, *(click(f"a{n}", "/a", f"10:00:0{n}.000") for n in range(5)), click("a0", "/a", "10:00:00.000"),
         click("b0", "/b", "10:00:01.000"), click("b1", "/b", "10:00:06.000"),
         b"not json", json.dumps({"pageId": "/a", "eventTime": "2026-11-22T10:00:01Z"}).encode())

    shown = run_lakehouse("inspect", "--format", "json", "--set=hot_pages.threshold=3",
                          *(f"--set={item}" for item in config_overrides))

    assert shown.returncode == 0, shown.stderr
    profile = json.loads(shown.stdout)
    assert (profile["records"], profile["valid"], profile["invalid"], profile["distinct_events"]) == (10, 8, 2, 7)
    assert profile["invalid_by_reason"] == {"missing_event_id": 1, "not_json": 1}
    assert (profile["windows"], profile["hot_windows"]) == (3, 1)
    assert [(w["pageId"], w["clickCount"], w["isHot"]) for w in profile["top_windows"]] == [
        ("/a", 5, True), ("/b", 1, False), ("/b", 1, False)]
