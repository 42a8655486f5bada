"""confluent-kafka's ``AIOProducer`` shape, over :class:`aioproducer.Producer`.

A program written for ``confluent_kafka.aio.AIOProducer`` runs with its import changed::

    from aioproducer.compat.confluent import AIOProducer, KafkaException   # was: from confluent_kafka.aio ...

Its configuration dict keeps librdkafka's keys: ``Producer`` reads that dialect itself (each
key translated to Java's, accepted with a warning, or refused naming the key to use;
docs/reference/librdkafka.md). ``produce()`` returns, once the record is queued, a future of the
delivered :class:`Message`; errors are :class:`KafkaException` holding a :class:`KafkaError`
with ``code()``, ``retriable()``, ``fatal()`` and ``txn_requires_abort()`` methods.

Differences on purpose: idempotence is on unless the configuration says
``enable.idempotence: false`` (librdkafka: off); delivery callbacks run on the event loop
as records complete, so ``poll()`` has nothing to do and returns 0; keyed records go to
``murmur2(key)`` partitions (Java's, librdkafka's ``murmur2_random``) unless the configuration
names librdkafka's ``partitioner`` (``consistent_random``, its default, among them).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from aioproducer import errors as _errors
from aioproducer.producer import Producer

__all__ = ["TIMESTAMP_CREATE_TIME", "TIMESTAMP_LOG_APPEND_TIME", "AIOProducer", "KafkaError", "KafkaException", "Message"]

_log = logging.getLogger("aioproducer.compat.confluent")

#: ``Message.timestamp()``'s first item, librdkafka's timestamp types.
TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
"""``Message.timestamp()[0]``: the producer's create time (librdkafka's value)."""
TIMESTAMP_LOG_APPEND_TIME = 2
"""``Message.timestamp()[0]``: the broker's log-append time (librdkafka's value)."""

#: The configuration keys that are confluent-kafka's delivery callback: the default ``on_delivery``.
_DELIVERY_KEYS = ("on_delivery", "dr_cb", "dr_msg_cb")

#: ``AIOProducer`` arguments of confluent-kafka's thread-pool design, with why they are not needed here.
_IGNORED = {
    "max_workers": "no thread pool: the producer runs on the event loop",
    "executor": "no thread pool: the producer runs on the event loop",
    "batch_size": "records are batched by batch.size (bytes) and linger.ms, as Java's producer does",
    "buffer_timeout": "records are batched by batch.size (bytes) and linger.ms, as Java's producer does",
}


class KafkaError:
    """An error as confluent-kafka describes it: a code, a name, a reason, and what may be done about it.

    Codes: a broker's error is Kafka's code (``KafkaError.MSG_SIZE_TOO_LARGE`` is 10); a local
    one is librdkafka's negative code (``KafkaError._MSG_TIMED_OUT``). ``exception`` is the
    aioproducer error it stands for.
    """

    NO_ERROR = 0
    MSG_SIZE_TOO_LARGE = 10
    _BAD_MSG = -199
    _DESTROY = -197
    _FAIL = -196
    _TRANSPORT = -195
    _MSG_TIMED_OUT = -192
    _UNKNOWN_PARTITION = -190
    _UNKNOWN_TOPIC = -188
    _ALL_BROKERS_DOWN = -187
    _INVALID_ARG = -186
    _TIMED_OUT = -185
    _QUEUE_FULL = -184
    _SSL = -181
    _STATE = -172
    _NOT_IMPLEMENTED = -170
    _AUTHENTICATION = -169
    _UNSUPPORTED_FEATURE = -165
    _KEY_SERIALIZATION = -162
    _VALUE_SERIALIZATION = -161
    _INVALID_TYPE = -154
    _PURGE_QUEUE = -152
    _PURGE_INFLIGHT = -151
    _FATAL = -150
    _FENCED = -144

    __slots__ = ("_code", "_fatal", "_reason", "_retriable", "_txn_requires_abort", "exception")

    def __init__(
        self,
        error: int,
        reason: str | None = None,
        fatal: bool = False,
        retriable: bool = False,
        txn_requires_abort: bool = False,
        exception: BaseException | None = None,
    ) -> None:
        self._code = error
        self._reason = reason if reason is not None else _NAMES.get(error, f"error {error}")
        self._fatal, self._retriable, self._txn_requires_abort = fatal, retriable, txn_requires_abort
        #: The aioproducer error this stands for, if any.
        self.exception: BaseException | None = exception

    def code(self) -> int:
        return self._code

    def name(self) -> builtins.str:
        """The code's name, as librdkafka spells it (``_MSG_TIMED_OUT``, ``PRODUCER_FENCED``)."""
        return _NAMES.get(self._code, f"ERR_{self._code}")

    def str(self) -> str:
        return self._reason

    def fatal(self) -> bool:
        """The producer cannot go on (fenced, not authorized): close it."""
        return self._fatal

    def retriable(self) -> bool:
        """Trying the same again may succeed."""
        return self._retriable

    def txn_requires_abort(self) -> bool:
        """The transaction failed: abort it, then the producer may begin another."""
        return self._txn_requires_abort

    def __str__(self) -> builtins.str:
        return self._reason

    def __repr__(self) -> builtins.str:
        return f"KafkaError{{code={self.name()},val={self._code},str=\"{self._reason}\"}}"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KafkaError):
            return other._code == self._code
        return isinstance(other, int) and not isinstance(other, bool) and other == self._code

    def __hash__(self) -> int:
        return hash(self._code)

    def __bool__(self) -> bool:
        return self._code != 0


#: Code -> name: Kafka's names of the broker codes, with librdkafka's own spelling where it has one.
_NAMES: dict[int, str] = {code: cls.message for code, cls in _errors.ERRORS_BY_CODE.items()}
_NAMES.update({
    -1: "UNKNOWN", 2: "INVALID_MSG", 3: "UNKNOWN_TOPIC_OR_PART", 4: "INVALID_MSG_SIZE", 6: "NOT_LEADER_FOR_PARTITION",
    11: "STALE_CTRL_EPOCH", 17: "TOPIC_EXCEPTION",
})
_NAMES.update({value: name for name, value in vars(KafkaError).items() if isinstance(value, int) and name.lstrip("_").isupper()})


class KafkaException(_errors.KafkaError):
    """confluent-kafka's exception: ``exc.args[0]`` is the :class:`KafkaError`; the aioproducer error is its cause.

    An :class:`aioproducer.KafkaError` too, so that ``except aioproducer.KafkaError`` still catches it.
    """

    retriable: bool

    def __init__(self, error: KafkaError | int, reason: str | None = None) -> None:
        kafka_error = error if isinstance(error, KafkaError) else KafkaError(error, reason)
        super().__init__(kafka_error)
        self.retriable = kafka_error.retriable()

    @property
    def error(self) -> KafkaError:
        error = self.args[0]
        assert isinstance(error, KafkaError)
        return error

    def __str__(self) -> str:
        return str(self.args[0])


#: aioproducer's client-side errors -> librdkafka's local code of the same meaning (most specific first).
_LOCAL_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (_errors.KafkaTimeoutError, KafkaError._MSG_TIMED_OUT),
    (_errors.SslAuthenticationError, KafkaError._SSL),
    (_errors.AuthenticationError, KafkaError._AUTHENTICATION),
    (_errors.KafkaConnectionError, KafkaError._TRANSPORT),
    (_errors.ConfigError, KafkaError._INVALID_ARG),
    (_errors.InvalidRecordError, KafkaError._INVALID_ARG),
    (_errors.SerializationError, KafkaError._VALUE_SERIALIZATION),
    (_errors.RecordTooLargeError, KafkaError.MSG_SIZE_TOO_LARGE),
    (_errors.ProducerClosedError, KafkaError._DESTROY),
    (_errors.TransactionAbortedError, KafkaError._PURGE_QUEUE),
    (_errors.WrongEventLoopError, KafkaError._STATE),
    (_errors.IllegalStateError, KafkaError._STATE),
    (_errors.UnsupportedVersionError, KafkaError._UNSUPPORTED_FEATURE),
    (_errors.ProtocolError, KafkaError._BAD_MSG),
)

#: Errors after which the producer cannot go on (Java's fatal transaction and idempotence errors).
_FATAL = (
    _errors.ProducerFencedError,
    _errors.InvalidProducerEpochError,
    _errors.TransactionalIdAuthorizationFailedError,
    _errors.ClusterAuthorizationFailedError,
    _errors.AuthenticationError,
)


def kafka_error_of(exc: BaseException, transactional: bool = False) -> KafkaError:
    """The :class:`KafkaError` for an aioproducer error (``transactional``: it happened in a transaction)."""
    if isinstance(exc, _errors.BrokerResponseError):
        code = exc.errno
    else:
        code = next((c for cls, c in _LOCAL_CODES if isinstance(exc, cls)), KafkaError._FAIL)
    fatal = isinstance(exc, _FATAL)
    retriable = bool(getattr(exc, "retriable", False)) and not fatal
    return KafkaError(code, str(exc) or _NAMES.get(code), fatal, retriable, transactional and not fatal, exc)


def _exception(exc: BaseException, transactional: bool) -> BaseException:
    """``exc`` as confluent-kafka raises it: an aioproducer error becomes KafkaException; others stay themselves."""
    if isinstance(exc, _errors.KafkaError) and not isinstance(exc, KafkaException):
        wrapped = KafkaException(kafka_error_of(exc, transactional))
        wrapped.__cause__ = exc
        return wrapped
    return exc


class Message:
    """A delivered (or failed) record, with confluent-kafka's accessor methods."""

    __slots__ = ("_error", "_headers", "_key", "_latency", "_offset", "_partition", "_timestamp", "_topic", "_value")

    def __init__(
        self,
        topic: str,
        partition: int | None,
        offset: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        error: KafkaError | None,
        timestamp: tuple[int, int],
        latency: float | None,
    ) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset
        self._key, self._value, self._headers = key, value, headers
        self._error, self._timestamp, self._latency = error, timestamp, latency

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def error(self) -> KafkaError | None:
        """The record's error; None once it was delivered."""
        return self._error

    def timestamp(self) -> tuple[int, int]:
        """``(timestamp type, ms since the epoch)``; the type is ``TIMESTAMP_CREATE_TIME`` or ``TIMESTAMP_LOG_APPEND_TIME``."""
        return self._timestamp

    def latency(self) -> float | None:
        """Seconds from ``produce()`` to the broker's answer."""
        return self._latency

    def __len__(self) -> int:
        return 0 if self._value is None else len(self._value)

    def __repr__(self) -> str:
        return f"<Message {self._topic}[{self._partition}]@{self._offset}>"


DeliveryReport = Callable[[KafkaError | None, Message], Any]


class _Report:
    """One record's outcome, turned into a :class:`Message` for its callback and its future.

    Given to ``Producer.send()`` as the record's ``on_delivery`` (a bound method of one class,
    so that the producer checks its signature once), not chained to the record's future: that
    keeps ``produce()`` to one object and one future of its own per record.
    """

    __slots__ = ("callback", "future", "headers", "key", "result", "started", "topic", "transactional", "value")

    def __init__(
        self, result: asyncio.Future[Message], callback: DeliveryReport | None, transactional: bool,
        topic: str, key: Any, value: Any, headers: Any,
    ) -> None:
        self.result, self.callback, self.transactional = result, callback, transactional
        self.topic, self.key, self.value, self.headers = topic, key, value, headers
        self.started = time.monotonic()
        self.future: Any = None

    def deliver(self, metadata: Any, error: BaseException | None) -> None:
        """The producer's ``on_delivery(metadata, error)``: the callback, then the future."""
        latency = time.monotonic() - self.started
        kafka_error = None if error is None else kafka_error_of(error, self.transactional)
        key, value, headers = _raw(self.key), _raw(self.value), _header_list(self.headers)
        if kafka_error is not None or metadata is None:
            message = Message(self.topic, None, None, key, value, headers, kafka_error, (TIMESTAMP_NOT_AVAILABLE, 0), latency)
        else:
            created = getattr(self.future, "_timestamp", metadata.timestamp)
            kind = TIMESTAMP_LOG_APPEND_TIME if metadata.timestamp != created else TIMESTAMP_CREATE_TIME
            message = Message(metadata.topic, metadata.partition, metadata.offset, key, value, headers, None, (kind, metadata.timestamp), latency)
        if self.callback is not None:
            try:
                self.callback(kafka_error, message)
            except Exception:  # the program's callback failed: logged, delivery goes on (as in confluent-kafka)
                _log.exception("on_delivery callback failed for a record of %s", self.topic)
        if self.result.cancelled():
            return
        if kafka_error is None:
            self.result.set_result(message)
        else:
            exc = KafkaException(kafka_error)
            exc.__cause__ = error
            self.result.set_exception(exc)


class AIOProducer:
    """confluent-kafka's ``AIOProducer``: ``await produce(...)`` gives a future of the delivered :class:`Message`.

    ``AIOProducer(conf)`` takes librdkafka's keys (and Java's); ``on_delivery`` / ``dr_cb`` /
    ``dr_msg_cb`` in it are the default delivery callback ``cb(err, msg)``. ``max_workers``,
    ``executor``, ``batch_size`` and ``buffer_timeout`` are accepted and ignored (INFO line):
    nothing runs in threads here. The producer starts at the first call that needs it (or at
    ``async with``) and ``close()`` ends it; with ``transactional.id`` set, ``init_transactions()``
    is that start.
    """

    def __init__(self, producer_conf: Mapping[str, Any], **options: Any) -> None:
        if not isinstance(producer_conf, Mapping):
            raise TypeError(f"AIOProducer: producer_conf must be a dict of configuration keys, got {type(producer_conf).__name__}")
        for name, value in options.items():
            if name not in _IGNORED:
                raise TypeError(f"AIOProducer() got an unexpected keyword argument {name!r} (takes {', '.join(_IGNORED)})")
            _log.info("AIOProducer(%s=...) is ignored: %s", name, _IGNORED[name])
        conf = dict(producer_conf)
        callbacks = [conf.pop(key) for key in _DELIVERY_KEYS if key in conf]
        if len(callbacks) > 1:
            raise _errors.ConfigError(f"AIOProducer: give one delivery callback ({', '.join(_DELIVERY_KEYS)}), not {len(callbacks)}")
        self._on_delivery: DeliveryReport | None = _checked_callback("on_delivery", callbacks[0] if callbacks else None)
        try:
            self._producer = Producer(conf)
        except _errors.KafkaError as exc:
            raise _exception(exc, False) from exc
        self._transactional = self._producer.config.transactional_id is not None
        self._start: asyncio.Task[None] | None = None

    async def _started(self) -> Producer:
        """The producer, started once (concurrent first calls share the start)."""
        if self._start is None:
            self._start = asyncio.ensure_future(self._producer.start())
        try:
            await asyncio.shield(self._start)
        except _errors.KafkaError as exc:
            raise _exception(exc, False) from exc
        return self._producer

    async def __aenter__(self) -> AIOProducer:
        await self._started()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def producer(self) -> Producer:
        """The :class:`aioproducer.Producer` underneath (``metrics()``, ``send_many()``)."""
        return self._producer

    async def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = -1,
        on_delivery: DeliveryReport | None = None,
        timestamp: int = 0,
        headers: Mapping[str, Any] | Sequence[tuple[str, Any]] | None = None,
    ) -> asyncio.Future[Message]:
        """Queue a record; a future of its :class:`Message` once delivered (KafkaException if it failed).

        ``partition=-1``: the partitioner chooses; ``timestamp=0``: now. ``on_delivery(err, msg)``
        (or the configuration's) is called too, on the event loop, before the future completes.
        """
        producer = self._producer if self._start is not None and self._start.done() else await self._started()
        callback = on_delivery if on_delivery is not None else self._on_delivery
        if on_delivery is not None:
            _checked_callback("on_delivery", on_delivery)
        report = _Report(asyncio.get_running_loop().create_future(), callback, self._transactional, topic, key, value, headers)
        try:
            report.future = await producer.send(
                topic, value, key, headers, None if partition == -1 else partition, None if timestamp == 0 else timestamp,
                report.deliver,
            )
        except _errors.KafkaError as exc:
            raise _exception(exc, self._transactional) from exc
        return report.result

    async def flush(self, timeout: float = -1) -> int:
        """Wait until every queued record is delivered or failed; the number still queued (0, or more on timeout)."""
        producer = await self._started()
        try:
            await producer.flush(None if timeout is None or timeout < 0 else timeout)
        except _errors.KafkaTimeoutError:
            return max(1, producer._pending_records())
        return 0

    async def poll(self, timeout: float = 0) -> int:
        """Nothing to do: delivery callbacks run on the event loop as records complete. Returns 0."""
        return 0

    async def close(self) -> None:
        """Deliver what is queued, then close the connections."""
        if self._start is not None and not self._start.done():
            self._start.cancel()
        await self._producer.close()

    # ------------------------------------------------------------------ transactions
    async def init_transactions(self, timeout: float = -1) -> None:
        """Start the producer: with ``transactional.id`` set, that finds its coordinator and fences older instances."""
        await self._started()

    async def begin_transaction(self) -> None:
        producer = await self._started()
        try:
            producer.begin_transaction()
        except _errors.KafkaError as exc:
            raise _exception(exc, True) from exc

    async def commit_transaction(self, timeout: float = -1) -> None:
        try:
            await (await self._started()).commit_transaction()
        except _errors.KafkaError as exc:
            raise _exception(exc, True) from exc

    async def abort_transaction(self, timeout: float = -1) -> None:
        try:
            await (await self._started()).abort_transaction()
        except _errors.KafkaError as exc:
            raise _exception(exc, True) from exc

    async def send_offsets_to_transaction(self, positions: Sequence[Any], group_metadata: Any, timeout: float = -1) -> None:
        """Commit a group's positions with the transaction: ``TopicPartition`` objects with ``offset`` set.

        ``group_metadata``: a group id, or :class:`aioproducer.GroupMetadata`; a confluent-kafka
        consumer's ``consumer_group_metadata()`` is opaque to any other library, so it is refused
        with what to pass instead.
        """
        if not isinstance(positions, Sequence) or isinstance(positions, (str, bytes)):
            raise TypeError(f"send_offsets_to_transaction(positions=...) must be a list of TopicPartition, got {type(positions).__name__}")
        if type(group_metadata).__module__.startswith("cimpl") or type(group_metadata).__name__ == "ConsumerGroupMetadata":
            raise TypeError(
                "send_offsets_to_transaction(group_metadata=...): a confluent-kafka ConsumerGroupMetadata cannot be read "
                "here; pass the group id (a str) or aioproducer.GroupMetadata(group_id, generation_id, member_id)"
            )
        offsets = {(tp.topic, tp.partition): tp.offset for tp in positions}
        try:
            await (await self._started()).send_offsets_to_transaction(offsets, group_metadata)
        except _errors.KafkaError as exc:
            raise _exception(exc, True) from exc


def _checked_callback(name: str, callback: Any) -> Any:
    if callback is not None and not callable(callback):
        raise TypeError(f"{name} must be a callable cb(err, msg), got {type(callback).__name__}")
    return callback


def _raw(data: Any) -> bytes | None:
    """A key or value as the message gives it back: bytes (str encoded, as confluent-kafka does)."""
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    return bytes(data) if isinstance(data, (bytearray, memoryview)) else None


def _header_list(headers: Any) -> list[tuple[str, bytes | None]] | None:
    if not headers:
        return None
    items = headers.items() if isinstance(headers, Mapping) else headers
    return [(name, value.encode() if isinstance(value, str) else value) for name, value in items]

