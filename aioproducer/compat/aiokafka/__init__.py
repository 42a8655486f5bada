"""``AIOKafkaProducer`` as aiokafka 0.14 shapes it, over :class:`aioproducer.Producer`.

A program written for aiokafka's producer runs with one line changed::

    from aioproducer.compat.aiokafka import AIOKafkaProducer   # was: from aiokafka import AIOKafkaProducer

Its keywords, methods and results keep aiokafka's names and argument order; what runs
underneath is aioproducer's producer, with its guarantees. Where the two differ on purpose,
the class docstring says so (defaults, ``api_version``); docs/how-to/migrating.md lists every
keyword and call.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Coroutine,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

from aioproducer.compat.aiokafka import errors
from aioproducer.compat.aiokafka.structs import (
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    OffsetAndMetadata,
    RecordMetadata,
    TopicPartition,
)
from aioproducer.errors import ConfigError
from aioproducer.internals.batch import FutureRecordMetadata
from aioproducer.producer import Producer
from aioproducer.protocol.records import record_size_in_bytes

__all__ = [
    "AIOKafkaProducer",
    "BatchBuilder",
    "OffsetAndMetadata",
    "RecordMetadata",
    "TopicPartition",
]

_log = logging.getLogger("aioproducer.compat.aiokafka")

#: aiokafka's default port, for ``bootstrap_servers`` entries given without one.
_DEFAULT_PORT = 9092

#: aiokafka keyword -> this producer's keyword, for the ones that only change name.
_RENAMED: dict[str, str] = {
    "max_batch_size": "batch_size",
    "sasl_plain_username": "sasl_username",
    "sasl_plain_password": "sasl_password",
}

#: aiokafka keywords that mean the same here under the same name.
_SAME = (
    "client_id", "metadata_max_age_ms", "request_timeout_ms", "acks", "key_serializer", "value_serializer",
    "max_request_size", "linger_ms", "retry_backoff_ms", "security_protocol", "ssl_context",
    "connections_max_idle_ms", "enable_idempotence", "transactional_id", "transaction_timeout_ms", "sasl_mechanism",
    "sasl_kerberos_service_name",
)

#: aiokafka keywords accepted and ignored, each with the INFO line that says why.
_IGNORED: dict[str, str] = {
    "loop": "the producer runs on the event loop that start() runs on",
    "api_version": "API versions are negotiated with each broker (ApiVersions)",
    "sasl_kerberos_domain_name": "the host in the brokers' Kerberos principals is each broker's host as connected to, "
    "as the Java client takes it",
}

#: Every keyword of aiokafka 0.14's ``AIOKafkaProducer`` (tests check this against aiokafka's signature).
AIOKAFKA_KEYWORDS: frozenset[str] = frozenset(
    {*_RENAMED, *_SAME, *_IGNORED, "bootstrap_servers", "compression_type", "partitioner", "sasl_oauth_token_provider"}
)


class BatchBuilder:
    """Records for one partition, filled by ``append()`` and sent by ``AIOKafkaProducer.send_batch()``.

    aiokafka's shape: ``append(timestamp=, key=, value=, headers=)`` returns the record's
    metadata, or None once the batch holds ``max_batch_size`` bytes (the record is then not
    added); ``size()`` and ``record_count()`` say how full it is; ``close()`` takes no more.
    The records are queued one by one at ``send_batch()`` (through ``Producer.send()``, which
    batches them again): they keep their order and partition.
    """

    def __init__(self, batch_size: int) -> None:
        self._batch_size = batch_size
        self._records: list[tuple[int | None, Any, Any, Sequence[tuple[str, bytes | None]] | None]] = []
        self._size = 0
        self._closed = False

    def append(
        self,
        *,
        timestamp: int | None,
        key: Any,
        value: Any,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> _AppendedRecord | None:
        """Add a record (``timestamp`` in ms since the epoch, or None for now); None if the batch is full or closed."""
        if self._closed:
            return None
        size = record_size_in_bytes(len(self._records), 0, _sized(key), _sized(value), list(headers or ()))
        if self._records and self._size + size > self._batch_size:
            self._closed = True
            return None
        self._records.append((timestamp, key, value, headers or None))
        self._size += size
        return _AppendedRecord(len(self._records) - 1, size, -1 if timestamp is None else timestamp)

    def close(self) -> None:
        """Take no more records."""
        self._closed = True

    def size(self) -> int:
        """Bytes of the records appended, as encoded (before compression), without the batch header."""
        return self._size

    def record_count(self) -> int:
        """How many records were appended."""
        return len(self._records)


class _AppendedRecord(NamedTuple):
    """What ``BatchBuilder.append()`` returns: the record's position, encoded size and timestamp."""

    offset: int
    size: int
    timestamp: int


def _sized(data: Any) -> bytes | None:
    """``data`` as the size estimate sees it (a serializer may change it: the estimate is a bound on intent)."""
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    return bytes(len(repr(data)))


class AIOKafkaProducer:
    """aiokafka's ``AIOKafkaProducer``, running aioproducer's producer.

    Keywords: every keyword of aiokafka 0.14, with aiokafka's meaning. Renamed here:
    ``max_batch_size`` (``batch_size``), ``sasl_plain_username`` / ``sasl_plain_password``
    (``sasl_username`` / ``sasl_password``). Translated: ``bootstrap_servers`` entries without a
    port get 9092, ``compression_type=None`` is ``"none"``, a ``partitioner`` is called as
    aiokafka calls it (``partitioner(key_bytes, all_partitions, available_partitions)``; aiokafka's
    own ``DefaultPartitioner`` is the built-in murmur2 one), an aiokafka token provider's
    ``token()`` and ``extensions()`` are used for OAUTHBEARER. Accepted and ignored, with one INFO
    line each: ``loop``, ``api_version``, ``sasl_kerberos_domain_name``. With ``sasl_mechanism="GSSAPI"``,
    as in aiokafka, the service name defaults to ``"kafka"`` and the tickets come from the ticket
    cache (``kinit``) unless ``sasl_jaas_config`` or ``sasl_kerberos_keytab`` say otherwise.
    Any keyword of :class:`aioproducer.Producer` (``delivery_timeout_ms=``...) is taken as well.

    **Defaults are this library's, not aiokafka's**, where they differ, unless the program passes
    the keyword: idempotence on and ``acks="all"`` (aiokafka: off and ``acks=1``), so that a
    retried batch is never written twice; ``request_timeout_ms`` 30000 (aiokafka: 40000);
    ``sasl_mechanism`` ``"PLAIN"`` as in aiokafka. Keyed records land on the partitions aiokafka
    picks (murmur2, as Java).

    Results: ``send()`` returns the record's future, whose result is an
    :class:`aioproducer.RecordMetadata` with aiokafka's ``topic_partition``, ``timestamp_type``
    and ``log_start_offset`` as well; ``send_and_wait()`` and ``send_batch()`` give aiokafka's
    :class:`RecordMetadata` itself.
    """

    def __init__(
        self,
        *,
        bootstrap_servers: str | Iterable[str] = "localhost",
        compression_type: str | None = None,
        partitioner: Any = None,
        sasl_oauth_token_provider: Any = None,
        **keywords: Any,
    ) -> None:
        config = _config(bootstrap_servers, compression_type, partitioner, sasl_oauth_token_provider, keywords)
        self._producer = Producer(**config)
        self._batch_size = self._producer.config.batch_size or 16384

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Connect and fetch the cluster's metadata (and, with a ``transactional_id``, the producer id)."""
        await self._producer.start()

    async def stop(self) -> None:
        """Send what is queued, then close the connections: aiokafka's ``stop()``, aioproducer's ``close()``."""
        await self._producer.close()

    async def flush(self) -> None:
        """Wait until every record sent so far is acknowledged or failed."""
        await self._producer.flush()

    async def __aenter__(self) -> AIOKafkaProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def producer(self) -> Producer:
        """The :class:`aioproducer.Producer` underneath, for what aiokafka has no call for (``metrics()``)."""
        return self._producer

    # ------------------------------------------------------------------ sending
    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> Coroutine[Any, Any, FutureRecordMetadata]:
        """Queue a record; ``await`` it for the record's future. aiokafka's argument order: ``partition`` 4th.

        Not a coroutine function of its own: it hands back ``Producer.send()``'s coroutine,
        so that the facade costs one call per record and no frame of its own
        (``benchmarks/compat_send.py``).
        """
        return self._producer.send(topic, value, key, headers, partition, timestamp_ms)

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> RecordMetadata:
        """``send()`` and wait for the acknowledgement; aiokafka's :class:`RecordMetadata`."""
        future = await self._producer.send(topic, value, key, headers, partition, timestamp_ms)
        await future
        return _metadata(future)

    def create_batch(self) -> BatchBuilder:
        """An empty :class:`BatchBuilder` of ``max_batch_size`` bytes, for ``send_batch()``."""
        return BatchBuilder(self._batch_size)

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[RecordMetadata]:
        """Queue ``batch``'s records to ``topic``'s ``partition``; a future of the first record's metadata.

        The records go through ``Producer.send()`` in order, serializers included, so that a
        batch is what the same records sent one by one would be (``send_many()`` would let the
        partitioner place them; aiokafka's batch names its partition).
        """
        if not isinstance(batch, BatchBuilder):
            raise TypeError(f"send_batch: batch must come from create_batch(), got {type(batch).__name__}")
        batch.close()
        futures = [
            await self._producer.send(topic, value, key, headers, partition, timestamp)
            for timestamp, key, value, headers in batch._records
        ]
        return asyncio.ensure_future(_first_metadata(futures))

    async def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition ids, as a set (aiokafka's type), waiting for metadata up to ``max_block_ms``."""
        return set(await self._producer.partitions_for(topic))

    # ------------------------------------------------------------------ transactions
    async def begin_transaction(self) -> None:
        """Begin a transaction (a coroutine, as in aiokafka; nothing is awaited)."""
        self._producer.begin_transaction()

    async def commit_transaction(self) -> None:
        """Flush and commit the transaction."""
        await self._producer.commit_transaction()

    async def abort_transaction(self) -> None:
        """Abort the transaction: its records are never read by read_committed consumers."""
        await self._producer.abort_transaction()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AIOKafkaProducer]:
        """``async with producer.transaction():`` begins, then commits, or aborts if the block raised."""
        async with self._producer.transaction():
            yield self

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_id: Any) -> None:
        """Commit a consumer group's offsets with the transaction; values are ints or ``OffsetAndMetadata``."""
        if not isinstance(offsets, Mapping):
            raise TypeError(f"send_offsets_to_transaction(offsets=...) must be a mapping, got {type(offsets).__name__}")
        plain = {tp: getattr(offset, "offset", offset) for tp, offset in offsets.items()}
        await self._producer.send_offsets_to_transaction(plain, group_id)


def _metadata(future: FutureRecordMetadata) -> RecordMetadata:
    """aiokafka's metadata of a delivered record: LogAppendTime when the broker's timestamp replaced the record's."""
    md = future.result()
    appended = md.timestamp != future._timestamp
    return RecordMetadata(
        md.topic, md.partition, TopicPartition(md.topic, md.partition), md.offset, md.timestamp,
        TIMESTAMP_LOG_APPEND_TIME if appended else TIMESTAMP_CREATE_TIME, -1,
    )


async def _first_metadata(futures: list[FutureRecordMetadata]) -> RecordMetadata:
    """The first record's metadata once every record of the batch is acknowledged (or the first failure)."""
    await asyncio.gather(*futures)
    if not futures:
        raise errors.IllegalStateError("send_batch: the batch holds no records")
    return _metadata(futures[0])


# ---------------------------------------------------------------------- keywords


def _config(
    bootstrap_servers: Any, compression_type: Any, partitioner: Any, token_provider: Any, keywords: dict[str, Any]
) -> dict[str, Any]:
    """aiokafka's keywords as this producer's keywords; ConfigError naming a keyword of neither."""
    config: dict[str, Any] = {"bootstrap_servers": _servers(bootstrap_servers)}
    config["compression_type"] = "none" if compression_type is None else compression_type
    if partitioner is not None and not _is_aiokafka_default(partitioner):
        config["partitioner"] = _AiokafkaPartitioner(partitioner)
    if token_provider is not None:
        config.update(_token_provider(token_provider))
    for name, value in keywords.items():
        if name in _IGNORED:
            if value is not None and value != "auto":
                _log.info("AIOKafkaProducer(%s=...) is ignored: %s", name, _IGNORED[name])
            continue
        target = _RENAMED.get(name, name)
        if target in config or (name != target and target in keywords):
            raise ConfigError(f"AIOKafkaProducer: {name}= and {target}= are the same setting: give one of them")
        config[target] = value
    if config.get("client_id") is None:
        config.pop("client_id", None)
    if "sasl_mechanism" not in config and str(config.get("security_protocol", "")).upper().startswith("SASL"):
        config["sasl_mechanism"] = "PLAIN"  # aiokafka's default
    if str(config.get("sasl_mechanism", "")).upper() == "GSSAPI":
        _aiokafka_kerberos(config)
    return config


def _aiokafka_kerberos(config: dict[str, Any]) -> None:
    """aiokafka's GSSAPI: service name ``kafka`` unless given, the default ticket cache unless a login is given."""
    if config.get("sasl_kerberos_service_name") is None:
        config["sasl_kerberos_service_name"] = "kafka"
    if config.get("sasl_jaas_config") is None and config.get("sasl_kerberos_keytab") is None:
        config["sasl_jaas_config"] = "com.sun.security.auth.module.Krb5LoginModule required useTicketCache=true;"


def _servers(value: Any) -> list[str]:
    """aiokafka's ``host[:port]`` entries (a string or a list), each with a port (aiokafka's 9092 if none)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Iterable):
        raise ConfigError(f"bootstrap_servers must be a 'host[:port]' string or a list of them, got {type(value).__name__}")
    servers: list[str] = []
    for item in items:
        for entry in (item.split(",") if isinstance(item, str) else [item]):
            if not isinstance(entry, str):
                raise ConfigError(f"bootstrap_servers entries must be 'host[:port]' strings, got {type(entry).__name__}")
            entry = entry.strip()
            has_port = entry.rsplit(":", 1)[-1].isdigit() and (not entry.startswith("[") or "]:" in entry)
            servers.append(entry if has_port else f"{entry}:{_DEFAULT_PORT}")
    return servers


def _is_aiokafka_default(partitioner: Any) -> bool:
    """aiokafka's ``DefaultPartitioner`` (murmur2 of the key): the built-in partitioner does the same."""
    cls = type(partitioner)
    return cls.__name__ == "DefaultPartitioner" and cls.__module__.startswith("aiokafka")


class _AiokafkaPartitioner:
    """aiokafka's ``partitioner(key_bytes, all_partitions, available_partitions)``, called the Java way."""

    def __init__(self, fn: Any) -> None:
        if not callable(fn):
            raise ConfigError(
                "partitioner must be a callable partitioner(key_bytes, all_partitions, available_partitions), "
                f"got {type(fn).__name__}"
            )
        self._fn = fn

    def partition(self, topic: str, key: Any, key_bytes: bytes | None, value: Any, value_bytes: bytes | None, cluster: Any) -> int:
        every = list(cluster.partitions_for(topic) or ())
        available = list(cluster.available_partitions_for(topic))
        return int(self._fn(key_bytes, every, available))


def _token_provider(provider: Any) -> dict[str, Any]:
    """An aiokafka ``AbstractTokenProvider`` (``async token()``, ``extensions()``), or a plain callable as is."""
    token = getattr(provider, "token", None)
    if not callable(token):
        return {"sasl_oauth_token_provider": provider}

    async def fetch() -> str:
        answer = token()
        return str(await answer if asyncio.iscoroutine(answer) or isinstance(answer, Awaitable) else answer)

    config: dict[str, Any] = {"sasl_oauth_token_provider": fetch}
    extensions = getattr(provider, "extensions", None)
    found = extensions() if callable(extensions) else None
    if found:
        config["sasl_oauthbearer_extensions"] = dict(found)
    return config

