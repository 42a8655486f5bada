"""The pure half of the read-back (``aioproducer.testing.readback``): Fetch answers to records, without sockets.

Batches are written here byte by byte (``batch()``, from the protocol guide's
"Record Batch" layout), not with the producer's native builder, so a layout
mistake shared by the builder and the decoder would still show. What is checked:
cutting a partial batch, records before the fetch offset, the next offset to
fetch, control batches, and read_committed's dropping of aborted transactions
as KIP-98 describes it (per producer id, from the transaction's first offset to
its ABORT marker).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import cast

import pytest
from crc32c import crc32c

from aioproducer.errors import ProtocolError
from aioproducer.network.client import KafkaClient
from aioproducer.testing.readback import (
    ConsumerRecord,
    _TopicReader,
    check_read_arguments,
    complete_batches,
    fetched_records,
    read_topic,
    visible_batches,
)
from aioproducer.protocol.records import decode_batches

_TRANSACTIONAL = 0x10
_CONTROL = 0x20
NO_PRODUCER = -1


def _varint(n: int) -> bytes:
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _blob(b: bytes | None) -> bytes:
    return _varint(-1) if b is None else _varint(len(b)) + b


Rec = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]


def _record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None,
            headers: Sequence[tuple[str, bytes | None]]) -> bytes:
    body = b"\x00" + _varint(ts_delta) + _varint(offset_delta) + _blob(key) + _blob(value)
    body += _varint(len(headers)) + b"".join(_blob(k.encode()) + _blob(v) for k, v in headers)
    return _varint(len(body)) + body


def batch(base_offset: int, records: Sequence[Rec], *, producer_id: int = NO_PRODUCER, attributes: int = 0,
          base_timestamp: int = 1_700_000_000_000) -> bytes:
    """One magic-2 batch, uncompressed, CRC-32C set; record i has offset base+i and timestamp base+i."""
    section = b"".join(_record(i, i, k, v, h) for i, (k, v, h) in enumerate(records))
    last_delta = len(records) - 1
    after_crc = struct.pack(">hiqqqhii", attributes, last_delta, base_timestamp, base_timestamp + last_delta,
                            producer_id, 0 if producer_id >= 0 else -1, 0 if producer_id >= 0 else -1,
                            len(records)) + section
    length = 4 + 1 + 4 + len(after_crc)  # leader epoch, magic, crc, the rest
    return struct.pack(">qiibI", base_offset, length, 0, 2, crc32c(after_crc)) + after_crc


def data(base_offset: int, *values: bytes, producer_id: int = NO_PRODUCER, transactional: bool = False) -> bytes:
    records = [(None, v, ()) for v in values]
    return batch(base_offset, records, producer_id=producer_id, attributes=_TRANSACTIONAL if transactional else 0)


def marker(offset: int, producer_id: int, *, commit: bool) -> bytes:
    """A transaction marker: a control batch whose one record's key is (version 0, type 1 COMMIT / 0 ABORT)."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)  # version, coordinator epoch
    return batch(offset, [(key, value, ())], producer_id=producer_id, attributes=_TRANSACTIONAL | _CONTROL)


def values(records: list[ConsumerRecord]) -> list[bytes | None]:
    return [r.value for r in records]


# ------------------------------------------------------------------ batches


def test_hand_written_batch_decodes() -> None:
    """The helper's bytes are what the project's decoder (and Kafka) read: offsets, timestamps, headers, nulls."""
    [b] = decode_batches(batch(10, [(b"k", None, [("h", None), ("a", b"1")]), (None, b"v", [])]))
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in b.records] == [
        (10, 1_700_000_000_000, b"k", None, [("h", None), ("a", b"1")]),
        (11, 1_700_000_000_001, None, b"v", []),
    ]


def test_complete_batches_cuts_a_partial_batch_at_the_end() -> None:
    whole = data(0, b"a") + data(1, b"b", b"c")
    cut = whole + data(3, b"d")[:30]
    assert bytes(complete_batches(cut)) == whole
    assert bytes(complete_batches(whole)) == whole
    assert bytes(complete_batches(whole[:5])) == b""  # not even the length yet
    assert bytes(complete_batches(b"")) == b""


def test_fetched_records_reads_every_whole_batch_and_moves_past_the_last() -> None:
    records, next_offset = fetched_records("t", 3, data(0, b"a") + data(1, b"b", b"c") + data(3, b"d"),
                                           fetch_offset=0)
    assert values(records) == [b"a", b"b", b"c", b"d"]
    assert [(r.topic, r.partition, r.offset) for r in records] == [("t", 3, 0), ("t", 3, 1), ("t", 3, 2), ("t", 3, 3)]
    assert next_offset == 4


def test_fetched_records_keeps_fields_headers_as_tuples() -> None:
    raw = batch(5, [(b"k", None, [("h", None), ("a", b"1")])], base_timestamp=42)
    [record], _ = fetched_records("t", 0, raw, fetch_offset=5)
    assert record == ConsumerRecord("t", 0, 5, b"k", None, (("h", None), ("a", b"1")), 42)
    with pytest.raises(AttributeError):
        record.value = b"x"  # type: ignore[misc]  # frozen


def test_fetched_records_after_a_partial_batch_resume_at_its_offset() -> None:
    raw = data(0, b"a") + data(1, b"b", b"c")[:40]
    records, next_offset = fetched_records("t", 0, raw, fetch_offset=0)
    assert values(records) == [b"a"]
    assert next_offset == 1


def test_fetched_records_drops_records_before_the_fetch_offset() -> None:
    """A Fetch from inside a (compressed) batch answers the whole batch: the records before the offset were read."""
    records, next_offset = fetched_records("t", 0, data(10, b"a", b"b", b"c", b"d"), fetch_offset=12)
    assert [(r.offset, r.value) for r in records] == [(12, b"c"), (13, b"d")]
    assert next_offset == 14


def test_fetched_records_without_batches_stays_at_the_fetch_offset() -> None:
    assert fetched_records("t", 0, None, fetch_offset=7) == ([], 7)
    assert fetched_records("t", 0, b"", fetch_offset=7) == ([], 7)


def test_a_corrupt_batch_is_a_protocol_error() -> None:
    raw = bytearray(data(0, b"a"))
    raw[-1] ^= 0xFF
    with pytest.raises(ProtocolError, match="CRC"):
        fetched_records("t", 0, bytes(raw), fetch_offset=0)


@pytest.mark.parametrize("read_committed", [False, True])
def test_control_batches_are_never_records_but_are_moved_past(read_committed: bool) -> None:
    raw = data(0, b"a", producer_id=7, transactional=True) + marker(1, 7, commit=True) + data(2, b"b")
    records, next_offset = fetched_records("t", 0, raw, fetch_offset=0, read_committed=read_committed)
    assert values(records) == [b"a", b"b"]
    records, next_offset = fetched_records("t", 0, raw[: len(raw) - len(data(2, b"b"))], fetch_offset=0,
                                           read_committed=read_committed)
    assert values(records) == [b"a"]
    assert next_offset == 2  # past the marker: the next Fetch must not read it again


def _zero_crc(raw: bytes) -> bytes:
    return raw[:17] + b"\x00\x00\x00\x00" + raw[21:]


@pytest.mark.parametrize("read_committed", [False, True])
def test_a_marker_with_a_zero_crc_is_read_as_librdkafkas_mock_writes_it(read_committed: bool) -> None:
    raw = (data(0, b"x", producer_id=8, transactional=True) + _zero_crc(marker(1, 8, commit=False))
           + data(2, b"ok", producer_id=8, transactional=True) + _zero_crc(marker(3, 8, commit=True)))
    records, next_offset = fetched_records("t", 0, raw, fetch_offset=0, aborted=[(8, 0)], read_committed=read_committed)
    assert values(records) == ([b"ok"] if read_committed else [b"x", b"ok"])
    assert next_offset == 4


def test_a_data_batch_with_a_zero_crc_is_still_corrupt() -> None:
    with pytest.raises(ProtocolError, match="CRC"):
        fetched_records("t", 0, _zero_crc(data(0, b"a", producer_id=8, transactional=True)), fetch_offset=0)


# ---------------------------------------------------------- read_committed


def _committed_aborted_committed() -> tuple[bytes, list[tuple[int, int]]]:
    """plain 0 | txn 7: 1-2, COMMIT 3 | txn 8: 4-5, ABORT 6 | txn 7: 7, COMMIT 8 | plain 9."""
    raw = (
        data(0, b"plain-0")
        + data(1, b"c1-a", b"c1-b", producer_id=7, transactional=True) + marker(3, 7, commit=True)
        + data(4, b"x-a", b"x-b", producer_id=8, transactional=True) + marker(6, 8, commit=False)
        + data(7, b"c2", producer_id=7, transactional=True) + marker(8, 7, commit=True)
        + data(9, b"plain-9")
    )
    return raw, [(8, 4)]


def test_read_committed_drops_the_aborted_transaction_only() -> None:
    raw, aborted = _committed_aborted_committed()
    records, next_offset = fetched_records("t", 0, raw, fetch_offset=0, aborted=aborted, read_committed=True)
    assert values(records) == [b"plain-0", b"c1-a", b"c1-b", b"c2", b"plain-9"]
    assert next_offset == 10


def test_read_uncommitted_keeps_the_aborted_transaction() -> None:
    raw, aborted = _committed_aborted_committed()
    records, _ = fetched_records("t", 0, raw, fetch_offset=0, aborted=aborted, read_committed=False)
    assert values(records) == [b"plain-0", b"c1-a", b"c1-b", b"x-a", b"x-b", b"c2", b"plain-9"]


def test_aborted_transaction_interleaved_with_a_committed_one() -> None:
    """Producers 8 (aborted) and 9 (committed) write in turns: only producer 8's batches go."""
    raw = (
        data(4, b"x-1", producer_id=8, transactional=True)
        + data(5, b"ok-1", producer_id=9, transactional=True)
        + data(6, b"x-2", producer_id=8, transactional=True)
        + marker(7, 8, commit=False)
        + data(8, b"ok-2", producer_id=9, transactional=True)
        + marker(9, 9, commit=True)
    )
    records, _ = fetched_records("t", 0, raw, fetch_offset=4, aborted=[(8, 4)], read_committed=True)
    assert values(records) == [b"ok-1", b"ok-2"]


def test_the_abort_marker_ends_the_aborted_transaction() -> None:
    """The same producer's next transaction, after its ABORT marker, is kept."""
    raw = (
        data(0, b"x", producer_id=8, transactional=True) + marker(1, 8, commit=False)
        + data(2, b"ok", producer_id=8, transactional=True) + marker(3, 8, commit=True)
    )
    records, _ = fetched_records("t", 0, raw, fetch_offset=0, aborted=[(8, 0)], read_committed=True)
    assert values(records) == [b"ok"]


def test_an_aborted_transaction_counts_only_from_its_first_offset() -> None:
    """Producer 8 committed at 0-1, then aborted at 2-3: the earlier transaction stays."""
    raw = (
        data(0, b"ok", producer_id=8, transactional=True) + marker(1, 8, commit=True)
        + data(2, b"x", producer_id=8, transactional=True) + marker(3, 8, commit=False)
    )
    records, _ = fetched_records("t", 0, raw, fetch_offset=0, aborted=[(8, 2)], read_committed=True)
    assert values(records) == [b"ok"]


def test_an_aborted_transaction_begun_before_the_fetch_offset() -> None:
    """The answer names a transaction whose first offset precedes the fetched range: its batches still go."""
    raw = data(5, b"x", producer_id=8, transactional=True) + marker(6, 8, commit=False) + data(7, b"plain")
    records, next_offset = fetched_records("t", 0, raw, fetch_offset=5, aborted=[(8, 0)], read_committed=True)
    assert values(records) == [b"plain"]
    assert next_offset == 8


def test_a_read_to_the_end_offsets_keeps_no_record_past_them() -> None:
    """Records written after the ends were taken may come in the same answer: they are not kept (count=None)."""
    reader = _TopicReader(cast(KafkaClient, None), "t", 0)  # _take() needs no client
    reader.positions, reader.records = {0: 0}, {0: []}
    part = {"partition_index": 0, "error_code": 0, "aborted_transactions": None,
            "records": data(0, b"a", b"b") + data(2, b"late")}
    reader._take(part, 2)
    assert values(reader.result()) == [b"a", b"b"]
    assert reader.positions == {0: 3}
    reader.positions, reader.records = {0: 0}, {0: []}
    reader._take(part, None)  # while waiting for count records: everything
    assert values(reader.result()) == [b"a", b"b", b"late"]


def test_visible_batches_of_nothing() -> None:
    assert visible_batches([], [(1, 0)], read_committed=True) == []


# ------------------------------------------------------------------ arguments


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"topic": ""}, ValueError, "topic"),
        ({"topic": 5}, TypeError, "topic"),
        ({"topic": b"t"}, TypeError, "topic"),
        ({"count": -1}, ValueError, "count"),
        ({"count": True}, TypeError, "count"),
        ({"count": 2.0}, TypeError, "count"),
        ({"count": "3"}, TypeError, "count"),
        ({"timeout": 0}, ValueError, "timeout"),
        ({"timeout": -1.5}, ValueError, "timeout"),
        ({"timeout": float("nan")}, ValueError, "timeout"),
        ({"timeout": float("inf")}, ValueError, "timeout"),
        ({"timeout": "1"}, TypeError, "timeout"),
        ({"timeout": None}, TypeError, "timeout"),
        ({"timeout": False}, TypeError, "timeout"),
        ({"isolation_level": "committed"}, ValueError, "isolation_level"),
        ({"isolation_level": 1}, ValueError, "isolation_level"),
    ],
)
async def test_bad_arguments_raise_naming_the_argument_before_connecting(
    kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    args: dict[str, object] = {"topic": "t", "count": None, "timeout": 1.0, "isolation_level": "read_uncommitted"}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        check_read_arguments(args["topic"], args["count"], args["timeout"], args["isolation_level"])
    topic = args.pop("topic")
    with pytest.raises(error, match=match):  # nothing listens on port 1: a connection attempt would fail otherwise
        await read_topic("127.0.0.1:1", topic, **args)  # type: ignore[arg-type]


@pytest.mark.parametrize("count", [None, 0, 5])
def test_good_arguments_pass(count: int | None) -> None:
    check_read_arguments("t", count, 0.5, "read_committed")
    check_read_arguments("t", count, 3, "read_uncommitted")
