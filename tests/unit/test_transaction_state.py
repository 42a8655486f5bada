"""The transactional state machine of TransactionManager, by hand: transitions, errors, partitions to add."""

from __future__ import annotations

import pytest

from aioproducer.errors import (
    IllegalStateError,
    InvalidProducerEpochError,
    KafkaError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
)
from aioproducer.internals.transaction_manager import TransactionManager, TransactionState

S = TransactionState


def state(tm: TransactionManager) -> TransactionState:
    """Read afresh (mypy would narrow ``tm.state`` across the calls that move it)."""
    return tm.state


def ready() -> TransactionManager:
    tm = TransactionManager("tx-1")
    tm.transition(S.INITIALIZING)
    tm.set_producer_id_and_epoch(7, 0)
    tm.transition(S.READY)
    return tm


def test_a_commit_cycle_goes_ready_in_transaction_committing_ready() -> None:
    tm = ready()
    tm.transition(S.IN_TRANSACTION)
    tm.maybe_add_partition("t", 0)
    tm.maybe_add_partition("t", 0)
    tm.maybe_add_partition("t", 1)
    assert tm.pending_partitions == {("t", 0), ("t", 1)} and not tm.transaction_started
    taken = tm.take_pending_partitions()
    assert taken == {("t", 0), ("t", 1)}
    tm.maybe_add_partition("t", 0)  # being added: not pending again
    assert tm.take_pending_partitions() == set() and tm.pending_partitions == set()
    tm.partitions_added(taken, set())
    assert tm.transaction_started and tm.partitions_in_transaction == taken
    tm.transition(S.COMMITTING_TRANSACTION)
    tm.end_transaction()
    assert state(tm) is S.READY and not tm.transaction_started


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (S.READY, S.COMMITTING_TRANSACTION),
        (S.READY, S.ABORTING_TRANSACTION),
        (S.IN_TRANSACTION, S.IN_TRANSACTION),
        (S.ABORTABLE_ERROR, S.COMMITTING_TRANSACTION),
        (S.UNINITIALIZED, S.IN_TRANSACTION),
    ],
)
def test_invalid_transitions_name_both_states(source: TransactionState, target: TransactionState) -> None:
    tm = TransactionManager("tx-1")
    tm.state = source
    with pytest.raises(IllegalStateError, match=f"from {source.value} to {target.value}"):
        tm.transition(target)


def test_an_abortable_error_blocks_everything_but_abort_and_says_why() -> None:
    tm = ready()
    tm.transition(S.IN_TRANSACTION)
    cause = KafkaError("a record failed")
    tm.abortable_error(cause)
    assert state(tm) is S.ABORTABLE_ERROR and tm.last_error is cause
    with pytest.raises(IllegalStateError, match="must be aborted .*a record failed"):
        tm.require("commit_transaction()", S.IN_TRANSACTION)
    tm.require("abort_transaction()", S.IN_TRANSACTION, S.ABORTABLE_ERROR)
    tm.transition(S.ABORTING_TRANSACTION)
    tm.end_transaction()
    assert state(tm) is S.READY and tm.last_error is None


def test_an_abortable_error_outside_a_transaction_changes_nothing() -> None:
    tm = ready()
    tm.abortable_error(KafkaError("late"))
    assert state(tm) is S.READY


def test_fatal_is_final() -> None:
    tm = ready()
    tm.transition(S.IN_TRANSACTION)
    fenced = ProducerFencedError("fenced by a newer producer")
    tm.fatal_error(fenced)
    tm.transition(S.ABORTING_TRANSACTION)  # ignored: fatal stays fatal
    assert state(tm) is S.FATAL_ERROR
    # Fenced stays ProducerFencedError on every later call (as Java): `except ProducerFencedError` catches it.
    with pytest.raises(ProducerFencedError, match="begin_transaction\\(\\): .*can only be closed: .*fenced by a newer"):
        tm.require("begin_transaction()", S.READY)


def test_another_fatal_error_is_an_illegal_state_naming_it() -> None:
    tm = ready()
    tm.fatal_error(TransactionalIdAuthorizationFailedError("not allowed"))
    with pytest.raises(IllegalStateError, match="can only be closed: .*not allowed"):
        tm.require("begin_transaction()", S.READY)


def test_an_epoch_refused_in_a_transaction_says_abort_tells_fenced_from_timed_out() -> None:
    tm = ready()
    tm.transition(S.IN_TRANSACTION)
    tm.epoch_rejected = True
    tm.abortable_error(InvalidProducerEpochError("old epoch"))
    with pytest.raises(IllegalStateError, match="must be aborted .*fenced it, or the coordinator aborted .*ProducerFencedError"):
        tm.require("send()", S.IN_TRANSACTION)
    tm.transition(S.ABORTING_TRANSACTION)
    tm.end_transaction()
    assert not tm.epoch_rejected and state(tm) is S.READY


def test_a_partition_not_yet_added_is_not_drained() -> None:
    import asyncio

    from aioproducer.internals.batch import ProducerBatch
    from aioproducer.protocol.records import RecordBatchBuilder

    async def check() -> None:
        tm = ready()
        tm.transition(S.IN_TRANSACTION)
        batch = ProducerBatch("t", 0, RecordBatchBuilder(), 0.0, 0, asyncio.get_running_loop())
        tm.maybe_add_partition("t", 0)
        assert tm.should_stop_drain(batch)
        tm.partitions_added(tm.take_pending_partitions(), set())
        assert not tm.should_stop_drain(batch)
        tm.assign_sequence(batch)
        assert batch.is_transactional and batch.producer_id == 7

    asyncio.run(check())


def test_librdkafka_group_metadata_bytes_are_read_field_by_field() -> None:
    """As confluent-kafka's consumer_group_metadata() returned them: joined (generation 1), and with an instance id."""
    import sys

    from aioproducer import GroupMetadata

    one = (1).to_bytes(4, sys.byteorder, signed=True)
    joined = b"CGMDv2:" + one + b"g\x00rdkafka-91475f5a\x00\x01"
    assert GroupMetadata.of(joined) == GroupMetadata("g", 1, "rdkafka-91475f5a", None)
    static = b"CGMDv2:\xff\xff\xff\xffmy-group\x00\x00\x00inst-1\x00"
    assert GroupMetadata.of(static) == GroupMetadata("my-group", -1, "", "inst-1")
    with pytest.raises(ValueError, match="not librdkafka's group metadata"):
        GroupMetadata.of(b"something else")
