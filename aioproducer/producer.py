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

import contextlib
import functools
import inspect
import os
import time
import uuid
import warnings
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Unpack

from aioproducer.config import ProducerConfig
from aioproducer.errors import (
    ConfigError,
    InvalidTopicError,
)
from aioproducer.internals.accumulator import UNKNOWN_PARTITION
from aioproducer.internals.batch import DeliveryCallback, FutureRecordMetadata, RecordMetadata
from aioproducer.internals.callbacks import check_on_delivery
from aioproducer.internals.engine import ProducerEngine
from aioproducer.internals.intake import HeadersArg, ProducerRecord, RecordIntake
from aioproducer.internals.parts import ProducerParts
from aioproducer.internals.transactions import (
    PreparedTransaction,
    Transactions,
    committed_offsets,
    offset_fetch_arguments,
)
from aioproducer.lifecycle import State
from aioproducer.logs import client_logger
from aioproducer._native import ArrowRecords
from aioproducer._native import partition_for_key as _partition_for_key
from aioproducer.arrow import ArrowDelivery
from aioproducer.security.connector import ConnectionSecurity
from aioproducer.topic import validate_topic

if TYPE_CHECKING:
    from aioproducer.config_types import ProducerConfigDict, ProducerKeywords, Properties
    from aioproducer.tracing import Tracing

__all__ = ["Producer", "ProducerRecord"]


_now_ns = time.time_ns  # a record's create time: one call and an integer division (cheaper than int(time() * 1000))
#: Started producers, for the fork hook below.
_live_producers: weakref.WeakSet[Producer] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """Close send()'s fast path in a forked child: the general path then says why the producer cannot work here."""
    for producer in list(_live_producers):
        producer._engine.after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)



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

    def __init__(
        self,
        config: ProducerConfigDict | Properties | None = None,
        *,
        tracing: bool | None = None,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        _parts: ProducerParts[Any] | None = None,
        **kwargs: Unpack[ProducerKeywords],
    ) -> None:
        self._config = cfg = ProducerConfig(config, **kwargs)
        tracing_class = _tracing_class(tracing, tracer_provider, meter_provider)  # checked first, as every argument
        for serializer, is_key in ((cfg.key_serializer, True), (cfg.value_serializer, False)):
            # Java's Serializer.configure(configs, isKey): a registry serializer learns its subject's suffix.
            configure = None if serializer is None else getattr(serializer.source, "configure", None)
            if callable(configure):
                configure(cfg.as_dict(), is_key)
        #: Every line this producer's parts log names its client.id (see logs.py); built here, handed down.
        self._log = client_logger("aioproducer", cfg.client_id)
        #: The door into the accumulator while records may enter (``internals/intake.py``), else None:
        #: send()'s one gate. Writer: the engine, through ``on_intake`` (start, close, a fatal error,
        #: the sender task's end, a fork).
        self._intake: RecordIntake | None = None
        #: What runs under this facade: the parts, the sender task, the lifecycle, the hooks (see
        #: internals/engine.py). Nothing it holds may hold this producer (a dropped producer must be
        #: collectable: __del__). ``_parts``: the parts that touch a cluster (internals/parts.py);
        #: FakeProducer's are in memory.
        self._engine = ProducerEngine(
            cfg,
            # TLS contexts and SASL credentials, checked now: a bad key fails here, not at the first connection.
            ConnectionSecurity.from_config(cfg),
            on_intake=_weak_setter(self, "_intake"),
            log=self._log,
            tracing=None if tracing_class is None else functools.partial(
                tracing_class, cfg.client_id, tracer_provider, meter_provider
            ),
            parts=_parts,
        )
        #: The engine's lifecycle, read only here (the engine moves it).
        self._lifecycle = self._engine.lifecycle

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
        await self._engine.start()
        _live_producers.add(self)

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now (ignoring ``linger.ms``) and wait until it completed.

        ``timeout``: seconds, None for as long as delivery takes; ``KafkaTimeoutError`` past it.
        """
        await self._engine.flush(_timeout_argument("flush", timeout))

    async def close(self, timeout: float | None = None) -> None:
        """Stop accepting records, deliver what is queued within ``timeout`` seconds, fail the rest.

        ``timeout=None`` waits as long as delivery takes (bounded by ``delivery.timeout.ms``);
        ``timeout=0`` fails everything not yet delivered at once. With a timeout, ``close()``
        returns within it: sockets not closed by then are dropped with their unsent bytes.
        With ``transactional.id``, an open transaction is aborted within the timeout (best effort,
        as Java's graceful close), a commit or abort that timed out is waited for, and a prepared
        one is left for ``complete_transaction()``.
        """
        timeout = _timeout_argument("close", timeout)  # checked first: a second close() must refuse it too
        if self._lifecycle.closing:
            return
        self._engine.check_context()  # here, not only in the engine's close: a wrong loop must not close the serializers
        try:
            await self._engine.close(timeout)
        finally:
            await self._close_serializers()

    async def _close_serializers(self) -> None:
        """Java's close: each serializer object with a ``close()`` is closed once, last; what it raises is logged."""
        closed: list[object] = []
        for serializer in (self._config.key_serializer, self._config.value_serializer):
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
        intake = self._intake
        if intake is not None:
            # The keyed record's native lane first, in one call with every argument as given: it
            # makes the checks below itself, at about 25 machine instructions a bytecode fewer
            # (the door at 1 KB 6,611 -> 5,840 a record: benchmarks/README.md, stop 66). None:
            # anything it does not take, which the paths below then see as before.
            lane = intake.keyed_lane
            if lane is not None:
                future = lane(intake.topic_partitions, topic, value, key, headers, partition, timestamp_ms, on_delivery)
                if future is not None:
                    return future
        if intake is not None and headers is None and partition is None and timestamp_ms is None:
            accumulator = intake.plain
            if accumulator is not None:
                # The common record: bytes in, default partitioner, nothing per record to run (the
                # plain route, ``Hooks.route``): straight into the accumulator, two frames deep.
                # Snapshots exist only for topics with partitions; anything else (a record that
                # must wait for metadata or memory, a key of another type) takes the general path.
                if type(value) is bytes:
                    try:
                        partitions = intake.topic_partitions.get(topic)
                    except TypeError:  # an unhashable topic: the general path says what is wrong with it
                        partitions = None
                    if partitions is not None and (key is None or type(key) is bytes):
                        # The lane refused a keyed record (a batch to open it could not, a callback
                        # not checked yet, a partition not seen yet): the door. Every argument given
                        # (reserved=0 too): CPython 3.11 then specializes the call for exact
                        # arguments, about 150 machine instructions per record fewer.
                        partition = UNKNOWN_PARTITION if key is None else _partition_for_key(key, partitions.num_partitions)
                        timestamp_ms = _now_ns() // 1_000_000
                        future = accumulator.try_append(
                            topic, partition, timestamp_ms, key, value, None, on_delivery, partitions, 0
                        )
                        if future is not None:
                            return future
                        # No buffer memory now: the wait, with nothing else left to check.
                        return await self._engine.admit("send()").wait_and_append(
                            topic, partition, timestamp_ms, key, value, on_delivery, partitions
                        )
            elif intake.serializing is not None:
                future = await intake.send_serialized(topic, value, key, on_delivery)
                if future is not None:
                    return future
        return await self._engine.admit("send()").send(topic, value, key, headers, partition, timestamp_ms, on_delivery)

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
        right now) goes through ``send()``'s own path, in order. The arguments are checked once,
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
        topic = _topic_argument(topic)
        if on_delivery is not None:
            check_on_delivery(on_delivery)
        intake = self._engine.admit("send_many()")
        return await intake.send_many(topic, values, keys, on_delivery)

    @property
    def send_arrow_refusal(self) -> str | None:
        """Why ``send_arrow()`` would refuse this producer (a per-record Python hook it cannot run), or None."""
        return self._engine.arrow_refusal()

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
        topic = _topic_argument(topic)
        refusal = self.send_arrow_refusal
        if refusal is not None:
            raise ConfigError(refusal)
        records = ArrowRecords(data, ignore_keys=self._config.partitioner_ignore_keys, now_ms=_now_ns() // 1_000_000,
                               row_outcomes=row_outcomes)
        return await self._engine.admit("send_arrow()").send_arrow(topic, records)

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
        await self._engine.complete_transaction(prepared, commit=commit)

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
        coordinators = self._engine.coordinators_for("committed_offsets()")
        if not requested:
            return {}
        return await committed_offsets(
            coordinators, group_id, requested, require_stable=require_stable, max_block_ms=self._config.max_block_ms
        )

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Producer]:
        """``async with producer.transaction():`` begin; commit on normal exit; abort on an exception, re-raised."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            if self._engine.transaction_abortable:
                await self.abort_transaction()
            raise
        await self.commit_transaction()

    def _require_transactions(self, call: str) -> Transactions:
        return self._engine.require_transactions(call)

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
        topic = _topic_argument(topic)
        partitions = await self._engine.admit("partitions_for()", records=False).partitions_for(topic)
        return list(range(partitions.num_partitions))

    async def client_instance_id(self, timeout: float) -> uuid.UUID | None:
        """The client instance id the cluster gave this producer for its telemetry (KIP-714), or None.

        Java's ``KafkaProducer.clientInstanceId(Duration)``: the id an operator finds this
        producer's pushed metrics under; waits up to ``timeout`` seconds for the first
        GetTelemetrySubscriptions answer, None if none came (a cluster without KIP-714).
        ``IllegalStateError`` with ``enable.metrics.push=false`` or before ``start()``; None in a
        ``FakeProducer`` (its broker, as one without KIP-714, gives no id).
        """
        seconds = _timeout_argument("client_instance_id", timeout)
        if seconds is None:
            raise ValueError("client_instance_id(): timeout must be a number of seconds >= 0, got None")
        return await self._engine.client_instance_id(seconds)

    def metrics(self) -> dict[str, Any]:
        """A snapshot: this producer's own counters, then the Java producer's metrics by their names.

        ``last_error`` is the error of the last batch that failed (None if none has): with the
        ``records_failed`` count, it tells a caller that kept no futures or callbacks what went
        wrong, as the Spark sink's tasks do (a callback per record costs a microsecond).
        The Java names (``record-send-total``, ``topic.<topic>.byte-total``,
        ``node-<id>.request-latency-avg`` …) are listed in ``aioproducer.internals.metrics.METRIC_DEFS``.
        """
        return self._engine.snapshot()

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

def _timeout_argument(call: str, timeout: Any) -> float | None:
    """``timeout`` as the seconds a call waits (None: no bound), or ``ValueError`` naming the call and argument.

    Checked before anything is waited for, whether or not there is anything to wait for, so that a
    wrong type fails the same way with records pending or not (and never as a ``TypeError`` from
    deep inside asyncio with a coroutine left un-awaited).
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise ValueError(f"{call}(): timeout must be a number of seconds >= 0 or None, got {timeout!r}")
    return float(timeout)


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


def _weak_setter(obj: object, attribute: str) -> Callable[[Any], None]:
    """Sets ``obj.attribute`` through a weak reference: the engine's callbacks must not keep a dropped producer alive."""
    ref = weakref.ref(obj)

    def set_(value: Any) -> None:
        target = ref()
        if target is not None:
            setattr(target, attribute, value)

    return set_
