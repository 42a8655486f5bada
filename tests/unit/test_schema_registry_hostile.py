"""A registry that lies: a schema id that is not an id, an answer of the wrong shape, an answer without end,
an answer that echoes the request's credentials.

The adversary is a registry of the test's own (aiohttp on loopback) that answers every request with
what the test sets. Through the public API (``Producer.send`` with an ``AvroSerializer``, and the
client's methods): a schema id that is not an ``int`` in Kafka's range (0..2**31-1: the wire
format's id is a Java int) is refused with a ``SerializationError`` whose cause, a
``SchemaRegistryError``, names the value, the subject and the URL, and nothing is queued; the
producer is not poisoned (the next answer, the largest id there is, frames the record). A JSON
answer of the wrong shape is named as such. An answer streamed far past the cap (16 MiB) is
refused naming the cap and the URL, and the bytes the server managed to send stay far below the
body's size: the client stopped reading and closed the connection. A registry that echoes the
request (its headers, the Basic pair decoded, the bearer token) in a 401, a 500, a 200 that is not
JSON or a 200 without an id gets none of the credentials out: not in the exception ``send()``
raises, its chain, their notes and reprs, nor the log (``leak_check`` searches every decoding).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from aioproducer import Producer, SerializationError
from aioproducer.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from aioproducer.schema_registry.avro import AvroSerializer
from aioproducer.schema_registry.client import MAX_RESPONSE_BYTES
from aioproducer.testing import MockCluster
from hostile_http import Flood
from leak_check import leaks, texts_of

ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]})
_UNSET: Any = object()


@dataclass
class LyingRegistry:
    """Answers every request 200 with ``answer`` (JSON), or with its flood once that is given a ``total``."""

    answer: Any = _UNSET
    #: With a ``total``: every answer is this flood instead.
    flood: Flood = field(default_factory=lambda: Flood(prefix=b'{"id": 1, "padding": "'))
    paths: list[str] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.path)
        if self.flood.total:
            return await self.flood.handle(request)
        await request.read()
        return web.Response(text=json.dumps(self.answer), content_type="application/vnd.schemaregistry.v1+json")


@pytest.fixture
async def liar() -> AsyncIterator[tuple[LyingRegistry, str]]:
    registry = LyingRegistry()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", registry.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield registry, f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


def client(url: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url, "max.retries": 0})


async def refused_at_send(producer: Producer, why: str) -> SchemaRegistryError:
    """The send's SerializationError saying ``why`` (nothing queued); its cause, the registry's error."""
    with pytest.raises(SerializationError, match="the value serializer failed for topic 'orders'") as info:
        await producer.send("orders", {"id": 1})
    assert why in str(info.value)  # the send's own message says why, not only its cause
    assert producer.metrics()["incomplete_batches"] == 0
    cause = info.value.__cause__
    assert isinstance(cause, SchemaRegistryError), repr(cause)
    return cause


@pytest.mark.parametrize("bad_id", [3.7, True, False, 2**32, 2**31, -5, -1, [1], "5", None, {"id": 1}])
async def test_a_schema_id_that_is_not_an_id_is_refused_at_send_and_the_next_answer_frames_the_record(
    mock_cluster: MockCluster, liar: tuple[LyingRegistry, str], bad_id: Any
) -> None:
    registry, url = liar
    registry.answer = {"id": bad_id, "version": 1}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers,
                        value_serializer=AvroSerializer(client(url), ORDER)) as producer:
        error = await refused_at_send(producer, "the registry returned a schema id that is not an id")
        assert error.error_message == (
            f"the registry returned a schema id that is not an id: {bad_id!r} for subject 'orders-value' "
            "(a schema id is an int in 0..2147483647)"
        )
        assert error.url == f"{url}/subjects/orders-value/versions" and error.url in str(error)
        registry.answer = {"id": 2**31 - 1, "version": 1}  # the largest id there is: taken, framed as it is
        await (await producer.send("orders", {"id": 1}, partition=0))
    (record,) = await mock_cluster.read("orders", count=1)
    assert record.value is not None and record.value[:5] == b"\x00\x7f\xff\xff\xff"


@pytest.mark.parametrize("answer, kind", [
    ([{"id": 1}], "a JSON array"), ("id", "a JSON string"), (7, "a JSON number"), (None, "no body (or null)"),
    ({"version": 1}, None),
])
async def test_an_answer_of_the_wrong_shape_is_named_at_send(
    mock_cluster: MockCluster, liar: tuple[LyingRegistry, str], answer: Any, kind: str | None
) -> None:
    registry, url = liar
    registry.answer = answer
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers,
                        value_serializer=AvroSerializer(client(url), ORDER)) as producer:
        error = await refused_at_send(producer, "answered")
    expected = (f"answered {kind} where a JSON object belongs: {answer!r}" if kind is not None
                else "answered without a schema id for subject 'orders-value': {'version': 1}")
    assert error.error_message == expected and error.url == f"{url}/subjects/orders-value/versions"


Call = Callable[[SchemaRegistryClient], Awaitable[object]]


@pytest.mark.parametrize("call, answer, message", [
    (lambda c: c.get_subjects(), {"subjects": []}, "answered a JSON object where a JSON array of subject names belongs"),
    (lambda c: c.get_subjects(), ["a", 5], "answered subject names with 5 among them, which is not a str"),
    (lambda c: c.get_versions("s"), [1, "2"], "answered versions with '2' among them, which is not a int"),
    (lambda c: c.get_versions("s"), [1, 0], "answered a version that is not a version (an int >= 1): 0"),
    (lambda c: c.delete_subject("s"), {"deleted": [1]}, "answered a JSON object where a JSON array of versions belongs"),
    (lambda c: c.get_schema(1), ["schema"], "answered a JSON array where a JSON object belongs"),
    (lambda c: c.get_schema(1), {"schema": 5}, "answered a schema that is not one"),
    (lambda c: c.get_schema(1), {"schema": "{}", "references": [{"name": "x"}]}, "answered schema references that are not references"),
    (lambda c: c.get_latest_version("s"), {"id": 1.0, "schema": ORDER}, "the registry returned a schema id that is not an id: 1.0 for subject 's'"),
    (lambda c: c.get_version("s", 1), {"id": 1, "schema": ORDER, "version": 2.5}, "answered a version that is not a version (an int >= 1) for subject 's': 2.5"),
    (lambda c: c.lookup_schema("s", Schema(ORDER)), {"id": -5, "schema": ORDER}, "the registry returned a schema id that is not an id: -5"),
    (lambda c: c.test_compatibility("s", Schema(ORDER)), [True], "answered a JSON array where a JSON object belongs"),
    (lambda c: c.get_compatibility(), "BACKWARD", "answered a JSON string where a JSON object belongs"),
])
async def test_every_call_names_an_answer_it_cannot_take(liar: tuple[LyingRegistry, str], call: Call, answer: Any, message: str) -> None:
    registry, url = liar
    registry.answer = answer
    registry_client = client(url)
    with pytest.raises(SchemaRegistryError) as info:
        await call(registry_client)
    await registry_client.close()
    assert message in info.value.error_message and info.value.http_status_code == 200
    assert info.value.url == url + registry.paths[-1] and len(registry.paths) == 1  # asked once: a retry would get the same


@pytest.mark.parametrize("declared", [False, True], ids=["chunked", "content-length"])
async def test_an_answer_past_the_cap_is_refused_unread(
    mock_cluster: MockCluster, liar: tuple[LyingRegistry, str], declared: bool
) -> None:
    registry, url = liar
    flood = registry.flood
    flood.total, flood.declared = 16 * MAX_RESPONSE_BYTES, declared  # 256 MiB
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers,
                        value_serializer=AvroSerializer(client(url), ORDER)) as producer:
        error = await refused_at_send(producer, "answered with a body over the cap of 16777216 bytes")
    await asyncio.wait_for(flood.done.wait(), 10)
    assert error.error_message.startswith("answered with a body over the cap of 16777216 bytes"), error.error_message
    assert error.url == f"{url}/subjects/orders-value/versions"
    if declared:
        assert "(its Content-Length says 268435456 bytes)" in error.error_message
    # The cap, plus what the sockets' buffers and aiohttp's read-ahead held when the client closed.
    assert flood.sent < flood.total // 4, flood.sent


def test_use_schema_id_and_get_schema_take_only_ids() -> None:
    from aioproducer import ConfigError

    registry_client = SchemaRegistryClient({"url": "http://127.0.0.1:1"})
    bad: Any
    for bad in (2**31, -1, True, 1.0):
        with pytest.raises(ConfigError, match=rf"use.schema.id must be a schema id \(an int in 0..2147483647\) or None, got {bad!r}"):
            AvroSerializer(registry_client, None, conf={"use.schema.id": bad, "auto.register.schemas": False})
        with pytest.raises(ValueError, match=rf"schema_id must be a schema id \(an int in 0..2147483647\), got {bad!r}"):
            asyncio.run(registry_client.get_schema(bad))


# ------------------------------------------------------------------------ an echo of the credentials


PASSWORD = 'pa55:w&rd/+="ü <x>-5e1b'
TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvcmRlcnMifQ.s1gn-at_ure~9c2d"


@dataclass
class EchoingRegistry:
    """Answers ``status`` with the request echoed in ``style``: its headers, the Basic pair decoded, the bearer token alone."""

    status: int
    style: str
    received: list[dict[str, str]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        headers = dict(sorted(request.headers.items(), key=lambda item: item[0].lower() != "authorization"))
        self.received.append(headers)
        scheme, _, credentials = headers.get("Authorization", "").partition(" ")
        revealed = base64.b64decode(credentials).decode() if scheme == "Basic" else credentials
        fields = {"credentials": revealed, **headers}
        if self.style == "error-document":
            text = "; ".join(f"{k}={v}" for k, v in fields.items())
            return web.json_response({"error_code": 40101, "message": text}, status=self.status)
        if self.style == "json-object":  # a 200 without an id: the client quotes the object it got
            return web.json_response({"echo": fields}, status=self.status)
        if self.style == "url-encoded":
            return web.Response(text="echo?" + urllib.parse.urlencode(fields), status=self.status)
        return web.Response(text="\n".join(f"{k}: {v}" for k, v in fields.items()), status=self.status)


ECHOES = [(401, "error-document"), (401, "verbatim"), (401, "url-encoded"), (500, "verbatim"), (200, "verbatim"),
          (200, "json-object")]
AUTH: dict[str, dict[str, Any]] = {
    "basic": {"basic.auth.user.info": f"orders:{PASSWORD}"},
    "bearer": {"bearer.auth.credentials.source": "STATIC_TOKEN", "bearer.auth.token": TOKEN},
    "custom-bearer": {"bearer.auth.credentials.source": "CUSTOM",
                      "bearer.auth.custom.provider.function": lambda conf: {"bearer.auth.token": TOKEN}},
}


@pytest.mark.parametrize("auth", AUTH)
@pytest.mark.parametrize("status, style", ECHOES, ids=[f"{status}-{style}" for status, style in ECHOES])
async def test_a_registry_that_echoes_the_request_gets_no_credential_out_of_send(
    mock_cluster: MockCluster, status: int, style: str, auth: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = EchoingRegistry(status, style)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", echo.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    registry_client = SchemaRegistryClient({"url": url, "max.retries": 0, **AUTH[auth]})
    try:
        async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers,
                            value_serializer=AvroSerializer(registry_client, ORDER)) as producer:
            with pytest.raises(SerializationError) as info:
                await producer.send("orders", {"id": 1})
    finally:
        await runner.cleanup()
    assert "***" in str(info.value.__cause__)  # the echo was quoted, and cut: the test reaches the redaction
    pair = f"orders:{PASSWORD}"
    secrets = {PASSWORD, pair, base64.b64encode(pair.encode()).decode()} if auth == "basic" else {TOKEN}
    secrets |= {got["Authorization"] for got in echo.received}
    for text in texts_of(info.value, caplog.records):
        assert not leaks(text, secrets), (leaks(text, secrets), text)
