"""start() against a bootstrap server that refuses connections: it keeps trying until max.block.ms, as Java does.

A FaultProxy in front of a one-broker mock cluster plays a broker that is restarting: it
accepts each connection and resets it at once. The backoff sequence itself is checked with
a fake clock in ``test_client.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from aioproducer import KafkaTimeoutError, Producer, ProducerClosedError
from aioproducer.testing import FaultProxy, MockCluster
from helpers import eventually, other_tasks

pytestmark = pytest.mark.integration

TOPIC = "t"
FAST: dict[str, Any] = {"reconnect_backoff_ms": 10, "reconnect_backoff_max_ms": 50, "request_timeout_ms": 2000}


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    """A proxy in front of a 1-broker mock cluster, refusing every connection until the test says otherwise."""
    with MockCluster(brokers=1, topics={TOPIC: 1}) as cluster:
        host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
        with FaultProxy((host, int(port))) as p:
            p.refuse()
            yield p


async def test_start_keeps_trying_a_refusing_server_and_starts_once_it_answers(proxy: FaultProxy) -> None:
    producer = Producer(bootstrap_servers=proxy.address, max_block_ms=30_000, **FAST)
    start = asyncio.create_task(producer.start())
    try:
        await eventually(lambda: proxy.stats.connections_refused >= 3 or start.done(), timeout=10, what="3 tries")
        assert not start.done(), f"start() gave up: {start.exception() if not start.cancelled() else 'cancelled'}"
        proxy.refuse(False)  # the broker is back
        await asyncio.wait_for(start, 10)
        assert producer.ready
        metadata = await producer.send_and_wait(TOPIC, b"v")
        assert metadata.offset == 0
    finally:
        start.cancel()
        await producer.close()
    assert not other_tasks()


async def test_start_against_a_refusing_server_fails_after_max_block_ms_naming_the_last_failure(
    proxy: FaultProxy,
) -> None:
    producer = Producer(bootstrap_servers=proxy.address, max_block_ms=600, **FAST)
    with pytest.raises(KafkaTimeoutError) as info:
        await producer.start()
    message = str(info.value)
    assert message.startswith(
        f"start(): no bootstrap server answered within max.block.ms=600 ms (bootstrap.servers={proxy.address}); "
        f"last failures: no broker answered Metadata: {proxy.address}: "
    ), message
    assert proxy.stats.connections_refused >= 2, "tried more than once"
    assert not producer.ready
    await producer.close()
    assert not other_tasks()


async def test_close_while_start_is_retrying_ends_it_and_leaves_nothing_running(proxy: FaultProxy) -> None:
    """close() between two rounds (the start waits in its backoff): the start ends with ProducerClosedError."""
    producer = Producer(bootstrap_servers=proxy.address, max_block_ms=30_000, reconnect_backoff_ms=5_000)
    start = asyncio.create_task(producer.start())
    await eventually(lambda: proxy.stats.connections_refused >= 1, what="a first round refused")
    await asyncio.wait_for(producer.close(), 5)  # the round's 5 s backoff does not hold it
    with pytest.raises(ProducerClosedError, match="closed while it was starting"):
        await start
    assert not other_tasks()
