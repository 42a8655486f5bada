"""Transactions v2 (KIP-890 part 2) without sockets: the version choice, the epoch bookkeeping, the round trips.

The cluster's finalized ``transaction.version`` comes from ApiVersions (KIP-584); at
``begin_transaction()`` it decides, for the whole transaction, Produce v12 or at most v11,
AddPartitionsToTxn or none, EndTxn v5 (the epoch moves, the answer carries the next one) or
v3, TxnOffsetCommit v5 without AddOffsetsToTxn or v3 after it. The coordinator here is a
script in memory (``Script``) that records every round trip with the versions it was allowed.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from aioproducer.errors import (
    IllegalStateError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionAbortableError,
    UnsupportedVersionError,
)
from aioproducer.internals.coordinator import CoordinatorRequest
from aioproducer.internals.sender import Sender
from aioproducer.internals.transaction_manager import (
    TransactionManager,
    TransactionState,
    request_version_range,
)
from aioproducer.internals.transactions import PreparedTransaction, Transactions, complete_prepared
from aioproducer.protocol import messages
from aioproducer.protocol.connection_state import ClientConnection, ConnectionState
from test_transaction_manager import batch, drained

S = TransactionState
PRODUCE, END_TXN, TXN_OFFSET_COMMIT = messages.PRODUCE, messages.END_TXN, messages.TXN_OFFSET_COMMIT
ADD_OFFSETS, INIT = messages.ADD_OFFSETS_TO_TXN, messages.INIT_PRODUCER_ID


# ------------------------------------------------------------------ the versions of each protocol
def test_each_transaction_version_has_its_request_versions() -> None:
    assert [request_version_range(k, True) for k in (PRODUCE, END_TXN, TXN_OFFSET_COMMIT)] == [(12, 12), (5, 5), (5, 5)]
    assert [request_version_range(k, False) for k in (PRODUCE, END_TXN, TXN_OFFSET_COMMIT)] == [(3, 11), (0, 3), (0, 3)]


def negotiated(produce_max: int, features: list[dict[str, Any]] | None = None, epoch: int = -1) -> ClientConnection[str]:
    """A connection state machine that read a broker's ApiVersions v3 answer (encoded as a broker would)."""
    machine: ClientConnection[str] = ClientConnection(
        client_id="t", address="b:9092", node_id=1, max_in_flight=5, request_timeout_ms=1000
    )
    frame = b"".join(machine.initiate("connect", 0))
    header = messages.decode_request(frame[4:])[0]
    assert (header.api_key, header.api_version) == (messages.API_VERSIONS, 3)  # the version with the features
    body = {
        "error_code": 0,
        "api_keys": [
            {"api_key": PRODUCE, "min_version": 3, "max_version": produce_max},
            {"api_key": messages.API_VERSIONS, "min_version": 0, "max_version": 4},
        ],
        "throttle_time_ms": 0,
        "finalized_features_epoch": epoch,
        "finalized_features": features or [],
    }
    machine.receive_data(messages.encode_response(messages.API_VERSIONS, 3, header.correlation_id, body), 0)
    assert machine.state is ConnectionState.READY
    return machine


def test_the_finalized_transaction_version_is_read_from_api_versions() -> None:
    features = [{"name": "metadata.version", "max_version_level": 27, "min_version_level": 27},
                {"name": "transaction.version", "max_version_level": 2, "min_version_level": 2}]
    machine = negotiated(13, features, epoch=42)
    assert machine.finalized_features == {"metadata.version": 27, "transaction.version": 2}
    assert machine.finalized_features_epoch == 42
    assert negotiated(13).finalized_features == {}  # none finalized: level 0, transactions v1


def produced_version(machine: ClientConnection[str], transaction_v2: bool) -> int:
    frame = b"".join(machine.send_produce("p", [("t", [(0, b"r")])], 0, acks=-1, timeout_ms=5000,
                                          transaction_v2=transaction_v2))
    return messages.decode_request(frame[4:])[0].api_version


def test_produce_v12_only_for_a_transaction_under_v2() -> None:
    machine = negotiated(13)
    assert machine.produce_version() == 11  # v1, idempotent and plain producers: as before
    assert produced_version(machine, transaction_v2=False) == 11
    assert produced_version(machine, transaction_v2=True) == 12
    assert produced_version(machine, transaction_v2=False) == 11  # the cached v1 version is not disturbed
    assert negotiated(9).produce_version() == 9


def test_a_broker_without_produce_v12_under_v2_is_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersionError, match="b:9092.*Produce up to v11.*transaction.version is 2"):
        negotiated(11).produce_version(transaction_v2=True)


def test_end_txn_v5_answer_carries_the_next_producer_id_and_epoch_golden_bytes() -> None:
    """EndTxnResponse.json v5: throttle int32, error int16, ProducerId int64, ProducerEpoch int16, flexible."""
    payload = bytes.fromhex(
        "0000002a"  # correlation id
        "00"  # response header v1: no tagged fields
        "00000000"  # throttle_time_ms
        "0000"  # error_code
        "0000000000000007"  # producer_id 7
        "0004"  # producer_epoch 4
        "00"  # no tagged fields
    )
    correlation_id, body = messages.decode_response(END_TXN, 5, payload)
    assert (correlation_id, body["producer_id"], body["producer_epoch"]) == (42, 7, 4)
    assert messages.encode_response(END_TXN, 5, 42, body)[4:] == payload
    _, v3 = messages.decode_response(END_TXN, 3, bytes.fromhex("0000002a00" "00000000" "0000" "00"))
    assert "producer_id" not in v3 and v3["error_code"] == 0  # not in v3: the epoch stays


# ------------------------------------------------------------------ the bookkeeping
def state(tm: TransactionManager) -> TransactionState:
    """Read afresh (mypy would narrow ``tm.state`` across the calls that move it)."""
    return tm.state


def ready(transaction_version: int) -> TransactionManager:
    tm = TransactionManager("tx")
    tm.transition(S.INITIALIZING)
    tm.set_producer_id_and_epoch(7, 0)
    tm.use_transaction_version(transaction_version)
    tm.transition(S.READY)
    return tm


@pytest.mark.parametrize(("level", "v2"), [(0, False), (1, False), (2, True), (3, True)])
def test_transactions_v2_from_level_2(level: int, v2: bool) -> None:
    assert ready(level).transaction_v2 is v2


async def test_under_v2_a_partition_needs_no_add_partitions_and_is_in_the_transaction_once_a_batch_is_numbered() -> None:
    tm = ready(2)
    tm.transition(S.IN_TRANSACTION)
    tm.maybe_add_partition("t", 0)
    assert tm.take_pending_partitions() == set()  # nothing for AddPartitionsToTxn
    assert not tm.transaction_started  # nothing sent: nothing to end
    first = drained(tm, batch(0))
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 0, 0)
    assert tm.partitions_in_transaction == {("t", 0)} and tm.transaction_started


async def test_under_v1_a_partition_waits_for_add_partitions_as_before() -> None:
    tm = ready(1)
    tm.transition(S.IN_TRANSACTION)
    tm.maybe_add_partition("t", 0)
    assert tm.should_stop_drain(batch(0))
    assert tm.take_pending_partitions() == {("t", 0)}


async def test_the_epoch_given_by_end_txn_v5_starts_every_partition_again_at_sequence_0() -> None:
    tm = ready(2)
    for expected_epoch in (0, 1, 2):
        tm.transition(S.IN_TRANSACTION)
        for partition in (0, 1):
            tm.maybe_add_partition("t", partition)
            first, second = drained(tm, batch(partition, 3)), batch(partition, 2)
            tm.on_acknowledged(first, 0)
            drained(tm, second)
            tm.on_acknowledged(second, 3)
            assert [(b.producer_epoch, b.base_sequence) for b in (first, second)] == [(expected_epoch, 0), (expected_epoch, 3)]
        tm.transition(S.COMMITTING_TRANSACTION)
        tm.transaction_completed(7, expected_epoch + 1)
        tm.end_transaction()
        assert (tm.producer_id, tm.producer_epoch) == (7, expected_epoch + 1)


async def test_a_new_producer_id_from_end_txn_v5_is_taken_too() -> None:
    """At the highest epoch the coordinator gives a new producer id with epoch 0."""
    tm = ready(2)
    tm.transition(S.IN_TRANSACTION)
    tm.on_acknowledged(drained(tm, batch(0)), 0)
    tm.transition(S.COMMITTING_TRANSACTION)
    tm.transaction_completed(8, 0)
    tm.end_transaction()
    tm.transition(S.IN_TRANSACTION)
    again = drained(tm, batch(0))
    assert (again.producer_id, again.producer_epoch, again.base_sequence) == (8, 0, 0)


def test_end_txn_v5_without_an_id_and_epoch_is_refused() -> None:
    tm = ready(2)
    with pytest.raises(IllegalStateError, match="EndTxn v5 answered without a producer id and epoch"):
        tm.transaction_completed(-1, -1)


def test_the_version_is_fixed_for_a_transaction() -> None:
    tm = ready(2)
    tm.transition(S.IN_TRANSACTION)
    with pytest.raises(IllegalStateError, match="cannot change in state IN_TRANSACTION"):
        tm.use_transaction_version(1)
    assert tm.transaction_v2


# ------------------------------------------------------------------ the round trips
class Script:
    """A transaction and group coordinator in memory: records (api key, min, max version, body); EndTxn v5 bumps."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, int, int | None, dict[str, Any]]] = []
        self.epoch = -1
        self.end_txn_error = 0

    def deadline(self, timeout_ms: float) -> float:
        return float("inf")

    async def send(self, request: CoordinatorRequest[Any], deadline: float) -> Any:
        body = request.body()
        self.sent.append((request.api_key, request.min_version, request.max_version, body))
        if request.api_key == INIT:
            self.epoch += 1
            return request.handle({"error_code": 0, "producer_id": 7, "producer_epoch": self.epoch})
        if request.api_key == END_TXN:
            if self.end_txn_error:
                return request.handle({"error_code": self.end_txn_error, "producer_id": -1, "producer_epoch": -1})
            if request.max_version == 5:  # v5: the coordinator bumps the epoch and says so
                self.epoch += 1
                return request.handle({"error_code": 0, "producer_id": 7, "producer_epoch": self.epoch})
            return request.handle({"error_code": 0, "producer_id": -1, "producer_epoch": -1})
        if request.api_key == TXN_OFFSET_COMMIT:
            return request.handle({"topics": []})
        return request.handle({"error_code": 0})

    def keys(self) -> list[tuple[int, int, int | None]]:
        return [(key, low, high) for key, low, high, _ in self.sent]


def transactions(script: Script, level: int) -> Transactions:
    async def flush() -> None:
        return None

    tm = TransactionManager("tx")
    return Transactions(
        tm, script, 60000, flush=flush, abort_undrained=lambda error: None, on_fatal=lambda error: None,
        transaction_version=lambda: level,
    )


def started(tx: Transactions) -> None:
    """A record was numbered for a request in the transaction (what the sender does)."""
    tx.tm.partitions_in_transaction.add(("t", 0))


async def test_under_v2_commit_and_abort_send_end_txn_v5_and_take_the_new_epoch() -> None:
    script = Script()
    tx = transactions(script, 2)
    await tx.init()
    epochs = [tx.tm.producer_epoch]
    for end in (tx.commit, tx.abort, tx.commit):
        tx.begin()
        started(tx)
        await end()
        epochs.append(tx.tm.producer_epoch)
    assert epochs == [0, 1, 2, 3]
    ends = [(low, high, body["producer_epoch"]) for key, low, high, body in script.sent if key == END_TXN]
    assert ends == [(5, 5, 0), (5, 5, 1), (5, 5, 2)]  # each EndTxn carries the epoch the previous one gave


async def test_under_v1_end_txn_is_at_most_v3_and_the_epoch_stays() -> None:
    script = Script()
    tx = transactions(script, 1)
    await tx.init()
    for end in (tx.commit, tx.abort):
        tx.begin()
        started(tx)
        await end()
    assert (tx.tm.producer_id, tx.tm.producer_epoch) == (7, 0)
    assert [k for k in script.keys() if k[0] == END_TXN] == [(END_TXN, 0, 3)] * 2


async def test_under_v2_an_abort_needing_a_new_epoch_takes_end_txns_and_sends_no_init_producer_id() -> None:
    """KIP-360's bump at abort (a batch failed with its sequence broken): under v2 the EndTxn v5 gives it."""
    script = Script()
    tx = transactions(script, 2)
    await tx.init()
    tx.begin()
    started(tx)
    tx.tm.request_epoch_bump("t", 0)
    tx.tm.transaction_failed(TransactionAbortableError("a batch failed"))
    assert tx.tm.bump_on_abort
    await tx.abort()
    assert [k for k, *_ in script.sent] == [INIT, END_TXN]
    assert (tx.tm.producer_epoch, tx.tm.bump_on_abort, tx.tm.epoch_bump_required) == (1, False, False)


async def test_offsets_under_v2_go_in_txn_offset_commit_v5_alone_and_under_v1_after_add_offsets() -> None:
    for level, expected in ((2, [(TXN_OFFSET_COMMIT, 5, 5)]), (1, [(ADD_OFFSETS, 0, None), (TXN_OFFSET_COMMIT, 0, 3)])):
        script = Script()
        tx = transactions(script, level)
        await tx.init()
        tx.begin()
        await tx.send_offsets({("t", 0): 5}, "group")
        assert script.keys()[1:] == expected
        assert tx.tm.transaction_started  # the offsets must be committed: the transaction is ended
        await tx.commit()
        assert script.keys()[-1][0] == END_TXN


async def test_transaction_abortable_from_end_txn_v5_makes_the_transaction_abortable() -> None:
    """KIP-1050's abortable class: TRANSACTION_ABORTABLE (EndTxn v4+, TxnOffsetCommit v4+, Produce v11+)."""
    script = Script()
    tx = transactions(script, 2)
    await tx.init()
    tx.begin()
    started(tx)
    script.end_txn_error = TransactionAbortableError.errno
    with pytest.raises(TransactionAbortableError, match="commit_transaction\\(\\) for transactional.id 'tx'"):
        await tx.commit()
    assert tx.tm.state is S.ABORTABLE_ERROR
    script.end_txn_error = 0
    await tx.abort()
    assert state(tx.tm) is S.READY and tx.tm.producer_epoch == 1


async def test_a_prepared_transaction_under_v2_is_completed_with_end_txn_v5_and_its_preparer_takes_the_new_epoch() -> None:
    script = Script()
    tx = transactions(script, 2)
    await tx.init()
    tx.begin()
    started(tx)
    prepared = await tx.prepare()
    assert prepared == PreparedTransaction("tx", 7, 0, True, True)
    next_producer = await complete_prepared(script, prepared, commit=True, max_block_ms=1000)
    assert next_producer == (7, 1) and script.keys()[-1] == (END_TXN, 5, 5)
    tx.completed(prepared, next_producer)
    assert tx.tm.state is S.READY and (tx.tm.producer_id, tx.tm.producer_epoch) == (7, 1)
    tx.begin()
    started(tx)
    await tx.commit()
    assert [body["producer_epoch"] for key, _, _, body in script.sent if key == END_TXN] == [0, 1]


async def test_a_prepared_transaction_under_v1_is_completed_with_end_txn_v3_and_the_epoch_stays() -> None:
    script = Script()
    tx = transactions(script, 1)
    await tx.init()
    tx.begin()
    started(tx)
    prepared = await tx.prepare()
    assert not prepared.transaction_v2
    assert await complete_prepared(script, prepared, commit=False, max_block_ms=1000) is None
    assert script.keys()[-1] == (END_TXN, 0, 3)
    tx.completed(prepared, None)
    assert tx.tm.state is S.READY and tx.tm.producer_epoch == 0


async def test_the_transaction_version_is_read_again_at_each_begin() -> None:
    """A cluster upgraded to transaction.version 2 (kafka-features upgrade) is used from the next transaction on."""
    script = Script()
    level = [1]
    tm = TransactionManager("tx")

    async def flush() -> None:
        return None

    tx = Transactions(tm, script, 60000, flush=flush, abort_undrained=lambda e: None, on_fatal=lambda e: None,
                      transaction_version=lambda: level[0])
    await tx.init()
    tx.begin()
    level[0] = 2
    assert not tm.transaction_v2  # fixed for the transaction under way
    started(tx)
    await tx.commit()
    tx.begin()
    assert tm.transaction_v2


async def test_under_v2_invalid_txn_state_from_a_commit_is_asked_about_as_a_refused_epoch() -> None:
    """Kafka 4.3.1 under v2 answers a commit with the epoch its own timeout abort bumped with INVALID_TXN_STATE.

    InitProducerId with the current epoch tells: here it gives the next epoch (timed out, not
    fenced), so the commit raises the abortable InvalidProducerEpochError and the abort sends nothing.
    """
    script = Script()
    tx = transactions(script, 2)
    await tx.init()
    tx.begin()
    started(tx)
    script.end_txn_error = InvalidTxnStateError.errno
    with pytest.raises(InvalidProducerEpochError, match="coordinator aborted the transaction"):
        await tx.commit()
    assert [k for k, *_ in script.sent] == [INIT, END_TXN, INIT] and state(tx.tm) is S.ABORTABLE_ERROR
    await tx.abort()
    assert [k for k, *_ in script.sent] == [INIT, END_TXN, INIT] and state(tx.tm) is S.READY
    assert tx.tm.producer_epoch == 1


async def test_under_v1_invalid_txn_state_from_a_commit_stays_fatal() -> None:
    script = Script()
    tx = transactions(script, 1)
    await tx.init()
    tx.begin()
    started(tx)
    script.end_txn_error = InvalidTxnStateError.errno
    with pytest.raises(InvalidTxnStateError):
        await tx.commit()
    assert state(tx.tm) is S.FATAL_ERROR


@pytest.mark.parametrize(("transactional_id", "level", "v12"), [("tx", 2, True), ("tx", 1, False), (None, 2, False)])
def test_the_sender_asks_for_produce_v12_only_in_a_transaction_under_v2(
    transactional_id: str | None, level: int, v12: bool
) -> None:
    """``Sender._transaction_v2`` is what each Produce request is sent with (``send_produce(transaction_v2=...)``)."""
    tm = TransactionManager(transactional_id)
    tm.use_transaction_version(level)
    sender = SimpleNamespace(transaction_manager=tm)
    assert Sender._transaction_v2.fget(sender) is v12  # type: ignore[attr-defined]
    assert Sender._transaction_v2.fget(SimpleNamespace(transaction_manager=None)) is False  # type: ignore[attr-defined]
