"""``KafkaCluster.read()`` on real Kafka: every codec and transactions in both isolation levels, against aiokafka.

Real Kafka validates and stores what the producer sent, writes transaction
markers (control batches) and answers read_committed Fetches with the aborted
transactions of the range: the read must drop the markers always and the
aborted records under read_committed only, stop at the last stable offset while
a transaction is open, and agree field by field with aiokafka's consumer at the
same isolation level. The session's one-node cluster serves these (a topic per
test); the internal-listener test starts a cluster of its own with a FaultProxy
in front of the client listener.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.errors import KafkaTimeoutError, UnknownTopicOrPartitionError
from aioproducer.testing import ConsumerRecord, KafkaCluster
from aioproducer.testing.readback import read_topic
from conftest import kafka_or_skip, new_topic
from readback import read_topic_aiokafka
from test_cluster_read import CODECS, as_rows, by_partition, produce, rows

pytestmark = pytest.mark.integration

_ids = itertools.count()


def fields(records: list[ConsumerRecord]) -> list[tuple[Any, ...]]:
    return [dataclasses.astuple(r) for r in records]


def values(records: list[ConsumerRecord]) -> list[bytes | None]:
    return [r.value for r in records]


async def send_all(producer: Producer, topic: str, *payloads: bytes) -> None:
    """Send ``payloads`` round-robin over partitions 0 and 1 and wait until each is written."""
    futures = [await producer.send(topic, value=v, partition=i % 2) for i, v in enumerate(payloads)]
    await asyncio.gather(*futures)


@pytest.mark.parametrize("codec", CODECS)
async def test_read_equals_aiokafka_for_every_codec(kafka_cluster: KafkaCluster, codec: str) -> None:
    topic = new_topic(kafka_cluster)
    sent = rows()
    await produce(kafka_cluster.bootstrap_servers, topic, sent, compression_type=codec, linger_ms=20)
    records = await kafka_cluster.read(topic)
    assert as_rows(records) == by_partition(sent)
    assert fields(records) == await read_topic_aiokafka(kafka_cluster.bootstrap_servers, topic, range(6))


async def test_transactions_in_both_isolation_levels(kafka_cluster: KafkaCluster) -> None:
    """Committed, aborted, committed, with plain records between and inside: read_committed drops the aborted."""
    topic = new_topic(kafka_cluster, 2)
    servers = kafka_cluster.bootstrap_servers
    async with Producer(bootstrap_servers=servers, transactional_id=f"read-{next(_ids)}", linger_ms=5) as txn, \
            Producer(bootstrap_servers=servers, linger_ms=5) as plain:
        await send_all(plain, topic, b"plain-1a", b"plain-1b")
        async with txn.transaction():
            await send_all(txn, topic, b"commit-1a", b"commit-1b", b"commit-1c")
        txn.begin_transaction()
        await send_all(txn, topic, b"abort-a", b"abort-b")
        await send_all(plain, topic, b"plain-2a", b"plain-2b")  # inside the aborted transaction's range
        await send_all(txn, topic, b"abort-c", b"abort-d")
        await txn.abort_transaction()
        async with txn.transaction():
            await send_all(txn, topic, b"commit-2a", b"commit-2b")
        await send_all(plain, topic, b"plain-3a")
    aborted = {b"abort-a", b"abort-b", b"abort-c", b"abort-d"}
    everything = {b"plain-1a", b"plain-1b", b"commit-1a", b"commit-1b", b"commit-1c", b"plain-2a", b"plain-2b",
                  b"commit-2a", b"commit-2b", b"plain-3a"} | aborted
    # count: the last commit's markers may still be on their way, and the stable offset with them.
    committed = await kafka_cluster.read(topic, count=len(everything - aborted), isolation_level="read_committed")
    uncommitted = await kafka_cluster.read(topic, isolation_level="read_uncommitted")
    assert sorted(values(committed)) == sorted(everything - aborted)  # type: ignore[type-var]
    assert sorted(values(uncommitted)) == sorted(everything)  # type: ignore[type-var]
    for level, got in (("read_committed", committed), ("read_uncommitted", uncommitted)):
        assert fields(got) == await read_topic_aiokafka(servers, topic, range(2), isolation_level=level), level


async def test_read_committed_stops_at_the_last_stable_offset(kafka_cluster: KafkaCluster) -> None:
    """An open transaction holds back read_committed, its own records and the plain ones written after them."""
    topic = new_topic(kafka_cluster, 1)
    servers = kafka_cluster.bootstrap_servers
    async with Producer(bootstrap_servers=servers, transactional_id=f"read-{next(_ids)}", linger_ms=5) as txn, \
            Producer(bootstrap_servers=servers, linger_ms=5) as plain:
        await send_all(plain, topic, b"before")
        txn.begin_transaction()
        futures = [await txn.send(topic, value=v, partition=0) for v in (b"open-1", b"open-2")]
        await asyncio.gather(*futures)
        await send_all(plain, topic, b"after")
        committed = await kafka_cluster.read(topic, isolation_level="read_committed")
        assert values(committed) == [b"before"]
        assert fields(committed) == await read_topic_aiokafka(servers, topic, [0], isolation_level="read_committed")
        assert values(await kafka_cluster.read(topic)) == [b"before", b"open-1", b"open-2", b"after"]
        with pytest.raises(KafkaTimeoutError, match="wanted 2 records, read 1"):
            await kafka_cluster.read(topic, count=2, isolation_level="read_committed", timeout=0.5)
        await txn.abort_transaction()
    final = await kafka_cluster.read(topic, count=2, isolation_level="read_committed")
    assert values(final) == [b"before", b"after"]


async def test_count_waits_for_records_produced_after_the_read_began(kafka_cluster: KafkaCluster) -> None:
    topic = new_topic(kafka_cluster, 2)
    reading = asyncio.create_task(kafka_cluster.read(topic, count=4, timeout=30.0))
    async with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers) as plain:
        await send_all(plain, topic, b"a", b"b", b"c", b"d")
    assert sorted(values(await reading)) == [b"a", b"b", b"c", b"d"]  # type: ignore[type-var]


async def test_unknown_topic_raises_and_is_not_auto_created(kafka_cluster: KafkaCluster) -> None:
    """These brokers create a topic a Metadata request asks them to create: the read never asks."""
    name = f"absent-{next(_ids)}"
    for _ in range(2):
        with pytest.raises(UnknownTopicOrPartitionError, match=name):
            await kafka_cluster.read(name, timeout=10.0)
    # Had a read's Metadata asked for it, the controller would have had that creation first: this one would fail.
    kafka_cluster.create_topic(name, 1)


async def test_bad_isolation_level_is_refused_naming_it(kafka_cluster: KafkaCluster) -> None:
    with pytest.raises(ValueError, match="isolation_level"):
        await kafka_cluster.read("t", isolation_level="read_committed ")


async def test_read_goes_through_the_internal_listener() -> None:
    """The client listener's proxy refuses everyone: the read, on the brokers' own listener, still works."""
    cluster = kafka_or_skip(brokers=1, proxy=True, topics={"orders": 6})
    with cluster:
        sent = rows(12)
        await produce(cluster.bootstrap_servers, "orders", sent)
        cluster.proxy(1).refuse()
        cluster.proxy(1).drop_connections()
        assert as_rows(await cluster.read("orders", timeout=20.0)) == by_partition(sent)
        # The client listener: the proxy accepts and resets each connection, which the client sees, as the RST
        # and its connect race, as a failed connect, a reset during the handshake, or its first write failing
        # (all three seen in CI).
        with pytest.raises(KafkaTimeoutError, match="read 0 within 1 s .*(could not connect|reset by peer|failed: Connection lost)"):
            await read_topic(cluster.bootstrap_servers, "orders", timeout=1.0)
    with pytest.raises(RuntimeError, match="closed"):
        await cluster.read("orders")
