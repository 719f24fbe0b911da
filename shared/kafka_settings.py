"""Kafka's settings rendered from config, for each client: kafka-python's keyword arguments,
librdkafka's settings, the option map of Spark's Kafka source and sink, the Java clients' JAAS line.
Security is written once in config (`kafka.security`) and rendered here; nothing here connects.
"""

from __future__ import annotations

from typing import Any

from shared.config import KafkaConfig

_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def client_settings(kafka: KafkaConfig) -> dict[str, Any]:
    """Keyword arguments every kafka-python client gets: bootstrap servers and security."""
    security = kafka.security
    settings: dict[str, Any] = {
        "bootstrap_servers": kafka.bootstrap_servers.split(","),
        "security_protocol": security.protocol,
    }
    if security.sasl_mechanism:
        settings |= {
            "sasl_mechanism": security.sasl_mechanism,
            "sasl_plain_username": security.sasl_username,
            "sasl_plain_password": security.sasl_password.get_secret_value() if security.sasl_password else None,
        }
    if security.ssl_cafile:
        settings["ssl_cafile"] = str(security.ssl_cafile)
    return settings


def spark_options(kafka: KafkaConfig) -> dict[str, str]:
    """`kafka.*` options for Spark's Kafka source and sink: bootstrap servers and security."""
    security = kafka.security
    options = {
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "kafka.security.protocol": security.protocol,
    }
    if security.sasl_mechanism:
        password = security.sasl_password.get_secret_value() if security.sasl_password else ""
        options |= {
            "kafka.sasl.mechanism": security.sasl_mechanism,
            "kafka.sasl.jaas.config": jaas_config(security.sasl_mechanism, security.sasl_username or "", password),
        }
    if security.ssl_cafile:
        options |= {
            "kafka.ssl.truststore.type": "PEM",
            "kafka.ssl.truststore.location": str(security.ssl_cafile),
        }
    return options


def jaas_config(mechanism: str, username: str, password: str) -> str:
    """The Java clients' (and the broker's) `sasl.jaas.config` line for one user."""
    return f'{_JAAS_MODULES[mechanism]} required username="{_jaas_quote(username)}" password="{_jaas_quote(password)}";'


def _jaas_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def producer_settings(kafka: KafkaConfig) -> dict[str, Any]:
    """librdkafka settings for `producer_for`: bootstrap servers, security, `kafka.producer`."""
    security, producer = kafka.security, kafka.producer
    settings: dict[str, Any] = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "security.protocol": security.protocol.lower(),
        "linger.ms": producer.linger_ms,
        "batch.size": producer.batch_size,
        "compression.type": producer.compression_type or "none",
        "acks": str(producer.acks),
        "partitioner": "murmur2_random",  # the Java client's: a key lands where a Java producer puts it
        # the generator's pacing is the flow control: let a second or two of records queue
        "queue.buffering.max.messages": 1_000_000,
    }
    if security.sasl_mechanism:
        settings |= {
            "sasl.mechanism": security.sasl_mechanism,
            "sasl.username": security.sasl_username or "",
            "sasl.password": security.sasl_password.get_secret_value() if security.sasl_password else "",
        }
    if security.ssl_cafile:
        settings["ssl.ca.location"] = str(security.ssl_cafile)
    return settings
