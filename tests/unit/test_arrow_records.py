"""send_arrow's native reader (``ArrowRecords``): every Arrow layout it takes, and the errors for the rest.

Rows are appended to a native ``RecordBatchBuilder`` and read back with its decoder: what was
encoded is exactly each row's key, value, headers and timestamp, for each layout, with array
offsets (slices) and nulls. The independent decoders read the same rows back from a broker in
``tests/integration/test_send_arrow.py``.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
import pytest

from aioproducer._native import ArrowRecords
from aioproducer.errors import InvalidRecordError, RecordTooLargeError
from aioproducer.partitioner import partition_for_key
from aioproducer.protocol.records import RecordBatchBuilder

NOW = 1_700_000_000_000
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


Decoded = list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]


def encoded(data: Any, num_partitions: int = 4, **options: Any) -> dict[int, Decoded]:
    """Plan ``data`` and append every group into a batch of its own: partition -> records as decoded, in order."""
    records = ArrowRecords(data, now_ms=NOW, **options)
    out: dict[int, Decoded] = {}
    for partition, start, stop in records.plan(num_partitions, 1 << 20, "t"):
        builder = RecordBatchBuilder(batch_size=1 << 20)
        assert records.append_rows(builder, start, stop) == stop - start
        builder.build()
        out.setdefault(partition, []).extend((r.timestamp, r.key, r.value, list(r.headers)) for r in builder.records())
    return out


def rows(data: Any, **options: Any) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    """All rows in one partition (a partition column of zeros), in order."""
    return encoded(data, **options)[0]


BINARY_TYPES = [pa.binary(), pa.large_binary(), pa.string(), pa.large_string(), pa.binary_view(), pa.string_view()]


@pytest.mark.parametrize("value_type", BINARY_TYPES, ids=str)
@pytest.mark.parametrize("key_type", BINARY_TYPES, ids=str)
def test_every_binary_layout_for_value_and_key_with_nulls_and_a_slice(value_type: pa.DataType, key_type: pa.DataType) -> None:
    text = ["a", None, "", "a value longer than twelve bytes", "twelve bytes", "thirteen byte", "é"]
    def as_type(t: pa.DataType, xs: list[str | None]) -> pa.Array:
        text_type = pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)
        return pa.array([None if x is None else (x if text_type else x.encode()) for x in xs], t)

    batch = pa.record_batch({
        "value": as_type(value_type, text),
        "key": as_type(key_type, list(reversed(text))),
        "partition": pa.array([0] * len(text), pa.int8()),
    })
    sliced = batch.slice(1, 5)  # offset 1 on every column; views inline up to 12 bytes, then out of line
    want: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [(NOW, (k.encode() if k is not None else None), (v.encode() if v is not None else None), [])
            for v, k in zip(text[1:6], list(reversed(text))[1:6])]
    assert rows(sliced) == want


def test_a_sliced_column_inside_a_table_and_chunked_columns() -> None:
    values = pa.array([b"x%d" % i for i in range(10)])
    table = pa.Table.from_batches([
        pa.record_batch({"value": values.slice(2, 3), "partition": pa.array([0, 0, 0], pa.int32())}),
        pa.record_batch({"value": values.slice(7, 2), "partition": pa.array([0, 0], pa.int32())}),
    ])
    assert [r[2] for r in rows(table)] == [b"x2", b"x3", b"x4", b"x7", b"x8"]


@pytest.mark.parametrize("int_type", [pa.int8(), pa.int16(), pa.int32(), pa.int64()], ids=str)
def test_partition_column_of_every_width_and_null_partitions_follow_the_key(int_type: pa.DataType) -> None:
    table = pa.table({
        "value": [b"a", b"b", b"c", b"d"],
        "key": [None, b"k", b"k", None],
        "partition": pa.array([3, None, 1, None], int_type),
    })
    out = encoded(table)
    assert [r[2] for r in out[3]] == [b"a"]
    assert [r[2] for r in out[1]] == [b"c"]
    assert [r[2] for r in out[partition_for_key(b"k", 4)]] == [b"b"]
    assert [r[2] for r in out[-1]] == [b"d"]  # keyless, no partition: the sticky partition decides


def test_ignore_keys_sends_keyed_rows_to_the_sticky_partition_with_their_keys() -> None:
    out = encoded(pa.table({"value": [b"a", b"b"], "key": [b"k1", b"k2"]}), ignore_keys=True)
    assert list(out) == [-1] and [r[1] for r in out[-1]] == [b"k1", b"k2"]


@pytest.mark.parametrize(
    "arrow_type, raw, millis",
    [
        (pa.timestamp("s"), 1_700_000_000, 1_700_000_000_000),
        (pa.timestamp("ms", tz="Europe/Paris"), 1_700_000_000_123, 1_700_000_000_123),
        (pa.timestamp("us", tz="UTC"), 1_700_000_000_123_999, 1_700_000_000_123),
        (pa.timestamp("ns"), 1_700_000_000_123_999_999, 1_700_000_000_123),
        (pa.int64(), 1_700_000_000_456, 1_700_000_000_456),
    ],
    ids=str,
)
def test_timestamps_of_every_unit_become_milliseconds_and_null_is_now(arrow_type: pa.DataType, raw: int, millis: int) -> None:
    table = pa.table({"value": [b"a", b"b"], "timestamp": pa.array([raw, None], arrow_type), "partition": pa.array([0, 0], pa.int8())})
    assert [r[0] for r in rows(table)] == [millis, NOW]


@pytest.mark.parametrize("large", [False, True], ids=["list", "large_list"])
@pytest.mark.parametrize("key_type", [pa.string(), pa.large_string(), pa.string_view()], ids=str)
@pytest.mark.parametrize("value_type", [pa.binary(), pa.large_string(), pa.binary_view()], ids=str)
def test_headers_of_every_layout_with_null_values_null_lists_and_a_slice(large: bool, key_type: pa.DataType, value_type: pa.DataType) -> None:
    item = pa.struct([("key", key_type), ("value", value_type)])
    def v(b: bytes) -> bytes | str:
        return b.decode() if pa.types.is_large_string(value_type) else b

    lists = [
        [{"key": "skipped", "value": v(b"0")}],
        [{"key": "a", "value": v(b"1")}, {"key": "b", "value": None}],
        None,
        [],
        [{"key": "c", "value": v(b"a header value over twelve bytes")}],
    ]
    headers = pa.array(lists, pa.large_list(item) if large else pa.list_(item))
    table = pa.table({"value": [b"0", b"1", b"2", b"3", b"4"], "headers": headers, "partition": pa.array([0] * 5, pa.int8())}).slice(1)
    assert [r[3] for r in rows(table)] == [[("a", b"1"), ("b", None)], [], [], [("c", b"a header value over twelve bytes")]]


def test_polars_dataframe_with_view_columns() -> None:
    import polars as pl
    df = pl.DataFrame({"value": ["a", None, "long value, longer than twelve"], "key": [b"k", None, b"k2"],
                       "partition": pl.Series([0, 0, 0], dtype=pl.Int32)})
    assert [(r[1], r[2]) for r in rows(df)] == [(b"k", b"a"), (None, None), (b"k2", b"long value, longer than twelve")]


def test_pandas_through_pyarrow() -> None:
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"value": [b"a", b"b"], "partition": [0, 0]})
    assert [r[2] for r in rows(pa.Table.from_pandas(df, preserve_index=False))] == [b"a", b"b"]


def test_a_single_record_batch_through_arrow_c_array() -> None:
    class OnlyArray:
        def __init__(self, batch: pa.RecordBatch) -> None:
            self.batch = batch

        def __arrow_c_array__(self, requested_schema: object = None) -> object:
            return self.batch.__arrow_c_array__(requested_schema)

    assert [r[2] for r in rows(OnlyArray(pa.record_batch({"value": [b"a"], "partition": pa.array([0], pa.int8())})))] == [b"a"]


def test_keyed_rows_keep_their_order_per_partition_across_planning_chunks() -> None:
    n = 20_000  # several planning chunks (PLAN_CHUNK rows), in two record batches
    keys = [b"k%d" % (i % 7) for i in range(n)]
    table = pa.table({"value": [b"%d" % i for i in range(n)], "key": keys})
    table = pa.Table.from_batches(table.to_batches(max_chunksize=12_000))
    out = encoded(table, num_partitions=5)
    assert sum(map(len, out.values())) == n
    for partition, records in out.items():
        indices = [int(r[2] or b"") for r in records]
        assert indices == sorted(indices)
        assert all(partition_for_key(keys[i], 5) == partition for i in indices)


@pytest.mark.parametrize(
    "table, error, words",
    [
        (pa.table({"key": [b"a"]}), ValueError, ['no "value" column']),
        (pa.table({"value": [b"a"], "topic": ["t"]}), ValueError, ['unknown column "topic"']),
        (pa.table({"value": [1]}), TypeError, ['"value"', "int64"]),
        (pa.table({"value": [b"a"], "key": [1.5]}), TypeError, ['"key"', "float64"]),
        (pa.table({"value": [b"a"], "partition": ["0"]}), TypeError, ['"partition"', "string"]),
        (pa.table({"value": [b"a"], "partition": pa.array([0], pa.uint64())}), TypeError, ['"partition"', "uint64"]),
        (pa.table({"value": [b"a"], "timestamp": pa.array([1], pa.int32())}), TypeError, ['"timestamp"', "int32"]),
        (pa.table({"value": pa.array(["a"]).dictionary_encode()}), TypeError, ['"value"', "dictionary"]),
        (pa.table({"value": [b"a"], "headers": [["x"]]}), TypeError, ['"headers"', "list"]),
        (pa.table({"value": [b"a"], "headers": pa.array([[{"key": b"k", "value": b"v"}]])}), TypeError, ['"headers"', "key field", "binary"]),
        (pa.table({"value": [b"a"], "headers": pa.array([[{"k": "k", "value": b"v"}]])}), TypeError, ['"headers"']),
        (pa.table({"value": [[1]]}), TypeError, ['"value"', "list"]),
    ],
)
def test_bad_columns_are_refused_naming_the_column(table: pa.Table, error: type[Exception], words: list[str]) -> None:
    with pytest.raises(error) as caught:
        ArrowRecords(table)
    for word in words:
        assert word in str(caught.value)


def test_not_arrow_data_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="must be Arrow data.*list"):
        ArrowRecords([b"a"])


@pytest.mark.parametrize(
    "table, error, words",
    [
        (pa.table({"value": [b"a", b"b"], "partition": [0, 4]}), InvalidRecordError, ["row 1", "partition 4", "0..3"]),
        (pa.table({"value": [b"a", b"b"], "partition": [-1, 0]}), InvalidRecordError, ["row 0", "partition -1"]),
        (pa.table({"value": [b"a"], "timestamp": pa.array([-5], pa.int64())}), InvalidRecordError, ["row 0", "invalid timestamp_ms -5"]),
        (pa.table({"value": [b"a", b"b"], "timestamp": pa.array([0, 2**62], pa.timestamp("s"))}), InvalidRecordError, ["row 1", "does not fit"]),
        # Rounded down, as Spark's unix_millis: 1 us before 1970 is -1 ms, refused.
        (pa.table({"value": [b"a"], "timestamp": pa.array([-1], pa.timestamp("us"))}), InvalidRecordError, ["row 0", "invalid timestamp_ms -1"]),
        (pa.table({"value": [b"a", b"b"], "headers": pa.array([[], [{"key": None, "value": b"v"}]], HEADERS)}), InvalidRecordError, ["row 1", "header"]),
        (pa.table({"value": [b"a", b"x" * 2000]}), RecordTooLargeError, ["row 1", "1000"]),
    ],
)
def test_bad_rows_are_refused_by_plan_naming_the_row(table: pa.Table, error: type[Exception], words: list[str]) -> None:
    records = ArrowRecords(table)
    with pytest.raises(error) as caught:
        records.plan(4, 1000, "t")
    for word in words:
        assert word in str(caught.value)


def test_a_full_builder_takes_what_fits_and_the_reservation_covers_a_large_row() -> None:
    table = pa.table({"value": [b"v" * 100] * 50 + [b"x" * 5000], "partition": [0] * 51})
    records = ArrowRecords(table, now_ms=NOW)
    [(_, start, stop)] = records.plan(1, 1 << 20, "t")
    builder = RecordBatchBuilder(batch_size=1024)
    taken = records.append_rows(builder, start, stop)
    assert 0 < taken < 50 and builder.record_count == taken
    assert records.append_rows(builder, start + taken, stop) == 0  # full: nothing more
    assert records.reservation(0, 1024) == 1024 and records.reservation(50, 1024) > 5000
    assert records.payload_bytes(0, 2) == 200


def test_release_data_releases_the_arrow_buffers_once() -> None:
    pool = pa.default_memory_pool()
    before = pool.bytes_allocated()
    table = pa.table({"value": pa.array([b"v" * 1000] * 1000)})
    records = ArrowRecords(table)
    del table
    assert pool.bytes_allocated() >= before + 1_000_000  # the imported batch keeps the buffers alive
    records.release_data()
    assert pool.bytes_allocated() == before
    records.release_data()  # released already: nothing happens twice
    assert pool.bytes_allocated() == before


def test_row_outcomes_map_planned_positions_back_to_rows() -> None:
    import array

    records = ArrowRecords(pa.table({"value": [b"a", b"b", b"c"], "partition": [1, 0, 1]}), row_outcomes=True)
    assert records.plan(2, 1 << 20, "t") == [(0, 0, 1), (1, 1, 3)]
    assert [records.row_index(p) for p in range(3)] == [1, 0, 2]
    records.set_offsets(1, 2, 40)
    raw = records.offsets()
    assert raw is not None
    offsets = array.array("q")
    offsets.frombytes(raw)
    assert list(offsets) == [40, -1, 41]  # row 0 has no outcome (not reported, or never queued): -1


def test_headers_whose_entries_and_their_fields_have_offsets_of_their_own() -> None:
    keys = pa.array(["x", "x", "a", "b", "c"])
    values = pa.array([b"x", b"x", b"1", None, b"3"])
    entries = pa.StructArray.from_arrays([keys.slice(1), values.slice(1)], names=["key", "value"]).slice(1)
    headers = pa.ListArray.from_arrays(pa.array([0, 1, 3], pa.int32()), entries)  # rows: [a], [b, c]
    table = pa.table({"value": [b"0", b"1"], "headers": headers, "partition": pa.array([0, 0], pa.int8())})
    assert [r[3] for r in rows(table)] == [[("a", b"1")], [("b", None), ("c", b"3")]]


def test_a_stream_reader_is_read_whole_and_its_failure_is_a_clear_error() -> None:
    schema = pa.schema([("value", pa.binary()), ("partition", pa.int8())])
    batches = [pa.record_batch({"value": [b"a", b"b"], "partition": pa.array([0, 0], pa.int8())}, schema=schema)] * 3
    reader = pa.RecordBatchReader.from_batches(schema, iter(batches))
    assert [r[2] for r in rows(reader)] == [b"a", b"b"] * 3

    def failing() -> Any:
        yield batches[0]
        raise OSError("the source went away")

    with pytest.raises(ValueError, match="reading the Arrow stream failed.*the source went away"):
        ArrowRecords(pa.RecordBatchReader.from_batches(schema, failing()))


def _view(length: int, index: int, start: int) -> bytes:
    """One 16-byte binary view that is not inline: length, 4-byte prefix, buffer index, offset."""
    return struct.pack("<i4sii", length, b"abcd", index, start)


@pytest.mark.parametrize(
    ("views", "why"),
    [
        (_view(20, 3, 0), "a view outside its data buffers"),  # names a buffer the array does not have
        (_view(20, 0, 30), "a view outside its data buffers"),  # runs past its buffer's end
        (_view(-5, 0, 0), "a view of negative length"),
    ],
)
def test_a_view_outside_its_buffers_is_refused_not_read(views: bytes, why: str) -> None:
    """Malformed data is refused at import: read as it is, these would read memory the array does not own."""
    array = pa.Array.from_buffers(pa.binary_view(), 1, [None, pa.py_buffer(views), pa.py_buffer(b"x" * 40)])
    with pytest.raises(ValueError, match=why):
        ArrowRecords(pa.RecordBatch.from_arrays([array], names=["value"]))


def test_offsets_that_decrease_are_refused_not_read() -> None:
    offsets = pa.py_buffer(struct.pack("<3i", 0, 10, 5))
    array = pa.Array.from_buffers(pa.binary(), 2, [None, offsets, pa.py_buffer(b"x" * 40)])
    with pytest.raises(ValueError, match="offsets that decrease"):
        ArrowRecords(pa.RecordBatch.from_arrays([array], names=["value"]))


def test_rows_freed_by_the_collector_on_another_thread_are_released() -> None:
    """A cycle through the rows, collected on a thread that did not make them (Spark's input thread, say).

    Python frees an object on whatever thread drops it, with the interpreter lock held, as it does
    the producer's own capsules: the rows must release their Arrow data there too, not refuse and leak it.
    """
    import gc
    import sys
    import threading

    table = pa.table({"value": pa.array([b"x" * 1000] * 2000, pa.binary())})
    records = ArrowRecords(table, ignore_keys=False, now_ms=NOW, row_outcomes=False)
    baseline_without_table = pa.total_allocated_bytes() - table.nbytes
    del table
    holder: list[Any] = [records]
    holder.append(holder)  # only the collector frees it now
    del records, holder
    seen: list[Any] = []
    previous, sys.unraisablehook = sys.unraisablehook, seen.append
    try:
        collector = threading.Thread(target=gc.collect)
        collector.start()
        collector.join()
    finally:
        sys.unraisablehook = previous
    assert [str(u.exc_value) for u in seen] == []
    assert pa.total_allocated_bytes() <= baseline_without_table  # the table's buffers went back to the pool
