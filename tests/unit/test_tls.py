"""Tests for aioproducer.security.tls: SSLContexts from the Java ssl.* keys, proven by real local handshakes.

The certificates are made here with ``cryptography`` (a CA, a second unrelated CA, a server
certificate for localhost/127.0.0.1, an expired one, a client certificate), written as PEM and
PKCS12 files. Each handshake runs against an asyncio server on 127.0.0.1 that upgrades the
connection with ``StreamWriter.start_tls`` and records its own outcome, then answers ``ok``.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import logging
import os
import shutil
import socket
import ssl
import stat
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from aioproducer.errors import ConfigError, KafkaConnectionError
from aioproducer.security.tls import (
    IANA_TO_OPENSSL_CIPHERS,
    TLS13_CIPHER_SUITES,
    TlsSettings,
    build_ssl_context,
    describe_ssl_error,
    with_librdkafka_aliases,
)

TRUST_PASSWORD = "trust-Secret-4711"
KEYSTORE_PASSWORD = "store-Secret-0815"
KEY_PASSWORD = "key-Secret-1234"
WRONG_PASSWORD = "wrong-Secret-9999"
SECRETS = (TRUST_PASSWORD, KEYSTORE_PASSWORD, KEY_PASSWORD, WRONG_PASSWORD)

# ------------------------------------------------------------------ test material


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


@dataclass
class Issued:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self, password: str | None = None) -> bytes:
        encryption: serialization.KeySerializationEncryption = (
            serialization.NoEncryption() if password is None else serialization.BestAvailableEncryption(password.encode())
        )
        return self.key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _issue(
    common_name: str,
    issuer: Issued | None,
    *,
    ca: bool = False,
    sans: list[x509.GeneralName] | None = None,
    usage: x509.ObjectIdentifier | None = None,
    expired: bool = False,
) -> Issued:
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    not_after = now - datetime.timedelta(days=1) if expired else now + datetime.timedelta(days=30)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(issuer.cert.subject if issuer else _name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=10))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    cert = builder.sign(issuer.key if issuer else key, hashes.SHA256())
    return Issued(key, cert)


@dataclass
class Material:
    dir: Path
    ca: Issued
    other_ca: Issued
    server: Issued
    expired_server: Issued
    client: Issued

    def path(self, name: str) -> str:
        return str(self.dir / name)


def _write(directory: Path, name: str, data: bytes) -> None:
    (directory / name).write_bytes(data)


def _p12(issued: Issued | None, cas: list[x509.Certificate], password: str) -> bytes:
    return pkcs12.serialize_key_and_certificates(
        b"client" if issued else None,
        issued.key if issued else None,
        issued.cert if issued else None,
        cas,
        serialization.BestAvailableEncryption(password.encode()),
    )


@pytest.fixture(scope="session")
def material(tmp_path_factory: pytest.TempPathFactory) -> Material:
    d = tmp_path_factory.mktemp("tls")
    ca = _issue("Test CA", None, ca=True)
    other_ca = _issue("Unrelated CA", None, ca=True)
    server_sans: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    server = _issue("localhost", ca, sans=server_sans, usage=ExtendedKeyUsageOID.SERVER_AUTH)
    expired = _issue("localhost", ca, sans=server_sans, usage=ExtendedKeyUsageOID.SERVER_AUTH, expired=True)
    client = _issue("client", ca, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    stranger = _issue("stranger", other_ca, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    m = Material(d, ca, other_ca, server, expired, client)
    _write(d, "ca.pem", ca.cert_pem)
    _write(d, "bundle.pem", b"# two CAs\n" + other_ca.cert_pem + ca.cert_pem)
    _write(d, "other_ca.pem", other_ca.cert_pem)
    _write(d, "server.pem", server.cert_pem + ca.cert_pem + server.key_pem())
    _write(d, "expired_server.pem", expired.cert_pem + expired.key_pem())
    _write(d, "client_chain.pem", client.cert_pem + ca.cert_pem)
    _write(d, "client_key.pem", client.key_pem())
    _write(d, "client_key_encrypted.pem", client.key_pem(KEY_PASSWORD))
    _write(d, "client_keystore.pem", client.cert_pem + ca.cert_pem + client.key_pem())
    _write(d, "client_keystore_encrypted.pem", client.key_pem(KEY_PASSWORD) + client.cert_pem)
    _write(d, "stranger_keystore.pem", stranger.cert_pem + stranger.key_pem())
    _write(d, "client_wrong_key.pem", client.cert_pem + server.key_pem())
    _write(d, "truststore.p12", _p12(None, [ca.cert], TRUST_PASSWORD))
    _write(d, "client.p12", _p12(client, [ca.cert], KEYSTORE_PASSWORD))
    _write(d, "fake.jks", b"\xfe\xed\xfe\xed\x00\x00\x00\x02" + os.urandom(64))
    _write(d, "fake.jceks", b"\xce\xce\xce\xce\x00\x00\x00\x02" + os.urandom(64))
    _write(d, "garbage.bin", b"this is neither PEM nor PKCS12\n" * 3)
    return m


Keys = dict[str, Any]  # TlsSettings keywords; "@name" is a file of the material, a callable is called with it


def _settings(m: Material, keys: Keys) -> TlsSettings:
    def value(v: Any) -> Any:
        if isinstance(v, str) and v.startswith("@"):
            return m.path(v[1:])
        return v(m) if callable(v) else v

    return TlsSettings(**{k: value(v) for k, v in keys.items()})


def _client_key(password: str | None = None) -> Callable[[Material], str]:
    return lambda m: m.client.key_pem(password).decode()


def _client_chain(m: Material) -> str:
    return m.client.cert_pem.decode()


def _ca(m: Material) -> str:
    return m.ca.cert_pem.decode()


P12_TRUST = {"truststore_location": "@truststore.p12", "truststore_password": TRUST_PASSWORD}
P12_KEYS = {"keystore_location": "@client.p12", "keystore_password": KEYSTORE_PASSWORD}
ENCRYPTED_PEM_KEYS = {"keystore_location": "@client_keystore_encrypted.pem"}
INLINE_KEYS = {"keystore_certificate_chain": _client_chain, "keystore_key": _client_key()}


# ------------------------------------------------------------------ local servers


def server_context(material: Material, cert: str = "server.pem", require_client: bool = False) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(material.path(cert))
    if require_client:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(material.path("ca.pem"))
    return ctx


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


@contextmanager
def blocking_tls_server(ctx: ssl.SSLContext) -> Iterator[tuple[int, list[BaseException | None]]]:
    """A one-connection server in a thread, with a blocking ``ssl`` socket.

    Unlike an asyncio server, it sends its TLS alert (handshake failure, unknown CA, protocol
    version) before it closes, as a broker does: the client then sees the alert itself.
    """
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            conn, _ = listener.accept()
            conn.settimeout(10)
            with ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(b"ok\n")
            outcome.append(None)
        except OSError as exc:  # ssl.SSLError included
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], outcome
    finally:
        thread.join(10)
        listener.close()


@dataclass
class TlsServer:
    port: int
    outcome: asyncio.Future[Any]  # the client certificate dict on success, the exception otherwise


@asynccontextmanager
async def tls_server(ctx: ssl.SSLContext) -> AsyncIterator[TlsServer]:
    outcome: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await writer.start_tls(ctx)
            writer.write(b"ok\n")
            await writer.drain()
            outcome.set_result(writer.get_extra_info("peercert"))
        except Exception as exc:  # the outcome is what the test asserts on
            outcome.set_result(exc)
        finally:
            writer.close()

    async with serve(handle) as port:
        yield TlsServer(port, outcome)


async def talk(
    ctx: ssl.SSLContext, port: int, server_hostname: str = "localhost", timeout: float = 10.0
) -> tuple[bytes, ssl.SSLObject]:
    """Handshake with the server on ``port`` and read its line; returns it and the client's SSL object."""
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=ctx, server_hostname=server_hostname, ssl_handshake_timeout=timeout
    )
    try:
        ssl_object: ssl.SSLObject = writer.get_extra_info("ssl_object")
        return await reader.readline(), ssl_object
    finally:
        writer.close()


async def handshake_ok(ctx: ssl.SSLContext, material: Material, **server: Any) -> ssl.SSLObject:
    async with tls_server(server_context(material, **server)) as srv:
        line, ssl_object = await talk(ctx, srv.port)
        assert line == b"ok\n"
        assert not isinstance(await srv.outcome, Exception)
        return ssl_object


async def handshake_error(
    ctx: ssl.SSLContext, material: Material, server_hostname: str = "localhost", **server: Any
) -> BaseException:
    """The error the client meets (at the handshake or its first read); fails if it gets ``ok``."""
    async with tls_server(server_context(material, **server)) as srv:
        client_error: BaseException | None = None
        try:
            line, _ = await talk(ctx, srv.port, server_hostname)
            assert line != b"ok\n", "the handshake succeeded"
        except (ssl.SSLError, ConnectionError) as exc:
            client_error = exc
        server_error = await asyncio.wait_for(srv.outcome, 10)  # the server saw the failure too
        assert isinstance(server_error, Exception)
        return client_error or server_error


# ------------------------------------------------------------------ trust: handshakes that work


def test_no_truststore_means_the_system_cas(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    original = ssl.SSLContext.load_default_certs

    def spy(self: ssl.SSLContext, purpose: Any = ssl.Purpose.SERVER_AUTH) -> None:
        calls.append(purpose)
        original(self, purpose)

    monkeypatch.setattr(ssl.SSLContext, "load_default_certs", spy)
    ctx = build_ssl_context(TlsSettings())
    assert calls == [ssl.Purpose.SERVER_AUTH]
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)


def test_a_truststore_replaces_the_system_cas(material: Material, monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(self: ssl.SSLContext, purpose: Any = ssl.Purpose.SERVER_AUTH) -> None:
        raise AssertionError("the system CAs were loaded besides the truststore")

    monkeypatch.setattr(ssl.SSLContext, "load_default_certs", forbidden)
    ctx = build_ssl_context(TlsSettings(truststore_location=material.path("bundle.pem")))
    assert ctx.cert_store_stats()["x509_ca"] == 2  # as Java: the truststore's certificates only


async def test_system_cas_do_not_trust_the_test_ca(material: Material) -> None:
    err = await handshake_error(build_ssl_context(TlsSettings()), material)
    assert isinstance(err, ssl.SSLCertVerificationError)
    assert "not signed by a trusted CA" in describe_ssl_error(err, "localhost:9093")


@pytest.mark.parametrize(
    "settings",
    [
        pytest.param(lambda m: TlsSettings(truststore_location=m.path("bundle.pem")), id="pem-file-two-cas"),
        pytest.param(lambda m: TlsSettings(truststore_location=m.path("ca.pem"), truststore_type="pem"), id="pem-typed"),
        pytest.param(lambda m: TlsSettings(truststore_certificates=m.ca.cert_pem.decode()), id="inline-pem"),
        pytest.param(
            lambda m: TlsSettings(truststore_location=m.path("truststore.p12"), truststore_password=TRUST_PASSWORD),
            id="pkcs12-inferred",
        ),
        pytest.param(
            lambda m: TlsSettings(
                truststore_location=m.path("truststore.p12"), truststore_type="PKCS12", truststore_password=TRUST_PASSWORD
            ),
            id="pkcs12-typed",
        ),
        pytest.param(
            lambda m: TlsSettings(
                truststore_location=m.path("truststore.p12"), truststore_type="JKS", truststore_password=TRUST_PASSWORD
            ),
            id="pkcs12-file-typed-jks-as-java",
        ),
    ],
)
async def test_truststore_forms_verify_the_broker(material: Material, settings: Callable[[Material], TlsSettings]) -> None:
    ssl_object = await handshake_ok(build_ssl_context(settings(material)), material)
    peer = ssl_object.getpeercert()
    assert peer is not None and peer["subject"] == ((("commonName", "localhost"),),)


async def test_unrelated_ca_is_refused(material: Material) -> None:
    ctx = build_ssl_context(TlsSettings(truststore_location=material.path("other_ca.pem")))
    err = await handshake_error(ctx, material)
    assert isinstance(err, ssl.SSLCertVerificationError) and err.verify_code in (19, 20)  # 19: the server sends its CA
    message = describe_ssl_error(err, "localhost:9093")
    assert message.startswith("the TLS certificate of localhost:9093 was rejected")
    assert "not signed by a trusted CA" in message and "ssl.truststore.location" in message


async def test_hostname_mismatch_is_refused(material: Material) -> None:
    for algorithm in ("https", "HTTPS"):
        ctx = build_ssl_context(_client_settings(material, endpoint_identification_algorithm=algorithm))
        err = await handshake_error(ctx, material, server_hostname="wrong.example")
        assert isinstance(err, ssl.SSLCertVerificationError) and err.verify_code == 62
        message = describe_ssl_error(err, "wrong.example:9093")
        assert "not issued for the host name" in message and "ssl.endpoint.identification.algorithm" in message


async def test_empty_endpoint_identification_skips_the_host_name_but_not_the_chain(material: Material) -> None:
    for algorithm in ("", "none"):
        ctx = build_ssl_context(_client_settings(material, endpoint_identification_algorithm=algorithm))
        assert not ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED
        async with tls_server(server_context(material)) as srv:
            line, _ = await talk(ctx, srv.port, server_hostname="wrong.example")
            assert line == b"ok\n"
    untrusting = build_ssl_context(
        TlsSettings(truststore_location=material.path("other_ca.pem"), endpoint_identification_algorithm="")
    )
    err = await handshake_error(untrusting, material, server_hostname="wrong.example")
    assert isinstance(err, ssl.SSLCertVerificationError)


async def test_expired_server_certificate_is_refused(material: Material) -> None:
    ctx = build_ssl_context(TlsSettings(truststore_location=material.path("ca.pem")))
    err = await handshake_error(ctx, material, cert="expired_server.pem")
    assert isinstance(err, ssl.SSLCertVerificationError) and err.verify_code == 10
    assert "has expired; renew it on the broker" in describe_ssl_error(err, "localhost:9093")


# ------------------------------------------------------------------ identity: mutual TLS


def _client_settings(m: Material, **keys: Any) -> TlsSettings:
    return TlsSettings(truststore_location=m.path("ca.pem"), **keys)


@pytest.mark.parametrize(
    "keystore",
    [
        pytest.param({"keystore_location": "@client_keystore.pem"}, id="pem-file"),
        pytest.param(
            {"keystore_location": "@client_keystore_encrypted.pem", "keystore_type": "PEM", "key_password": KEY_PASSWORD},
            id="pem-file-encrypted-key",
        ),
        pytest.param(INLINE_KEYS, id="inline-pem"),
        pytest.param(
            {**INLINE_KEYS, "keystore_key": _client_key(KEY_PASSWORD), "key_password": KEY_PASSWORD},
            id="inline-pem-encrypted-key",
        ),
        pytest.param({"keystore_location": "@client.p12", "keystore_password": KEYSTORE_PASSWORD}, id="pkcs12"),
    ],
)
async def test_mutual_tls_client_certificate_is_accepted(material: Material, keystore: Keys) -> None:
    ctx = build_ssl_context(_settings(material, {"truststore_location": "@ca.pem", **keystore}))
    async with tls_server(server_context(material, require_client=True)) as srv:
        line, _ = await talk(ctx, srv.port)
        assert line == b"ok\n"
        peer = await srv.outcome
        assert isinstance(peer, dict) and peer["subject"] == ((("commonName", "client"),),)


@pytest.mark.parametrize(
    ("client", "server_versions", "expected"),
    [
        pytest.param(
            {},
            None,
            "(tlsv13 alert certificate required): the broker requires a client certificate (mutual TLS); "
            "set ssl.keystore.location",
            id="tls13-no-client-certificate",
        ),
        pytest.param(
            {"enabled_protocols": ("TLSv1.2",)},
            None,
            "(sslv3 alert handshake failure): no cipher suite in common (check ssl.cipher.suites), or the broker "
            "requires a client certificate (ssl.keystore.location)",
            id="tls12-no-client-certificate",
        ),
        pytest.param(
            {"keystore_location": "stranger_keystore.pem"},
            None,
            "(tlsv1 alert unknown ca): the broker rejected our client certificate",
            id="client-certificate-from-unknown-ca",
        ),
        pytest.param(
            {"enabled_protocols": ("TLSv1.3",)},
            ssl.TLSVersion.TLSv1_2,
            "(tlsv1 alert protocol version): no TLS version in common; check ssl.enabled.protocols",
            id="no-common-version",
        ),
    ],
)
async def test_alerts_from_the_broker_are_described(
    material: Material, client: dict[str, Any], server_versions: ssl.TLSVersion | None, expected: str
) -> None:
    keys = {k: material.path(v) if k == "keystore_location" else v for k, v in client.items()}
    ctx = build_ssl_context(_client_settings(material, **keys))
    server_ctx = server_context(material, require_client=True)
    if server_versions is not None:
        server_ctx.maximum_version = server_versions
    with blocking_tls_server(server_ctx) as (port, server_outcome):
        with pytest.raises(ssl.SSLError) as info:
            await talk(ctx, port)
    assert isinstance(server_outcome[0], ssl.SSLError)
    assert expected in describe_ssl_error(info.value, "localhost:9093")


def test_key_file_is_private_encrypted_and_deleted(material: Material, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, int, int, bytes]] = []
    original = ssl.SSLContext.load_cert_chain

    def spy(self: ssl.SSLContext, certfile: str, keyfile: Any = None, password: Any = None) -> None:
        mode = stat.S_IMODE(os.stat(certfile).st_mode)
        dir_mode = stat.S_IMODE(os.stat(os.path.dirname(certfile)).st_mode)
        seen.append((certfile, mode, dir_mode, Path(certfile).read_bytes()))
        original(self, certfile, keyfile, password)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    for keystore in (
        {"keystore_location": material.path("client_keystore.pem")},
        {"keystore_location": material.path("client.p12"), "keystore_password": KEYSTORE_PASSWORD},
        {"keystore_certificate_chain": _client_chain(material), "keystore_key": _client_key()(material)},
    ):
        build_ssl_context(_client_settings(material, **keystore))
    assert len(seen) == 3
    for certfile, mode, dir_mode, content in seen:
        assert (mode, dir_mode) == (0o600, 0o700)
        assert b"-----BEGIN ENCRYPTED PRIVATE KEY-----" in content and b"-----BEGIN PRIVATE KEY-----" not in content
        assert not os.path.exists(certfile) and not os.path.exists(os.path.dirname(certfile))


# ------------------------------------------------------------------ describe_ssl_error on live failures


async def test_tls_against_a_plaintext_port(material: Material) -> None:
    async def kafka_like(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(5)  # the start of the ClientHello, read as a request
        writer.write(b"\x00\x00\x00\x0a" + b"not-tls!!!")
        await writer.drain()
        writer.close()

    ctx = build_ssl_context(TlsSettings(truststore_location=material.path("ca.pem")))
    async with serve(kafka_like) as port:
        with pytest.raises(ssl.SSLError) as info:
            await talk(ctx, port)
    direct = describe_ssl_error(info.value, "broker:9092")
    assert direct.startswith("the TLS handshake with broker:9092 failed ("), direct  # "wrong version number" (OpenSSL 3.0)
    assert "TLS against a PLAINTEXT listener; check security.protocol and the port" in direct
    wrapped = KafkaConnectionError("connect failed")
    wrapped.__cause__ = info.value
    assert describe_ssl_error(wrapped, "broker:9092") == direct


async def test_plaintext_port_that_hangs_up(material: Material) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(5)
        writer.close()

    ctx = build_ssl_context(TlsSettings(truststore_location=material.path("ca.pem")))
    async with serve(hang_up) as port:
        with pytest.raises((ssl.SSLError, ConnectionError)) as info:
            await talk(ctx, port)
    assert "closed the connection during the TLS handshake" in describe_ssl_error(info.value, "broker:9092")


async def test_handshake_timeout(material: Material) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # never answers; returns when the client gives up
        writer.close()

    ctx = build_ssl_context(TlsSettings(truststore_location=material.path("ca.pem")))
    async with serve(silent) as port:
        with pytest.raises((TimeoutError, ConnectionError)) as info:
            await talk(ctx, port, timeout=0.2)
    assert "TLS handshake with broker:9092 timed out" in describe_ssl_error(info.value, "broker:9092")


def test_describe_is_one_line_for_anything() -> None:
    assert describe_ssl_error(ValueError("a\nb"), "h:1") == "TLS connection to h:1 failed: ValueError: a b"
    assert "timed out" in describe_ssl_error(TimeoutError(), "h:1")


# ------------------------------------------------------------------ protocols and cipher suites


@pytest.mark.parametrize(
    ("protocols", "expected"), [(("TLSv1.2",), "TLSv1.2"), (("TLSv1.3",), "TLSv1.3"), (("tlsv1.2", "TLSv1.3"), "TLSv1.3")]
)
async def test_enabled_protocols_are_negotiated(material: Material, protocols: tuple[str, ...], expected: str) -> None:
    ctx = build_ssl_context(_client_settings(material, enabled_protocols=protocols))
    ssl_object = await handshake_ok(ctx, material)
    assert ssl_object.version() == expected


async def test_iana_cipher_name_is_mapped_and_used(material: Material) -> None:
    ctx = build_ssl_context(_client_settings(material, cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",)))
    assert ctx.maximum_version == ssl.TLSVersion.TLSv1_2  # as Java: no TLS 1.3 suite listed, no TLS 1.3
    ssl_object = await handshake_ok(ctx, material)
    assert ssl_object.version() == "TLSv1.2"
    cipher = ssl_object.cipher()
    assert cipher is not None and cipher[0] == "ECDHE-ECDSA-AES128-GCM-SHA256"


async def test_openssl_cipher_names_and_java_scsv_are_accepted(material: Material) -> None:
    ctx = build_ssl_context(
        _client_settings(
            material,
            cipher_suites=(
                "ECDHE-ECDSA-AES256-GCM-SHA384:!aNULL",
                "TLS_EMPTY_RENEGOTIATION_INFO_SCSV",
                "TLS_AES_256_GCM_SHA384",
            ),
        )
    )
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    tls12 = {c["name"] for c in ctx.get_ciphers() if c["protocol"] == "TLSv1.2"}
    assert tls12 == {"ECDHE-ECDSA-AES256-GCM-SHA384"}


def test_tls13_suites_only_means_tls13_and_a_subset_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="aioproducer.security.tls"):
        ctx = build_ssl_context(TlsSettings(cipher_suites=("TLS_AES_128_GCM_SHA256",)))
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    assert "cannot be restricted" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="aioproducer.security.tls"):
        build_ssl_context(TlsSettings(cipher_suites=tuple(sorted(TLS13_CIPHER_SUITES))))
    assert caplog.text == ""


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_cipher_table_matches_openssl_standard_names() -> None:
    out = subprocess.run(
        ["openssl", "ciphers", "-stdname", "-tls1_2", "ALL:@SECLEVEL=0"], capture_output=True, text=True, check=True
    ).stdout
    openssl_names = dict(line.split()[0:3:2] for line in out.splitlines())
    for iana, name in IANA_TO_OPENSSL_CIPHERS.items():
        assert openssl_names.get(iana) == name, iana


# ------------------------------------------------------------------ bad inputs: ConfigError naming the key


def _config_error(settings: TlsSettings) -> str:
    with pytest.raises(ConfigError) as info:
        build_ssl_context(settings)
    message = str(info.value)
    for secret in SECRETS:
        assert secret not in message
    assert "-----END" not in message  # no PEM material (the messages may name a BEGIN line as a hint)
    assert "\n" not in message
    return message


#: (test id, TlsSettings keywords, fragments the message must hold)
BAD_INPUTS: list[tuple[str, Keys, tuple[str, ...]]] = [
    ("missing truststore", {"truststore_location": "@nope.pem"}, ("ssl.truststore.location", "not found", "nope.pem")),
    ("missing keystore", {**P12_KEYS, "keystore_location": "@nope.p12"}, ("ssl.keystore.location", "not found", "nope.p12")),
    (
        "truststore wrong password",
        {**P12_TRUST, "truststore_password": WRONG_PASSWORD},
        ("ssl.truststore.location", "wrong ssl.truststore.password", "truststore.p12"),
    ),
    ("truststore no password", {"truststore_location": "@truststore.p12"}, ("ssl.truststore.password is not set",)),
    (
        "keystore wrong password",
        {**P12_KEYS, "keystore_password": WRONG_PASSWORD},
        ("ssl.keystore.location", "wrong ssl.keystore.password", "client.p12"),
    ),
    ("keystore PKCS12 without password", {"keystore_location": "@client.p12"}, ("ssl.keystore.password", "is required")),
    ("garbage truststore", {"truststore_location": "@garbage.bin"}, ("ssl.truststore.location", "neither PEM nor PKCS12")),
    ("garbage keystore", {**P12_KEYS, "keystore_location": "@garbage.bin"}, ("ssl.keystore.location", "neither PEM")),
    (
        "JKS file",
        {**P12_TRUST, "truststore_location": "@fake.jks"},
        ("ssl.truststore.location", "Java KeyStore", "keytool -importkeystore -srckeystore", "-deststoretype PKCS12"),
    ),
    (
        "JKS keystore",
        {**P12_KEYS, "keystore_location": "@fake.jks", "keystore_type": "JKS"},
        ("ssl.keystore.location", "keytool", "ssl.keystore.type=PKCS12"),
    ),
    (
        "JCEKS file",
        {**P12_TRUST, "truststore_location": "@fake.jceks", "truststore_type": "JCEKS"},
        ("ssl.truststore.location", "keytool", "fake.jceks"),
    ),
    ("unknown type", {"truststore_location": "@ca.pem", "truststore_type": "BKS"}, ("ssl.truststore.type", "BKS")),
    ("PEM type on PKCS12", {**P12_TRUST, "truststore_type": "PEM"}, ("ssl.truststore.location", "not PEM")),
    (
        "PKCS12 type on PEM",
        {**P12_TRUST, "truststore_location": "@ca.pem", "truststore_type": "PKCS12"},
        ("ssl.truststore.location", "ssl.truststore.type=PEM"),
    ),
    (
        "PEM truststore with password",
        {**P12_TRUST, "truststore_location": "@ca.pem"},
        ("ssl.truststore.password", "no password"),
    ),
    (
        "PEM keystore with store password",
        {**P12_KEYS, "keystore_location": "@client_keystore.pem"},
        ("ssl.keystore.password", "ssl.key.password"),
    ),
    ("truststore password alone", {"truststore_password": TRUST_PASSWORD}, ("ssl.truststore.password", "location is not")),
    ("no certificate in PEM", {"truststore_location": "@client_key.pem"}, ("ssl.truststore.location", "no PEM certificate")),
    (
        "inline trust and location",
        {"truststore_location": "@ca.pem", "truststore_certificates": _ca},
        ("ssl.truststore.certificates", "ssl.truststore.location"),
    ),
    (
        "inline trust typed PKCS12",
        {"truststore_certificates": _ca, "truststore_type": "PKCS12"},
        ("ssl.truststore.certificates", "PEM"),
    ),
    (
        "wrong key password",
        {**ENCRYPTED_PEM_KEYS, "key_password": WRONG_PASSWORD},
        ("ssl.keystore.location", "wrong ssl.key.password", "client_keystore_encrypted.pem"),
    ),
    ("missing key password", ENCRYPTED_PEM_KEYS, ("ssl.keystore.location", "encrypted", "set ssl.key.password")),
    (
        "key does not match certificate",
        {"keystore_location": "@client_wrong_key.pem"},
        ("ssl.keystore.location", "does not match the certificate", "client_wrong_key.pem"),
    ),
    ("no key in PEM keystore", {"keystore_location": "@client_chain.pem"}, ("ssl.keystore.location", "no PEM private key")),
    (
        "inline key without chain",
        {"keystore_key": _client_key(KEY_PASSWORD), "key_password": KEY_PASSWORD},
        ("ssl.keystore.certificate.chain", "is required"),
    ),
    (
        "inline wrong key password",
        {**INLINE_KEYS, "keystore_key": _client_key(KEY_PASSWORD), "key_password": WRONG_PASSWORD},
        ("ssl.keystore.key", "wrong ssl.key.password"),
    ),
    ("bad endpoint algorithm", {"endpoint_identification_algorithm": "ldaps"}, ("ssl.endpoint.identification", "ldaps")),
    ("TLSv1.1", {"enabled_protocols": ("TLSv1.2", "TLSv1.1")}, ("ssl.enabled.protocols", "TLSv1.1", "deprecated")),
    ("unknown protocol", {"enabled_protocols": ("TLSv9",)}, ("ssl.enabled.protocols", "TLSv9")),
    ("no protocol", {"enabled_protocols": ()}, ("ssl.enabled.protocols", "empty")),
    (
        "unknown IANA cipher",
        {"cipher_suites": ("TLS_ECDH_ECDSA_WITH_AES_128_GCM_SHA256",)},  # static ECDH: Java has it, OpenSSL 3 not
        ("ssl.cipher.suites", "TLS_ECDH_ECDSA_WITH_AES_128_GCM_SHA256", "OpenSSL name"),
    ),
    (
        "unknown OpenSSL cipher",
        {"cipher_suites": ("ECDHE-RSA-AES128-GCM-SHA256", "NOT-A-CIPHER")},
        ("ssl.cipher.suites", "NOT-A-CIPHER"),
    ),
    (
        "TLS 1.3 suites without TLS 1.3",
        {"cipher_suites": ("TLS_AES_128_GCM_SHA256",), "enabled_protocols": ("TLSv1.2",)},
        ("ssl.cipher.suites", "TLSv1.3"),
    ),
    (
        "TLS 1.2 suites with TLS 1.3 only",
        {"cipher_suites": ("ECDHE-RSA-AES128-GCM-SHA256",), "enabled_protocols": ("TLSv1.3",)},
        ("ssl.cipher.suites", "TLS 1.3"),
    ),
]


@pytest.mark.parametrize(("keys", "expected"), [pytest.param(k, e, id=name) for name, k, e in BAD_INPUTS])
def test_bad_input_is_a_config_error_naming_the_key(material: Material, keys: Keys, expected: tuple[str, ...]) -> None:
    message = _config_error(_settings(material, keys))
    for fragment in expected:
        assert fragment in message, (fragment, message)


# ------------------------------------------------------------------ without cryptography


@pytest.fixture
def no_cryptography(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("cryptography.hazmat.primitives.serialization", "cryptography.hazmat.primitives.serialization.pkcs12"):
        monkeypatch.setitem(sys.modules, name, None)
    yield


@pytest.mark.usefixtures("no_cryptography")
def test_pkcs12_without_cryptography_says_how_to_install(material: Material) -> None:
    message = _config_error(_settings(material, P12_TRUST))
    assert "ssl.truststore.location" in message and "pip install 'aioproducer[tls]'" in message


@pytest.mark.usefixtures("no_cryptography")
async def test_pem_keystores_work_without_cryptography(material: Material) -> None:
    settings = _settings(material, {"truststore_location": "@ca.pem", **ENCRYPTED_PEM_KEYS, "key_password": KEY_PASSWORD})
    async with tls_server(server_context(material, require_client=True)) as srv:
        line, _ = await talk(build_ssl_context(settings), srv.port)
        assert line == b"ok\n"
    assert "wrong ssl.key.password" in _config_error(replace(settings, key_password=WRONG_PASSWORD))
    assert "set ssl.key.password" in _config_error(replace(settings, key_password=None))
    mismatch = _config_error(TlsSettings(keystore_location=material.path("client_wrong_key.pem")))
    assert "does not match the certificate" in mismatch


# ------------------------------------------------------------------ repr and librdkafka aliases


def test_repr_masks_passwords_and_inline_keys(material: Material) -> None:
    key = material.client.key_pem().decode()
    settings = TlsSettings(
        truststore_password=TRUST_PASSWORD,
        keystore_password=KEYSTORE_PASSWORD,
        key_password=KEY_PASSWORD,
        keystore_key=key,
        keystore_location="/etc/kafka/client.p12",
    )
    text = repr(settings)
    assert all(secret not in text for secret in SECRETS) and "PRIVATE KEY" not in text
    assert text.count("'***'") == 4
    assert "keystore_location='/etc/kafka/client.p12'" in text and "truststore_password=None" not in text
    assert "truststore_location=None" in text


async def test_librdkafka_aliases(material: Material) -> None:
    settings = with_librdkafka_aliases(
        TlsSettings(),
        {
            "ssl.ca.location": material.path("ca.pem"),
            "ssl.certificate.location": material.path("client_chain.pem"),
            "ssl.key.location": material.path("client_key_encrypted.pem"),
        },
    )
    async with tls_server(server_context(material, require_client=True)) as srv:
        line, _ = await talk(build_ssl_context(replace(settings, key_password=KEY_PASSWORD)), srv.port)
        assert line == b"ok\n"
    message = _config_error(settings)  # no ssl.key.password: named by the key the user wrote
    key_file = material.path("client_key_encrypted.pem")
    assert message.startswith(f"ssl.key.location ({key_file}): the private key is encrypted")
    inline = with_librdkafka_aliases(
        TlsSettings(),
        {"ssl.ca.pem": _ca(material), "ssl.certificate.pem": _client_chain(material), "ssl.key.pem": _client_key()(material)},
    )
    async with tls_server(server_context(material, require_client=True)) as srv:
        line, _ = await talk(build_ssl_context(inline), srv.port)
        assert line == b"ok\n"
    missing = _config_error(with_librdkafka_aliases(TlsSettings(), {"ssl.ca.location": material.path("nope.pem")}))
    assert missing.startswith("ssl.ca.location: file not found")


async def test_librdkafka_ca_directory_and_probe(material: Material, tmp_path: Path) -> None:
    empty = _config_error(with_librdkafka_aliases(TlsSettings(), {"ssl.ca.location": str(tmp_path)}))
    assert "ssl.ca.location" in empty and "openssl rehash" in empty
    assert with_librdkafka_aliases(TlsSettings(), {"ssl.ca.location": "probe"}) == TlsSettings()
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command for the certificate hash")
    subject_hash = subprocess.run(
        ["openssl", "x509", "-hash", "-noout", "-in", material.path("ca.pem")], capture_output=True, text=True, check=True
    ).stdout.strip()
    shutil.copy(material.path("ca.pem"), tmp_path / f"{subject_hash}.0")
    ctx = build_ssl_context(with_librdkafka_aliases(TlsSettings(), {"ssl.ca.location": str(tmp_path)}))
    await handshake_ok(ctx, material)


def test_librdkafka_alias_conflicts(material: Material) -> None:
    cases: list[tuple[TlsSettings, dict[str, str], str]] = [
        (TlsSettings(truststore_location="x"), {"ssl.ca.location": "y"}, "ssl.ca.location"),
        (TlsSettings(), {"ssl.ca.location": "y", "ssl.ca.pem": "z"}, "ssl.ca.pem"),
        (TlsSettings(), {"ssl.key.pem": "k"}, "ssl.certificate.location"),
        (TlsSettings(keystore_location="x"), {"ssl.key.pem": "k", "ssl.certificate.pem": "c"}, "ssl.keystore"),
        (
            TlsSettings(),
            {"ssl.certificate.location": material.path("nope.pem"), "ssl.key.pem": "k"},
            "ssl.certificate.location: file not found",
        ),
        (TlsSettings(), {"ssl.ca.path": "x"}, "ssl.ca.path"),
    ]
    for base, aliases, fragment in cases:
        with pytest.raises(ConfigError, match=fragment.replace(".", r"\.")):
            with_librdkafka_aliases(base, aliases)
