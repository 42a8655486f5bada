# test_service.py: pip install -e '/path/to/aioproducer[testing]' pytest pytest-asyncio; pytest (asyncio_mode = auto)
import asyncio
import json

import pytest

from aioproducer import Producer
from aioproducer.testing import (
    FakeProducer,
    FaultProxy,
    KafkaCluster,
    MockCluster,
    ProducerFactory,
    assert_delivered_exactly_once,
    assert_ordered_per_key,
)


async def publish(producer: Producer, topic: str, user: str, event: dict[str, int]) -> int:
    """The code under test: one event, keyed by its user (in order per user); returns its offset."""
    metadata = await producer.send_and_wait(topic, json.dumps(event).encode(), key=user)
    return metadata.offset


async def test_without_a_broker(fake_producer: FakeProducer) -> None:
    assert await publish(fake_producer, "events", "u1", {"n": 1}) == 0
    [record] = fake_producer.history("events")
    assert (record.key, record.value) == (b"u1", b'{"n": 1}')


@pytest.mark.kafka_topics(events=3)
async def test_on_librdkafkas_mock(mock_cluster: MockCluster, kafka_producer: ProducerFactory) -> None:
    sent = [(f"u{n % 2}", json.dumps({"n": n})) for n in range(10)]
    async with kafka_producer(mock_cluster) as producer:
        for n in range(10):
            await publish(producer, "events", f"u{n % 2}", {"n": n})
    records = await mock_cluster.read("events", count=10)  # no second Kafka client needed
    assert_delivered_exactly_once(records, sent)
    assert_ordered_per_key(records, sent)


async def test_across_a_broker_restart(
    kafka_cluster: KafkaCluster, fault_proxy: FaultProxy, kafka_producer: ProducerFactory
) -> None:
    kafka_cluster.create_topic("restarts", partitions=3)  # one real Kafka node for the session
    async with kafka_producer(kafka_cluster) as producer:
        await publish(producer, "restarts", "u1", {"n": 0})
        fault_proxy.refuse()  # the broker goes away: connections reset, new ones refused ...
        fault_proxy.drop_connections()
        later = asyncio.create_task(publish(producer, "restarts", "u1", {"n": 1}))
        while fault_proxy.stats.connections_refused == 0:  # until the producer has tried
            await asyncio.sleep(0.01)
        fault_proxy.refuse(False)  # ... and it is back
        await later
    records = await kafka_cluster.read("restarts", count=2)
    assert_delivered_exactly_once(records, [("u1", '{"n": 0}'), ("u1", '{"n": 1}')])
