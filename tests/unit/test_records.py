"""RecordBatch v2: golden bytes, round trips, size accounting, rebuilds, corruption.

The golden test spells the batch out byte by byte from the protocol guide so
that a symmetric bug in builder and decoder cannot hide; the cross-checks run
our bytes through kafka-python's and aiokafka's independent parsers, and theirs
through ours.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AiokafkaBatch
from aiokafka.record.default_records import DefaultRecordBatchBuilder as AiokafkaBuilder
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch
from kafka.record.default_records import DefaultRecordBatchBuilder as KafkaPythonBuilder

from aioproducer.errors import ProtocolError
from aioproducer.protocol import compression, records
from aioproducer.protocol.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD
from aioproducer.protocol.records import (
    RECORD_BATCH_OVERHEAD,
    DecodedBatch,
    Record,
    RecordBatchBuilder,
    decode_batches,
    estimate_size_in_bytes_upper_bound,
    record_size_in_bytes,
)

ALL_CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
TS = 1_700_000_000_000
Hdrs = list[tuple[str, bytes | None]]


def build_with(codec: int, recs: Sequence[tuple[int, bytes | None, bytes | None, Hdrs]], **state: int) -> bytes:
    builder = RecordBatchBuilder(codec, batch_size=1 << 30)
    for ts, key, value, headers in recs:
        builder.append(ts, key, value, headers)
    return builder.build(**state)  # type: ignore[arg-type]


def only_batch(data: bytes) -> DecodedBatch:
    batches = decode_batches(data)
    assert len(batches) == 1
    return batches[0]


# ------------------------------------------------------------------ golden bytes


def test_golden_bytes() -> None:
    big_value = b"\xab" * 200
    # Records, spelled out per the protocol guide; every varint is zigzag.
    record0 = bytes(
        [
            0x00,  # attributes
            0x00,  # timestampDelta 0
            0x00,  # offsetDelta 0
            0x02, *b"k",  # keyLength 1 -> zigzag 2
            0x04, *b"v1",  # valueLength 2 -> zigzag 4
            0x00,  # headers count 0
        ]
    )
    record1 = bytes(
        [
            0x00,  # attributes
            0x0A,  # timestampDelta 5 -> 10
            0x02,  # offsetDelta 1 -> 2
            0x01,  # keyLength -1: null key
            0x00,  # valueLength 0: empty value
            0x04,  # 2 headers
            0x02, *b"h", 0x02, *b"x",  # "h" = b"x"
            0x02, *b"n", 0x01,  # "n" = null
        ]
    )
    record2 = bytes(
        [
            0x00,  # attributes
            0x01,  # timestampDelta -1 (out of order) -> 1
            0x04,  # offsetDelta 2 -> 4
            0x01,  # null key
            0x90, 0x03,  # valueLength 200 -> 400 = 0b11_0010000 -> 0x90 0x03
        ]
    ) + big_value + b"\x00"
    assert (len(record0), len(record1), len(record2)) == (9, 13, 207)
    section = (
        b"\x12" + record0  # length 9 -> 18
        + b"\x1a" + record1  # length 13 -> 26
        + b"\x9e\x03" + record2  # length 207 -> 414 = 0x19E -> 0x9E 0x03
    )
    after_crc = struct.pack(
        ">hiqqqhii",
        0x10,  # attributes: no compression, CreateTime, transactional
        2,  # lastOffsetDelta
        TS,  # baseTimestamp: first record's
        TS + 5,  # maxTimestamp
        7,  # producerId
        1,  # producerEpoch
        3,  # baseSequence
        3,  # records count
    ) + section
    expected = (
        struct.pack(">qiib", 100, 4 + 1 + 4 + len(after_crc), -1, 2)  # baseOffset, batchLength, leader epoch, magic
        + struct.pack(">I", crc32c(after_crc))
        + after_crc
    )

    builder = RecordBatchBuilder(NONE)
    assert builder.append(TS, b"k", b"v1", None) == 0
    assert builder.append(TS + 5, None, b"", [("h", b"x"), ("n", None)]) == 1
    assert builder.append(TS - 1, None, big_value, []) == 2
    built = builder.build(producer_id=7, producer_epoch=1, base_sequence=3, is_transactional=True, base_offset=100)
    assert built == expected
    assert len(built) == RECORD_BATCH_OVERHEAD + len(section)
    assert builder.estimated_size_in_bytes == len(built)


def test_golden_header_of_idempotent_and_plain_batches() -> None:
    builder = RecordBatchBuilder(NONE)
    builder.append(TS, None, b"v", None)
    plain = builder.build()
    assert plain[:12] == struct.pack(">qi", 0, 49 + 8)  # one record: length byte + 7-byte body
    assert plain[12:17] == b"\xff\xff\xff\xff\x02"  # no leader epoch, magic 2
    assert plain[21:] == struct.pack(">hiqqqhii", 0, 0, TS, TS, -1, -1, -1, 1) + b"\x0e\x00\x00\x00\x01\x02v\x00"


# ------------------------------------------------------------------ round trips

MIXED: list[tuple[int, bytes | None, bytes | None, Hdrs]] = [
    (TS, b"key", b"value", []),
    (TS + 1, None, b"null key", []),
    (TS + 2, b"null value", None, []),
    (TS + 3, b"", b"", []),
    (TS + 3, None, None, [("dup", b"1"), ("dup", b"2"), ("nullv", None), ("ключ-🔑", "значение".encode())]),
    (TS - 50, b"older", b"out of order timestamp", [("", b"")]),
    (TS + 100_000, b"k" * 20_000, b"v" * 70_000, [("big", b"h" * 17_000)]),  # off the varint table
    (TS + 7, b"k", bytes(range(256)) * 4, [("h" * 300, b"x")]),
]


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_round_trip_every_codec(codec: int) -> None:
    data = build_with(codec, MIXED, producer_id=42, producer_epoch=3, base_sequence=10, base_offset=1000)
    batch = only_batch(data)
    assert batch.compression_type == codec
    assert batch.magic == 2
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 10)
    assert batch.base_offset == 1000
    assert batch.last_offset_delta == len(MIXED) - 1
    assert batch.base_timestamp == TS
    assert batch.max_timestamp == TS + 100_000
    assert not batch.is_transactional and not batch.is_control
    assert batch.timestamp_type == records.TIMESTAMP_CREATE_TIME
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == [
        (1000 + i, ts, key, value, headers) for i, (ts, key, value, headers) in enumerate(MIXED)
    ]


def test_compression_shrinks_the_wire_batch() -> None:
    recs: list[tuple[int, bytes | None, bytes | None, Hdrs]] = [
        (TS + i, b"key-%d" % i, b"the same value over and over " * 5, []) for i in range(200)
    ]
    plain = build_with(NONE, recs)
    for codec in (GZIP, SNAPPY, LZ4, ZSTD):
        assert len(build_with(codec, recs)) < len(plain) // 3, codec


record_strategy = st.tuples(
    st.integers(min_value=-(1 << 40), max_value=1 << 40),
    st.none() | st.binary(max_size=300),
    st.none() | st.binary(max_size=300),
    st.lists(st.tuples(st.text(max_size=20), st.none() | st.binary(max_size=50)), max_size=4),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=30), st.sampled_from(ALL_CODECS))
def test_hypothesis_round_trip(recs: list[tuple[int, bytes | None, bytes | None, Hdrs]], codec: int) -> None:
    base = TS
    builder = RecordBatchBuilder(codec, batch_size=1 << 30)
    for i, (dt, key, value, headers) in enumerate(recs):
        assert builder.append(base + dt, key, value, headers) == i
    assert builder.records() == [Record(base + dt, k, v, h) for dt, k, v, h in recs]
    if codec == NONE:
        assert builder.estimated_size_in_bytes == len(build_with(NONE, [(base + dt, k, v, h) for dt, k, v, h in recs]))
    data = builder.build(producer_id=1, producer_epoch=2, base_sequence=3)
    batch = only_batch(data)
    assert batch.base_timestamp == base + recs[0][0]
    assert batch.max_timestamp == max(base + dt for dt, *_ in recs)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == [
        (i, base + dt, k, v, h) for i, (dt, k, v, h) in enumerate(recs)
    ]
    assert builder.records() == [Record(base + dt, k, v, h) for dt, k, v, h in recs]


@settings(max_examples=100, deadline=None)
@given(st.lists(record_strategy, min_size=1, max_size=20))
def test_hypothesis_record_size_is_exact(recs: list[tuple[int, bytes | None, bytes | None, Hdrs]]) -> None:
    builder = RecordBatchBuilder(NONE, batch_size=1 << 30)
    for i, (dt, key, value, headers) in enumerate(recs):
        before = builder.estimated_size_in_bytes
        delta = dt - recs[0][0]
        expected = record_size_in_bytes(i, delta, key, value, headers)
        builder.append(TS + dt, key, value, headers)
        assert builder.estimated_size_in_bytes - before == expected
        assert expected <= estimate_size_in_bytes_upper_bound(key, value, headers) - RECORD_BATCH_OVERHEAD


def test_multiple_batches_decode_in_order() -> None:
    a = build_with(NONE, [(TS, b"a", b"1", [])], base_offset=0)
    b = build_with(ZSTD, [(TS, b"b", b"2", []), (TS, b"c", b"3", [])], base_offset=1)
    decoded = decode_batches(a + b)
    assert [r.offset for batch in decoded for r in batch.records] == [0, 1, 2]
    assert [r.key for batch in decoded for r in batch.records] == [b"a", b"b", b"c"]
    assert decode_batches(b"") == []
    assert len(decode_batches(memoryview(a + b))) == 2


def test_log_append_time_reports_the_batch_max_timestamp() -> None:
    data = bytearray(build_with(NONE, [(TS, b"a", b"1", []), (TS + 9, b"b", b"2", [])]))
    data[22] |= 0x08  # attributes low byte: timestamp type = LogAppendTime
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    batch = only_batch(bytes(data))
    assert batch.timestamp_type == records.TIMESTAMP_LOG_APPEND_TIME
    assert [r.timestamp for r in batch.records] == [TS + 9, TS + 9]


# ------------------------------------------------------------------ sizes and room


def test_upper_bound_matches_java_formula() -> None:
    # 61 batch header + 21 max record overhead + (1 + 8) key + (2 + 100) value + 1 header count;
    # the value length 100 zigzags to 200, which takes two varint bytes.
    assert estimate_size_in_bytes_upper_bound(b"k" * 8, b"v" * 100, None) == 194
    assert estimate_size_in_bytes_upper_bound(None, None, []) == 61 + 21 + 3
    # header: key varint + utf-8 bytes ("é" is 2 bytes), value varint + bytes; null value is 1 byte
    assert estimate_size_in_bytes_upper_bound(None, None, [("é", b"xyz"), ("a", None)]) == 61 + 21 + 1 + 1 + 1 + (1 + 2 + 1 + 3) + (1 + 1 + 1)


def test_upper_bound_bounds_a_real_single_record_batch() -> None:
    for key, value, headers in [(b"k", b"v" * 10_000, [("a", b"b")]), (None, None, None)]:
        builder = RecordBatchBuilder(NONE)
        builder.append(TS, key, value, headers)
        assert len(builder.build()) <= estimate_size_in_bytes_upper_bound(key, value, headers)


def test_first_record_always_fits() -> None:
    builder = RecordBatchBuilder(NONE, batch_size=100)
    huge = b"x" * 10_000
    assert builder.has_room_for(TS, None, huge, None)
    assert builder.try_append(TS, None, huge, None) == 0
    assert builder.estimated_size_in_bytes > 100
    assert not builder.has_room_for(TS, None, b"", None)
    assert builder.try_append(TS, None, b"", None) == -1
    assert builder.record_count == 1


def test_batch_size_is_respected_exactly() -> None:
    value = b"v" * 100  # record: 1 length + 1 attr + 1 ts + 1-2 offset + 1 null key + 1 + 100 value + 1 headers
    builder = RecordBatchBuilder(NONE, batch_size=16384)
    while builder.try_append(TS, None, value, None) >= 0:
        pass
    count = builder.record_count
    size = builder.estimated_size_in_bytes
    next_record = record_size_in_bytes(count, 0, None, value, None)
    assert size <= 16384 < size + next_record
    assert not builder.has_room_for(TS, None, value, None)
    assert len(builder.build()) == size
    # has_room_for agrees with try_append one record earlier
    again = RecordBatchBuilder(NONE, batch_size=16384)
    for _ in range(count - 1):
        again.append(TS, None, value, None)
    assert again.has_room_for(TS, None, value, None)


def test_record_exactly_filling_the_batch_is_accepted() -> None:
    builder = RecordBatchBuilder(NONE, batch_size=1000)
    builder.append(TS, None, b"a", None)
    room = 1000 - builder.estimated_size_in_bytes
    # one record of exactly `room` bytes: length(2) attr(1) ts(1) od(1) key(1) value varint(2) + v + headers(1)
    value = b"x" * (room - 9)
    assert record_size_in_bytes(1, 0, None, value, None) == room
    assert builder.has_room_for(TS, None, value, None)
    assert not builder.has_room_for(TS, None, value + b"x", None)
    assert builder.try_append(TS, None, value, None) == 1
    assert builder.estimated_size_in_bytes == 1000


def test_has_room_for_with_headers_and_late_timestamps() -> None:
    builder = RecordBatchBuilder(NONE, batch_size=300)
    builder.append(TS, b"k", b"v", None)
    headers: Hdrs = [("trace", b"x" * 50)]
    fits = builder.has_room_for(TS - 10, b"k", b"v" * 100, headers)
    expected = builder.estimated_size_in_bytes + record_size_in_bytes(1, -10, b"k", b"v" * 100, headers) <= 300
    assert fits == expected == True  # noqa: E712
    assert builder.try_append(TS - 10, b"k", b"v" * 100, headers) == 1
    assert builder.max_timestamp == TS and builder.base_timestamp == TS


def test_refused_record_leaves_no_trace() -> None:
    builder = RecordBatchBuilder(NONE, batch_size=200)
    builder.append(TS, b"k", b"v" * 50, None)
    size = builder.estimated_size_in_bytes
    assert builder.try_append(TS + 1000, b"k", b"v" * 200, None) == -1
    assert (builder.record_count, builder.estimated_size_in_bytes, builder.max_timestamp) == (1, size, TS)


def test_compressed_size_is_estimated_like_java() -> None:
    builder = RecordBatchBuilder(GZIP, batch_size=16384)
    plain = RecordBatchBuilder(NONE, batch_size=16384)
    for b in (builder, plain):
        for i in range(10):
            b.append(TS, None, b"v" * 100, None)
    section = plain.estimated_size_in_bytes - RECORD_BATCH_OVERHEAD
    # ratio 1.0 (no prior knowledge) x Java's 1.05 safety factor
    assert builder.estimated_size_in_bytes == RECORD_BATCH_OVERHEAD + int(section * 1.05)
    assert builder.uncompressed_size_in_bytes == plain.estimated_size_in_bytes
    built = builder.build()
    assert builder.estimated_size_in_bytes == len(built)
    assert builder.compression_ratio < 0.5
    hinted = RecordBatchBuilder(GZIP, batch_size=16384, estimated_compression_ratio=0.5)
    hinted.append(TS, None, b"v" * 100, None)
    assert hinted.estimated_size_in_bytes == RECORD_BATCH_OVERHEAD + int((hinted.uncompressed_size_in_bytes - 61) * 0.5 * 1.05)


def test_compressed_batches_fill_by_estimate() -> None:
    builder = RecordBatchBuilder(ZSTD, batch_size=4096)
    n = 0
    while builder.try_append(TS, None, b"v" * 100, None) >= 0:
        n += 1
    # the estimate (uncompressed x 1.05) is what limits, not the compressed size
    assert builder.estimated_size_in_bytes <= 4096
    assert n == builder.record_count
    assert len(builder.build()) < 4096 // 4


# ------------------------------------------------------------------ build and rebuild


def test_build_twice_restamps_header_and_keeps_the_section(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real_compress = compression.compress

    def counting_compress(codec: int, data: bytes, level: int | None = None) -> bytes:
        calls.append(codec)
        return real_compress(codec, data, level)

    monkeypatch.setattr(compression, "compress", counting_compress)
    builder = RecordBatchBuilder(LZ4, compression_level=1)
    for i in range(50):
        builder.append(TS + i, b"k%d" % i, b"value %d" % i, [("h", b"%d" % i)])
    first = builder.build(producer_id=5, producer_epoch=0, base_sequence=0)
    second = builder.build(producer_id=5, producer_epoch=1, base_sequence=0, is_transactional=True, base_offset=9)
    assert calls == [LZ4]
    assert first[RECORD_BATCH_OVERHEAD:] == second[RECORD_BATCH_OVERHEAD:]
    assert first != second
    a, b = only_batch(first), only_batch(second)  # decode_batches checks both CRCs
    assert (a.producer_epoch, a.is_transactional, a.base_offset) == (0, False, 0)
    assert (b.producer_epoch, b.is_transactional, b.base_offset) == (1, True, 9)
    assert a.crc != b.crc
    assert [r.value for r in a.records] == [r.value for r in b.records]
    assert builder.build(producer_id=5, producer_epoch=0, base_sequence=0) == first


def test_closed_builder_refuses_appends() -> None:
    builder = RecordBatchBuilder(NONE)
    builder.append(TS, None, b"v", None)
    builder.build()
    assert builder.is_closed
    with pytest.raises(RuntimeError):
        builder.append(TS, None, b"v", None)
    assert builder.try_append(TS, None, b"v", None) == -1
    assert not builder.has_room_for(TS, None, b"v", None)
    assert builder.record_count == 1


def test_empty_builder_cannot_be_built() -> None:
    builder = RecordBatchBuilder(NONE)
    assert builder.has_room_for(TS, None, b"v", None)
    assert builder.base_timestamp == builder.max_timestamp == -1
    with pytest.raises(RuntimeError):
        builder.build()


# ------------------------------------------------------------------ records() and split()


@pytest.mark.parametrize("codec", [NONE, ZSTD])
def test_records_and_split(codec: int) -> None:
    builder = RecordBatchBuilder(codec, batch_size=1 << 20)
    recs = [Record(TS + i, b"k%d" % i, b"v" * 300, [("i", b"%d" % i)]) for i in range(40)]
    for r in recs:
        builder.append(*r)
    assert builder.records() == recs
    builder.build(producer_id=1, producer_epoch=0, base_sequence=0)
    assert builder.records() == recs  # from the compressed, cached section
    parts = builder.split(2000)
    assert len(parts) > 1
    assert [r for p in parts for r in p.records()] == recs
    for part in parts:
        assert not part.is_closed and part.compression_type == codec
        assert part.estimated_size_in_bytes <= 2000
        assert only_batch(part.build()).records[0].timestamp == part.base_timestamp


def test_split_gives_an_oversized_record_its_own_builder() -> None:
    builder = RecordBatchBuilder(NONE)
    builder.append(TS, None, b"a", None)
    builder.append(TS, None, b"b" * 5000, None)
    builder.append(TS, None, b"c", None)
    parts = builder.split(1000)
    assert [[r.value for r in p.records()] for p in parts] == [[b"a"], [b"b" * 5000], [b"c"]]


# ------------------------------------------------------------------ corruption


def test_crc_mismatch_is_detected() -> None:
    data = build_with(NONE, [(TS, b"key", b"value", [])])
    for index in (21, 30, len(data) - 2):  # attributes, a header field, record bytes
        corrupt = bytearray(data)
        corrupt[index] ^= 0x01
        with pytest.raises(ProtocolError, match="CRC"):
            decode_batches(bytes(corrupt))
    wrong_crc = bytearray(data)
    wrong_crc[17] ^= 0xFF
    with pytest.raises(ProtocolError, match="CRC"):
        decode_batches(bytes(wrong_crc))


@pytest.mark.parametrize("codec", [NONE, GZIP])
def test_truncation_raises_protocol_error(codec: int) -> None:
    data = build_with(codec, MIXED[:5])
    for cut in range(1, len(data)):
        with pytest.raises(ProtocolError):
            decode_batches(data[:cut])


def test_other_magic_is_refused() -> None:
    data = bytearray(build_with(NONE, [(TS, b"k", b"v", [])]))
    data[16] = 1
    with pytest.raises(ProtocolError, match="magic"):
        decode_batches(bytes(data))


def _restamp(section: bytes, count: int) -> bytes:
    """A batch with a hand-made records section and a valid CRC."""
    tail = struct.pack(">hiqqqhii", 0, count - 1, TS, TS, -1, -1, -1, count) + section
    return struct.pack(">qiibI", 0, 9 + len(tail), -1, 2, crc32c(tail)) + tail


def test_malformed_records_with_valid_crc_raise_protocol_error() -> None:
    good = b"\x0e\x00\x00\x00\x01\x02v\x00"  # length 7, null key, value "v", no headers
    assert only_batch(_restamp(good, 1)).records[0].value == b"v"
    for bad, count in [
        (good, 2),  # count says more records than there are
        (good + b"\x00", 1),  # trailing bytes
        (b"\x10\x00\x00\x00\x01\x02v\x00\x00", 1),  # length larger than the fields
        (b"\x0e\x00\x00\x00\x01\x06v\x00", 1),  # value runs past the record
        (b"\x0e\x00\x00\x00\x01\x03v\x00", 1),  # value length -2
        (b"\x0e\x00\x00\x00\x01\x01\x02\x01", 1),  # null header key
        (b"\x12\x00\x00\x00\x01\x01\x02\x02\xff\x01", 1),  # header key not utf-8
        (b"\x16\x00" + b"\xff" * 10 + b"\x00\x01\x01\x00", 1),  # varint too long
    ]:
        with pytest.raises(ProtocolError):
            decode_batches(_restamp(bad, count))


# ------------------------------------------------------------------ cross-checks with independent implementations

KP_CODECS = [NONE, GZIP, LZ4, ZSTD]  # kafka-python's snappy needs python-snappy, not installed


def _their_records(batch: object) -> list[tuple[int, int, bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]  # type: ignore[attr-defined]


def _expected(base_offset: int) -> list[tuple[int, int, bytes | None, bytes | None, Hdrs]]:
    return [(base_offset + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(MIXED)]


@pytest.mark.parametrize("codec", KP_CODECS)
def test_kafka_python_reads_our_batches(codec: int) -> None:
    data = build_with(codec, MIXED, producer_id=9, producer_epoch=2, base_sequence=100, base_offset=5)
    batch = KafkaPythonBatch(bytearray(data))
    assert batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 100)
    assert batch.compression_type == codec and batch.last_offset_delta == len(MIXED) - 1
    assert _their_records(batch) == _expected(5)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_aiokafka_reads_our_batches(codec: int) -> None:
    data = build_with(codec, MIXED, producer_id=9, producer_epoch=2, base_sequence=100, base_offset=5)
    batch = AiokafkaBatch(data)
    assert batch.validate_crc()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 100)
    assert batch.compression_type == codec
    assert _their_records(batch) == _expected(5)


@pytest.mark.parametrize("codec", KP_CODECS)
def test_we_read_kafka_python_batches(codec: int) -> None:
    builder = KafkaPythonBuilder(2, codec, False, 77, 4, 12, 1 << 30)
    for i, (ts, key, value, headers) in enumerate(MIXED):
        builder.append(i, ts, key, value, headers)
    batch = only_batch(bytes(builder.build()))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 4, 12)
    assert batch.compression_type == codec
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == _expected(0)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_we_read_aiokafka_batches(codec: int) -> None:
    builder = AiokafkaBuilder(2, codec, 0, 77, 4, 12, 1 << 30)
    for i, (ts, key, value, headers) in enumerate(MIXED):
        builder.append(i, ts, key, value, headers)
    batch = only_batch(bytes(builder.build()))
    assert batch.compression_type == codec
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records] == _expected(0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(record_strategy, min_size=1, max_size=25),
    st.sampled_from(ALL_CODECS),
    st.tuples(st.integers(-1, (1 << 63) - 1), st.integers(-1, (1 << 15) - 1), st.integers(-1, (1 << 31) - 1)),
    st.booleans(),
    st.integers(0, 1 << 40),
)
def test_hypothesis_the_independent_decoders_read_what_the_native_builder_writes(
    recs: list[tuple[int, bytes | None, bytes | None, Hdrs]],
    codec: int,
    state: tuple[int, int, int],
    transactional: bool,
    base_offset: int,
) -> None:
    """The native builder's oracles: aiokafka's and kafka-python's decoders, every codec, any producer state.

    Keys, values and header values null, empty or not; header keys any text; timestamps out of
    order and far from the first (deltas beyond the one-byte varints).
    """
    producer_id, epoch, sequence = state
    data = build_with(
        codec,
        [(TS + dt, k, v, h) for dt, k, v, h in recs],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=transactional,
        base_offset=base_offset,
    )
    expected = [(base_offset + i, TS + dt, k, v, h) for i, (dt, k, v, h) in enumerate(recs)]
    for batch in (AiokafkaBatch(data), KafkaPythonBatch(bytearray(data))):
        assert batch.validate_crc()
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == state
        assert batch.compression_type == codec and batch.is_transactional == transactional
        assert _their_records(batch) == expected


def test_snappy_batch_payload_is_xerial() -> None:
    data = build_with(SNAPPY, MIXED)
    assert data[RECORD_BATCH_OVERHEAD : RECORD_BATCH_OVERHEAD + 8] == b"\x82SNAPPY\x00"
    assert compression.decompress(SNAPPY, data[RECORD_BATCH_OVERHEAD:])


@settings(max_examples=100, deadline=None)
@given(
    st.lists(record_strategy, min_size=1, max_size=40),
    st.integers(min_value=80, max_value=3000),
    st.sampled_from([NONE, LZ4]),
)
def test_hypothesis_has_room_for_agrees_with_try_append(
    recs: list[tuple[int, bytes | None, bytes | None, Hdrs]], batch_size: int, codec: int
) -> None:
    builder = RecordBatchBuilder(codec, batch_size=batch_size)
    for dt, key, value, headers in recs:
        ts = TS + dt % 100_000  # mostly on the table, sometimes out of order
        before = (builder.record_count, builder.estimated_size_in_bytes)
        room = builder.has_room_for(ts, key, value, headers)
        od = builder.try_append(ts, key, value, headers)
        assert room == (od >= 0)
        if od < 0:
            assert (builder.record_count, builder.estimated_size_in_bytes) == before
        else:
            assert od == before[0]
            # exact for uncompressed; compressed batches check the *new* record uncompressed
            # against the ratio-scaled old size, as Java does, so may end slightly above
            assert before[0] == 0 or codec != NONE or builder.estimated_size_in_bytes <= batch_size


def test_a_section_compressed_elsewhere_builds_the_same_batch_as_build_itself() -> None:
    def filled() -> RecordBatchBuilder:
        builder = RecordBatchBuilder(GZIP)
        for i in range(3):
            builder.append(1000 + i, b"k", b"value %d " % i * 50)
        return builder

    inline, elsewhere = filled(), filled()
    section = elsewhere.section_to_compress()
    assert section is not None and elsewhere.bytes_to_compress == len(section)
    elsewhere.install_compressed(section, compression.compress(GZIP, section, elsewhere.compression_level))
    assert elsewhere.bytes_to_compress == 0 and elsewhere.section_to_compress() is None
    assert elsewhere.build(7, 1, 0) == inline.build(7, 1, 0)


def test_a_stale_compressed_section_is_ignored_and_build_compresses_what_the_builder_holds() -> None:
    builder = RecordBatchBuilder(GZIP)
    builder.append(1, None, b"first")
    section = builder.section_to_compress()
    assert section is not None and section.readonly
    # While the compression thread may read the section, it cannot grow under it.
    assert builder.try_append(2, None, b"second") == -1
    with pytest.raises(RuntimeError, match="being compressed"):
        builder.append(2, None, b"second")
    copy = bytes(section)
    section.release()
    builder.append(2, None, b"second")  # grew after the section was taken
    builder.install_compressed(copy, compression.compress(GZIP, copy))
    assert not builder.is_closed
    assert [r.value for r in decode_batches(builder.build())[0].records] == [b"first", b"second"]
    assert RecordBatchBuilder(NONE).section_to_compress() is None


def test_the_section_view_outlives_a_release_of_its_builder() -> None:
    """The compression thread's view stays readable if the batch completes meanwhile (no dangling bytes)."""
    builder = RecordBatchBuilder(LZ4)
    builder.append(1, b"k", b"v" * 1000)
    section = builder.section_to_compress()
    assert section is not None
    expected = bytes(section)
    builder.release()
    assert bytes(section) == expected
    compressed = compression.compress(LZ4, section)
    builder.install_compressed(section, compressed)  # released: ignored
    section.release()
    with pytest.raises(RuntimeError, match="released"):
        builder.build()


def test_zstd_compressors_are_per_thread() -> None:
    """The loop and the sender's compression thread compress at once: a ZstdCompressor must not be shared."""
    import threading

    compression.compress(ZSTD, b"x" * 100)
    mine = dict(compression._zstd_compressors.by_level)
    theirs: list[dict[int, object]] = []

    def other() -> None:
        compression.compress(ZSTD, b"x" * 100)
        theirs.append(dict(compression._zstd_compressors.by_level))

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert theirs[0] and theirs[0].keys() <= mine.keys() and all(mine[k] is not theirs[0][k] for k in theirs[0])


@pytest.mark.parametrize("codec", [NONE, LZ4], ids=["none", "lz4"])
@pytest.mark.parametrize("first", [1, 3000, 12_000])
def test_a_large_value_is_accepted_exactly_when_has_room_for_says_it_fits(codec: int, first: int) -> None:
    """try_append refuses a large value before encoding it; it must never refuse one that fits.

    Around the largest value that still fits after a first record of ``first`` bytes (found
    with has_room_for), try_append accepts exactly the values has_room_for accepts.
    """

    def fresh() -> RecordBatchBuilder:
        builder = RecordBatchBuilder(codec, batch_size=16384)
        builder.append(TS, None, b"f" * first, None)
        return builder

    builder = fresh()
    largest = max(n for n in range(1025, 16384) if builder.has_room_for(TS, None, b"x" * n, None))
    assert largest > 1024  # the pre-check applies to it
    for n in range(largest - 3, largest + 4):
        assert (fresh().try_append(TS, None, b"x" * n, None) >= 0) == (n <= largest), n
