"""Producer id, epoch and per-partition sequence numbers for the idempotent producer.

Only the idempotent part of the Java ``TransactionManager`` is here (KIP-98,
KIP-360). The broker de-duplicates and orders batches by (producer id, epoch,
sequence), and keeps that state *per partition*; so does this class.

The rules, and why
------------------
* A batch is numbered once, when it is first drained, with its partition's
  next sequence. A numbered batch keeps its numbers for every retry: an earlier
  attempt may have been written (its answer lost), and only the same
  (producer id, epoch, sequence) lets the broker recognise the retry as a
  duplicate. Renumbering it would write it twice.
* Sequences never go back. When a numbered batch fails for good, the broker
  may or may not have written it:

  - the broker said no (an error answer to its only attempt): the next batch
    would leave a gap, so the partition needs a new epoch;
  - nobody knows (it expired, its connection dropped, an earlier attempt may
    have landed): the partition is *unresolved*. No new batch goes to it until
    its numbered batches are all done; then, if the last acknowledged sequence
    is the one just before the partition's next, the log is where it should be
    and it goes on (a later batch was acknowledged, so the broker had the
    failed one); otherwise it needs a new epoch (Java's
    ``markSequenceUnresolved``/``maybeResolveSequences``).

* An epoch bump (KIP-360: epoch + 1, no request needed; the broker then takes
  sequence 0 again) is asked for by the partitions that need it, and only
  their batches are renumbered, once none of them is in a request. Every other
  partition keeps its own (older) epoch and numbering for the batches it has
  numbered already; its next *new* batch waits until those are done and then
  starts the new epoch at sequence 0 (Java's ``maybeUpdateProducerIdAndEpoch``).
  So one partition's trouble neither renumbers nor pauses another's retries.
* Until a partition has an acknowledged batch under its epoch, one batch is in
  flight to it: a broker without state for the producer takes any first
  sequence, so a second batch could be written before a refused first one.

Transactions (KIP-98)
---------------------
With ``transactional.id`` the same object also owns the transaction's state machine, as
Java's ``TransactionManager``::

    UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING_TRANSACTION -> READY
                                       ^             |  +-------> ABORTING_TRANSACTION ---> READY
                                       |             v                ^      +--(epoch bump)--> INITIALIZING
                                       |       ABORTABLE_ERROR ------/
     any state -> FATAL_ERROR (fenced, unauthorized: the producer can only be closed)

and which partitions the coordinator knows are in the transaction: a partition gets its
first batch *pending* (``maybe_add_partition``); the sender sends AddPartitionsToTxn for the
pending ones together and drains a partition's batches only once it is added. A batch that
fails inside a transaction makes the transaction abortable (the records around it may be
half written). Numbering stays as above, except that an epoch bump is never local: it is
InitProducerId with the current id and epoch, at abort (KIP-360).

A refused epoch (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH) is not fatal by itself: since
KIP-588 the coordinator also bumps the epoch when it aborts a transaction that outlived
``transaction.timeout.ms``. ``epoch_rejected`` marks it; the next commit or abort asks the
coordinator which (InitProducerId with the current id and epoch: PRODUCER_FENCED if another
producer took over, the new epoch if the transaction only timed out). Only the first is fatal.

Transactions version 2 (KIP-890 part 2)
----------------------------------------
When the cluster's finalized ``transaction.version`` feature (ApiVersions, KIP-584) is 2 or
more at ``begin_transaction()`` (``use_transaction_version``; fixed for the whole transaction,
as Java decides at begin), the transaction runs under v2:

* no AddPartitionsToTxn: Produce v12 adds a partition to the transaction itself, so a
  partition's batches are drained at once and the partition counts as in the transaction
  (it must be ended) from its first batch numbered for a request (``assign_sequence``);
* no AddOffsetsToTxn: TxnOffsetCommit v5 adds the group itself;
* EndTxn v5: the coordinator bumps the epoch at every commit or abort (its markers carry the
  new epoch, so a late write of the old one is refused) and answers with the producer id and
  epoch to use next, which the producer takes (``transaction_completed``); every partition's
  next batch starts the new epoch at sequence 0. An abort therefore needs no InitProducerId
  for a KIP-360 bump: the EndTxn gives it.

Under v1 (or an older cluster) nothing changes: AddPartitionsToTxn, EndTxn v3 with the epoch
kept, Produce at most v11, TxnOffsetCommit at most v3 (``request_version_range``).

Owned by the sender and the producer's transaction calls, on the event loop only.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any
from dataclasses import dataclass, field

from aioproducer.errors import (
    IllegalStateError,
    InvalidProducerEpochError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    TransactionalIdAuthorizationFailedError,
    UnknownProducerIdError,
)
from aioproducer.internals.batch import ProducerBatch
from aioproducer.protocol import messages

__all__ = [
    "TRANSACTION_VERSION_FEATURE",
    "PartitionSequences",
    "TransactionManager",
    "TransactionState",
    "request_version_range",
]

MAX_SEQUENCE = 2**31 - 1
MAX_EPOCH = 2**15 - 1
NO_LAST_ACKED = -1

#: The finalized feature (KIP-584) whose level 2 enables transactions v2 (KIP-890 part 2).
TRANSACTION_VERSION_FEATURE = "transaction.version"
#: api key -> the (lowest, highest) version sent under transactions v1 and under v2. Under v2
#: the exact versions that carry its meaning (Produce v12, EndTxn v5, TxnOffsetCommit v5); under
#: v1 what aioproducer sent before v2 (a broker refuses Produce v12 in a v1 transaction, and a
#: v5 EndTxn would bump the epoch).
_V1_RANGES: dict[int, tuple[int, int]] = {
    messages.PRODUCE: (3, 11), messages.END_TXN: (0, 3), messages.TXN_OFFSET_COMMIT: (0, 3),
}
_V2_RANGES: dict[int, tuple[int, int]] = {
    messages.PRODUCE: (12, 12), messages.END_TXN: (5, 5), messages.TXN_OFFSET_COMMIT: (5, 5),
}


def request_version_range(api_key: int, transaction_v2: bool) -> tuple[int, int]:
    """The versions of Produce, EndTxn or TxnOffsetCommit a transaction under v1 or v2 may send (pure)."""
    return (_V2_RANGES if transaction_v2 else _V1_RANGES)[api_key]


OUT_OF_ORDER_SEQUENCE_NUMBER = OutOfOrderSequenceNumberError.errno
UNKNOWN_PRODUCER_ID = UnknownProducerIdError.errno


class TransactionState(enum.Enum):
    """Java's ``TransactionManager.State``."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    #: Not Java's: ``prepare_transaction()`` acknowledged every record and left the transaction
    #: open for another party to end (``complete_transaction``); the producer can only be closed.
    PREPARED_TRANSACTION = "PREPARED_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


_S = TransactionState
#: target -> the states it may be reached from (FATAL_ERROR: from any).
_SOURCES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.INITIALIZING: frozenset({_S.UNINITIALIZED, _S.ABORTING_TRANSACTION}),
    _S.READY: frozenset({_S.INITIALIZING, _S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION, _S.PREPARED_TRANSACTION}),
    _S.IN_TRANSACTION: frozenset({_S.READY}),
    _S.COMMITTING_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
    _S.ABORTING_TRANSACTION: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
    _S.PREPARED_TRANSACTION: frozenset({_S.COMMITTING_TRANSACTION}),
    _S.ABORTABLE_ERROR: frozenset({_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTABLE_ERROR}),
}


def increment_sequence(sequence: int, by: int) -> int:
    """Sequences wrap to 0 after Integer.MAX_VALUE, as the broker counts them."""
    if sequence > MAX_SEQUENCE - by:
        return by - (MAX_SEQUENCE - sequence) - 1
    return sequence + by


@dataclass
class PartitionSequences:
    """One partition's numbering. ``producer_id``/``producer_epoch``: the ones its batches carry."""

    producer_id: int
    producer_epoch: int
    next_sequence: int = 0
    last_acked_sequence: int = NO_LAST_ACKED
    last_acked_offset: int = -1
    #: Numbered, unacknowledged batches (in a request or waiting for a retry), by base sequence.
    unacked: list[ProducerBatch] = field(default_factory=list)
    #: Set when a numbered batch failed with an unknown outcome: the sequence after it.
    unresolved_next: int | None = None

    def first_unacked_sequence(self) -> int:
        return self.unacked[0].base_sequence if self.unacked else -1

    def start_at_beginning(self, producer_id: int, producer_epoch: int) -> None:
        """Adopt a new epoch: the unacknowledged batches (none in a request) are numbered from 0."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        sequence = 0
        for batch in self.unacked:
            batch.reset_producer_state(producer_id, producer_epoch, sequence)
            sequence = increment_sequence(sequence, batch.record_count)
        self.next_sequence = sequence
        self.last_acked_sequence = NO_LAST_ACKED
        self.last_acked_offset = -1
        self.unresolved_next = None

    def is_next_sequence(self, sequence: int) -> bool:
        return sequence == increment_sequence(self.last_acked_sequence, 1)


class TransactionManager:
    """Producer id/epoch and sequence bookkeeping, and with a ``transactional_id`` the transaction's state."""

    def __init__(self, transactional_id: str | None = None, transaction_timeout_ms: int = 60000) -> None:
        self.producer_id: int = -1
        self.producer_epoch: int = -1
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.state: TransactionState = TransactionState.UNINITIALIZED
        #: Why the state is ABORTABLE_ERROR or FATAL_ERROR. Written by ``transition``, ``end_transaction``.
        self.last_error: BaseException | None = None
        #: Partitions the coordinator knows are in this transaction; partitions with records queued
        #: that it does not know yet; those in the AddPartitionsToTxn request under way. Written by
        #: ``maybe_add_partition`` (the accumulator), ``take_pending_partitions`` and ``partitions_added``
        #: (``TransactionRequests``), ``end_transaction``.
        self.partitions_in_transaction: set[tuple[str, int]] = set()
        self.pending_partitions: set[tuple[str, int]] = set()
        self.partitions_being_added: set[tuple[str, int]] = set()
        #: AddOffsetsToTxn succeeded in this transaction: it must be ended even without records.
        #: Written by ``offsets_added_to_transaction`` (``Transactions.send_offsets``), ``end_transaction``.
        self.offsets_added: bool = False
        #: A batch failed in a way that needs a new epoch: InitProducerId with the old one at abort.
        #: Written by ``transaction_failed`` (the sender) and ``epoch_bumped_at_abort`` (``Transactions``).
        self.bump_on_abort: bool = False
        #: A broker or the coordinator refused the epoch (fenced, or the transaction timed out):
        #: the next commit or abort asks which (KIP-588, see the module docstring). Written by
        #: ``epoch_refused``, ``aborted_by_coordinator``, ``end_transaction``.
        self.epoch_rejected: bool = False
        #: The coordinator had aborted this transaction (it timed out) and the producer holds its
        #: new epoch already: aborting it sends nothing. Written by ``aborted_by_coordinator``, ``end_transaction``.
        self.coordinator_aborted: bool = False
        #: The current (or next) transaction runs under transactions v2 (see the module docstring).
        #: Written by ``use_transaction_version`` only, outside a transaction.
        self.transaction_v2: bool = False
        #: Partitions waiting for an epoch bump (renumbered when it happens).
        self._to_rewrite: set[tuple[str, int]] = set()
        self._partitions: dict[tuple[str, int], PartitionSequences] = {}

    # -- the transaction's state machine -------------------------------------------------------
    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None

    def transition(self, target: TransactionState, error: BaseException | None = None) -> None:
        """Move to ``target``; an invalid move is a bug here, raised as IllegalStateError naming both states."""
        if self.state is TransactionState.FATAL_ERROR:
            return  # fatal stays fatal: every caller's require() says so
        if target is not TransactionState.FATAL_ERROR and self.state not in _SOURCES[target]:
            raise IllegalStateError(f"invalid transaction state transition from {self.state.value} to {target.value}")
        self.state = target
        if error is not None:
            self.last_error = error

    def require(self, action: str, *states: TransactionState) -> None:
        """Raise the error that explains why ``action`` cannot be done in the current state."""
        if self.state in states:
            return
        if self.state is TransactionState.FATAL_ERROR:
            if isinstance(self.last_error, ProducerFencedError):  # as Java: fenced stays ProducerFencedError
                raise ProducerFencedError(
                    f"{action}: the producer was fenced and can only be closed: {self.last_error}"
                ) from self.last_error
            raise IllegalStateError(
                f"{action}: the producer hit a fatal error and can only be closed: {self.last_error}"
            ) from self.last_error
        if self.state is TransactionState.ABORTABLE_ERROR:
            why = (
                " (the broker refused the producer's epoch: another producer with the same transactional.id "
                "fenced it, or the coordinator aborted the transaction after transaction.timeout.ms; "
                "abort_transaction() tells which, raising ProducerFencedError if fenced)"
                if self.epoch_rejected else ""
            )
            raise IllegalStateError(
                f"{action}: the transaction failed and must be aborted (abort_transaction()){why}: {self.last_error}"
            ) from self.last_error
        wanted = " or ".join(s.value for s in states)
        raise IllegalStateError(f"{action} needs the transaction state {wanted}, not {self.state.value}")

    def abortable_error(self, error: BaseException) -> None:
        """Something in the transaction failed: it can only be aborted now."""
        if self.state in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION,
                          TransactionState.ABORTABLE_ERROR):
            self.transition(TransactionState.ABORTABLE_ERROR, error)

    def fatal_error(self, error: BaseException) -> None:
        self.transition(TransactionState.FATAL_ERROR, error)

    def transaction_failed(self, error: BaseException) -> bool:
        """A batch of the transaction failed: unauthorized is fatal (True: refuse every record); else abortable.

        A refused epoch too (KIP-588): it means fenced *or* timed out by the coordinator, and the
        next commit or abort asks the coordinator which (``Transactions._resolve_rejected_epoch``).
        """
        if isinstance(error, TransactionalIdAuthorizationFailedError):
            self.fatal_error(error)
            return True
        if isinstance(error, (ProducerFencedError, InvalidProducerEpochError)):
            self.epoch_refused()
        self.abortable_error(error)
        if self.epoch_bump_required:
            self.bump_on_abort = True  # KIP-360: InitProducerId with the current epoch when aborting
        return False

    def epoch_refused(self) -> None:
        """A broker or the coordinator refused the epoch: the next commit or abort asks why (KIP-588)."""
        self.epoch_rejected = True

    def aborted_by_coordinator(self) -> None:
        """InitProducerId told that the coordinator aborted the transaction (it timed out): its new epoch is held."""
        self.epoch_rejected = False
        self.coordinator_aborted = True

    def epoch_bumped_at_abort(self) -> None:
        """The abort's InitProducerId gave the new epoch a failed batch needed (KIP-360)."""
        self.bump_on_abort = False

    def use_transaction_version(self, level: int) -> None:
        """The cluster's finalized ``transaction.version`` (0 if unknown): v2 from level 2 on, for the next transaction.

        Called at ``init_transactions()`` and ``begin_transaction()``; a transaction keeps the
        version it began with (its requests must agree), so a call inside one is a bug here.
        """
        if self.state in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION,
                          TransactionState.ABORTING_TRANSACTION, TransactionState.ABORTABLE_ERROR,
                          TransactionState.PREPARED_TRANSACTION):
            raise IllegalStateError(f"the transaction version cannot change in state {self.state.value}")
        self.transaction_v2 = level >= 2

    def transaction_completed(self, producer_id: int, producer_epoch: int) -> None:
        """EndTxn v5 answered (transactions v2): the coordinator bumped the epoch; take what it gave.

        Every partition's next batch starts the new epoch at sequence 0 (``assign_sequence``);
        a KIP-360 bump a failed batch asked for is done by this one (no InitProducerId).
        """
        if producer_id < 0 or producer_epoch < 0:
            raise IllegalStateError(
                f"EndTxn v5 answered without a producer id and epoch ({producer_id}, {producer_epoch})"
            )
        self.set_producer_id_and_epoch(producer_id, producer_epoch)
        self.bump_on_abort = False

    def offsets_added_to_transaction(self) -> None:
        """AddOffsetsToTxn succeeded: the transaction must be ended even without records."""
        self.offsets_added = True

    @property
    def transaction_started(self) -> bool:
        """Whether the coordinator knows of this transaction (a partition or offsets added): it must be ended."""
        return bool(self.partitions_in_transaction) or self.offsets_added

    def maybe_add_partition(self, topic: str, partition: int) -> None:
        """A batch opened for ``topic``/``partition`` inside the transaction: add it before it is sent."""
        if self.transaction_v2:
            return  # Produce v12 adds it: counted as in the transaction once a batch is numbered for it
        key = (topic, partition)
        if key not in self.partitions_in_transaction and key not in self.partitions_being_added:
            self.pending_partitions.add(key)

    def take_pending_partitions(self) -> set[tuple[str, int]]:
        """The partitions for the next AddPartitionsToTxn request (empty while one is under way)."""
        if self.partitions_being_added or not self.pending_partitions:
            return set()
        taken, self.pending_partitions = self.pending_partitions, set()
        self.partitions_being_added = taken
        return taken

    def partitions_added(self, added: set[tuple[str, int]], retry: set[tuple[str, int]]) -> None:
        """AddPartitionsToTxn ended: ``added`` are in the transaction, ``retry`` go back to pending."""
        self.partitions_in_transaction |= added
        self.pending_partitions |= retry
        self.partitions_being_added = set()

    def end_transaction(self) -> None:
        """EndTxn answered (or nothing had started): the next transaction begins from scratch."""
        self.partitions_in_transaction.clear()
        self.pending_partitions.clear()
        self.partitions_being_added.clear()
        self.offsets_added = False
        self.last_error = None
        self.epoch_rejected = False
        self.coordinator_aborted = False
        self.transition(TransactionState.READY)

    # -- producer id and sequences ---------------------------------------------------------------
    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def epoch_bump_required(self) -> bool:
        """A partition waits for a bump and there is an id to bump (else InitProducerId comes first)."""
        return bool(self._to_rewrite) and self.producer_id >= 0

    def partition(self, topic: str, partition: int) -> PartitionSequences | None:
        return self._partitions.get((topic, partition))

    def set_producer_id_and_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """InitProducerId answered (or an epoch bump): partitions waiting for a bump are renumbered."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        for key in self._to_rewrite:
            entry = self._partitions.get(key)
            if entry is not None:
                entry.start_at_beginning(producer_id, producer_epoch)
        self._to_rewrite.clear()

    def request_epoch_bump(self, topic: str, partition: int) -> None:
        """The partition's sequences are broken (a gap, or the broker lost the producer): bump for it."""
        self._to_rewrite.add((topic, partition))

    def ready_to_bump(self) -> bool:
        """No batch of a partition to renumber is in a request (renumbering one there would be a lie)."""
        for key in self._to_rewrite:
            entry = self._partitions.get(key)
            if entry is not None and any(b.in_flight for b in entry.unacked):
                return False
        return True

    def bump_epoch(self) -> None:
        """KIP-360 for an idempotent (non-transactional) producer: epoch + 1, no request needed.

        As ``bumpIdempotentProducerEpoch`` in the Java client. At the highest
        epoch the producer id is dropped instead: the sender asks for a new one
        with InitProducerId, and the renumbering waits for its answer.
        """
        if self.producer_epoch >= MAX_EPOCH:
            self.producer_id = -1
            self.producer_epoch = -1
            return
        self.set_producer_id_and_epoch(self.producer_id, self.producer_epoch + 1)

    def maybe_resolve_sequences(self) -> None:
        """Unresolved partitions whose numbered batches are all done: go on, or bump their epoch."""
        for key, entry in self._partitions.items():
            if entry.unresolved_next is None or entry.unacked:
                continue
            if not entry.is_next_sequence(entry.next_sequence):
                self.request_epoch_bump(*key)  # the broker's log may end anywhere in the failed range
            entry.unresolved_next = None

    def _entry(self, topic: str, partition: int) -> PartitionSequences:
        key = (topic, partition)
        entry = self._partitions.get(key)
        if entry is None:
            entry = self._partitions[key] = PartitionSequences(self.producer_id, self.producer_epoch)
        return entry

    def _is_stale(self, entry: PartitionSequences) -> bool:
        return entry.producer_epoch != self.producer_epoch or entry.producer_id != self.producer_id

    # -- drain-time rules -------------------------------------------------------------
    def should_stop_drain(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` (the head of its deque) must wait, to keep sequences in order.

        A retried batch goes out only when it is the partition's lowest
        unacknowledged sequence. A new batch waits while the partition has a
        bump pending, is unresolved, still has batches numbered under an older
        epoch, has a retry outstanding, or has no acknowledged batch yet and one
        in flight (see the module docstring).
        """
        if not self.has_producer_id:
            return True
        key = (batch.topic, batch.partition)
        if self.transactional_id is not None and not self.transaction_v2 and key not in self.partitions_in_transaction:
            return True  # the coordinator must know the partition first (AddPartitionsToTxn; v2: Produce adds it)
        entry = self._partitions.get(key)
        if entry is None:
            return False
        if key in self._to_rewrite:
            return True
        if not batch.has_sequence:
            if entry.unresolved_next is not None:
                return True
            if entry.unacked:
                if self._is_stale(entry) or entry.last_acked_sequence == NO_LAST_ACKED:
                    return True
                return any(b.in_retry for b in entry.unacked)
            return False
        return batch.base_sequence != entry.first_unacked_sequence()

    def drainable(self, heads: Sequence[ProducerBatch]) -> list[bool]:
        """``not should_stop_drain(batch)`` for each partition's first batch of a drain, in one call.

        The native drain (``RecordQueues.drain``) asks once per request, not per batch: the
        answer for one partition does not depend on what the drain takes of another.
        """
        stop = self.should_stop_drain
        return [not stop(batch) for batch in heads]

    def assign_sequences(self, batches: Sequence[ProducerBatch]) -> None:
        """``assign_sequence`` for each batch a drain took, in order: one call per request."""
        assign = self.assign_sequence
        for batch in batches:
            assign(batch)

    def assign_sequence(self, batch: ProducerBatch) -> None:
        """Number a batch the first time it is drained, and track it until it is done."""
        if batch.has_sequence:
            batch.clear_in_retry()
            return
        entry = self._entry(batch.topic, batch.partition)
        if self._is_stale(entry):  # its older batches are all done (should_stop_drain)
            entry.start_at_beginning(self.producer_id, self.producer_epoch)
        batch.set_producer_state(self.producer_id, self.producer_epoch, entry.next_sequence, self.transactional)
        entry.next_sequence = increment_sequence(entry.next_sequence, batch.record_count)
        entry.unacked.append(batch)
        if self.transaction_v2 and self.transactional:
            self.partitions_in_transaction.add((batch.topic, batch.partition))  # its Produce v12 may add it

    # -- answers ----------------------------------------------------------------------
    def can_retry(self, batch: ProducerBatch, error_code: int, log_start_offset: int) -> bool | None:
        """Java's ``TransactionManager.canRetry`` for the idempotent producer; None: as the error says.

        ``UNKNOWN_PRODUCER_ID``: the broker lost the producer's state for the
        partition; retried, with a bump for the partition unless the answer
        lacks the log start offset (the partition is moving: just retry) or
        the batch was renumbered already. ``OUT_OF_ORDER_SEQUENCE_NUMBER``:
        retried; when the batch directly follows the last acknowledged one (or
        the unresolved range) there is a real gap, and the partition is bumped.
        """
        entry = self._partitions.get((batch.topic, batch.partition))
        if entry is None or not batch.has_sequence:
            return None
        if error_code == UNKNOWN_PRODUCER_ID:
            if log_start_offset != -1 and not batch.sequence_reset:
                self.request_epoch_bump(batch.topic, batch.partition)
            return True
        if error_code == OUT_OF_ORDER_SEQUENCE_NUMBER:
            unresolved = entry.unresolved_next
            if unresolved is None and (batch.sequence_reset or not entry.is_next_sequence(batch.base_sequence)):
                return True  # an earlier batch failed first: this one follows it back
            if unresolved is None or unresolved == batch.base_sequence:
                self.request_epoch_bump(batch.topic, batch.partition)
            return True
        return None

    def on_retry(self, batch: ProducerBatch) -> None:
        batch.mark_in_retry()

    def on_acknowledged(self, batch: ProducerBatch, base_offset: int) -> None:
        entry = self._partitions.get((batch.topic, batch.partition))
        if entry is None or not batch.has_sequence:
            return
        self._remove(entry, batch)
        if batch.producer_epoch != entry.producer_epoch or batch.producer_id != entry.producer_id:
            return  # numbered under an epoch the partition has left: says nothing about the new one
        last = increment_sequence(batch.base_sequence, batch.record_count - 1)
        acked = entry.last_acked_sequence
        if acked == NO_LAST_ACKED or last > acked or acked - last > MAX_SEQUENCE // 2:
            entry.last_acked_sequence = last
            if base_offset >= 0:
                entry.last_acked_offset = base_offset + batch.record_count - 1

    def on_acknowledged_all(self, acknowledged: Sequence[Any]) -> None:
        """``on_acknowledged`` for each of a response's written batches, flat ``[batch, base_offset, ...]``.

        The native completion's one call per response (``RecordQueues.complete``), before any of them completes.
        """
        it = iter(acknowledged)
        for batch, base_offset in zip(it, it):
            self.on_acknowledged(batch, base_offset)

    def on_failed(self, batch: ProducerBatch, error_code: int | None, *, outcome_unknown: bool) -> None:
        """A numbered batch failed for good (see "Sequences never go back" above).

        ``outcome_unknown``: no broker answer decided this attempt (a timeout, a
        dropped connection), or an earlier attempt may have been written.
        """
        entry = self._partitions.get((batch.topic, batch.partition))
        if entry is None or not batch.has_sequence:
            return
        self._remove(entry, batch)
        if batch.producer_epoch != entry.producer_epoch or batch.producer_id != entry.producer_id:
            return
        if error_code == OUT_OF_ORDER_SEQUENCE_NUMBER or not (outcome_unknown or batch.attempts > 0):
            self.request_epoch_bump(batch.topic, batch.partition)
            return
        after = increment_sequence(batch.base_sequence, batch.record_count)
        current = entry.unresolved_next
        if current is None or after > current or current - after > MAX_SEQUENCE // 2:
            entry.unresolved_next = after

    def on_split(self, batch: ProducerBatch, pieces: list[ProducerBatch]) -> None:
        """A numbered batch was split (MESSAGE_TOO_LARGE): its pieces take over its sequence range.

        As ``ProducerBatch.split`` in the Java client: the pieces are numbered
        consecutively from the parent's base sequence and replace it among the
        unacknowledged batches, so batches numbered after the parent (possibly in
        flight already) stay valid and no epoch bump is needed.
        """
        entry = self._partitions.get((batch.topic, batch.partition))
        if entry is None or not batch.has_sequence:
            return
        sequence = batch.base_sequence
        for piece in pieces:
            piece.set_producer_state(batch.producer_id, batch.producer_epoch, sequence, batch.is_transactional)
            piece.mark_in_retry()  # new batches of the partition wait until the pieces went out
            sequence = increment_sequence(sequence, piece.record_count)
        try:
            index = entry.unacked.index(batch)
        except ValueError:
            entry.unacked.extend(pieces)
            entry.unacked.sort(key=lambda b: b.base_sequence)
        else:
            entry.unacked[index : index + 1] = pieces

    @staticmethod
    def _remove(entry: PartitionSequences, batch: ProducerBatch) -> None:
        try:
            entry.unacked.remove(batch)
        except ValueError:
            pass
