"""Transactions against real Kafka: what read_committed consumers see, fencing, aborts, offsets in the transaction.

One three-broker cluster for the module, as transactions run in production (the coordinator
can move); tests that stop, pause or kill a broker start or resume it before they end. The
brokers abort a transaction past its ``transaction.timeout.ms`` within half a second
(``transaction.abort.timed.out.transaction.cleanup.interval.ms``), for the timeout tests.
The module runs twice: on a cluster whose finalized ``transaction.version`` is 2 (transactions
v2, KIP-890 part 2: no AddPartitionsToTxn, the epoch bumped at every EndTxn) and on one at 1.
Records are read back by aiokafka with ``isolation_level="read_committed"`` (only committed
records) and ``read_uncommitted`` (everything written, to show that aborted records did reach
the log and are hidden by the abort marker, not missing).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from aioproducer.config_types import ProducerConfigDict
from aioproducer import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    Producer,
    ProducerFencedError,
    TransactionAbortedError,
)
from aioproducer.errors import InvalidProducerEpochError, UnstableOffsetCommitError
from aioproducer.internals.coordinator import first_error_code
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import messages
from aioproducer.testing import KafkaCluster
from aioproducer.internals.coordinator import Coordinators
from conftest import kafka_or_skip
from readback import read_isolated, read_java

pytestmark = pytest.mark.integration

_names = itertools.count()


@pytest.fixture(scope="module", params=[2, 1], ids=["transaction.version=2", "transaction.version=1"])
def cluster(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    """Every test runs on a cluster under transactions v2 (KIP-890 part 2) and on one under v1."""
    with kafka_or_skip(
        brokers=3, topics={}, broker_config={"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"},
        transaction_version=request.param,
    ) as c:
        yield c


def fresh(cluster: KafkaCluster, partitions: int = 2) -> str:
    name = f"txn-{next(_names)}"
    cluster.create_topic(name, partitions=partitions)
    return name


async def read(cluster: KafkaCluster, topic: str, *, committed: bool, timeout: float = 10.0) -> list[bytes]:
    return await read_isolated(cluster.bootstrap_servers, topic, sorted(cluster.high_watermarks(topic)),
                               committed=committed, timeout=timeout)


def config(cluster: KafkaCluster, transactional_id: str) -> ProducerConfigDict:
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
        with pytest.raises(ProducerFencedError, match="fenced"):
            await first.commit_transaction()
        with pytest.raises(ProducerFencedError):
            await first.send(topic, b"after", key=b"k")
    finally:
        await first.close()
    assert await read(cluster, topic, committed=True) == [b"winner"]


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
        # EndTxn is answered before the markers reach the group's coordinator (on another broker of
        # three): wait until the offsets are stable, as a reader that must not guess would.
        assert await producer.committed_offsets("group-t-offsets", [(source, 0)]) == {(source, 0): 42}
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
def coordinator_of(producer: Producer) -> int:
    """The node id of the producer's transaction coordinator as last found."""
    transactions = producer._engine.transactions
    assert transactions is not None
    coordinators = transactions._coordinators
    assert isinstance(coordinators, Coordinators)
    node = coordinators.coordinator(1, transactions.transactional_id)  # TRANSACTION key type
    assert node is not None
    return node


async def test_the_transaction_coordinator_killed_mid_transaction_the_commit_still_lands_once(cluster: KafkaCluster) -> None:
    topic = fresh(cluster, partitions=3)
    try:
        async with Producer({**config(cluster, "t-coordinator"), "request.timeout.ms": 5000}) as producer:
            producer.begin_transaction()
            first = [await producer.send(topic, b"a%d" % i, key=b"k%d" % i) for i in range(30)]
            await asyncio.gather(*first)
            await asyncio.to_thread(cluster.kill_broker, coordinator_of(producer))
            second = [await producer.send(topic, b"b%d" % i, key=b"k%d" % i) for i in range(30)]
            await producer.commit_transaction()  # finds the new coordinator; the partitions' leaders moved too
            await asyncio.gather(*second)
    finally:
        await asyncio.to_thread(cluster.start_all)  # the killed broker, for the module's next tests
    expected = sorted([b"a%d" % i for i in range(30)] + [b"b%d" % i for i in range(30)])
    assert sorted(await read_isolated(cluster.bootstrap_servers, topic, [0, 1, 2], committed=True, timeout=30)) == expected


def transaction_state_partition(transactional_id: str, partitions: int = 4) -> int:
    """The ``__transaction_state`` partition of an ASCII id, as the broker picks it (Java's String.hashCode, abs, mod)."""
    h = 0
    for char in transactional_id:
        h = (31 * h + ord(char)) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions  # the cluster's transaction.state.log.num.partitions


def elect_preferred_leader(cluster: KafkaCluster, partition: int, leader: int) -> None:
    """Move ``__transaction_state``'s ``partition`` back to its preferred replica ``leader`` (retried: it must be in sync)."""
    from confluent_kafka import ElectionType, TopicPartition

    admin = cluster._admin()
    deadline = time.monotonic() + 60
    while cluster.partition_leader("__transaction_state", partition) != leader:
        if time.monotonic() > deadline:
            pytest.fail(f"broker {leader} did not become the leader of __transaction_state-{partition}")
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("__transaction_state", partition)]).result()
        time.sleep(0.5)  # polling another process's election; nothing to wait on


async def test_a_coordinator_the_producers_metadata_lacks_is_reached_at_the_address_find_coordinator_names(
    cluster: KafkaCluster,
) -> None:
    """The coordinator moves to a broker that was down at the producer's metadata update.

    Made deterministic: the broker leading the id's ``__transaction_state`` partition is
    stopped, the producer starts (bootstrap and metadata without it) and commits with the
    coordinator elsewhere; the broker starts again and a preferred-leader election moves the
    coordinator back to it. Before, every coordinator request failed with "node N is not in
    the cluster metadata" until ``metadata.max.age.ms`` (5 min): the record expired at
    ``delivery.timeout.ms`` and the commit raised.
    """
    from confluent_kafka.admin import AdminClient

    tid = "t-unlisted-coordinator"
    partition = transaction_state_partition(tid)
    topic = fresh(cluster, partitions=1)
    async with Producer(config(cluster, "t-unlisted-first")):  # creates __transaction_state if no test did yet
        pass
    admin: AdminClient = cluster._admin()
    metadata = await asyncio.to_thread(admin.list_topics, "__transaction_state", 10)
    assert partition in metadata.topics["__transaction_state"].partitions  # four partitions, as the cluster makes them
    preferred = metadata.topics["__transaction_state"].partitions[partition].replicas[0]
    await asyncio.to_thread(elect_preferred_leader, cluster, partition, preferred)
    others = [b for b in cluster.broker_ids if b != preferred]
    servers = ",".join(cluster.bootstrap_servers.split(",")[b - 1] for b in others)
    await asyncio.to_thread(cluster.stop_broker, preferred)
    try:
        async with asyncio.timeout(60):
            while await asyncio.to_thread(cluster.partition_leader, "__transaction_state", partition) not in others:
                await asyncio.sleep(0.2)  # the controller moves the leadership once the broker's session ends
        async with Producer({**config(cluster, tid), "bootstrap.servers": servers, "max.block.ms": 20000,
                             "delivery.timeout.ms": 20000, "request.timeout.ms": 10000}) as producer:
            async with producer.transaction():
                await producer.send(topic, b"before", key=b"k")
            assert coordinator_of(producer) in others
            await asyncio.to_thread(cluster.start_broker, preferred)
            await asyncio.to_thread(elect_preferred_leader, cluster, partition, preferred)
            assert preferred not in producer._engine.client.metadata.nodes  # type: ignore[union-attr]  # the setting of the bug
            async with producer.transaction():
                await producer.send(topic, b"after", key=b"k")
            assert coordinator_of(producer) == preferred
    finally:
        if preferred not in cluster.running_brokers():
            await asyncio.to_thread(cluster.start_broker, preferred)
    assert await read(cluster, topic, committed=True) == [b"before", b"after"]


async def test_a_transaction_the_coordinator_timed_out_is_aborted_and_the_producer_goes_on_under_v2(
    cluster: KafkaCluster,
) -> None:
    """KIP-588: timed out is not fenced. After a refused epoch, ``abort_transaction()`` gets the new one.

    Each round leaves a transaction open past ``transaction.timeout.ms`` until the broker has
    aborted it (a read_committed reader sees no open transaction), then meets the refused epoch
    another way: a record sent after it, a commit, an abort. Before, the producer was fatal
    after each (``IllegalStateError`` from every later call) and had to be rebuilt.

    Under v1 the coordinator fences the producer instead (the next test): its timeout abort
    keeps no record of the epoch it replaced, so it cannot tell a timed-out producer from a
    zombie. v2's EndTxn records it, and the producer goes on.
    """
    if cluster.transaction_version == 1:
        await _timed_out_under_v1_is_fenced(cluster)
        return
    topic = fresh(cluster, partitions=1)
    # 3 s: the transactions that must succeed have to finish within it on a loaded machine.
    kept: list[bytes] = []
    async with Producer({**config(cluster, "t-timeout"), "transaction.timeout.ms": 3000}) as producer:
        for meet in ("send", "commit", "abort"):
            producer.begin_transaction()
            await (await producer.send(topic, b"too-late-" + meet.encode(), key=b"k"))
            # The broker aborts it on its own: a read_committed reader waits until no transaction is open.
            assert await read(cluster, topic, committed=True, timeout=30) == kept
            if meet == "send":
                late = await producer.send(topic, b"refused", key=b"k")
                with pytest.raises(InvalidProducerEpochError):
                    await late  # the partition's leader refuses the old epoch
            if meet in ("send", "commit"):
                with pytest.raises(InvalidProducerEpochError, match="'t-timeout'.*outlived transaction.timeout.ms=3000"):
                    await producer.commit_transaction()  # not ProducerFencedError: nobody took over
            await producer.abort_transaction()  # the new epoch
            async with producer.transaction():
                await producer.send(topic, b"kept-" + meet.encode(), key=b"k")
            kept.append(b"kept-" + meet.encode())
    assert await read(cluster, topic, committed=True) == [b"kept-send", b"kept-commit", b"kept-abort"]
    assert sorted(await read(cluster, topic, committed=False)) == sorted(
        [b"too-late-send", b"kept-send", b"too-late-commit", b"kept-commit", b"too-late-abort", b"kept-abort"]
    )


async def _timed_out_under_v1_is_fenced(cluster: KafkaCluster) -> None:
    """Under v1 a timed-out producer is fenced (as Kafka fences Java's); the error names both causes.

    Measured on Kafka 4.3.1 at ``transaction.version=1``: InitProducerId with the epoch before
    the timeout abort answers PRODUCER_FENCED. A new producer with the same id goes on, and
    nothing of the timed-out transaction is committed.
    """
    topic = fresh(cluster, partitions=1)
    conf: ProducerConfigDict = {**config(cluster, "t-timeout-v1"), "transaction.timeout.ms": 3000}
    async with Producer(conf) as producer:
        producer.begin_transaction()
        await (await producer.send(topic, b"too-late", key=b"k"))
        assert await read(cluster, topic, committed=True, timeout=30) == []  # aborted by the coordinator
        both = "'t-timeout-v1'.*fenced this one.*or the coordinator aborted.*transaction.timeout.ms=3000"
        with pytest.raises(ProducerFencedError, match=both):
            await producer.commit_transaction()
        with pytest.raises(ProducerFencedError):
            await producer.abort_transaction()
        with pytest.raises(ProducerFencedError):
            producer.begin_transaction()
    async with Producer(conf) as successor:
        async with successor.transaction():
            await successor.send(topic, b"kept", key=b"k")
    assert await read(cluster, topic, committed=True) == [b"kept"]
    assert sorted(await read(cluster, topic, committed=False)) == [b"kept", b"too-late"]


async def test_a_zombie_fenced_mid_transaction_gets_producer_fenced_from_commit_and_every_later_call(
    cluster: KafkaCluster,
) -> None:
    """The docs' ``except ProducerFencedError`` (docs/how-to/transactions.md) must catch fencing, whichever request meets it first."""
    topic = fresh(cluster, partitions=1)
    zombie = Producer(config(cluster, "t-zombie"))
    await zombie.start()
    try:
        zombie.begin_transaction()
        await (await zombie.send(topic, b"zombie-1", key=b"k"))
        async with Producer(config(cluster, "t-zombie")) as successor:  # fences the zombie, aborts its transaction
            late = await zombie.send(topic, b"zombie-2", key=b"k")  # the partition's leader refuses its epoch
            with pytest.raises(InvalidProducerEpochError):
                await late
            with pytest.raises(ProducerFencedError, match="'t-zombie'"):
                await zombie.commit_transaction()
            with pytest.raises(ProducerFencedError):
                await zombie.commit_transaction()
            with pytest.raises(ProducerFencedError):
                await zombie.abort_transaction()
            with pytest.raises(ProducerFencedError):
                zombie.begin_transaction()
            with pytest.raises(ProducerFencedError):
                await zombie.send(topic, b"zombie-3", key=b"k")
            async with successor.transaction():
                await successor.send(topic, b"winner", key=b"k")
    finally:
        await zombie.close()
    assert await read(cluster, topic, committed=True) == [b"winner"]


async def test_a_commit_that_timed_out_is_retried_until_its_outcome_and_nothing_else_is_allowed_meanwhile(
    cluster: KafkaCluster,
) -> None:
    """As Java's ``commitTransaction()``: a timeout does not say the commit failed; calling it again learns the outcome.

    The coordinator is paused (SIGSTOP) with the EndTxn sent to it, so the commit cannot end
    within ``max.block.ms``. Before, the timed-out commit left only ``close()``: the retry,
    ``abort_transaction()`` and ``begin_transaction()`` all raised, though the commit landed.
    """
    topic = fresh(cluster, partitions=1)
    async with Producer({**config(cluster, "t-commit-timeout"), "max.block.ms": 5000,
                         "request.timeout.ms": 20000}) as producer:
        producer.begin_transaction()
        await (await producer.send(topic, b"committed-once", key=b"k"))
        coordinator = coordinator_of(producer)
        await asyncio.to_thread(cluster.pause_broker, coordinator)
        try:
            with pytest.raises(KafkaTimeoutError, match="commit_transaction\\(\\) did not complete within max.block.ms"):
                await producer.commit_transaction()
            with pytest.raises(IllegalStateError, match="the previous commit_transaction\\(\\) timed out"):
                await producer.abort_transaction()
            with pytest.raises(IllegalStateError, match="the previous commit_transaction\\(\\) timed out"):
                producer.begin_transaction()
        finally:
            cluster.resume_broker(coordinator)
        async with asyncio.timeout(60):
            while True:  # the documented way: retry until the outcome is known
                try:
                    await producer.commit_transaction()
                    break
                except KafkaTimeoutError:
                    continue
        async with producer.transaction():  # and the producer goes on
            await producer.send(topic, b"next", key=b"k")
    assert await read(cluster, topic, committed=True) == [b"committed-once", b"next"]


async def test_close_aborts_an_open_transaction_so_read_committed_consumers_go_on(cluster: KafkaCluster) -> None:
    """As Java's graceful close. Before, the transaction stayed open until ``transaction.timeout.ms`` (here 10 min).

    The read_committed reader waits for no open transaction (the last stable offset at the log
    end), for at most 30 s: far less than the transaction's own timeout, so only the abort frees it.
    """
    topic = fresh(cluster, partitions=2)
    producer = Producer({**config(cluster, "t-close-open"), "transaction.timeout.ms": 600_000})
    await producer.start()
    producer.begin_transaction()
    written = [await producer.send(topic, b"w%d" % i, key=b"k%d" % i) for i in range(10)]
    await asyncio.gather(*written)
    await producer.close(timeout=30)
    assert await read(cluster, topic, committed=True, timeout=30) == []  # aborted: the LSO moved on
    assert sorted(await read(cluster, topic, committed=False)) == sorted(b"w%d" % i for i in range(10))


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
            assert await producer.committed_offsets("g-aiokafka", [(source, 0)]) == {(source, 0): 5}  # stable first
        assert await consumer.committed(TopicPartition(source, 0)) == 5
    finally:
        await consumer.stop()
