"""A certificate authority and a server certificate it signs, made for the embedded secured broker.

Production brokers carry certificates from the organisation's CA; the embedded broker makes its own
at its first secured start (`lakehouse kafka start` with `kafka.security.protocol: SASL_SSL`) and
keeps them in its run folder: clients trust `ca.pem` (point `kafka.security.ssl_cafile` at it), the
broker serves `server.pem` (its private key and certificate, PEM, read by the broker only).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

VALID_FOR = dt.timedelta(days=825)


@dataclass(frozen=True)
class Authority:
    ca: Path  # the CA's certificate: what clients trust
    server: Path  # the server's private key and certificate chain: what the broker serves


def authority_in(folder: Path, hosts: list[str]) -> Authority:
    """The CA and server certificate in `folder`, made once (for `hosts`: names or IP addresses)."""
    made = Authority(ca=folder / "ca.pem", server=folder / "server.pem")
    if made.ca.exists() and made.server.exists():
        return made
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "clickstream-lakehouse embedded CA")])
    ca_cert = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                     crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    server_key = ec.generate_private_key(ec.SECP256R1())
    names = [_subject_alternative_name(host) for host in hosts]
    server_cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name).public_key(server_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + VALID_FOR)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    key = server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    write_private(made.server, key + server_cert.public_bytes(pem) + ca_cert.public_bytes(pem))
    made.ca.write_bytes(ca_cert.public_bytes(pem))
    return made  # the CA's key is not kept: nothing else is ever signed with it


def _subject_alternative_name(host: str):
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def write_private(path: Path, content: bytes) -> None:
    """Write a file only its owner can read (created so: never readable by others, even briefly)."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(content)

