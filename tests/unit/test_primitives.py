"""Wire primitives: golden bytes, round trips (hypothesis at the bounds), and malformed input.

The golden bytes are the examples of the Kafka protocol guide and of protobuf's
varint encoding, computed by hand, so a symmetric bug in writer and reader
cannot hide behind a passing round trip.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aioproducer.errors import ProtocolError
from aioproducer.protocol import primitives as p
from aioproducer.protocol.primitives import Reader

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT32_MAX = 2**32 - 1


def written(write: Callable[[bytearray, Any], None], value: Any) -> bytes:
    buf = bytearray()
    write(buf, value)
    return bytes(buf)


# ------------------------------------------------------------- fixed width

FIXED = [
    (p.write_int8, Reader.int8, -(2**7), 2**7 - 1, 1),
    (p.write_int16, Reader.int16, -(2**15), 2**15 - 1, 2),
    (p.write_uint16, Reader.uint16, 0, 2**16 - 1, 2),
    (p.write_int32, Reader.int32, INT32_MIN, INT32_MAX, 4),
    (p.write_uint32, Reader.uint32, 0, UINT32_MAX, 4),
    (p.write_int64, Reader.int64, INT64_MIN, INT64_MAX, 8),
]


@pytest.mark.parametrize(("write", "read", "low", "high", "width"), FIXED)
def test_fixed_width_bounds_round_trip(
    write: Callable[[bytearray, int], None], read: Callable[[Reader], int], low: int, high: int, width: int
) -> None:
    for value in (low, -1 if low < 0 else 0, 0, 1, high):
        data = written(write, value)
        assert len(data) == width
        r = Reader(data)
        assert read(r) == value
        assert r.remaining == 0


@pytest.mark.parametrize(("write", "read", "low", "high", "width"), FIXED)
def test_fixed_width_truncated(
    write: Callable[[bytearray, int], None], read: Callable[[Reader], int], low: int, high: int, width: int
) -> None:
    data = written(write, high)
    for cut in range(width):
        with pytest.raises(ProtocolError):
            read(Reader(data[:cut]))


def test_fixed_width_golden_big_endian() -> None:
    assert written(p.write_int16, 1) == b"\x00\x01"
    assert written(p.write_int32, -2) == b"\xff\xff\xff\xfe"
    assert written(p.write_int64, 0x0102030405060708) == bytes(range(1, 9))
    assert written(p.write_uint32, 0xDEADBEEF) == b"\xde\xad\xbe\xef"
    assert written(p.write_bool, True) == b"\x01"
    assert written(p.write_float64, 1.5) == b"\x3f\xf8" + b"\x00" * 6


@given(st.integers(INT64_MIN, INT64_MAX))
def test_int64_round_trip(value: int) -> None:
    assert Reader(written(p.write_int64, value)).int64() == value


def test_bool_reads_any_nonzero_as_true() -> None:
    assert Reader(b"\x00").boolean() is False
    assert Reader(b"\x02").boolean() is True


@given(st.floats(allow_nan=False))
def test_float64_round_trip(value: float) -> None:
    assert Reader(written(p.write_float64, value)).float64() == value


# ---------------------------------------------------------------- varints


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
     (UINT32_MAX, b"\xff\xff\xff\xff\x0f")],
)
def test_unsigned_varint_golden(value: int, encoded: bytes) -> None:
    assert written(p.write_unsigned_varint, value) == encoded
    assert Reader(encoded).unsigned_varint() == value
    assert p.size_of_unsigned_varint(value) == len(encoded)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01"),
     (INT32_MAX, b"\xfe\xff\xff\xff\x0f"), (INT32_MIN, b"\xff\xff\xff\xff\x0f")],
)
def test_zigzag_varint_golden(value: int, encoded: bytes) -> None:
    assert written(p.write_varint, value) == encoded
    assert Reader(encoded).varint() == value
    assert p.size_of_varint(value) == len(encoded)


def test_zigzag_varlong_golden_bounds() -> None:
    assert written(p.write_varlong, INT64_MIN) == b"\xff" * 9 + b"\x01"
    assert written(p.write_varlong, INT64_MAX) == b"\xfe" + b"\xff" * 8 + b"\x01"
    assert p.size_of_varlong(INT64_MIN) == 10


@given(st.integers(0, UINT32_MAX))
def test_unsigned_varint_round_trip(value: int) -> None:
    data = written(p.write_unsigned_varint, value)
    r = Reader(data)
    assert r.unsigned_varint() == value
    assert r.remaining == 0
    assert p.size_of_unsigned_varint(value) == len(data)


@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_round_trip(value: int) -> None:
    data = written(p.write_varint, value)
    r = Reader(data)
    assert r.varint() == value
    assert r.remaining == 0
    assert p.size_of_varint(value) == len(data)


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_round_trip(value: int) -> None:
    data = written(p.write_varlong, value)
    r = Reader(data)
    assert r.varlong() == value
    assert r.remaining == 0
    assert p.size_of_varlong(value) == len(data)


@pytest.mark.parametrize(
    ("write", "value"),
    [(p.write_unsigned_varint, -1), (p.write_unsigned_varint, UINT32_MAX + 1),
     (p.write_varint, INT32_MAX + 1), (p.write_varint, INT32_MIN - 1),
     (p.write_varlong, INT64_MAX + 1), (p.write_varlong, INT64_MIN - 1)],
)
def test_varint_writers_reject_out_of_range(write: Callable[[bytearray, int], None], value: int) -> None:
    with pytest.raises(ValueError):
        write(bytearray(), value)


@pytest.mark.parametrize(
    ("read", "data"),
    [
        (Reader.unsigned_varint, b"\x80\x80\x80\x80\x80\x01"),  # six bytes
        (Reader.unsigned_varint, b"\xff\xff\xff\xff\x1f"),  # 2**33 - 1: overflows 32 bits
        (Reader.varint, b"\xff\xff\xff\xff\x1f"),
        (Reader.varlong, b"\xff" * 10 + b"\x01"),  # eleven bytes
        (Reader.varlong, b"\xff" * 9 + b"\x7f"),  # overflows 64 bits
        (Reader.unsigned_varint, b"\x80"),  # truncated
        (Reader.varlong, b""),
    ],
)
def test_malformed_varints_raise_protocol_error(read: Callable[[Reader], int], data: bytes) -> None:
    with pytest.raises(ProtocolError):
        read(Reader(data))


# ------------------------------------------------------- strings and bytes


def test_string_golden() -> None:
    assert written(p.write_string, "abc") == b"\x00\x03abc"
    assert written(p.write_nullable_string, None) == b"\xff\xff"
    assert written(p.write_compact_string, "abc") == b"\x04abc"
    assert written(p.write_compact_nullable_string, None) == b"\x00"
    assert written(p.write_compact_string, "") == b"\x01"
    assert written(p.write_string, "é") == b"\x00\x02\xc3\xa9"  # length counts UTF-8 bytes


def test_bytes_golden() -> None:
    assert written(p.write_bytes, b"ab") == b"\x00\x00\x00\x02ab"
    assert written(p.write_nullable_bytes, None) == b"\xff\xff\xff\xff"
    assert written(p.write_compact_bytes, b"ab") == b"\x03ab"
    assert written(p.write_compact_nullable_bytes, None) == b"\x00"


text = st.text(max_size=40)
blobs = st.binary(max_size=300)


@given(text)
def test_strings_round_trip(value: str) -> None:
    for write, read in [
        (p.write_string, Reader.string),
        (p.write_nullable_string, Reader.nullable_string),
        (p.write_compact_string, Reader.compact_string),
        (p.write_compact_nullable_string, Reader.compact_nullable_string),
    ]:
        r = Reader(written(write, value))
        assert read(r) == value
        assert r.remaining == 0


@given(blobs)
def test_bytes_round_trip(value: bytes) -> None:
    for write, read in [
        (p.write_bytes, Reader.bytes_),
        (p.write_nullable_bytes, Reader.nullable_bytes),
        (p.write_compact_bytes, Reader.compact_bytes),
        (p.write_compact_nullable_bytes, Reader.compact_nullable_bytes),
    ]:
        r = Reader(written(write, value))
        assert read(r) == value
        assert r.remaining == 0


def test_nullables_round_trip_none() -> None:
    assert Reader(written(p.write_nullable_string, None)).nullable_string() is None
    assert Reader(written(p.write_compact_nullable_string, None)).compact_nullable_string() is None
    assert Reader(written(p.write_nullable_bytes, None)).nullable_bytes() is None
    assert Reader(written(p.write_compact_nullable_bytes, None)).compact_nullable_bytes() is None


@pytest.mark.parametrize(
    ("read", "data"),
    [
        (Reader.string, b"\xff\xff"),  # null where not nullable
        (Reader.string, b"\xff\xfe"),  # negative length
        (Reader.nullable_string, b"\xff\xfe"),
        (Reader.compact_string, b"\x00"),
        (Reader.bytes_, b"\xff\xff\xff\xff"),
        (Reader.nullable_bytes, b"\xff\xff\xff\xfe"),
        (Reader.compact_bytes, b"\x00"),
        (Reader.string, b"\x00\x02\xc3\x28"),  # invalid UTF-8
        (Reader.compact_nullable_string, b"\x02\xff"),
        (Reader.string, b"\x00\x05abc"),  # truncated payload
        (Reader.compact_bytes, b"\x05ab"),
    ],
)
def test_malformed_strings_and_bytes(read: Callable[[Reader], Any], data: bytes) -> None:
    with pytest.raises(ProtocolError):
        read(Reader(data))


def test_string_longer_than_int16_rejected_on_write() -> None:
    with pytest.raises(ValueError):
        p.write_string(bytearray(), "x" * 40000)


# ------------------------------------------------------ arrays, uuids, tags


def test_array_lengths() -> None:
    assert written(p.write_array_length, 2) == b"\x00\x00\x00\x02"
    assert written(p.write_array_length, None) == b"\xff\xff\xff\xff"
    assert written(p.write_compact_array_length, 2) == b"\x03"
    assert written(p.write_compact_array_length, None) == b"\x00"
    assert Reader(b"\x00\x00\x00\x01x").array_length() == 1
    assert Reader(b"\xff\xff\xff\xff").array_length() is None
    assert Reader(b"\x02x").compact_array_length() == 1
    assert Reader(b"\x00").compact_array_length() is None


@pytest.mark.parametrize(
    ("read", "data"),
    [
        (Reader.array_length, b"\x7f\xff\xff\xff"),  # more elements than bytes left
        (Reader.array_length, b"\xff\xff\xff\xfe"),
        (Reader.compact_array_length, b"\xff\xff\xff\xff\x0f"),
        (Reader.array_length, b"\x00\x00"),
    ],
)
def test_malformed_array_lengths(read: Callable[[Reader], Any], data: bytes) -> None:
    with pytest.raises(ProtocolError):
        read(Reader(data))


@given(st.uuids())
def test_uuid_round_trip(value: uuid.UUID) -> None:
    data = written(p.write_uuid, value)
    assert data == value.bytes
    assert Reader(data).uuid() == value


def test_uuid_truncated() -> None:
    with pytest.raises(ProtocolError):
        Reader(b"\x00" * 15).uuid()


def test_tagged_fields_golden_and_sorted() -> None:
    assert written(p.write_tagged_fields, {}) == b"\x00"
    # Written in ascending tag order whatever the dict order.
    assert written(p.write_tagged_fields, {3: b"z", 1: b"ab"}) == b"\x02\x01\x02ab\x03\x01z"
    fields = Reader(b"\x02\x01\x02ab\x03\x01z").tagged_fields()
    assert {tag: bytes(v) for tag, v in fields.items()} == {1: b"ab", 3: b"z"}


@given(st.dictionaries(st.integers(0, 2**20), st.binary(max_size=20), max_size=6))
def test_tagged_fields_round_trip(fields: dict[int, bytes]) -> None:
    r = Reader(written(p.write_tagged_fields, fields))
    assert {tag: bytes(v) for tag, v in r.tagged_fields().items()} == fields
    assert r.remaining == 0


@pytest.mark.parametrize(
    "data",
    [
        b"\x02\x03\x01z\x01\x02ab",  # descending tags
        b"\x02\x01\x01a\x01\x01b",  # duplicate tag
        b"\x01\x01\x05ab",  # payload truncated
        b"\x02\x01\x01a",  # fewer fields than announced
    ],
)
def test_malformed_tagged_fields(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        Reader(data).tagged_fields()


# ------------------------------------------------------------------ reader


def test_reader_views_without_copy_and_respects_end() -> None:
    data = b"\x00\x00\x00\x07rest"
    r = Reader(memoryview(data), end=4)
    assert r.int32() == 7
    assert r.remaining == 0
    with pytest.raises(ProtocolError):
        r.int8()  # bytes exist past ``end`` but are not this reader's


def test_reader_rejects_bad_bounds() -> None:
    with pytest.raises(ProtocolError):
        Reader(b"ab", pos=3)
    with pytest.raises(ProtocolError):
        Reader(b"ab", end=3)


def test_reader_raw_rejects_negative_length() -> None:
    with pytest.raises(ProtocolError):
        Reader(b"abc").raw(-1)


def _write_everything(buf: bytearray) -> None:
    p.write_int8(buf, -3)
    p.write_int16(buf, 300)
    p.write_int32(buf, -70000)
    p.write_int64(buf, 2**40)
    p.write_uint32(buf, 2**31)
    p.write_unsigned_varint(buf, 2**20)
    p.write_varint(buf, -5000)
    p.write_varlong(buf, -(2**40))
    p.write_string(buf, "topic")
    p.write_nullable_string(buf, None)
    p.write_compact_string(buf, "héllo")
    p.write_compact_nullable_string(buf, "x")
    p.write_bytes(buf, b"\x01\x02")
    p.write_nullable_bytes(buf, b"")
    p.write_compact_bytes(buf, b"abc")
    p.write_compact_nullable_bytes(buf, None)
    p.write_array_length(buf, 0)
    p.write_compact_array_length(buf, 0)
    p.write_uuid(buf, uuid.UUID(int=12345))
    p.write_tagged_fields(buf, {0: b"\x01"})


def _read_everything(r: Reader) -> list[Any]:
    return [
        r.int8(), r.int16(), r.int32(), r.int64(), r.uint32(), r.unsigned_varint(), r.varint(), r.varlong(),
        r.string(), r.nullable_string(), r.compact_string(), r.compact_nullable_string(),
        r.bytes_(), r.nullable_bytes(), r.compact_bytes(), r.compact_nullable_bytes(),
        r.array_length(), r.compact_array_length(), r.uuid(),
        {k: bytes(v) for k, v in r.tagged_fields().items()},
    ]


def test_sequence_of_all_primitives_round_trips() -> None:
    buf = bytearray()
    _write_everything(buf)
    r = Reader(bytes(buf))
    assert _read_everything(r) == [
        -3, 300, -70000, 2**40, 2**31, 2**20, -5000, -(2**40), "topic", None, "héllo", "x",
        b"\x01\x02", b"", b"abc", None, 0, 0, uuid.UUID(int=12345), {0: b"\x01"},
    ]
    assert r.remaining == 0


def test_truncation_at_every_offset_raises_protocol_error() -> None:
    buf = bytearray()
    _write_everything(buf)
    data = bytes(buf)
    for cut in range(len(data)):
        with pytest.raises(ProtocolError):
            _read_everything(Reader(data[:cut]))
