"""RecordIntake: the one door by which records enter the accumulator, and the per-record stages before it.

Why. ``Producer`` is the public API; what happens to a record between ``send()`` and the
accumulator (Java's ``KafkaProducer.doSend``: interceptors, serializers, headers, tracing,
metadata, partitioner, append) is the intake's, once. The engine builds an intake when a start
succeeds and withdraws it (``None``) when the lifecycle leaves RUNNING, the sender task ends or
the process forks: the lifecycle's one writer is also the one writer of the gate that says
whether a record may enter (``ProducerEngine.intake``, handed to the facade). ``Producer`` checks
its arguments and makes one call into the intake.

* **The hooks** (``Hooks``), computed once from the configuration: interceptors, serializers,
  partitioner, ``partitioner.ignore.keys``, transactions, tracing. The route a record takes
  (``plain``: nothing per record; ``serializing``: serializers only; ``general``: anything else)
  and ``send_arrow()``'s refusal derive from that one list: adding a hook is adding it there and
  to the general stage below, in this file.
* **The doors**: one record (``send``; the facade inlines the plain route's two lines for
  speed, ``Producer.send``), a run of records (``send_many``), Arrow rows (``send_arrow``); each
  ends in the accumulator's ``try_append``/``append`` (``try_append_run``, ``*_arrow``), the
  only calls that queue records. Waits for metadata and memory together stay within
  ``max.block.ms``, on the engine's clock.

The admission check ("may a record enter now?") is the engine's (``ProducerEngine.admit``), one
set of messages for every call; the intake exists only while the answer is yes.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Protocol

from aioproducer._native import ArrowRecords
from aioproducer._native import partition_for_key as _partition_for_key
from aioproducer.arrow import ArrowDelivery
from aioproducer.clock import Clock
from aioproducer.config import ProducerConfig
from aioproducer.errors import InvalidRecordError, ProducerClosedError, SerializationError
from aioproducer.internals.accumulator import UNKNOWN_PARTITION, KeyedLane, RecordAccumulator
from aioproducer.internals.batch import DeliveryCallback, FutureRecordMetadata
from aioproducer.internals.callbacks import check_on_delivery, safe_call
from aioproducer.lifecycle import LifecycleView
from aioproducer.logs import LogLike
from aioproducer.network.client import ClientClosedError
from aioproducer.partitioner import PartitionerFn, TopicPartitions, check_partition, partition_for_key
from aioproducer.serializers import SerializeFn
from aioproducer.topic import validate_topic

if TYPE_CHECKING:
    from aioproducer.internals.parts import EngineClient

__all__ = ["HeadersArg", "Hooks", "ProducerRecord", "RecordIntake", "RecordTracer", "validate_headers"]

HeadersArg = Optional[Sequence[tuple[str, Optional[bytes]]] | Mapping[str, Optional[bytes]]]

_now_ns = time.time_ns  # a record's create time: one call and an integer division (cheaper than int(time() * 1000))
#: Kafka timestamps are int64 milliseconds.
_MAX_INT64 = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """A record as interceptors see it, before serialization (Java's ``ProducerRecord``)."""

    topic: str
    value: Any = None
    key: Any = None
    headers: tuple[tuple[str, Optional[bytes]], ...] = ()
    partition: int | None = None
    timestamp_ms: int | None = None


class RecordTracer(Protocol):
    """What the intake calls of a tracer (``aioproducer.tracing.Tracing``): a span per record, ended by its batch.

    A Protocol so that this layer does not import the tracing module above it; each method
    contains what OpenTelemetry raises (a span that could not start is None).
    """

    def start(self, topic: str, key: Any, value: Any) -> tuple[Any, int]: ...

    def inject(self, span: Any, headers: list[tuple[str, bytes | None]] | None) -> list[tuple[str, bytes | None]] | None: ...

    def fail(self, span: Any, start: int, error: BaseException) -> None: ...

    def attach(self, span: Any, start: int, future: FutureRecordMetadata) -> None: ...


@dataclass(frozen=True, slots=True)
class Hooks:
    """The per-record hooks a producer has, computed once from its configuration: the one list routes derive from."""

    interceptors: tuple[Any, ...]
    key_serializer: SerializeFn | None
    value_serializer: SerializeFn | None
    partitioner: PartitionerFn | None
    ignore_keys: bool
    transactional: bool
    tracing: RecordTracer | None

    @classmethod
    def of(cls, config: ProducerConfig, tracing: RecordTracer | None) -> Hooks:
        return cls(
            tuple(config.interceptor_classes), config.key_serializer, config.value_serializer,
            config.partitioner_class, config.partitioner_ignore_keys, config.transactional_id is not None, tracing,
        )

    def present(self) -> list[str]:
        """The hooks this producer has, by the names a user configured them with."""
        hooks = (
            ("interceptor.classes", bool(self.interceptors)),
            ("key.serializer", self.key_serializer is not None),
            ("value.serializer", self.value_serializer is not None),
            ("partitioner.class", self.partitioner is not None),
            ("partitioner.ignore.keys", self.ignore_keys),
            ("transactional.id", self.transactional),  # every record checks that a transaction is open
            ("tracing", self.tracing is not None),  # every record gets a span
        )
        return [name for name, present in hooks if present]

    @property
    def route(self) -> str:
        """``plain`` (nothing per record), ``serializing`` (serializers only) or ``general``."""
        present = self.present()
        if not present:
            return "plain"
        if set(present) <= {"key.serializer", "value.serializer"}:
            return "serializing"
        return "general"

    @property
    def serializers_see_headers(self) -> bool:
        """A serializer takes the record's headers (``serialize(topic, headers, data)``) and may add to them."""
        return any(s is not None and s.with_headers for s in (self.key_serializer, self.value_serializer))

    def arrow_refusal(self) -> str | None:
        """Why ``send_arrow()`` cannot honour these hooks (it calls no Python per row), or None."""
        per_row = [h for h in self.present() if h not in ("partitioner.ignore.keys", "transactional.id")]
        if not per_row:
            return None
        return (
            f"send_arrow() appends rows natively, with no Python call per row, so it cannot honour this "
            f"producer's {', '.join(per_row)}: use send() or send_many(), or a producer without them"
        )


class RecordIntake:
    """The door into the accumulator while the producer runs (see the module docstring).

    ``keyed_lane``: the accumulator's ``try_append_keyed`` when the route is plain, else None (what
    ``Producer.send`` calls first, with every argument and ``topic_partitions``).
    ``plain`` / ``serializing``: the accumulator when that is this producer's route, else None
    (what ``Producer.send`` tests next). ``topic_partitions``: topics validated and tracked since
    the last metadata update, each with its snapshot (the metadata owns it); filled by
    ``wait_on_metadata``, emptied by the engine on every metadata update.
    """

    __slots__ = (
        "hooks", "keyed_lane", "plain", "serializing", "topic_partitions", "_accumulator", "_client", "_clock",
        "_max_block_ms", "_lifecycle", "_log", "_see_headers", "_on_delivery_ok", "_admit",
    )

    def __init__(
        self,
        hooks: Hooks,
        accumulator: RecordAccumulator,
        client: EngineClient,
        *,
        clock: Clock,
        max_block_ms: float,
        lifecycle: LifecycleView,
        log: LogLike,
        admit: Callable[[str], RecordIntake],
    ) -> None:
        self.hooks: Hooks = hooks
        route = hooks.route
        self.plain: RecordAccumulator | None = accumulator if route == "plain" else None
        self.keyed_lane: KeyedLane | None = accumulator.try_append_keyed if route == "plain" else None
        self.serializing: RecordAccumulator | None = accumulator if route == "serializing" else None
        self.topic_partitions: dict[str, TopicPartitions] = {}
        self._accumulator = accumulator
        self._client = client
        self._clock = clock
        self._max_block_ms = max_block_ms
        self._lifecycle = lifecycle
        self._log = log
        self._see_headers = hooks.serializers_see_headers
        #: The engine's admission check (``ProducerEngine.admit``): asked again by a record that follows a wait.
        self._admit = admit
        #: The last ``on_delivery`` checked and accepted: the check costs about a microsecond.
        self._on_delivery_ok: object = None

    def withdraw(self) -> None:
        """No record may enter any more (``ProducerEngine._set_intake``): the routes close, for callers mid-run too."""
        self.keyed_lane = self.plain = self.serializing = None

    # ------------------------------------------------------------------ one record
    async def wait_and_append(
        self,
        topic: str,
        partition: int,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes,
        on_delivery: DeliveryCallback | None,
        partitions: TopicPartitions,
    ) -> FutureRecordMetadata:
        """The plain route's record that ``try_append`` refused for want of memory: the wait (``max.block.ms``), the append.

        ``send()``'s plain route made every check :meth:`send` would make for it (no hooks, bytes,
        metadata known, the partition chosen), so the wait is all that is left; through
        :meth:`send` it was the general route's checks and two more refused tries again (at 10 KB
        records one send in 12-14 waits in the peers' worker).
        """
        return await self._accumulator.wait_and_append(
            topic, partition, timestamp_ms, key, value, None, on_delivery, self._max_block_ms, partitions
        )

    async def send(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: HeadersArg,
        partition: int | None,
        timestamp_ms: int | None,
        on_delivery: DeliveryCallback | None,
    ) -> FutureRecordMetadata:
        """Every record's path (the general route): interceptors, tracing, serializers, checks, partitioner, append."""
        hooks = self.hooks
        if type(topic) is not str and isinstance(topic, str):
            topic = str.__str__(topic)  # a str subclass (a StrEnum member): its text, as the fast path takes it
        # Now, not at the append: a record that waits for metadata or memory first would otherwise
        # report a bad callback as a timeout, or only after max.block.ms.
        if on_delivery is not None and on_delivery is not self._on_delivery_ok:
            self._on_delivery_ok = check_on_delivery(on_delivery)
        if hooks.interceptors:
            topic, value, key, headers, partition, timestamp_ms = self._intercept(
                topic, value, key, headers, partition, timestamp_ms
            )
        tracing = hooks.tracing
        if tracing is not None:  # after the interceptors: the span is named after the topic they chose
            span, span_start = tracing.start(topic, key, value)

        # Everything from here to the append is inside one `try` (free unless something raises), so
        # that a record refused by send() reaches the interceptors too (Java's onSendError).
        try:
            # `is not None`, not truthiness: headers=0 or "" is a mistake to report, not "no headers".
            header_pairs = validate_headers(headers) if headers is not None else None
            if self._see_headers and header_pairs is None:
                header_pairs = []  # a serializer may add headers (a schema id): it is given this list

            # Serializers: a configured one sees every key/value, None and bytes included (Java's
            # KafkaProducer calls it for every record, null too: a JSON serializer may write `null`,
            # an encrypting or framing one must not be skipped for bytes; the ready-made serializers
            # map None to None). An async one is awaited here, the key's before the value's; a result
            # that is bytes or None (every synchronous serializer's) costs one type check more.
            key_serializer, value_serializer = hooks.key_serializer, hooks.value_serializer
            if key_serializer is None and (key is None or type(key) is bytes):
                key_bytes = key
            else:
                key_bytes = serialize(key_serializer, topic, header_pairs, key, "key")
                if key_bytes is not None and type(key_bytes) is not bytes:
                    key_bytes = await awaited(key_bytes, topic, "key")
            if value_serializer is None and (value is None or type(value) is bytes):
                value_bytes = value
            else:
                value_bytes = serialize(value_serializer, topic, header_pairs, value, "value")
                if value_bytes is not None and type(value_bytes) is not bytes:
                    value_bytes = await awaited(value_bytes, topic, "value")
            if self._see_headers:
                assert header_pairs is not None
                header_pairs = validate_headers(header_pairs)  # what the serializers added, checked as the caller's
            header_pairs = header_pairs or None
            if tracing is not None:  # the span's context, before the record is encoded; the caller's own kept
                header_pairs = tracing.inject(span, header_pairs)

            # Metadata: the first wait point.
            deadline: float | None = None
            # Cleared whenever new metadata arrives. Not a str: wait_on_metadata says what is wrong.
            partitions = self.topic_partitions.get(topic) if type(topic) is str else None
            if partitions is None:
                deadline = self._clock() + self._max_block_ms
                partitions = await self.wait_on_metadata(topic, self._max_block_ms)
            num_partitions = partitions.num_partitions

            if timestamp_ms is None:
                timestamp_ms = _now_ns() // 1_000_000
            elif type(timestamp_ms) is not int or not 0 <= timestamp_ms <= _MAX_INT64:
                raise InvalidRecordError(
                    f"invalid timestamp_ms {timestamp_ms!r}: it must be an integer in 0..2**63-1 (ms since the epoch)"
                )

            # Partitioner.
            if partition is not None:
                partition = check_partition(partition, num_partitions, topic)
            elif hooks.partitioner is not None:
                partition = check_partition(
                    hooks.partitioner(topic, key, key_bytes, value, value_bytes, self._client.metadata),
                    num_partitions,
                    topic,
                )
            elif key_bytes is not None and not hooks.ignore_keys:
                partition = partition_for_key(key_bytes, num_partitions)
            else:  # no partition, key or partitioner: the accumulator's sticky partition
                partition = UNKNOWN_PARTITION
            accumulator = self._accumulator
            future = accumulator.try_append(topic, partition, timestamp_ms, key_bytes, value_bytes, header_pairs, on_delivery, partitions)
            if future is None:  # memory must be waited for, within what is left of max.block.ms
                remaining = self._max_block_ms if deadline is None else max(0.0, deadline - self._clock())
                future = await accumulator.wait_and_append(
                    topic, partition, timestamp_ms, key_bytes, value_bytes, header_pairs, on_delivery, remaining, partitions
                )
        except BaseException as exc:  # a cancelled wait for metadata or memory ends the span too
            if tracing is not None:
                tracing.fail(span, span_start, exc)
            if hooks.interceptors and isinstance(exc, Exception):
                self._on_send_error(exc)
            raise
        if tracing is not None:  # the record's batch ends its span when the broker answered (batch.complete)
            tracing.attach(span, span_start, future)
        return future

    async def send_serialized(
        self, topic: str, value: Any, key: Any, on_delivery: DeliveryCallback | None
    ) -> FutureRecordMetadata | None:
        """The serializing route: what ``send()`` does when serializers are the only hook, without the checks
        for hooks this producer has none of (3.8 against 1.6 µs a record, measured with a serializer returning
        its argument; benchmarks/avro_send.py). None (nothing called yet) for what only ``send()`` takes: a
        topic whose metadata is not known yet, a key or value that is neither bytes nor None without a serializer.
        """
        try:
            partitions = self.topic_partitions.get(topic)
        except TypeError:  # an unhashable topic: send() says what is wrong with it
            return None
        if partitions is None:
            return None
        hooks = self.hooks
        key_serializer, value_serializer = hooks.key_serializer, hooks.value_serializer
        if (key_serializer is None and key is not None and type(key) is not bytes) or (
            value_serializer is None and value is not None and type(value) is not bytes
        ):
            return None  # str, bytearray, ...: send() converts them (or says why it cannot)
        if on_delivery is not None and on_delivery is not self._on_delivery_ok:
            self._on_delivery_ok = check_on_delivery(on_delivery)
        added: list[tuple[str, bytes | None]] | None = [] if self._see_headers else None
        key_bytes = key
        if key_serializer is not None:  # None too, as in Java (send() says why)
            key_bytes = serialize(key_serializer, topic, added, key, "key")
            if key_bytes is not None and type(key_bytes) is not bytes:
                key_bytes = await awaited(key_bytes, topic, "key")
        value_bytes = value
        if value_serializer is not None:
            value_bytes = serialize(value_serializer, topic, added, value, "value")
            if value_bytes is not None and type(value_bytes) is not bytes:
                value_bytes = await awaited(value_bytes, topic, "value")
        header_pairs = validate_headers(added) if added else None
        if self.serializing is None:  # withdrawn while an async serializer ran
            raise ProducerClosedError("the producer was closed while a serializer ran")
        partitions = self.topic_partitions.get(topic) or partitions  # newer metadata, if an async serializer waited
        partition = UNKNOWN_PARTITION if key_bytes is None else _partition_for_key(key_bytes, partitions.num_partitions)
        timestamp_ms = _now_ns() // 1_000_000
        accumulator = self._accumulator
        future = accumulator.try_append(topic, partition, timestamp_ms, key_bytes, value_bytes, header_pairs, on_delivery, partitions, 0)
        if future is None:  # memory must be waited for, within max.block.ms
            future = await accumulator.wait_and_append(
                topic, partition, timestamp_ms, key_bytes, value_bytes, header_pairs, on_delivery, self._max_block_ms, partitions
            )
        return future

    # ------------------------------------------------------------------ a run of records
    async def send_many(
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None,
        on_delivery: DeliveryCallback | None,
    ) -> list[FutureRecordMetadata]:
        """``send_many()``'s records, its arguments checked: the plain route in bulk, anything else one by one."""
        futures: list[FutureRecordMetadata] = []
        if self.plain is not None and topic not in self.topic_partitions:
            await self.wait_on_metadata(topic, self._max_block_ms)  # once, not per record
        if keys is None:
            return await self._send_many_keyless(topic, values, on_delivery, futures)
        append = futures.append
        for key, value in zip(keys, values):
            future = None
            accumulator, partitions = self.plain, self.topic_partitions.get(topic)
            if accumulator is not None and partitions is not None and type(value) is bytes:
                if type(key) is bytes:
                    partition = _partition_for_key(key, partitions.num_partitions)
                    future = accumulator.try_append(topic, partition, _now_ns() // 1_000_000, key, value, None, on_delivery, partitions, 0)
                elif key is None:
                    future = accumulator.try_append(
                        topic, UNKNOWN_PARTITION, _now_ns() // 1_000_000, None, value, None, on_delivery, partitions, 0
                    )
            if future is None:
                future = await self.send_one(topic, value, key, on_delivery)
            append(future)
        return futures

    async def _send_many_keyless(
        self, topic: str, values: Sequence[Any], on_delivery: DeliveryCallback | None, futures: list[FutureRecordMetadata]
    ) -> list[FutureRecordMetadata]:
        """``send_many()`` without keys: a record opens or joins the sticky batch, the ones after it fill that batch.

        Each run is one ``RecordAccumulator.try_append_run`` (the sticky partition's batch
        filled, its records counted once), with the create time of the record that led it.
        Anything else (a value not ``bytes``, no memory now) goes one by one, in order.
        """
        i, count = 0, len(values)
        while i < count:
            accumulator, partitions = self.plain, self.topic_partitions.get(topic)
            if accumulator is not None and partitions is not None:
                stop = accumulator.try_append_run(topic, partitions, _now_ns() // 1_000_000, values, i, on_delivery, futures)
                if stop > i:
                    i = stop
                    continue
            futures.append(await self.send_one(topic, values[i], None, on_delivery))
            i += 1
        return futures

    async def send_one(self, topic: str, value: Any, key: Any, on_delivery: DeliveryCallback | None) -> FutureRecordMetadata:
        """One record of ``send_many()`` that its bulk path cannot take: the serializing route, else the general one.

        Re-admitted first: a record before it may have waited, and the producer may have closed meanwhile.
        """
        self._admit("send_many()")
        if self.serializing is not None:
            future = await self.send_serialized(topic, value, key, on_delivery)
            if future is not None:
                return future
        return await self.send(topic, value, key, None, None, None, on_delivery)

    # ------------------------------------------------------------------ Arrow rows
    async def send_arrow(self, topic: str, records: ArrowRecords) -> ArrowDelivery:
        """Every row of ``records`` into the accumulator, natively; the delivery of the rows queued so far on failure."""
        deadline = self._clock() + self._max_block_ms
        partitions = self.topic_partitions.get(topic)
        if partitions is None:
            partitions = await self.wait_on_metadata(topic, self._max_block_ms)
            self._admit("send_arrow()")  # the wait may have seen the producer close
        accumulator = self._accumulator
        groups = records.plan(partitions.num_partitions, min(accumulator.config.max_request_size, accumulator.pool.total), topic)
        delivery = ArrowDelivery(records, asyncio.get_running_loop())
        try:
            for partition, start, stop in groups:
                at = accumulator.try_append_arrow(topic, partition, records, start, stop, delivery, partitions)
                while at < stop:
                    remaining = max(0.0, deadline - self._clock())
                    at = await accumulator.append_arrow(topic, partition, records, at, stop, delivery, partitions, remaining)
        except BaseException as exc:
            # Counted natively as rows go in, not from `at`: a failure inside an append (after
            # some of its batches filled) must hand back exactly the rows the batches hold.
            delivery.truncate(records.appended)
            exc.delivery = delivery  # type: ignore[attr-defined]
            raise
        finally:
            records.release_data()  # the rows are encoded: the Arrow buffers go back to their owner now
        return delivery

    # ------------------------------------------------------------------ metadata
    async def partitions_for(self, topic: str) -> TopicPartitions:
        """``Producer.partitions_for()``: the topic's partitions, waiting up to ``max.block.ms``."""
        return await self.wait_on_metadata(topic, self._max_block_ms)

    async def wait_on_metadata(self, topic: str, max_wait_ms: float) -> TopicPartitions:
        """The topic's partitions from metadata, waiting (and refreshing) up to ``max_wait_ms``.

        The snapshot is the one the metadata built (``ClusterMetadata.partitions_snapshot``);
        ``topic_partitions`` keeps a reference to it until the client installs new metadata,
        so the common ``send()`` does one dict lookup and skips validation and tracking.
        """
        # Before the name is tracked: one bad name must not make every later Metadata request fail.
        validate_topic(topic)
        client = self._client
        client.add_topic(topic)  # in use now: metadata.max.idle.ms counts from here
        deadline = self._clock() + max_wait_ms
        wait_ms = max_wait_ms  # the first wait gets it all: its timeout message names the caller's max.block.ms
        snapshot = client.metadata.partitions_snapshot(topic)
        while snapshot is None:  # not known yet, or gone again from metadata installed since the wait ended
            await self._client_wait(topic, wait_ms)
            snapshot = client.metadata.partitions_snapshot(topic)
            wait_ms = max(0.0, deadline - self._clock())
        self.topic_partitions[topic] = snapshot
        return snapshot

    async def _client_wait(self, topic: str, max_wait_ms: float) -> tuple[int, ...]:
        """``client.wait_for_metadata()``; a ``close()`` meanwhile ends it with ``ProducerClosedError``.

        ``close()`` interrupts the client's waits (see ``KafkaClient.interrupt_waits``): a
        record that waited for metadata could not be queued any more, so its caller learns
        at once why, instead of at ``max.block.ms`` or by a ``CancelledError``.
        """
        try:
            partitions = await self._client.wait_for_metadata(topic, max_wait_ms)
        except ClientClosedError as exc:
            raise ProducerClosedError(f"the producer was closed while waiting for metadata of topic {topic!r}") from exc
        if self._lifecycle.closing:  # the metadata came, but close() began meanwhile
            raise ProducerClosedError(f"the producer was closed while waiting for metadata of topic {topic!r}")
        return partitions

    # ------------------------------------------------------------------ interceptors
    def _intercept(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: HeadersArg,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> tuple[str, Any, Any, HeadersArg, int | None, int | None]:
        record = ProducerRecord(topic, value, key, tuple(validate_headers(headers)) if headers is not None else (), partition, timestamp_ms)
        for interceptor in self.hooks.interceptors:
            try:
                result = interceptor.on_send(record)
            except Exception:
                self._log.exception("interceptor %r raised in on_send; record passed on unchanged", interceptor)
                continue
            if isinstance(result, ProducerRecord):
                record = result
        return record.topic, record.value, record.key, record.headers or None, record.partition, record.timestamp_ms

    def _on_send_error(self, error: Exception) -> None:
        """A record that send() refused after the interceptors saw it: ``on_acknowledgement(None, error)``."""
        for interceptor in self.hooks.interceptors:
            safe_call(self._log, interceptor, "on_acknowledgement", None, error)


# ---------------------------------------------------------------------- the per-record stages
def serialize(
    serializer: SerializeFn | None, topic: str, headers: list[tuple[str, bytes | None]] | None, data: Any, side: str
) -> Any:
    """``data`` as bytes or None; or the awaitable an async serializer returned (``awaited`` finishes it)."""
    try:
        if serializer is not None:
            arity = serializer.arity
            if arity == 1:
                result = serializer.fn(data)
            elif arity == 2:
                result = serializer.fn(topic, data)
            else:
                result = serializer.fn(topic, headers, data)
        elif isinstance(data, str):
            return data.encode()
        elif isinstance(data, (bytes, bytearray, memoryview)):  # bytes subclasses too (numpy.bytes_)
            return bytes(data)
        else:
            raise SerializationError(
                f"cannot serialize {side} of type {type(data).__name__} for topic {topic!r}: "
                f"pass bytes or str, or configure {side}_serializer"
            )
    except SerializationError:
        raise
    except Exception as exc:
        raise SerializationError(f"the {side} serializer failed for topic {topic!r}: {exc!r}") from exc
    if result is None or type(result) is bytes or inspect.isawaitable(result):
        return result
    return _serialized_bytes(result, topic, side)


async def awaited(result: Any, topic: str, side: str) -> bytes | None:
    """What an async serializer's awaitable gives, checked as a synchronous serializer's result."""
    if not inspect.isawaitable(result):
        return _serialized_bytes(result, topic, side)
    try:
        result = await result
    except SerializationError:
        raise
    except Exception as exc:
        raise SerializationError(f"the {side} serializer failed for topic {topic!r}: {exc!r}") from exc
    if result is None or type(result) is bytes:
        return result
    return _serialized_bytes(result, topic, side)


def _serialized_bytes(result: Any, topic: str, side: str) -> bytes:
    """A serializer's result that is not ``bytes``: a bytes-like copied, anything else refused."""
    if isinstance(result, (bytes, bytearray, memoryview)):
        return bytes(result)
    raise SerializationError(f"the {side} serializer for topic {topic!r} returned {type(result).__name__}, not bytes")


def validate_headers(headers: Any) -> list[tuple[str, bytes | None]]:
    """Headers as a list of (str, bytes|None) pairs, in order, duplicates kept; anything else is an error."""
    if isinstance(headers, Mapping):
        items: Iterable[Any] = headers.items()
    elif isinstance(headers, (list, tuple)):
        items = headers
    else:
        raise InvalidRecordError(f"headers must be a list of (str, bytes) pairs or a mapping, got {type(headers).__name__}")
    result: list[tuple[str, bytes | None]] = []
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InvalidRecordError(f"a header must be a (str, bytes) pair, got {item!r}")
        name, value = item
        if not isinstance(name, str):
            raise InvalidRecordError(f"a header key must be str, got {type(name).__name__}")
        try:
            name.encode()
        except UnicodeEncodeError as exc:
            raise InvalidRecordError(f"header key {name!r} cannot be encoded as UTF-8: {exc.reason}") from None
        if value is not None and type(value) is not bytes:
            if isinstance(value, (bytes, bytearray, memoryview)):  # bytes subclasses too (numpy.bytes_)
                value = bytes(value)
            elif isinstance(value, str):
                try:
                    value = value.encode()
                except UnicodeEncodeError as exc:
                    raise InvalidRecordError(f"header {name!r}: its str value cannot be encoded as UTF-8: {exc.reason}") from None
            else:
                raise InvalidRecordError(
                    f"header {name!r} has a value of type {type(value).__name__}: it must be bytes or None"
                )
        result.append((name, value))
    return result
