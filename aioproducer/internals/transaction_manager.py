"""Producer id, epoch and per-partition sequence numbers for the idempotent producer.

Only the idempotent part of the Java ``TransactionManager`` is here (KIP-98,
KIP-360): the broker de-duplicates and orders batches by (producer id, epoch,
sequence), so the producer must

* number each partition's batches consecutively, once, when they are drained;
* keep the batches that were numbered but not yet acknowledged (in flight or
  waiting to be retried) in sequence order, so that a retry goes out in the
  same order as the first attempt;
* when a sequence can no longer be trusted (an ``OUT_OF_ORDER_SEQUENCE_NUMBER``
  for the very next batch, an ``UNKNOWN_PRODUCER_ID``, a batch that expired
  while in flight), bump the epoch: the broker then accepts sequence 0 again,
  and every unacknowledged batch is renumbered from 0 in its old order.

Owned by the sender: only the event loop touches it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aioproducer.internals.batch import ProducerBatch

__all__ = ["TransactionManager", "PartitionSequences"]

MAX_SEQUENCE = 2**31 - 1
MAX_EPOCH = 2**15 - 1


def _increment(sequence: int, by: int) -> int:
    """Sequences wrap to 0 after Integer.MAX_VALUE, as in the Java client."""
    if sequence > MAX_SEQUENCE - by:
        return by - (MAX_SEQUENCE - sequence) - 1
    return sequence + by


@dataclass
class PartitionSequences:
    next_sequence: int = 0
    last_acked_sequence: int = -1
    last_acked_offset: int = -1
    # Numbered, unacknowledged batches, ordered by base sequence.
    in_flight: list[ProducerBatch] = field(default_factory=list)

    def first_in_flight_sequence(self) -> int:
        return self.in_flight[0].base_sequence if self.in_flight else -1


class TransactionManager:
    """Producer id/epoch and sequence bookkeeping for ``enable.idempotence=true``."""

    def __init__(self) -> None:
        self.producer_id = -1
        self.producer_epoch = -1
        self.epoch_bump_required = False
        self._partitions: dict[tuple[str, int], PartitionSequences] = {}

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    def set_producer_id_and_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """Adopt a new id/epoch and renumber every unacknowledged batch from 0."""
        changed = (producer_id, producer_epoch) != (self.producer_id, self.producer_epoch)
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.epoch_bump_required = False
        if not changed:
            return
        for entry in self._partitions.values():
            sequence = 0
            for batch in entry.in_flight:
                batch.set_producer_state(producer_id, producer_epoch, sequence)
                sequence = _increment(sequence, batch.record_count)
            entry.next_sequence = sequence
            entry.last_acked_sequence = -1

    def _entry(self, topic: str, partition: int) -> PartitionSequences:
        key = (topic, partition)
        entry = self._partitions.get(key)
        if entry is None:
            entry = self._partitions[key] = PartitionSequences()
        return entry

    # -- drain-time rules -------------------------------------------------------------
    def should_stop_drain(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` (the head of its deque) must wait, to keep sequences in order.

        A new batch waits while retries of the partition are outstanding; a retried
        batch goes out only when it is the lowest unacknowledged sequence.

        Until the partition has acknowledged a batch under this producer id and
        epoch, only one batch is in flight to it. A broker that holds no state
        for the producer on a partition accepts *any* first sequence (so that a
        producer whose state expired can go on): if the first batch is refused
        with a retriable error (``NOT_LEADER_OR_FOLLOWER`` from a partition
        still being created or just moved) and the second, already in flight,
        reaches the broker after it recovered, the second is written first and
        the first can never be (``OUT_OF_ORDER_SEQUENCE_NUMBER`` on every retry).
        A real Kafka 4.3 broker did exactly that to a freshly created topic; the
        librdkafka mock does not check sequences and never showed it.
        """
        if self.epoch_bump_required or not self.has_producer_id:
            return True
        entry = self._partitions.get((batch.topic, batch.partition))
        if entry is None:
            return False
        if not batch.has_sequence:
            if entry.last_acked_sequence < 0 and entry.in_flight:
                return True
            return any(b.in_retry for b in entry.in_flight)
        if batch.producer_epoch != self.producer_epoch or batch.producer_id != self.producer_id:
            return True
        return batch.base_sequence != entry.first_in_flight_sequence()

    def assign_sequence(self, batch: ProducerBatch) -> None:
        """Number a batch the first time it is drained, and track it until acknowledged."""
        if batch.has_sequence:
            batch.in_retry = False
            return
        entry = self._entry(batch.topic, batch.partition)
        batch.set_producer_state(self.producer_id, self.producer_epoch, entry.next_sequence)
        entry.next_sequence = _increment(entry.next_sequence, batch.record_count)
        entry.in_flight.append(batch)

    # -- completion -------------------------------------------------------------------
    def on_acknowledged(self, batch: ProducerBatch, base_offset: int) -> None:
        entry = self._partitions.get((batch.topic, batch.partition))
        if entry is None or not batch.has_sequence:
            return
        self._remove(entry, batch)
        if batch.producer_epoch == self.producer_epoch:
            last = _increment(batch.base_sequence, batch.record_count - 1)
            if last > entry.last_acked_sequence or entry.last_acked_sequence - last > MAX_SEQUENCE // 2:
                entry.last_acked_sequence = last
                entry.last_acked_offset = base_offset + batch.record_count - 1 if base_offset >= 0 else -1

    def on_failed(self, batch: ProducerBatch, *, sequence_unresolved: bool) -> None:
        """A numbered batch failed for good. If the broker may have seen it, sequences are unsafe."""
        entry = self._partitions.get((batch.topic, batch.partition))
        if entry is None or not batch.has_sequence:
            return
        self._remove(entry, batch)
        # Later batches were numbered after this one: the broker will see a gap. Only a new
        # epoch (sequence 0 again) makes them acceptable, as in KIP-360.
        if sequence_unresolved or entry.in_flight or entry.next_sequence != _increment(
            batch.base_sequence, batch.record_count
        ):
            self.epoch_bump_required = True
        else:
            entry.next_sequence = batch.base_sequence

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
            piece.set_producer_state(batch.producer_id, batch.producer_epoch, sequence)
            piece.in_retry = True  # new batches of the partition wait until the pieces went out
            sequence = _increment(sequence, piece.record_count)
        try:
            index = entry.in_flight.index(batch)
        except ValueError:
            entry.in_flight.extend(pieces)
            entry.in_flight.sort(key=lambda b: b.base_sequence)
        else:
            entry.in_flight[index : index + 1] = pieces

    def bump_epoch(self) -> None:
        """KIP-360 for an idempotent (non-transactional) producer: epoch + 1, sequences from 0.

        As ``bumpIdempotentProducerEpoch`` in the Java client, no request is
        needed: the broker accepts a higher epoch starting at sequence 0. At the
        highest epoch the producer id is dropped instead, so that the sender asks
        for a new one with InitProducerId.
        """
        if self.producer_epoch >= MAX_EPOCH:
            self.producer_id = -1
            self.producer_epoch = -1
            self.epoch_bump_required = False
            return
        self.set_producer_id_and_epoch(self.producer_id, self.producer_epoch + 1)

    def on_retry(self, batch: ProducerBatch) -> None:
        batch.in_retry = True

    def is_next_in_line(self, batch: ProducerBatch) -> bool:
        """True when ``batch`` directly follows the last acknowledged sequence."""
        entry = self._partitions.get((batch.topic, batch.partition))
        if entry is None:
            return True
        return batch.base_sequence == _increment(entry.last_acked_sequence, 1)

    def request_epoch_bump(self) -> None:
        self.epoch_bump_required = True

    @staticmethod
    def _remove(entry: PartitionSequences, batch: ProducerBatch) -> None:
        try:
            entry.in_flight.remove(batch)
        except ValueError:
            pass

