"""``TransactionManager``'s sequence and epoch bookkeeping, batch by batch, with no sender.

The situations of ``test_idempotence.py`` seen from the bookkeeping's side: which
batch may be drained, what a failure does to the partition's numbering, what a
bump renumbers. ``tests/mutation_check.py`` plants bugs here and expects failures.
"""

from __future__ import annotations

import asyncio

from aioproducer.internals.batch import ProducerBatch
from aioproducer.internals.transaction_manager import (
    MAX_EPOCH,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    UNKNOWN_PRODUCER_ID,
    TransactionManager,
)
from aioproducer.protocol.records import RecordBatchBuilder


def batch(partition: int = 0, records: int = 2, topic: str = "t") -> ProducerBatch:
    b = ProducerBatch(topic, partition, RecordBatchBuilder(), 0.0, 0, asyncio.get_running_loop())
    for i in range(records):
        assert b.try_append(i, None, b"v", None, None) is not None
    return b


def drained(tm: TransactionManager, b: ProducerBatch) -> ProducerBatch:
    """What drain() does with a batch it may take."""
    assert not tm.should_stop_drain(b)
    tm.assign_sequence(b)
    b.drained()
    return b


def retried(tm: TransactionManager, b: ProducerBatch) -> None:
    """What the sender and reenqueue() do with a batch to retry."""
    tm.on_retry(b)
    b.reenqueued(0.0, 0.0)


def tm_with_id() -> TransactionManager:
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(7, 0)
    return tm


async def test_nothing_drains_without_a_producer_id() -> None:
    assert TransactionManager().should_stop_drain(batch())


async def test_batches_are_numbered_consecutively_and_one_waits_for_the_first_ack() -> None:
    tm = tm_with_id()
    a = drained(tm, batch(records=3))
    b = batch()
    assert tm.should_stop_drain(b)  # no acknowledgement yet under this epoch
    tm.on_acknowledged(a, 100)
    drained(tm, b)
    assert (a.base_sequence, b.base_sequence) == (0, 3)
    entry = tm.partition("t", 0)
    assert entry is not None and (entry.last_acked_sequence, entry.last_acked_offset, entry.next_sequence) == (2, 102, 5)


async def test_an_unknown_outcome_blocks_new_batches_until_a_later_ack_resolves_it() -> None:
    tm = tm_with_id()
    tm.on_acknowledged(drained(tm, batch()), 0)
    a, b = drained(tm, batch()), drained(tm, batch())
    tm.on_failed(a, None, outcome_unknown=True)  # expired: written or not, nobody knows
    assert tm.should_stop_drain(batch())
    tm.maybe_resolve_sequences()
    assert not tm.epoch_bump_required  # b still out: wait for it
    tm.on_acknowledged(b, 10)  # the broker took b, so it had a
    tm.maybe_resolve_sequences()
    assert not tm.epoch_bump_required
    c = drained(tm, batch())
    assert (c.producer_epoch, c.base_sequence) == (0, 6)


async def test_an_unknown_outcome_with_nothing_after_it_bumps_only_that_partition() -> None:
    tm = tm_with_id()
    tm.on_acknowledged(drained(tm, batch(0)), 0)
    tm.on_acknowledged(drained(tm, batch(1)), 0)
    a = drained(tm, batch(0))
    other = drained(tm, batch(1))
    tm.on_failed(a, None, outcome_unknown=True)
    tm.maybe_resolve_sequences()
    assert tm.epoch_bump_required and tm.ready_to_bump()
    tm.bump_epoch()
    assert tm.producer_epoch == 1
    assert (other.producer_epoch, other.base_sequence) == (0, 2)  # never renumbered
    fresh = drained(tm, batch(0))
    assert (fresh.producer_epoch, fresh.base_sequence) == (1, 0)
    later = batch(1)
    assert tm.should_stop_drain(later)  # partition 1 still has a batch of epoch 0 out
    tm.on_acknowledged(other, 5)
    tm.on_acknowledged(fresh, 0)
    drained(tm, later)
    assert (later.producer_epoch, later.base_sequence) == (1, 0)


async def test_a_definitive_failure_asks_for_a_bump_and_never_rolls_the_sequence_back() -> None:
    tm = tm_with_id()
    tm.on_acknowledged(drained(tm, batch()), 0)
    a = drained(tm, batch())
    tm.on_failed(a, 87, outcome_unknown=False)
    entry = tm.partition("t", 0)
    assert entry is not None and entry.next_sequence == 4
    assert tm.epoch_bump_required
    assert tm.should_stop_drain(batch())  # the partition waits for its bump


async def test_the_bump_waits_until_the_partitions_batches_are_out_of_requests() -> None:
    tm = tm_with_id()
    tm.on_acknowledged(drained(tm, batch()), 0)
    a, b = drained(tm, batch()), drained(tm, batch())
    assert tm.can_retry(a, OUT_OF_ORDER_SEQUENCE_NUMBER, 0) is True  # next in line: a real gap
    assert tm.epoch_bump_required
    retried(tm, a)
    assert not tm.ready_to_bump()  # b is still in a request
    assert tm.can_retry(b, OUT_OF_ORDER_SEQUENCE_NUMBER, 0) is True
    retried(tm, b)
    assert tm.ready_to_bump()
    tm.bump_epoch()
    assert [(x.producer_epoch, x.base_sequence, x.sequence_reset) for x in (a, b)] == [(1, 0, True), (1, 2, True)]


async def test_out_of_order_behind_a_failed_batch_retries_without_a_bump() -> None:
    tm = tm_with_id()
    tm.on_acknowledged(drained(tm, batch()), 0)
    drained(tm, batch())
    b = drained(tm, batch())
    assert tm.can_retry(b, OUT_OF_ORDER_SEQUENCE_NUMBER, 0) is True
    assert not tm.epoch_bump_required


async def test_unknown_producer_id_bumps_unless_the_log_start_is_unknown_or_already_reset() -> None:
    tm = tm_with_id()
    tm.on_acknowledged(drained(tm, batch()), 0)
    a = drained(tm, batch())
    assert tm.can_retry(a, UNKNOWN_PRODUCER_ID, -1) is True
    assert not tm.epoch_bump_required
    assert tm.can_retry(a, UNKNOWN_PRODUCER_ID, 5) is True
    assert tm.epoch_bump_required
    assert tm.can_retry(a, 6, 0) is None  # other errors: as the error class says


async def test_split_pieces_take_over_the_parents_range() -> None:
    tm = tm_with_id()
    tm.on_acknowledged(drained(tm, batch()), 0)
    parent = drained(tm, batch(records=4))
    after = drained(tm, batch())
    pieces = [batch(records=1), batch(records=3)]
    tm.on_split(parent, pieces)
    assert [p.base_sequence for p in pieces] == [2, 3]
    assert after.base_sequence == 6
    entry = tm.partition("t", 0)
    assert entry is not None and entry.unacked == [*pieces, after]
    assert not tm.should_stop_drain(pieces[0]) and tm.should_stop_drain(pieces[1])


async def test_at_the_last_epoch_the_producer_id_is_dropped_and_renumbering_waits_for_a_new_one() -> None:
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(7, MAX_EPOCH)
    tm.on_acknowledged(drained(tm, batch()), 0)
    a = drained(tm, batch())
    tm.on_failed(drained(tm, batch()), 87, outcome_unknown=False)
    retried(tm, a)
    tm.request_epoch_bump("t", 0)
    tm.bump_epoch()
    assert not tm.has_producer_id and a.producer_id == 7
    tm.set_producer_id_and_epoch(8, 0)  # InitProducerId answered
    assert (a.producer_id, a.producer_epoch, a.base_sequence) == (8, 0, 0)
