"""Lifecycle races (#11 item 16): close() against a waiting send(), close(timeout) and start() bounds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aioproducer import Producer, ProducerClosedError
from aioproducer.network.client import KafkaClient
from aioproducer.testing import MockCluster
from helpers import eventually, other_tasks

pytestmark = pytest.mark.integration

TOPIC = "orders"
UNKNOWN_TOPIC_OR_PARTITION = 3
FAST: dict[str, Any] = {"request_timeout_ms": 1000, "delivery_timeout_ms": 3000, "linger_ms": 1}


def client_of(producer: Producer) -> KafkaClient:
    client = producer._client
    assert client is not None
    return client


async def test_close_ends_a_send_sleeping_between_metadata_attempts_with_producer_closed(mock_cluster: MockCluster) -> None:
    """The send sleeps retry.backoff.ms between refreshes; close() must end it, not leave it to max.block.ms."""
    mock_cluster.set_topic_error("nowhere", UNKNOWN_TOPIC_OR_PARTITION)
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, max_block_ms=60_000, retry_backoff_ms=2_000, retry_backoff_max_ms=2_000, **FAST)
    await producer.start()
    sending = asyncio.create_task(producer.send("nowhere", value=b"v"))
    client = client_of(producer)
    await eventually(lambda: "nowhere" in client.metadata.topics, what="the first refresh answered 'unknown topic'")
    await producer.close()
    async with asyncio.timeout(5):  # a bound: without the fix the send waits the whole minute
        with pytest.raises(ProducerClosedError, match="closed while waiting for metadata"):
            await sending
    assert not other_tasks()


async def test_close_ends_a_send_waiting_on_a_metadata_request_with_producer_closed(mock_cluster: MockCluster) -> None:
    """The send awaits a Metadata request in flight that close() cancels: ProducerClosedError, not CancelledError."""
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, max_block_ms=60_000, **FAST)
    await producer.start()
    for broker in mock_cluster.broker_ids:
        mock_cluster.set_rtt(broker, 30_000)
    sending = asyncio.create_task(producer.send("fresh", value=b"v"))
    client = client_of(producer)
    await eventually(lambda: client._refresh is not None and "fresh" in client._refresh_topics, what="a refresh for 'fresh' in flight")
    await producer.close(timeout=0)
    async with asyncio.timeout(5):
        with pytest.raises(ProducerClosedError, match="closed while waiting for metadata"):
            await sending
    assert not sending.cancelled()
    assert not other_tasks()


async def test_partitions_for_racing_close_raises_producer_closed(mock_cluster: MockCluster) -> None:
    mock_cluster.set_topic_error("nowhere", UNKNOWN_TOPIC_OR_PARTITION)
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, max_block_ms=60_000, retry_backoff_ms=2_000, retry_backoff_max_ms=2_000, **FAST)
    await producer.start()
    asking = asyncio.create_task(producer.partitions_for("nowhere"))
    client = client_of(producer)
    await eventually(lambda: "nowhere" in client.metadata.topics, what="the first refresh answered 'unknown topic'")
    await producer.close()
    async with asyncio.timeout(5):
        with pytest.raises(ProducerClosedError):
            await asking


async def test_a_send_cancelled_by_its_caller_stays_cancelled_when_close_follows(mock_cluster: MockCluster) -> None:
    """close() turns only its own interruption into ProducerClosedError: the caller's cancel wins."""
    mock_cluster.set_topic_error("nowhere", UNKNOWN_TOPIC_OR_PARTITION)
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, max_block_ms=60_000, **FAST)
    await producer.start()
    sending = asyncio.create_task(producer.send("nowhere", value=b"v"))
    client = client_of(producer)
    await eventually(lambda: "nowhere" in client.metadata.topics, what="the first refresh answered 'unknown topic'")
    sending.cancel()
    await producer.close()
    async with asyncio.timeout(5):
        await asyncio.wait([sending])
    assert sending.cancelled()
