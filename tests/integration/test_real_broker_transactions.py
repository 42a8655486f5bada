"""Transactions against real Kafka: what read_committed consumers see, fencing, aborts, offsets in the transaction.

One Kafka node (transactions need ``transaction.state.log.replication.factor`` <= brokers; the
cluster sets it). Records are read back by aiokafka with ``isolation_level="read_committed"``
(only committed records) and ``read_uncommitted`` (everything written, to show that aborted
records did reach the log and are hidden by the abort marker, not missing).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator

import pytest

from aioproducer import IllegalStateError, Producer, ProducerFencedError, TransactionAbortedError
from aioproducer.testing import KafkaCluster
from conftest import kafka_or_skip

pytestmark = pytest.mark.integration

_names = itertools.count()


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with kafka_or_skip(brokers=1, topics={}) as c:
        yield c


def fresh(cluster: KafkaCluster, partitions: int = 2) -> str:
    name = f"txn-{next(_names)}"
    cluster.create_topic(name, partitions=partitions)
    return name


async def read(cluster: KafkaCluster, topic: str, *, committed: bool, timeout: float = 10.0) -> list[bytes]:
    """Every value of the topic up to its end, as a read_committed (or read_uncommitted) consumer sees it."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=cluster.bootstrap_servers,
        enable_auto_commit=False,
        isolation_level="read_committed" if committed else "read_uncommitted",
    )
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(cluster.high_watermarks(topic))]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        ends = await consumer.end_offsets(partitions)  # read_committed: the last stable offset
        values: list[bytes] = []
        async with asyncio.timeout(timeout):
            while True:
                positions = [await consumer.position(tp) for tp in partitions]
                if all(position >= ends[tp] for position, tp in zip(positions, partitions)):
                    break
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    values.extend(r.value for r in records if r.value is not None)
        return values
    finally:
        await consumer.stop()


def config(cluster: KafkaCluster, transactional_id: str) -> dict[str, object]:
    return {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id, "linger.ms": 5}


async def test_committed_records_are_seen_once_and_aborted_ones_never(cluster: KafkaCluster) -> None:
    topic = fresh(cluster)
    async with Producer(config(cluster, "t-commit")) as producer:
        async with producer.transaction():
            for i in range(20):
                await producer.send(topic, b"c%d" % i, key=b"k%d" % i)
        producer.begin_transaction()
        futures = [await producer.send(topic, b"a%d" % i, key=b"k%d" % i) for i in range(20)]
        await asyncio.gather(*futures, return_exceptions=True)  # written, then aborted
        await producer.abort_transaction()
        with pytest.raises(RuntimeError, match="boom"):
            async with producer.transaction():
                await producer.send(topic, b"x", key=b"k")
                raise RuntimeError("boom")
        async with producer.transaction():
            await producer.send(topic, b"last", key=b"k")
    committed = await read(cluster, topic, committed=True)
    assert sorted(committed) == sorted([b"c%d" % i for i in range(20)] + [b"last"])
    everything = await read(cluster, topic, committed=False)
    assert {b"a%d" % i for i in range(20)} <= set(everything)  # in the log, hidden by the abort marker


async def test_a_second_producer_with_the_same_id_fences_the_first_and_aborts_its_transaction(cluster: KafkaCluster) -> None:
    topic = fresh(cluster)
    first = Producer(config(cluster, "t-fence"))
    await first.start()
    try:
        first.begin_transaction()
        await (await first.send(topic, b"zombie", key=b"k"))
        async with Producer(config(cluster, "t-fence")) as second:  # init_transactions() fences the first
            async with second.transaction():
                await second.send(topic, b"winner", key=b"k")
        with pytest.raises((ProducerFencedError, IllegalStateError)) as info:
            await first.commit_transaction()
        assert "fenced" in str(info.value).lower() or "epoch" in str(info.value).lower()
        with pytest.raises(KafkaErrorTypes):
            await first.send(topic, b"after", key=b"k")
    finally:
        await first.close()
    assert await read(cluster, topic, committed=True) == [b"winner"]


KafkaErrorTypes = (ProducerFencedError, IllegalStateError)


async def test_calls_in_the_wrong_state_name_the_state(cluster: KafkaCluster) -> None:
    topic = fresh(cluster)
    async with Producer(config(cluster, "t-state")) as producer:
        with pytest.raises(IllegalStateError, match="send\\(\\) needs the transaction state IN_TRANSACTION, not READY"):
            await producer.send(topic, b"v")
        with pytest.raises(IllegalStateError, match="commit_transaction\\(\\) needs the transaction state IN_TRANSACTION, not READY"):
            await producer.commit_transaction()
        producer.begin_transaction()
        with pytest.raises(IllegalStateError, match="begin_transaction\\(\\) needs the transaction state READY, not IN_TRANSACTION"):
            producer.begin_transaction()
        await producer.abort_transaction()
    async with Producer(bootstrap_servers=cluster.bootstrap_servers) as plain:
        with pytest.raises(IllegalStateError, match="needs a transactional producer: set transactional.id"):
            plain.begin_transaction()


async def test_offsets_committed_in_the_transaction_are_the_groups_offsets(cluster: KafkaCluster) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic, source = fresh(cluster), fresh(cluster, partitions=1)
    async with Producer(config(cluster, "t-offsets")) as producer:
        async with producer.transaction():
            await producer.send(topic, b"out", key=b"k")
            await producer.send_offsets_to_transaction({TopicPartition(source, 0): 42}, "group-t-offsets")
    consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id="group-t-offsets",
                                enable_auto_commit=False)
    await consumer.start()
    try:
        assert await consumer.committed(TopicPartition(source, 0)) == 42
    finally:
        await consumer.stop()
    assert await read(cluster, topic, committed=True) == [b"out"]


async def test_records_queued_when_a_transaction_is_aborted_fail_with_transaction_aborted(cluster: KafkaCluster) -> None:
    topic = fresh(cluster)
    async with Producer({**config(cluster, "t-queued"), "linger.ms": 60000}) as producer:
        producer.begin_transaction()
        future = await producer.send(topic, b"never", key=b"k")  # lingers: not sent before the abort
        await producer.abort_transaction()
        with pytest.raises(TransactionAbortedError):
            await future
    assert await read(cluster, topic, committed=False) == []
