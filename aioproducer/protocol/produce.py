"""Hand-written codec for Produce requests and responses: the producer's hot path.

Why not the declarative codec of :mod:`~aioproducer.protocol.messages`? It is
general (any API, any version, bodies as dicts) and pays for it on every
message: a dict built or read per struct and a closure call per field. A Produce request is sent per node and per drain pass, and with
large records (one record per batch) there is one request for every two or
three records, so that generality was paid every few records: 20-35 µs per
request and response (timeit, three 10 KB batches, v8/v10), about three
times what this module takes. It writes and reads the same bytes with
straight-line code and no intermediate dicts:

* :func:`encode_produce_request` returns the whole frame as chunks, like
  :func:`~aioproducer.protocol.messages.encode_request_chunks`: record batches
  of :data:`SPLICE_THRESHOLD` bytes or more are included by reference, never
  copied into the frame buffer. The constant part of the frame after the
  correlation id (client id, transactional id, acks, timeout) is encoded once
  and cached, since it is the same for every request of a producer.
* :func:`decode_produce_response` returns named tuples, one
  :class:`PartitionResponse` per partition in the order the broker wrote them.

The wire layout is the one declared in ``messages._PRODUCE_REQUEST`` /
``_PRODUCE_RESPONSE`` (Kafka's ``ProduceRequest.json`` / ``ProduceResponse.json``)
for every version aioproducer speaks, v3 to v12: v3 adds the transactional id,
v5 ``log_start_offset``, v8 ``record_errors`` and ``error_message``, v9 the
flexible (compact, tagged) encoding with request header v2 and response header
v1, v10 the KIP-951 leader hints as tagged fields (``current_leader``, tag 0 of
a partition; ``node_endpoints``, tag 0 of the body); v11 only adds an error
code, v12 none (it changes only what a broker does with a transactional request). ``tests/unit/test_produce_codec.py`` holds both codecs to byte-for-byte
and value-for-value equality with the generic one, for every version.

Errors follow the generic codec's contract: decoding raises only
:class:`~aioproducer.errors.ProtocolError` for truncated or malformed input
(bytes after a complete body are ignored, as for every response); encoding a
value that does not fit raises ``ValueError``; a version outside v3-v12 raises
:class:`~aioproducer.errors.UnsupportedVersionError`.

Pure functions over bytes: no sockets, no asyncio.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Sequence
from typing import Final, NamedTuple, TypeAlias

from aioproducer.errors import ProtocolError, UnsupportedVersionError
from aioproducer.protocol import primitives as p

__all__ = [
    "FIRST_FLEXIBLE_VERSION",
    "MAX_VERSION",
    "MIN_VERSION",
    "NodeEndpoint",
    "PartitionResponse",
    "ProduceResponse",
    "Records",
    "SPLICE_THRESHOLD",
    "TopicData",
    "decode_produce_response",
    "encode_produce_request",
]

PRODUCE_API_KEY: Final = 0
#: The Produce versions this codec speaks (the same range as ``messages.SUPPORTED_VERSIONS``).
MIN_VERSION: Final = 3
MAX_VERSION: Final = 12
#: Produce v12 adds a transaction's partition to it (transactions v2, KIP-890 part 2): sent only
#: by a transactional producer when the cluster's ``transaction.version`` is 2. Any other
#: producer speaks at most v11, as before (``ClientConnection.produce_version``).
TRANSACTION_V2_VERSION: Final = 12
#: From this version on, Produce uses compact strings/arrays/bytes and tagged fields (KIP-482).
FIRST_FLEXIBLE_VERSION: Final = 9
#: Record batches at least this large become chunks of their own instead of being copied
#: into the frame buffer (smaller ones are cheaper to copy than to carry as a list element).
SPLICE_THRESHOLD: Final = 4096

#: One partition's record batch: what ``RecordBatchBuilder.build()`` returns (or a view of it).
Records: TypeAlias = bytes | bytearray | memoryview
#: ``[(topic, [(partition, records), ...]), ...]``: the request's ``topic_data`` without dicts.
TopicData: TypeAlias = Sequence[tuple[str, Sequence[tuple[int, Records | None]]]]
Chunk: TypeAlias = bytes | bytearray | memoryview

_FRAME_START: Final = struct.Struct(">ihhi")  # size (patched last), api key, version, correlation id
_SIZE: Final = struct.Struct(">i")
_INT32: Final = struct.Struct(">i")
_INT16: Final = struct.Struct(">h")
_PARTITION_CLASSIC: Final = struct.Struct(">ii")  # index, records length
_UINT32_MAX: Final = 0xFFFFFFFF
_INT16_MAX: Final = 0x7FFF


def _check_version(version: int) -> None:
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise UnsupportedVersionError(
            f"Produce v{version} is not supported (aioproducer speaks v{MIN_VERSION}-v{MAX_VERSION})"
        )


# ================================================================== encoding


@functools.lru_cache(maxsize=256)
def _constant_part(
    flexible: bool, client_id: str | None, transactional_id: str | None, acks: int, timeout_ms: int
) -> bytes:
    """Everything between the correlation id and the topic array.

    Request header v1/v2 after the correlation id (``client_id`` is a classic
    nullable string even in v2; v2 adds an empty tagged-field section), then
    the body's ``transactional_id``, ``acks`` and ``timeout_ms``. A producer
    sends the same values in every request, so this is encoded once.
    """
    buf = bytearray()
    p.write_nullable_string(buf, client_id)
    if flexible:
        buf.append(0)
        p.write_compact_nullable_string(buf, transactional_id)
    else:
        p.write_nullable_string(buf, transactional_id)
    p.write_int16(buf, acks)
    p.write_int32(buf, timeout_ms)
    return bytes(buf)


@functools.lru_cache(maxsize=1024)
def _topic_name(name: str, flexible: bool) -> bytes:
    """A topic name as a (compact) STRING; cached since a producer names few topics many times."""
    buf = bytearray()
    if flexible:
        p.write_compact_string(buf, name)
    else:
        p.write_string(buf, name)
    return bytes(buf)


def _write_uvarint(buf: bytearray, value: int) -> None:
    if value > _UINT32_MAX:
        raise ValueError(f"unsigned varint out of range: {value}")
    while value > 0x7F:
        buf.append((value & 0x7F) | 0x80)
        value >>= 7
    buf.append(value)


def _put_records(buf: bytearray, parts: list[Chunk], records: Chunk) -> bytearray:
    """Add a record batch to the frame: copied when small, else spliced in by reference.

    Returns the buffer to go on writing into (a fresh one after a splice).
    """
    if len(records) >= SPLICE_THRESHOLD:
        parts.append(buf)
        parts.append(records)
        return bytearray()
    buf += records
    return buf


def encode_produce_request(
    version: int,
    correlation_id: int,
    client_id: str | None,
    transactional_id: str | None,
    acks: int,
    timeout_ms: int,
    topic_data: TopicData,
) -> list[Chunk]:
    """Encode a whole Produce request frame (size prefix, header, body) as chunks for ``writelines``.

    Byte for byte what ``messages.encode_request(PRODUCE, version, correlation_id,
    client_id, body)`` produces for the body ``{"transactional_id": ..., "acks": ...,
    "timeout_ms": ..., "topic_data": [{"name": topic, "partition_data": [{"index":
    partition, "records": records}, ...]}, ...]}``. Records of
    :data:`SPLICE_THRESHOLD` bytes or more are returned as chunks of their own
    (by reference: they must not change until the frame is written).
    """
    _check_version(version)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    try:
        buf = bytearray(_FRAME_START.pack(0, PRODUCE_API_KEY, version, correlation_id))
        buf += _constant_part(flexible, client_id, transactional_id, acks, timeout_ms)
        parts: list[Chunk] = []
        if flexible:
            _write_uvarint(buf, len(topic_data) + 1)
            for name, partitions in topic_data:
                buf += _topic_name(name, flexible)
                _write_uvarint(buf, len(partitions) + 1)
                for index, records in partitions:
                    buf += _INT32.pack(index)
                    if records is None:
                        buf.append(0)
                    else:
                        _write_uvarint(buf, len(records) + 1)
                        buf = _put_records(buf, parts, records)
                    buf.append(0)  # partition: no tagged fields
                buf.append(0)  # topic: no tagged fields
            buf.append(0)  # body: no tagged fields
        else:
            buf += _INT32.pack(len(topic_data))
            for name, partitions in topic_data:
                buf += _topic_name(name, flexible)
                buf += _INT32.pack(len(partitions))
                for index, records in partitions:
                    if records is None:
                        buf += _PARTITION_CLASSIC.pack(index, -1)
                        continue
                    buf += _PARTITION_CLASSIC.pack(index, len(records))
                    buf = _put_records(buf, parts, records)
    except (struct.error, TypeError, AttributeError, OverflowError) as exc:
        raise ValueError(f"cannot encode Produce v{version}: {exc}") from exc
    if buf or not parts:
        parts.append(buf)
    first = parts[0]
    assert isinstance(first, bytearray)
    first[0:4] = _SIZE.pack(sum(map(len, parts)) - 4)
    return parts


# ================================================================== decoding


class PartitionResponse(NamedTuple):
    """One partition's answer. Fields a version lacks hold their schema default."""

    topic: str
    partition: int
    error_code: int
    base_offset: int
    #: The broker's append time when the topic uses LogAppendTime, else -1.
    log_append_time_ms: int
    #: v5+; -1 before.
    log_start_offset: int
    #: v8+: ``(batch_index, batch_index_error_message)`` of the records that made the batch fail.
    record_errors: tuple[tuple[int, str | None], ...]
    #: v8+; None before.
    error_message: str | None
    #: v10+ (KIP-951) ``current_leader``: the new leader's id and epoch on NOT_LEADER_OR_FOLLOWER, else -1.
    leader_id: int
    leader_epoch: int


class NodeEndpoint(NamedTuple):
    """v10+ (KIP-951): where a leader named in ``PartitionResponse.leader_id`` can be reached."""

    node_id: int
    host: str
    port: int
    rack: str | None


class ProduceResponse(NamedTuple):
    """A decoded Produce response, flattened: every partition of every topic, in wire order."""

    correlation_id: int
    partitions: list[PartitionResponse]
    throttle_time_ms: int
    node_endpoints: list[NodeEndpoint]


#: ``tuple.__new__`` skips the Python-level ``__new__`` a NamedTuple generates (one call per partition).
_new_partition: Final = tuple.__new__
_FIXED_V3: Final = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms
_FIXED_V5: Final = struct.Struct(">ihqqq")  # ... log_start_offset
_INT32_PAIR: Final = struct.Struct(">ii")
_NO_RECORD_ERRORS: Final[tuple[tuple[int, str | None], ...]] = ()
_DECODE_ERRORS: Final = (struct.error, IndexError, ValueError, UnicodeDecodeError, OverflowError, TypeError)


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    """An unsigned 32-bit varint at ``pos``: ``(value, next position)``; at most 5 bytes, as Kafka's."""
    result = 0
    shift = 0
    for _ in range(5):
        byte = data[pos]  # IndexError on truncation: turned into ProtocolError by the caller
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if result > _UINT32_MAX:
                raise ProtocolError(f"unsigned varint overflows 32 bits at offset {pos}")
            return result, pos
        shift += 7
    raise ProtocolError(f"unsigned varint longer than 5 bytes at offset {pos}")


def _text(data: bytes, pos: int, size: int) -> str:
    end = pos + size
    if end > len(data):
        raise ProtocolError(f"truncated string: need {size} bytes at offset {pos}, {len(data) - pos} left")
    return data[pos:end].decode("utf-8")


def _nullable_string(data: bytes, pos: int) -> tuple[str | None, int]:
    size: int = _INT16.unpack_from(data, pos)[0]
    pos += 2
    if size == -1:
        return None, pos
    if size < 0:
        raise ProtocolError(f"negative string length {size} at offset {pos - 2}")
    return _text(data, pos, size), pos + size


def _compact_nullable_string(data: bytes, pos: int) -> tuple[str | None, int]:
    size, pos = _uvarint(data, pos)
    if size == 0:
        return None, pos
    return _text(data, pos, size - 1), pos + size - 1


def _compact_string(data: bytes, pos: int) -> tuple[str, int]:
    size, pos = _uvarint(data, pos)
    if size == 0:
        raise ProtocolError(f"null for non-nullable compact string at offset {pos - 1}")
    return _text(data, pos, size - 1), pos + size - 1


def _array_length(data: bytes, pos: int) -> tuple[int, int]:
    """A non-nullable ARRAY count; a count larger than the bytes left can only be garbage."""
    count: int = _INT32.unpack_from(data, pos)[0]
    pos += 4
    if count < 0 or count > len(data) - pos:
        raise ProtocolError(f"invalid array length {count} at offset {pos - 4}")
    return count, pos


def _compact_array_length(data: bytes, pos: int) -> tuple[int, int]:
    """A non-nullable COMPACT_ARRAY count (prefix 0 would be null)."""
    start = pos
    count, pos = _uvarint(data, pos)
    if count == 0 or count - 1 > len(data) - pos:
        raise ProtocolError(f"invalid compact array length at offset {start}")
    return count - 1, pos


def _tagged_fields(data: bytes, pos: int) -> tuple[dict[int, bytes] | None, int]:
    """A tagged-field section: ``({tag: payload}, next position)``; None when empty (the usual case)."""
    byte = data[pos]
    if byte == 0:
        return None, pos + 1
    count, pos = _uvarint(data, pos)
    fields: dict[int, bytes] = {}
    last = -1
    for _ in range(count):
        tag, pos = _uvarint(data, pos)
        if tag <= last:
            raise ProtocolError(f"tagged field {tag} out of order after {last} at offset {pos}")
        last = tag
        size, pos = _uvarint(data, pos)
        end = pos + size
        if end > len(data):
            raise ProtocolError(f"truncated tagged field {tag} at offset {pos}")
        fields[tag] = data[pos:end]
        pos = end
    return fields, pos


def _current_leader(payload: bytes) -> tuple[int, int]:
    """The ``current_leader`` tagged struct (v10+): leader id and epoch, then its own tagged fields."""
    leader_id, leader_epoch = _INT32_PAIR.unpack_from(payload, 0)
    _, pos = _tagged_fields(payload, 8)
    if pos != len(payload):
        raise ProtocolError(f"tagged field current_leader has {len(payload) - pos} trailing bytes")
    return leader_id, leader_epoch


def _node_endpoints(payload: bytes) -> list[NodeEndpoint]:
    """The ``node_endpoints`` tagged array (v10+)."""
    count, pos = _compact_array_length(payload, 0)
    endpoints: list[NodeEndpoint] = []
    for _ in range(count):
        node_id: int = _INT32.unpack_from(payload, pos)[0]
        host, pos = _compact_string(payload, pos + 4)
        port: int = _INT32.unpack_from(payload, pos)[0]
        rack, pos = _compact_nullable_string(payload, pos + 4)
        _, pos = _tagged_fields(payload, pos)
        endpoints.append(NodeEndpoint(node_id, host, port, rack))
    if pos != len(payload):
        raise ProtocolError(f"tagged field node_endpoints has {len(payload) - pos} trailing bytes")
    return endpoints


def _decode_classic(data: bytes, version: int, correlation_id: int) -> ProduceResponse:
    """v3-v8: int32 counts, int16 string lengths, no tagged fields; response header v0."""
    fixed = _FIXED_V5 if version >= 5 else _FIXED_V3
    fixed_size = fixed.size
    has_errors = version >= 8
    partitions: list[PartitionResponse] = []
    append = partitions.append
    topics, pos = _array_length(data, 4)
    for _ in range(topics):
        size: int = _INT16.unpack_from(data, pos)[0]
        if size < 0:
            raise ProtocolError(f"null or negative length {size} for a topic name at offset {pos}")
        topic = _text(data, pos + 2, size)
        count, pos = _array_length(data, pos + 2 + size)
        for _ in range(count):
            values = fixed.unpack_from(data, pos)
            pos += fixed_size
            record_errors = _NO_RECORD_ERRORS
            error_message = None
            if has_errors:
                n, pos = _array_length(data, pos)
                if n:
                    errors: list[tuple[int, str | None]] = []
                    for _ in range(n):
                        batch_index: int = _INT32.unpack_from(data, pos)[0]
                        message, pos = _nullable_string(data, pos + 4)
                        errors.append((batch_index, message))
                    record_errors = tuple(errors)
                error_message, pos = _nullable_string(data, pos)
            if fixed is _FIXED_V5:
                index, code, base_offset, append_time, log_start = values
            else:
                index, code, base_offset, append_time = values
                log_start = -1
            append(_new_partition(PartitionResponse, (
                topic, index, code, base_offset, append_time, log_start, record_errors, error_message, -1, -1
            )))
    throttle_time_ms: int = _INT32.unpack_from(data, pos)[0]
    return ProduceResponse(correlation_id, partitions, throttle_time_ms, [])


def _decode_flexible(data: bytes, version: int, correlation_id: int) -> ProduceResponse:
    """v9+: compact lengths, a tagged-field section after every struct; response header v1."""
    leader_hints = version >= 10
    partitions: list[PartitionResponse] = []
    append = partitions.append
    _, pos = _tagged_fields(data, 4)  # response header v1
    topics, pos = _compact_array_length(data, pos)
    for _ in range(topics):
        topic, pos = _compact_string(data, pos)
        count, pos = _compact_array_length(data, pos)
        for _ in range(count):
            index, code, base_offset, append_time, log_start = _FIXED_V5.unpack_from(data, pos)
            pos += 30
            # Inline fast paths for what a successful partition carries: no record errors
            # (compact array of 0 = byte 1), no error message (byte 0), no tagged fields (byte 0).
            record_errors = _NO_RECORD_ERRORS
            if data[pos] == 1:
                pos += 1
            else:
                n, pos = _compact_array_length(data, pos)
                errors: list[tuple[int, str | None]] = []
                for _ in range(n):
                    batch_index: int = _INT32.unpack_from(data, pos)[0]
                    message, pos = _compact_nullable_string(data, pos + 4)
                    _, pos = _tagged_fields(data, pos)
                    errors.append((batch_index, message))
                record_errors = tuple(errors)
            error_message = None
            if data[pos] == 0:
                pos += 1
            else:
                error_message, pos = _compact_nullable_string(data, pos)
            leader_id = leader_epoch = -1
            if data[pos] == 0:
                pos += 1
            else:
                tagged, pos = _tagged_fields(data, pos)
                if leader_hints and tagged is not None and 0 in tagged:
                    leader_id, leader_epoch = _current_leader(tagged[0])
            append(_new_partition(PartitionResponse, (
                topic, index, code, base_offset, append_time, log_start, record_errors, error_message,
                leader_id, leader_epoch,
            )))
        _, pos = _tagged_fields(data, pos)  # topic
    throttle_time_ms: int = _INT32.unpack_from(data, pos)[0]
    tagged, pos = _tagged_fields(data, pos + 4)  # body
    endpoints: list[NodeEndpoint] = []
    if leader_hints and tagged is not None and 0 in tagged:
        endpoints = _node_endpoints(tagged[0])
    return ProduceResponse(correlation_id, partitions, throttle_time_ms, endpoints)


def decode_produce_response(version: int, payload: bytes | bytearray | memoryview) -> ProduceResponse:
    """Decode a Produce response payload (the frame without its size prefix) of the given version.

    The same data as ``messages.decode_response(PRODUCE, version, payload)``,
    as named tuples and with the topic level flattened into each partition.
    Raises :class:`ProtocolError` for truncated or malformed input; bytes after
    a complete body are ignored.
    """
    _check_version(version)
    data = payload if type(payload) is bytes else bytes(payload)
    try:
        correlation_id: int = _INT32.unpack_from(data, 0)[0]
        if version >= FIRST_FLEXIBLE_VERSION:
            return _decode_flexible(data, version, correlation_id)
        return _decode_classic(data, version, correlation_id)
    except ProtocolError:
        raise
    except _DECODE_ERRORS as exc:
        raise ProtocolError(f"malformed or truncated Produce v{version} response: {exc!r}") from exc
