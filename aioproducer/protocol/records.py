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

Appending is the hottest path of the library (once per ``send()``), so
:class:`RecordBatchBuilder` encodes each record straight into one
``bytearray`` holding the *uncompressed* records section: the varints of
small non-negative ints (lengths, offset and timestamp deltas below
``_TABLE_SIZE``) come from a precomputed table, the record body is one
``bytes.join`` of a tuple, and anything outside the fast path (a large value,
an out-of-order timestamp) falls back to a general encoder. The size of the
section is ``len()`` of that buffer, so :attr:`~RecordBatchBuilder.estimated_size_in_bytes`
is O(1) and exact for uncompressed batches.

The producer state (producer id, epoch, base sequence, transactional bit) and
the base offset live only in the header. :meth:`~RecordBatchBuilder.build`
therefore compresses the records section once, closes the builder, and on a
later call (a retry after an epoch bump) re-packs the header and recomputes the
CRC over the cached section, as Java's ``MemoryRecordsBuilder`` /
``ProducerBatch.resetProducerState`` do.

References: the Kafka protocol guide, "Record Batch"; KIP-98 (producer
state), KIP-32 (timestamp types); Java ``DefaultRecordBatch``,
``DefaultRecord``, ``MemoryRecordsBuilder`` (Kafka 3.9).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from crc32c import crc32c

from aioproducer.errors import ProtocolError
from aioproducer.protocol.compression import NONE, check_available, compress, decompress

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
_NO_PARTITION_LEADER_EPOCH: Final = -1

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc | attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount.
_HEAD: Final = struct.Struct(">qiibI")
_TAIL: Final = struct.Struct(">hiqqqhii")
_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
_CRC_START: Final = _HEAD.size  # 21: attributes is the first CRC-covered byte
_LENGTH_END: Final = 12  # batchLength counts the bytes after offset 12
_NO_LIMIT: Final = 1 << 62

# ------------------------------------------------------------------ varints


def _zigzag_varint(n: int) -> bytes:
    """Kafka varint/varlong: zigzag, then 7 bits per byte, low group first."""
    v = (n << 1) ^ (n >> 63)
    if v < 0x4000:
        if v >= 0:
            return bytes((v & 0x7F | 0x80, v >> 7)) if v > 0x7F else bytes((v,))
    elif v < 0x200000:  # offset deltas of big batches of tiny records land here
        return bytes((v & 0x7F | 0x80, (v >> 7) & 0x7F | 0x80, v >> 14))
    if v < 0 or v >= 1 << 64:
        raise ValueError(f"{n} does not fit in a varlong")
    out = bytearray()
    while v > 0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


#: Zigzag varints of 0.._TABLE_SIZE-1, shared bytes objects. 16 Ki entries
#: cover record lengths up to 16 KiB (the default batch.size), offset deltas of
#: any batch that size, and timestamp deltas up to 16 s; ~0.7 MB of memory.
_TABLE_SIZE: Final = 1 << 14
_ZZ: Final[tuple[bytes, ...]] = tuple(_zigzag_varint(i) for i in range(_TABLE_SIZE))
_ZZ_SIZE: Final[tuple[int, ...]] = tuple(len(b) for b in _ZZ)
_NULL: Final = b"\x01"  # zigzag varint of -1: a null key, value or header value
_ZERO: Final = b"\x00"
#: Values longer than this are checked against the batch's room before they are encoded.
_LARGE_VALUE: Final = 1024


def _varint_size(n: int) -> int:
    """Encoded size of ``n`` as a zigzag varint/varlong (Java ``ByteUtils.sizeOfVarlong``)."""
    v = (n << 1) ^ (n >> 63)
    return 1 if v == 0 else (v.bit_length() + 6) // 7


#: Header keys are few and repeated (trace ids, content types), so their
#: length-prefixed UTF-8 form is cached; bounded so that random keys cannot grow it.
_HEADER_KEYS: dict[str, bytes] = {}
_HEADER_KEYS_MAX: Final = 1024


def _encode_headers(headers: Headers) -> bytes:
    """Header count and headers. IndexError when a length is off the table."""
    t = _ZZ
    parts = [t[len(headers)]]
    append = parts.append
    cache = _HEADER_KEYS
    for hkey, hvalue in headers:
        encoded = cache.get(hkey)
        if encoded is None:
            kb = hkey.encode()
            encoded = t[len(kb)] + kb
            if len(cache) < _HEADER_KEYS_MAX:
                cache[hkey] = encoded
        append(encoded)
        if hvalue is None:
            append(_NULL)
        else:
            append(t[len(hvalue)])
            append(hvalue)
    return b"".join(parts)


def _encode_record_body(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Headers | None,
) -> bytes:
    """General (slow-path) encoder of a record without its length prefix."""
    enc = _zigzag_varint
    parts = [_ZERO, enc(timestamp_delta), enc(offset_delta)]
    for blob in (key, value):
        if blob is None:
            parts.append(_NULL)
        else:
            parts.append(enc(len(blob)))
            parts.append(bytes(blob))
    headers = headers or ()
    parts.append(enc(len(headers)))
    for hkey, hvalue in headers:
        kb = hkey.encode()
        parts.append(enc(len(kb)))
        parts.append(kb)
        if hvalue is None:
            parts.append(_NULL)
        else:
            parts.append(enc(len(hvalue)))
            parts.append(bytes(hvalue))
    return b"".join(parts)


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
    """
    return RECORD_BATCH_OVERHEAD + MAX_RECORD_OVERHEAD + _sizeof_key_value_headers(key, value, headers)


# ------------------------------------------------------------------ builder


class Record(NamedTuple):
    """One appended record, as :meth:`RecordBatchBuilder.records` gives it back."""

    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class RecordBatchBuilder:
    """Accumulates records for one partition and builds a magic-2 batch.

    Ownership: one builder belongs to one ``ProducerBatch`` and is touched only
    from the event loop's thread; it is not thread-safe.

    Lifecycle: open (``append``/``try_append``) -> :meth:`build` closes it for
    appends; ``build`` may be called again with other producer state.

    ``compression_type`` is a wire codec id from
    :mod:`aioproducer.protocol.compression`. ``batch_size`` is the write limit
    that :meth:`has_room_for` and :meth:`try_append` respect (Java's
    ``writeLimit``); :meth:`append` ignores it. For compressed batches the
    size of the compressed section is not known until :meth:`build`, so, as in
    Java, it is estimated as ``uncompressed * estimated_compression_ratio *
    1.05``. The ratio defaults to 1.0 (never assume compression helps); the
    accumulator may pass a per-topic running estimate, which :attr:`compression_ratio`
    feeds after each build (Java's ``CompressionRatioEstimator``).
    """

    __slots__ = (
        "_codec",
        "_level",
        "_batch_size",
        "_records_limit",
        "_factor",
        "_buf",
        "_count",
        "_base_ts",
        "_max_ts",
        "_payload",
        "_uncompressed_size",
        "_last_state",
        "_last_built",
    )

    def __init__(
        self,
        compression_type: int = NONE,
        batch_size: int = 16384,
        compression_level: int | None = None,
        *,
        estimated_compression_ratio: float = 1.0,
    ) -> None:
        check_available(compression_type)
        self._codec = compression_type
        self._level = compression_level
        self._batch_size = batch_size
        self._records_limit = batch_size - RECORD_BATCH_OVERHEAD  # room for the records section
        # Multiplier from uncompressed section size to estimated wire size; None
        # for uncompressed batches, whose size is exact.
        self._factor: float | None = (
            None if compression_type == NONE else estimated_compression_ratio * COMPRESSION_RATE_ESTIMATION_FACTOR
        )
        self._buf = bytearray()  # uncompressed records section; dropped by build()
        self._count = 0
        self._base_ts = NO_TIMESTAMP
        self._max_ts = NO_TIMESTAMP
        # Records section as sent, set by the first build(); after a build, a view into the built
        # batch (not a copy of it: a batch in flight holds its bytes once, see build()).
        self._payload: bytes | memoryview | None = None
        self._uncompressed_size = 0
        self._last_state: tuple[int, int, int, bool, int] | None = None
        self._last_built = b""

    # -------------------------------------------------------------- read-only state

    @property
    def compression_type(self) -> int:
        return self._codec

    @property
    def batch_size(self) -> int:
        return self._batch_size

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def base_timestamp(self) -> int:
        """Timestamp of the first record (deltas are relative to it); -1 when empty."""
        return self._base_ts

    @property
    def max_timestamp(self) -> int:
        """Largest record timestamp; -1 when empty."""
        return self._max_ts

    @property
    def is_closed(self) -> bool:
        """True once :meth:`build` ran: no more appends."""
        return self._payload is not None

    @property
    def uncompressed_size_in_bytes(self) -> int:
        """Header plus uncompressed records section."""
        if self._payload is None:
            return RECORD_BATCH_OVERHEAD + len(self._buf)
        return RECORD_BATCH_OVERHEAD + self._uncompressed_size

    @property
    def estimated_size_in_bytes(self) -> int:
        """Wire size of the batch: exact once built or when uncompressed, else estimated. O(1)."""
        if self._payload is not None:
            return RECORD_BATCH_OVERHEAD + len(self._payload)
        if self._factor is None:
            return RECORD_BATCH_OVERHEAD + len(self._buf)
        return RECORD_BATCH_OVERHEAD + int(len(self._buf) * self._factor)

    @property
    def compression_ratio(self) -> float:
        """Compressed / uncompressed section size after :meth:`build` (1.0 before or when empty)."""
        if self._payload is None or self._uncompressed_size == 0:
            return 1.0
        return len(self._payload) / self._uncompressed_size

    # -------------------------------------------------------------- appending

    def has_room_for(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> bool:
        """Whether appending this record keeps the estimated size within ``batch_size``.

        Java's ``MemoryRecordsBuilder.hasRoomFor``: always true for an empty
        builder (a record larger than ``batch.size`` gets a batch of its own),
        false once closed, else estimated size + exact uncompressed record size
        <= ``batch_size`` (conservative: the new record's compression is not
        counted). Prefer :meth:`try_append`, which does not encode twice.
        """
        if self._payload is not None:
            return False
        if self._count == 0:
            return True
        od = self._count
        delta = timestamp_ms - self._base_ts
        sz = _ZZ_SIZE
        try:
            if delta < 0:
                raise IndexError  # a negative index would silently read the table's end
            body = (
                1  # record attributes
                + (len(_encode_headers(headers)) if headers else 1)
                + sz[delta]
                + sz[od]
                + (1 if key is None else sz[len(key)] + len(key))
                + (1 if value is None else sz[len(value)] + len(value))
            )
            size = sz[body] + body
        except IndexError:
            size = record_size_in_bytes(od, delta, key, value, headers)
        factor = self._factor
        used = len(self._buf) if factor is None else int(len(self._buf) * factor)
        return used + size <= self._records_limit

    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> int:
        """Append a record whatever the size; return its offset delta.

        Raises ``RuntimeError`` once the builder is built (closed), as Java's
        ``IllegalStateException``: that is a bug in the caller. The encoder
        lives in :meth:`try_append`, which never refuses the first record, so
        the common use (first record of a fresh batch) costs one extra call;
        forcing a record past ``batch_size`` lifts the limit for one call.
        """
        if self._payload is not None:
            raise RuntimeError("record batch is closed for appends: it was already built")
        od = self.try_append(timestamp_ms, key, value, headers)
        if od < 0:
            limit = self._records_limit
            self._records_limit = _NO_LIMIT
            try:
                od = self.try_append(timestamp_ms, key, value, headers)
            finally:
                self._records_limit = limit
        return od

    def try_append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None = None,
    ) -> int:
        """Append if :meth:`has_room_for` would say so; return the offset delta, or -1 if full.

        The accumulator's fast path (Java's ``ProducerBatch.tryAppend``): the
        record is encoded once and the size check made on the encoded bytes,
        with the same answer :meth:`has_room_for` gives. Returns -1 when closed.
        """
        if self._payload is not None:
            return -1
        od = self._count
        if od and value is not None and len(value) > _LARGE_VALUE:
            # A large value that may not fit: refused before it is encoded (and copied) for
            # nothing. A lower bound of what the check below adds, so it refuses nothing that fits.
            factor = self._factor
            used = len(self._buf) if factor is None else int(len(self._buf) * factor)
            if used + len(value) > self._records_limit:
                return -1
        delta = timestamp_ms - self._base_ts if od else 0
        t = _ZZ
        try:
            if delta < 0:
                raise IndexError  # a negative index would silently read the table's end
            if key is None:
                kp = _NULL
                kb = b""
            else:
                kp = t[len(key)]
                kb = key
            if value is None:
                vp = _NULL
                vb = b""
            else:
                vp = t[len(value)]
                vb = value
            body = b"".join(
                (
                    _ZERO,  # record attributes
                    t[delta],
                    t[od] if od < _TABLE_SIZE else _zigzag_varint(od),  # big batches of tiny records
                    kp,
                    kb,
                    vp,
                    vb,
                    _encode_headers(headers) if headers else _ZERO,
                )
            )
            size = len(body)
            prefix = t[size]
        except IndexError:  # a length or delta off the table: general encoder
            body = _encode_record_body(od, delta, key, value, headers)
            size = len(body)
            prefix = _zigzag_varint(size)
        buf = self._buf
        if od:
            factor = self._factor
            used = len(buf) if factor is None else int(len(buf) * factor)
            if used + len(prefix) + size > self._records_limit:
                return -1
            if timestamp_ms > self._max_ts:
                self._max_ts = timestamp_ms
        else:
            self._base_ts = self._max_ts = timestamp_ms
        buf += prefix
        buf += body
        self._count = od + 1
        return od

    # -------------------------------------------------------------- building

    def build(
        self,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        base_offset: int = 0,
    ) -> bytes:
        """Close the builder and return the batch with this producer state.

        The records section is compressed on the first call and cached; later
        calls (retry after an epoch bump or sequence reset) only re-pack the
        header and recompute the CRC. An empty builder cannot be built: a
        produce request with an empty batch is invalid, so that is a caller
        bug (``RuntimeError``).
        """
        if self._count == 0:
            raise RuntimeError("cannot build an empty record batch")
        state = (producer_id, producer_epoch, base_sequence, is_transactional, base_offset)
        if state == self._last_state:
            return self._last_built
        payload: bytes | bytearray | memoryview
        if self._payload is None:
            raw = self._buf  # uncompressed: joined below as it is, no copy of its own
            self._uncompressed_size = len(raw)
            payload = raw if self._codec == NONE else compress(self._codec, bytes(raw), self._level)
        else:
            payload = self._payload
        attributes = self._codec | (_TRANSACTIONAL_BIT if is_transactional else 0)
        tail = _TAIL.pack(
            attributes,
            self._count - 1,
            self._base_ts,
            self._max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            self._count,
        )
        crc = crc32c(payload, crc32c(tail))
        batch_length = RECORD_BATCH_OVERHEAD - _LENGTH_END + len(payload)
        head = _HEAD.pack(base_offset, batch_length, _NO_PARTITION_LEADER_EPOCH, MAGIC, crc)
        built = b"".join((head, tail, payload))
        # Keep the records section as a view of the batch just built: a batch waiting for its
        # acknowledgement holds its bytes once, not twice (section and batch). A rebuild (new
        # producer state) reads the section from there.
        self._payload = memoryview(built)[RECORD_BATCH_OVERHEAD:]
        self._buf = bytearray()
        self._last_state = state
        self._last_built = built
        return built

    @property
    def bytes_to_compress(self) -> int:
        """How many bytes the first :meth:`build` would compress (0: none, or built already). O(1)."""
        if self._payload is not None or self._codec == NONE:
            return 0
        return len(self._buf)

    def section_to_compress(self) -> bytes | None:
        """The records section the first :meth:`build` would compress, or None if it would not compress.

        A copy: another thread may compress it (:func:`compress` with
        ``compression_type`` and ``compression_level``) while this builder stays
        with its owner, who then hands the result to :meth:`install_compressed`.
        """
        if self._payload is not None or self._codec == NONE or self._count == 0:
            return None
        return bytes(self._buf)

    def install_compressed(self, section: bytes, compressed: bytes) -> None:
        """Close the builder with ``section`` (from :meth:`section_to_compress`) compressed elsewhere.

        Ignored if the builder was built or grew since: :meth:`build` then compresses
        what it holds itself, so a stale result can never drop a record.
        """
        if self._payload is None and len(self._buf) == len(section) and self._count:
            self._uncompressed_size = len(section)
            self._payload = compressed
            self._buf = bytearray()

    @property
    def compression_level(self) -> int | None:
        return self._level

    # -------------------------------------------------------------- splitting

    def release(self) -> None:
        """Drop the record bytes once the batch is acknowledged or failed; keeps counts and timestamps.

        A completed batch stays reachable from the record futures users hold, so
        without this every finished batch would pin its bytes (twice: the
        appended section and the built batch) for as long as any of its futures lives.
        """
        self._buf = bytearray()
        if self._payload is not None:
            self._payload = b""
        self._last_built = b""
        self._last_state = None

    def records(self) -> list[Record]:
        """The appended records, in order (for splitting after MESSAGE_TOO_LARGE).

        Decodes the records section (decompressing it if already built), so it
        costs about what decoding costs; it is meant for the rare split path.
        """
        if self._payload is None:
            section: bytes | bytearray = self._buf
        else:
            section = decompress(self._codec, bytes(self._payload))
        return list(self._decoded_records(section))

    def _decoded_records(self, section: bytes | bytearray) -> list[Record]:
        base_ts = self._base_ts
        return [
            Record(base_ts + ts_delta, key, value, headers)
            for ts_delta, _od, key, value, headers in _decode_records(memoryview(section), self._count)
        ]

    def split(self, max_batch_size: int) -> list[RecordBatchBuilder]:
        """Redistribute the records into new open builders of at most ``max_batch_size``.

        Java's ``ProducerBatch.split``: used when the broker answers
        MESSAGE_TOO_LARGE for a batch of more than one record. Each new builder
        has this one's codec and level; a single record larger than
        ``max_batch_size`` still gets a builder of its own.
        """
        ratio = self.compression_ratio if self._payload is not None else 1.0
        out: list[RecordBatchBuilder] = []
        current: RecordBatchBuilder | None = None
        for rec in self.records():
            if current is None or current.try_append(*rec) < 0:
                current = RecordBatchBuilder(
                    self._codec, max_batch_size, self._level, estimated_compression_ratio=max(ratio, 1.0)
                )
                current.append(*rec)
                out.append(current)
        return out

    def __repr__(self) -> str:
        return (
            f"RecordBatchBuilder(codec={self._codec}, records={self._count}, "
            f"size~{self.estimated_size_in_bytes}/{self._batch_size}, closed={self.is_closed})"
        )


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
