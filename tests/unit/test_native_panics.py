"""A panic anywhere in the native module reaches Python as an exception ``except Exception`` catches.

Left to PyO3, a Rust panic is ``pyo3_runtime.PanicException``, a ``BaseException``: a caller's
``except Exception``, asyncio's callbacks and the sender's error handling let it through. Each
entry point runs its body in ``guarded`` (``native/src/lib.rs``), which turns a panic into a
``RuntimeError`` naming the entry point and saying it is a bug. ``_panic_for_test(name)`` makes
the next call of entry point ``name`` panic; ``CALLS`` reaches each one. The entry points are
enumerated twice, from the module as Python sees it and from the crate's sources (the GC and
buffer slots are not visible from Python), so a new entry point without a call here, or without
the guard, fails.
"""

from __future__ import annotations

import collections
import gc
import os
import re
import socket
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from aioproducer import _native
from aioproducer._native import ArrowRecords, FutureRecordMetadata, ProducerBatch, RecordBatchBuilder, RecordQueues, record_latencies
from aioproducer.internals.accumulator import AccumulatorConfig
from aioproducer.internals.batch import ARROW_ROW_BYTES, RECORD_OBJECT_BYTES
from aioproducer.protocol.produce import ProduceResponse

NATIVE = Path(__file__).resolve().parents[2] / "native"

#: Entry points that cannot raise into Python, so have no guard: PyO3 catches a panic in
#: ``__traverse__`` itself and tells the collector the traversal failed (nothing may touch Python
#: during it); a ``#[classattr]`` is evaluated once, when the type is made.
UNGUARDED = {"ProducerBatch.__traverse__", "RecordQueues.__traverse__", "FutureRecordMetadata.__traverse__", "FutureRecordMetadata._asyncio_future_blocking"}
#: Slots Python 3.11 lists nowhere (no wrapper in the type's dict): the crate's sources name them.
HIDDEN_SLOTS = {"RecordBatchBuilder.__getbuffer__", "RecordBatchBuilder.__releasebuffer__", "ProducerBatch.__clear__", "RecordQueues.__clear__", "FutureRecordMetadata.__clear__"}
#: Slots with no caller to raise to (Python reports their error as unraisable): tested on their own below.
NO_CALLER = {"RecordBatchBuilder.__releasebuffer__", "ProducerBatch.__clear__", "RecordQueues.__clear__", "FutureRecordMetadata.__clear__"}


def _batch(records: int = 0) -> ProducerBatch:
    return ProducerBatch("t", 0, _builder(records), 0.0, 0, None)  # type: ignore[arg-type]  # no event loop: nothing completes it here


def _builder(records: int = 1, codec: int = 0) -> RecordBatchBuilder:
    builder = RecordBatchBuilder(codec)
    for i in range(records):
        builder.append(1000 + i, b"k", b"v" * 50)
    return builder


def _queues() -> tuple[RecordQueues, ProducerBatch]:
    """Queues with topic 0, its partition 0 led by node 0, holding one batch of one record."""
    queues = RecordQueues()
    queues.add_partition(queues.add_topic("t"), 0)
    batch = _batch(1)
    queues.append(0, batch)
    queues.set_leaders(queues.take_unsynced(), [0])
    return queues, batch


def _future() -> FutureRecordMetadata:
    future = _batch().try_append(1000, b"k", b"v", None, None)
    assert future is not None
    return future


def _reading(field: str) -> Callable[[], object]:
    """A call that reads ``field`` of a batch's native half."""
    return lambda: getattr(_batch(1), field)


def _records() -> ArrowRecords:
    records = ArrowRecords(pa.table({"value": [b"a", b"b"], "partition": pa.array([0, 0], pa.int8())}))
    records.plan(1, 1 << 20, "t")
    return records


def _compressed() -> tuple[RecordBatchBuilder, memoryview]:
    builder = _builder(3, codec=1)
    section = builder.section_to_compress()
    assert section is not None
    return builder, section


def _install_compressed() -> None:
    builder, section = _compressed()
    compressed = bytes(section)
    section.release()
    builder.install_compressed(compressed, compressed)


def _with_writer(call: Callable[[Any], object]) -> object:
    """``call(writer)`` on a ``SocketWriter`` over one end of a socket pair; the thread stopped after."""
    ours, peer = socket.socketpair()
    writer = _native.SocketWriter(os.dup(ours.fileno()))
    try:
        return call(writer)
    finally:
        writer.abort(ours.fileno())
        ours.close()
        peer.close()


#: Each entry point, as Python names it, and a call that reaches it with valid arguments.
#: A Produce v9 response with no partition (correlation id 1, throttle 0).
_EMPTY_V9_RESPONSE = bytes.fromhex("00000001" "00" "01" "00000000" "00")

CALLS: dict[str, Callable[[], object]] = {
    "_panic_for_test": lambda: _native._panic_for_test(""),  # "": disarms
    "murmur2": lambda: _native.murmur2(b"21"),
    "monotonic_ms": lambda: _native.monotonic_ms() if sys.platform == "linux" else pytest.skip("built on Linux only"),
    "partition_for_key": lambda: _native.partition_for_key(b"21", 3),
    "estimate_size_in_bytes_upper_bound": lambda: _native.estimate_size_in_bytes_upper_bound(b"k", b"v", [("h", None)]),
    "record_size_in_bytes": lambda: _native.record_size_in_bytes(0, 0, b"k", b"v", [("h", b"x")]),
    "write_varlong": lambda: _native.write_varlong(-1),
    "encode_produce_request": lambda: _native.encode_produce_request(9, 1, "c", None, 1, 5, [("t", [(0, b"r")])]),
    "decode_produce_response": lambda: _native.decode_produce_response(9, _EMPTY_V9_RESPONSE),
    "read_produce_response": lambda: _native.read_produce_response(9, _EMPTY_V9_RESPONSE),
    "read_produce_answers": lambda: _native.read_produce_answers(collections.deque(), b"", 0, 100, [], tuple),
    "ProduceAnswer.partitions": lambda: _native.read_produce_response(9, _EMPTY_V9_RESPONSE).partitions,
    "ProduceAnswer.node_endpoints": lambda: _native.read_produce_response(9, _EMPTY_V9_RESPONSE).node_endpoints,
    "ProduceAnswer.to_response": lambda: _native.read_produce_response(9, _EMPTY_V9_RESPONSE).to_response(),
    "ProduceAnswer.__repr__": lambda: repr(_native.read_produce_response(9, _EMPTY_V9_RESPONSE)),
    "MemoryBudget.__new__": lambda: _native.MemoryBudget(100),
    "MemoryBudget.try_allocate": lambda: _native.MemoryBudget(100).try_allocate(10),
    "MemoryBudget.take": lambda: _native.MemoryBudget(100).take(10),
    "MemoryBudget.charge": lambda: _native.MemoryBudget(100).charge(10),
    "MemoryBudget.deallocate": lambda: _native.MemoryBudget(100).deallocate(0),
    "MemoryBudget.available": lambda: _native.MemoryBudget(100).available,
    "MemoryBudget.overdraft": lambda: _native.MemoryBudget(100).overdraft,
    "MemoryBudget.waiting": lambda: _native.MemoryBudget(100).waiting,
    "RequestCounters.__new__": lambda: _native.RequestCounters(1.0),
    "RequestCounters.add_request": lambda: _native.RequestCounters(1.0).add_request([_batch(1)], 5.0),
    "RequestCounters.add_acknowledged": lambda: _native.RequestCounters(1.0).add_acknowledged("t", 1, 5.0, 1.0, 0.0),
    "RequestCounters.add_errors": lambda: _native.RequestCounters(1.0).add_errors("t", 1, 5.0),
    "RequestCounters.take": lambda: _native.RequestCounters(1.0).take(),
    "RequestCounters.pending": lambda: _native.RequestCounters(1.0).pending,
    "ProducerBatch.__new__": _batch,
    "ProducerBatch.try_append": lambda: _batch().try_append(1000, b"k", b"v", None, None),
    "ProducerBatch.try_append_many": lambda: _batch().try_append_many(1000, [b"v"], 0, None, []),
    **{f"ProducerBatch.{name}": _reading(name) for name in (
        "topic", "partition", "builder", "created_ms", "delivery_deadline_ms", "last_attempt_ms", "attempts",
        "retry_backoff_ms", "reserved_bytes", "settled", "in_flight", "in_retry", "sequence_reset", "producer_id",
        "producer_epoch", "base_sequence", "is_transactional", "has_sequence", "is_done", "base_offset",
        "log_append_time", "error", "record_count", "callbacks",
    )},
    "ProducerBatch.estimated_size": lambda: _batch(1).estimated_size(),
    "ProducerBatch.is_full": lambda: _batch(1).is_full(16384),
    "ProducerBatch.has_reached_delivery_timeout": lambda: _batch().has_reached_delivery_timeout(5.0),
    "ProducerBatch.records": lambda: _batch(1).records(),
    "ProducerBatch.object_bytes": lambda: _batch(1).object_bytes(),
    "ProducerBatch.settle": lambda: _batch(1).settle(),
    "set_object_costs": lambda: _native.set_object_costs(RECORD_OBJECT_BYTES, ARROW_ROW_BYTES),
    "produce_topic_data": lambda: _native.produce_topic_data([_batch(1), _queues()[1]], 5.0),
    "ProduceTopicData.__len__": lambda: len(_native.produce_topic_data([_batch(1)], 5.0)[1]),
    "ProduceTopicData.__getitem__": lambda: _native.produce_topic_data([_batch(1)], 5.0)[1][0],
    "RecordQueues.__new__": RecordQueues,
    "SampledStat.__new__": lambda: _native.SampledStat(1000, 2),
    "SampledStat.record": lambda: _native.SampledStat(1000, 2).record(1.0, 5.0),
    "SampledStat.record_many": lambda: _native.SampledStat(1000, 2, 1).record_many(3.0, 2, 5.0),
    "SampledStat.purge": lambda: _native.SampledStat(1000, 2).purge(5.0),
    "SampledStat.oldest_start": lambda: _native.SampledStat(1000, 2).oldest_start(5.0),
    "SampledStat.window_size_ms": lambda: _native.SampledStat(1000, 2, 3).window_size_ms(5.0),
    "SampledStat.measure": lambda: _native.SampledStat(1000, 2, 2).measure(5.0),
    "RecordQueues.add_topic": lambda: RecordQueues().add_topic("t"),
    "RecordQueues.add_partition": lambda: _queues()[0].add_partition(0, 1),
    "RecordQueues.new_generation": lambda: _queues()[0].new_generation(),
    "RecordQueues.take_unsynced": lambda: _queues()[0].take_unsynced(),
    "RecordQueues.set_leaders": lambda: _queues()[0].set_leaders([0], [1]),
    "RecordQueues.try_append": lambda: _queues()[0].try_append(0, 1000, b"k", b"v", None, None),
    "RecordQueues.try_append_keyed": lambda: _queues()[0].try_append_keyed({}, "t", b"v", b"k", None, None, None, None),
    "RecordQueues.last": lambda: _queues()[0].last(0),
    "RecordQueues.settle_last": lambda: _queues()[0].settle_last(0),
    "RecordQueues.new_batch": lambda: _queues()[0].new_batch(0, AccumulatorConfig(), 5.0, 100, None, None),  # type: ignore[arg-type]  # no event loop
    "RecordQueues.open_batch": lambda: _queues()[0].open_batch(0, AccumulatorConfig(), 5.0, 100, None, None, 1000, b"k", b"v", None, None),  # type: ignore[arg-type]
    "RecordQueues.append": lambda: _queues()[0].append(0, _batch(1)),
    "RecordQueues.remove_open": lambda: _queues()[0].remove_open(0, _batch()),
    "RecordQueues.insert_retry": lambda: _queues()[0].insert_retry(0, _batch(1)),
    "RecordQueues.batches": lambda: _queues()[0].batches(0),
    "RecordQueues.has_undrained": lambda: _queues()[0].has_undrained(),
    "RecordQueues.active_topics": lambda: _queues()[0].active_topics(),
    "RecordQueues.queue_lengths": lambda: _queues()[0].queue_lengths(0),
    "RecordQueues.unmute": lambda: _queues()[0].unmute(0),
    "RecordQueues.ready": lambda: _queues()[0].ready(5.0, 0.0, 16384, False, True),
    "RecordQueues.drain": lambda: _queues()[0].drain(0, 1 << 20, 5.0, None, False),
    "RecordQueues.set_lane": lambda: _queues()[0].set_lane(_native.MemoryBudget(100), None, None, 16384, lambda: 0.0, None, None, set(), lambda: None),
    "RecordQueues.drain_next": lambda: _queues()[0].drain_next(0, 1 << 20, 5.0, None, False, 0.0, 16384, False),
    "RecordQueues.expired": lambda: _queues()[0].expired(5.0),
    "RecordQueues.next_expiry_delay": lambda: _queues()[0].next_expiry_delay(5.0),
    "RecordQueues.abort_all": lambda: _queues()[0].abort_all(),
    "record_latencies": lambda: record_latencies([1.0], [0, 0], [1, 2.0, 2.0], 0.0, 0.0, 0.0),
    "RecordQueues.complete": lambda: _queues()[0].complete([_batch(1)], ProduceResponse(1, [], 0, []), 5.0, 46, None, set()),
    "RecordQueues.complete_all": lambda: _queues()[0].complete_all([[_batch(1)]], [ProduceResponse(1, [], 0, [])], 5.0, 46, None, set()),
    "ProducerBatch.take_reservation": lambda: _batch().take_reservation(100),
    "ProducerBatch.release_reservation": lambda: _batch().release_reservation(),
    "ProducerBatch.drained": lambda: _batch().drained(),
    "ProducerBatch.reenqueued": lambda: _batch().reenqueued(5.0, 100.0),
    "ProducerBatch.reenqueued_piece": lambda: _batch().reenqueued_piece(1, 5.0, 100.0),
    "ProducerBatch.keep_deadline_of": lambda: _batch().keep_deadline_of(_batch()),
    "ProducerBatch.request_ended": lambda: _batch().request_ended(),
    "ProducerBatch.mark_in_retry": lambda: _batch().mark_in_retry(),
    "ProducerBatch.clear_in_retry": lambda: _batch().clear_in_retry(),
    "ProducerBatch.set_producer_state": lambda: _batch().set_producer_state(7, 0, 0),
    "ProducerBatch.reset_producer_state": lambda: _batch().reset_producer_state(7, 1, 0),
    "ProducerBatch.set_outcome": lambda: _batch().set_outcome(5, -1, None),
    "FutureRecordMetadata.__new__": lambda: FutureRecordMetadata(),
    "FutureRecordMetadata.get_loop": lambda: _future().get_loop(),
    "FutureRecordMetadata.done": lambda: _future().done(),
    "FutureRecordMetadata.cancelled": lambda: _future().cancelled(),
    "FutureRecordMetadata.result": lambda: _future().result(),
    "FutureRecordMetadata.exception": lambda: _future().exception(),
    "FutureRecordMetadata._batch": lambda: _future()._batch,
    "FutureRecordMetadata._relative_offset": lambda: _future()._relative_offset,
    "FutureRecordMetadata._timestamp": lambda: _future()._timestamp,
    "FutureRecordMetadata._key_size": lambda: _future()._key_size,
    "FutureRecordMetadata._value_size": lambda: _future()._value_size,
    "FutureRecordMetadata._cancel_message": lambda: _future()._cancel_message,
    "FutureRecordMetadata._mark_cancelled": lambda: _future()._mark_cancelled(None),
    "FutureRecordMetadata._move_to": lambda: _future()._move_to(_batch(), 0),
    "RecordBatchBuilder.__new__": lambda: RecordBatchBuilder(),
    "RecordBatchBuilder.__repr__": lambda: repr(_builder()),
    "RecordBatchBuilder.compression_type": lambda: _builder().compression_type,
    "RecordBatchBuilder.compression_level": lambda: _builder().compression_level,
    "RecordBatchBuilder.batch_size": lambda: _builder().batch_size,
    "RecordBatchBuilder.record_count": lambda: _builder().record_count,
    "RecordBatchBuilder.base_timestamp": lambda: _builder().base_timestamp,
    "RecordBatchBuilder.max_timestamp": lambda: _builder().max_timestamp,
    "RecordBatchBuilder.is_closed": lambda: _builder().is_closed,
    "RecordBatchBuilder.uncompressed_size_in_bytes": lambda: _builder().uncompressed_size_in_bytes,
    "RecordBatchBuilder.estimated_size_in_bytes": lambda: _builder().estimated_size_in_bytes,
    "RecordBatchBuilder.compression_ratio": lambda: _builder().compression_ratio,
    "RecordBatchBuilder.bytes_to_compress": lambda: _builder().bytes_to_compress,
    "RecordBatchBuilder.has_room_for": lambda: _builder().has_room_for(1000, b"k", b"v"),
    "RecordBatchBuilder.try_append": lambda: _builder().try_append(1000, b"k", b"v"),
    "RecordBatchBuilder.append": lambda: _builder().append(1000, b"k", b"v"),
    "RecordBatchBuilder.try_append_values": lambda: _builder().try_append_values(1000, [b"v"]),
    "RecordBatchBuilder.build": lambda: _builder().build(),
    "RecordBatchBuilder.section_to_compress": lambda: _builder(codec=1).section_to_compress(),
    "RecordBatchBuilder.install_compressed": _install_compressed,
    "RecordBatchBuilder.release": lambda: _builder().release(),
    "RecordBatchBuilder.records": lambda: _builder().records(),
    "RecordBatchBuilder.split": lambda: _builder(3).split(200),
    "RecordBatchBuilder.__getbuffer__": lambda: memoryview(_builder()),
    "ArrowRecords.__new__": _records,
    "ArrowRecords.__len__": lambda: len(_records()),
    "ArrowRecords.plan": lambda: ArrowRecords(pa.table({"value": [b"a"]})).plan(1, 1 << 20, "t"),
    "ArrowRecords.append_rows": lambda: _records().append_rows(_builder(0), 0, 2),
    "ArrowRecords.appended": lambda: _records().appended,
    "ArrowRecords.payload_bytes": lambda: _records().payload_bytes(0, 2),
    "ArrowRecords.reservation": lambda: _records().reservation(0, 16384),
    "ArrowRecords.row_index": lambda: _records().row_index(1),
    "ArrowRecords.release_data": lambda: _records().release_data(),
    "ArrowRecords.set_offsets": lambda: _records().set_offsets(0, 2, 7),
    "ArrowRecords.offsets": lambda: _records().offsets(),
    "SocketWriter.__new__": lambda: _with_writer(lambda w: w),
    "SocketWriter.write": lambda: _with_writer(lambda w: w.write([b"x"])),
    "SocketWriter.idle": lambda: _with_writer(lambda w: w.idle),
    "SocketWriter.pending_bytes": lambda: _with_writer(lambda w: w.pending_bytes),
    "SocketWriter.error": lambda: _with_writer(lambda w: w.error),
    "SocketWriter.stopped": lambda: _with_writer(lambda w: w.stopped),
    "SocketWriter.close": lambda: _with_writer(lambda w: w.close()),
    "SocketWriter.abort": lambda: _with_writer(lambda w: w.abort(-1)),
}


@pytest.fixture
def unraisable() -> Iterator[list[Any]]:
    """What Python reports as "Exception ignored": from slots that have no caller to raise to."""
    seen: list[Any] = []
    previous, sys.unraisablehook = sys.unraisablehook, seen.append
    try:
        yield seen
    finally:
        sys.unraisablehook = previous


def _entry_points_seen_from_python() -> set[str]:
    names = set()
    for name, value in vars(_native).items():
        if isinstance(value, type) and value.__module__ == "aioproducer._native":
            # Python functions batch.py sets on FutureRecordMetadata are not native: type "function".
            native = ("method_descriptor", "getset_descriptor", "wrapper_descriptor", "builtin_function_or_method")
            names |= {f"{name}.{attr}" for attr, member in vars(value).items() if type(member).__name__ in native}
        elif type(value).__name__ == "builtin_function_or_method":
            names.add(name)
    return names


def _entry_points_in_the_sources() -> set[str]:
    """Every ``#[pyfunction]`` and every function of a ``#[pymethods]`` block, as Python names it."""
    sources = {path: path.read_text().split("#[cfg(test)]")[0] for path in sorted((NATIVE / "src").rglob("*.rs"))}  # src/arrow/ too
    text = "\n".join(sources.values())
    classes = {m["rust"]: m["py"] or m["rust"] for m in re.finditer(r'#\[pyclass\((?:name = "(?P<py>\w+)")?[^\]]*\)\]\s*pub struct (?P<rust>\w+)', text)}
    names = {m["py"] or m["rust"] for m in re.finditer(r'#\[pyfunction(?:\(name = "(?P<py>\w+)"\))?\]\s*(?:#\[[^\n]*\n\s*)*(?:pub )?fn (?P<rust>\w+)', text)}
    for block in re.finditer(r"#\[pymethods\]\nimpl (\w+) \{\n(.*?)\n\}", text, re.S):
        attributes: list[str] = []
        for line in block[2].splitlines():
            if line.startswith("    #["):
                attributes.append(line.strip())
            elif (fn := re.match(r"    (?:pub )?(?:unsafe )?fn (\w+)", line)) is not None:
                if "#[setter]" not in attributes:  # a setter is its getter's descriptor, guarded under its name
                    names.add(f"{classes[block[1]]}.{'__new__' if '#[new]' in attributes else fn[1]}")
                attributes = []
            elif not line.startswith("    ///"):
                attributes = [] if not line.startswith("    ") or line.startswith("        ") else attributes
    return names


#: The accessors PyO3 writes for ``#[pyo3(get, set)]`` fields: no code of ours runs in them, so
#: nothing to guard. Listed here (the wheel's tests have no sources to read), checked against the
#: sources below.
GENERATED = {
    f"ProducerBatch.{name}"
    for name in (
        "loop", "log", "futures", "done_callbacks", "waiters", "record_errors", "retry_error",
        "_deferred", "callback_bytes", "parent", "pieces", "spans", "arrow_runs", "arrow_records",
    )
} | {"SampledStat.window_ms", "SampledStat.num_samples", "ProduceAnswer.correlation_id", "ProduceAnswer.throttle_time_ms"}


def _generated_accessors() -> set[str]:
    """The ``#[pyo3(get ...)]`` fields of the sources' pyclasses, as Python names them."""
    text = "\n".join(path.read_text() for path in sorted((NATIVE / "src").rglob("*.rs")))
    names = set()
    for struct in re.finditer(r'#\[pyclass\((?:name = "(?P<py>\w+)")?[^\]]*\)\]\s*pub struct (?P<rust>\w+) \{(?P<body>.*?)\n\}', text, re.S):
        cls = struct["py"] or struct["rust"]
        for options, field in re.findall(r"#\[pyo3\((get[^)]*)\)\]\s*(?:pub(?:\(crate\))? )?(\w+):", struct["body"]):
            renamed = re.search(r'name = "(\w+)"', options)
            names.add(f"{cls}.{renamed[1] if renamed else field}")
    return names


def test_every_entry_point_has_a_call_here() -> None:
    assert (_entry_points_seen_from_python() - GENERATED) | HIDDEN_SLOTS == set(CALLS) | NO_CALLER


@pytest.mark.source_tree
def test_the_sources_have_no_other_entry_point() -> None:
    assert _generated_accessors() == GENERATED
    assert _entry_points_in_the_sources() == (_entry_points_seen_from_python() - GENERATED) | HIDDEN_SLOTS | UNGUARDED


def test_a_panic_with_nothing_armed_is_a_runtime_error_and_the_module_goes_on() -> None:
    with pytest.raises(RuntimeError, match=r"_native\._panic_for_test panicked \(a deliberate panic in aioproducer\._native\): this is a bug in aioproducer"):
        _native._panic_for_test()
    assert _native.murmur2(b"21") == -973932308


def _outcome(call: Callable[[], object]) -> str:
    """What a call does: "returns", or the exception it raises (some raise by design: a record future has no constructor)."""
    try:
        call()
    except Exception as exc:
        return type(exc).__name__
    return "returns"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_panic_in_each_entry_point_is_a_runtime_error_naming_it(name: str) -> None:
    call = CALLS[name]
    unarmed = _outcome(call)
    assert unarmed != "RuntimeError"
    _native._panic_for_test(name)
    try:
        with pytest.raises(RuntimeError, match=rf"^aioproducer\._native\.{re.escape(name)} panicked .*this is a bug in aioproducer"):
            call()
    finally:
        _native._panic_for_test("")  # disarmed, even if the call never reached the entry point
    assert _outcome(call) == unarmed  # the next call does what it did before


def test_a_panic_releasing_a_buffer_is_reported_as_the_runtime_error(unraisable: list[Any]) -> None:
    builder = _builder(3, codec=1)
    view = builder.section_to_compress()
    assert view is not None
    _native._panic_for_test("RecordBatchBuilder.__releasebuffer__")
    view.release()  # no caller to raise to: Python reports it
    assert [type(u.exc_value) for u in unraisable] == [RuntimeError]
    assert "RecordBatchBuilder.__releasebuffer__ panicked" in str(unraisable[0].exc_value)


def _self_cycle(kind: str) -> None:
    """An object of ``kind`` that only it refers to, once this returns: only the collector frees it."""
    if kind == "ProducerBatch":
        batch = _batch()
        batch.set_outcome(0, -1, batch)  # type: ignore[arg-type]  # any object will do for the cycle
    elif kind == "RecordQueues":
        queues, batch = _queues()
        batch.set_outcome(0, -1, queues)  # type: ignore[arg-type]  # the queues hold the batch, which holds them
    else:
        future = _future()
        future._mark_cancelled(future)


@pytest.mark.parametrize("kind", ["ProducerBatch", "FutureRecordMetadata", "RecordQueues"])
def test_a_panic_clearing_a_cycle_is_reported_as_the_runtime_error(unraisable: list[Any], kind: str) -> None:
    """The collector clears an object that refers to itself: a panic there has no caller either."""
    gc.collect()
    _self_cycle(kind)
    _native._panic_for_test(f"{kind}.__clear__")
    try:
        gc.collect()
    finally:
        _native._panic_for_test("nothing")
    assert any(f"{kind}.__clear__ panicked" in str(u.exc_value) and type(u.exc_value) is RuntimeError for u in unraisable)
    gc.collect()  # unarmed: the cycle is cleared now
