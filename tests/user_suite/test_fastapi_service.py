"""examples/fastapi_service.py tested as its authors would: the aioproducer plugin's fixtures and public helpers only.

No broker for the handler's logic (``fake_producer``, ``FakeProducer``); a real Kafka node behind a
``FaultProxy`` for what only a broker can show: every event kept, once and in order per user,
across a broker restart.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable

import httpx
import pytest
from fastapi import FastAPI
from fastapi_service import create_app

from aioproducer import KafkaTimeoutError
from aioproducer.integrations.fastapi import default_producer
from aioproducer.testing import (
    FakeProducer,
    FaultProxy,
    KafkaCluster,
    assert_delivered_exactly_once,
    assert_ordered_per_key,
)

TOPIC = "events"


def client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://service")


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until ``condition()`` holds, checking at every turn of the loop."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.001)


async def test_an_event_is_published_with_its_user_as_key_and_the_request_id(fake_producer: FakeProducer) -> None:
    app = create_app(topic=TOPIC)
    app.dependency_overrides[default_producer] = lambda: fake_producer
    body = json.dumps({"user_id": "u1", "action": "login"}).encode()
    async with client(app) as http:
        response = await http.post("/events", content=body, headers={"request-id": "r-1"})
    assert response.status_code == 200, response.text
    assert response.json() == {"topic": TOPIC, "partition": 0, "offset": 0, "request_id": "r-1"}
    [record] = fake_producer.history()
    assert (record.topic, record.key, record.value, list(record.headers)) == (TOPIC, b"u1", body, [("request-id", b"r-1")])


async def test_a_body_that_is_not_an_event_is_422_and_nothing_is_sent(fake_producer: FakeProducer) -> None:
    app = create_app(topic=TOPIC)
    app.dependency_overrides[default_producer] = lambda: fake_producer
    async with client(app) as http:
        response = await http.post("/events", content=b"[1, 2]")
    assert response.status_code == 422
    assert fake_producer.history() == []


async def test_a_record_the_broker_never_acknowledged_is_a_503_to_retry() -> None:
    async with FakeProducer(autocomplete=False) as fake:  # records held until the test completes or fails them
        app = create_app(topic=TOPIC)
        app.dependency_overrides[default_producer] = lambda: fake
        async with client(app) as http:
            request = asyncio.create_task(http.post("/events", content=b'{"user_id": "u1"}'))
            await until(lambda: fake.held() == 1)
            assert fake.fail_next(KafkaTimeoutError("delivery.timeout.ms expired")) == 1
            response = await request
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    assert fake.history() == []


async def test_every_event_is_kept_once_and_in_order_across_a_broker_restart(
    kafka_cluster: KafkaCluster, fault_proxy: FaultProxy
) -> None:
    topic = f"events-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, partitions=3)
    app = create_app(kafka_cluster.bootstrap_servers, topic, metrics_route=None)
    users = [f"u{n}" for n in range(4)]
    sent: list[tuple[str, bytes]] = []

    async def post_events(http: httpx.AsyncClient, user: str, numbers: range) -> None:
        for n in numbers:  # one user's events one after another: their order is defined
            body = json.dumps({"user_id": user, "n": n}).encode()
            response = await http.post("/events", content=body)
            assert response.status_code == 200, response.text
            sent.append((user, body))

    async with app.router.lifespan_context(app), client(app) as http:
        await asyncio.gather(*(post_events(http, u, range(0, 3)) for u in users))
        fault_proxy.refuse()  # the broker goes away: connections reset, new ones refused ...
        fault_proxy.drop_connections()
        rest = asyncio.gather(*(post_events(http, u, range(3, 10)) for u in users))
        await until(lambda: fault_proxy.stats.connections_refused > 0)
        fault_proxy.refuse(False)  # ... and comes back
        await rest
    records = await kafka_cluster.read(topic, count=len(sent))
    assert_delivered_exactly_once(records, sent)
    assert_ordered_per_key(records, sent)
