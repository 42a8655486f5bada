"""Small helpers shared by the integration tests (import as ``from helpers import ...``)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Yield to the loop until ``predicate()`` holds; fail the test after ``timeout`` s instead of hanging.

    For states reached through other tasks (a request in flight, a waiter queued), where there is
    no event to await from outside.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not met within {timeout} s")
        await asyncio.sleep(0.002)


def closed_port() -> int:
    """A localhost port nothing listens on (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def other_tasks() -> set[asyncio.Task[Any]]:
    """Tasks still running besides the current one: what a clean close must leave none of."""
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()}


#: Mock-cluster producers whose retries, timeouts and reconnects come within a test's patience.
FAST_RETRIES: dict[str, Any] = {
    "request_timeout_ms": 1000,
    "delivery_timeout_ms": 3000,
    "retry_backoff_ms": 20,
    "retry_backoff_max_ms": 100,
    "reconnect_backoff_ms": 10,
    "reconnect_backoff_max_ms": 100,
    "linger_ms": 2,
}


def tls_files(tmp: Any) -> dict[str, str]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files in ``tmp``."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.timezone.utc)

    def issue(name: str, issuer: Any, issuer_key: Any, key: Any, *, ca: bool, san: Any = None) -> Any:
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(issuer).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if san is not None:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return builder.sign(issuer_key, hashes.SHA256())

    files: dict[str, str] = {}

    def write(name: str, data: bytes) -> None:
        path = tmp / name
        path.write_bytes(data)
        files[name] = str(path)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = issue("test CA", ca_name, ca_key, ca_key, ca=True)
    write("ca.pem", ca.public_bytes(serialization.Encoding.PEM))
    for who, san in (("server", [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), ("client", None)):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = issue(who, ca_name, ca_key, key, ca=False, san=san)
        write(f"{who}.pem", cert.public_bytes(serialization.Encoding.PEM))
        write(f"{who}.key", key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return files
