"""The web integrations, run as real servers: uvicorn and aiohttp on 127.0.0.1, real HTTP requests.

Each example service (``examples/fastapi_service.py``, ``examples/aiohttp_service.py``) serves
against the mock cluster; what it published is read back by an independent consumer
(aiokafka), which checks the value, key and ``request-id`` header the service chose.
Shutdown with the brokers down must end within its bounds and count what it lost;
a full buffer must be a 503 the client can retry; an unreachable cluster must stop startup
(``wait_ready=True``). With the session's real Kafka node behind a FaultProxy that refuses
connections, each example must serve from the start, answer ``/ready`` and publishes with
503 + ``Retry-After``, and turn ready by itself once the broker answers.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import importlib.util
import json
import logging
import re
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import httpx
import pytest
import uvicorn
from aiohttp import web
from fastapi import Depends, FastAPI, Request

from aioproducer import KafkaConnectionError, KafkaTimeoutError, Producer, ProducerClosedError
from aioproducer.integrations import aiohttp as aiohttp_integration
from aioproducer.integrations.fastapi import (
    ProducerDep,
    default_producer,
    get_producer,
    install_exception_handlers,
    producer_lifespan,
)
from aioproducer.testing import FakeProducer, FaultProxy, KafkaCluster, MockCluster
from conftest import kafka_or_skip, new_topic
from helpers import closed_port, eventually
from readback import read_aiokafka

pytestmark = pytest.mark.integration

TOPIC = "orders"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: Producer configuration (Java keys: the examples merge it into their own) sized for the in-process mock.
FAST: dict[str, Any] = {
    "request.timeout.ms": 2000,
    "retry.backoff.ms": 20,
    "reconnect.backoff.ms": 10,
    "reconnect.backoff.max.ms": 100,
    "linger.ms": 0,
}
#: Long enough that a record never expires during a test: only close() may give up on it.
NO_EXPIRY: dict[str, Any] = {"delivery.timeout.ms": 120_000, "request.timeout.ms": 60_000}


def load_example(name: str) -> ModuleType:
    """An example program as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.asynccontextmanager
async def uvicorn_server(app: FastAPI, **config: Any) -> AsyncIterator[tuple[str, uvicorn.Server]]:
    """``app`` served by uvicorn on a free port of 127.0.0.1, in this event loop; stopped on exit."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="on", log_level="warning", log_config=None, **config)
    )

    async def serve() -> object:
        """``server.serve()``; a failed startup is ``sys.exit(3)`` there, caught here, in its own task.

        A SystemExit leaving a task would stop the test's event loop itself.
        """
        try:
            await server.serve()
        except SystemExit as exc:
            return exc.code
        return None

    task = asyncio.create_task(serve())
    await eventually(lambda: server.started or task.done(), timeout=15, what="uvicorn started")
    if not server.started:
        raise RuntimeError(f"uvicorn stopped during startup (exit status {await task})")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", server
    finally:
        server.should_exit = True
        await task


@contextlib.asynccontextmanager
async def aiohttp_server(app: web.Application) -> AsyncIterator[str]:
    """``app`` served by aiohttp on a free port of 127.0.0.1; cleaned up (cleanup_ctx included) on exit."""
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


async def check_published(
    bootstrap: str, answer: dict[str, Any], body: bytes, key: bytes | None, request_id: str, topic: str = TOPIC
) -> None:
    """The record the service said it wrote is there, as an independent consumer reads it."""
    assert answer["topic"] == topic and answer["request_id"] == request_id
    [record] = await read_aiokafka(bootstrap, topic, answer["partition"], count=1, start_offset=answer["offset"])
    assert record.value == body
    assert record.key == key
    assert record.headers == [("request-id", request_id.encode())]


async def wait_until_ready(client: httpx.AsyncClient, timeout: float = 15) -> None:
    """Poll ``GET /ready`` until it answers 200, as a load balancer does before sending traffic."""
    deadline = time.monotonic() + timeout
    while (response := await client.get("/ready")).status_code != 200:
        assert response.status_code == 503, response.text
        if time.monotonic() > deadline:
            pytest.fail(f"/ready still {response.status_code} after {timeout} s")
        await asyncio.sleep(0.05)  # a probe's period: the condition is the answer, bounded above


async def scrape(client: httpx.AsyncClient, path: str = "/metrics") -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``GET /metrics`` as Prometheus scrapes it, parsed back: (sample name, sorted labels) -> value."""
    from prometheus_client import CONTENT_TYPE_LATEST
    from prometheus_client.parser import text_string_to_metric_families

    response = await client.get(path)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == CONTENT_TYPE_LATEST
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def sent_by_client(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[str, float]:
    """``kafka_producer_record_send_total`` per ``client_id``."""
    return {dict(labels)["client_id"]: v for (name, labels), v in samples.items() if name == "kafka_producer_record_send_total"}


async def post_events(client: httpx.AsyncClient, bootstrap: str) -> None:
    """Five events, one without a request-id (the service makes one): each read back as the service wrote it."""
    bodies = [json.dumps({"user_id": f"u{i % 3}", "n": i}).encode() for i in range(5)]
    request_ids = [f"req-{i}" if i else "" for i in range(5)]
    responses = await asyncio.gather(
        *(
            client.post("/events", content=body, headers={"request-id": rid} if rid else {})
            for body, rid in zip(bodies, request_ids)
        )
    )
    for i, (response, body) in enumerate(zip(responses, bodies)):
        assert response.status_code == 200, response.text
        answer = response.json()
        expected_id = request_ids[i] or answer["request_id"]
        if not request_ids[i]:
            assert len(expected_id) == 36, "a generated request-id is a uuid"
        await check_published(bootstrap, answer, body, f"u{i % 3}".encode(), expected_id)
    bad = await client.post("/events", content=b"[1, 2]")
    assert bad.status_code == 422


# ------------------------------------------------------------------ FastAPI


async def test_fastapi_example_publishes_requests(mock_cluster: MockCluster) -> None:
    app = load_example("fastapi_service").create_app(mock_cluster.bootstrap_servers, TOPIC, producer_config=FAST)
    async with uvicorn_server(app) as (url, _server), httpx.AsyncClient(base_url=url) as client:
        await wait_until_ready(client)
        assert (await client.get("/ready")).json() == {"ready": True}
        await post_events(client, mock_cluster.bootstrap_servers)
        samples = await scrape(client)  # the example's metrics_route
    [sent] = sent_by_client(samples).values()
    assert sent == 5
    [(_, labels)] = [key for key in samples if key[0] == "kafka_producer_delivery_latency_seconds_count"]
    assert samples[("kafka_producer_delivery_latency_seconds_count", labels)] == 5


async def test_avro_example_publishes_orders_confluents_deserializer_reads(mock_cluster: MockCluster) -> None:
    """examples/avro_service.py: orders as registry-framed Avro; 422 for an order that does not fit, 503 for a registry down."""
    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from aioproducer.testing import SchemaRegistry

    with SchemaRegistry() as registry:
        app = load_example("avro_service").create_app(
            mock_cluster.bootstrap_servers, TOPIC, registry.url, producer_config=FAST,
            registry_config={"max.retries": 0, "timeout": 2},
        )
        async with uvicorn_server(app) as (url, _server), httpx.AsyncClient(base_url=url) as client:
            await wait_until_ready(client)
            registry.stop()  # down before the first order: the order was fine, come back later
            down = await client.post("/orders", json={"id": 5, "amount": 7.5})
            assert down.status_code == 503 and down.headers["retry-after"] == "1"
            registry.start()
            placed = [await client.post("/orders", json={"id": i, "amount": i * 1.5, "note": None if i % 2 else "gift"}) for i in range(4)]
            assert [r.status_code for r in placed] == [200] * 4
            wrong = await client.post("/orders", json={"id": "seven", "amount": 1.0})
            assert wrong.status_code == 422 and "does not fit Avro schema" in wrong.json()["detail"]
            registry.stop()  # the schema id is known now: orders go out without the registry
            assert (await client.post("/orders", json={"id": 4, "amount": 6.0})).status_code == 200
            registry.start()
        from readback import read_all_records

        by_partition = await read_all_records(mock_cluster.bootstrap_servers, TOPIC, range(6), timeout=8.0)
        got = [rec for records in by_partition.values() for rec in records]
        deserializer = AvroDeserializer(ConfluentClient({"url": registry.url}))
        orders = {rec.key: deserializer(rec.value, SerializationContext(TOPIC, MessageField.VALUE)) for rec in got}
    assert orders == {
        **{str(i).encode(): {"id": i, "amount": i * 1.5, "note": None if i % 2 else "gift"} for i in range(4)},
        b"4": {"id": 4, "amount": 6.0, "note": None},
    }


async def test_fastapi_shutdown_with_brokers_down_is_bounded_and_counts_the_lost(
    mock_cluster: MockCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Requests in flight when the brokers went down: stopping takes the graceful timeout plus close_timeout, no more."""
    caplog.set_level(logging.INFO, logger="aioproducer.integrations")
    close_timeout, graceful = 1.0, 0.5
    config = {**FAST, **NO_EXPIRY}
    app = load_example("fastapi_service").create_app(
        mock_cluster.bootstrap_servers, TOPIC, producer_config=config, close_timeout=close_timeout
    )
    async with contextlib.AsyncExitStack() as stack:
        url, server = await stack.enter_async_context(uvicorn_server(app, timeout_graceful_shutdown=graceful))
        client = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=30))
        warm = await client.post("/events", content=b'{"user_id": "w"}')  # metadata known: later sends queue at once
        assert warm.status_code == 200
        producer: Producer = app.state.aioproducer_producers["default"]
        for broker in mock_cluster.broker_ids:
            mock_cluster.broker_down(broker)
        requests = [asyncio.create_task(client.post("/events", content=b'{"user_id": "u%d"}' % i)) for i in range(3)]
        await eventually(lambda: producer._pending_records() == 3, what="3 records queued")
        started = time.monotonic()
        server.should_exit = True
        await eventually(lambda: not server.started or producer.ready is False, timeout=10, what="shutdown began")
        answers = await asyncio.gather(*requests, return_exceptions=True)
        await stack.aclose()
        elapsed = time.monotonic() - started
    assert not any(isinstance(a, httpx.Response) and a.status_code == 200 for a in answers)
    assert elapsed < graceful + close_timeout + 2.0, f"shutdown took {elapsed:.2f} s"
    assert "closed: 3 records not delivered over its life (3 during close, close_timeout=1.0 s)" in caplog.text


async def test_fastapi_full_buffer_is_503_with_retry_after(mock_cluster: MockCluster) -> None:
    """Brokers down, so the buffer never frees: a request that needs memory waits max.block.ms, then 503."""
    config = {**FAST, **NO_EXPIRY, "batch.size": 1024, "buffer.memory": 2048, "max.block.ms": 300}
    app = load_example("fastapi_service").create_app(mock_cluster.bootstrap_servers, TOPIC, producer_config=config)
    async with uvicorn_server(app) as (url, _server), httpx.AsyncClient(base_url=url, timeout=30) as client:
        assert (await client.post("/events", content=b'{"user_id": "w"}')).status_code == 200
        producer: Producer = app.state.aioproducer_producers["default"]
        for broker in mock_cluster.broker_ids:
            mock_cluster.broker_down(broker)
        big = json.dumps({"user_id": "a", "pad": "x" * 1400}).encode()
        first = asyncio.create_task(client.post("/events", content=big))  # takes most of the buffer, never sent
        await eventually(lambda: producer.metrics()["buffer_available_bytes"] < 1024, what="buffer taken")
        refused = await client.post("/events", content=big)
        assert refused.status_code == 503, refused.text
        assert refused.headers["retry-after"] == "1"
        assert refused.json()["error"] == "KafkaTimeoutError"
        too_large = await client.post("/events", content=json.dumps({"user_id": "b", "pad": "x" * 3000}).encode())
        assert too_large.status_code == 413, too_large.text
        assert too_large.json()["error"] == "RecordTooLargeError"
        for broker in mock_cluster.broker_ids:
            mock_cluster.broker_up(broker)
        delivered = await first  # the queued record goes out once the brokers are back
        assert delivered.status_code == 200, delivered.text
        await check_published(mock_cluster.bootstrap_servers, delivered.json(), big, b"a", delivered.json()["request_id"])


async def test_fastapi_startup_against_unreachable_cluster_fails_clearly(caplog: pytest.LogCaptureFixture) -> None:
    bootstrap = f"127.0.0.1:{closed_port()}"
    app = load_example("fastapi_service").create_app(
        bootstrap, TOPIC, producer_config={"max.block.ms": 500}, wait_ready=True
    )
    with pytest.raises(RuntimeError, match="uvicorn stopped during startup"):
        async with uvicorn_server(app):
            pass
    # Refused again and again for max.block.ms, then the error names the servers and how they failed.
    assert (
        "KafkaTimeoutError: start(): no bootstrap server answered within max.block.ms=500 ms "
        f"(bootstrap.servers={bootstrap}); last failures: no broker answered Metadata: {bootstrap}: could not connect"
    ) in caplog.text
    assert not getattr(app.state, "aioproducer_producers", None), "a failed startup registered no producer"


async def test_fastapi_wait_ready_false_serves_before_the_producer_started(mock_cluster: MockCluster) -> None:
    """The first request waits for the background start (through the dependency) instead of failing."""
    app = FastAPI(lifespan=producer_lifespan({"bootstrap.servers": mock_cluster.bootstrap_servers}, wait_ready=False))

    @app.post("/send")
    async def send(producer: ProducerDep) -> dict[str, int]:
        metadata = await producer.send_and_wait(TOPIC, b"v", key=b"k")
        return {"offset": metadata.offset, "partition": metadata.partition}

    mock_cluster.set_rtt(1, 200)  # slow the cluster's first answer: the server is up before the producer
    mock_cluster.set_rtt(2, 200)
    mock_cluster.set_rtt(3, 200)
    async with uvicorn_server(app) as (url, _server), httpx.AsyncClient(base_url=url, timeout=30) as client:
        producer: Producer = app.state.aioproducer_producers["default"]
        assert not producer.ready, "startup waited for the producer"
        response = await client.post("/send")
        assert response.status_code == 200, response.text
        assert producer.ready


async def test_fastapi_dependency_override_and_serialization_error_is_422(mock_cluster: MockCluster) -> None:
    """A test's own producer through app.dependency_overrides; a value no serializer takes is a 422."""
    app = FastAPI()  # no lifespan: the override supplies the producer
    install_exception_handlers(app)

    @app.post("/number")
    async def number(producer: ProducerDep) -> dict[str, int]:
        await producer.send(TOPIC, value=12345)  # an int, and no value_serializer
        return {}

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:

        async def override() -> Producer:
            return producer

        app.dependency_overrides[default_producer] = override
        async with uvicorn_server(app) as (url, _server), httpx.AsyncClient(base_url=url) as client:
            response = await client.post("/number")
    assert response.status_code == 422, response.text
    assert response.json()["error"] == "SerializationError"


# ------------------------------------------------------------------ aiohttp


async def test_aiohttp_example_publishes_requests(mock_cluster: MockCluster) -> None:
    app = load_example("aiohttp_service").create_app(mock_cluster.bootstrap_servers, TOPIC, producer_config=FAST)
    async with aiohttp_server(app) as url, httpx.AsyncClient(base_url=url) as client:
        await wait_until_ready(client)
        await post_events(client, mock_cluster.bootstrap_servers)
        samples = await scrape(client)  # the example's metrics_route
    [sent] = sent_by_client(samples).values()
    assert sent == 5


async def test_aiohttp_cleanup_with_brokers_down_is_bounded_and_counts_the_lost(
    mock_cluster: MockCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="aioproducer.integrations")
    module = load_example("aiohttp_service")
    app = module.create_app(mock_cluster.bootstrap_servers, TOPIC, producer_config={**FAST, **NO_EXPIRY}, close_timeout=1.0)
    async with contextlib.AsyncExitStack() as stack:
        url = await stack.enter_async_context(aiohttp_server(app))
        client = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=30))
        assert (await client.post("/events", content=b'{"user_id": "w"}')).status_code == 200
        producer: Producer = app[module.PRODUCER_KEY]
        for broker in mock_cluster.broker_ids:
            mock_cluster.broker_down(broker)
        requests = [asyncio.create_task(client.post("/events", content=b'{"user_id": "u%d"}' % i)) for i in range(2)]
        await eventually(lambda: producer._pending_records() == 2, what="2 records queued")
        started = time.monotonic()
        await stack.aclose()  # runner.cleanup(): shutdown_timeout 1 s for requests, then close_timeout 1 s
        elapsed = time.monotonic() - started
        answers = await asyncio.gather(*requests, return_exceptions=True)
    assert not any(isinstance(a, httpx.Response) and a.status_code == 200 for a in answers)
    assert elapsed < 1.0 + 1.0 + 2.0, f"cleanup took {elapsed:.2f} s"
    assert "closed: 2 records not delivered over its life (2 during close, close_timeout=1.0 s)" in caplog.text


async def test_aiohttp_startup_against_unreachable_cluster_fails_clearly() -> None:
    bootstrap = f"127.0.0.1:{closed_port()}"
    app = load_example("aiohttp_service").create_app(
        bootstrap, TOPIC, producer_config={"max.block.ms": 500}, wait_ready=True
    )
    with pytest.raises(KafkaTimeoutError, match=f"max.block.ms=500 ms \\(bootstrap.servers={bootstrap}\\); last failures"):
        async with aiohttp_server(app):
            pass


async def test_a_producer_started_on_another_event_loop_is_a_500_that_says_so(mock_cluster: MockCluster) -> None:
    """The mistake users report most: a producer started at import time (its own asyncio.run) used by the server."""
    import threading

    started: dict[str, Producer] = {}

    def elsewhere() -> None:
        async def start() -> None:
            producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers)
            await producer.start()
            started["producer"] = producer  # left running on that loop, which then ends

        asyncio.run(start())

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    answer = await _serve_one_request(started["producer"])
    assert answer["status"] == 500, answer
    assert answer["body"]["error"] == "WrongEventLoopError"
    assert "started on event loop" in answer["body"]["detail"]


async def test_a_producer_started_before_the_server_forked_is_a_500_that_says_so(mock_cluster: MockCluster) -> None:
    """A server that forks its workers after the app made its producer (gunicorn's preload): the worker is told why."""
    import os

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker: its own event loop and server, the parent's producer
            code = 1
            try:
                os.close(read_end)
                answer = asyncio.run(_serve_one_request(producer))
                os.write(write_end, json.dumps(answer).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        status = await asyncio.to_thread(os.waitpid, pid, 0)
        with os.fdopen(read_end, "rb") as pipe:
            answer = json.loads(pipe.read() or b"{}")
    assert os.waitstatus_to_exitcode(status[1]) == 0
    assert answer["status"] == 500, answer
    assert answer["body"]["error"] == "WrongEventLoopError"
    assert "a fork" in answer["body"]["detail"]


async def _serve_one_request(producer: Producer) -> dict[str, Any]:
    app = FastAPI()
    install_exception_handlers(app)

    @app.post("/events")
    async def events(p: ProducerDep) -> dict[str, int]:
        await p.send(TOPIC, b"v", key=b"k")
        return {}

    async def override() -> Producer:
        return producer

    app.dependency_overrides[default_producer] = override
    async with uvicorn_server(app) as (url, _server), httpx.AsyncClient(base_url=url) as client:
        response = await client.post("/events")
    return {"status": response.status_code, "body": response.json()}


async def test_two_named_producers_nested_in_the_apps_own_lifespan(mock_cluster: MockCluster) -> None:
    """``producer_lifespan`` inside the app's lifespan, twice (two names): each handler gets its own producer."""
    events_config = {"bootstrap.servers": mock_cluster.bootstrap_servers}
    audit_config = {"bootstrap.servers": mock_cluster.bootstrap_servers, "client.id": "audit"}
    own_setup: list[str] = []

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        own_setup.append("up")  # the app's own resources, around the producers
        async with producer_lifespan(events_config, metrics_route="/metrics")(app) as state, \
                producer_lifespan(audit_config, name="audit", metrics_route="/metrics")(app):
            yield state
        own_setup.append("down")

    app = FastAPI(lifespan=lifespan)

    @app.post("/both")
    async def both(
        events: Annotated[Producer, Depends(get_producer())],
        audit: Annotated[Producer, Depends(get_producer("audit"))],
    ) -> dict[str, str]:
        await (await events.send(TOPIC, b"event", key=b"k"))
        await (await audit.send(TOPIC, b"audit", key=b"k"))
        return {"events": events.config.client_id, "audit": audit.config.client_id}

    async with uvicorn_server(app) as (url, _server), httpx.AsyncClient(base_url=url) as client:
        response = await client.post("/both")
        samples = await scrape(client)  # both producers on one route, told apart by client_id
        assert "/metrics" not in (await client.get("/openapi.json")).text
    assert response.status_code == 200, response.text
    ids = response.json()
    assert ids["audit"] == "audit" and ids["events"] != "audit"
    assert sent_by_client(samples) == {"audit": 1, ids["events"]: 1}
    assert own_setup == ["up", "down"]


@pytest.mark.parametrize("framework", ["fastapi", "aiohttp"])
def test_metrics_route_errors_name_the_argument(framework: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def attach(route: Any) -> None:
        if framework == "fastapi":
            producer_lifespan({}, metrics_route=route)
        else:
            aiohttp_integration.setup_producer(web.Application(), {}, metrics_route=route)

    with pytest.raises(ValueError, match="metrics_route must be a URL path starting with '/', got 'metrics'"):
        attach("metrics")
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # as if it were not installed
    with pytest.raises(ImportError, match=re.escape("metrics_route='/metrics' needs the prometheus_client library: "
                                                    "pip install 'aioproducer[prometheus]'")):
        attach("/metrics")
    attach(None)  # without the route, nothing is needed


@pytest.mark.parametrize("framework", ["fastapi", "aiohttp"])
async def test_a_producer_given_in_place_of_settings_is_started_and_closed_by_the_app(framework: str) -> None:
    """``producer_lifespan(fake)`` / ``setup_producer(app, fake)``: handlers get that producer, shutdown closes it."""
    fake = FakeProducer(topics={TOPIC: 1})
    if framework == "fastapi":
        app = FastAPI(lifespan=producer_lifespan(fake))

        @app.post("/send")
        async def send_fastapi(producer: ProducerDep) -> dict[str, int]:
            return {"offset": (await producer.send_and_wait(TOPIC, b"v")).offset}

        async with uvicorn_server(app) as (url, _server), httpx.AsyncClient(base_url=url) as client:
            answer = (await client.post("/send")).json()
    else:
        web_app = web.Application()
        aiohttp_integration.setup_producer(web_app, fake)

        async def send_aiohttp(request: web.Request) -> web.Response:
            producer = request.app[aiohttp_integration.PRODUCER_KEY]
            return web.json_response({"offset": (await producer.send_and_wait(TOPIC, b"v")).offset})

        web_app.router.add_post("/send", send_aiohttp)
        async with aiohttp_server(web_app) as url, httpx.AsyncClient(base_url=url) as client:
            answer = (await client.post("/send")).json()
    assert answer == {"offset": 0}
    assert [r.value for r in fake.history()] == [b"v"]
    with pytest.raises(ProducerClosedError):  # the app's shutdown closed it
        await fake.send(TOPIC, b"late")


@pytest.mark.parametrize("framework", ["fastapi", "aiohttp"])
def test_config_that_is_neither_settings_nor_a_producer_is_refused_at_the_call(framework: str) -> None:
    with pytest.raises(TypeError, match="config must be a mapping of producer settings or a Producer, got str"):
        if framework == "fastapi":
            producer_lifespan("kafka:9092")  # type: ignore[arg-type]
        else:
            aiohttp_integration.setup_producer(web.Application(), "kafka:9092")  # type: ignore[arg-type]


# ------------------------------------------------------------------ brokers down


async def test_records_lost_in_an_outage_are_503_and_counted_by_the_shutdown_line(
    mock_cluster: MockCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Records that expire while the brokers are down: each request a 503, the shutdown line counts them all.

    Both examples; the shutdown line used to count only what failed during close and said
    "every record delivered" after an outage.
    """
    caplog.set_level(logging.INFO, logger="aioproducer.integrations")
    config = {**FAST, "request.timeout.ms": 500, "delivery.timeout.ms": 1000}
    fastapi_app = load_example("fastapi_service").create_app(mock_cluster.bootstrap_servers, TOPIC, producer_config=config)
    aiohttp_module = load_example("aiohttp_service")
    aiohttp_app = aiohttp_module.create_app(mock_cluster.bootstrap_servers, TOPIC, producer_config=config)
    async with contextlib.AsyncExitStack() as stack:
        fastapi_url, _server = await stack.enter_async_context(uvicorn_server(fastapi_app))
        aiohttp_url = await stack.enter_async_context(aiohttp_server(aiohttp_app))
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=30))
            for url in (fastapi_url, aiohttp_url)
        ]
        for client in clients:
            await wait_until_ready(client)
            assert (await client.post("/events", content=b'{"user_id": "w"}')).status_code == 200
        for broker in mock_cluster.broker_ids:
            mock_cluster.broker_down(broker)
        answers = await asyncio.gather(
            *(client.post("/events", content=b'{"user_id": "u%d"}' % i) for client in clients for i in range(2))
        )
        for answer in answers:
            assert answer.status_code == 503, answer.text
            assert answer.headers["retry-after"] == "1"
            assert answer.json()["error"] == "KafkaTimeoutError"
            assert "delivery.timeout.ms=1000" in answer.json()["detail"]
    lines = [r.getMessage() for r in caplog.records if "closed:" in r.getMessage()]
    assert [line.split("] ", 1)[1] for line in lines] == ["aioproducer producer 'default' closed: 2 records not delivered over its life (0 during close, close_timeout=10.0 s)"] * 2


@pytest.mark.parametrize(
    "error",
    [KafkaConnectionError("connection to broker:9092 broke"), ProducerClosedError("closed"), KafkaTimeoutError("expired")],
    ids=lambda e: type(e).__name__,
)
async def test_errors_of_brokers_down_or_of_shutting_down_are_503_with_retry_after(error: Exception) -> None:
    """What a handler can get while brokers are down or the app stops: the same answer in both frameworks."""
    fastapi_app = FastAPI()
    install_exception_handlers(fastapi_app)

    @fastapi_app.post("/events")
    async def fastapi_publish() -> None:
        raise error

    async def aiohttp_publish(request: web.Request) -> web.Response:
        raise error

    aiohttp_app = web.Application()
    aiohttp_integration.install_exception_handlers(aiohttp_app)
    aiohttp_app.router.add_post("/events", aiohttp_publish)
    async with contextlib.AsyncExitStack() as stack:
        fastapi_url, _server = await stack.enter_async_context(uvicorn_server(fastapi_app))
        aiohttp_url = await stack.enter_async_context(aiohttp_server(aiohttp_app))
        for url in (fastapi_url, aiohttp_url):
            client = await stack.enter_async_context(httpx.AsyncClient(base_url=url))
            response = await client.post("/events")
            assert response.status_code == 503, (url, response.text)
            assert response.headers["retry-after"] == "1"
            assert response.json() == {"error": type(error).__name__, "detail": str(error)}


async def test_the_background_start_warns_once_then_once_a_minute_until_it_starts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The retry loop's log on a fake clock: no WARNING per attempt, a count and the last error in each."""
    from aioproducer.integrations._common import start_in_background, stop_background

    caplog.set_level(logging.INFO, logger="aioproducer.integrations")
    producer = Producer(bootstrap_servers=f"127.0.0.1:{closed_port()}", max_block_ms=0, reconnect_backoff_max_ms=1000)
    now = [0.0]
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:  # each attempt "takes" 10 s of the fake clock, its pause included
        pauses.append(seconds)
        now[0] += 10
        if len(pauses) == 20:
            await producer.close()  # the app stops: the loop ends at its next attempt

    task = start_in_background(producer, "p", clock=lambda: now[0], sleep=sleep)
    await asyncio.wait_for(task, 30)
    assert pauses == [1.0] * 20  # reconnect.backoff.max.ms between attempts
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 4, warnings  # at 0 s, then at 60, 120 and 180 s of the 200
    client_id = producer.config.client_id
    assert warnings[0].startswith(f"[{client_id}] aioproducer producer 'p' did not start, retrying in the background")
    assert warnings[1].startswith(f"[{client_id}] aioproducer producer 'p' still not started after 7 attempts over 60 s: start(): ")
    await stop_background(task)


async def test_the_background_start_retries_until_the_producer_started(caplog: pytest.LogCaptureFixture) -> None:
    """No request needed: a producer whose first attempts failed starts by itself, and says so once.

    Cancellations from requests do not stop it: a request cancelled while it waits for the
    start (its client left, its own timeout) leaves the shared start running, and a caller
    that cancels the shared start itself costs the loop one attempt, not its retries.
    """
    from aioproducer.integrations._common import start_for_request, start_in_background, stop_background

    caplog.set_level(logging.INFO, logger="aioproducer.integrations")
    with MockCluster(brokers=1, topics={TOPIC: 1}) as cluster:
        host, port = cluster.bootstrap_servers.rsplit(":", 1)
        with FaultProxy((host, int(port))) as proxy:
            proxy.refuse()
            producer = Producer(bootstrap_servers=proxy.address, max_block_ms=200, reconnect_backoff_max_ms=50)
            task = start_in_background(producer, "p")
            await eventually(lambda: proxy.stats.connections_refused >= 10, timeout=10, what="10 tries")
            assert not task.done() and not producer.ready

            def attempt_under_way() -> bool:
                attempt = producer._engine._start_task
                return attempt is not None and not attempt.done()

            await eventually(attempt_under_way, what="an attempt under way")
            attempt = producer._engine._start_task
            request = asyncio.create_task(start_for_request(producer))
            for _ in range(3):  # the request's task, then its start() call: both now wait on that attempt
                await asyncio.sleep(0)
            request.cancel()
            await asyncio.gather(request, return_exceptions=True)
            assert attempt is not None and not attempt.cancelled(), "a cancelled request cancelled the shared start"
            await eventually(attempt_under_way, what="an attempt under way")
            impatient = asyncio.create_task(producer.start())  # awaits the shared attempt itself
            await asyncio.sleep(0)
            impatient.cancel()
            await asyncio.gather(impatient, return_exceptions=True)
            assert not task.done(), "an outside cancel of start() ended the background retries"
            proxy.refuse(False)
            await asyncio.wait_for(task, 10)
            assert producer.ready
            await producer.close()
            await stop_background(task)
    [info] = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert info.startswith(f"[{producer.config.client_id}] aioproducer producer 'p' started in the background after ")


async def test_a_request_during_a_failed_start_is_503_without_exception_handlers() -> None:
    """wait_ready=False, nothing listening: the request waits for the start (max.block.ms), then a 503, not a 500."""
    config = {"bootstrap.servers": f"127.0.0.1:{closed_port()}", "max.block.ms": 300}
    fastapi_app = FastAPI(lifespan=producer_lifespan(config, wait_ready=False))  # no install_exception_handlers

    @fastapi_app.post("/events")
    async def fastapi_publish(producer: ProducerDep) -> None:
        await producer.send_and_wait(TOPIC, b"v")

    async def aiohttp_publish(request: web.Request) -> web.Response:
        await (await aiohttp_integration.started_producer(request)).send_and_wait(TOPIC, b"v")
        return web.Response()

    aiohttp_app = web.Application()  # no middleware
    aiohttp_integration.setup_producer(aiohttp_app, config, wait_ready=False)
    aiohttp_app.router.add_post("/events", aiohttp_publish)
    async with contextlib.AsyncExitStack() as stack:
        fastapi_url, _server = await stack.enter_async_context(uvicorn_server(fastapi_app))
        aiohttp_url = await stack.enter_async_context(aiohttp_server(aiohttp_app))
        for url in (fastapi_url, aiohttp_url):
            client = await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=30))
            response = await client.post("/events")
            assert response.status_code == 503, (url, response.text)
            assert response.headers["retry-after"] == "1"
            assert "the Kafka producer is not started: KafkaTimeoutError: start(): " in response.text


# ------------------------------------------------------------------ a real broker down at start

#: Short enough that the tests see several attempts; each is bounded by max.block.ms.
BROKER_DOWN: dict[str, Any] = {"max.block.ms": 1000, "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200}


@pytest.fixture
def refusing_kafka(kafka_cluster: KafkaCluster) -> Iterator[tuple[KafkaCluster, FaultProxy]]:
    """The session's real Kafka node behind a FaultProxy that refuses every connection (a broker that is down)."""
    host, port = kafka_cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    with FaultProxy((host, int(port))) as proxy:
        proxy.refuse()
        yield kafka_cluster, proxy


async def broker_down_at_start(
    client: httpx.AsyncClient, kafka: KafkaCluster, proxy: FaultProxy, topic: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The service serves with the broker down, answers 503s, and turns ready by itself once the broker answers."""
    assert (await client.get("/ready")).status_code == 503
    refused = await client.post("/events", content=b'{"user_id": "early"}')  # waits for the start, max.block.ms
    assert refused.status_code == 503, refused.text
    assert refused.headers["retry-after"] == "1"
    await eventually(lambda: "did not start, retrying in the background" in caplog.text, timeout=10, what="WARNING")
    assert (await client.get("/ready")).status_code == 503, "ready although the broker still refuses"
    proxy.refuse(False)  # the broker is back: no request follows until the probe says ready
    await wait_until_ready(client)
    assert "started in the background after" in caplog.text
    body = b'{"user_id": "u1"}'
    answer = await client.post("/events", content=body, headers={"request-id": "r-1"})
    assert answer.status_code == 200, answer.text
    await check_published(kafka.bootstrap_servers, answer.json(), body, b"u1", "r-1", topic=topic)


async def test_fastapi_example_with_the_broker_down_at_start(
    refusing_kafka: tuple[KafkaCluster, FaultProxy], caplog: pytest.LogCaptureFixture
) -> None:
    kafka, proxy = refusing_kafka
    caplog.set_level(logging.INFO, logger="aioproducer.integrations")
    topic = new_topic(kafka)
    app = load_example("fastapi_service").create_app(proxy.address, topic, producer_config=BROKER_DOWN)
    async with uvicorn_server(app) as (url, _server), httpx.AsyncClient(base_url=url, timeout=30) as client:
        await broker_down_at_start(client, kafka, proxy, topic, caplog)


async def test_aiohttp_example_with_the_broker_down_at_start(
    refusing_kafka: tuple[KafkaCluster, FaultProxy], caplog: pytest.LogCaptureFixture
) -> None:
    kafka, proxy = refusing_kafka
    caplog.set_level(logging.INFO, logger="aioproducer.integrations")
    topic = new_topic(kafka)
    app = load_example("aiohttp_service").create_app(proxy.address, topic, producer_config=BROKER_DOWN)
    async with aiohttp_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        await broker_down_at_start(client, kafka, proxy, topic, caplog)


# ------------------------------------------------------------------ a real broker killed under load


@pytest.fixture(scope="module")
def own_kafka() -> Iterator[KafkaCluster]:
    """A Kafka node of this module's own: the outage test kills it (the session's node serves the others)."""
    with kafka_or_skip(brokers=1) as cluster:
        yield cluster


@dataclass
class Load:
    """One service's load: its answers by status, and the request ids it answered 200."""

    answers: collections.Counter[int] = field(default_factory=collections.Counter)
    acknowledged: set[str] = field(default_factory=set)
    other: list[str] = field(default_factory=list)  # answers neither 200 nor 503, to show on failure
    stop: bool = False


async def keep_posting(client: httpx.AsyncClient, name: str, worker: int, load: Load) -> None:
    """One connection of a load generator: post an event, wait for the answer, post the next."""
    seq = 0
    while not load.stop:
        request_id = f"{name}-{worker}-{seq}"
        seq += 1
        answer = await client.post("/events", content=b'{"user_id": "u%d"}' % worker, headers={"request-id": request_id})
        load.answers[answer.status_code] += 1
        if answer.status_code == 200:
            load.acknowledged.add(request_id)
        elif answer.status_code != 503:
            load.other.append(f"{answer.status_code}: {answer.text[:200]}")


def _counted(caplog: pytest.LogCaptureFixture, pattern: str) -> list[int]:
    """The first number of every log message matching ``pattern`` (a regular expression with one group)."""
    return [int(m.group(1)) for r in caplog.records if (m := re.search(pattern, r.getMessage()))]


async def test_both_examples_ride_out_a_broker_killed_under_load(
    own_kafka: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """The trial of #25 as a test: both example services under load, the broker SIGKILLed and restarted.

    Every event answered 200 is in the topic exactly once; what expired while the broker was dead
    was answered 503, logged (rate-limited, the records counted exactly) and counted by the
    shutdown line; the outage is one WARNING and one INFO per producer, not a line per attempt;
    ``brokers_reachable`` follows the broker while ``ready`` stays true; and no task of the
    producer is destroyed pending (the loop's exception handler sees nothing).
    """
    caplog.set_level(logging.INFO, logger="aioproducer")
    loop_errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: loop_errors.append(context))
    kafka = own_kafka
    topic = new_topic(kafka)
    # Records expire 3 s after send() while the broker is dead (its restart takes longer than that).
    config = {"delivery.timeout.ms": 3000, "request.timeout.ms": 2000, "reconnect.backoff.max.ms": 200}
    fastapi_app = load_example("fastapi_service").create_app(kafka.bootstrap_servers, topic, producer_config=config)
    aiohttp_app = load_example("aiohttp_service").create_app(kafka.bootstrap_servers, topic, producer_config=config)
    loads = {"fastapi": Load(), "aiohttp": Load()}
    async with contextlib.AsyncExitStack() as stack:
        fastapi_url, _server = await stack.enter_async_context(uvicorn_server(fastapi_app))
        aiohttp_url = await stack.enter_async_context(aiohttp_server(aiohttp_app))
        clients = {
            name: await stack.enter_async_context(httpx.AsyncClient(base_url=url, timeout=60))
            for name, url in (("fastapi", fastapi_url), ("aiohttp", aiohttp_url))
        }
        for client in clients.values():
            await wait_until_ready(client, timeout=30)
        producers: list[Producer] = [
            fastapi_app.state.aioproducer_producers["default"], aiohttp_app[aiohttp_integration.PRODUCER_KEY]
        ]
        tasks = [
            asyncio.create_task(keep_posting(client, name, worker, loads[name]))
            for name, client in clients.items()
            for worker in range(8)
        ]
        await eventually(lambda: all(len(load.acknowledged) >= 100 for load in loads.values()), timeout=60, what="load")
        await asyncio.to_thread(kafka.kill_broker, 1)
        await eventually(lambda: all(load.answers[503] for load in loads.values()), timeout=30, what="503s while dead")
        assert not any(p.brokers_reachable for p in producers) and all(p.ready for p in producers)
        before = {name: len(load.acknowledged) for name, load in loads.items()}
        await asyncio.to_thread(kafka.start_broker, 1)
        await eventually(
            lambda: all(len(load.acknowledged) >= before[name] + 100 for name, load in loads.items()),
            timeout=60, what="load after the restart",
        )
        assert all(p.brokers_reachable and p.ready for p in producers)
        for load in loads.values():
            load.stop = True
        await asyncio.gather(*tasks)
    # Both services have shut down: every line is written.
    for name, load in loads.items():
        assert not load.other, (name, load.other[:5])
    seen: collections.Counter[str] = collections.Counter()
    for partition, count in kafka.high_watermarks(topic).items():
        for record in await read_aiokafka(kafka.bootstrap_servers, topic, partition, count=count, timeout=30):
            seen[(dict(record.headers)["request-id"] or b"").decode()] += 1
    acknowledged = set().union(*(load.acknowledged for load in loads.values()))
    assert [rid for rid in acknowledged if seen[rid] != 1] == [], "answered 200, not in the topic exactly once"
    assert [rid for rid, n in seen.items() if n > 1] == [], "written twice"
    refused = sorted(load.answers[503] for load in loads.values())
    assert sorted(_counted(caplog, r"closed: (\d+) records not delivered over its life \(0 during close")) == refused
    assert sum(_counted(caplog, r"^\[[^]]+\] (\d+) record\(s\) for topic .* not delivered")) == sum(refused)
    unreachable = _counted(caplog, r"^\[[^]]+\] node (1) \(.*\) is unreachable")
    reachable = _counted(caplog, r"^\[[^]]+\] node (1) \(.*\) is reachable again")
    assert 2 <= len(unreachable) == len(reachable) <= 6, "an outage is one WARNING and one INFO per producer"
    assert loop_errors == [], [context.get("message") for context in loop_errors]


async def test_app_producer_finds_each_named_producer_the_lifespan_registered_and_names_a_missing_one() -> None:
    """The public accessor readiness probes use, from the app and from a request; a missing name is a LookupError."""
    from fastapi.testclient import TestClient

    from aioproducer.integrations.fastapi import app_producer

    orders, audit = FakeProducer(), FakeProducer()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with producer_lifespan(orders)(app) as state, producer_lifespan(audit, name="audit")(app):
            yield state

    app = FastAPI(lifespan=lifespan)

    @app.get("/who")
    async def who(request: Request) -> dict[str, bool]:
        return {"orders": app_producer(request) is orders, "audit": app_producer(request, "audit") is audit}

    with pytest.raises(LookupError, match="no aioproducer producer named 'default'"):
        app_producer(app)  # no lifespan ran yet
    with TestClient(app) as client:
        assert client.get("/who").json() == {"orders": True, "audit": True}
        assert app_producer(app, "audit") is audit
        with pytest.raises(LookupError, match="'billing'"):
            app_producer(app, "billing")
