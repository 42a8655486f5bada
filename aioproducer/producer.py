"""Producer: the public entry point, ``await producer.send(...)``.

``send()`` follows ``KafkaProducer.doSend`` step by step: interceptors →
serializers → metadata (the only wait besides buffer memory, together bounded
by ``max.block.ms``) → partitioner → size check → append to the
``RecordAccumulator``. It returns as soon as the record is queued, with a
``FutureRecordMetadata`` that completes when the broker acknowledged (or
refused) the record. The ``Sender`` task does the rest.

The common case does not suspend at all: metadata is cached, memory is free,
and the record goes into the partition's open batch synchronously.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import time
import uuid
import warnings
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from aioproducer.config import ProducerConfig
from aioproducer.errors import (
    ConfigError,
    IllegalStateError,
    InvalidRecordError,
    InvalidTopicError,
    ProducerClosedError,
    SerializationError,
)
from aioproducer.internals.accumulator import UNKNOWN_PARTITION, RecordAccumulator
from aioproducer.internals.batch import DeliveryCallback, FutureRecordMetadata, RecordMetadata
from aioproducer.internals.callbacks import check_on_delivery
from aioproducer.internals.engine import ProducerEngine, safe_call
from aioproducer.internals.transaction_manager import TransactionState
from aioproducer.internals.transactions import (
    PreparedTransaction,
    Transactions,
    committed_offsets,
    complete_prepared,
    offset_fetch_arguments,
)
from aioproducer.lifecycle import State
from aioproducer.logs import client_logger
from aioproducer.network.client import ClientClosedError, KafkaClient
from aioproducer._native import ArrowRecords
from aioproducer._native import partition_for_key as _partition_for_key
from aioproducer.arrow import ArrowDelivery
from aioproducer.partitioner import TopicPartitions, check_partition, partition_for_key
from aioproducer.security.connector import ConnectionSecurity
from aioproducer.serializers import SerializeFn
from aioproducer.topic import validate_topic

if TYPE_CHECKING:
    from aioproducer.logs import LogLike
    from aioproducer.network.metadata import ClusterMetadata
    from aioproducer.tracing import Tracing

__all__ = ["Producer", "ProducerRecord"]


_now_ns = time.time_ns  # a record's create time: one call and an integer division (cheaper than int(time() * 1000))
#: Started producers, for the fork hook below.
_live_producers: weakref.WeakSet[Producer] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """Close send()'s fast path in a forked child: the general path then says why the producer cannot work here."""
    for producer in list(_live_producers):
        producer._close_fast_paths()


os.register_at_fork(after_in_child=_after_fork_in_child)

HeadersArg = Optional[Sequence[tuple[str, Optional[bytes]]] | Mapping[str, Optional[bytes]]]

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


def _append_plain(
    accumulator: RecordAccumulator,
    partitions: TopicPartitions,
    topic: str,
    key: Any,
    value: bytes,
    on_delivery: DeliveryCallback | None,
) -> FutureRecordMetadata | None:
    """``send()``'s fast path, for ``send()`` and ``send_many()``: a record that needs nothing but partitioning.

    What ``_send()`` does for a ``bytes`` value with a ``bytes`` key (murmur2) or none (the
    accumulator's sticky partition), on a producer with nothing per record to intercept,
    serialize, partition or size-check (see ``Producer.start``). None when the key is of
    another kind or memory must be waited for: the caller then takes the general path.
    """
    if type(key) is bytes:
        # The native partition_for_key, without the Python wrapper's frame (a bytes key here).
        partition = _partition_for_key(key, partitions.num_partitions)
        # Every argument given (reserved=0 too): CPython 3.11 then specializes the call for exact
        # arguments, about 150 machine instructions per record fewer than filling in defaults.
        return accumulator.try_append(topic, partition, _now_ns() // 1_000_000, key, value, None, on_delivery, partitions, 0)
    if key is None:
        return accumulator.try_append(topic, UNKNOWN_PARTITION, _now_ns() // 1_000_000, None, value, None, on_delivery, partitions, 0)
    return None


class Producer:
    """An asyncio Kafka producer with the Java producer's configuration and guarantees.

    ``Producer({"bootstrap.servers": "host:9092", "linger.ms": 5})`` or
    ``Producer(bootstrap_servers="host:9092", linger_ms=5)``; use it as
    ``async with`` or call ``await start()`` / ``await close()``.

    OpenTelemetry (``pip install 'aioproducer[opentelemetry]'``): ``tracing=True`` gives each
    record sent with ``send()`` (and ``send_many()``) a span that ends when the broker
    acknowledged it or it failed, on the global tracer provider, or on ``tracer_provider=``,
    which switches tracing on by itself; the messaging metrics go to ``meter_provider=`` or the
    global one. Keywords of the producer, not configuration keys: a provider is an object of
    this process, which no properties file can name. See ``aioproducer/tracing.py``.
    """

    #: The last ``on_delivery`` that ``_send()`` checked and accepted (see there).
    _on_delivery_ok: object = None

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        tracing: bool | None = None,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        **kwargs: Any,
    ) -> None:
        self._config = cfg = ProducerConfig(config, **kwargs)
        tracing_class = _tracing_class(tracing, tracer_provider, meter_provider)  # checked first, as every argument
        self._key_serializer = cfg.key_serializer
        self._value_serializer = cfg.value_serializer
        for serializer, is_key in ((cfg.key_serializer, True), (cfg.value_serializer, False)):
            # Java's Serializer.configure(configs, isKey): a registry serializer learns its subject's suffix.
            configure = None if serializer is None else getattr(serializer.source, "configure", None)
            if callable(configure):
                configure(cfg.as_dict(), is_key)
        #: Whether a serializer takes the record's headers (``serialize(topic, headers, data)``): then the
        #: headers are a list it may append to, validated again after it.
        self._serializers_see_headers = any(s is not None and s.with_headers for s in (cfg.key_serializer, cfg.value_serializer))
        self._partitioner = cfg.partitioner_class
        self._ignore_keys = cfg.partitioner_ignore_keys
        self._interceptors: list[Any] = list(cfg.interceptor_classes)
        self._max_block_ms = cfg.max_block_ms
        #: Every line this producer's parts log names its client.id (see logs.py); built here, handed down.
        self._log = client_logger("aioproducer", cfg.client_id)
        # The fast path's gate: topics validated and tracked (add_topic) since the last metadata
        # update, each with its snapshot, which the metadata owns (not a copy). Writers: filled by
        # _wait_on_metadata; emptied by the client on every metadata update (given to the engine).
        self._topic_partitions: dict[str, TopicPartitions] = {}
        topic_partitions = self._topic_partitions
        #: What runs under this facade: the parts, the sender task, the lifecycle (see internals/engine.py).
        #: Nothing it holds may hold this producer (a dropped producer must be collectable: __del__).
        self._engine = self._new_engine(
            cfg,
            # TLS contexts and SASL credentials, checked now: a bad key fails here, not at the first connection.
            ConnectionSecurity.from_config(cfg),
            interceptors=self._interceptors,
            on_metadata=lambda _metadata: topic_partitions.clear(),
            on_stopped=_weak_callback(self._sender_done),
            log=self._log,
        )
        #: The engine's lifecycle, read only here (the engine moves it).
        self._lifecycle = self._engine.lifecycle
        #: OpenTelemetry, or None (then nothing of it is imported and send() pays nothing for it).
        self._tracing: Tracing | None = None if tracing_class is None else tracing_class(
            cfg.client_id, tracer_provider, meter_provider, metadata=self._engine.cluster_metadata
        )
        #: Whether send()'s fast path may open once started: nothing per record to intercept,
        #: serialize, partition, size-check, check against an open transaction or trace.
        self._plain = not (
            self._interceptors
            or self._key_serializer is not None
            or self._value_serializer is not None
            or self._partitioner is not None
            or self._ignore_keys
            or cfg.transactional_id is not None  # every record checks that a transaction is open
            or self._tracing is not None  # every record gets a span (in _send)
        )
        #: Whether the serializing fast path may open: serializers are the only per-record hook.
        self._serializing = not self._plain and not (
            self._interceptors
            or self._partitioner is not None
            or self._ignore_keys
            or cfg.transactional_id is not None
            or self._tracing is not None
        )
        # send()'s fast-path gates, derived: the accumulator while the lifecycle is RUNNING, the sender
        # task alive, the process the one start() ran in, and self._plain (or self._serializing). Writers:
        # set only by start() (_open_fast_path); cleared by whatever ends one of these (close(),
        # _sender_done, the fork hook), through _close_fast_paths.
        self._plain_accumulator: RecordAccumulator | None = None
        self._serializing_accumulator: RecordAccumulator | None = None

    def _new_engine(
        self,
        config: ProducerConfig,
        security: ConnectionSecurity,
        *,
        interceptors: Sequence[Any],
        on_metadata: Callable[[ClusterMetadata], None],
        on_stopped: Callable[[], None],
        log: LogLike,
    ) -> ProducerEngine:
        """The engine under this facade, made once by ``__init__``.

        A method so that a subclass runs other parts under the same facade: ``aioproducer.testing.FakeProducer``
        returns an engine whose parts are in memory. It must not hold this producer (see ``__init__``).
        """
        return ProducerEngine(
            config, security, interceptors=interceptors, on_metadata=on_metadata, on_stopped=on_stopped, log=log
        )

    @property
    def config(self) -> ProducerConfig:
        return self._config

    @property
    def ready(self) -> bool:
        """Whether ``send()`` can queue a record now: started, not closing, no fatal error, sender task alive.

        What a readiness probe asks: a producer that is not ready refuses records (or, before
        ``start()`` finished, cannot take them yet), so the service should get no traffic.
        It stays True while brokers are unreachable (records are queued and retried until
        ``delivery.timeout.ms``); :attr:`brokers_reachable` follows the brokers.
        """
        return self._engine.running

    @property
    def brokers_reachable(self) -> bool:
        """Whether the producer can reach a broker: False during an outage, for a probe that follows it.

        ``ready`` stays True through an outage, by design: ``send()`` still queues records,
        which are retried until ``delivery.timeout.ms``, so a service that keeps accepting
        loses nothing if the cluster comes back in time. This one follows the cluster: False
        from a connection attempt that failed while no connection to any broker was live,
        until a connection to a broker succeeds again (``KafkaClient.brokers_reachable``);
        a broker closing an idle connection does not make it False. False before ``start()``
        finished and once ``close()`` began. Each node's outage is also logged, once at
        WARNING when it begins and once at INFO when it ends (logger ``aioproducer.network.client``).
        """
        return self._engine.brokers_reachable

    # ------------------------------------------------------------------ lifecycle
    async def __aenter__(self) -> Producer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect to the cluster and start the sender task. Idempotent.

        Concurrent calls share one start (one client, one sender); a ``close()`` while
        starting cancels it, and the waiting ``start()`` calls raise ``ProducerClosedError``.
        Waits at most ``max.block.ms`` for the first metadata, then raises ``KafkaTimeoutError``.
        """
        engine = self._engine
        await engine.start()
        _live_producers.add(self)
        self._open_fast_path()

    def _open_fast_path(self) -> None:
        """Open ``send()``'s fast path, if this producer has one and the engine runs (checked now, on the loop)."""
        if self._plain and self._engine.running:
            self._plain_accumulator = self._engine.accumulator
        if self._serializing and self._engine.running:
            self._serializing_accumulator = self._engine.accumulator

    def _close_fast_paths(self) -> None:
        self._plain_accumulator = None
        self._serializing_accumulator = None

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now (ignoring ``linger.ms``) and wait until it completed."""
        await self._engine.flush(timeout)

    async def close(self, timeout: float | None = None) -> None:
        """Stop accepting records, deliver what is queued within ``timeout`` seconds, fail the rest.

        ``timeout=None`` waits as long as delivery takes (bounded by ``delivery.timeout.ms``);
        ``timeout=0`` fails everything not yet delivered at once. With a timeout, ``close()``
        returns within it: sockets not closed by then are dropped with their unsent bytes.
        With ``transactional.id``, an open transaction is aborted within the timeout (best effort,
        as Java's graceful close), a commit or abort that timed out is waited for, and a prepared
        one is left for ``complete_transaction()``.
        """
        if self._lifecycle.closing:
            return
        self._check_context()
        self._close_fast_paths()
        try:
            await self._engine.close(timeout)
        finally:
            await self._close_serializers()

    async def _close_serializers(self) -> None:
        """Java's close: each serializer object with a ``close()`` is closed once, last; what it raises is logged."""
        closed: list[object] = []
        for serializer in (self._key_serializer, self._value_serializer):
            source = None if serializer is None else serializer.source
            close = getattr(source, "close", None)
            if source is None or not callable(close) or any(source is c for c in closed):
                continue
            closed.append(source)
            try:
                result = close()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                self._log.exception("closing serializer %r raised", source)

    def _check_context(self) -> None:
        """Raise ``WrongEventLoopError`` unless called in the process and event loop that ``start()`` ran in."""
        self._engine.check_context()

    def _require_started(self) -> RecordAccumulator:
        return self._engine.require_started()

    # ------------------------------------------------------------------ send
    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> FutureRecordMetadata:
        """Queue one record; return its delivery future once it is in the accumulator.

        Suspends only for metadata or buffer memory, at most ``max.block.ms`` in
        total, then raises ``KafkaTimeoutError``. ``on_delivery(metadata, error)``
        is called when the record completes, in send order per partition; what it raises is
        logged, except ``SystemExit``/``KeyboardInterrupt``, which leave the event loop as from
        any asyncio callback (docs/reference/producer.md, "Delivery futures"). Either way delivery goes on.

        Works in the event loop and process ``start()`` ran in only (``WrongEventLoopError``
        elsewhere). The fast path below does not call ``asyncio.get_running_loop()`` (on
        Python 3.11 a ``getpid()`` system call, measured at 8 % of a send()): it closes when
        the sender task ends without ``close()``, as it does when ``asyncio.run()`` ends the
        producer's loop, and ``_send()`` checks the loop.
        """
        accumulator = self._plain_accumulator
        if (
            accumulator is not None
            and type(value) is bytes
            and headers is None
            and partition is None
            and timestamp_ms is None
        ):
            # The common record: bytes in, default partitioner, nothing to intercept or check
            # (see start()). A record that must wait for metadata or memory, or anything else,
            # takes the general path. Snapshots exist only for topics with partitions.
            try:
                partitions = self._topic_partitions.get(topic)
            except TypeError:  # an unhashable topic: _send() says what is wrong with it
                partitions = None
            if partitions is not None:
                future = _append_plain(accumulator, partitions, topic, key, value, on_delivery)
                if future is not None:
                    return future
        elif self._serializing_accumulator is not None and headers is None and partition is None and timestamp_ms is None:
            # Serializers are the only hook: what _send() does for such a record, without its
            # checks for hooks this producer has none of (3.8 against 1.6 µs a record, measured
            # with a serializer returning its argument; benchmarks/avro_send.py).
            try:
                partitions = self._topic_partitions.get(topic)
            except TypeError:
                partitions = None
            if partitions is not None:
                future = await self._send_serialized(partitions, topic, value, key, on_delivery)
                if future is not None:
                    return future
        return await self._send(topic, value, key, headers, partition, timestamp_ms, on_delivery)

    async def _send_serialized(
        self, partitions: TopicPartitions, topic: str, value: Any, key: Any, on_delivery: DeliveryCallback | None
    ) -> FutureRecordMetadata | None:
        """``send()``'s serializing fast path; None (nothing called yet) for a key or value only ``_send()`` takes."""
        key_serializer, value_serializer = self._key_serializer, self._value_serializer
        if (key_serializer is None and key is not None and type(key) is not bytes) or (
            value_serializer is None and value is not None and type(value) is not bytes
        ):
            return None  # str, bytearray, ...: _send() converts them (or says why it cannot)
        if on_delivery is not None and on_delivery is not self._on_delivery_ok:
            self._on_delivery_ok = check_on_delivery(on_delivery)
        added: list[tuple[str, bytes | None]] | None = [] if self._serializers_see_headers else None
        key_bytes = key
        if key is not None and key_serializer is not None:
            key_bytes = self._serialize(key_serializer, topic, added, key, "key")
            if key_bytes is not None and type(key_bytes) is not bytes:
                key_bytes = await _awaited(key_bytes, topic, "key")
        value_bytes = value
        if value is not None and value_serializer is not None:
            value_bytes = self._serialize(value_serializer, topic, added, value, "value")
            if value_bytes is not None and type(value_bytes) is not bytes:
                value_bytes = await _awaited(value_bytes, topic, "value")
        header_pairs = _validate_headers(added) if added else None
        accumulator = self._serializing_accumulator
        if accumulator is None:  # closed while an async serializer ran
            raise ProducerClosedError("the producer was closed while a serializer ran")
        partitions = self._topic_partitions.get(topic) or partitions  # newer metadata, if an async serializer waited
        partition = UNKNOWN_PARTITION if key_bytes is None else _partition_for_key(key_bytes, partitions.num_partitions)
        timestamp_ms = _now_ns() // 1_000_000
        future = accumulator.try_append(topic, partition, timestamp_ms, key_bytes, value_bytes, header_pairs, on_delivery, partitions, 0)
        if future is None:  # memory must be waited for, within max.block.ms
            future = await accumulator.append(
                topic, partition, timestamp_ms, key_bytes, value_bytes, header_pairs, on_delivery, self._max_block_ms, partitions
            )
        return future

    async def _send(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: HeadersArg,
        partition: int | None,
        timestamp_ms: int | None,
        on_delivery: DeliveryCallback | None,
    ) -> FutureRecordMetadata:
        """``send()`` for every record: interceptors, serializers, checks, partitioner, append."""
        lifecycle = self._lifecycle
        if lifecycle.closing:
            raise ProducerClosedError("send() called on a closed producer")
        self._check_context()
        if lifecycle.refusal is not None:  # the producer can send nothing any more
            raise lifecycle.refusal
        if self._engine.transactions is not None:
            self._engine.transactions.tm.require("send()", TransactionState.IN_TRANSACTION)
        if self._engine.sender_task is not None and self._engine.sender_task.done():
            raise ProducerClosedError(
                "the producer's sender task was cancelled without close() (did its event loop shut down?): "
                "nothing can be sent any more; create a new producer"
            )
        accumulator = self._engine.accumulator
        if accumulator is None:
            raise ProducerClosedError("the producer is not started: use 'async with Producer(...)' or 'await start()'")
        if type(topic) is not str and isinstance(topic, str):
            topic = str.__str__(topic)  # a str subclass (a StrEnum member): its text, as the fast path takes it
        if on_delivery is not None and on_delivery is not self._on_delivery_ok:
            # Now, not at the append: a record that waits for metadata or memory first would
            # otherwise report a bad callback as a timeout, or only after max.block.ms. The
            # last callable accepted is remembered: the check costs about a microsecond.
            self._on_delivery_ok = check_on_delivery(on_delivery)
        if self._interceptors:
            topic, value, key, headers, partition, timestamp_ms = self._intercept(
                topic, value, key, headers, partition, timestamp_ms
            )
        tracing = self._tracing
        if tracing is not None:  # after the interceptors: the span is named after the topic they chose
            span, span_start = tracing.start(topic, key, value)

        # Everything from here to the append is inside one `try` (free unless something raises), so
        # that a record refused by send() reaches the interceptors too (Java's onSendError).
        try:
            # `is not None`, not truthiness: headers=0 or "" is a mistake to report, not "no headers".
            header_pairs = _validate_headers(headers) if headers is not None else None
            if self._serializers_see_headers and header_pairs is None:
                header_pairs = []  # a serializer may add headers (a schema id): it is given this list

            # Serializers: a configured one sees every non-None key/value, bytes included (Java calls
            # it for every record; an encrypting or framing serializer must not be skipped for bytes).
            # An async one is awaited here, the key's before the value's; a result that is bytes or
            # None (every synchronous serializer's) costs one type check more than before.
            if key is None or (type(key) is bytes and self._key_serializer is None):
                key_bytes = key
            else:
                key_bytes = self._serialize(self._key_serializer, topic, header_pairs, key, "key")
                if key_bytes is not None and type(key_bytes) is not bytes:
                    key_bytes = await _awaited(key_bytes, topic, "key")
            if value is None or (type(value) is bytes and self._value_serializer is None):
                value_bytes = value
            else:
                value_bytes = self._serialize(self._value_serializer, topic, header_pairs, value, "value")
                if value_bytes is not None and type(value_bytes) is not bytes:
                    value_bytes = await _awaited(value_bytes, topic, "value")
            if self._serializers_see_headers:
                assert header_pairs is not None
                header_pairs = _validate_headers(header_pairs)  # what the serializers added, checked as the caller's
            header_pairs = header_pairs or None
            if tracing is not None:  # the span's context, before the record is encoded; the caller's own kept
                header_pairs = tracing.inject(span, header_pairs)

            # Metadata: the first wait point.
            deadline: float | None = None
            # Cleared whenever new metadata arrives. Not a str: _wait_on_metadata says what is wrong.
            partitions = self._topic_partitions.get(topic) if type(topic) is str else None
            if partitions is None:
                deadline = self._engine.clock() + self._max_block_ms
                partitions = await self._wait_on_metadata(topic, self._max_block_ms)
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
            elif self._partitioner is not None:
                partition = check_partition(
                    self._partitioner(topic, key, key_bytes, value, value_bytes, self._engine.client.metadata),  # type: ignore[union-attr]
                    num_partitions,
                    topic,
                )
            elif key_bytes is not None and not self._ignore_keys:
                partition = partition_for_key(key_bytes, num_partitions)
            else:  # no partition, key or partitioner: the accumulator's sticky partition
                partition = UNKNOWN_PARTITION
            future = accumulator.try_append(topic, partition, timestamp_ms, key_bytes, value_bytes, header_pairs, on_delivery, partitions)
            if future is None:  # memory must be waited for, within what is left of max.block.ms
                remaining = self._max_block_ms if deadline is None else max(0.0, deadline - self._engine.clock())
                future = await accumulator.append(
                    topic, partition, timestamp_ms, key_bytes, value_bytes, header_pairs, on_delivery, remaining, partitions
                )
        except BaseException as exc:  # a cancelled wait for metadata or memory ends the span too
            if tracing is not None:
                tracing.fail(span, span_start, exc)
            if self._interceptors and isinstance(exc, Exception):
                self._on_send_error(exc)
            raise
        if tracing is not None:  # the record's batch ends its span when the broker answered (batch.complete)
            tracing.attach(span, span_start, future)
        return future

    async def send_many(
        self,
        topic: str,
        values: Iterable[Any],
        keys: Iterable[Any] | None = None,
        *,
        on_delivery: DeliveryCallback | None = None,
    ) -> list[FutureRecordMetadata]:
        """Queue many records to one topic; the bulk form of ``send()``, same semantics.

        ``keys``, when given, pairs with ``values`` one to one (``None`` entries are keyless).
        Each record takes ``send()``'s fast path without a coroutine per record, with the
        metadata lookup done once per call; a record that path cannot take (a value that is
        not ``bytes``, a key neither ``bytes`` nor None, a producer with interceptors,
        serializers, a custom partitioner or ``partitioner.ignore.keys``, or no buffer memory
        right now) goes through ``send()`` itself, in order. The arguments are checked once,
        before any record is queued, each error naming its argument as ``send()``'s do; a
        record's own bad value or key fails as in ``send()``: the records before it are queued
        and the error is raised.
        """
        # Every argument is checked once per call, before any record is queued, and named as
        # send() names it: an empty `values` must not hide a bad topic or callback either.
        if type(values) is not list and type(values) is not tuple:
            values = _values_argument(values)
        if keys is not None:
            keys = _keys_argument(keys)
            if len(keys) != len(values):
                raise ValueError(f"send_many: {len(keys)} keys for {len(values)} values; they pair one to one")
        if type(topic) is not str or topic not in self._topic_partitions:
            topic = _topic_argument(topic)
        if on_delivery is not None and on_delivery is not self._on_delivery_ok:
            self._on_delivery_ok = check_on_delivery(on_delivery)
        self._check_context()
        futures: list[FutureRecordMetadata] = []
        append = futures.append
        if self._plain_accumulator is not None and topic not in self._topic_partitions:
            await self._wait_on_metadata(topic, self._max_block_ms)  # once, not per record
        if keys is None:
            return await self._send_many_keyless(topic, values, on_delivery, futures)
        accumulator = self._plain_accumulator
        partitions = self._topic_partitions.get(topic)
        for key, value in zip(keys, values):
            future = None
            if accumulator is not None and partitions is not None and type(value) is bytes:
                future = _append_plain(accumulator, partitions, topic, key, value, on_delivery)
            if future is None:
                future = await self.send(topic, value, key, on_delivery=on_delivery)
                # send() may have waited: the producer may be closed, the metadata newer.
                accumulator = self._plain_accumulator
                partitions = self._topic_partitions.get(topic)
            append(future)
        return futures

    async def _send_many_keyless(
        self, topic: str, values: Iterable[Any], on_delivery: DeliveryCallback | None, futures: list[FutureRecordMetadata]
    ) -> list[FutureRecordMetadata]:
        """``send_many()`` without keys: a record opens or joins the sticky batch, the ones after it fill that batch.

        Each run is one ``RecordAccumulator.try_append_run`` (the sticky partition's batch
        filled, its records counted once), with the create time of the record that led it.
        Anything else (a value not ``bytes``, no memory now) goes through ``send()``, in order.
        """
        values = values if isinstance(values, (list, tuple)) else list(values)
        accumulator = self._plain_accumulator
        partitions = self._topic_partitions.get(topic)
        i, count = 0, len(values)
        while i < count:
            if accumulator is not None and partitions is not None:
                stop = accumulator.try_append_run(topic, partitions, _now_ns() // 1_000_000, values, i, on_delivery, futures)
                if stop > i:
                    i = stop
                    continue
            futures.append(await self.send(topic, values[i], on_delivery=on_delivery))
            # send() may have waited: the producer may be closed, the metadata newer.
            accumulator = self._plain_accumulator
            partitions = self._topic_partitions.get(topic)
            i += 1
        return futures

    def _arrow_refusal(self) -> str | None:
        """Why this producer cannot take ``send_arrow()``, or None: per-record Python hooks it would skip."""
        hooks = [
            name
            for name, present in (
                ("interceptor.classes", bool(self._interceptors)),
                ("key.serializer", self._key_serializer is not None),
                ("value.serializer", self._value_serializer is not None),
                ("partitioner.class", self._partitioner is not None),
                ("tracing", self._tracing is not None),
            )
            if present
        ]
        if not hooks:
            return None
        return (
            f"send_arrow() appends rows natively, with no Python call per row, so it cannot honour this "
            f"producer's {', '.join(hooks)}: use send() or send_many(), or a producer without them"
        )

    async def send_arrow(self, topic: str, data: Any, *, row_outcomes: bool = False) -> ArrowDelivery:
        """Queue every row of an Arrow table, record batch or stream to ``topic``, with no Python object per row.

        ``data`` is anything with the Arrow PyCapsule interface (``__arrow_c_stream__``, or
        ``__arrow_c_array__`` for one record batch): a pyarrow Table or RecordBatch, a polars or
        pandas DataFrame, a DuckDB result. Its columns are named as Spark's Kafka sink names them:
        ``value`` (required; binary or string, any of the large/view layouts; null: a tombstone),
        ``key`` (same types; null: keyless), ``partition`` (int8..int64; null: the partitioner
        decides), ``headers`` (``list<struct<key: string, value: binary>>``) and ``timestamp``
        (timestamp of any unit and zone, or int64 milliseconds; null: now). Any other column,
        type or a dictionary-encoded column is a ``TypeError``/``ValueError`` naming it; a row
        with an out-of-range partition, a negative timestamp or a null header key is an
        ``InvalidRecordError``, a row too large a ``RecordTooLargeError``, each naming the row.
        All of it is checked before the first row is queued: an error queues nothing. A stream
        is read whole first (zero copy for in-memory data); pass record batches one by one to
        bound what is held.

        Each row is partitioned, encoded and appended natively, as ``send()`` would: the
        ``partition`` column, else murmur2 of the key (``partitioner.ignore.keys`` honoured),
        else the sticky partition, run by run. Rows keep their order within each partition;
        rows are grouped by partition 2,048 at a time, so within such a chunk the keyless rows
        that land on a partition follow its keyed rows rather than interleave with them. Batches, ``buffer.memory`` (waited for within
        ``max.block.ms``, as ``send()`` waits), idempotence, transactions and retries are the
        same path as ``send()``'s. A producer with interceptors, serializers, a custom
        partitioner or tracing is refused (``ConfigError``): they are per-record Python hooks.

        Returns once every row is queued, with an ``ArrowDelivery``: ``await`` it for the
        ``ArrowDeliveryReport`` (rows delivered and failed, the first errors with their row
        index, and each row's offset when ``row_outcomes=True``). If the call fails after rows
        were queued (``max.block.ms`` ran out waiting for memory, the producer closed, the call
        was cancelled), the error carries the delivery of exactly the rows queued so far as
        ``error.delivery``: its ``rows`` counts them, and it reports each of them.

        Malformed Arrow data (offsets that decrease or index past what they index, a column or
        field shorter than its parent, missing buffers: what another exporter, or a bug in one,
        may hand over) is a ``ValueError`` starting ``send_arrow: malformed Arrow data:``, raised
        before any row is queued.
        """
        if type(topic) is not str or topic not in self._topic_partitions:
            topic = _topic_argument(topic)
        refusal = self._arrow_refusal()
        if refusal is not None:
            raise ConfigError(refusal)
        records = ArrowRecords(data, ignore_keys=self._ignore_keys, now_ms=_now_ns() // 1_000_000, row_outcomes=row_outcomes)
        accumulator = self._ready_for_arrow()
        deadline = self._engine.clock() + self._max_block_ms
        partitions = self._topic_partitions.get(topic)
        if partitions is None:
            partitions = await self._wait_on_metadata(topic, self._max_block_ms)
            accumulator = self._ready_for_arrow()  # the wait may have seen the producer close
        groups = records.plan(partitions.num_partitions, min(accumulator.config.max_request_size, accumulator.pool.total), topic)
        delivery = ArrowDelivery(records, asyncio.get_running_loop())
        at = 0
        try:
            for partition, start, stop in groups:
                at = accumulator.try_append_arrow(topic, partition, records, start, stop, delivery, partitions)
                while at < stop:
                    remaining = max(0.0, deadline - self._engine.clock())
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

    def _ready_for_arrow(self) -> RecordAccumulator:
        """``_send()``'s checks, once per ``send_arrow()`` call: the accumulator, if rows may be queued now."""
        lifecycle = self._lifecycle
        if lifecycle.closing:
            raise ProducerClosedError("send_arrow() called on a closed producer")
        self._check_context()
        if lifecycle.refusal is not None:
            raise lifecycle.refusal
        if self._engine.transactions is not None:
            self._engine.transactions.tm.require("send_arrow()", TransactionState.IN_TRANSACTION)
        if self._engine.sender_task is not None and self._engine.sender_task.done():
            raise ProducerClosedError("the producer's sender task ended without close(): nothing can be sent any more")
        accumulator = self._engine.accumulator
        if accumulator is None:
            raise ProducerClosedError("the producer is not started: use 'async with Producer(...)' or 'await start()'")
        return accumulator

    # ------------------------------------------------------------------ transactions
    def begin_transaction(self) -> None:
        """Start a transaction (``transactional.id`` producers): records sent until commit or abort belong to it."""
        self._require_transactions("begin_transaction()").begin()

    async def commit_transaction(self) -> None:
        """Send and wait for every record of the transaction, then commit it; raises if any record failed.

        After such a failure the transaction can only be aborted (``abort_transaction()``).
        Fenced by another producer with the same ``transactional.id``: ``ProducerFencedError``,
        then from every call. Aborted by the coordinator after ``transaction.timeout.ms``:
        ``InvalidProducerEpochError``, and ``abort_transaction()`` goes on with a new epoch.
        Waits up to ``max.block.ms``, then raises ``KafkaTimeoutError``: the commit may still
        land, so it goes on, and calling ``commit_transaction()`` again waits for its outcome
        (Java's semantics); other transaction calls raise ``IllegalStateError`` until then.
        """
        await self._require_transactions("commit_transaction()").commit()

    async def abort_transaction(self) -> None:
        """Abort the transaction: records not yet sent fail, and no consumer reading committed data sees any of it.

        Fenced: ``ProducerFencedError``. A timeout is retried as ``commit_transaction()``'s is.
        """
        await self._require_transactions("abort_transaction()").abort()

    async def prepare_transaction(self) -> PreparedTransaction:
        """Two-phase commit, first phase: send and wait for every record, then leave the transaction open.

        Why: when the party that knows whether the whole job succeeded is not this producer
        (Spark's driver, for the transactions of its tasks), that party ends the transaction
        with ``complete_transaction(prepared)`` on any producer. Raises as
        ``commit_transaction()`` does if a record failed. Afterwards this producer can only end
        that transaction or be closed (closing does not abort it); the transaction is aborted if
        a producer starts with the same ``transactional.id`` or after ``transaction.timeout.ms``.
        """
        return await self._require_transactions("prepare_transaction()").prepare()

    async def complete_transaction(self, prepared: PreparedTransaction, *, commit: bool = True) -> None:
        """Commit (or with ``commit=False`` abort) a transaction prepared by this or any other producer.

        Works on any started producer, transactional or not; only the transaction coordinator
        is asked. Idempotent for the same outcome. A transaction fenced or timed out before
        this raises ``ProducerFencedError`` or ``InvalidProducerEpochError``: it was aborted.
        """
        if not isinstance(prepared, PreparedTransaction):
            raise TypeError(
                f"complete_transaction(prepared=...) takes what prepare_transaction() returned, not {type(prepared).__name__}"
            )
        if not isinstance(commit, bool):
            raise TypeError(f"complete_transaction(commit=...) must be a bool, got {type(commit).__name__}")
        self._check_context()
        if self._lifecycle.closing:
            raise ProducerClosedError("complete_transaction() called on a closed producer")
        self._require_started()
        coordinators = self._engine.coordinators
        assert coordinators is not None  # set with the accumulator
        next_producer = await complete_prepared(coordinators, prepared, commit=commit, max_block_ms=self._max_block_ms)
        if self._engine.transactions is not None:
            self._engine.transactions.completed(prepared, next_producer)

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, int], group_metadata: Any) -> None:
        """Commit a consumer's offsets (partition -> next offset to read) as part of the transaction.

        ``group_metadata``: the group id, or an object with ``group_id`` (and ``generation_id``,
        ``member_id``, ``group_instance_id`` to fence zombie consumers, KIP-447).
        """
        await self._require_transactions("send_offsets_to_transaction()").send_offsets(offsets, group_metadata)

    async def committed_offsets(
        self, group_id: str, partitions: Iterable[Any], *, require_stable: bool = True
    ) -> dict[tuple[str, int], int | None]:
        """The consumer group's committed offset (the next offset to read) of each partition; None where none.

        Why: ``send_offsets_to_transaction()`` commits a group's offsets only if the transaction
        commits. A writer that restarts (``init_transactions()`` in ``start()`` fenced its previous
        incarnation and ended the transaction it left open) reads here what its last committed
        transaction stored, to resume from exactly there. Works on any started producer, transactional or not.

        ``partitions``: ``(topic, partition)`` pairs or any client's ``TopicPartition`` (the keys
        of the dict given to ``send_offsets_to_transaction()`` will do). ``require_stable``: while
        a transaction with offsets for the group is pending, wait for its outcome (retried up to
        ``max.block.ms``, then ``KafkaTimeoutError``) instead of reading the offsets before it.
        Pending includes just after ``commit_transaction()`` returns: the broker writes the commit
        markers after it answers. It needs Kafka 2.5+ (OffsetFetch v7), else ``UnsupportedVersionError``. Broker errors raise
        their class naming the group and partition; bad arguments ``TypeError``/``ValueError``.
        """
        requested = offset_fetch_arguments(group_id, partitions)
        if not isinstance(require_stable, bool):
            raise TypeError(f"committed_offsets(require_stable=...) must be a bool, got {type(require_stable).__name__}")
        if self._lifecycle.closing:
            raise ProducerClosedError("committed_offsets() called on a closed producer")
        self._require_started()
        coordinators = self._engine.coordinators
        assert coordinators is not None  # set with the accumulator
        if not requested:
            return {}
        return await committed_offsets(
            coordinators, group_id, requested, require_stable=require_stable, max_block_ms=self._max_block_ms
        )

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Producer]:
        """``async with producer.transaction():`` begin; commit on normal exit; abort on an exception, re-raised."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            transactions = self._engine.transactions
            if transactions is not None and transactions.tm.state in (
                TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR
            ):
                await self.abort_transaction()
            raise
        await self.commit_transaction()

    def _require_transactions(self, call: str) -> Transactions:
        self._check_context()
        if self._config.transactional_id is None:
            raise IllegalStateError(f"{call} needs a transactional producer: set transactional.id")
        if self._lifecycle.closing:
            raise ProducerClosedError(f"{call} called on a closed producer")
        transactions = self._engine.transactions
        if transactions is None:
            raise IllegalStateError(f"{call}: the producer is not started ('async with Producer(...)' or 'await start()')")
        return transactions

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: HeadersArg = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> RecordMetadata:
        """``send()`` and wait for the acknowledgement; returns the record's metadata."""
        future = await self.send(topic, value, key, headers, partition, timestamp_ms)
        return await future

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids, waiting for metadata up to ``max.block.ms``."""
        if self._lifecycle.closing:
            raise ProducerClosedError("partitions_for() called on a closed producer")
        self._require_started()
        partitions = await self._wait_on_metadata(_topic_argument(topic), self._max_block_ms)
        return list(range(partitions.num_partitions))

    async def client_instance_id(self, timeout: float) -> uuid.UUID | None:
        """The client instance id the cluster gave this producer for its telemetry (KIP-714), or None.

        Java's ``KafkaProducer.clientInstanceId(Duration)``: the id an operator finds this
        producer's pushed metrics under; waits up to ``timeout`` seconds for the first
        GetTelemetrySubscriptions answer, None if none came (a cluster without KIP-714).
        ``IllegalStateError`` with ``enable.metrics.push=false``, before ``start()``, or in a ``FakeProducer``.
        """
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
            raise ValueError(f"timeout must be a number of seconds >= 0, got {timeout!r}")
        if not self._config.enable_metrics_push:
            raise IllegalStateError("telemetry is not enabled: set enable.metrics.push to true")
        self._check_context()
        sender = self._engine.telemetry
        if sender is None:
            raise IllegalStateError("client_instance_id(): no telemetry runs: the producer is not started, "
                                    "or it has no cluster (a FakeProducer)")
        return await sender.client_instance_id(timeout)

    def metrics(self) -> dict[str, Any]:
        """A snapshot: this producer's own counters, then the Java producer's metrics by their names.

        ``last_error`` is the error of the last batch that failed (None if none has): with the
        ``records_failed`` count, it tells a caller that kept no futures or callbacks what went
        wrong, as the Spark sink's tasks do (a callback per record costs a microsecond).
        The Java names (``record-send-total``, ``topic.<topic>.byte-total``,
        ``node-<id>.request-latency-avg`` …) are listed in ``aioproducer.internals.metrics.METRIC_DEFS``.
        """
        return self._engine.snapshot()

    # ------------------------------------------------------------------ send helpers
    async def _wait_on_metadata(self, topic: str, max_wait_ms: float) -> TopicPartitions:
        """The topic's partitions from metadata, waiting (and refreshing) up to ``max_wait_ms``.

        The snapshot is the one the metadata built (``ClusterMetadata.partitions_snapshot``);
        ``_topic_partitions`` keeps a reference to it until the client installs new metadata,
        so the common ``send()`` does one dict lookup and skips validation and tracking.
        """
        # Before the name is tracked: one bad name must not make every later Metadata request fail.
        validate_topic(topic)
        client = self._engine.client
        assert client is not None
        client.add_topic(topic)  # in use now: metadata.max.idle.ms counts from here
        deadline = self._engine.clock() + max_wait_ms
        wait_ms = max_wait_ms  # the first wait gets it all: its timeout message names the caller's max.block.ms
        snapshot = client.metadata.partitions_snapshot(topic)
        while snapshot is None:  # not known yet, or gone again from metadata installed since the wait ended
            await self._client_wait(client, topic, wait_ms)
            snapshot = client.metadata.partitions_snapshot(topic)
            wait_ms = max(0.0, deadline - self._engine.clock())
        self._topic_partitions[topic] = snapshot
        return snapshot

    async def _client_wait(self, client: KafkaClient, topic: str, max_wait_ms: float) -> tuple[int, ...]:
        """``client.wait_for_metadata()``; a ``close()`` meanwhile ends it with ``ProducerClosedError``.

        ``close()`` interrupts the client's waits (see ``KafkaClient.interrupt_waits``): a
        record that waited for metadata could not be queued any more, so its caller learns
        at once why, instead of at ``max.block.ms`` or by a ``CancelledError``.
        """
        try:
            partitions = await client.wait_for_metadata(topic, max_wait_ms)
        except ClientClosedError as exc:
            raise ProducerClosedError(f"the producer was closed while waiting for metadata of topic {topic!r}") from exc
        if self._lifecycle.closing:  # the metadata came, but close() began meanwhile
            raise ProducerClosedError(f"the producer was closed while waiting for metadata of topic {topic!r}")
        return partitions

    @staticmethod
    def _serialize(
        serializer: SerializeFn | None, topic: str, headers: list[tuple[str, bytes | None]] | None, data: Any, side: str
    ) -> Any:
        """``data`` as bytes or None; or the awaitable an async serializer returned (``_awaited`` finishes it)."""
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

    def _intercept(
        self,
        topic: str,
        value: Any,
        key: Any,
        headers: HeadersArg,
        partition: int | None,
        timestamp_ms: int | None,
    ) -> tuple[str, Any, Any, HeadersArg, int | None, int | None]:
        record = ProducerRecord(topic, value, key, tuple(_validate_headers(headers)) if headers is not None else (), partition, timestamp_ms)
        for interceptor in self._interceptors:
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
        for interceptor in self._interceptors:
            safe_call(self._log, interceptor, "on_acknowledgement", None, error)

    def __del__(self) -> None:
        """A producer dropped while started warns, as asyncio does for an unclosed transport, and stops its tasks.

        May run at any time, on any thread, during interpreter shutdown too: never raises,
        and leaves the loop to the engine's ``abandon()`` (``call_soon_threadsafe``, only
        while the loop is not closed). In a forked child it does nothing: the parent owns the producer.
        """
        try:
            engine = self._engine
            if engine.lifecycle.state is not State.RUNNING or engine.pid != os.getpid():
                return
            pending = engine.pending_records()
            engine.abandon()  # FORCED now, so that nothing else begins; the rest on the loop
            warnings.warn(
                f"unclosed {self!r} with {pending} records not yet delivered: "
                "use 'async with Producer(...)' or 'await producer.close()'",
                ResourceWarning,
                source=self,
            )
        except Exception:  # noqa: BLE001 - __del__ must not raise, whatever state it finds
            pass

    def _pending_records(self) -> int:
        return self._engine.pending_records()

    def _sender_done(self) -> None:
        """The sender task ended: every later ``send()`` takes the path that says why.

        Before ``close()``, it died or was cancelled from outside: ``asyncio.run()`` cancels
        every task when its loop ends, which is how a producer started under one
        ``asyncio.run()`` and used under the next one is told from its fast path for free.
        """
        self._close_fast_paths()


def _tracing_class(tracing: Any, tracer_provider: Any, meter_provider: Any) -> type[Tracing] | None:
    """The producer's OpenTelemetry class, its keywords checked; None (nothing imported) when tracing is off."""
    if tracing is not None and type(tracing) is not bool:
        raise ConfigError(f"tracing must be True or False, got {tracing!r}")
    if tracing is None:
        tracing = tracer_provider is not None
    if not tracing:
        if tracer_provider is not None:
            raise ConfigError("tracing=False with a tracer_provider: pass one or the other")
        if meter_provider is not None:
            raise ConfigError("meter_provider is used only with tracing on: pass tracing=True or a tracer_provider too")
        return None
    argument = "tracer_provider" if tracer_provider is not None else "tracing=True"
    try:
        from aioproducer.tracing import Tracing
    except ImportError as exc:
        raise ImportError(
            f"{argument}: OpenTelemetry tracing needs the opentelemetry-api library, which is not installed: "
            "pip install 'aioproducer[opentelemetry]'"
        ) from exc
    return Tracing


async def _awaited(result: Any, topic: str, side: str) -> bytes | None:
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


def _validate_headers(headers: Any) -> list[tuple[str, bytes | None]]:
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


def _topic_argument(topic: Any) -> str:
    """``topic`` as the plain ``str`` the producer keys everything by, else ``InvalidTopicError`` naming it.

    A ``str`` subclass (a ``StrEnum`` member, a common way to name topics) stands for its text:
    ``send()``'s fast path finds it by equality anyway, so refusing it elsewhere would make the
    same call succeed or fail depending on whether the topic was seen before.
    """
    if isinstance(topic, str):
        name = str.__str__(topic)  # the exact str, whatever the subclass's __str__ says
        validate_topic(name)
        return name
    validate_topic(topic)  # not a str: raises, naming the type
    raise InvalidTopicError(f"topic must be a str, got {type(topic).__name__}")  # not reached


_ONE_VALUE = (str, bytes, bytearray, memoryview)


def _values_argument(values: Any) -> list[Any] | tuple[Any, ...]:
    """``send_many(values=...)`` as a sequence; ``TypeError`` naming ``values`` for what cannot be one."""
    if isinstance(values, (list, tuple)):
        return values
    if isinstance(values, _ONE_VALUE):
        raise TypeError(
            f"send_many(values=...) takes an iterable of values, not one {type(values).__name__} "
            "(it would be sent one character or byte per record); use send() for one record"
        )
    if isinstance(values, Mapping):
        raise TypeError(
            f"send_many(values=...) takes an iterable of values, not a {type(values).__name__}: iterating it "
            "gives its keys; for its items pass values=list(m.values()), keys=list(m.keys())"
        )
    return list(_iterate("values", values))


def _keys_argument(keys: Any) -> list[Any] | tuple[Any, ...]:
    """``send_many(keys=...)`` (not None) as a sequence; ``TypeError`` naming ``keys`` for what cannot be one."""
    if isinstance(keys, (list, tuple)):
        return keys
    if isinstance(keys, _ONE_VALUE):
        raise TypeError(
            f"send_many(keys=...) takes an iterable of keys, not one {type(keys).__name__}; "
            "for one key for every record pass keys=[key] * len(values)"
        )
    return list(_iterate("keys", keys))


def _iterate(name: str, argument: Any) -> Iterator[Any]:
    """``iter(argument)``, or a ``TypeError`` naming the argument (not Python's "'int' object is not iterable")."""
    try:
        return iter(argument)
    except TypeError:
        kind = "None" if argument is None else type(argument).__name__
        raise TypeError(f"send_many({name}=...) takes an iterable of {name}, got {kind}") from None


def _weak_callback(method: Callable[[], None]) -> Callable[[], None]:
    """``method`` through a weak reference to its object: the loop's tasks must not keep a dropped producer alive."""
    ref = weakref.WeakMethod(method)

    def call() -> None:
        bound = ref()
        if bound is not None:
            bound()

    return call
