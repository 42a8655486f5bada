"""ProducerBatch and the light per-record future, FutureRecordMetadata.

Why a custom future: an ``asyncio.Future`` per record costs allocation, a loop
reference and callback bookkeeping on the hottest path. As in the Java client
(one ``ProduceRequestResult`` per batch, a ``FutureRecordMetadata`` holding a
relative offset), a record's future here is a small native object
(``native/src/batch.rs``) that points at its batch and its batch's one outcome;
the batch completes once, with no work per future, and every record's metadata
follows from it (offset = base offset + relative offset).

It still behaves like a future to users and to asyncio: it can be awaited, has
``done()``, ``result()``, ``exception()``, ``cancelled()``, ``cancel()``,
``add_done_callback()`` / ``remove_done_callback()`` and ``get_loop()``, and
passes ``asyncio.isfuture`` so ``asyncio.gather``, ``asyncio.wait_for`` and
``asyncio.shield`` use it directly instead of wrapping it in a task.

Cancelling a record future only stops *waiting* for it: a record that is in a
batch cannot be withdrawn (nor can it in the Java client), it is still sent.

A done-callback or ``on_delivery`` that raises is handled as asyncio handles its own
callbacks (see ``internals/callbacks.py``): reported, or for ``SystemExit`` and
``KeyboardInterrupt`` let out of the loop, never at the cost of another record's callbacks
or of the sender task.
"""

from __future__ import annotations

import asyncio
import logging
import math
import sys
from types import FunctionType
from collections.abc import Callable, Generator, Sequence
from typing import TYPE_CHECKING, Any, Optional, Protocol

from aioproducer._native import FutureRecordMetadata, ProducerBatch, set_object_costs
from aioproducer.internals.callbacks import LEAVING_LOOP, raise_from_loop
from aioproducer.logs import LogLike
from aioproducer.protocol.records import RecordBatchBuilder
from aioproducer.record_types import RecordMetadata  # handed on: its home is at the bottom of the package

if TYPE_CHECKING:
    from aioproducer._native import ArrowRecords
    from aioproducer.arrow import ArrowDelivery

__all__ = [
    "RecordMetadata", "FutureRecordMetadata", "ProducerBatch", "RecordErrors", "DeliveryCallback", "RECORD_OBJECT_BYTES"
]

log: logging.Logger = logging.getLogger("aioproducer")

DeliveryCallback = Callable[[Optional["RecordMetadata"], Optional[BaseException]], Any]
"""`on_delivery(metadata, error)`: called once per record, in send order per partition, with `(metadata, None)` or `(None, error)`."""
Headers = Sequence[tuple[str, Optional[bytes]]]

NO_SEQUENCE = -1


class RecordSpans(Protocol):
    """The OpenTelemetry spans of a batch's traced records (``aioproducer.tracing.RecordSpans``).

    A protocol here so that this module never imports the tracing one: a producer without
    tracing leaves ``ProducerBatch.spans`` None and loads nothing of OpenTelemetry.
    """

    def end(self, batch: ProducerBatch) -> None: ...

    def slice(self, start: int, end: int) -> RecordSpans | None: ...


# What RecordMetadata(...) does, minus the Python-level __new__ frame the named tuple adds
# (about 170 ns of the cost of each record's result()).
_new_metadata: Callable[[type[RecordMetadata], tuple[Any, ...]], RecordMetadata] = tuple.__new__


# The record future is native (native/src/batch.rs): a batch reference, the record's offset delta,
# create time and sizes and its cancellation; the outcome it reads is its batch's
# (ProducerBatch, native/src/batch.rs), written once by complete(). done(), result(), exception(), cancelled() and
# get_loop(), which asyncio calls once per record, are native; the methods below are its methods
# too, set on the type at import (_install_future_methods): they are called now and then, and
# they keep the batch's done-callback lists, which only this module writes.
#
# Measured against the slotted Python future it replaced (CPU time, interleaved rounds on a shared
# 2-core machine, abi3-py311): benchmarks/record_future.py gives done() 0.03 µs against 0.05 and
# result() 0.18-0.28 against 0.23-0.26; try_append alone in a loop over pre-made batches 0.27-0.30
# against 0.34-0.36 (in record_future.py, which makes the batches too, within noise). Completion
# costs nothing per future. on_delivery stays a Python loop (_report_delivery): the same loop in
# Rust cost 0.22 µs a record against 0.20, since abi3-py311 calls Python without vectorcall.


def _cancel(self: FutureRecordMetadata, msg: Any = None) -> bool:
    """Stop waiting for this record (it is still delivered): callbacks run, awaiters get CancelledError.

    ``on_delivery`` still reports the record's outcome when its batch completes.
    """
    if self.done():
        return False
    self._mark_cancelled(msg)
    batch = self._batch
    mine = batch.take_done_callbacks(self, None)
    if mine:
        batch.loop.call_soon(_invoke_all, mine)
    return True


def _make_cancelled_error(self: FutureRecordMetadata) -> asyncio.CancelledError:
    # asyncio's own code (gather's and wait_for's callbacks) asks a cancelled future for this.
    message = self._cancel_message
    return asyncio.CancelledError() if message is None else asyncio.CancelledError(message)


def _result_of_failed_or_split(self: FutureRecordMetadata) -> RecordMetadata:
    """``result()`` of a completed record whose batch failed or gave no offset: the native result()'s rare path."""
    error = self._batch.error_of(self._relative_offset)
    if error is not None:  # None: its piece of a split batch was written
        raise error
    return self.metadata()


def _record_error(self: FutureRecordMetadata, batch_error: BaseException) -> BaseException | None:
    """What this record failed with when its batch failed with ``batch_error``.

    That same error, unless the broker refused the batch record by record (KIP-467) or the
    batch was split and its pieces ended each their own way (``ProducerBatch.error_of``).
    """
    batch: ProducerBatch = self._batch
    return batch.error_of(self._relative_offset)


def _metadata(self: FutureRecordMetadata) -> RecordMetadata:
    """The record's metadata from its completed batch (no error check)."""
    batch: ProducerBatch = self._batch
    offset = self._relative_offset
    while batch.pieces is not None:  # split after MESSAGE_TOO_LARGE: the piece that holds the record
        batch, offset = batch.piece_of(offset)
    return batch.metadata_at(offset, self._timestamp, self._key_size, self._value_size)


def _add_done_callback(self: FutureRecordMetadata, fn: Callable[[Any], Any], *, context: Any = None) -> None:
    batch = self._batch
    if self.done():
        # Soon, not now, as asyncio does; batched so that gathering many finished
        # records schedules one loop callback per batch instead of one per record.
        # Flat (future, fn, context) triples: a tuple per record would be one more
        # GC-tracked object per record alive until the loop runs them.
        pending = batch._deferred
        if pending is None:
            pending = batch._deferred = []
            batch.loop.call_soon(batch._run_deferred)
        pending += self, fn, context
        return
    waiting = batch.done_callbacks
    if waiting is None:
        waiting = batch.done_callbacks = []
    waiting += self, fn, context


def _remove_done_callback(self: FutureRecordMetadata, fn: Callable[[Any], Any]) -> int:
    """Remove ``fn`` wherever it waits on this record; 0 once it ran or was scheduled, as asyncio's."""
    return len(self._batch.take_done_callbacks(self, fn)) // 3


def _await(self: FutureRecordMetadata) -> Generator[Any, None, RecordMetadata]:
    # Each suspension waits on a fresh loop future so that cancelling the awaiting
    # task never cancels anything shared by other records of the batch.
    while not self.done():
        waiter = self._batch.add_waiter()
        yield from waiter
    return self.result()


def _repr(self: FutureRecordMetadata) -> str:
    batch = self._batch
    state = "cancelled" if self.cancelled() else ("done" if batch.is_done else "pending")
    return f"<FutureRecordMetadata {batch.topic}-{batch.partition} {state}>"


def _install_future_methods() -> None:
    """Give the native record future its Python methods (see the comment above ``_cancel``)."""
    methods: dict[str, Any] = {
        "cancel": _cancel,
        "_make_cancelled_error": _make_cancelled_error,
        "_result_of_failed_or_split": _result_of_failed_or_split,
        "record_error": _record_error,
        "metadata": _metadata,
        "add_done_callback": _add_done_callback,
        "remove_done_callback": _remove_done_callback,
        "__await__": _await,
        "__iter__": _await,
        "__repr__": _repr,
    }
    _install(FutureRecordMetadata, methods)


def _install(native_type: type, methods: dict[str, Any]) -> None:
    """Set Python functions on a native type as its methods (the record future's, the batch's)."""
    for name, method in methods.items():
        setattr(native_type, name, method)


_install_future_methods()


# The batch's Python methods. ProducerBatch is native (native/src/batch.rs): one object per batch,
# with its builder, schedule, reservation, producer state, flags and outcome, written only by its
# native transitions (drained, reenqueued, set_producer_state, set_outcome ...), and a record's
# append (try_append, try_append_many) native too. The methods below are its methods as well, set
# on the type at import (_install_batch_methods), as the record future's are: its completion,
# split, reports and memory accounting, which call into Python anyway (callbacks, the event loop,
# tracing). They and the native methods are the only writers of its Python state (futures,
# callbacks, done_callbacks, waiters, spans, pieces ...): tests/unit/test_batch_ownership.py.
#
# Its states, and the transitions the accumulator, the sender and the transaction manager move it
# through, named after Java's ProducerBatch where Java has one:
#
# - open (the last of its deque): try_append; settle once it stops growing;
# - queued: drained (into a request), numbered by set_producer_state at its first drain;
#   reset_producer_state when an epoch bump renumbers it;
# - in a request: attempt_failed + mark_in_retry + reenqueued (queued again), split (its pieces
#   are queued: take_reservation, reenqueued_piece), request_ended (it expired meanwhile), or
# - done: complete (once; fail_per_record first for KIP-467), then release_reservation and release.


# -- appending -------------------------------------------------------------------
def _batch_try_append_arrow(self: ProducerBatch, records: ArrowRecords, start: int, stop: int, delivery: ArrowDelivery) -> int:
    """Append the planned rows ``start:stop`` of a ``send_arrow()`` call while the batch has room: how many.

    One native call for the run (``ArrowRecords.append_rows``) and one run entry, whatever its length.
    """
    relative_offset = self.builder.record_count
    count = records.append_rows(self.builder, start, stop)
    if count:
        runs = self.arrow_runs
        if runs is None:
            runs = self.arrow_runs = []
        runs += delivery, start, count, relative_offset
        self.arrow_records += count
    return count


# -- memory: object_bytes and settle are native (they count the batch's records; the sender's drain
# settles natively); what a record and a row cost is measured here (RECORD_OBJECT_BYTES below).


def _batch_attempt_failed(self: ProducerBatch, error: BaseException) -> None:
    """The attempt failed with ``error`` and will be retried: the cause its expiry names, if it expires."""
    self.retry_error = error

# -- tracing ------------------------------------------------------------------------
def _batch_set_spans(self: ProducerBatch, spans: RecordSpans | None) -> None:
    """Hold the spans of its traced records (``Tracing.attach``), or None once they were ended."""
    self.spans = spans


def _batch_split(self: ProducerBatch, max_batch_size: int) -> list[ProducerBatch]:
    """This batch's records, in order, in new batches of at most ``max_batch_size`` (MESSAGE_TOO_LARGE).

    Built on the record builder's split, which keeps the codec and the compression
    ratio seen so far. Each record's future held here, and its ``on_delivery``, move to
    the piece that now holds its record, so awaiting it, its callbacks and its offset
    follow the record. A future this batch does not hold (of a record sent with
    ``on_delivery``, kept by its caller) stays here: this batch stays pending until its
    last piece completes and then answers for each record from its piece (``pieces``).
    The pieces keep this batch's creation time (``delivery.timeout.ms`` counts from the
    first ``send()``); memory and sequence numbers are the accumulator's business.
    """
    pieces: list[ProducerBatch] = []
    starts: list[int] = []
    futures, moved = self.futures, 0
    callbacks, taken = self.callbacks or [], 0
    start = 0
    for builder in self.builder.split(max_batch_size):
        piece = ProducerBatch(self.topic, self.partition, builder, self.created_ms, 0, self.loop, self.log)
        piece.keep_deadline_of(self)  # the records' deadline, not the piece's
        end = start + builder.record_count
        while moved < len(futures) and futures[moved]._relative_offset < end:
            future = futures[moved]
            future._move_to(piece, start)
            piece.futures.append(future)
            moved += 1
        rows: list[Any] = []  # the piece's on_delivery rows, set once (each read of callbacks is a copy)
        while taken < len(callbacks) and callbacks[taken + 1] < end:
            on_delivery, relative_offset, timestamp, key_size, value_size = callbacks[taken : taken + 5]
            rows += (on_delivery, relative_offset - start, timestamp, key_size, value_size)
            piece.callback_bytes += _callback_bytes(on_delivery)
            taken += 5
        if rows:
            piece.callbacks = rows
        piece.parent = self
        starts.append(start)
        pieces.append(piece)
        start = end
    self.pieces = list(zip(starts, pieces))
    spans = self.spans
    if spans is not None:  # each piece ends its own records' spans, with its own offsets
        self.spans = None
        for start, piece in self.pieces:
            piece.spans = spans.slice(start, start + piece.record_count)
    self.futures = []
    self.callbacks = None
    waiting = self.done_callbacks or []
    self.done_callbacks = None
    for i in range(0, len(waiting), 3):
        holder = waiting[i]._batch  # the piece that now holds the record, or this batch
        if holder.done_callbacks is None:
            holder.done_callbacks = []
        holder.done_callbacks += waiting[i : i + 3]
    return pieces


def _batch_outcomes(self: ProducerBatch) -> list[tuple[RecordMetadata | None, BaseException | None]]:
    """Each record's (metadata, error) once the batch completed, in offset order (for interceptors).

    From the futures it holds and its ``on_delivery`` records: call before ``release()``.
    """
    rows: dict[int, tuple[int, int, int]] = {f._relative_offset: (f._timestamp, f._key_size, f._value_size) for f in self.futures}
    it = iter(self.callbacks or ())
    for _, relative_offset, timestamp, key_size, value_size in zip(it, it, it, it, it):
        rows[relative_offset] = (timestamp, key_size, value_size)
    out: list[tuple[RecordMetadata | None, BaseException | None]] = []
    for relative_offset in sorted(rows):
        error = self.error_of(relative_offset)
        out.append((None if error is not None else self.metadata_at(relative_offset, *rows[relative_offset]), error))
    return out


def _batch_metadata_at(self: ProducerBatch, relative_offset: int, timestamp: int, key_size: int, value_size: int) -> RecordMetadata:
    """A record's metadata from this completed batch: offset -1 when unknown, the broker's time when it gave one.

    What ``FutureRecordMetadata.result()`` (native) and ``_report_delivery`` compute inline, once per record.
    """
    base, appended = self.base_offset, self.log_append_time
    return _new_metadata(
        RecordMetadata,
        (
            self.topic,
            self.partition,
            base + relative_offset if base >= 0 else -1,
            appended if appended >= 0 else timestamp,
            key_size,
            value_size,
            1 if appended >= 0 else 0,
        ),
    )


def _batch_piece_of(self: ProducerBatch, relative_offset: int) -> tuple[ProducerBatch, int]:
    """The piece of this split batch that holds the record at ``relative_offset``, and its offset there."""
    assert self.pieces is not None
    for start, piece in reversed(self.pieces):  # a handful of pieces: the last that starts at or before it
        if start <= relative_offset:
            return piece, relative_offset - start
    raise ValueError(f"no record at relative offset {relative_offset} in this split batch")


def _batch_error_of(self: ProducerBatch, relative_offset: int) -> BaseException | None:
    """The error of the record at ``relative_offset`` of this completed batch; None if it was written.

    The batch's error, or the record's own when the broker named the bad records (KIP-467),
    or, for a split batch, what the record's piece says.
    """
    if self.error is None:
        return None
    if self.pieces is not None:
        piece, offset = self.piece_of(relative_offset)
        return piece.error_of(offset)
    errors = self.record_errors
    return self.error if errors is None else errors.get(relative_offset)


def _batch_piece_complete(self: ProducerBatch) -> None:
    """One of this split batch's pieces completed; the last one completes this batch."""
    pieces = self.pieces
    if pieces is not None and all(piece.is_done for _, piece in pieces):
        failed = next((piece.error for _, piece in pieces if piece.error is not None), None)
        self.complete(-1, -1, failed)  # records read offsets and errors from their pieces

# -- completion -------------------------------------------------------------------
def _batch_add_waiter(self: ProducerBatch) -> asyncio.Future[None]:
    waiter: asyncio.Future[None] = self.loop.create_future()
    if self.waiters is None:
        self.waiters = []
    self.waiters.append(waiter)
    return waiter


def _batch_run_deferred(self: ProducerBatch) -> None:
    """Run the queued done-callbacks of finished records (see ``add_done_callback``)."""
    pending, self._deferred = self._deferred, None
    if pending:
        _invoke_all(pending)


def _batch_take_done_callbacks(self: ProducerBatch, future: FutureRecordMetadata, fn: Callable[[Any], Any] | None) -> list[Any]:
    """Remove and return (flat triples) ``future``'s waiting done-callbacks: all, or those equal to ``fn``.

    A scan of the batch's list: only ``cancel()`` and ``remove_done_callback()`` call it.
    """
    waiting = self.done_callbacks
    if not waiting:
        return []
    taken: list[Any] = []
    kept: list[Any] = []
    for i in range(0, len(waiting), 3):
        triple = waiting[i : i + 3]
        if triple[0] is future and (fn is None or triple[1] == fn):
            taken += triple
        else:
            kept += triple
    self.done_callbacks = kept
    return taken


def _batch_complete(self: ProducerBatch, base_offset: int, log_append_time: int, error: BaseException | None) -> bool:
    """Finish the batch once; False if it was already finished (a late response)."""
    if not self.set_outcome(base_offset, log_append_time, error):
        return False
    spans = self.spans
    if spans is not None:  # tracing on: each record's span ends at its acknowledgement, before any callback
        self.spans = None
        self._end_spans(spans)
    if self.callbacks:
        # on_delivery reports the record, which was sent even if its future was cancelled
        # (a wait_for() that timed out must not lose the report).
        self._report_delivery(base_offset, log_append_time, error)
    if self.arrow_runs is not None:  # send_arrow() rows: one report per run, not per row
        self._report_arrow(base_offset, error)
    waiting = self.done_callbacks
    if waiting:
        # One loop callback for the whole batch, not one per record: the done-callbacks
        # still run after this call returns, in the order they were added. A cancelled
        # record's ran at its cancel() and are no longer listed.
        self.done_callbacks = None
        self.loop.call_soon(_invoke_all, waiting)
    self.wake_waiters()
    parent = self.parent
    if parent is not None:
        self.parent = None  # no cycle: the split batch keeps its pieces, not the other way round
        parent._piece_complete()
    return True


def _batch_end_spans(self: ProducerBatch, spans: RecordSpans) -> None:
    """End the records' spans; what the tracing code raises is logged, never raised into the sender."""
    try:
        spans.end(self)
    except LEAVING_LOOP as exc:
        raise_from_loop(self.loop, exc)
    except BaseException:
        self.log.exception("ending the OpenTelemetry spans of %s-%s raised", self.topic, self.partition)


def _batch_report_delivery(self: ProducerBatch, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
    """Call each record's ``on_delivery`` with its metadata or its error, in send order.

    Never raises: it runs in the sender task, which must outlive any callback. A callback
    that raises is logged and the others still run; ``SystemExit`` and ``KeyboardInterrupt``
    leave the event loop from a handle of their own, as from any asyncio callback
    (``raise_from_loop``), once this batch and the sender's pass are done with.
    """
    it = iter(self.callbacks or ())
    rows = zip(it, it, it, it, it)
    if error is not None:
        for on_delivery, relative_offset, _, _, _ in rows:
            _deliver(self, on_delivery, None, self.error_of(relative_offset))
        return
    topic, partition = self.topic, self.partition
    if base_offset >= 0 and log_append_time < 0:
        # Written with offsets, create times kept (nearly every batch): no per-record choice. The
        # loop is written out, not through _deliver: a call less per record (about 0.05 µs of 0.7).
        for on_delivery, relative_offset, timestamp, key_size, value_size in rows:
            try:
                on_delivery(
                    _new_metadata(
                        RecordMetadata,
                        (topic, partition, base_offset + relative_offset, timestamp, key_size, value_size, 0),
                    ),
                    None,
                )
            except LEAVING_LOOP as exc:
                raise_from_loop(self.loop, exc)
            except BaseException:  # a user's callback must never break delivery of the others
                self.log.exception("on_delivery callback %r raised", on_delivery)
        return
    for on_delivery, relative_offset, timestamp, key_size, value_size in rows:
        metadata = _new_metadata(
            RecordMetadata,
            (
                topic,
                partition,
                base_offset + relative_offset if base_offset >= 0 else -1,
                log_append_time if log_append_time >= 0 else timestamp,
                key_size,
                value_size,
                1 if log_append_time >= 0 else 0,
            ),
        )
        _deliver(self, on_delivery, metadata, None)


def _deliver(
    batch: ProducerBatch, on_delivery: DeliveryCallback, metadata: RecordMetadata | None, error: BaseException | None
) -> None:
    """``on_delivery(metadata, error)``, which must never break delivery of the others (see ``_report_delivery``)."""
    try:
        on_delivery(metadata, error)
    except LEAVING_LOOP as exc:
        raise_from_loop(batch.loop, exc)
    except BaseException:  # a user's callback must never break delivery of the others
        batch.log.exception("on_delivery callback %r raised", on_delivery)


def _batch_delivery_raised(self: ProducerBatch, on_delivery: DeliveryCallback, exc: BaseException) -> None:
    """An ``on_delivery`` the native completion called raised ``exc`` (see ``_report_delivery``): as ``_deliver`` handles it."""
    if isinstance(exc, LEAVING_LOOP):
        raise_from_loop(self.loop, exc)
    else:
        self.log.error("on_delivery callback %r raised", on_delivery, exc_info=exc)


def _batch_report_arrow(self: ProducerBatch, base_offset: int, error: BaseException | None) -> None:
    """Report each ``send_arrow()`` run to its delivery: a count, or row by row when records differ.

    A run is reported whole when its records share an outcome (success, or the batch's one
    error); row by row only when the broker named bad records (KIP-467) or the batch was
    split (each piece has its own offset and outcome). Never raises (the sender runs it).
    """
    runs, self.arrow_runs = self.arrow_runs, None
    assert runs is not None
    it = iter(runs)
    for delivery, start, count, relative_offset in zip(it, it, it, it):
        try:
            if self.pieces is None and (error is None or self.record_errors is None):
                delivery.run_done(start, count, base_offset + relative_offset if base_offset >= 0 else -1, error)
            else:
                for k in range(count):
                    record_error = self.error_of(relative_offset + k)
                    offset = -1 if record_error is not None else self.metadata_at_record(relative_offset + k)
                    delivery.run_done(start + k, 1, offset, record_error)
        except LEAVING_LOOP as exc:
            raise_from_loop(self.loop, exc)
        except BaseException:
            self.log.exception("reporting send_arrow() rows of %s-%s raised", self.topic, self.partition)


def _batch_metadata_at_record(self: ProducerBatch, relative_offset: int) -> int:
    """The offset of the record at ``relative_offset`` of this completed batch, through its pieces if split."""
    batch, offset = self, relative_offset
    while batch.pieces is not None:
        batch, offset = batch.piece_of(offset)
    return batch.base_offset + offset if batch.base_offset >= 0 else -1


def _batch_fail_per_record(self: ProducerBatch, errors: RecordErrors) -> None:
    """Before a failing ``complete()``: each record is to report its own error from ``errors`` (KIP-467).

    Read only where a record's error is asked for (``error_of``), never on success: a batch
    that succeeds (every batch, nearly) pays nothing for this.
    """
    self.record_errors = errors


def _batch_wake_waiters(self: ProducerBatch) -> None:
    waiters = self.waiters
    if waiters:
        self.waiters = None
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


def _batch_release(self: ProducerBatch) -> None:
    """After completion: keep only what record futures read (offset, time, error).

    Dropping the record list breaks the batch <-> future reference cycle, so a
    finished batch is freed by reference counting, not by a later cyclic GC pass,
    and dropping the bytes keeps memory bounded by what is queued and in flight.
    """
    self.futures.clear()  # emptied, not replaced: no new object per batch
    self.callbacks = None
    self.builder.release()


def _batch_repr(self: ProducerBatch) -> str:
    return (
        f"<ProducerBatch {self.topic}-{self.partition} records={self.record_count} "
        f"attempts={self.attempts} seq={self.base_sequence} done={self.is_done}>"
    )

def _install_batch_methods() -> None:
    """Give the native batch its Python methods (see "The batch's Python methods" above)."""
    methods: dict[str, Any] = {
        "try_append_arrow": _batch_try_append_arrow,
        "attempt_failed": _batch_attempt_failed,
        "set_spans": _batch_set_spans,
        "split": _batch_split,
        "outcomes": _batch_outcomes,
        "metadata_at": _batch_metadata_at,
        "piece_of": _batch_piece_of,
        "error_of": _batch_error_of,
        "_piece_complete": _batch_piece_complete,
        "add_waiter": _batch_add_waiter,
        "_run_deferred": _batch_run_deferred,
        "take_done_callbacks": _batch_take_done_callbacks,
        "complete": _batch_complete,
        "_end_spans": _batch_end_spans,
        "_report_delivery": _batch_report_delivery,
        "_report_arrow": _batch_report_arrow,
        "_delivery_raised": _batch_delivery_raised,
        "metadata_at_record": _batch_metadata_at_record,
        "fail_per_record": _batch_fail_per_record,
        "wake_waiters": _batch_wake_waiters,
        "release": _batch_release,
        "__repr__": _batch_repr,
    }
    _install(ProducerBatch, methods)


_install_batch_methods()


class RecordErrors:
    """How each record of a batch failed when the broker named the bad ones (KIP-467 ``record_errors``).

    Java fails the records the broker named with their own error and every other
    record of the batch with a generic one: they were fine, but they cannot be
    written without the bad ones (a batch is appended whole or not at all).
    """

    __slots__ = ("by_index", "others")

    def __init__(self, by_index: dict[int, BaseException], others: BaseException) -> None:
        self.by_index: dict[int, BaseException] = by_index
        self.others: BaseException = others

    def get(self, batch_index: int) -> BaseException:
        """The error of the record at ``batch_index`` (its offset delta in the batch)."""
        return self.by_index.get(batch_index, self.others)


_getsizeof = sys.getsizeof
_POINTER_BYTES = 8  # a list slot
_GC_HEADER_BYTES = 16  # what sys.getsizeof adds to a collected object's __basicsize__

#: What one queued record costs in Python objects besides its encoded bytes: its future (native,
#: its create time inside), its slot in the batch's list of futures, and an int of 13 digits of
#: milliseconds. A record with ``on_delivery`` holds less since its row became native (40 bytes:
#: the callable's reference, offset delta, create time, two sizes; 2026-12-04) and is charged the
#: same: the estimate errs towards earlier backpressure.
RECORD_OBJECT_BYTES: int = (
    FutureRecordMetadata.__basicsize__ + _GC_HEADER_BYTES + _POINTER_BYTES + sys.getsizeof(1_700_000_000_000)
)
#: What one send_arrow() row holds besides its encoded bytes: its planned position (8 bytes, in
#: ``ArrowRecords``) and, when per-row outcomes are asked for, its offset (8 more); counted as 16.
ARROW_ROW_BYTES = 16
set_object_costs(RECORD_OBJECT_BYTES, ARROW_ROW_BYTES)  # what the native object_bytes and settle count
#: Code object -> what a plain function with that code holds besides itself (closure, defaults).
_FUNCTION_EXTRA_BYTES: dict[Any, int] = {}
_FUNCTION_CACHE_LIMIT = 1024


def _callback_bytes(on_delivery: Any) -> int:
    """What holding ``on_delivery`` until delivery keeps alive, as ``buffer.memory`` charges it.

    The callable itself and, for a plain function (a lambda made per record, typically), its
    closure tuple and cells and its defaults tuple: ``sys.getsizeof`` of a lambda alone is
    about 60 % of what it holds. The values in the cells are the caller's and not counted.
    The extra size depends only on the code object's shape, so it is computed once per code.
    """
    size = _getsizeof(on_delivery) + _POINTER_BYTES
    if type(on_delivery) is not FunctionType:
        return size
    code = on_delivery.__code__
    extra = _FUNCTION_EXTRA_BYTES.get(code)
    if extra is None:
        closure, defaults = on_delivery.__closure__, on_delivery.__defaults__
        extra = (_getsizeof(closure) + sum(map(_getsizeof, closure)) if closure else 0) + (
            _getsizeof(defaults) if defaults else 0
        )
        if len(_FUNCTION_EXTRA_BYTES) >= _FUNCTION_CACHE_LIMIT:  # code made at run time cannot grow it forever
            _FUNCTION_EXTRA_BYTES.clear()
        _FUNCTION_EXTRA_BYTES[code] = extra
    return size + extra


def _invoke_all(calls: list[Any]) -> None:
    """Run done-callbacks as asyncio Handles would: each in its context, errors reported, not raised.

    ``calls`` is flat: future, fn, context, future, fn, context, ... One loop over many
    calls (gather() queues one per record), not a function call per callback.
    ``SystemExit``/``KeyboardInterrupt`` leave the loop, as from asyncio's own handles, but
    the callbacks after the one that raised are scheduled first: with asyncio each would be
    a handle of its own, still queued when the loop runs again (``asyncio.run()`` runs it
    again to cancel its tasks), and a ``gather()`` that lost its callbacks would never end.
    """
    it = iter(calls)
    for future, fn, context in zip(it, it, it):
        try:
            if context is None:
                fn(future)
            else:
                context.run(fn, future)
        except LEAVING_LOOP:
            rest = list(it)  # what zip() has not taken yet: the calls after this one
            if rest:
                future.get_loop().call_soon(_invoke_all, rest)
            raise
        except BaseException as exc:
            future.get_loop().call_exception_handler(
                {"message": f"Exception in callback {fn!r}", "exception": exc, "future": future}
            )


