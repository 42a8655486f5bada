"""Transactions on librdkafka's mock cluster: what a real broker cannot easily be made to do.

The mock implements the transaction APIs; here it answers with the coordinator errors a
producer must ride out (the coordinator moved, is loading, the previous transaction is
still completing) and with the ones it must not (fenced), pushed on command.

``committed_offsets()`` here: the mock serves OffsetFetch up to v6, so without RequireStable
(v7), and its TxnOffsetCommit checks and answers but stores nothing, so offsets committed in a
transaction never read back from it. The offsets read here are committed by a confluent-kafka
consumer (OffsetCommit, which the mock keeps); what a transaction's commit or abort makes
visible, and the wait for a pending one, are checked on real Kafka
(``test_real_broker_transactions.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from aioproducer.config_types import ProducerConfigDict
from aioproducer import IllegalStateError, KafkaTimeoutError, Producer, ProducerFencedError, UnsupportedVersionError
from aioproducer.errors import (
    ConcurrentTransactionsError,
    InvalidProducerEpochError,
    CoordinatorLoadInProgressError,
    GroupAuthorizationFailedError,
    NotCoordinatorError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
)
from aioproducer.protocol import messages
from aioproducer.testing import FakeProducer, MockCluster


def config(cluster: MockCluster, transactional_id: str) -> ProducerConfigDict:
    return {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id, "linger.ms": 5,
            "retry.backoff.ms": 10}


@pytest.mark.parametrize(
    "code", [NotCoordinatorError.errno, CoordinatorLoadInProgressError.errno, ConcurrentTransactionsError.errno]
)
async def test_coordinator_errors_on_every_transaction_request_are_ridden_out(mock_cluster: MockCluster, code: int) -> None:
    async with Producer(config(mock_cluster, f"tx-{code}")) as producer:
        for api in (messages.ADD_PARTITIONS_TO_TXN, messages.END_TXN):
            mock_cluster.push_request_errors(api, code, code)
        mock_cluster.start_request_tracking()
        async with producer.transaction():
            future = await producer.send("orders", b"v", key=b"k")
        assert future.done() and future.exception() is None
        apis = [r.api_key for r in mock_cluster.requests()]
        assert apis.count(messages.END_TXN) == 3  # two refused, the third committed
        assert apis.count(messages.ADD_PARTITIONS_TO_TXN) == 3


async def test_a_fenced_end_txn_is_fatal_and_every_later_call_says_so(mock_cluster: MockCluster) -> None:
    async with Producer(config(mock_cluster, "tx-fenced")) as producer:
        mock_cluster.push_request_errors(messages.END_TXN, ProducerFencedError.errno)
        # The KIP-588 check (InitProducerId with the current epoch) answers as for a fenced producer.
        mock_cluster.push_request_errors(messages.INIT_PRODUCER_ID, ProducerFencedError.errno)
        producer.begin_transaction()
        await (await producer.send("orders", b"v", key=b"k"))
        with pytest.raises(ProducerFencedError, match="tx-fenced"):
            await producer.commit_transaction()
        with pytest.raises(ProducerFencedError, match="can only be closed"):
            producer.begin_transaction()
        with pytest.raises(ProducerFencedError):
            await producer.send("orders", b"w", key=b"k")


async def test_a_refused_epoch_that_init_producer_id_accepts_is_a_timed_out_transaction_aborted_and_gone_on_from(
    mock_cluster: MockCluster,
) -> None:
    """EndTxn refuses the epoch, InitProducerId with it answers a new one: the coordinator timed the transaction out."""
    async with Producer(config(mock_cluster, "tx-timed-out")) as producer:
        mock_cluster.push_request_errors(messages.END_TXN, ProducerFencedError.errno)
        producer.begin_transaction()
        await (await producer.send("orders", b"v", key=b"k"))
        epoch = producer.metrics()["producer_epoch"]
        with pytest.raises(InvalidProducerEpochError, match="tx-timed-out.*outlived transaction.timeout.ms"):
            await producer.commit_transaction()
        assert producer.metrics()["producer_epoch"] == epoch + 1
        await producer.abort_transaction()  # nothing left to send: the coordinator aborted it
        async with producer.transaction():
            future = await producer.send("orders", b"w", key=b"k")
        assert future.exception() is None


# ---------------------------------------------------------------- send_offsets_to_transaction()
BAD_OFFSETS: list[tuple[str, Any, type[Exception], str]] = [
    ("negative offset", {("orders", 0): -7}, ValueError,
     r"offsets=\.\.\.\): the offset of \('orders', 0\) must be in 0\.\.2\*\*63-1 \(the next offset to read\), got -7$"),
    ("offset past int64", {("orders", 1): 2**63}, ValueError, r"the offset of \('orders', 1\) must be in .*got 9223372036854775808$"),
    ("float offset", {("orders", 2): 3.0}, TypeError, r"offsets=\.\.\.\): the offset of \('orders', 2\) must be an int, got 3\.0$"),
    ("bool offset", {("orders", 3): True}, TypeError, r"the offset of \('orders', 3\) must be an int, got True$"),
    ("str offset", {("orders", 4): "5"}, TypeError, r"the offset of \('orders', 4\) must be an int, got '5'$"),
    ("negative partition", {("orders", -1): 5}, ValueError, r"offsets=\.\.\.\): \('orders', -1\) has a negative partition"),
    ("partition a str", {("orders", "0"): 5}, TypeError, r"\('orders', '0'\) must be a \(str, int\) pair"),
    ("partition a bool", {("orders", False): 5}, TypeError, r"\('orders', False\) must be a \(str, int\) pair"),
    ("topic not a str", {(0, 0): 5}, TypeError, r"\(0, 0\) must be a \(str, int\) pair"),
    ("key not a pair", {("orders",): 5}, TypeError, r"offsets=\.\.\.\): \('orders',\) is neither a \(topic, partition\) pair"),
    ("empty topic", {("", 0): 5}, ValueError, r"\('', 0\) has an empty topic"),
    ("not a mapping", [(("orders", 0), 5)], TypeError, r"offsets=\.\.\.\) must be a mapping of partition -> next offset, got list"),
    ("a bad entry after a good one", {("orders", 0): 5, ("orders", 1): -1}, ValueError, r"\('orders', 1\) must be in"),
]


@pytest.mark.parametrize(("offsets", "error", "match"), [c[1:] for c in BAD_OFFSETS], ids=[c[0] for c in BAD_OFFSETS])
async def test_bad_offsets_are_refused_before_anything_is_sent_by_the_producer_and_the_fake(
    mock_cluster: MockCluster, offsets: Any, error: type[Exception], match: str
) -> None:
    """Java's ``OffsetAndMetadata`` refuses a negative offset; so do both, naming argument, partition and offset.

    On the mock no AddOffsetsToTxn or TxnOffsetCommit goes out, and the transaction goes on: the
    good offsets sent next are committed (the fake keeps them: only those).
    """
    real = Producer(config(mock_cluster, "tx-bad-offsets"))
    fake = FakeProducer(topics={"orders": 6}, transactional_id="tx-bad-offsets")
    for producer in (real, fake):
        async with producer:
            producer.begin_transaction()
            await producer.send("orders", b"v", partition=0)
            mock_cluster.start_request_tracking()
            with pytest.raises(error, match=match):
                await producer.send_offsets_to_transaction(offsets, "group-bad-offsets")
            if producer is real:
                apis = {r.api_key for r in mock_cluster.requests()}
                assert not apis & {messages.ADD_OFFSETS_TO_TXN, messages.TXN_OFFSET_COMMIT}, apis
            await producer.send_offsets_to_transaction({("orders", 0): 1}, "group-bad-offsets")
            await producer.commit_transaction()
            if producer is real:
                assert messages.TXN_OFFSET_COMMIT in {r.api_key for r in mock_cluster.requests()}
            mock_cluster.stop_request_tracking()
    assert fake.consumer_group_offsets_history() == [{"group-bad-offsets": {("orders", 0): 1}}]


# ---------------------------------------------------------------- committed_offsets()
def commit_with_a_consumer(cluster: MockCluster, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
    """OffsetCommit from confluent-kafka's consumer: offsets the mock keeps (its TxnOffsetCommit keeps none)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": group_id,
                         "enable.auto.commit": False, "log_level": 0})
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def offset_fetches(cluster: MockCluster) -> int:
    return [r.api_key for r in cluster.requests()].count(messages.OFFSET_FETCH)


async def test_committed_offsets_after_init_transactions_and_none_where_none(mock_cluster: MockCluster) -> None:
    commit_with_a_consumer(mock_cluster, "g-read", {("orders", 0): 42, ("orders", 5): 7})
    async with Producer(config(mock_cluster, "tx-read")) as producer:  # started: init_transactions() done
        got = await producer.committed_offsets("g-read", [("orders", 5), ("orders", 0), ("orders", 1)],
                                               require_stable=False)
        assert list(got.items()) == [(("orders", 5), 7), (("orders", 0), 42), (("orders", 1), None)]
        assert await producer.committed_offsets("g-nobody", [("orders", 0)], require_stable=False) == {("orders", 0): None}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as plain:  # not transactional: the same
        assert await plain.committed_offsets("g-read", [("orders", 0)], require_stable=False) == {("orders", 0): 42}


async def test_require_stable_on_a_coordinator_below_v7_is_refused_before_sending(mock_cluster: MockCluster) -> None:
    async with Producer(config(mock_cluster, "tx-stable")) as producer:
        mock_cluster.start_request_tracking()
        with pytest.raises(UnsupportedVersionError, match=r"group_id='g', require_stable=True\).*OffsetFetch up to v6.*v7"):
            await producer.committed_offsets("g", [("orders", 0)])
        assert offset_fetches(mock_cluster) == 0  # no unstable read was made and returned


@pytest.mark.parametrize(
    "code", [UnstableOffsetCommitError.errno, NotCoordinatorError.errno, CoordinatorLoadInProgressError.errno]
)
async def test_a_pending_transaction_or_a_moving_coordinator_is_waited_out(mock_cluster: MockCluster, code: int) -> None:
    commit_with_a_consumer(mock_cluster, "g-wait", {("orders", 2): 9})
    async with Producer(config(mock_cluster, "tx-wait")) as producer:
        mock_cluster.push_request_errors(messages.OFFSET_FETCH, code, code)
        mock_cluster.start_request_tracking()
        assert await producer.committed_offsets("g-wait", [("orders", 2)], require_stable=False) == {("orders", 2): 9}
        assert offset_fetches(mock_cluster) == 3  # two refused, the third answered


async def test_a_transaction_pending_past_max_block_ms_is_a_timeout_naming_the_group(mock_cluster: MockCluster) -> None:
    async with Producer({**config(mock_cluster, "tx-late"), "max.block.ms": 300}) as producer:
        mock_cluster.push_request_errors(messages.OFFSET_FETCH, *[UnstableOffsetCommitError.errno] * 1000)
        with pytest.raises(KafkaTimeoutError, match="transaction with offsets for group 'g-late' was still pending"):
            await producer.committed_offsets("g-late", [("orders", 0)], require_stable=False)


async def test_other_errors_raise_their_class_naming_group_and_partition(mock_cluster: MockCluster) -> None:
    async with Producer(config(mock_cluster, "tx-errors")) as producer:
        with pytest.raises(UnknownTopicOrPartitionError, match=r"group 'g', partition nope\[0\]"):
            await producer.committed_offsets("g", [("orders", 0), ("nope", 0)], require_stable=False)
        mock_cluster.push_request_errors(messages.OFFSET_FETCH, GroupAuthorizationFailedError.errno)
        with pytest.raises(GroupAuthorizationFailedError, match="group 'g'"):
            await producer.committed_offsets("g", [("orders", 0)], require_stable=False)
