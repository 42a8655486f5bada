"""RecordBatch v2 (magic 2): the builder the producer appends to, and a decoder.

Theory of operation
-------------------
A magic-2 batch is a fixed 61-byte header followed by a *records section*
(compressed as one blob when the batch has a codec)::

    baseOffset int64 | batchLength int32 | partitionLeaderEpoch int32 | magic int8 (=2)
    | crc uint32 | attributes int16 | lastOffsetDelta int32 | baseTimestamp int64
    | maxTimestamp int64 | producerId int64 | producerEpoch int16 | baseSequence int32
    | recordCount int32 | records...

``batchLength`` counts the bytes after itself; the CRC is CRC-32C over
everything from ``attributes`` to the end. Each record is::

    length varint | attributes int8 (=0) | timestampDelta varlong | offsetDelta varint
    | keyLength varint (-1: null) | key | valueLength varint (-1: null) | value
    | headerCount varint | (headerKeyLength varint | utf8 key | headerValueLength varint | value)*

where every varint is zigzag-encoded (Kafka's ``ByteUtils.writeVarint``).
Deltas are relative to the first record's timestamp and offset.

Appending is the hottest path of the library (once per ``send()``), so the
builder is native: :class:`RecordBatchBuilder` is the Rust class of
``native/src/batch_builder.rs`` (``aioproducer._native``), which encodes each record
straight into the batch's records section and keeps the size bookkeeping that
decides whether a record fits. It compresses through
:mod:`aioproducer.protocol.compression` (a read-only view of its section, no
copy), caches the built batch for a retry (an epoch bump re-packs the header and
the CRC only, as Java's ``ProducerBatch.resetProducerState``), and decodes its
own section for :meth:`~RecordBatchBuilder.split`. There is no Python twin of
it: the independent decoders of the tests (aiokafka, kafka-python, confluent-kafka,
the Java consumer) and golden bytes are its oracles.

This module keeps what is per batch or read-side: the sizes the accumulator
reserves with (:func:`estimate_size_in_bytes_upper_bound`) and the decoder
(:func:`decode_batches`) that the tests and ``aioproducer.testing`` read with.

References: the Kafka protocol guide, "Record Batch"; KIP-98 (producer
state), KIP-32 (timestamp types); Java ``DefaultRecordBatch``,
``DefaultRecord``, ``MemoryRecordsBuilder`` (Kafka 3.9).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from crc32c import crc32c

from aioproducer._native import RecordBatchBuilder
from aioproducer.errors import ProtocolError
from aioproducer.protocol.compression import NONE, decompress
from aioproducer.record_types import Record  # handed on: made by the native builder

__all__ = [
    "RECORD_BATCH_OVERHEAD",
    "MAX_RECORD_OVERHEAD",
    "NO_TIMESTAMP",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "COMPRESSION_RATE_ESTIMATION_FACTOR",
    "Record",
    "RecordBatchBuilder",
    "DecodedRecord",
    "DecodedBatch",
    "estimate_size_in_bytes_upper_bound",
    "record_size_in_bytes",
    "decode_batches",
]

Headers = Sequence[tuple[str, bytes | None]]

MAGIC: Final = 2
#: Size of the batch header, fields as in the module docstring:
#: 8 + 4 + 4 + 1 + 4 + 2 + 4 + 8 + 8 + 8 + 2 + 4 + 4.
RECORD_BATCH_OVERHEAD: Final = 61
#: Worst-case record framing besides key, value and headers: length varint (5)
#: + attributes (1) + timestamp delta varlong (10) + offset delta varint (5).
MAX_RECORD_OVERHEAD: Final = 21
NO_TIMESTAMP: Final = -1
TIMESTAMP_CREATE_TIME: Final = 0
TIMESTAMP_LOG_APPEND_TIME: Final = 1
#: Java's ``MemoryRecordsBuilder.COMPRESSION_RATE_ESTIMATION_FACTOR``: the
#: estimated compressed size is inflated by 5% so that a batch rarely
#: overshoots ``batch.size`` after compression.
COMPRESSION_RATE_ESTIMATION_FACTOR: Final = 1.05

_CODEC_MASK: Final = 0x07
_TIMESTAMP_TYPE_BIT: Final = 0x08
_TRANSACTIONAL_BIT: Final = 0x10
_CONTROL_BIT: Final = 0x20

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc | attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount.
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_CRC_START: Final = 21  # attributes is the first CRC-covered byte
_LENGTH_END: Final = 12  # batchLength counts the bytes after offset 12


# ------------------------------------------------------------------ sizes


def _varint_size(n: int) -> int:
    """Encoded size of ``n`` as a zigzag varint/varlong (Java ``ByteUtils.sizeOfVarlong``)."""
    v = (n << 1) ^ (n >> 63)
    return 1 if v == 0 else (v.bit_length() + 6) // 7


def _sizeof_key_value_headers(key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
    size = 1 if key is None else _varint_size(len(key)) + len(key)
    size += 1 if value is None else _varint_size(len(value)) + len(value)
    headers = headers or ()
    size += _varint_size(len(headers))
    for hkey, hvalue in headers:
        klen = len(hkey.encode())
        size += _varint_size(klen) + klen
        size += 1 if hvalue is None else _varint_size(len(hvalue)) + len(hvalue)
    return size


def record_size_in_bytes(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers | None,
) -> int:
    """Exact encoded size of one record, length prefix included (Java ``DefaultRecord.sizeInBytes``)."""
    body = (
        1
        + _varint_size(timestamp_delta)
        + _varint_size(offset_delta)
        + _sizeof_key_value_headers(key, value, headers)
    )
    return _varint_size(body) + body


def estimate_size_in_bytes_upper_bound(
    key: bytes | None, value: bytes | None, headers: Headers | None
) -> int:
    """Upper bound of a batch holding just this record.

    Java's ``AbstractRecords.estimateSizeInBytesUpperBound`` for magic 2: the
    batch header plus the record with worst-case varints for its deltas and
    length. The producer compares it with ``max.request.size`` and
    ``buffer.memory`` before appending, and the accumulator sizes a new batch
    as ``max(batch.size, this)``. Compression is ignored (it may not shrink).
    The producer calls its Rust twin (``size_upper_bound`` in ``native/src/batch_builder.rs``,
    for every new batch and for ``send_arrow()``'s rows: 0.1 µs against about 1 µs here); this
    statement of the formula is the oracle tests/unit/test_native_twins.py checks it against.
    """
    return RECORD_BATCH_OVERHEAD + MAX_RECORD_OVERHEAD + _sizeof_key_value_headers(key, value, headers)


# ------------------------------------------------------------------ builder


# RecordBatchBuilder (imported above) is native/src/batch_builder.rs: ``records()`` gives Records,
# ``split()`` new open builders, ``section_to_compress()`` a read-only view of the open section
# (the builder refuses appends while a view is alive).


# ------------------------------------------------------------------ decoding


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    """A record with absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    """A decoded magic-2 batch; header fields as on the wire."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: list[DecodedRecord]

    @property
    def compression_type(self) -> int:
        return self.attributes & _CODEC_MASK

    @property
    def timestamp_type(self) -> int:
        return TIMESTAMP_LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_BIT else TIMESTAMP_CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_BIT)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


def _read_varint(data: memoryview, pos: int) -> tuple[int, int]:
    """Decode a zigzag varlong at ``pos``; return (value, next position)."""
    result = 0
    shift = 0
    end = len(data)
    while True:
        if pos >= end:
            raise ProtocolError("record is truncated inside a varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ProtocolError("varint is longer than 10 bytes")


def _read_blob(data: memoryview, pos: int, limit: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(data, pos)
    if length < 0:
        if length != -1:
            raise ProtocolError(f"invalid length {length}")
        return None, pos
    end = pos + length
    if end > limit:
        raise ProtocolError("record field runs past the end of the record")
    return bytes(data[pos:end]), end


_RecordTuple = tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def _decode_records(data: memoryview, count: int) -> list[_RecordTuple]:
    """Decode ``count`` records: (timestamp delta, offset delta, key, value, headers)."""
    out: list[_RecordTuple] = []
    pos = 0
    end = len(data)
    for _ in range(count):
        length, pos = _read_varint(data, pos)
        limit = pos + length
        if length < 0 or limit > end:
            raise ProtocolError("record is truncated")
        pos += 1  # record attributes: unused in magic 2
        ts_delta, pos = _read_varint(data, pos)
        offset_delta, pos = _read_varint(data, pos)
        key, pos = _read_blob(data, pos, limit)
        value, pos = _read_blob(data, pos, limit)
        n_headers, pos = _read_varint(data, pos)
        if n_headers < 0:
            raise ProtocolError(f"invalid header count {n_headers}")
        headers: list[tuple[str, bytes | None]] = []
        for _h in range(n_headers):
            hkey, pos = _read_blob(data, pos, limit)
            if hkey is None:
                raise ProtocolError("null header key")
            hvalue, pos = _read_blob(data, pos, limit)
            try:
                headers.append((hkey.decode(), hvalue))
            except UnicodeDecodeError as exc:
                raise ProtocolError("header key is not UTF-8") from exc
        if pos != limit:
            raise ProtocolError(f"record length {length} does not match its fields")
        out.append((ts_delta, offset_delta, key, value, headers))
    if pos != end:
        raise ProtocolError(f"{end - pos} bytes after the last of {count} records")
    return out


def decode_batches(data: bytes | bytearray | memoryview) -> list[DecodedBatch]:
    """Decode every batch in ``data`` (a Produce/Fetch ``records`` field).

    Checks magic (only 2 is supported), length and CRC-32C of each batch;
    truncated, corrupt or malformed input raises :class:`ProtocolError`.
    Records get absolute offsets and timestamps; with LogAppendTime every
    record's timestamp is the batch's max timestamp, as Java reports it.
    """
    view = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
    batches: list[DecodedBatch] = []
    pos = 0
    total = len(view)
    while pos < total:
        if total - pos < RECORD_BATCH_OVERHEAD:
            raise ProtocolError(f"record batch header is truncated ({total - pos} bytes)")
        fields = _HEADER.unpack_from(view, pos)
        batch_length = fields[1]
        magic = fields[3]
        if magic != MAGIC:
            raise ProtocolError(f"unsupported record batch magic {magic}")
        end = pos + _LENGTH_END + batch_length
        if batch_length < RECORD_BATCH_OVERHEAD - _LENGTH_END or end > total:
            raise ProtocolError(f"record batch is truncated: length {batch_length}, {total - pos - 12} bytes left")
        crc = fields[4]
        actual = crc32c(view[pos + _CRC_START : end])
        if actual != crc:
            raise ProtocolError(f"record batch is corrupt: CRC-32C {actual:#010x} != stored {crc:#010x}")
        (
            base_offset,
            _length,
            leader_epoch,
            _magic,
            _crc,
            attributes,
            last_offset_delta,
            base_ts,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        ) = fields
        if count < 0:
            raise ProtocolError(f"invalid record count {count}")
        section: bytes | memoryview = view[pos + RECORD_BATCH_OVERHEAD : end]
        codec = attributes & _CODEC_MASK
        if codec != NONE:
            section = decompress(codec, bytes(section))
        log_append = bool(attributes & _TIMESTAMP_TYPE_BIT)
        records = [
            DecodedRecord(base_offset + od, max_ts if log_append else base_ts + ts_delta, key, value, headers)
            for ts_delta, od, key, value, headers in _decode_records(memoryview(section), count)
        ]
        batches.append(
            DecodedBatch(
                base_offset,
                batch_length,
                leader_epoch,
                magic,
                crc,
                attributes,
                last_offset_delta,
                base_ts,
                max_ts,
                producer_id,
                producer_epoch,
                base_sequence,
                records,
            )
        )
        pos = end
    return batches
