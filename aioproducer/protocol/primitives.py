"""Kafka wire primitives: fixed-width ints, varints, strings, bytes, arrays, tagged fields, UUIDs.

Theory of operation. Writers are plain functions that *append* to a caller-owned
``bytearray`` (``write_int32(buf, 7)``), so a whole frame is built in one growing
buffer with no intermediate ``bytes`` objects. Reading goes through :class:`Reader`,
a cursor over a ``memoryview``: every method checks the remaining length *before*
touching the buffer and raises :class:`~aioproducer.errors.ProtocolError` on
truncation or malformation, so ``IndexError``/``struct.error``/``UnicodeDecodeError``
never escape to the network layer (which must be able to tell "the broker sent
garbage" from "we have a bug").

Encodings follow the Kafka protocol guide ("Protocol Primitive Types"):

* ``STRING`` = int16 length + UTF-8, ``NULLABLE_STRING`` uses length -1 for null;
* ``BYTES`` = int32 length + bytes, ``NULLABLE_BYTES`` uses -1 for null;
* ``ARRAY`` = int32 count (-1 = null) + elements;
* the *compact* forms of KIP-482 (flexible versions) replace the length with an
  unsigned varint of ``length + 1`` so that 0 means null;
* ``VARINT``/``VARLONG`` are zigzag-encoded (as in protobuf), used by record batches;
* a *tagged-field section* is ``uvarint count`` then ``(uvarint tag, uvarint size, bytes)``
  with tags strictly ascending.

Unsigned varints are 32-bit in Kafka (``ByteUtils.readUnsignedVarint``), so readers
reject a fifth byte with continuation set or any value that does not fit: a
length prefix larger than the buffer is malformed input, not a reason to allocate.
"""

from __future__ import annotations

import struct
import uuid
from typing import Final

from aioproducer.errors import ProtocolError

__all__ = [
    "Reader",
    "ZERO_UUID",
    "size_of_unsigned_varint",
    "size_of_varint",
    "size_of_varlong",
    "write_array_length",
    "write_bool",
    "write_bytes",
    "write_compact_array_length",
    "write_compact_bytes",
    "write_compact_nullable_bytes",
    "write_compact_nullable_string",
    "write_compact_string",
    "write_float64",
    "write_int8",
    "write_int16",
    "write_int32",
    "write_int64",
    "write_nullable_bytes",
    "write_nullable_string",
    "write_string",
    "write_tagged_fields",
    "write_uint16",
    "write_uint32",
    "write_unsigned_varint",
    "write_uuid",
    "write_varint",
    "write_varlong",
]

# Precompiled big-endian structs: ``Struct.pack``/``unpack_from`` skip the format parse.
_INT8: Final = struct.Struct(">b")
_INT16: Final = struct.Struct(">h")
_UINT16: Final = struct.Struct(">H")
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")
_INT64: Final = struct.Struct(">q")
_FLOAT64: Final = struct.Struct(">d")

_INT16_MAX: Final = 0x7FFF
_UINT32_MAX: Final = 0xFFFFFFFF
_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_UINT64_MASK: Final = (1 << 64) - 1

#: The all-zero UUID, Kafka's ``Uuid.ZERO_UUID`` ("no topic id").
ZERO_UUID: Final = uuid.UUID(int=0)

# --------------------------------------------------------------------- writers


def write_int8(buf: bytearray, value: int) -> None:
    """Append a signed 8-bit integer."""
    buf += _INT8.pack(value)


def write_bool(buf: bytearray, value: bool) -> None:
    """Append a boolean as one byte, 0 or 1."""
    buf.append(1 if value else 0)


def write_int16(buf: bytearray, value: int) -> None:
    """Append a signed big-endian 16-bit integer."""
    buf += _INT16.pack(value)


def write_uint16(buf: bytearray, value: int) -> None:
    """Append an unsigned big-endian 16-bit integer."""
    buf += _UINT16.pack(value)


def write_int32(buf: bytearray, value: int) -> None:
    """Append a signed big-endian 32-bit integer."""
    buf += _INT32.pack(value)


def write_uint32(buf: bytearray, value: int) -> None:
    """Append an unsigned big-endian 32-bit integer (e.g. a CRC)."""
    buf += _UINT32.pack(value)


def write_int64(buf: bytearray, value: int) -> None:
    """Append a signed big-endian 64-bit integer."""
    buf += _INT64.pack(value)


def write_float64(buf: bytearray, value: float) -> None:
    """Append an IEEE-754 double, big-endian."""
    buf += _FLOAT64.pack(value)


def write_unsigned_varint(buf: bytearray, value: int) -> None:
    """Append an unsigned 32-bit varint (7 bits per byte, low groups first)."""
    if 0 <= value < 0x80:  # lengths and counts below 128: the common case
        buf.append(value)
        return
    if value < 0 or value > _UINT32_MAX:
        raise ValueError(f"unsigned varint out of range: {value}")
    _write_raw_varint(buf, value)


def _write_raw_varint(buf: bytearray, value: int) -> None:
    """Append the base-128 groups of a non-negative integer (no range check)."""
    while value > 0x7F:
        buf.append((value & 0x7F) | 0x80)
        value >>= 7
    buf.append(value)


def write_varint(buf: bytearray, value: int) -> None:
    """Append a zigzag-encoded signed 32-bit varint (record batch fields)."""
    if value < _INT32_MIN or value > _INT32_MAX:
        raise ValueError(f"varint out of int32 range: {value}")
    _write_raw_varint(buf, ((value << 1) ^ (value >> 31)) & _UINT32_MAX)


def write_varlong(buf: bytearray, value: int) -> None:
    """Append a zigzag-encoded signed 64-bit varint (record timestamps and offsets)."""
    if value < _INT64_MIN or value > _INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {value}")
    _write_raw_varint(buf, ((value << 1) ^ (value >> 63)) & _UINT64_MASK)


def size_of_unsigned_varint(value: int) -> int:
    """Bytes :func:`write_unsigned_varint` would append; lets callers size a batch before encoding."""
    return 1 if value < 0x80 else (value.bit_length() + 6) // 7


def size_of_varint(value: int) -> int:
    """Bytes :func:`write_varint` would append for ``value``."""
    return size_of_unsigned_varint(((value << 1) ^ (value >> 31)) & _UINT32_MAX)


def size_of_varlong(value: int) -> int:
    """Bytes :func:`write_varlong` would append for ``value``."""
    return size_of_unsigned_varint(((value << 1) ^ (value >> 63)) & _UINT64_MASK)


def _utf8(value: str) -> bytes:
    return value.encode("utf-8")


def write_string(buf: bytearray, value: str) -> None:
    """Append a non-null ``STRING``: int16 byte length + UTF-8."""
    data = _utf8(value)
    if len(data) > _INT16_MAX:
        raise ValueError(f"string too long for int16 length: {len(data)} bytes")
    buf += _INT16.pack(len(data))
    buf += data


def write_nullable_string(buf: bytearray, value: str | None) -> None:
    """Append a ``NULLABLE_STRING``: length -1 encodes ``None``."""
    if value is None:
        buf += _INT16.pack(-1)
    else:
        write_string(buf, value)


def write_compact_string(buf: bytearray, value: str) -> None:
    """Append a ``COMPACT_STRING``: uvarint(length + 1) + UTF-8."""
    data = _utf8(value)
    write_unsigned_varint(buf, len(data) + 1)
    buf += data


def write_compact_nullable_string(buf: bytearray, value: str | None) -> None:
    """Append a ``COMPACT_NULLABLE_STRING``: a zero length prefix encodes ``None``."""
    if value is None:
        buf.append(0)
    else:
        write_compact_string(buf, value)


def write_bytes(buf: bytearray, value: bytes | bytearray | memoryview) -> None:
    """Append a non-null ``BYTES``: int32 length + raw bytes."""
    buf += _INT32.pack(len(value))
    buf += value


def write_nullable_bytes(buf: bytearray, value: bytes | bytearray | memoryview | None) -> None:
    """Append a ``NULLABLE_BYTES``: length -1 encodes ``None``."""
    if value is None:
        buf += _INT32.pack(-1)
    else:
        write_bytes(buf, value)


def write_compact_bytes(buf: bytearray, value: bytes | bytearray | memoryview) -> None:
    """Append a ``COMPACT_BYTES``: uvarint(length + 1) + raw bytes."""
    write_unsigned_varint(buf, len(value) + 1)
    buf += value


def write_compact_nullable_bytes(
    buf: bytearray, value: bytes | bytearray | memoryview | None
) -> None:
    """Append a ``COMPACT_NULLABLE_BYTES``: a zero length prefix encodes ``None``."""
    if value is None:
        buf.append(0)
    else:
        write_compact_bytes(buf, value)


def write_array_length(buf: bytearray, count: int | None) -> None:
    """Append the int32 element count of an ``ARRAY`` (``None`` = null array, -1)."""
    buf += _INT32.pack(-1 if count is None else count)


def write_compact_array_length(buf: bytearray, count: int | None) -> None:
    """Append the uvarint(count + 1) of a ``COMPACT_ARRAY`` (``None`` = null array, 0)."""
    write_unsigned_varint(buf, 0 if count is None else count + 1)


def write_uuid(buf: bytearray, value: uuid.UUID) -> None:
    """Append a ``UUID``: its 16 bytes, most significant first (Java's ``Uuid``)."""
    buf += value.bytes


def write_tagged_fields(buf: bytearray, fields: dict[int, bytes] | None = None) -> None:
    """Append a tagged-field section from already-encoded ``{tag: payload}``.

    Tags are written in ascending order, as KIP-482 requires. The common case,
    no tagged fields, is a single zero byte.
    """
    if not fields:
        buf.append(0)
        return
    write_unsigned_varint(buf, len(fields))
    for tag in sorted(fields):
        payload = fields[tag]
        write_unsigned_varint(buf, tag)
        write_unsigned_varint(buf, len(payload))
        buf += payload


# --------------------------------------------------------------------- reader


class Reader:
    """A bounds-checked cursor over a byte buffer.

    ``pos`` is public so callers can note where a structure started (to slice a
    CRC range, say) or check that a sub-structure was consumed exactly. Every
    read fails with :class:`ProtocolError` instead of reading past ``end``.
    """

    __slots__ = ("_buf", "pos", "end")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, end: int | None = None) -> None:
        view = data if isinstance(data, memoryview) else memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self._buf: memoryview = view
        self.end: int = len(view) if end is None else end
        if not 0 <= pos <= self.end <= len(view):
            raise ProtocolError(f"reader bounds out of range: pos={pos} end={self.end} len={len(view)}")
        self.pos: int = pos

    @property
    def remaining(self) -> int:
        """Bytes left between the cursor and ``end``."""
        return self.end - self.pos

    def _need(self, n: int, what: str) -> int:
        """Reserve ``n`` bytes; return the start offset and advance past them."""
        pos = self.pos
        if n > self.end - pos:
            raise ProtocolError(f"truncated {what}: need {n} bytes at offset {pos}, {self.end - pos} left")
        self.pos = pos + n
        return pos

    def int8(self) -> int:
        """Read a signed 8-bit integer."""
        value: int = _INT8.unpack_from(self._buf, self._need(1, "int8"))[0]
        return value

    def boolean(self) -> bool:
        """Read a boolean byte; any non-zero value is true, as in the Java client."""
        return self._buf[self._need(1, "bool")] != 0

    def int16(self) -> int:
        """Read a signed big-endian 16-bit integer."""
        value: int = _INT16.unpack_from(self._buf, self._need(2, "int16"))[0]
        return value

    def uint16(self) -> int:
        """Read an unsigned big-endian 16-bit integer."""
        value: int = _UINT16.unpack_from(self._buf, self._need(2, "uint16"))[0]
        return value

    def int32(self) -> int:
        """Read a signed big-endian 32-bit integer."""
        value: int = _INT32.unpack_from(self._buf, self._need(4, "int32"))[0]
        return value

    def uint32(self) -> int:
        """Read an unsigned big-endian 32-bit integer."""
        value: int = _UINT32.unpack_from(self._buf, self._need(4, "uint32"))[0]
        return value

    def int64(self) -> int:
        """Read a signed big-endian 64-bit integer."""
        value: int = _INT64.unpack_from(self._buf, self._need(8, "int64"))[0]
        return value

    def float64(self) -> float:
        """Read an IEEE-754 double."""
        value: float = _FLOAT64.unpack_from(self._buf, self._need(8, "float64"))[0]
        return value

    def _raw_varint(self, max_bytes: int, what: str) -> int:
        buf = self._buf
        pos = self.pos
        end = self.end
        result = 0
        shift = 0
        for _ in range(max_bytes):
            if pos >= end:
                raise ProtocolError(f"truncated {what} at offset {self.pos}")
            byte = buf[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                self.pos = pos
                return result
            shift += 7
        raise ProtocolError(f"{what} longer than {max_bytes} bytes at offset {self.pos}")

    def unsigned_varint(self) -> int:
        """Read an unsigned 32-bit varint (at most 5 bytes)."""
        pos = self.pos
        if pos < self.end:
            byte = self._buf[pos]
            if byte < 0x80:  # fast path: lengths and counts below 128
                self.pos = pos + 1
                return byte
        value = self._raw_varint(5, "unsigned varint")
        if value > _UINT32_MAX:
            raise ProtocolError(f"unsigned varint overflows 32 bits at offset {pos}")
        return value

    def varint(self) -> int:
        """Read a zigzag-encoded signed 32-bit varint."""
        start = self.pos
        raw = self._raw_varint(5, "varint")
        if raw > _UINT32_MAX:
            raise ProtocolError(f"varint overflows 32 bits at offset {start}")
        return (raw >> 1) ^ -(raw & 1)

    def varlong(self) -> int:
        """Read a zigzag-encoded signed 64-bit varint (at most 10 bytes)."""
        start = self.pos
        raw = self._raw_varint(10, "varlong")
        if raw > _UINT64_MASK:
            raise ProtocolError(f"varlong overflows 64 bits at offset {start}")
        return (raw >> 1) ^ -(raw & 1)

    def raw(self, n: int) -> memoryview:
        """Return the next ``n`` bytes as a zero-copy view."""
        if n < 0:
            raise ProtocolError(f"negative length {n} at offset {self.pos}")
        start = self._need(n, "bytes")
        return self._buf[start : start + n]

    def _text(self, n: int) -> str:
        start = self._need(n, "string")
        try:
            return str(self._buf[start : start + n], "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"invalid UTF-8 in string at offset {start}") from exc

    def string(self) -> str:
        """Read a non-null ``STRING``."""
        n = self.int16()
        if n < 0:
            raise ProtocolError(f"null or negative length {n} for non-nullable string at offset {self.pos - 2}")
        return self._text(n)

    def nullable_string(self) -> str | None:
        """Read a ``NULLABLE_STRING`` (length -1 is ``None``)."""
        n = self.int16()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"negative string length {n} at offset {self.pos - 2}")
        return self._text(n)

    def compact_string(self) -> str:
        """Read a non-null ``COMPACT_STRING``."""
        n = self.unsigned_varint()
        if n == 0:
            raise ProtocolError(f"null for non-nullable compact string at offset {self.pos - 1}")
        return self._text(n - 1)

    def compact_nullable_string(self) -> str | None:
        """Read a ``COMPACT_NULLABLE_STRING`` (prefix 0 is ``None``)."""
        n = self.unsigned_varint()
        return None if n == 0 else self._text(n - 1)

    def bytes_(self) -> bytes:
        """Read a non-null ``BYTES`` into a new ``bytes`` object."""
        n = self.int32()
        if n < 0:
            raise ProtocolError(f"null or negative length {n} for non-nullable bytes at offset {self.pos - 4}")
        return bytes(self.raw(n))

    def nullable_bytes(self) -> bytes | None:
        """Read a ``NULLABLE_BYTES`` (length -1 is ``None``)."""
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"negative bytes length {n} at offset {self.pos - 4}")
        return bytes(self.raw(n))

    def compact_bytes(self) -> bytes:
        """Read a non-null ``COMPACT_BYTES``."""
        n = self.unsigned_varint()
        if n == 0:
            raise ProtocolError(f"null for non-nullable compact bytes at offset {self.pos - 1}")
        return bytes(self.raw(n - 1))

    def compact_nullable_bytes(self) -> bytes | None:
        """Read a ``COMPACT_NULLABLE_BYTES`` (prefix 0 is ``None``)."""
        n = self.unsigned_varint()
        return None if n == 0 else bytes(self.raw(n - 1))

    def array_length(self) -> int | None:
        """Read an ``ARRAY`` count; ``None`` for a null array.

        A count larger than the bytes left is rejected at once: every element
        takes at least one byte, so such a count can only be garbage and would
        otherwise make a caller preallocate a huge list.
        """
        n = self.int32()
        if n == -1:
            return None
        if n < 0 or n > self.end - self.pos:
            raise ProtocolError(f"invalid array length {n} at offset {self.pos - 4}")
        return n

    def compact_array_length(self) -> int | None:
        """Read a ``COMPACT_ARRAY`` count; ``None`` for a null array (prefix 0)."""
        start = self.pos
        n = self.unsigned_varint()
        if n == 0:
            return None
        if n - 1 > self.end - self.pos:
            raise ProtocolError(f"invalid compact array length {n - 1} at offset {start}")
        return n - 1

    def uuid(self) -> uuid.UUID:
        """Read a 16-byte ``UUID``."""
        start = self._need(16, "uuid")
        return uuid.UUID(bytes=bytes(self._buf[start : start + 16]))

    def tagged_fields(self) -> dict[int, memoryview]:
        """Read a tagged-field section into ``{tag: payload view}``.

        Tags must be strictly ascending (the Java reader rejects duplicates and
        the spec requires order); payloads are returned undecoded so callers
        decode the tags they know and skip the rest, which is what makes
        tagged fields forward compatible.
        """
        count = self.unsigned_varint()
        if count == 0:
            return {}
        fields: dict[int, memoryview] = {}
        last = -1
        for _ in range(count):
            tag = self.unsigned_varint()
            if tag <= last:
                raise ProtocolError(f"tagged field {tag} out of order after {last} at offset {self.pos}")
            last = tag
            size = self.unsigned_varint()
            fields[tag] = self.raw(size)
        return fields

    def skip_tagged_fields(self) -> None:
        """Consume a tagged-field section without keeping it (headers, unknown structs)."""
        self.tagged_fields()
