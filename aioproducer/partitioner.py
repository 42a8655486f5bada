"""Choosing a partition: Java-exact key hashing and the KIP-794 sticky/adaptive choice.

Theory of operation
-------------------
A record that names its partition goes there. Otherwise, as in the Java producer
(Kafka 3.3+, KIP-794), in this order:

1. A custom partitioner (``partitioner.class``) decides, see :func:`resolve_partitioner`;
   its answer is checked with :func:`check_partition`.
2. A record with a key (and ``partitioner.ignore.keys=false``) goes to
   ``to_positive(murmur2(key_bytes)) % num_partitions`` (:func:`partition_for_key`). This must be
   bit-for-bit the Java formula: every Kafka client that co-partitions with Java producers (Kafka
   Streams, librdkafka's ``murmur2_random``, franz-go's ``KafkaHasher``) relies on it.
3. A record without a key goes to the topic's *sticky* partition, owned by a
   :class:`BuiltInPartitioner` (one per topic). The sticky partition changes only once
   ``batch.size`` bytes were appended to it, so unkeyed records fill whole batches instead of
   spreading one record per partition. With ``partitioner.adaptive.partitioning.enable`` the next
   sticky partition is drawn with probability weighted towards *short* queues (a broker that
   drains slowly accumulates batches, so it gets fewer new ones), and with
   ``partitioner.availability.timeout.ms > 0`` partitions whose leader has not been drainable for
   that long are left out of the draw (:class:`NodeLatencyStats`).

Everything here is sans-I/O and synchronous: no clock is read (times are passed in), randomness
comes from an injected :class:`random.Random`, so tests are deterministic and need no sleeps.

How the RecordAccumulator uses :class:`BuiltInPartitioner` (Java's ``RecordAccumulator.append``),
in one place, ``RecordAccumulator.try_append`` with ``UNKNOWN_PARTITION``::

    info = bip.peek_current_partition(partitions)       # 1. which partition to append to
    ... append to info.partition's deque (never across an await: a record that waited for
    ... buffer memory comes back through try_append and peeks again, as Java's loop does)
    bip.count_appended(info, key_and_value_bytes, 1, partitions, batch)   # 2. count, maybe switch

and in ``ready()`` (sender side), per topic, after looking at every partition's deque::

    bip.update_partition_load_stats(queue_sizes, partition_ids, length)
    # or, with the availability rule applied for you:
    bip.update_load_stats_from_queues(queues, node_stats)
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from aioproducer._native import murmur2 as _murmur2, partition_for_key as _partition_for_key
from aioproducer.errors import ConfigError, InvalidRecordError
from aioproducer.serializers import import_dotted

__all__ = [
    "BuiltInPartitioner",
    "FillingBatch",
    "NodeLatencyStats",
    "PartitionerFn",
    "PartitionerLike",
    "PartitionsSnapshot",
    "RECORD_OVERHEAD_ESTIMATE",
    "StickyPartitionInfo",
    "TopicPartitions",
    "check_partition",
    "murmur2",
    "partition_for_key",
    "resolve_partitioner",
    "to_positive",
]

# ------------------------------------------------------------------------------------- murmur2

def murmur2(data: bytes | bytearray | memoryview) -> int:
    """MurmurHash2 of ``data`` exactly as Java's ``org.apache.kafka.common.utils.Utils.murmur2``.

    Returns the *signed* 32-bit result, as Java does (``murmur2(b"21") == -973932308``), so values
    can be compared with Java logs and tests; use :func:`to_positive` before taking a modulo.
    Computed by the native module (``native/src/murmur.rs``): about 0.05 µs a key.
    """
    return _murmur2(data if type(data) is bytes else bytes(data))


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (``n & 0x7fffffff``), *not* ``abs``.

    ``abs(-2**31)`` overflows in Java; masking never does, and it is what the Java default
    partitioner uses, so changing it would move keys to other partitions.
    """
    return number & 0x7FFFFFFF


def partition_for_key(key_bytes: bytes | bytearray | memoryview, num_partitions: int) -> int:
    """The partition Java's default partitioner picks for a serialized key (``BuiltInPartitioner.partitionForKey``).

    The one place of ``toPositive(murmur2(key)) % numPartitions``: ``send()``'s fast path calls it too.
    """
    return _partition_for_key(key_bytes if type(key_bytes) is bytes else bytes(key_bytes), num_partitions)


# --------------------------------------------------------------------- custom partitioners


@runtime_checkable
class PartitionerLike(Protocol):
    """A custom partitioner object, as Java's ``Partitioner.partition`` (``close`` is optional)."""

    def partition(
        self,
        topic: str,
        key: Any,
        key_bytes: bytes | None,
        value: Any,
        value_bytes: bytes | None,
        cluster: Any,
    ) -> int: ...


#: The normalized form of a custom partitioner: the producer always calls
#: ``fn(topic, key, key_bytes, value, value_bytes, cluster) -> int``. ``cluster`` is whatever
#: metadata view the producer passes (documented in ``producer.py``).
PartitionerFn = Callable[[str, Any, "bytes | None", Any, "bytes | None", Any], int]


def resolve_partitioner(obj: Any) -> PartitionerFn:
    """Turn what a user configured as ``partitioner.class`` into one callable.

    Accepted, so that both Java habits and Python habits work:

    * an object with a ``partition(topic, key, key_bytes, value, value_bytes, cluster)`` method
      (returns its bound method);
    * a plain callable with that same signature (returned as is);
    * a class with a ``partition`` method (instantiated without arguments, as Java does with a
      class name);
    * a dotted import path string naming any of the above.
    """
    if isinstance(obj, str):
        obj = import_dotted(obj, "partitioner.class")
    if isinstance(obj, type):
        if not callable(getattr(obj, "partition", None)):
            raise ConfigError(f"partitioner.class {obj.__qualname__} has no partition() method")
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001 - any constructor failure is a configuration error
            raise ConfigError(f"partitioner.class {obj.__qualname__}() failed: {exc!r}") from exc
    method = getattr(obj, "partition", None)
    if callable(method):
        return method  # type: ignore[no-any-return]
    if callable(obj):
        return obj  # type: ignore[no-any-return]
    raise ConfigError(
        f"partitioner.class must be a callable or an object with a partition() method, got {type(obj).__name__}"
    )


def check_partition(partition: Any, num_partitions: int, topic: str) -> int:
    """Validate a partition chosen by a custom partitioner (or given with a record).

    Java rejects negative answers in ``KafkaProducer.partition`` and out-of-range explicit
    partitions in ``waitOnMetadata``; an out-of-range custom answer would otherwise wait for a
    partition that does not exist until ``delivery.timeout.ms``, so we fail fast on both.
    """
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise InvalidRecordError(
            f"partition for topic {topic!r} must be an int, got {type(partition).__name__} {partition!r}"
        )
    if partition < 0:
        raise InvalidRecordError(
            f"invalid partition {partition} for topic {topic!r}: partition numbers are never negative"
        )
    if partition >= num_partitions:
        raise InvalidRecordError(
            f"invalid partition {partition} for topic {topic!r}: the topic has {num_partitions} "
            f"partition(s), valid range is [0, {num_partitions})"
        )
    return partition


# ------------------------------------------------------------------- KIP-794 sticky partitioner


class PartitionsSnapshot(Protocol):
    """What :class:`BuiltInPartitioner` needs to know about a topic's partitions.

    Any object with these two attributes will do (the metadata layer can provide it directly);
    :class:`TopicPartitions` is a ready-made one. ``available`` are the partitions that currently
    have a known leader (Java's ``cluster.availablePartitionsForTopic``).
    """

    @property
    def num_partitions(self) -> int: ...

    @property
    def available(self) -> Sequence[int]: ...


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    """Immutable :class:`PartitionsSnapshot`; build once per metadata update, not per record."""

    num_partitions: int
    available: tuple[int, ...]


#: Per-record framing beyond key and value bytes, for the sticky partitioner's byte count
#: (Java counts the record's exact size; this estimate spares encoding it twice).
RECORD_OVERHEAD_ESTIMATE = 8


class FillingBatch(Protocol):
    """The batch a keyless record went to, as :meth:`BuiltInPartitioner.count_appended` sees it."""

    def is_full(self, batch_size: int) -> bool: ...


class StickyPartitionInfo:
    """The current sticky partition of a topic and the bytes appended to it so far.

    Identity matters: :meth:`BuiltInPartitioner.is_partition_changed` compares objects, which is
    how a caller that let other appends run between its peek and its count would find out that
    one of them switched the partition (the asyncio analogue of Java's race check under the
    deque lock). The accumulator never does: it peeks and counts in one synchronous call.
    """

    __slots__ = ("partition", "produced_bytes")

    def __init__(self, partition: int) -> None:
        self.partition: int = partition
        #: Written only by its BuiltInPartitioner (count_appended, update_partition_info).
        self.produced_bytes: int = 0

    def __repr__(self) -> str:
        return f"StickyPartitionInfo(partition={self.partition}, produced_bytes={self.produced_bytes})"


class NodeLatencyStats:
    """Per-broker "when could we last drain it" times, for ``partitioner.availability.timeout.ms``.

    The sender calls :meth:`update` for every node that ``ready()`` returned, with ``can_drain``
    true when the connection could take a request. ``ready_time_ms`` then advances on every pass
    while ``drain_time_ms`` stalls as long as the broker cannot be sent to; a partition whose
    leader has ``ready - drain > timeout`` is left out of the adaptive draw (Java's
    ``RecordAccumulator.updateNodeLatencyStats`` / ``partitionReady``). Disabled when the timeout
    is 0, so the default costs nothing.
    """

    __slots__ = ("_timeout_ms", "_ready_ms", "_drain_ms")

    def __init__(self, availability_timeout_ms: int) -> None:
        if availability_timeout_ms < 0:
            raise ValueError("availability_timeout_ms must be >= 0")
        self._timeout_ms = availability_timeout_ms
        # node id -> last time the node had data ready / could be drained (guarded by: the event loop)
        self._ready_ms: dict[int, int] = {}
        self._drain_ms: dict[int, int] = {}

    @property
    def enabled(self) -> bool:
        return self._timeout_ms > 0

    def update(self, node_id: int, now_ms: int, can_drain: bool) -> None:
        """Record one sender pass over ``node_id``; a node seen for the first time starts fresh."""
        if self._timeout_ms <= 0:
            return
        if node_id not in self._ready_ms or can_drain:
            self._drain_ms[node_id] = now_ms
        self._ready_ms[node_id] = now_ms

    def is_unavailable(self, node_id: int) -> bool:
        """True if ``node_id`` has had data waiting but no drain for longer than the timeout."""
        if self._timeout_ms <= 0:
            return False
        ready = self._ready_ms.get(node_id)
        if ready is None:
            return False
        return ready - self._drain_ms[node_id] > self._timeout_ms


class BuiltInPartitioner:
    """Sticky, optionally adaptive, partition choice for the unkeyed records of one topic (KIP-794).

    State (guarded by: the event loop; all methods are synchronous and never await):

    * the current :class:`StickyPartitionInfo`, created lazily on the first
      :meth:`peek_current_partition`;
    * the load statistics: ``None`` (uniform choice among available partitions) or a cumulative
      frequency table (CFT) over partitions, built by :meth:`update_partition_load_stats`.

    Switching rule (Java's ``updatePartitionInfo``): after ``produced >= sticky_batch_size`` bytes
    the partition switches if ``enable_switch``; the accumulator passes ``enable_switch=False``
    while the partition's queue holds a batch that is not ready yet, so that the switch lines up
    with a batch boundary. Past ``2 * sticky_batch_size`` it switches regardless, so a mix of keyed
    and unkeyed records cannot pin it forever.

    ``sticky_batch_size`` is the producer's ``batch.size`` (Java uses ``max(1, batch.size)``).
    ``rng`` defaults to a fresh :class:`random.Random`; tests pass a seeded one.
    """

    __slots__ = ("topic", "sticky_batch_size", "_rng", "_sticky", "_cft", "_cft_ids", "_cft_len")

    def __init__(self, topic: str, sticky_batch_size: int, rng: random.Random | None = None) -> None:
        if sticky_batch_size < 1:
            raise ValueError(f"sticky_batch_size must be >= 1, got {sticky_batch_size}")
        self.topic: str = topic
        self.sticky_batch_size: int = sticky_batch_size
        self._rng = rng if rng is not None else random.Random()
        self._sticky: StickyPartitionInfo | None = None
        # Adaptive load stats; _cft is None when the choice is uniform.
        self._cft: list[int] | None = None
        self._cft_ids: list[int] = []
        self._cft_len = 0

    # -- choosing ---------------------------------------------------------------------------

    def _random(self) -> int:
        # Java: Utils.toPositive(ThreadLocalRandom.current().nextInt()) -> uniform in [0, 2**31).
        return self._rng.getrandbits(31)

    def next_partition(self, partitions: PartitionsSnapshot) -> int:
        """Draw the next sticky partition (does not change the current one).

        Without load stats: uniform over ``partitions.available``, or over all partitions if none
        has a leader (records then wait in the accumulator for one). With load stats: partition
        ``i`` is drawn with probability proportional to ``max_queue + 1 - queue_size[i]``.
        """
        rnd = self._random()
        cft = self._cft
        if cft is None:
            available = partitions.available
            if available:
                return available[rnd % len(available)]
            n = partitions.num_partitions
            if n <= 0:
                raise ValueError(f"topic {self.topic!r} has no partitions")
            return rnd % n
        length = self._cft_len
        weighted = rnd % cft[length - 1]
        # First entry strictly greater than `weighted`: the CFT is sorted by construction.
        index = bisect.bisect_right(cft, weighted, 0, length)
        return self._cft_ids[index]

    def peek_current_partition(self, partitions: PartitionsSnapshot) -> StickyPartitionInfo:
        """The current sticky partition, choosing one on first use. Does not count bytes."""
        sticky = self._sticky
        if sticky is None:
            sticky = self._sticky = StickyPartitionInfo(self.next_partition(partitions))
        return sticky

    @property
    def in_use(self) -> bool:
        """Whether a keyless record was partitioned here: until then load statistics serve nothing."""
        return self._sticky is not None

    def is_partition_changed(self, info: StickyPartitionInfo | None) -> bool:
        """True if the sticky partition moved on since ``info`` was peeked (``None``: not sticky)."""
        return info is not None and info is not self._sticky

    def update_partition_info(
        self,
        info: StickyPartitionInfo | None,
        appended_bytes: int,
        partitions: PartitionsSnapshot,
        enable_switch: bool = True,
    ) -> None:
        """Count ``appended_bytes`` against the sticky partition and switch when it is full.

        ``info`` is what :meth:`peek_current_partition` returned for this append, or ``None`` when
        the record did not use the sticky partition (keyed, explicit partition): then nothing is
        counted, as in Java. ``info`` must still be current (see :meth:`is_partition_changed`).
        """
        if info is None:
            return
        if info is not self._sticky:
            raise RuntimeError("update_partition_info called with a stale StickyPartitionInfo")
        info.produced_bytes += appended_bytes
        produced = info.produced_bytes
        size = self.sticky_batch_size
        if (produced >= size and enable_switch) or produced >= 2 * size:
            self._sticky = StickyPartitionInfo(self.next_partition(partitions))

    def count_appended(
        self,
        info: StickyPartitionInfo,
        payload_bytes: int,
        records: int,
        partitions: PartitionsSnapshot,
        batch: FillingBatch,
    ) -> None:
        """Count keyless records just appended to ``batch`` on the sticky partition; switch when due.

        The sticky rule and its byte count, in one place for every keyless append (one record,
        or ``send_many()``'s run of records into one batch): ``payload_bytes`` (keys and values)
        plus :data:`RECORD_OVERHEAD_ESTIMATE` per record. Below ``sticky_batch_size`` no switch
        is possible, so counting is all there is to do (the common case, kept to one compare).
        Past it the switch waits for ``batch``, the partition's last, to be full, so that it
        lines up with a batch boundary (Java's ``allBatchesFull``), or for twice the size.
        ``info`` is the current sticky partition, peeked in the same synchronous section.
        """
        appended = payload_bytes + records * RECORD_OVERHEAD_ESTIMATE
        produced = info.produced_bytes + appended
        if produced < self.sticky_batch_size:
            info.produced_bytes = produced
            return
        self.update_partition_info(info, appended, partitions, batch.is_full(self.sticky_batch_size))

    # -- adaptive load statistics -------------------------------------------------------------

    def update_partition_load_stats(
        self, queue_sizes: Sequence[int] | None, partition_ids: Sequence[int] | None, length: int
    ) -> None:
        """Rebuild the weighting from the partitions' queue lengths (Java's ``updatePartitionLoadStats``).

        ``queue_sizes[i]`` is the number of batches queued for ``partition_ids[i]``; only the first
        ``length`` entries are candidates (partitions left out for having no leader or for the
        availability timeout are not among them), while ``len(queue_sizes)`` is the number of
        partitions the accumulator has queues for. ``queue_sizes=None`` turns adaptivity off.

        The table is uniform-free when it can be: fewer than 2 partitions in total, or all
        candidate queues equally long with none excluded, fall back to the uniform choice.
        Otherwise each size ``s`` becomes the weight ``max + 1 - s`` and the weights a running sum,
        e.g. sizes ``0 3 1`` -> weights ``4 1 3`` -> CFT ``4 5 8``; a uniform draw in ``[0, 8)``
        then picks index ``0`` for 0-3, ``1`` for 4 and ``2`` for 5-7. The inputs are not modified.
        """
        if queue_sizes is None or partition_ids is None:
            self._cft = None
            return
        total = len(queue_sizes)
        if len(partition_ids) != total or not 0 <= length <= total:
            raise ValueError("queue_sizes and partition_ids must have the same length >= length")
        if length < 1 or total < 2:
            self._cft = None
            return
        first = queue_sizes[0]
        max_size = first
        all_equal = True
        for i in range(1, length):
            size = queue_sizes[i]
            if size != first:
                all_equal = False
            if size > max_size:
                max_size = size
        if all_equal and length == total:
            self._cft = None
            return
        max_plus_1 = max_size + 1
        cft: list[int] = []
        running = 0
        for i in range(length):
            running += max_plus_1 - queue_sizes[i]
            cft.append(running)
        self._cft = cft
        self._cft_ids = list(partition_ids[:length])
        self._cft_len = length

    def update_load_stats_from_queues(
        self,
        queues: Iterable[tuple[int, int | None, int]],
        node_stats: NodeLatencyStats | None = None,
    ) -> None:
        """Convenience for ``ready()``: build the load stats from ``(partition, leader, queue_size)``.

        ``queues`` lists every partition of the topic that has a queue in the accumulator;
        ``leader`` is the leader's node id or ``None`` if unknown. Leaderless partitions are not
        candidates; nor are partitions whose leader ``node_stats`` reports unavailable for longer
        than ``partitioner.availability.timeout.ms``. The caller decides whether adaptivity applies
        at all (Java: only with ``partitioner.adaptive.partitioning.enable`` and once every
        partition of the topic has a queue; otherwise pass ``None`` to
        :meth:`update_partition_load_stats`).
        """
        entries = list(queues)
        sizes = [0] * len(entries)
        ids = [0] * len(entries)
        n = 0
        for partition, leader, size in entries:
            if leader is None:
                continue
            if node_stats is not None and node_stats.is_unavailable(leader):
                continue
            sizes[n] = size
            ids[n] = partition
            n += 1
        self.update_partition_load_stats(sizes, ids, n)

    def load_stats_range_end(self) -> int | None:
        """End of the weighted random range (the CFT's last entry), ``None`` when uniform; for tests and logs."""
        return None if self._cft is None else self._cft[self._cft_len - 1]

    def load_stats(self) -> Mapping[int, int] | None:
        """Partition -> weight of the current adaptive table, ``None`` when uniform; for tests and logs."""
        if self._cft is None:
            return None
        weights: dict[int, int] = {}
        previous = 0
        for i in range(self._cft_len):
            weights[self._cft_ids[i]] = self._cft[i] - previous
            previous = self._cft[i]
        return weights

