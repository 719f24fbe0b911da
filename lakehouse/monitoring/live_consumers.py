"""What the Kafka consumers of this JVM say now: how far each partition's reader is behind, and when
it last polled. It is how a real-time batch is seen while it runs.

A real-time batch reports its progress when it ends, a checkpoint interval after it began, and its
tasks' metrics reach the driver only then (their heartbeats carry none while they run). The Kafka
clients its source tasks read with keep their own metrics, live: per partition `records-lag` (the
partition's end offset minus the consumer's position, at its last fetch), per client
`last-poll-seconds-ago`. With local masters the tasks run in the driver's JVM, whose MBean server
holds them; on a cluster they are in the executors' JVMs and this finds none.

    consumer_readings(spark)  # {"page-clicks": ConsumerReading(lags={0: 12, 1: 0}, last_poll_s=0.1)}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from shared.spark_internals import py4j_gateway

#: A client that has not polled for this long is an idle pooled consumer (an earlier batch's).
ACTIVE_WITHIN_S = 10.0
_FETCH = "kafka.consumer:type=consumer-fetch-manager-metrics,client-id=*,topic=*,partition=*"
_CLIENT = "kafka.consumer:type=consumer-metrics,client-id=*"


@dataclass(frozen=True)
class ConsumerReading:
    """One topic as this JVM's active consumers read it: records behind per partition, and the
    seconds since one of them last polled."""

    lags: dict[int, int]
    last_poll_s: float


def consumer_readings(spark: Any) -> dict[str, ConsumerReading]:
    """Per topic read by an active Kafka consumer in this JVM: its partitions' lag (the least any
    active client reports) and how recently it polled."""
    beans = _MBeans(spark)
    polled = {}
    for client in beans.names(_CLIENT):
        seconds = beans.attribute(client, "last-poll-seconds-ago")
        if seconds is not None and 0 <= seconds <= ACTIVE_WITHIN_S:
            polled[client.getKeyProperty("client-id")] = float(seconds)
    lags: dict[str, dict[int, int]] = {}
    last_poll: dict[str, float] = {}
    for fetch in beans.names(_FETCH):
        client = fetch.getKeyProperty("client-id")
        lag = beans.attribute(fetch, "records-lag")
        if client not in polled or lag is None or lag != lag:  # NaN: no fetch yet
            continue
        topic, partition = fetch.getKeyProperty("topic"), int(fetch.getKeyProperty("partition"))
        known = lags.setdefault(topic, {})
        known[partition] = min(int(lag), known.get(partition, int(lag)))
        last_poll[topic] = min(polled[client], last_poll.get(topic, polled[client]))
    return {topic: ConsumerReading(partition_lags, last_poll[topic]) for topic, partition_lags in lags.items()}


class _MBeans:
    """The JVM's platform MBean server through py4j, called by reflection on its public interface
    (its implementation class is not exported to other modules, so py4j cannot call it directly)."""

    def __init__(self, spark: Any):
        self._gateway, jvm = py4j_gateway(spark)
        self._jvm = jvm
        self._server = jvm.java.lang.management.ManagementFactory.getPlatformMBeanServer()
        connection = jvm.java.lang.Class.forName("javax.management.MBeanServerConnection")
        self._query = connection.getMethod("queryNames", self._classes("javax.management.ObjectName",
                                                                       "javax.management.QueryExp"))
        self._get = connection.getMethod("getAttribute", self._classes("javax.management.ObjectName",
                                                                       "java.lang.String"))

    def _classes(self, *names: str) -> Any:
        array = self._gateway.new_array(self._jvm.java.lang.Class, len(names))
        for index, name in enumerate(names):
            array[index] = self._jvm.java.lang.Class.forName(name)
        return array

    def _objects(self, *values: Any) -> Any:
        array = self._gateway.new_array(self._jvm.java.lang.Object, len(values))
        for index, value in enumerate(values):
            array[index] = value
        return array

    def names(self, pattern: str) -> list[Any]:
        return list(self._query.invoke(self._server, self._objects(self._jvm.javax.management.ObjectName(pattern), None)))

    def attribute(self, name: Any, attribute: str) -> float | None:
        try:
            value = self._get.invoke(self._server, self._objects(name, attribute))
        except Exception:  # the client closed meanwhile, or has no such attribute
            return None
        return float(value) if value is not None else None
