"""Rebootstrap on real Kafka 4.3: the whole cluster moves to new ports behind the same bootstrap address.

The bootstrap address is a :class:`~aioproducer.testing.FaultProxy` (a load balancer, a DNS alias):
the brokers advertise their own ports, so once the producer has metadata it talks to them directly
and the proxy only serves bootstrapping. :meth:`KafkaCluster.restart_on_new_ports` stops every
broker and starts them again (same ids, data, cluster) on new client ports; the proxy refuses while
they are away (the address is down for longer than ``metadata.recovery.rebootstrap.trigger.ms``) and
is then re-pointed at the new ports. A producer streaming keyed records through all of it must, with
``rebootstrap``, drop its stale view, come back through the bootstrap address and deliver every
record once, in order per key (read back through the brokers' internal listener); with ``none`` it
keeps trying the old ports and its records expire with the usual error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from aioproducer import KafkaTimeoutError, Producer
from aioproducer.testing import FaultProxy, KafkaCluster, assert_delivered_exactly_once, assert_ordered_per_key

from conftest import kafka_or_skip, new_topic

pytestmark = pytest.mark.integration

PARTITIONS = 4  # on both brokers: the producer knows, and loses, every broker of the cluster
TRIGGER_MS = 2000
PRODUCER: dict[str, Any] = {
    "linger_ms": 5,
    "request_timeout_ms": 5000,
    "reconnect_backoff_ms": 50,
    "reconnect_backoff_max_ms": 500,
    "retry_backoff_ms": 50,
    "retry_backoff_max_ms": 500,
    "metadata_recovery_rebootstrap_trigger_ms": TRIGGER_MS,
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with kafka_or_skip(brokers=2) as c:
        yield c


@pytest.fixture
def bootstrap(cluster: KafkaCluster) -> Iterator[FaultProxy]:
    host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    with FaultProxy((host, int(port))) as proxy:
        yield proxy


def _client_port(cluster: KafkaCluster) -> tuple[str, int]:
    """Broker 1's client listener: what the bootstrap address forwards to."""
    host, port = cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    return host, int(port)


async def _move(cluster: KafkaCluster, proxy: FaultProxy) -> None:
    """The cluster leaves its ports; the bootstrap address is down until it is back, then points at it."""
    proxy.refuse()
    proxy.drop_connections()
    await asyncio.to_thread(cluster.restart_on_new_ports)
    proxy.set_upstream(_client_port(cluster))
    proxy.refuse(False)


async def _stream(
    producer: Producer, topic: str, before: int, fault: Callable[[], Awaitable[None]]
) -> tuple[list[tuple[bytes, bytes]], list[Any]]:
    """Send keyed records: ``before`` of them, then on while ``fault`` runs, then 50 more; every outcome."""
    sent: list[tuple[bytes, bytes]] = []
    futures = []

    async def one(i: int) -> None:
        key, value = b"k%d" % (i % 6), b"v%06d" % i
        futures.append(await producer.send(topic, value, key=key))
        sent.append((key, value))

    for i in range(before):
        await one(i)
    await asyncio.gather(*futures)
    task = asyncio.ensure_future(fault())
    i = before
    try:
        while not task.done():
            await one(i)
            i += 1
            await asyncio.sleep(0.01)  # pacing, not a condition: spreads the stream over the move
    except BaseException as exc:
        # The move runs in a thread that outlives this test: wait for it, so the next test gets a
        # settled cluster, and say how it ended (a send that gave up usually means a failed move).
        moved = (await asyncio.gather(task, return_exceptions=True))[0]
        exc.add_note(f"the move ended with: {moved!r}")
        raise
    await task
    for _ in range(50):
        await one(i)
        i += 1
    return sent, list(await asyncio.gather(*futures, return_exceptions=True))


async def test_rebootstrap_recovers_when_every_broker_moved(
    cluster: KafkaCluster, bootstrap: FaultProxy, caplog: pytest.LogCaptureFixture
) -> None:
    topic = new_topic(cluster, PARTITIONS, replication_factor=1)
    caplog.set_level(logging.INFO, "aioproducer.network.client")
    # The move is bounded by KafkaCluster's own timeouts (a stop of up to 20 s, a start of up to
    # 120 s), not by 60 s: a send during it may wait, and a record may stay queued, that long.
    patient: dict[str, Any] = {"max_block_ms": 180_000, "delivery_timeout_ms": 180_000}
    async with Producer(bootstrap_servers=bootstrap.address, **patient, **PRODUCER) as producer:
        sent, results = await _stream(producer, topic, 200, lambda: _move(cluster, bootstrap))
        # Both brokers, at their new ports: keys k0..k5 hash to partitions 1 and 0, which Kafka's
        # round-robin assignment always puts on different brokers.
        assert producer.metrics()["connection-count"] == 2
    assert [r for r in results if isinstance(r, BaseException)] == []
    assert "rebootstrapping (metadata.recovery.strategy=rebootstrap)" in caplog.text
    records = await cluster.read(topic, count=len(sent), timeout=30)
    assert_delivered_exactly_once(records, sent)
    assert_ordered_per_key(records, sent)


async def test_none_keeps_the_old_view_and_records_expire(cluster: KafkaCluster, bootstrap: FaultProxy) -> None:
    topic = new_topic(cluster, PARTITIONS, replication_factor=1)
    config = {**PRODUCER, "metadata_recovery_strategy": "none", "delivery_timeout_ms": 8000}
    async with Producer(bootstrap_servers=bootstrap.address, **config) as producer:
        first = [await producer.send(topic, b"before-%d" % i, key=b"k") for i in range(20)]
        await asyncio.gather(*first)
        accepted = bootstrap.stats.connections_accepted
        old_addresses = cluster.bootstrap_servers.split(",")
        await _move(cluster, bootstrap)
        after = [await producer.send(topic, b"after-%d" % i, key=b"k") for i in range(20)]
        results = await asyncio.gather(*after, return_exceptions=True)
        assert all(isinstance(r, KafkaTimeoutError) for r in results), results
        assert "Expiring 20 record(s)" in str(results[0])  # the usual expiry error, naming an old address
        assert any(f"could not connect to {address}" in str(results[0]) for address in old_addresses), results[0]
        assert bootstrap.stats.connections_accepted == accepted  # the bootstrap address was never asked again
    records = await cluster.read(topic, count=20, timeout=30)
    assert [r.value for r in records] == [b"before-%d" % i for i in range(20)]
