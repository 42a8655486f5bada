"""Lifecycle races (#11 item 16): close() against a waiting send(), close(timeout) and start() bounds."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aioproducer import KafkaTimeoutError, Producer, ProducerClosedError
from aioproducer.network.client import KafkaClient
from aioproducer.testing import MockCluster
from helpers import eventually, other_tasks

pytestmark = pytest.mark.integration

TOPIC = "orders"
UNKNOWN_TOPIC_OR_PARTITION = 3
FAST: dict[str, Any] = {"request_timeout_ms": 1000, "delivery_timeout_ms": 3000, "linger_ms": 1}


def client_of(producer: Producer) -> KafkaClient:
    client = producer._engine.client
    assert isinstance(client, KafkaClient)
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


async def test_start_against_silent_bootstrap_servers_is_bounded_by_max_block_ms() -> None:
    """Two servers that accept and never answer: start() fails after max.block.ms, not 2 x request.timeout.ms."""
    silent: list[asyncio.StreamWriter] = []

    async def accept_and_say_nothing(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        silent.append(writer)

    servers = [await asyncio.start_server(accept_and_say_nothing, "127.0.0.1", 0) for _ in range(2)]
    addresses = ",".join(f"127.0.0.1:{s.sockets[0].getsockname()[1]}" for s in servers)
    producer = Producer(bootstrap_servers=addresses, max_block_ms=300, request_timeout_ms=3_000, delivery_timeout_ms=4_000)
    try:
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(KafkaTimeoutError, match="max.block.ms=300"):
            await producer.start()
        assert loop.time() - started < 2.5  # unbounded: 6 s (3 s per server, one after the other)
        assert not other_tasks()
    finally:
        await producer.close()
        for writer in silent:
            writer.close()
        for server in servers:
            server.close()
            await server.wait_closed()


async def test_close_with_timeout_returns_in_time_when_a_socket_will_not_close(mock_cluster: MockCluster) -> None:
    """A graceful socket close waits for the peer to read what is buffered: a peer that never reads holds it forever.

    Stood in for by a writer whose ``wait_closed()`` never returns (a stalled peer cannot be made on
    the in-process mock, which always reads). ``close(timeout)`` must drop such sockets at its deadline.
    """
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST)
    await producer.start()
    await (await producer.send(TOPIC, value=b"v", partition=0))
    never = asyncio.Event()

    async def wait_closed_forever() -> None:
        await never.wait()

    conns = list(client_of(producer)._conns.values())
    assert conns
    for conn in conns:
        assert conn._writer is not None
        conn._writer.wait_closed = wait_closed_forever  # type: ignore[method-assign]
    loop = asyncio.get_running_loop()
    started = loop.time()
    async with asyncio.timeout(5):  # a bound: without the fix close() never returns
        await producer.close(timeout=0.3)
    assert loop.time() - started < 1.5
    assert all(conn._writer is not None and conn._writer.transport.is_closing() for conn in conns)
    assert not other_tasks()
