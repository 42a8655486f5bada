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
from typing import Any

import pytest

from aioproducer import IllegalStateError, KafkaError, Producer, ProducerFencedError, TransactionAbortedError
from aioproducer.errors import UnstableOffsetCommitError
from aioproducer.internals.coordinator import first_error_code
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import messages
from aioproducer.testing import KafkaCluster
from conftest import kafka_or_skip
from readback import read_isolated, read_java

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
    return await read_isolated(cluster.bootstrap_servers, topic, sorted(cluster.high_watermarks(topic)),
                               committed=committed, timeout=timeout)


def config(cluster: KafkaCluster, transactional_id: str) -> dict[str, object]:
    return {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id, "linger.ms": 5}


async def test_committed_records_are_seen_once_and_aborted_ones_never(cluster: KafkaCluster) -> None:
    topic = fresh(cluster)
    async with Producer(config(cluster, "t-commit")) as producer:
        async with producer.transaction():
            kept = [await producer.send(topic, b"c%d" % i, key=b"k%d" % i) for i in range(20)]
        producer.begin_transaction()
        futures = [await producer.send(topic, b"a%d" % i, key=b"k%d" % i) for i in range(20)]
        await asyncio.gather(*futures, return_exceptions=True)  # written, then aborted
        await producer.abort_transaction()
        with pytest.raises(RuntimeError, match="boom"):
            async with producer.transaction():
                await producer.send(topic, b"x", key=b"k")
                raise RuntimeError("boom")
        async with producer.transaction():
            kept.append(await producer.send(topic, b"last", key=b"k"))
    committed = await read(cluster, topic, committed=True)
    assert sorted(committed) == sorted([b"c%d" % i for i in range(20)] + [b"last"])
    everything = await read(cluster, topic, committed=False)
    assert {b"a%d" % i for i in range(20)} <= set(everything)  # in the log, hidden by the abort marker
    # The Java KafkaConsumer, read_committed, partition by partition: the committed values in order.
    by_partition: dict[int, list[bytes]] = {}
    for future, value in zip(kept, [b"c%d" % i for i in range(20)] + [b"last"]):
        by_partition.setdefault(future.result().partition, []).append(value)
    for partition, values in by_partition.items():
        java = await asyncio.to_thread(
            read_java, cluster.bootstrap_servers, topic, partition, count=len(values), isolation_level="read_committed",
            timeout=60,
        )
        assert [r.value for r in java] == values


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


async def test_committed_offsets_show_commits_not_aborts_and_wait_out_a_pending_transaction(
    cluster: KafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a restarted writer reads, from itself and from a plain producer; the broker's answers are watched."""
    tp, group = (fresh(cluster, partitions=1), 0), "g-committed-offsets"
    unstable = asyncio.Event()  # set when the broker answers an OffsetFetch with UNSTABLE_OFFSET_COMMIT
    send = BrokerConnection.send

    async def watched(self: BrokerConnection, api_key: int, body: dict[str, Any], **kwargs: Any) -> dict[str, Any] | None:
        answer = await send(self, api_key, body, **kwargs)
        if api_key == messages.OFFSET_FETCH and first_error_code(answer) == UnstableOffsetCommitError.errno:
            unstable.set()
        return answer

    monkeypatch.setattr(BrokerConnection, "send", watched)
    async with Producer(config(cluster, "t-committed-offsets")) as writer, \
            Producer(bootstrap_servers=cluster.bootstrap_servers) as reader:
        assert await writer.committed_offsets(group, [tp]) == {tp: None}  # nothing committed yet
        async with writer.transaction():
            await writer.send_offsets_to_transaction({tp: 5}, group)
        assert await writer.committed_offsets(group, [tp]) == {tp: 5}
        writer.begin_transaction()
        await writer.send_offsets_to_transaction({tp: 10}, group)
        await writer.abort_transaction()
        assert await writer.committed_offsets(group, [tp]) == {tp: 5}

        writer.begin_transaction()
        await writer.send_offsets_to_transaction({tp: 20}, group)
        assert await reader.committed_offsets(group, [tp], require_stable=False) == {tp: 5}  # the read before it
        unstable.clear()  # the reads above may have waited too: EndTxn answers before the markers are written
        stable = asyncio.create_task(reader.committed_offsets(group, [tp]))
        async with asyncio.timeout(30):
            await unstable.wait()  # the broker held the answer back: the transaction is pending
        assert not stable.done()
        await writer.commit_transaction()
        assert await stable == {tp: 20}


async def test_records_queued_when_a_transaction_is_aborted_fail_with_transaction_aborted(cluster: KafkaCluster) -> None:
    topic = fresh(cluster)
    async with Producer({**config(cluster, "t-queued"), "linger.ms": 60000}) as producer:
        producer.begin_transaction()
        future = await producer.send(topic, b"never", key=b"k")  # lingers: not sent before the abort
        await producer.abort_transaction()
        with pytest.raises(TransactionAbortedError):
            await future
    assert await read(cluster, topic, committed=False) == []


# ---------------------------------------------------------------- the coordinator dies; the transaction times out
@pytest.fixture(scope="module")
def three() -> Iterator[KafkaCluster]:
    with kafka_or_skip(brokers=3, topics={}) as c:
        yield c


async def test_the_transaction_coordinator_killed_mid_transaction_the_commit_still_lands_once(three: KafkaCluster) -> None:
    topic = fresh(three, partitions=3)
    async with Producer({**config(three, "t-coordinator"), "request.timeout.ms": 5000}) as producer:
        transactions = producer._transactions
        assert transactions is not None
        producer.begin_transaction()
        first = [await producer.send(topic, b"a%d" % i, key=b"k%d" % i) for i in range(30)]
        await asyncio.gather(*first)
        coordinator = transactions._coordinators._known[(1, "t-coordinator")]  # TRANSACTION key type
        await asyncio.to_thread(three.kill_broker, coordinator)
        second = [await producer.send(topic, b"b%d" % i, key=b"k%d" % i) for i in range(30)]
        await producer.commit_transaction()  # finds the new coordinator; the partitions' leaders moved too
        await asyncio.gather(*second)
    expected = sorted([b"a%d" % i for i in range(30)] + [b"b%d" % i for i in range(30)])
    assert sorted(await read_isolated(three.bootstrap_servers, topic, [0, 1, 2], committed=True, timeout=30)) == expected


@pytest.fixture(scope="module")
def quick_timeouts() -> Iterator[KafkaCluster]:
    with kafka_or_skip(
        brokers=1, topics={}, broker_config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"}
    ) as c:
        yield c


async def test_a_transaction_past_its_timeout_is_aborted_by_the_broker_and_commit_says_so(quick_timeouts: KafkaCluster) -> None:
    topic = fresh(quick_timeouts, partitions=1)
    async with Producer({**config(quick_timeouts, "t-timeout"), "transaction.timeout.ms": 1000}) as producer:
        producer.begin_transaction()
        await (await producer.send(topic, b"too-late", key=b"k"))
        # The broker aborts it on its own: a read_committed reader waits until no transaction is open.
        assert await read(quick_timeouts, topic, committed=True, timeout=30) == []
        with pytest.raises(KafkaError) as info:
            await producer.commit_transaction()
        assert "t-timeout" in str(info.value)
    assert await read(quick_timeouts, topic, committed=True) == []
    assert await read(quick_timeouts, topic, committed=False) == [b"too-late"]


# ---------------------------------------------------------------- two-phase commit: prepare here, complete elsewhere
async def test_a_prepared_transaction_is_committed_by_another_producer_after_this_one_closed(cluster: KafkaCluster) -> None:
    topic = fresh(cluster)
    async with Producer(config(cluster, "t-prepare")) as producer:
        producer.begin_transaction()
        for i in range(10):
            await producer.send(topic, b"p%d" % i, key=b"k%d" % i)
        prepared = await producer.prepare_transaction()
        assert (prepared.transactional_id, prepared.started) == ("t-prepare", True)
        with pytest.raises(IllegalStateError, match="send\\(\\) needs the transaction state IN_TRANSACTION, not PREPARED"):
            await producer.send(topic, b"late")
        with pytest.raises(IllegalStateError, match="begin_transaction\\(\\) needs .* not PREPARED_TRANSACTION"):
            producer.begin_transaction()
    # Closed: the transaction is still open (not aborted by the close), so read_committed sees nothing yet.
    assert sorted(await read(cluster, topic, committed=False)) == sorted(b"p%d" % i for i in range(10))
    async with Producer(bootstrap_servers=cluster.bootstrap_servers) as driver:  # not transactional
        await driver.complete_transaction(prepared)
        await driver.complete_transaction(prepared)  # again, the same outcome: succeeds
    assert sorted(await read(cluster, topic, committed=True)) == sorted(b"p%d" % i for i in range(10))


async def test_a_prepared_transaction_fenced_by_a_new_producer_is_aborted_and_completing_it_says_so(
    cluster: KafkaCluster,
) -> None:
    topic = fresh(cluster)
    async with Producer(config(cluster, "t-prepare-fenced")) as producer:
        producer.begin_transaction()
        await producer.send(topic, b"zombie", key=b"k")
        prepared = await producer.prepare_transaction()
    async with Producer(config(cluster, "t-prepare-fenced")) as successor:  # InitProducerId aborts it
        async with successor.transaction():
            await successor.send(topic, b"winner", key=b"k")
    async with Producer(bootstrap_servers=cluster.bootstrap_servers) as driver:
        with pytest.raises(KafkaError, match="complete_transaction\\(commit=True\\) for transactional.id 't-prepare-fenced'"):
            await driver.complete_transaction(prepared)
    assert await read(cluster, topic, committed=True) == [b"winner"]


async def test_a_producer_completes_its_own_prepared_transaction_and_goes_on(cluster: KafkaCluster) -> None:
    topic = fresh(cluster)
    async with Producer(config(cluster, "t-prepare-own")) as producer:
        producer.begin_transaction()
        await producer.send(topic, b"aborted", key=b"k")
        await producer.complete_transaction(await producer.prepare_transaction(), commit=False)
        producer.begin_transaction()  # READY again
        await producer.send(topic, b"kept", key=b"k")
        await producer.complete_transaction(await producer.prepare_transaction())
        producer.begin_transaction()
        empty = await producer.prepare_transaction()  # nothing sent: nothing for the coordinator to end
        assert not empty.started
        await producer.complete_transaction(empty)
        with pytest.raises(TypeError, match="complete_transaction\\(prepared=...\\) takes what prepare_transaction\\(\\) returned"):
            await producer.complete_transaction("t-prepare-own")  # type: ignore[arg-type]
    assert await read(cluster, topic, committed=True) == [b"kept"]
    assert sorted(await read(cluster, topic, committed=False)) == [b"aborted", b"kept"]


# ---------------------------------------------------------------- group metadata from the other clients' consumers
async def test_offsets_from_a_confluent_kafka_consumers_group_metadata(cluster: KafkaCluster) -> None:
    """A joined member's generation and member id go with the offsets: a wrong one would be refused."""
    from confluent_kafka import Consumer, TopicPartition

    source, out = fresh(cluster, partitions=1), fresh(cluster)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "g-confluent",
                         "enable.auto.commit": False, "log_level": 0})
    consumer.subscribe([source])
    try:
        async with asyncio.timeout(30):
            while not consumer.assignment():
                await asyncio.to_thread(consumer.poll, 0.2)  # joins the group: a real generation and member id
        metadata = consumer.consumer_group_metadata()
        async with Producer(config(cluster, "t-confluent-group")) as producer:
            async with producer.transaction():
                await producer.send(out, b"v", key=b"k")
                await producer.send_offsets_to_transaction({TopicPartition(source, 0): 7}, metadata)
        committed = await asyncio.to_thread(consumer.committed, [TopicPartition(source, 0)], 10)
        assert committed[0].offset == 7
    finally:
        consumer.close()


async def test_offsets_from_an_aiokafka_consumers_membership(cluster: KafkaCluster) -> None:
    """As examples/exactly_once_pipeline.py takes it; a stale generation is refused, which proves it is checked."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from aioproducer import GroupMetadata

    source, out = fresh(cluster, partitions=1), fresh(cluster)
    consumer = AIOKafkaConsumer(source, bootstrap_servers=cluster.bootstrap_servers, group_id="g-aiokafka",
                                enable_auto_commit=False)
    await consumer.start()
    try:
        async with asyncio.timeout(30):
            while not consumer.assignment():
                await consumer.getmany(timeout_ms=200)
        coordinator = consumer._coordinator
        member = GroupMetadata("g-aiokafka", coordinator.generation, coordinator.member_id)
        async with Producer(config(cluster, "t-aiokafka-group")) as producer:
            async with producer.transaction():
                await producer.send(out, b"v", key=b"k")
                await producer.send_offsets_to_transaction({TopicPartition(source, 0): 5}, member)
            stale = GroupMetadata("g-aiokafka", coordinator.generation + 5, coordinator.member_id)
            producer.begin_transaction()
            with pytest.raises(KafkaError, match="ILLEGAL_GENERATION"):
                await producer.send_offsets_to_transaction({TopicPartition(source, 0): 9}, stale)
            await producer.abort_transaction()
        assert await consumer.committed(TopicPartition(source, 0)) == 5
    finally:
        await consumer.stop()
