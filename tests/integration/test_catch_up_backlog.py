"""How old a query's unread backlog is, read from the broker (operational.catch_up): the Kafka
timestamp of the oldest record at the offsets it resumes from. No Spark."""

from __future__ import annotations

from operational.catch_up import oldest_unread_timestamp_ms, unread_from
from shared.kafka import producer_for, topic_offsets


def test_the_oldest_unread_record_is_found_at_each_partitions_resume_offset(configured):
    config = configured("operational.starting_offsets=earliest")
    topic = config.kafka.topics.clicks
    producer = producer_for(config.kafka)
    for partition, stamps in ((0, [5_000, 9_000, 12_000]), (1, [7_000, 8_000])):
        for stamp in stamps:
            producer.send(topic, b"{}", timestamp_ms=1_795_000_000_000 + stamp, partition=partition)
    producer.flush()

    def oldest(read_up_to):
        unread = unread_from(config.kafka, topic, read_up_to, config.operational)
        found = oldest_unread_timestamp_ms(config.kafka, topic, unread)
        return None if found is None else found - 1_795_000_000_000

    assert oldest(None) == 5_000, "a first start from the earliest offsets"
    assert oldest({0: 1, 1: 0}) == 7_000
    assert oldest({0: 2, 1: 2}) == 12_000, "partition 1 is read to its end"
    assert oldest({0: 3, 1: 2}) is None
    assert topic_offsets(config.kafka, topic) == {0: (0, 3), 1: (0, 2)}


def test_a_first_start_from_the_latest_offsets_has_nothing_unread(configured):
    config = configured("operational.starting_offsets=latest")
    producer = producer_for(config.kafka)
    producer.send(config.kafka.topics.clicks, b"{}", partition=0)
    producer.flush()

    unread = unread_from(config.kafka, config.kafka.topics.clicks, None, config.operational)

    assert oldest_unread_timestamp_ms(config.kafka, config.kafka.topics.clicks, unread) is None
