"""examples/aiohttp_service.py tested as its authors would: the aioproducer plugin's fixtures and public helpers only.

The app is served by aiohttp's own test server; the producer is a ``FakeProducer`` (no broker) or a
real one on librdkafka's mock cluster, whose topic is read back without a second Kafka client.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from aiohttp_service import create_app

from aioproducer import KafkaTimeoutError, Producer
from aioproducer.testing import FakeProducer, MockCluster, assert_delivered_exactly_once, assert_ordered_per_key

TOPIC = "events"


@asynccontextmanager
async def served(app: web.Application) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    async with TestClient(TestServer(app)) as http:
        yield http


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    """Wait until ``condition()`` holds, checking at every turn of the loop."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.001)


async def test_an_event_is_published_with_its_user_as_key(fake_producer: FakeProducer) -> None:
    async with served(create_app(topic=TOPIC, producer=fake_producer)) as http:
        response = await http.post("/events", json={"user_id": "u7"}, headers={"request-id": "r-9"})
        assert response.status == 200, await response.text()
        assert await response.json() == {"topic": TOPIC, "partition": 0, "offset": 0, "request_id": "r-9"}
    [record] = fake_producer.history()
    assert (record.key, json.loads(record.value or b"")) == (b"u7", {"user_id": "u7"})


async def test_a_record_the_broker_never_acknowledged_is_a_503_to_retry() -> None:
    fake = FakeProducer(autocomplete=False)
    async with served(create_app(topic=TOPIC, producer=fake)) as http:  # the app starts and closes it
        request = asyncio.create_task(http.post("/events", json={"user_id": "u1"}))
        await until(lambda: fake.held() == 1)
        fake.fail_next(KafkaTimeoutError("delivery.timeout.ms expired"))
        response = await request
        assert response.status == 503 and response.headers["Retry-After"] == "1"
    assert fake.history() == []


@pytest.mark.kafka_topics(events=4)
async def test_concurrent_users_events_land_once_and_in_order(mock_cluster: MockCluster) -> None:
    """A real producer on librdkafka's mock: 5 users posting at once, 20 events each."""
    app = create_app(mock_cluster.bootstrap_servers, TOPIC, metrics_route=None)
    sent: list[tuple[str, bytes]] = []

    async def post_events(http: TestClient[web.Request, web.Application], user: str) -> None:
        for n in range(20):
            body = json.dumps({"user_id": user, "n": n}).encode()
            response = await http.post("/events", data=body)
            assert response.status == 200, await response.text()
            sent.append((user, body))

    async with served(app) as http:
        await asyncio.gather(*(post_events(http, f"u{u}") for u in range(5)))
    records = await mock_cluster.read(TOPIC, count=len(sent))
    assert {r.partition for r in records} <= {0, 1, 2, 3}
    assert_delivered_exactly_once(records, sent)
    assert_ordered_per_key(records, sent)


def test_the_app_type_checks_with_a_fake_where_a_producer_is_expected() -> None:
    """``FakeProducer`` is a ``Producer``: create_app(producer=...) takes it, as mypy does."""
    producer: Producer = FakeProducer()
    assert isinstance(create_app(topic=TOPIC, producer=producer), web.Application)
