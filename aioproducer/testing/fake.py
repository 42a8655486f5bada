"""FakeProducer: the real ``Producer`` with no network under it, for unit tests of users' services.

Why a subclass and not a look-alike: a fake written beside ``Producer`` drifts from it (an
argument checked by one and not the other, an error of another class). ``FakeProducer``
*is* a ``Producer`` (``isinstance`` and mypy accept it where one is expected) and keeps its
whole ``send()`` path: interceptors, serializers (sync and async, headers-aware), the
partitioner, argument validation, the size checks of the real ``RecordAccumulator``, buffer
memory and ``max.block.ms``. Bad input raises what the real producer raises.

The seam. ``ProducerEngine`` makes the four parts that touch a cluster through the
``ProducerParts`` it is given (``aioproducer/internals/parts.py``); the fake gives ``_FakeParts``,
which make the in-memory ones below. Everything else (the buffer pool, the transaction manager,
the transaction calls and their transaction version, the telemetry, the lifecycle, the fast
paths) the engine and the facade build as for a real producer: the fake overrides no method of
either.

* ``_FakeClient``: the metadata stand-in (no feature finalized, so transactions run at
  version 1, as on a cluster that does not finalize ``transaction.version``; no KIP-714, so
  telemetry ends at once). It knows the fake's topics
  (``FakeProducer(topics={"orders": 6})``) as a real ``ClusterMetadata`` with one broker;
  a topic not given is created with ``default_partitions`` on first use, unless
  ``strict_topics=True``: then ``send()`` raises the real producer's ``KafkaTimeoutError``
  ("not present in metadata") at once instead of after ``max.block.ms``.
* A ``_FakeAccumulator`` (the real ``RecordAccumulator``) that hands each batch, as soon as a
  record opened it, to the ``_FakeBroker``. So each record is its own batch, which is what
  lets ``complete_next(n)`` complete records one at a time.
* ``_FakeBroker``, behind the ``_FakeSender``: it takes each batch out of the accumulator,
  then completes it (``autocomplete=True``) or holds it until ``complete_next`` /
  ``fail_next``. Completing goes through ``ProducerBatch.complete`` and the engine's
  ``_on_batch_complete``, as the real sender does: futures, ``on_delivery`` callbacks,
  interceptors' ``on_acknowledgement``, ``metrics()`` and the failure log.
* ``_FakeCoordinators``, in place of ``Coordinators``: it answers the transaction
  coordinator's requests (InitProducerId, EndTxn, AddOffsetsToTxn, TxnOffsetCommit) and the
  group coordinator's OffsetFetch in memory, so the real ``Transactions`` state machine runs
  unchanged (``send()`` outside a transaction, commit without begin, ... raise the real errors).

What the fake decides, as the real producer cannot tell:

* ``history()`` is what a broker stores and a ``read_committed`` consumer reads:
  acknowledged records in send order; in a transaction, only once it committed. Records
  of an aborted transaction are in ``aborted_history()``. A failed record is in neither.
* Offsets count from 0 per partition, one per record acknowledged (transaction markers
  take none, unlike on a broker).
* Held records (``autocomplete=False``) are "in flight": ``flush()`` and
  ``commit_transaction()`` wait until they are completed or failed (from another task);
  ``flush(timeout)`` raises ``KafkaTimeoutError`` as the real one. ``abort_transaction()``
  fails the transaction's held records with ``TransactionAbortedError``, and ``close()``
  fails what is still held with the real close's ``ProducerClosedError``.
* Sequence numbers (idempotence) are a wire concern: the fake assigns none.
* ``prepare_transaction()`` / ``complete_transaction()`` and ``committed_offsets()`` work on
  the same fake: its coordinators are its own (a prepared transaction of another fake is not
  known to it), and the group offsets are those its committed transactions sent.
* Every record takes the path it takes in a real producer, ``send()``'s fast paths included
  (a ``bytes`` record with nothing per record to run enters the accumulator in two frames),
  and is its own batch; ``send_many()``'s records too, one a batch. ``send_arrow()``
  runs the real native path; each batch it fills goes to the fake broker whole, its rows read
  back from the batch's own bytes (so ``history()`` shows what the encoder wrote). Held, such a
  batch is one entry: ``complete_next(1)`` completes all its rows, as a broker acknowledges a
  batch, and returns their count.

In a FastAPI app, one line overrides the dependency that gives the producer::

    app.dependency_overrides[get_producer] = lambda: fake

In an aiohttp app, one line puts it where the handlers find the producer::

    app[producer_key] = fake   # with a started FakeProducer, in the test's loop
"""

from __future__ import annotations

import asyncio
import collections
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from aioproducer.clock import Clock
from aioproducer.config import ProducerConfig
from aioproducer.errors import IllegalStateError, KafkaTimeoutError, UnsupportedVersionError
from aioproducer.internals.accumulator import NO_PARTITIONS, UNKNOWN_PARTITION, AccumulatorConfig, RecordAccumulator, TopicInfo
from aioproducer.internals.batch import DeliveryCallback, FutureRecordMetadata, ProducerBatch
from aioproducer.internals.buffer_pool import BufferPool
from aioproducer.internals.coordinator import CoordinatorRequest, CoordinatorSender
from aioproducer.internals.metrics import ByteCounts, ProducerMetrics
from aioproducer.internals.transaction_manager import TransactionManager
from aioproducer.internals.sender import OnAcknowledged, WakeUp
from aioproducer.lifecycle import LifecycleView
from aioproducer.logs import LogLike
from aioproducer.network.client import ClientClosedError
from aioproducer.network.metadata import ClusterMetadata
from aioproducer.partitioner import TopicPartitions
from aioproducer.producer import Producer
from aioproducer.protocol import messages
from aioproducer._native import ArrowRecords
from aioproducer.arrow import ArrowDelivery
from aioproducer.protocol.records import decode_batches
from aioproducer.testing.readback import ConsumerRecord

__all__ = ["FakeProducer", "FakeRecord"]

_T = TypeVar("_T")

#: The one broker of the fake cluster.
_NODE = 0
#: A fake's producer ids start here (each fake its own, as a broker hands them out).
_producer_ids = itertools.count(1000)


FakeRecord = ConsumerRecord
"""A record as the broker would store it (bytes as serialized, with its partition and offset).

The same type `MockCluster.read()` and `KafkaCluster.read()` return, so a fake's history and a
topic read back compare as they are.
"""


@dataclass(frozen=True, slots=True)
class _Sent:
    """What ``send()`` handed the accumulator for one record (its batch holds the same, encoded)."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def _check_count(name: str, n: Any) -> int:
    if type(n) is not int or n < 1:
        raise ValueError(f"{name}(n=...) must be an int >= 1, got {n!r}")
    return n


@dataclass(frozen=True)
class _Session:
    """One started producer as the fake broker sees it: what the engine gave its parts."""

    accumulator: RecordAccumulator
    tm: TransactionManager | None
    metrics: ProducerMetrics
    clock: Clock
    on_complete: Callable[[ProducerBatch], None]
    on_fatal: Callable[[BaseException], None]


class _FakeBroker:
    """In place of the ``Sender``: takes each batch from the accumulator and completes it in memory.

    Lives as long as its ``FakeProducer`` (its history outlives ``close()``); ``attach`` gives
    it the parts of each start.
    """

    def __init__(self, autocomplete: bool) -> None:
        self.autocomplete = autocomplete
        self.history: list[FakeRecord] = []
        self.aborted: list[FakeRecord] = []
        #: Acknowledged in the open transaction: history once it commits, aborted once it aborts.
        self.uncommitted: list[FakeRecord] = []
        #: Offsets sent to the open transaction, then to ``offsets_history`` once it commits.
        self.uncommitted_offsets: dict[str, dict[tuple[str, int], int]] = {}
        self.offsets_history: list[dict[str, dict[tuple[str, int], int]]] = []
        #: Each group's committed offsets as its coordinator holds them (what OffsetFetch answers).
        self.group_offsets: dict[str, dict[tuple[str, int], int]] = {}
        #: Batches held (``autocomplete=False``) with their records: one per ``send()``, a
        #: ``send_arrow()`` batch's rows together (it completes as one, as on a broker).
        self.held: collections.deque[tuple[ProducerBatch, tuple[_Sent, ...]]] = collections.deque()
        self._next_offset: dict[tuple[str, int], int] = {}
        self.producer_id = next(_producer_ids)
        self._accumulator: RecordAccumulator | None = None
        self._tm: TransactionManager | None = None
        self._session: _Session | None = None

    def attach(self, session: _Session) -> None:
        """A producer started on this broker (``_FakeParts.sender``): what it reports completions and faults to."""
        self._session = session
        self._accumulator, self._tm = session.accumulator, session.tm

    # ---------------------------------------------------------------- the sender's part
    def accept(self, batch: ProducerBatch, sent: tuple[_Sent, ...]) -> None:
        """Records opened ``batch``: take it out of its deque, as a drain does, then complete or hold it."""
        accumulator, session, tm = self._accumulator, self._session, self._tm
        assert accumulator is not None and session is not None
        accumulator.remove_open_batch(batch)
        accumulator.settle(batch)
        batch.drained()
        if tm is not None and tm.transactional:  # AddPartitionsToTxn, answered at once
            tm.partitions_added(tm.take_pending_partitions(), set())
        now = session.clock()
        session.metrics.record_request([batch], now)
        if self.autocomplete:
            self._acknowledge(batch, sent)
        else:
            self.held.append((batch, sent))

    def _acknowledge(self, batch: ProducerBatch, sent: tuple[_Sent, ...]) -> None:
        key = (batch.topic, batch.partition)
        offset = self._next_offset.get(key, 0)
        self._next_offset[key] = offset + batch.record_count
        records = [
            FakeRecord(s.topic, batch.partition, offset + i, s.key, s.value, s.headers, s.timestamp)
            for i, s in enumerate(sent)
        ]
        tm = self._tm
        (self.uncommitted if tm is not None and tm.transactional else self.history).extend(records)
        self._finish(batch, offset, None)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        tm, session = self._tm, self._session
        if tm is not None and tm.transactional and tm.transaction_failed(error) and session is not None:
            session.on_fatal(error)
        self._finish(batch, -1, error)

    def _finish(self, batch: ProducerBatch, offset: int, error: BaseException | None) -> None:
        """What ``Sender._complete`` does: complete once, release memory, tell the engine."""
        accumulator, session = self._accumulator, self._session
        assert accumulator is not None and session is not None
        if batch.complete(offset, -1, error):
            accumulator.deallocate(batch)
            session.on_complete(batch)
            batch.release()

    def held_records(self) -> int:
        return sum(len(sent) for _, sent in self.held)

    def complete_next(self, n: int) -> int:
        """The ``n`` oldest held batches acknowledged; returns how many records they held."""
        done = 0
        for _ in range(min(n, len(self.held))):
            batch, sent = self.held.popleft()
            self._acknowledge(batch, sent)
            done += len(sent)
        return done

    def fail_next(self, error: BaseException, n: int) -> int:
        """The ``n`` oldest held batches failed with ``error``; returns how many records they held."""
        done = 0
        for _ in range(min(n, len(self.held))):
            batch, sent = self.held.popleft()
            self._fail(batch, error)
            done += len(sent)
        return done

    def fail_all(self, error: BaseException) -> None:
        """Fail every held record and every batch still queued (a forced close, an abort)."""
        self.fail_next(error, len(self.held))
        accumulator = self._accumulator
        if accumulator is not None:
            for batch in accumulator.abort_undrained():
                self._fail(batch, error)

    # ---------------------------------------------------------------- the coordinator's part
    def end_transaction(self, committed: bool) -> None:
        if committed:
            self.history.extend(self.uncommitted)
            if self.uncommitted_offsets:
                self.offsets_history.append(self.uncommitted_offsets)
                for group, offsets in self.uncommitted_offsets.items():
                    self.group_offsets.setdefault(group, {}).update(offsets)
        else:
            self.aborted.extend(self.uncommitted)
        self.uncommitted = []
        self.uncommitted_offsets = {}

    def clear(self) -> None:
        self.history.clear()
        self.aborted.clear()
        self.offsets_history.clear()


class _FakeSender:
    """The sender task's stand-in: sleeps until ``close()``; fails what is left as the real one does."""

    def __init__(self, broker: _FakeBroker, lifecycle: LifecycleView) -> None:
        self._broker = broker
        self._lifecycle = lifecycle
        self._wake = asyncio.Event()

    @property
    def requests_in_flight(self) -> int:
        return len(self._broker.held)

    def wakeup(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        while not self._lifecycle.closing:
            await self._wake.wait()
            self._wake.clear()

    def abort_undrained(self, error: BaseException) -> None:
        """An abort: the transaction's records not acknowledged yet fail with ``error`` (held ones too)."""
        self._broker.fail_all(error)

    def abort_incomplete(self, error: BaseException) -> None:
        self._broker.fail_all(error)


class _FakeAccumulator(RecordAccumulator):
    """The real accumulator; each batch goes to the fake broker as soon as a record opened it."""

    def __init__(self, *args: Any, broker: _FakeBroker, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.broker = broker

    def try_append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any,
        on_delivery: DeliveryCallback | None,
        partitions: TopicPartitions = NO_PARTITIONS,
        reserved: int = 0,
    ) -> FutureRecordMetadata | None:
        future = super().try_append(topic, partition, timestamp, key, value, headers, on_delivery, partitions, reserved)
        if future is not None:
            sent = _Sent(topic, key, value, tuple(headers) if headers else (), timestamp)
            self.broker.accept(future._batch, (sent,))
        return future

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
        """``send_many()``'s keyless fill, one record a batch as every fake append (``complete_next`` counts records)."""
        value = values[start]
        if type(value) is not bytes:
            return start
        future = self.try_append(topic, UNKNOWN_PARTITION, timestamp, None, value, None, on_delivery, partitions, 0)
        if future is None:
            return start
        out.append(future)
        return start + 1

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
        """``send_arrow()``'s batches: each goes to the fake broker filled, its rows read back from its own bytes."""
        batch = super()._open_arrow_batch(info, topic, partition, index, records, start, stop, delivery, reserved)
        if batch is not None:
            [decoded] = decode_batches(batch.records())
            sent = tuple(_Sent(topic, r.key, r.value, tuple(r.headers), r.timestamp) for r in decoded.records)
            self.broker.accept(batch, sent)
        return batch


class _FakeClient:
    """The metadata stand-in: one broker, the fake's topics; no connection is ever opened."""

    def __init__(self, topics: dict[str, int], default_partitions: int, strict: bool, byte_counts: ByteCounts, on_metadata: Any) -> None:
        self._topics = topics
        self._default_partitions = default_partitions
        self._strict = strict
        self._on_metadata = on_metadata
        self.byte_counts = byte_counts
        self.connection_count = 0
        self.brokers_reachable = True
        self._closed = False
        self.metadata = self._build()

    def _build(self) -> ClusterMetadata:
        """The fake's topics as a real ``ClusterMetadata``: the partitioner and snapshots are the real ones."""

        def partitions(n: int) -> list[dict[str, Any]]:
            return [{"partition_index": p, "leader_id": _NODE, "replica_nodes": [_NODE], "isr_nodes": [_NODE]} for p in range(n)]

        return ClusterMetadata.from_response({
            "brokers": [{"node_id": _NODE, "host": "fake", "port": 9092}],
            "topics": [{"name": name, "partitions": partitions(n)} for name, n in self._topics.items()],
            "controller_id": _NODE,
        })

    def add_topic(self, topic: str) -> None:
        """A topic in use: created now unless strict (the broker's ``auto.create.topics.enable``)."""
        if topic not in self._topics and not self._strict:
            self._topics[topic] = self._default_partitions
            self.metadata = self._build()
            self._on_metadata(self.metadata)

    async def wait_for_metadata(self, topic: str, timeout_ms: float) -> tuple[int, ...]:
        if self._closed:
            raise ClientClosedError("the client is closing: no more metadata waits")
        known = self.metadata.partitions_for(topic)
        if known is None:  # strict_topics: what the real wait raises after max.block.ms, at once
            raise KafkaTimeoutError(
                f"Topic {topic} not present in metadata after {timeout_ms:g} ms (FakeProducer(strict_topics=True) "
                f"knows only {sorted(self._topics)})"
            )
        return known

    @property
    def bootstrap_failure(self) -> BaseException | None:
        return None

    async def bootstrap(self, timeout_ms: float = 0.0) -> ClusterMetadata:
        """Nothing to reach: the fake's metadata is there from the start."""
        return self.metadata

    def metadata_age(self) -> float:
        return 0.0

    def finalized_feature_level(self, name: str) -> int:
        """No feature is finalized (so transactions run at version 1, as on a cluster that finalizes none)."""
        return 0

    async def send_any(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        """Only the telemetry asks a broker directly: the fake is a cluster without KIP-714, which ends it."""
        raise UnsupportedVersionError(f"FakeProducer's broker does not answer API key {api_key} (no KIP-714 telemetry)")

    def interrupt_waits(self) -> None:
        self._closed = True

    async def close(self, deadline_ms: float | None = None) -> None:
        self._closed = True

    def abandon(self) -> None:
        self._closed = True


class _FakeCoordinators:
    """The transaction coordinator and the group coordinator, answering in memory."""

    def __init__(self, broker: _FakeBroker) -> None:
        self._broker = broker
        self._epoch = -1

    def deadline(self, timeout_ms: float) -> float:
        """Every answer is immediate: no deadline is ever reached."""
        return float("inf")

    async def send(self, request: CoordinatorRequest[_T], deadline: float) -> _T:
        return request.handle(self._answer(request))

    def _answer(self, request: CoordinatorRequest[Any]) -> dict[str, Any]:
        api_key = request.api_key
        if api_key == messages.INIT_PRODUCER_ID:
            self._epoch += 1
            return {"error_code": 0, "producer_id": self._broker.producer_id, "producer_epoch": self._epoch}
        if api_key == messages.END_TXN:
            self._broker.end_transaction(bool(request.body()["committed"]))
            return {"error_code": 0}
        if api_key == messages.ADD_OFFSETS_TO_TXN:
            return {"error_code": 0}
        if api_key == messages.TXN_OFFSET_COMMIT:
            body = request.body()
            offsets = self._broker.uncommitted_offsets.setdefault(body["group_id"], {})
            for topic in body["topics"]:
                for p in topic["partitions"]:
                    offsets[(topic["name"], p["partition_index"])] = p["committed_offset"]
            return {"topics": []}
        if api_key == messages.OFFSET_FETCH:
            return self._offset_fetch(request.body())
        raise IllegalStateError(f"{request.what} is not supported by FakeProducer")

    def _offset_fetch(self, body: dict[str, Any]) -> dict[str, Any]:
        """The group's committed offsets (-1 where none), in OffsetFetch's shape."""
        committed = self._broker.group_offsets.get(body["group_id"], {})
        return {"error_code": 0, "topics": [
            {"name": t["name"], "partitions": [
                {"partition_index": p, "committed_offset": committed.get((t["name"], p), -1)} for p in t["partition_indexes"]
            ]}
            for t in body["topics"]
        ]}


class _FakeParts:
    """The fake's ``ProducerParts`` (``internals/parts.py``): the in-memory client, coordinators, accumulator and sender."""

    def __init__(self, broker: _FakeBroker, topics: dict[str, int], default_partitions: int, strict_topics: bool) -> None:
        self._broker = broker
        self._topics = topics
        self._default_partitions = default_partitions
        self._strict_topics = strict_topics

    def client(
        self,
        config: ProducerConfig,
        *,
        clock: Clock,
        byte_counts: ByteCounts,
        on_sendable: Callable[[], None],
        on_metadata: Callable[[ClusterMetadata], None],
    ) -> _FakeClient:
        return _FakeClient(self._topics, self._default_partitions, self._strict_topics, byte_counts, on_metadata)

    def coordinators(self, client: _FakeClient, config: ProducerConfig, *, clock: Clock) -> _FakeCoordinators:
        return _FakeCoordinators(self._broker)

    def accumulator(
        self,
        config: AccumulatorConfig,
        pool: BufferPool,
        tm: TransactionManager | None,
        on_ready: Callable[[], None],
        *,
        clock: Clock,
        lifecycle: LifecycleView,
        log: LogLike,
    ) -> RecordAccumulator:
        return _FakeAccumulator(config, pool, tm, on_ready, clock=clock, lifecycle=lifecycle, log=log, broker=self._broker)

    def sender(
        self,
        client: _FakeClient,
        accumulator: RecordAccumulator,
        tm: TransactionManager | None,
        config: ProducerConfig,
        *,
        coordinators: CoordinatorSender,
        wake: WakeUp,
        on_complete: Callable[[ProducerBatch], None],
        on_acknowledged: OnAcknowledged | None,
        on_fatal: Callable[[BaseException], None],
        metrics: ProducerMetrics,
        clock: Clock,
        lifecycle: LifecycleView,
    ) -> _FakeSender:
        del on_acknowledged  # the fake completes each batch through on_complete (no Produce response)
        if tm is not None and not tm.transactional:
            tm.set_producer_id_and_epoch(self._broker.producer_id, 0)  # the idempotent producer's InitProducerId
        self._broker.attach(_Session(accumulator, tm, metrics, clock, on_complete, on_fatal))
        return _FakeSender(self._broker, lifecycle)


class FakeProducer(Producer):
    """A ``Producer`` with no broker: records land in memory (see the module docstring).

    ``FakeProducer(topics={"orders": 6}, autocomplete=False, value_serializer=...)``: the
    configuration is the real producer's (``bootstrap.servers`` may be left out). Java's
    ``MockProducer``: ``history()``, ``clear()``, ``complete_next()``, ``fail_next()``
    (``completeNext``, ``errorNext``).
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        topics: Mapping[str, int] | None = None,
        default_partitions: int = 1,
        strict_topics: bool = False,
        autocomplete: bool = True,
        **kwargs: Any,
    ) -> None:
        fake_topics = _topics_argument(topics)
        if type(default_partitions) is not int or default_partitions < 1:
            raise ValueError(f"default_partitions must be an int >= 1, got {default_partitions!r}")
        for name, flag in (("strict_topics", strict_topics), ("autocomplete", autocomplete)):
            if type(flag) is not bool:
                raise TypeError(f"{name} must be a bool, got {type(flag).__name__}")
        self._broker = _FakeBroker(autocomplete)
        super().__init__(config, _parts=_FakeParts(self._broker, fake_topics, default_partitions, strict_topics), **kwargs)

    async def __aenter__(self) -> FakeProducer:
        """``async with FakeProducer() as fake``: typed as the fake, so its own methods type-check."""
        await self.start()
        return self

    # ---------------------------------------------------------------- Java's MockProducer
    @property
    def autocomplete(self) -> bool:
        return self._broker.autocomplete

    def history(self, topic: str | None = None) -> list[FakeRecord]:
        """Acknowledged records (committed, in a transaction) in send order; of ``topic`` only if given."""
        return _of_topic(self._broker.history, topic)

    def aborted_history(self, topic: str | None = None) -> list[FakeRecord]:
        """Records acknowledged in transactions that were then aborted, in send order."""
        return _of_topic(self._broker.aborted, topic)

    def consumer_group_offsets_history(self) -> list[dict[str, dict[tuple[str, int], int]]]:
        """Per committed transaction: group id -> ((topic, partition) -> offset) sent with ``send_offsets_to_transaction``."""
        return list(self._broker.offsets_history)

    def clear(self) -> None:
        """Forget the history (Java's ``clear``); held records stay held."""
        self._broker.clear()

    def held(self) -> int:
        """Records sent and neither completed nor failed yet (``autocomplete=False``)."""
        return self._broker.held_records()

    def complete_next(self, n: int = 1) -> int:
        """Acknowledge the ``n`` oldest held records (a ``send_arrow()`` batch counts as one); returns how many records."""
        return self._broker.complete_next(_check_count("complete_next", n))

    def fail_next(self, error: BaseException, n: int = 1) -> int:
        """Fail the ``n`` oldest held records with ``error`` (their futures raise it; a ``send_arrow()`` batch counts
        as one); returns how many records failed."""
        if not isinstance(error, BaseException):
            raise TypeError(f"fail_next(error=...) must be an exception, got {type(error).__name__}")
        return self._broker.fail_next(error, _check_count("fail_next", n))


def _of_topic(records: list[FakeRecord], topic: str | None) -> list[FakeRecord]:
    if topic is None:
        return list(records)
    if not isinstance(topic, str):
        raise TypeError(f"topic must be a str or None, got {type(topic).__name__}")
    return [r for r in records if r.topic == topic]


def _topics_argument(topics: Any) -> dict[str, int]:
    """``topics=`` as a fresh dict of name -> partition count, else an error naming it."""
    if topics is None:
        return {}
    if not isinstance(topics, Mapping):
        raise TypeError(f"topics must be a mapping of topic name to partition count, got {type(topics).__name__}")
    result: dict[str, int] = {}
    for name, count in topics.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"topics: a topic name must be a non-empty str, got {name!r}")
        if type(count) is not int or count < 1:
            raise ValueError(f"topics[{name!r}] must be a partition count >= 1, got {count!r}")
        result[name] = count
    return result
