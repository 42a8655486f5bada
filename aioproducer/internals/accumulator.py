"""RecordAccumulator: per-partition queues of batches between ``send()`` and the Sender.

Theory of operation (Java's ``RecordAccumulator``, in asyncio terms)
--------------------------------------------------------------------
The deques are native (``RecordQueues``, native/src/queues.rs, issue #42 slice 3): one
deque of ``ProducerBatch`` per partition, a partition named by the dense index this class
assigns it on its first record (``TopicInfo.indices``, one dict lookup per ``send()``).
``send()`` appends to the last batch of a deque (one native call); when it has no room, a
new batch is opened with memory reserved from the ``BufferPool``. The sender's scans over
the deques (``ready``, ``drain``, expiry) are one native call each, with the leaders told to
the queues when the metadata snapshot changes (``_sync_leaders``), so they never call back
into Python; every decision (which nodes, when, retries, idempotence) stays here and in the
sender.

One door for a record (Java's ``RecordAccumulator.append``): ``try_append(topic,
partition, ...)`` takes the record's partition, or ``UNKNOWN_PARTITION`` for the
topic's sticky partition (KIP-794): then it peeks the partition, appends and
counts the record's bytes (``BuiltInPartitioner.count_appended``, the one place
of the sticky rule, which may switch the partition), all in one call. It never
waits: None means memory must be waited for, with nothing appended or counted.

Everything runs on one event loop thread, so a synchronous section is already
atomic: the only place that needs care is the one suspension point, waiting
for buffer memory. ``wait_and_append()`` is that wait for a record ``try_append()``
refused (``append()`` is the two in turn, for a caller that has not tried): with the
memory in hand it goes through ``try_append()`` again, which tries the last
batch first (another ``send()`` may have opened one meanwhile; the memory is
then given back) and, for ``UNKNOWN_PARTITION``, peeks the sticky partition
again and counts the record where it went, as Java's loop re-checks after its
wait. No lock is held across that wait. ``send_many()``'s keyless records take
``try_append_run()``: one record through ``try_append()``, the ones after it into
the same batch while its partition is still the sticky one, counted together
by the same rule. ``send_arrow()``'s rows take ``try_append_arrow()``: a run of one
partition's rows per open batch, appended natively, counted per run for the sticky partition.

The sender asks ``ready()`` which leaders have a sendable batch (full, linger
expired, memory exhausted, flush or close in progress, not backing off; or
awaited by someone while its leader has no request in flight, see ``ready()``)
and when to look again, then ``drain()`` takes at most ``max.request.size`` of
batches per node, starting each time one partition later so none starves.
Time is passed in (``now`` in milliseconds) so all of this is tested with a
fake clock.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from types import MethodType
from typing import TYPE_CHECKING, Any, Optional, Protocol

from aioproducer.clock import monotonic_ms
from aioproducer.errors import RecordTooLargeError
from aioproducer.internals.batch import DeliveryCallback, FutureRecordMetadata, ProducerBatch
from aioproducer.internals.buffer_pool import BufferPool
from aioproducer.internals.callbacks import check_on_delivery
from aioproducer.internals.transaction_manager import TransactionManager
from aioproducer.lifecycle import Lifecycle, LifecycleView, State
from aioproducer.logs import LogLike
from aioproducer.partitioner import BuiltInPartitioner, NodeLatencyStats, TopicPartitions
from aioproducer._native import RecordQueues, RequestCounters
from aioproducer._native import estimate_size_in_bytes_upper_bound  # the Python statement in records.py is its test oracle
from aioproducer.protocol.records import MAX_RECORD_OVERHEAD, RecordBatchBuilder

if TYPE_CHECKING:
    from aioproducer._native import ArrowRecords
    from aioproducer.arrow import ArrowDelivery
    from aioproducer.protocol.produce import AnyProduceResponse, PartitionResponse

__all__ = ["RecordAccumulator", "ReadyCheckResult", "LeaderLookup", "UNKNOWN_PARTITION", "effective_batch_size", "monotonic_ms"]

#: Where batches report a raising ``on_delivery`` when no producer hands its own logger (tests, used alone).
_BATCH_LOG = logging.getLogger("aioproducer")

Headers = Sequence[tuple[str, Optional[bytes]]]


class LeaderLookup(Protocol):
    """The part of cluster metadata the accumulator needs."""

    def leader_for(self, topic: str, partition: int) -> int | None: ...

    def partitions_snapshot(self, topic: str) -> TopicPartitions | None: ...


@dataclass
class ReadyCheckResult:
    ready_nodes: set[int]
    next_ready_check_delay_ms: float
    unknown_leader_topics: set[str]


class TopicInfo:
    """A topic's id and partition indices in the native queues, and its KIP-794 partitioner for keyless records."""

    __slots__ = ("topic_id", "indices", "partitioner", "_queues")

    def __init__(self, topic_id: int, partitioner: BuiltInPartitioner, queues: RecordQueues) -> None:
        #: Its id in the queues (``RecordQueues.add_topic``).
        self.topic_id: int = topic_id
        #: partition -> its index in the queues (assigned on the partition's first record).
        self.indices: dict[int, int] = {}
        self.partitioner: BuiltInPartitioner = partitioner
        self._queues: RecordQueues = queues

    @property
    def batches(self) -> dict[int, list[ProducerBatch]]:
        """Each partition's queued batches, oldest first: a copy (tests, reports; the sender's scans are native)."""
        return {partition: self._queues.batches(index) for partition, index in self.indices.items()}


@dataclass
class AccumulatorConfig:
    batch_size: int = 16384
    linger_ms: float = 0
    compression_type: int = 0
    compression_level: int | None = None
    retry_backoff_ms: float = 100
    retry_backoff_max_ms: float = 1000
    delivery_timeout_ms: float = 120000
    guarantee_message_order: bool = False
    adaptive_partitioning: bool = True
    availability_timeout_ms: int = 0
    max_request_size: int = 1 << 20


#: ±20 %: the random spread of each retry backoff (KIP-580; Java's ``ExponentialBackoff`` jitter 0.2).
RETRY_BACKOFF_JITTER = 0.2

#: Java's ``RecordMetadata.UNKNOWN_PARTITION``: ``try_append``/``append`` choose the sticky partition (KIP-794).
UNKNOWN_PARTITION = -1

#: ``try_append``'s default ``partitions``: none known, enough for a record whose partition is given.
NO_PARTITIONS = TopicPartitions(0, ())

#: ``RecordAccumulator.try_append_keyed``: ``(partitions_by_topic, topic, value, key, headers, partition,
#: timestamp_ms, on_delivery)``, ``send()``'s arguments as given (so typed ``Any``), to the future or None.
KeyedLane = Callable[
    [dict[str, TopicPartitions], Any, Any, Any, Any, Any, Any, DeliveryCallback | None], FutureRecordMetadata | None
]


def ensure_valid_record_size(size: int, max_request_size: int, buffer_memory: int) -> None:
    """Refuse a record whose upper-bound size exceeds ``max.request.size`` or ``buffer.memory``."""
    if size > max_request_size:
        raise RecordTooLargeError(
            f"the record is {size} bytes when serialized, larger than max.request.size={max_request_size}"
        )
    if size > buffer_memory:
        raise RecordTooLargeError(f"the record is {size} bytes when serialized, larger than buffer.memory={buffer_memory}")


def effective_batch_size(batch_size: int, max_record_size: int) -> int:
    """``batch.size``, lowered so that a batch never outgrows the largest record allowed.

    ``max_record_size`` is ``min(max.request.size, buffer.memory)``. A record appended to an
    open batch fits that batch, so its exact size is at most this less the batch header; its
    Java upper bound (``estimateSizeInBytesUpperBound``: the batch header, worst-case framing
    and its key, value and headers) is then at most ``max_record_size`` as well. Every other
    record opens a batch and is checked by ``RecordAccumulator._reservation_size``. So no
    record needs a size check of its own in ``send()``, whatever ``batch.size`` is; a batch
    of Java's could grow past ``max.request.size`` and be split after the broker refused it.
    """
    return min(batch_size, max_record_size - MAX_RECORD_OVERHEAD)


class RecordAccumulator:
    """Queues batches per partition; see the module docstring."""

    def __init__(
        self,
        config: AccumulatorConfig,
        pool: BufferPool,
        transaction_manager: TransactionManager | None,
        wakeup: Callable[[], None],
        clock: Callable[[], float] = monotonic_ms,
        rng: random.Random | None = None,
        lifecycle: LifecycleView | None = None,
        log: LogLike = _BATCH_LOG,
    ) -> None:
        #: Handed to each batch: where a raising ``on_delivery`` is reported (the producer's, naming its client.id).
        self.log = log
        # batch.size as batches here use it: never past the largest record allowed (see effective_batch_size).
        self.config: AccumulatorConfig = replace(config, batch_size=effective_batch_size(config.batch_size, min(config.max_request_size, pool.total)))
        self.pool = pool
        self.transaction_manager = transaction_manager
        self._wakeup = wakeup
        self._clock = clock
        self._rng = rng or random.Random()
        self._topics: dict[str, TopicInfo] = {}
        #: The partitions' deques and the scans over them (native/src/queues.rs): a pass costs in
        #: proportion to topics with data (a topic is active from its first queued batch until
        #: ``ready()`` finds its deques empty), one native call per scan, none per batch.
        self._queues = RecordQueues()
        #: The door's lane for the commonest record, ``try_append_keyed(partitions_by_topic, topic,
        #: value, key, headers, partition, timestamp_ms, on_delivery)``: ``send()``'s arguments as
        #: given, with the intake's metadata snapshots. A ``bytes`` key and value, nothing else given,
        #: are appended to the key's partition's open batch in one native call, without this class's
        #: Python frame (``RecordQueues.try_append_keyed``), or, once ``_arm_lane`` armed it, into a
        #: new batch opened as ``_open_batch`` opens one. It takes only a topic and partition the
        #: door has seen and an ``on_delivery`` the door has checked (the last new batch's), and
        #: returns None for anything else: the caller then goes through ``try_append``.
        #: ``send()`` calls it first, through ``RecordIntake.keyed_lane``.
        self.try_append_keyed: KeyedLane = self._queues.try_append_keyed
        #: Topic id -> its TopicInfo; partition index -> (topic, partition): what Python assigned.
        self._topic_list: list[TopicInfo] = []
        self._keys: list[tuple[str, int]] = []
        #: The metadata snapshot whose leaders the queues were last told (see ``_sync_leaders``).
        self._leaders_of: object = None
        #: When each broker was last seen ready and last drainable; written by update_node_latency only.
        self.node_stats: NodeLatencyStats = NodeLatencyStats(config.availability_timeout_ms)
        self._incomplete: set[ProducerBatch] = set()
        self._flushes_in_progress = 0
        self._appends_in_progress = 0
        #: The producer's lifecycle (read only here): appends are refused once it stops accepting.
        self.lifecycle: LifecycleView = lifecycle if lifecycle is not None else Lifecycle(State.RUNNING)
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The last on_delivery that check_on_delivery() accepted: one identity test per record after it.
        self._on_delivery_ok: object = None

    # ================================================================ append (hot path)
    def topic_info(self, topic: str) -> TopicInfo:
        """The topic's deques and partitioner, made on its first record."""
        info = self._topics.get(topic)
        if info is None:
            partitioner = BuiltInPartitioner(topic, max(1, self.config.batch_size), self._rng)
            info = self._topics[topic] = TopicInfo(self._queues.add_topic(topic), partitioner, self._queues)
            self._topic_list.append(info)
        return info

    def _index(self, info: TopicInfo, topic: str, partition: int) -> int:
        """The partition's index in the queues, assigned on its first record."""
        index = info.indices.get(partition)
        if index is None:
            index = info.indices[partition] = self._queues.add_partition(info.topic_id, partition)
            self._keys.append((topic, partition))
        return index

    def try_append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        on_delivery: DeliveryCallback | None,
        partitions: TopicPartitions = NO_PARTITIONS,
        reserved: int = 0,  # positional: a keyword-only parameter keeps CPython 3.11 from specializing the call
    ) -> FutureRecordMetadata | None:
        """The one door for a record: append to its partition's open batch, or to a new one if memory is free now.

        ``partition`` is the record's partition, or ``UNKNOWN_PARTITION`` for the topic's
        sticky partition (KIP-794), chosen from ``partitions`` (needed then: with the default,
        no partitions, the first peek raises ``ValueError``). Peek, append
        and count in one synchronous call (``BuiltInPartitioner.count_appended``), so the
        partition peeked is still current when the bytes are counted and may switch. Java's
        ``RecordAccumulator.append`` without its wait: None when memory must be waited for,
        with nothing appended or counted; then call ``wait_and_append()``, which comes back here.
        ``reserved`` is memory ``wait_and_append()`` already took for this record: used for the new
        batch, or given back if an open batch takes the record. Raises ``TypeError`` for an
        ``on_delivery`` that cannot be called as ``on_delivery(metadata, error)``, before the
        record is queued.
        """
        if on_delivery is not None and on_delivery is not self._on_delivery_ok:
            # A bound method is a new object per access, equal to the last only when it is the same method.
            if type(on_delivery) is not MethodType or on_delivery != self._on_delivery_ok:
                self._on_delivery_ok = check_on_delivery(on_delivery)
        info = self._topics.get(topic)
        if info is None:
            info = self.topic_info(topic)
        if partition >= 0:
            index = info.indices.get(partition)
            if index is None:
                index = self._index(info, topic, partition)
            # No wake-up per record: opening the next batch wakes the sender, and a full batch
            # that nothing follows is sent at its linger deadline (ready() treats it as full).
            future = self._queues.try_append(index, timestamp, key, value, headers, on_delivery)
            if future is not None:
                if reserved:
                    self.pool.deallocate(reserved)  # someone opened a batch while wait_and_append() waited
                return future
            return self._open_batch(topic, partition, index, timestamp, key, value, headers, on_delivery, reserved)
        # UNKNOWN_PARTITION: the sticky partition (KIP-794), peeked, appended to and counted here only.
        partitioner = info.partitioner
        sticky = partitioner.peek_current_partition(partitions)
        partition = sticky.partition
        index = self._index(info, topic, partition)
        future = self._queues.try_append(index, timestamp, key, value, headers, on_delivery)
        if future is None:
            future = self._open_batch(topic, partition, index, timestamp, key, value, headers, on_delivery, reserved)
            if future is None:
                return None  # nothing appended, nothing counted
        elif reserved:
            self.pool.deallocate(reserved)  # someone opened a batch while wait_and_append() waited
        partitioner.count_appended(
            sticky, (len(key) if key is not None else 0) + (len(value) if value is not None else 0), 1, partitions, future._batch
        )
        return future

    def _open_batch(
        self,
        topic: str,
        partition: int,
        index: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        on_delivery: DeliveryCallback | None,
        reserved: int,
    ) -> FutureRecordMetadata | None:
        """``try_append`` when the partition's open batch (if any) refused the record: a new batch.

        Its memory is ``reserved`` (what ``append()`` waited for) or taken now; None when
        there is none free now. A 10 KB record opens a batch of its own, so this runs per
        record there: its steps are the same helpers ``append()``'s wait and ``send_arrow()``
        use (``_reservation_size``, ``_check_accepting``, ``_queued``). Their three calls cost
        about 1,000 instructions a record against the inlined form (callgrind, keyed 10 KB
        records each opening a batch: 29,900 → 30,900 per ``try_append``; the loop spends about
        120,000 per record in all): one rule each, kept in one place, is worth that. The pool is
        written through its own methods only (``charge``, ``try_allocate``, ``deallocate``): it
        stays its counters' one writer.
        """
        size = self._reservation_size(key, value, headers)  # raises if the record can never be sent
        queues = self._queues
        charge = queues.settle_last(index)  # it refused a record: it will not grow any more
        pool = self.pool
        if charge:
            pool.charge(charge)
        if reserved:
            size = reserved
        elif not pool.try_allocate(size):
            return None
        self._check_accepting(size)
        loop = self._loop
        if loop is None:
            loop = self._event_loop()
        future, batch = queues.open_batch(
            index, self.config, self._clock(), size, loop, self.log, timestamp, key, value, headers, on_delivery
        )
        self._queued(topic, partition, batch)
        return future

    async def append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        on_delivery: DeliveryCallback | None,
        max_block_ms: float,
        partitions: TopicPartitions = NO_PARTITIONS,
    ) -> FutureRecordMetadata:
        """``try_append()``, waiting up to ``max_block_ms`` for buffer memory when it must.

        After the wait, with the memory in hand, the record goes through ``try_append`` again:
        another ``send()`` may have opened a batch meanwhile (the memory is then given back),
        and for ``UNKNOWN_PARTITION`` the sticky partition is peeked again and the record
        counted there, as Java's loop re-checks after its wait. No lock is held across it.
        """
        future = self.try_append(topic, partition, timestamp, key, value, headers, on_delivery, partitions)
        if future is not None:
            return future
        return await self.wait_and_append(topic, partition, timestamp, key, value, headers, on_delivery, max_block_ms, partitions)

    async def wait_and_append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        on_delivery: DeliveryCallback | None,
        max_block_ms: float,
        partitions: TopicPartitions = NO_PARTITIONS,
    ) -> FutureRecordMetadata:
        """:meth:`append` for a record ``try_append`` just refused: the wait for memory, then the append.

        The callers that tried first (``send()``'s routes) come here, not to ``append``, which
        would try again in vain: at 10 KB records one send in 12-14 waits for memory in the
        peers' worker, and each refused try is six Python calls.
        """
        size = self._reservation_size(key, value, headers)
        await self._wait_for_memory(size, max_block_ms)
        future = self.try_append(topic, partition, timestamp, key, value, headers, on_delivery, partitions, size)
        assert future is not None  # with memory reserved, a new batch is always possible
        return future

    async def _wait_for_memory(self, size: int, max_block_ms: float) -> None:
        """Take ``size`` bytes of ``buffer.memory``, waiting up to ``max_block_ms`` (``append`` and ``append_arrow``)."""
        self._appends_in_progress += 1
        self._wakeup()  # memory is exhausted: the sender should drain rather than linger
        try:
            await self.pool.allocate(size, max_block_ms)
        finally:
            self._appends_in_progress -= 1

    def try_append_run(
        self,
        topic: str,
        partitions: TopicPartitions,
        timestamp: int,
        values: Sequence[Any],
        start: int,
        on_delivery: DeliveryCallback | None,
        out: list[FutureRecordMetadata],
    ) -> int:
        """``send_many()``'s bulk fill: keyless ``bytes`` values from ``values[start]`` on, to the sticky partition.

        The first record goes through ``try_append`` (peek, append, count, maybe switch);
        while its batch's partition is still the sticky one, the records after it fill that
        batch through ``ProducerBatch.try_append_many`` alone, and are counted together by the
        same rule (``BuiltInPartitioner.count_appended``). Futures go to ``out``. Returns the
        index of the first value not appended: ``start`` itself when that value is not
        ``bytes`` or memory must be waited for (the caller then sends it the general way).
        """
        value = values[start]
        if type(value) is not bytes:
            return start
        future = self.try_append(topic, UNKNOWN_PARTITION, timestamp, None, value, None, on_delivery, partitions, 0)
        if future is None:
            return start
        out.append(future)
        start += 1
        batch: ProducerBatch = future._batch
        partitioner = self._topics[topic].partitioner
        sticky = partitioner.peek_current_partition(partitions)
        if sticky.partition != batch.partition:
            return start  # the first record switched it: the next run starts a batch there
        stop = batch.try_append_many(timestamp, values, start, on_delivery, out)
        if stop > start:
            partitioner.count_appended(sticky, sum(map(len, values[start:stop])), stop - start, partitions, batch)
        return stop

    def settle(self, batch: ProducerBatch) -> None:
        """Charge what a batch holds beyond its reservation to the pool, once it stops growing.

        A batch reserves ``batch.size`` when it opens; its records' futures and callbacks
        (``ProducerBatch.object_bytes``) and any bytes past the reservation are charged
        here, when a fuller batch replaces it or the sender drains it. Until then they
        are the fixed overhead of one open batch per partition.
        """
        extra = batch.settle()  # 0 once settled
        if extra > 0:
            self.pool.charge(extra)

    def _reservation_size(self, key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
        """What a new batch for this record reserves: ``batch.size``, or more for a larger record.

        Also where a record that can never be sent is refused (Java's ``ensureValidRecordSize``):
        every record that does not fit the open batch comes here before it takes memory. Only a
        record larger than ``batch.size`` is checked: one within it is within every limit (see
        ``effective_batch_size``), and so is one that fits an open batch, so ``send()`` checks no
        record itself.
        """
        batch_size = self.config.batch_size
        upper = estimate_size_in_bytes_upper_bound(key, value, headers)
        if upper <= batch_size:
            return batch_size
        ensure_valid_record_size(upper, self.config.max_request_size, self.pool.total)
        return upper

    def _new_batch(self, topic: str, partition: int, index: int, reserved: int) -> ProducerBatch:
        """An empty batch holding ``reserved`` bytes of memory, to be queued once it has its first rows (``send_arrow()``)."""
        self._check_accepting(reserved)
        return self._queues.new_batch(index, self.config, self._clock(), reserved, self._event_loop(), self.log)

    def _check_accepting(self, reserved: int) -> None:
        """Every new batch, of ``send()`` or of ``send_arrow()``, is refused (the memory given back) once the producer no longer accepts records."""
        if not self.lifecycle.accepting:
            self.pool.deallocate(reserved)
            raise self.lifecycle.refused()

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """The loop the batches complete on: the running one, taken at the first batch."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
            self._arm_lane(loop)
        return loop

    def _arm_lane(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let the keyed lane open batches too (``RecordQueues.set_lane``), as ``_open_batch`` does.

        It takes the same steps with this accumulator's own objects: the pool's memory through
        its figures (``BufferPool.budget``, the pool's rules), the lifecycle read, the incomplete set, the wake-up. Not for a transactional
        producer: a new batch's partition joins the transaction first (``_queued``), in Python.
        """
        tm = self.transaction_manager
        if tm is not None and tm.transactional_id is not None:
            return
        self._queues.set_lane(
            self.pool.budget, self.lifecycle, self.config, self.config.batch_size, self._clock, loop, self.log,
            self._incomplete, self._wakeup,
        )

    def _queue_new_batch(self, topic: str, partition: int, index: int, batch: ProducerBatch) -> None:
        """Queue a new batch as its partition's open one, and wake the sender."""
        self._queues.append(index, batch)
        self._queued(topic, partition, batch)

    def _queued(self, topic: str, partition: int, batch: ProducerBatch) -> None:
        """A new batch is its partition's open one: track it, tell a transaction, wake the sender."""
        self._incomplete.add(batch)
        tm = self.transaction_manager
        if tm is not None and tm.transactional_id is not None:
            tm.maybe_add_partition(topic, partition)  # the coordinator must know it before the batch goes
        self._wakeup()

    # ================================================================ send_arrow (bulk, native rows)
    def try_append_arrow(
        self,
        topic: str,
        partition: int,
        records: ArrowRecords,
        start: int,
        stop: int,
        delivery: ArrowDelivery,
        partitions: TopicPartitions,
        reserved: int = 0,
    ) -> int:
        """``send_arrow()``'s door: the planned rows ``start:stop`` of one partition (or the sticky one) into batches.

        Each open batch is filled by one native call (``ProducerBatch.try_append_arrow``) until it
        is full; then the next is opened with memory reserved as ``try_append`` reserves it (the
        row's ``reservation``: ``batch.size`` or its upper bound), so Python runs per batch, not
        per row. For ``UNKNOWN_PARTITION`` each run goes to the sticky partition peeked for it and
        is counted there by the one sticky rule (``BuiltInPartitioner.count_appended``), which
        may switch the partition for the next run. Rows stay in their planned order, which is
        their order in the data for each partition. Returns the position of the first row not
        appended: ``stop``, or less when memory must be waited for (``append_arrow``).
        ``reserved`` is memory already taken for the row at ``start``: used for its new batch,
        or given back.
        """
        info = self._topics.get(topic)
        if info is None:
            info = self.topic_info(topic)
        partitioner = info.partitioner
        sticky = None
        while start < stop:
            if partition >= 0:
                target = partition
            else:
                sticky = partitioner.peek_current_partition(partitions)
                target = sticky.partition
            index = self._index(info, topic, target)
            batch = self._queues.last(index)
            count = batch.try_append_arrow(records, start, stop, delivery) if batch is not None else 0
            if batch is not None and count:
                if reserved:
                    self.pool.deallocate(reserved)  # someone opened a batch while append_arrow() waited
                    reserved = 0
            else:
                if batch is not None:
                    self.settle(batch)  # it refused a row: it will not grow any more
                batch = self._open_arrow_batch(info, topic, target, index, records, start, stop, delivery, reserved)
                if batch is None:
                    return start  # memory must be waited for
                reserved = 0
                count = batch.arrow_records
            if sticky is not None:
                partitioner.count_appended(sticky, records.payload_bytes(start, start + count), count, partitions, batch)
            start += count
        if reserved:
            self.pool.deallocate(reserved)
        return start

    def _open_arrow_batch(
        self,
        info: TopicInfo,
        topic: str,
        partition: int,
        index: int,
        records: ArrowRecords,
        start: int,
        stop: int,
        delivery: ArrowDelivery,
        reserved: int,
    ) -> ProducerBatch | None:
        """A new batch for ``partition`` filled from row ``start``, with ``reserved`` or newly taken memory; None without."""
        size = reserved or records.reservation(start, self.config.batch_size)
        if not reserved and not self.pool.try_allocate(size):
            return None
        batch = self._new_batch(topic, partition, index, size)
        if not batch.try_append_arrow(records, start, stop, delivery):  # impossible: an empty builder has room
            raise AssertionError("a new batch refused its first row")
        self._queue_new_batch(topic, partition, index, batch)
        return batch

    async def append_arrow(
        self,
        topic: str,
        partition: int,
        records: ArrowRecords,
        start: int,
        stop: int,
        delivery: ArrowDelivery,
        partitions: TopicPartitions,
        max_block_ms: float,
    ) -> int:
        """``try_append_arrow()`` after waiting up to ``max_block_ms`` for the next batch's memory, as ``append()`` waits.

        Returns the position of the first row not appended (``start`` once more memory is needed).
        """
        size = records.reservation(start, self.config.batch_size)
        await self._wait_for_memory(size, max_block_ms)
        return self.try_append_arrow(topic, partition, records, start, stop, delivery, partitions, size)

    # ================================================================ sender side
    def ready(
        self, metadata: LeaderLookup, now: float, node_idle: Callable[[int], bool] | None = None
    ) -> ReadyCheckResult:
        """Which leaders have something to send now, and how long until one might.

        Java's rule (full, linger expired, memory exhausted, flush or close), and one of
        aioproducer's: a batch that someone awaits (``await future``, or a done-callback:
        ``gather()``) is sendable before its linger when ``node_idle(leader)`` says its
        leader's connection has nothing in flight. Lingering then would leave the
        connection unused while a caller waits: in the request/acknowledge pattern (a web
        service awaiting each request's record) every record is awaited, so each wave of
        records went out only ``linger.ms`` after the acknowledgement that freed its callers.
        Records still batch while a request is in flight, and records nobody awaits yet
        (fire-and-forget, callbacks, ``flush()`` later) linger exactly as in Java.
        """
        config = self.config
        force = self.force_drain()
        self._sync_leaders(metadata)
        queues = self._queues
        if config.adaptive_partitioning:
            topics = self._topic_list
            for topic_id in queues.active_topics():
                self._update_load_stats(topics[topic_id], metadata)
        ready_nodes, next_delay, unknown, awaited, idle = queues.ready(
            now, config.linger_ms, config.batch_size, force, node_idle is not None
        )
        if awaited:
            assert node_idle is not None
            for i in range(0, len(awaited), 2):
                node = int(awaited[i])
                if node in ready_nodes:
                    continue
                if node_idle(node):
                    ready_nodes.add(node)  # awaited, and its leader's connection is idle (see above)
                else:
                    next_delay = min(next_delay, max(0.0, awaited[i + 1]))
        for topic_id in idle:  # found empty by the same scan: no queues, no skew
            self._topic_list[topic_id].partitioner.update_partition_load_stats(None, None, 0)
        return ReadyCheckResult(ready_nodes, next_delay, unknown)

    def force_drain(self) -> bool:
        """Whether every queued batch may go now, full or not: memory is exhausted, or a flush or a close waits (Java's rule)."""
        return (
            self.pool.exhausted() or self._appends_in_progress > 0 or not self.lifecycle.accepting
            or self._flushes_in_progress > 0
        )

    def _sync_leaders(self, metadata: LeaderLookup) -> None:
        """Tell the queues each partition's leader, so that the scans never ask Python.

        A ``ClusterMetadata`` snapshot never changes its leaders (``LEADERS_FIXED``): under the
        same snapshot only partitions not told yet are asked for (none, on most passes). Any
        other ``LeaderLookup`` (tests' fakes) is asked again on every pass, for the active topics.
        """
        queues = self._queues
        if metadata is not self._leaders_of or not getattr(metadata, "LEADERS_FIXED", False):
            self._leaders_of = metadata
            indices = queues.new_generation()
        else:
            indices = queues.take_unsynced()
        if indices:
            keys = self._keys
            queues.set_leaders(indices, [metadata.leader_for(*keys[index]) for index in indices])

    def _update_load_stats(self, info: TopicInfo, metadata: LeaderLookup) -> None:
        """Adaptive partitioning (KIP-794): weight keyless records towards short queues.

        As in Java, only once every partition of the topic has a queue; leaderless partitions and
        those whose leader was not drainable for ``partitioner.availability.timeout.ms`` are out.
        """
        if not self.config.adaptive_partitioning or not info.partitioner.in_use:
            return  # a topic of keyed records only: no keyless record would use the statistics
        topic = info.partitioner.topic
        partitions = metadata.partitions_snapshot(topic)
        if partitions is None:
            return
        if len(info.indices) < partitions.num_partitions:
            info.partitioner.update_partition_load_stats(None, None, 0)
            return
        queues = [(p, metadata.leader_for(topic, p), n) for p, n in self._queues.queue_lengths(info.topic_id)]
        info.partitioner.update_load_stats_from_queues(queues, self.node_stats)

    def update_node_latency(self, node: int, now: float, can_drain: bool) -> None:
        """The sender saw ``node`` ready, able to take a request or not (Java's ``updateNodeLatencyStats``).

        Feeds ``partitioner.availability.timeout.ms``: the statistics stay the accumulator's own.
        """
        self.node_stats.update(node, int(now), can_drain)

    def retry_backoff(self, attempts: int) -> float:
        """Exponential backoff (KIP-580) before jitter: retry.backoff.ms doubling per attempt, capped.

        ``retry.backoff.ms`` above ``retry.backoff.max.ms`` gives a static backoff of the max
        from the first retry on, as the config warning says (and Java's ``ExponentialBackoff``).
        """
        base = self.config.retry_backoff_ms
        cap = self.config.retry_backoff_max_ms
        if attempts <= 1:
            return float(min(base, cap))
        # The exponent is capped before the power: 2.0 ** 1024 overflows (OverflowError), and a
        # broker refusing for a while with a short backoff reaches that many attempts in seconds.
        return float(min(cap, base * 2.0 ** min(attempts - 1, 62)))

    def jittered_retry_backoff(self, attempts: int) -> float:
        """``retry_backoff(attempts)`` times a random factor in [0.8, 1.2], never above the max (KIP-580).

        The jitter spreads the retries of producers that failed together (a leader
        moved) so they do not come back in one burst. As in Java, a static backoff
        (the max not above ``retry.backoff.ms``) gets none. Drawn once per attempt by
        the caller and stored on the batch: ``ready()`` and ``drain()`` must agree on it.
        """
        config = self.config
        term = self.retry_backoff(attempts)
        if config.retry_backoff_max_ms <= config.retry_backoff_ms:
            return term
        factor = self._rng.uniform(1.0 - RETRY_BACKOFF_JITTER, 1.0 + RETRY_BACKOFF_JITTER)
        return float(min(config.retry_backoff_max_ms, term * factor))

    def drain(
        self,
        metadata: LeaderLookup,
        nodes: Iterable[int],
        max_size: int,
        now: float,
    ) -> dict[int, list[ProducerBatch]]:
        """Take up to ``max_size`` bytes of batches per node, one batch per partition.

        One native call per node (``RecordQueues.drain``): the rotation, the muted partitions,
        the backoff, the size limit, each batch settled (the bytes charged to the pool once for
        the request) and marked drained. With idempotence the transaction manager decides which
        partitions' first batches may go (``drainable``) and numbers the batches taken
        (``assign_sequences``): one call each per request.
        """
        self._sync_leaders(metadata)
        queues = self._queues
        tm = self.transaction_manager
        order = self.config.guarantee_message_order
        drained: dict[int, list[ProducerBatch]] = {}
        for node in nodes:
            taken = queues.drain(node, max_size, now, tm, order)
            if taken is not None:
                batches, charge = taken
                if charge:
                    self.pool.charge(charge)
                drained[node] = batches
        return drained

    def drain_next(self, node: int, max_size: int, now: float, force: bool) -> tuple[list[ProducerBatch] | None, float]:
        """The pass's next request to ``node``, right after ``drain()`` gave it one: ``(batches, inf)``, or ``(None, ms)``.

        The node's batches are taken as ``drain()`` takes them if it is still ready by
        ``ready()``'s rule for it alone (a first batch of one of its partitions may go now);
        else None, with how long until one may. Its leaders are the ones ``drain()`` just
        synced (the same pass and metadata). Not for an idle node: ``ready()``'s rule for
        awaited batches needs the whole scan. ``force`` is ``force_drain()``, read once a pass:
        nothing in a pass's synchronous run changes it.
        """
        config = self.config
        taken, charge, delay = self._queues.drain_next(
            node, max_size, now, self.transaction_manager, config.guarantee_message_order, config.linger_ms,
            config.batch_size, force,
        )
        if charge:
            self.pool.charge(charge)
        return taken, delay

    def expired_batches(self, now: float) -> list[ProducerBatch]:
        """Pop queued batches past ``delivery.timeout.ms`` (in-flight ones are the sender's)."""
        return self._queues.expired(now)

    def next_expiry_delay(self, now: float) -> float:
        """Milliseconds until the first queued batch reaches its delivery deadline (the oldest of each partition's)."""
        return self._queues.next_expiry_delay(now)

    def reenqueue(self, batch: ProducerBatch, now: float) -> None:
        """Put a batch that will be retried back at the front, in sequence order when numbered."""
        batch.reenqueued(now, self.jittered_retry_backoff(batch.attempts + 1))
        self._insert_retry(batch)

    def _insert_retry(self, batch: ProducerBatch) -> None:
        """Retries go before new batches and, when numbered, among themselves by sequence (natively)."""
        topic = batch.topic
        self._queues.insert_retry(self._index(self.topic_info(topic), topic, batch.partition), batch)

    def split_and_reenqueue(self, batch: ProducerBatch, now: float) -> int:
        """Split a batch the broker found too large into pieces re-queued in order; returns how many.

        A batch over ``batch.size`` is split into ``batch.size`` pieces, as in Java. One
        within ``batch.size`` (the topic's ``max.message.bytes`` is below it) is halved:
        Java's split would give the same batch back and resend it in a loop. So every
        split makes progress, and repeated MESSAGE_TOO_LARGE answers end at single
        records, which the sender fails with the sizes named.
        """
        config = self.config
        size = batch.estimated_size()
        target = config.batch_size if size > config.batch_size else max(1, size // 2)
        pieces = batch.split(target)
        # The parent's reservation is shared out, so that each piece holds what its records
        # weigh until it completes (the last takes the rest): memory is released piece by
        # piece, never while records that were counted in it are still queued.
        remaining = batch.release_reservation()
        for piece in pieces[:-1]:
            share = min(remaining, piece.builder.uncompressed_size_in_bytes + piece.object_bytes())
            piece.take_reservation(share)  # settled: the parent's charge covers it
            remaining -= share
        pieces[-1].take_reservation(remaining)
        if self.transaction_manager is not None and batch.has_sequence:
            # The pieces take over the parent's sequence range, so batches numbered after it
            # (maybe in flight already) stay valid, as ``ProducerBatch.split`` in Java.
            self.transaction_manager.on_split(batch, pieces)
        for piece in pieces:
            # Closed for appends (building closes the builder): a piece's sequence range is fixed,
            # and a record added to the last one would overlap the next batch's numbers.
            piece.records()
        backoff = self.jittered_retry_backoff(batch.attempts) if batch.attempts > 0 else 0.0
        for piece in reversed(pieces):
            piece.reenqueued_piece(batch.attempts, now, backoff)
            self._insert_retry(piece)
            self._incomplete.add(piece)
        self._incomplete.discard(batch)
        # Not done: it completes with its last piece, for the futures it did not move (see split()).
        batch.wake_waiters()  # awaiters of moved records follow them to the pieces
        batch.release()
        return len(pieces)

    def complete(
        self, batches: list[ProducerBatch], response: AnyProduceResponse, now: float, duplicate_code: int,
        *, per_batch: bool = False, counters: RequestCounters | None = None,
    ) -> tuple[list[tuple[ProducerBatch, PartitionResponse | None]], int, bool]:
        """A Produce response's batches that the broker wrote, completed in one native call (``native/src/complete.rs``).

        ``response`` is the connection's :class:`~aioproducer.protocol.produce.ProduceAnswer`,
        whose partitions are read natively, or a ``ProduceResponse`` of named tuples (a test's).

        Each is completed (its futures, ``on_delivery``, done-callbacks, awaiters), its partition
        unmuted, its memory freed (one ``deallocate`` for the response, after the callbacks) and
        forgotten; the transaction manager told first (``on_acknowledged_all``). Returns the
        partitions that need a decision (``(batch, answer)``, or ``(batch, None)`` when not
        answered), the records acknowledged, and whether the metrics should fold: the records
        acknowledged, per topic, and their delivery latencies went into ``counters`` (the
        metrics'). With ``per_batch`` nothing is completed: every answered batch comes back with
        its answer (the caller completes each).
        """
        decisions, freed, records, fold_due = self._queues.complete(
            batches, response, now, duplicate_code, self.transaction_manager, self._incomplete, per_batch, counters
        )
        if freed:
            self.pool.deallocate(freed)
        return decisions, records, fold_due

    def complete_all(
        self, requests: list[list[ProducerBatch]], responses: Sequence[AnyProduceResponse], now: float,
        duplicate_code: int, counters: RequestCounters | None = None,
    ) -> tuple[list[tuple[ProducerBatch, PartitionResponse | None, AnyProduceResponse]], int, bool, list[Exception]]:
        """:meth:`complete` for the answers of one read together: one native call, one ``deallocate``.

        Each request's batches are matched and completed as :meth:`complete` does; the decisions
        come back as ``(batch, answer, response)`` in the responses' order, the records and the
        fold summed, and what a completion raised (a bug) in the last list, the others completed.
        """
        decisions, freed, records, fold_due, errors = self._queues.complete_all(
            requests, responses, now, duplicate_code, self.transaction_manager, self._incomplete, counters
        )
        if freed:
            self.pool.deallocate(freed)
        return decisions, records, fold_due, errors

    def deallocate(self, batch: ProducerBatch) -> None:
        """A batch finished: release its memory and forget it."""
        self._incomplete.discard(batch)
        reserved = batch.release_reservation()
        if reserved:
            self.pool.deallocate(reserved)

    def unmute(self, topic: str, partition: int) -> None:
        info = self._topics.get(topic)
        index = None if info is None else info.indices.get(partition)
        if index is not None:
            self._queues.unmute(index)

    def remove_open_batch(self, batch: ProducerBatch) -> bool:
        """Take ``batch`` out of its deque if it is the partition's open one (the fake producer's drain)."""
        info = self._topics.get(batch.topic)
        index = None if info is None else info.indices.get(batch.partition)
        return index is not None and self._queues.remove_open(index, batch)

    # ================================================================ flush and close
    def has_undrained(self) -> bool:
        return self._queues.has_undrained()

    def incomplete_batches(self) -> list[ProducerBatch]:
        return list(self._incomplete)

    def begin_flush(self) -> None:
        self._flushes_in_progress += 1
        self._wakeup()

    def end_flush(self) -> None:
        self._flushes_in_progress -= 1

    async def await_flush_completion(self, since_ms: float) -> None:
        """Wait until every batch opened before ``since_ms`` (and what it was split into) is done."""
        while True:
            pending = [b for b in self._incomplete if b.created_ms <= since_ms and not b.is_done]
            if not pending:
                return
            for batch in pending:
                while not batch.is_done:
                    await batch.add_waiter()

    def abort_undrained(self) -> list[ProducerBatch]:
        """Pop every queued batch (for a forced close); the caller fails them."""
        return self._queues.abort_all()
