"""Read a topic back without a second Kafka client: ``MockCluster.read()`` and ``KafkaCluster.read()``.

Theory of operation. A test of a service that produces wants to see what landed
on the topic. :func:`read_topic` reads every partition with aioproducer's own
network client and protocol layer: ListOffsets for where each partition starts
(its log start offset) and ends (the high watermark, or the last stable offset
under ``read_committed``), then Fetch from each partition's leader, decoded by
:func:`aioproducer.protocol.records.decode_batches` (every codec, CRC checked).
No consumer group, no committed offsets, no fetch session: each Fetch is a full
one (session 0, epoch -1), so nothing is left behind on the broker.

The Fetch and ListOffsets requests live here only, for tests: the producer never
reads. The request versions are the highest both sides speak (ApiVersions), at
most Fetch v12 (v13+ name topics by id) and ListOffsets v7; librdkafka's mock and
Kafka 4.x both answer those.

What the answers need besides decoding, kept in pure functions tested without
sockets (:func:`complete_batches`, :func:`visible_batches`, :func:`fetched_records`):

* a Fetch answer may end with part of a batch (its size limit cut it): only
  whole batches are decoded, the next Fetch starts at the cut;
* a Fetch from an offset inside a compressed batch answers the whole batch:
  records before the offset asked for are dropped;
* control batches (transaction markers) are never records; librdkafka's mock
  writes them with a zero CRC, which is filled in before the CRC check;
* under ``read_committed``, batches of aborted transactions are dropped as the
  Java consumer drops them (KIP-98): the answer lists, per producer id, the first
  offset of each aborted transaction in range; a transactional batch of that
  producer from that offset on is aborted until the producer's ABORT marker.

Leaders move (a mock's ``set_partition_leader``, a real failover): a
NOT_LEADER-like error or a broken connection refreshes the metadata and tries
again, until the caller's ``timeout``. A batch that does not decode (a bad CRC,
a truncated record) is no such case: its :class:`~aioproducer.errors.ProtocolError`
is raised at once, as a consumer with ``check.crcs`` raises it.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from crc32c import crc32c

from aioproducer.config import ProducerConfig
from aioproducer.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from aioproducer.network.client import KafkaClient
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import messages
from aioproducer.protocol.records import RECORD_BATCH_OVERHEAD, DecodedBatch, decode_batches

__all__ = [
    "ISOLATION_LEVELS",
    "ConsumerRecord",
    "check_read_arguments",
    "complete_batches",
    "fetched_records",
    "read_topic",
    "visible_batches",
]

#: The isolation levels by name, as the Java consumer's ``isolation.level``, and their wire values.
ISOLATION_LEVELS: Final[Mapping[str, int]] = {"read_uncommitted": 0, "read_committed": 1}

_EARLIEST: Final = -2  # ListOffsets timestamp: the log start offset
_LATEST: Final = -1  # ListOffsets timestamp: the high watermark (LSO under read_committed)
#: How long a Fetch may wait on the broker for new records: short, so waiting for ``count``
#: records notices them soon after they land, without a sleep between polls.
_MAX_WAIT_MS: Final = 200
_PARTITION_MAX_BYTES: Final = 1 << 20
#: Pause before retrying after a leader moved or a connection broke (Java's retry.backoff.ms is 100).
_RETRY_BACKOFF_S: Final = 0.05
_CLIENT_ID: Final = "aioproducer-readback"
_ABORT_MARKER: Final = 0  # control record key: int16 version, int16 type (0 ABORT, 1 COMMIT)
_CONTROL_KEY: Final = struct.Struct(">hh")
_BATCH_PREFIX: Final = struct.Struct(">qi")  # baseOffset, batchLength: enough to walk batches
# Where a batch's header fields sit (Kafka's protocol guide, "Record Batch"): magic at 16,
# crc (uint32) at 17, attributes (int16) at 21, the first byte the CRC covers.
_MAGIC_AT: Final = 16
_CRC_AT: Final = 17
_CRC_START: Final = 21
_CRC: Final = struct.Struct(">I")
_CRC_AND_ATTRIBUTES: Final = struct.Struct(">Ih")
_CONTROL_BIT: Final = 0x20


@dataclass(frozen=True, slots=True)
class ConsumerRecord:
    """One record read back, named as Java's ``ConsumerRecord``; ``timestamp`` in ms since the epoch, as stored."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


# ------------------------------------------------------------------ arguments


def check_read_arguments(topic: object, count: object, timeout: object, isolation_level: object) -> None:
    """Raise ``TypeError``/``ValueError`` naming the first bad argument of a read, before any I/O."""
    if not isinstance(topic, str):
        raise TypeError(f"topic must be a non-empty str, got {topic!r}")
    if not topic:
        raise ValueError(f"topic must be a non-empty str, got {topic!r}")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
        raise TypeError(f"count must be an int >= 0 or None, got {count!r}")
    if count is not None and count < 0:
        raise ValueError(f"count must be an int >= 0 or None, got {count!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be a positive, finite number of seconds, got {timeout!r}")
    if isolation_level not in ISOLATION_LEVELS:
        raise ValueError(f"isolation_level must be one of {sorted(ISOLATION_LEVELS)}, got {isolation_level!r}")


# ------------------------------------------------------------ pure decoding


def complete_batches(data: bytes | bytearray | memoryview) -> memoryview:
    """The leading whole batches of a Fetch ``records`` field: a partial batch at the end is cut off.

    A broker fills an answer up to its size limit and may stop inside a batch;
    that batch comes whole on the next Fetch, which starts at its offset.
    """
    view = memoryview(data).cast("B")
    pos = 0
    while pos + _BATCH_PREFIX.size <= len(view):
        _base, length = _BATCH_PREFIX.unpack_from(view, pos)
        end = pos + _BATCH_PREFIX.size + length
        if length < 0 or end > len(view):
            break
        pos = end
    return view[:pos]


def _with_marker_crcs(view: memoryview) -> bytes | memoryview:
    """``view`` with the CRC of each control batch whose stored CRC is zero filled in.

    librdkafka's mock cluster (2.16, measured) writes its transaction markers with a
    zero CRC; Kafka never does. Such a marker would fail the CRC check of
    :func:`decode_batches`, so the read fills the CRC in first. Only control
    batches with a zero CRC are touched: a data batch with a bad CRC still fails.
    """
    patched: bytearray | None = None
    pos = 0
    while pos + _BATCH_PREFIX.size <= len(view):
        _base, length = _BATCH_PREFIX.unpack_from(view, pos)
        end = pos + _BATCH_PREFIX.size + length
        if end - pos >= RECORD_BATCH_OVERHEAD and view[pos + _MAGIC_AT] == 2:
            crc, attributes = _CRC_AND_ATTRIBUTES.unpack_from(view, pos + _CRC_AT)
            if crc == 0 and attributes & _CONTROL_BIT:
                patched = bytearray(view) if patched is None else patched
                _CRC.pack_into(patched, pos + _CRC_AT, crc32c(view[pos + _CRC_START : end]))
        pos = end
    return view if patched is None else bytes(patched)


def _is_abort_marker(batch: DecodedBatch) -> bool:
    """Whether a control batch holds an ABORT marker (its one record's key says the type)."""
    if not batch.records or batch.records[0].key is None or len(batch.records[0].key) < _CONTROL_KEY.size:
        return False
    _version, kind = _CONTROL_KEY.unpack_from(batch.records[0].key)
    return bool(kind == _ABORT_MARKER)


def visible_batches(
    batches: Sequence[DecodedBatch], aborted: Iterable[tuple[int, int]], *, read_committed: bool
) -> list[DecodedBatch]:
    """The data batches a consumer returns, in order: no control batch, no aborted one under ``read_committed``.

    ``aborted`` is the Fetch answer's ``(producer_id, first_offset)`` list. As
    the batches are walked in offset order, a producer's aborted transaction
    becomes current once a batch of that producer reaches its first offset, and
    stays so until the producer's ABORT marker: its transactional batches in
    between are dropped. ``read_uncommitted`` keeps every data batch.
    """
    pending = sorted((first_offset, producer_id) for producer_id, first_offset in aborted)
    next_pending = 0
    current: set[int] = set()
    out: list[DecodedBatch] = []
    for batch in batches:
        if read_committed and batch.producer_id >= 0:
            while next_pending < len(pending) and pending[next_pending][0] <= batch.last_offset:
                current.add(pending[next_pending][1])
                next_pending += 1
            if batch.is_control and _is_abort_marker(batch):
                current.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in current:
                continue
        if not batch.is_control:
            out.append(batch)
    return out


def fetched_records(
    topic: str,
    partition: int,
    data: bytes | bytearray | memoryview | None,
    *,
    fetch_offset: int,
    aborted: Iterable[tuple[int, int]] = (),
    read_committed: bool = False,
) -> tuple[list[ConsumerRecord], int]:
    """One partition of a Fetch answer: its visible records from ``fetch_offset`` on, and the next offset to fetch.

    The next offset follows the last whole batch (data, control or aborted alike:
    a consumer moves past all of them), or stays ``fetch_offset`` when none came.
    """
    batches = decode_batches(_with_marker_crcs(complete_batches(data or b"")))
    next_offset = max([fetch_offset, *(b.last_offset + 1 for b in batches)])
    records = [
        ConsumerRecord(topic, partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp)
        for batch in visible_batches(batches, aborted, read_committed=read_committed)
        for r in batch.records
        if r.offset >= fetch_offset
    ]
    return records, next_offset


# ------------------------------------------------------------------ reading


_T = TypeVar("_T")
_Ask = Callable[[BrokerConnection, list[int]], Awaitable[None]]


class _RetryError(Exception):
    """A leader moved or a connection broke: refresh the metadata and try again (within the timeout)."""


def _raise_for(code: int, what: str) -> None:
    """Raise the broker error ``code`` (a :class:`_RetryError` for one that stale metadata explains)."""
    if code == 0:
        return
    error = error_for_code(code)
    if error.invalid_metadata or error.retriable:
        raise _RetryError(f"{what}: {error.__name__}")
    raise error(what)


class _TopicReader:
    """The state of one read: the topic's partitions, each one's next offset, the records so far."""

    def __init__(self, client: KafkaClient, topic: str, isolation: int) -> None:
        self.client = client
        self.topic = topic
        self.isolation = isolation
        self.partitions: tuple[int, ...] = ()
        self.positions: dict[int, int] = {}
        self.records: dict[int, list[ConsumerRecord]] = {}
        #: Why the last try failed and was retried, for the timeout's message.
        self.last_retry: str | None = None

    @property
    def total(self) -> int:
        return sum(len(r) for r in self.records.values())

    async def find_partitions(self) -> None:
        """The topic's partitions from fresh metadata; the broker's error when it does not know the topic."""
        try:
            metadata = await self.client.refresh_metadata([self.topic])
        except (KafkaConnectionError, KafkaTimeoutError) as exc:  # no broker answered (yet)
            raise _RetryError(f"metadata of topic {self.topic!r}: {exc}") from exc
        code = metadata.topic_error(self.topic)
        if code == UnknownTopicOrPartitionError.errno:
            raise UnknownTopicOrPartitionError(f"topic {self.topic!r} does not exist")
        partitions = metadata.partitions_for(self.topic)
        if partitions is None:
            _raise_for(code, f"metadata of topic {self.topic!r}")
            raise _RetryError(f"topic {self.topic!r} has no partitions yet")
        self.partitions = partitions

    def _by_leader(self, partitions: Iterable[int]) -> dict[int, list[int]]:
        """``partitions`` grouped by their leader; a partition without one asks for fresh metadata."""
        groups: dict[int, list[int]] = {}
        for p in partitions:
            leader = self.client.metadata.leader_for(self.topic, p)
            if leader is None:
                raise _RetryError(f"no leader known for {self.topic}-{p}")
            groups.setdefault(leader, []).append(p)
        return groups

    async def _each_leader(self, partitions: Iterable[int], ask: _Ask) -> None:
        """Run ``ask(connection, partitions)`` for every leader at once; the first failure is raised."""
        groups = self._by_leader(partitions)

        async def one(node: int, parts: list[int]) -> None:
            try:
                conn = await self.client.connection(node)
                await ask(conn, parts)
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                raise _RetryError(f"node {node}: {exc}") from exc

        results = await asyncio.gather(*(one(n, ps) for n, ps in groups.items()), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def list_offsets(self, timestamp: int) -> dict[int, int]:
        """Each partition's log start (``_EARLIEST``) or end (``_LATEST``: HW, or LSO under read_committed)."""
        found: dict[int, int] = {}

        async def ask(conn: BrokerConnection, parts: list[int]) -> None:
            body = {
                "replica_id": -1,
                "isolation_level": self.isolation,
                "topics": [{"name": self.topic, "partitions": [
                    {"partition_index": p, "timestamp": timestamp} for p in parts]}],
            }
            response = await conn.send(messages.LIST_OFFSETS, body)
            assert response is not None  # expect_response=True
            for topic in response["topics"]:
                for part in topic["partitions"]:
                    _raise_for(part["error_code"], f"ListOffsets {self.topic}-{part['partition_index']}")
                    found[part["partition_index"]] = part["offset"]

        await self._each_leader(self.partitions, ask)
        return found

    async def fetch(self, ends: Mapping[int, int] | None) -> None:
        """One Fetch to each leader for the partitions to read: all of them, or those short of ``ends``.

        With ``ends``, records at or past a partition's end are not kept: the
        read returns what was there when the ends were taken.
        """
        wanted = [p for p in self.partitions if ends is None or self.positions[p] < ends[p]]

        async def ask(conn: BrokerConnection, parts: list[int]) -> None:
            response = await conn.send(messages.FETCH, self._fetch_body(parts))
            assert response is not None  # expect_response=True
            _raise_for(response["error_code"], f"Fetch from {self.topic}")
            for topic in response["responses"]:
                for part in topic["partitions"]:
                    self._take(part, None if ends is None else ends[part["partition_index"]])

        await self._each_leader(wanted, ask)

    def _fetch_body(self, parts: list[int]) -> dict[str, Any]:
        return {
            "replica_id": -1,
            "max_wait_ms": _MAX_WAIT_MS,
            "min_bytes": 1,
            "isolation_level": self.isolation,
            "topics": [{"topic": self.topic, "partitions": [
                {"partition": p, "fetch_offset": self.positions[p], "partition_max_bytes": _PARTITION_MAX_BYTES}
                for p in parts]}],
        }

    def _take(self, part: Mapping[str, Any], end: int | None) -> None:
        """Keep one partition's records from a Fetch answer and move its position past them."""
        p = part["partition_index"]
        _raise_for(part["error_code"], f"Fetch {self.topic}-{p} at offset {self.positions[p]}")
        aborted = [(a["producer_id"], a["first_offset"]) for a in part["aborted_transactions"] or ()]
        records, self.positions[p] = fetched_records(
            self.topic, p, part["records"], fetch_offset=self.positions[p], aborted=aborted,
            read_committed=self.isolation == ISOLATION_LEVELS["read_committed"],
        )
        self.records[p].extend(r for r in records if end is None or r.offset < end)

    def result(self) -> list[ConsumerRecord]:
        return [r for p in sorted(self.records) for r in self.records[p]]


async def _retrying(reader: _TopicReader, step: Callable[[], Awaitable[_T]]) -> _T:
    """``await step()``, again after a metadata refresh each time a leader moved or a connection broke."""
    while True:
        try:
            return await step()
        except _RetryError as exc:
            reader.last_retry = str(exc)
            reader.client.request_update()
            await asyncio.sleep(_RETRY_BACKOFF_S)
            try:
                await reader.client.refresh_metadata([reader.topic])
            except KafkaError:
                continue  # no broker answered yet: the next step fails and comes back here


async def _read(reader: _TopicReader, count: int | None) -> list[ConsumerRecord]:
    """Positions at the log starts; with ``count``, fetch until that many arrived; then read up to the ends."""
    await _retrying(reader, reader.find_partitions)
    reader.positions = dict(await _retrying(reader, lambda: reader.list_offsets(_EARLIEST)))
    reader.records = {p: [] for p in reader.partitions}
    while count is not None and reader.total < count:
        await _retrying(reader, lambda: reader.fetch(None))
    ends = await _retrying(reader, lambda: reader.list_offsets(_LATEST))
    while any(reader.positions[p] < ends[p] for p in reader.partitions):
        await _retrying(reader, lambda: reader.fetch(ends))
    return reader.result()


async def read_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    count: int | None = None,
    timeout: float = 10.0,
    isolation_level: str = "read_uncommitted",
) -> list[ConsumerRecord]:
    """Every record of every partition of ``topic``, sorted by (partition, offset).

    ``count=None``: everything up to each partition's end offset as of the call
    (its high watermark; its last stable offset under ``read_committed``), with
    no waiting beyond that. ``count=n``: fetch until at least ``n`` records were
    read (records produced after the call count), then return everything up to
    the end offsets of that moment, so the result may hold more than ``n``: a
    duplicate is never hidden by a cut. Not done within ``timeout`` seconds:
    :class:`~aioproducer.errors.KafkaTimeoutError` naming the topic, how many
    records were wanted and how many were read.

    Control records (transaction markers) are never returned. ``read_committed``
    drops the records of aborted transactions as a Java consumer does;
    ``read_uncommitted`` returns them all. A topic the broker does not know
    raises :class:`~aioproducer.errors.UnknownTopicOrPartitionError` (the
    metadata request does not ask for it to be created). Bad arguments raise
    ``TypeError``/``ValueError`` naming the argument, before any connection.
    """
    check_read_arguments(topic, count, timeout, isolation_level)
    client = KafkaClient(
        ProducerConfig(bootstrap_servers=bootstrap_servers, client_id=_CLIENT_ID),
        allow_auto_topic_creation=False,
    )
    reader = _TopicReader(client, topic, ISOLATION_LEVELS[isolation_level])
    try:
        async with asyncio.timeout(timeout) as deadline:
            return await _read(reader, count)
    except TimeoutError as exc:
        if not deadline.expired():
            raise
        raise KafkaTimeoutError(_timeout_message(reader, count, timeout)) from exc
    finally:
        await client.close()


def _timeout_message(reader: _TopicReader, count: int | None, timeout: float) -> str:
    wanted = f"{count} records" if count is not None else "every record up to the end offsets"
    retried = f" (last retried: {reader.last_retry})" if reader.last_retry else ""
    return f"reading topic {reader.topic!r}: wanted {wanted}, read {reader.total} within {timeout:g} s{retried}"

