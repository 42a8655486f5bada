"""The native record future (native/src/batch.rs): asyncio takes it as a future, the collector sees through it.

What asyncio's combinators do with it end to end is in tests/unit/test_record_future.py and
tests/integration/test_producer_lifecycle.py; here: what is particular to a native object.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import weakref
from typing import Any

import pytest

from aioproducer.internals.batch import FutureRecordMetadata, ProducerBatch, RecordErrors
from aioproducer.record_types import RecordMetadata
from aioproducer.protocol import compression
from aioproducer.protocol.records import RecordBatchBuilder


def _batch(loop: asyncio.AbstractEventLoop, batch_size: int = 1 << 16) -> ProducerBatch:
    return ProducerBatch("t", 3, RecordBatchBuilder(compression.NONE, batch_size), 0.0, 0, loop)


def _append(batch: ProducerBatch, value: bytes = b"v", on_delivery: Any = None) -> FutureRecordMetadata:
    future = batch.try_append(1_000 + batch.record_count, b"k", value, None, on_delivery)
    assert future is not None
    return future


async def test_asyncio_takes_it_as_a_future_and_its_metadata_comes_from_the_batch() -> None:
    loop = asyncio.get_running_loop()
    batch = _batch(loop)
    futures = [_append(batch, b"x" * i) for i in range(3)]
    assert all(asyncio.isfuture(f) for f in futures)
    assert futures[0].get_loop() is loop and not futures[0].done()
    with pytest.raises(asyncio.InvalidStateError, match="not complete"):
        futures[0].result()
    with pytest.raises(asyncio.InvalidStateError, match="not complete"):
        futures[0].exception()
    done, pending = await asyncio.wait(futures, timeout=0)
    assert not done and len(pending) == 3
    batch.complete(500, -1, None)
    assert all(f.done() and f.exception() is None for f in futures)
    assert [tuple(f.result()) for f in futures] == [("t", 3, 500 + i, 1_000 + i, 1, i, 0) for i in range(3)]
    assert [md.offset for md in await asyncio.gather(*futures)] == [500, 501, 502]
    assert "t-3 done" in repr(futures[0])


async def test_a_record_of_a_failed_batch_raises_its_own_error() -> None:
    loop = asyncio.get_running_loop()
    batch = _batch(loop)
    first, second = _append(batch), _append(batch)
    named, others = ValueError("bad record"), RuntimeError("batch refused")
    batch.fail_per_record(RecordErrors({1: named}, others))
    batch.complete(-1, -1, others)
    assert first.exception() is others and second.exception() is named
    with pytest.raises(ValueError, match="bad record"):
        await second


async def test_the_broker_time_and_an_unknown_offset_reach_the_metadata() -> None:
    loop = asyncio.get_running_loop()
    appended, unknown = _batch(loop), _batch(loop)
    a, b = _append(appended), _append(unknown)
    appended.complete(7, 99_000, None)  # log-append time
    unknown.complete(-1, -1, None)  # acks=0
    assert (a.result().offset, a.result().timestamp) == (7, 99_000)
    assert (b.result().offset, b.result().timestamp) == (-1, 1_000)


async def test_a_split_batchs_futures_answer_from_their_pieces() -> None:
    loop = asyncio.get_running_loop()
    batch = _batch(loop)
    futures = [_append(batch, bytes(400)) for _ in range(6)]
    pieces = batch.split(1000)
    assert len(pieces) > 1
    for n, piece in enumerate(pieces):
        piece.complete(100 * (n + 1), -1, None)
    starts = {id(piece): 100 * (n + 1) for n, piece in enumerate(pieces)}
    # Each future now points at its piece, with its offset there: the piece's base plus that.
    assert [f.result().offset for f in futures] == [starts[id(f._batch)] + f._relative_offset for f in futures]
    assert [f._relative_offset for f in futures if f._batch is pieces[1]][0] == 0


def test_a_cycle_through_record_futures_is_collected() -> None:
    """future -> batch -> its done-callbacks -> a callback holding the future: only the collector frees it."""
    loop = asyncio.new_event_loop()
    try:
        batch = _batch(loop)
        for _ in range(3):  # futures freed first: a freelist would hand one out again (untracked, in pyo3 0.30.1)
            _append(batch, on_delivery=lambda md, err: None)
        future = _append(batch)
        assert gc.is_tracked(future)

        class Holder:
            def __init__(self, held: Any) -> None:
                self.held = held

            def __call__(self, fut: Any) -> None:
                pass

        holder = Holder(future)
        future.add_done_callback(holder)
        gone = weakref.ref(holder)
        del batch, future, holder
        gc.collect()
        assert gone() is None
    finally:
        loop.close()


async def test_a_future_its_caller_dropped_is_freed_at_once() -> None:
    """With on_delivery the batch keeps the record's callback row, not its future: dropping it frees it."""
    loop = asyncio.get_running_loop()
    batch = _batch(loop)
    future = _append(batch, on_delivery=lambda md, err: None)
    assert sys.getrefcount(future) == 2  # this frame's name and getrefcount's argument: nothing else holds it
    kept = _append(batch)
    assert kept in batch.futures  # without on_delivery the batch keeps it, for split() to move it


async def test_a_run_of_values_stops_at_a_value_not_bytes_or_a_full_batch() -> None:
    """``try_append_many`` (send_many's bulk path): each record as try_append makes it, in one native call."""
    from aioproducer.internals.batch import _callback_bytes

    loop = asyncio.get_running_loop()
    batch = _batch(loop, batch_size=1000)
    out: list[FutureRecordMetadata] = []
    values: list[Any] = [b"a", b"b", bytearray(b"c"), b"d"]
    assert batch.try_append_many(5, values, 0, None, out) == 2  # stops at the bytearray
    assert batch.try_append_many(5, values, 3, None, out) == 4
    large = [bytes(300)] * 10
    stop = batch.try_append_many(5, large, 0, None, out)
    assert 0 < stop < 10 and batch.record_count == 3 + stop == len(out)  # stops when full
    assert batch.futures == out
    batch.complete(10, -1, None)
    assert [(f.result().offset, f.result().timestamp) for f in out] == [(10 + i, 5) for i in range(len(out))]

    reported: list[int] = []

    def on_delivery(metadata: Any, error: Any) -> None:
        reported.append(metadata.offset)

    other = _batch(loop)
    got: list[FutureRecordMetadata] = []
    assert other.try_append_many(5, (b"x", b"yy", b"zzz"), 1, on_delivery, got) == 3  # any sequence
    assert other.futures == [] and other.callback_bytes == 2 * _callback_bytes(on_delivery)
    other.complete(0, -1, None)
    assert reported == [0, 1] and [f.result().serialized_value_size for f in got] == [2, 3]


async def test_each_on_delivery_is_charged_its_own_size_even_when_one_callable_repeats() -> None:
    """The batch computes a callable's charge once for a run of it, and again for any other callable."""
    from aioproducer.internals.batch import _callback_bytes

    loop = asyncio.get_running_loop()
    batch = _batch(loop)
    small = print
    captured = list(range(50))

    def large(metadata: Any, error: Any, _defaults: tuple[int, ...] = tuple(range(100))) -> None:
        captured.append(len(_defaults))

    callbacks: list[Any] = [small, small, large, small, large, large]
    for callback in callbacks:
        _append(batch, on_delivery=callback)
    assert _callback_bytes(large) > _callback_bytes(small)
    assert batch.callback_bytes == sum(_callback_bytes(callback) for callback in callbacks)


async def test_the_native_metadata_is_a_record_metadata_like_one_made_in_python_and_leaks_nothing() -> None:
    """The native side makes ``RecordMetadata`` through its type's allocator (``batch.rs``,
    ``record_metadata``): the same type, fields, equality and hash as one the named tuple makes,
    from a future's result and an ``on_delivery`` report alike, though left out of the collector
    (``test_record_metadata_is_left_out_of_the_collector``); its items are referenced once each
    (the topic's count comes back to where it was)."""
    loop = asyncio.get_running_loop()
    topic = "".join(["metadata-", "topic"])  # a str of its own, so its reference count is this test's
    batch = ProducerBatch(topic, 3, RecordBatchBuilder(compression.NONE, 1 << 16), 0.0, 0, loop)
    reported: list[Any] = []
    awaited = batch.try_append(1_000, b"k", b"value", None, None)
    batch.try_append(1_001, None, b"xy", None, lambda metadata, error: reported.append(metadata))
    assert awaited is not None
    batch.complete(40, -1, None)
    expected = [RecordMetadata(topic, 3, 40, 1_000, 1, 5, 0), RecordMetadata(topic, 3, 41, 1_001, -1, 2, 0)]
    for made, python in zip([awaited.result(), *reported], expected, strict=True):
        assert type(made) is RecordMetadata and made == python and hash(made) == hash(python)
        assert made._asdict() == python._asdict() and repr(made) == repr(python)
    before = sys.getrefcount(topic)
    for _ in range(1_000):
        awaited.result()
    assert sys.getrefcount(topic) == before


async def test_on_delivery_rows_are_held_natively_and_read_and_written_as_flat_rows() -> None:
    """The rows batch.py's rare paths read (a split, a failed batch) are those the door appended, , and the batch's
    completion reports what a row written from Python says; a malformed write names ``callbacks`` and changes nothing."""
    loop = asyncio.get_running_loop()
    reports: list[tuple[str, Any]] = []

    def first(metadata: Any, error: BaseException | None) -> None:
        reports.append(("first", (metadata.offset, metadata.timestamp, metadata.serialized_value_size)))

    def second(metadata: Any, error: BaseException | None) -> None:
        reports.append(("second", (metadata.offset, metadata.timestamp, metadata.serialized_value_size)))

    batch = _batch(loop)
    assert batch.callbacks is None
    _append(batch, b"ab", first)
    _append(batch, b"abc", second)
    assert batch.callbacks == [first, 0, 1_000, 1, 2, second, 1, 1_001, 1, 3]
    with pytest.raises(TypeError, match="callbacks: flat rows of 5 items"):
        batch.callbacks = [first, 0, 1_000, 1]
    with pytest.raises(TypeError, match="callbacks: on_delivery must be callable, got int"):
        batch.callbacks = [7, 0, 1_000, 1, 2]
    assert batch.callbacks == [first, 0, 1_000, 1, 2, second, 1, 1_001, 1, 3]
    batch.callbacks = [second, 1, 1_001, 1, 3, first, 0, 42, 1, 9]  # written from Python: what is reported
    batch.complete(500, -1, None)
    assert reports == [("second", (501, 1_001, 3)), ("first", (500, 42, 9))]
    batch.callbacks = None
    assert batch.callbacks is None



async def test_record_metadata_is_left_out_of_the_collector() -> None:
    """A record's metadata made natively holds a str and ints, so it can be in no cycle: the collector does not
    track it (a caller keeping one per record, as ``gather()``'s results, would otherwise have every full collection
    walk them all). The native completion's ``on_delivery`` reports are checked in test_sender.py."""
    loop = asyncio.get_running_loop()
    batch = _batch(loop)
    future = _append(batch, b"abc")
    batch.complete(500, -1, None)
    for metadata in (future.result(), await future):
        assert type(metadata) is RecordMetadata and not gc.is_tracked(metadata)
        assert tuple(metadata) == ("t", 3, 500, 1_000, 1, 3, 0)
