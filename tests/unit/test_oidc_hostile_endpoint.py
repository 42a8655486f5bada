"""A hostile token endpoint: one that echoes the request back gets no secret the client sent out of the
producer, and one that answers without end is refused at the cap, unread.

The adversary is a token endpoint of the test's own (aiohttp on loopback) that answers 401, 400,
500, or a 200 that is not a token, each with the request it got echoed in its body, in the ways a
provider, a gateway's error page or a debugging proxy hands a request back: verbatim, inside an
OAuth error document, JSON-escaped, URL-encoded (a query string), in an HTML page; with the Basic
header's ``id:secret`` decoded as well. Through the public API (``Producer(...).start()`` against
the mock cluster), for the client credentials grant in both ``sasl.oauthbearer.header.urlencode``
settings and for the JWT bearer grant with an assertion file and with one signed from a private
key: the exception ``start()`` raises, every exception chained to it, their notes, ``str`` and
``repr``, and every log record at DEBUG hold none of the secrets the endpoint received, in any
encoding: the check below searches the texts as they are, URL-, HTML- and JSON-unescaped, and
Base64-decodes every run that could be Base64, so it does not trust the redaction's own list.

An endpoint that streams an answer far past the cap (1 MiB) is refused with an error naming the cap
and the URL, and the bytes it managed to send stay near the cap: the client stopped reading and
closed the connection, it did not take the body in.
"""

from __future__ import annotations

import asyncio
import base64
import html
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from aioproducer import Producer
from aioproducer.config import Password
from aioproducer.errors import KafkaConnectionError, KafkaTimeoutError, SaslAuthenticationFailedError
from aioproducer.security.oidc import MAX_TOKEN_RESPONSE_BYTES, OidcSettings, fetch_token
from hostile_http import Flood
from leak_check import leaks, texts_of
from aioproducer.testing import MockCluster

#: Every character class an encoding changes: ':' (the Basic separator), '&', '=', '+', '/', '"',
#: '<', '>' (URL, JSON and HTML escapes), a space and a non-ASCII letter.
SECRET = 'pa55:w&rd/+="ü <x>-7f3c9a'
CLIENT = "orders svc"
JWT_BEARER_RETRIEVER = "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever"
#: An assertion file's JWT: the header and claims are not secret, the signature makes it a credential.
FILE_ASSERTION = (
    base64.urlsafe_b64encode(b'{"alg":"RS256","typ":"JWT"}').rstrip(b"=").decode() + "."
    + base64.urlsafe_b64encode(b'{"iss":"orders","sub":"orders","aud":"idp"}').rstrip(b"=").decode() + "."
    + "Qm9ndXNTaWduYXR1cmUtZm9yLXRoZS1lY2hvLXRlc3Qtb25seS0wYmE3ZTFjNA"
)
STYLES = ("verbatim", "oauth-error", "json-escaped", "url-encoded", "html")


@dataclass
class Received:
    """One request as the endpoint got it."""

    headers: list[tuple[str, str]]
    body: bytes


@dataclass
class EchoEndpoint:
    """``POST /token`` answering ``status`` with the request echoed in ``style``; every request kept."""

    status: int
    style: str
    received: list[Received] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        got = Received(list(request.headers.items()), await request.read())
        self.received.append(got)
        text = self.render(got)
        if self.style == "oauth-error":
            return web.json_response({"error": "invalid_request", "error_description": text}, status=self.status)
        return web.Response(status=self.status, text=text, content_type="text/html" if self.style == "html" else "text/plain")

    def render(self, got: Received) -> str:
        # The Authorization header and the body first: the client quotes only the start of a long answer.
        headers = sorted(got.headers, key=lambda item: item[0].lower() != "authorization")
        body = got.body.decode()
        basic = decoded_basic(got)
        if self.style == "json-escaped":  # a PHP-style echo: \uXXXX for non-ASCII, \/ for /
            return json.dumps({"basic": basic, "body": body, "headers": dict(headers)}).replace("/", "\\/")
        if self.style == "url-encoded":  # a gateway's redirect carrying the request in its query string
            return "echo?" + urllib.parse.urlencode([("basic", basic), ("body", body), *headers])
        lines = "\n".join(f"{name}: {value}" for name, value in headers)
        text = f"{body}\nbasic={basic}\n{lines}"
        return f"<html><body><pre>{html.escape(text)}</pre></body></html>" if self.style == "html" else text


def decoded_basic(got: Received) -> str:
    """The Basic header's ``id:secret`` as the client put it inside the Base64 ('' without one)."""
    value = dict((k.lower(), v) for k, v in got.headers).get("authorization", "")
    return base64.b64decode(value[6:]).decode() if value.startswith("Basic ") else ""


# ------------------------------------------------------------------------ what must not come out


def secrets_sent(received: list[Received], urlencode_header: bool | None) -> set[str]:
    """Every secret value the endpoint got, as the client sent it (client credentials: both urlencode settings)."""
    found: set[str] = set()
    if urlencode_header is not None:
        quoted = urllib.parse.quote(SECRET, safe="")
        found |= {SECRET, quoted}
        for pair in (f"{CLIENT}:{SECRET}", f"{urllib.parse.quote(CLIENT, safe='')}:{quoted}"):
            found |= {pair, base64.b64encode(pair.encode()).decode()}
    for got in received:
        headers = dict((k.lower(), v) for k, v in got.headers)
        if "authorization" in headers:
            found |= {headers["authorization"], headers["authorization"][6:]}
        for assertion in urllib.parse.parse_qs(got.body.decode()).get("assertion", []):
            found |= {assertion, assertion.rpartition(".")[2]}
    assert found, "the endpoint got no secret: the test would prove nothing"
    return found


# ------------------------------------------------------------------------ the producer


@pytest.fixture
async def endpoint(request: pytest.FixtureRequest) -> AsyncIterator[tuple[EchoEndpoint, str]]:
    status, style = request.param
    echo = EchoEndpoint(status, style)
    app = web.Application()
    app.router.add_post("/token", echo.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield echo, f"http://127.0.0.1:{runner.addresses[0][1]}/token"
    finally:
        await runner.cleanup()


@pytest.fixture(scope="module")
def broker() -> Iterator[MockCluster]:
    """One broker: a start's round is one connection, one token request (retried on a 500)."""
    with MockCluster(brokers=1) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = tmp_path_factory.mktemp("echo") / "client.key"
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return path


def sign_in(flow: str, url: str, tmp_path: Path, key_file: Path) -> dict[str, Any]:
    """The OIDC keys of one flow, as a Java user's properties would have them."""
    base = {"sasl.oauthbearer.token.endpoint.url": url}
    if flow.startswith("client-credentials"):
        return base | {
            "sasl.oauthbearer.client.credentials.client.id": CLIENT,
            "sasl.oauthbearer.client.credentials.client.secret": SECRET,
            "sasl.oauthbearer.header.urlencode": flow.endswith("urlencoded"),
        }
    base["sasl.oauthbearer.jwt.retriever.class"] = JWT_BEARER_RETRIEVER
    if flow == "jwt-bearer-file":
        assertion = tmp_path / "assertion.jwt"
        assertion.write_text(FILE_ASSERTION)
        return base | {"sasl.oauthbearer.assertion.file": str(assertion)}
    return base | {"sasl.oauthbearer.assertion.private.key.file": str(key_file),
                   "sasl.oauthbearer.assertion.claim.iss": "orders", "sasl.oauthbearer.assertion.claim.sub": "orders",
                   "sasl.oauthbearer.assertion.claim.aud": url, "sasl.oauthbearer.assertion.claim.jti.include": True}


FLOWS = ("client-credentials", "client-credentials-urlencoded", "jwt-bearer-file", "jwt-bearer-key")
ANSWERS = [(status, style) for status in (401, 400, 500, 200) for style in STYLES]


@pytest.mark.parametrize("flow", FLOWS)
@pytest.mark.parametrize("endpoint", ANSWERS, indirect=True, ids=[f"{s}-{style}" for s, style in ANSWERS])
async def test_an_echoing_token_endpoint_gets_no_secret_out_of_start(
    broker: MockCluster, endpoint: tuple[EchoEndpoint, str], flow: str, tmp_path: Path, key_file: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    echo, url = endpoint
    caplog.set_level(logging.DEBUG)
    # A 500 is retried for 400 ms (a WARNING each time), then the round fails and start() tries
    # again until max.block.ms: room for two rounds, so that start() has failures to name.
    producer = Producer({  # type: ignore[arg-type]  # a dict merged with `|` is dict[str, object] to mypy, not the typed config
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER", "max.block.ms": 1200,
        "sasl.login.retry.backoff.ms": 20, "sasl.login.retry.backoff.max.ms": 400,
    } | sign_in(flow, url, tmp_path, key_file))
    expected = KafkaTimeoutError if echo.status == 500 else SaslAuthenticationFailedError
    try:
        with pytest.raises(expected) as info:
            await producer.start()
    finally:
        await producer.close()
    message = str(info.value)
    if echo.status == 500:  # retried: a WARNING per attempt, then start()'s "last failures"
        assert "last failures" in message and "HTTP 500" in message, message
        assert any(r.levelno == logging.WARNING and "trying again" in r.getMessage() for r in caplog.records)
    elif echo.status != 200:  # refused at once, with the provider's text quoted (redacted), as the test means it to be
        assert f"refused the client (HTTP {echo.status})" in message and "***" in message, message
    else:
        assert "answered without an access_token" in message, message
    secrets = secrets_sent(echo.received, None if flow.startswith("jwt") else flow.endswith("urlencoded"))
    for text in texts_of(info.value, caplog.records):
        assert not leaks(text, secrets), (leaks(text, secrets), text)


# ------------------------------------------------------------------------ an answer without end


@pytest.fixture
async def flood(request: pytest.FixtureRequest) -> AsyncIterator[tuple[Flood, str]]:
    status, declared = request.param
    server = Flood(status, declared, 64 * MAX_TOKEN_RESPONSE_BYTES, b'{"access_token": "')
    app = web.Application()
    app.router.add_post("/token", server.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield server, f"http://127.0.0.1:{runner.addresses[0][1]}/token"
    finally:
        await runner.cleanup()


def refused_unread(server: Flood, message: str, url: str) -> None:
    """The error names the cap and the URL; the server got out a small part of its body (the client closed)."""
    assert f"the token endpoint {url} answered HTTP {server.status} with a body over the cap of 1048576 bytes" in message
    # The cap, plus what the sockets' buffers and aiohttp's read-ahead held when the client closed.
    assert server.sent < server.total // 4, server.sent


@pytest.mark.parametrize("flood", [(200, False), (200, True)], indirect=True, ids=["chunked", "content-length"])
async def test_a_token_answer_past_the_cap_fails_start_at_once_unread(broker: MockCluster, flood: tuple[Flood, str]) -> None:
    server, url = flood
    producer = Producer({
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
        "max.block.ms": 30000, "sasl.oauthbearer.token.endpoint.url": url,
        "sasl.oauthbearer.client.credentials.client.id": CLIENT, "sasl.oauthbearer.client.credentials.client.secret": SECRET,
    })
    try:
        with pytest.raises(SaslAuthenticationFailedError) as info:
            await producer.start()  # a refusal: at once, not after max.block.ms
    finally:
        await producer.close()
    await asyncio.wait_for(server.done.wait(), 10)
    refused_unread(server, str(info.value), url)
    if server.declared:
        assert "(its Content-Length says 67108864 bytes)" in str(info.value)


@pytest.mark.parametrize("flood", [(503, False)], indirect=True)
async def test_a_failing_answer_past_the_cap_stays_retriable(flood: tuple[Flood, str]) -> None:
    server, url = flood
    with pytest.raises(KafkaConnectionError) as info:
        await fetch_token(OidcSettings(url, CLIENT, Password(SECRET)), 0)
    await asyncio.wait_for(server.done.wait(), 10)
    refused_unread(server, str(info.value), url)
