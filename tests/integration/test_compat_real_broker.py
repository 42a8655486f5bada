"""The facades' transactions on real Kafka: what read_committed consumers (aiokafka's and confluent-kafka's) see.

The mock cluster answers the transaction APIs but does not hide aborted records from readers;
a real broker does. One module, the session's Kafka node (``kafka_cluster``), a topic per test.
"""

from __future__ import annotations

import asyncio

import pytest
from conftest import new_topic
from readback import read_confluent, read_isolated

from aioproducer.compat.aiokafka import AIOKafkaProducer
from aioproducer.compat.confluent import AIOProducer
from aioproducer.testing import KafkaCluster

pytestmark = pytest.mark.integration

EXPECTED = [b"kept-0", b"kept-1", b"kept-2", b"last"]


async def _both_readers_see(cluster: KafkaCluster, topic: str) -> None:
    assert await read_isolated(cluster.bootstrap_servers, topic, [0], committed=True, timeout=30) == EXPECTED
    records = await asyncio.to_thread(read_confluent, cluster.bootstrap_servers, topic, 0, count=len(EXPECTED), timeout=30)
    assert [r.value for r in records] == EXPECTED  # librdkafka's consumer reads committed by default


async def test_aiokafka_program_transactions(kafka_cluster: KafkaCluster) -> None:
    topic = new_topic(kafka_cluster, partitions=1)
    async with AIOKafkaProducer(
        bootstrap_servers=kafka_cluster.bootstrap_servers, transactional_id=f"compat-aiokafka-{topic}",
        request_timeout_ms=15_000, delivery_timeout_ms=60_000,
    ) as producer:
        async with producer.transaction():
            for i in range(3):
                await producer.send(topic, b"kept-%d" % i, partition=0)
        await producer.begin_transaction()
        await producer.send(topic, b"dropped", partition=0)
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(topic, b"last", partition=0)
    await _both_readers_see(kafka_cluster, topic)


async def test_confluent_program_transactions(kafka_cluster: KafkaCluster) -> None:
    topic = new_topic(kafka_cluster, partitions=1)
    producer = AIOProducer({
        "bootstrap.servers": kafka_cluster.bootstrap_servers, "transactional.id": f"compat-confluent-{topic}",
        "request.timeout.ms": 15_000, "message.timeout.ms": 60_000,
    })
    try:
        await producer.init_transactions()
        await producer.begin_transaction()
        for i in range(3):
            await producer.produce(topic, b"kept-%d" % i, partition=0)
        await producer.commit_transaction()
        await producer.begin_transaction()
        await producer.produce(topic, b"dropped", partition=0)
        await producer.abort_transaction()
        await producer.begin_transaction()
        await producer.produce(topic, b"last", partition=0)
        await producer.commit_transaction()
    finally:
        await producer.close()
    await _both_readers_see(kafka_cluster, topic)
