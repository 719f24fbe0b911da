"""Why a Kafka client cannot talk to a broker, said in one line before any client starts waiting.

Left to themselves, the clients hide it: kafka-python retries a refused password, an untrusted
certificate or a TLS port spoken to in plaintext until its 30 s timeout and then reports a timeout;
Spark's connector fails the query with a stack trace from an executor. So every command checks
first (`shared.kafka.require_reachable`), with the same settings its clients will use:

  - PLAINTEXT / SASL_PLAINTEXT: a Kafka ApiVersions request in plaintext must get a Kafka answer;
    when it does not, a TLS handshake tells whether the port speaks TLS;
  - SSL / SASL_SSL: a TLS handshake verified against `kafka.security.ssl_cafile` (or the system's
    CAs) and the server's name, as the clients do it;
  - SASL_*: a login with the configured user, through librdkafka, whose error says "invalid
    credentials" where the others time out.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import time
from typing import Any

from shared.config import KafkaConfig
from shared.errors import LakehouseError


class KafkaSecurityError(LakehouseError):
    """The broker answers but refuses this client's security: waiting will not change that."""


def security_problem(kafka: KafkaConfig, server: str, timeout_s: float = 10.0) -> str | None:
    """None when `server` (host:port, known to accept TCP) speaks `kafka`'s security, else why not."""
    security = kafka.security
    protocol = security.protocol
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        if not _answers_plaintext_kafka(server, timeout_s) and _speaks_tls(server, timeout_s):
            return (f"{server} speaks TLS and kafka.security.protocol is {protocol}: set it to SSL or SASL_SSL "
                    "and kafka.security.ssl_cafile to the CA that signed the broker's certificate")
    else:
        problem = _tls_problem(server, security.ssl_cafile, protocol, timeout_s)
        if problem:
            return problem
    if security.sasl_mechanism and protocol.startswith("SASL_"):
        return _login_problem(kafka, server, timeout_s)
    return None


def _answers_plaintext_kafka(server: str, timeout_s: float) -> bool:
    """An ApiVersions v0 request (the first thing every client sends) gets a response with its id."""
    client_id = b"lakehouse-probe"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with _connect(server, timeout_s) as connection:
            connection.sendall(struct.pack(">i", len(body)) + body)
            header = _read_exactly(connection, 8)
    except OSError:
        return False
    return header is not None and struct.unpack(">ii", header)[1] == 7


def _speaks_tls(server: str, timeout_s: float) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with _connect(server, timeout_s) as connection, context.wrap_socket(connection):
            return True
    except (OSError, ssl.SSLError):
        return False


def _tls_problem(server: str, cafile: Any, protocol: str, timeout_s: float) -> str | None:
    host = server.rsplit(":", 1)[0]
    trusted = f"kafka.security.ssl_cafile ({cafile})" if cafile else "the system's CAs (kafka.security.ssl_cafile is unset)"
    try:
        context = ssl.create_default_context(cafile=str(cafile) if cafile else None)
    except (OSError, ssl.SSLError) as error:
        return f"kafka.security.ssl_cafile {cafile} cannot be read as PEM certificates: {error}"
    try:
        with _connect(server, timeout_s) as connection, context.wrap_socket(connection, server_hostname=host):
            return None
    except ssl.SSLCertVerificationError as error:
        return f"the TLS certificate of {server} is not trusted by {trusted}: {error.verify_message}"
    except (OSError, ssl.SSLError) as error:
        why = getattr(error, "reason", None) or error.strerror or type(error).__name__
        return (f"{server} did not complete a TLS handshake ({why}): it does not speak TLS on this port, and "
                f"kafka.security.protocol is {protocol}")


def _login_problem(kafka: KafkaConfig, server: str, timeout_s: float) -> str | None:
    """Log in through librdkafka; its error callback names an authentication failure at once."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from shared.kafka_settings import producer_settings

    failures: list[str] = []

    def on_error(error) -> None:
        if "authentication" in error.str().lower():
            failures.append(error.str())

    settings = {key: value for key, value in producer_settings(kafka).items()
                if key.startswith(("sasl.", "ssl.", "security."))}
    admin = AdminClient(settings | {"bootstrap.servers": server, "error_cb": on_error,
                                    "logger": logging.getLogger("kafka.librdkafka")})
    deadline = time.monotonic() + timeout_s
    while not failures and time.monotonic() < deadline:
        try:
            admin.list_topics(timeout=1)
            return None
        except KafkaException:
            admin.poll(0)  # serves error_cb
    if failures:
        security = kafka.security
        return (f"{server} refused the login of Kafka user {security.sasl_username} ({security.sasl_mechanism}): "
                "check the credentials kafka.security.sasl_username and sasl_password take from the environment")
    return None


def _connect(server: str, timeout_s: float) -> socket.socket:
    host, port = server.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=timeout_s)


def _read_exactly(connection: socket.socket, count: int) -> bytes | None:
    data = b""
    while len(data) < count:
        chunk = connection.recv(count - len(data))
        if not chunk:
            return None
        data += chunk
    return data
