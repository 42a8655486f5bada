"""FutureRecordMetadata's done-callbacks behave as asyncio's: soon, in order, errors reported."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from aioproducer.internals.batch import ProducerBatch
from aioproducer.protocol import compression
from aioproducer.protocol.records import RecordBatchBuilder


def _batch(loop: asyncio.AbstractEventLoop) -> ProducerBatch:
    return ProducerBatch("t", 0, RecordBatchBuilder(compression.NONE, 1 << 16), 0.0, 0, loop)


async def _callbacks_ran(loop: asyncio.AbstractEventLoop, calls: list[Any], expected: int) -> None:
    waiter = loop.create_future()
    loop.call_soon(waiter.set_result, None)  # queued after the batch's callbacks
    await waiter
    assert len(calls) == expected


async def test_a_raising_done_callback_is_reported_and_the_others_still_run() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    try:
        batch = _batch(loop)
        futures = [batch.try_append(1, None, b"v", None, None) for _ in range(3)]
        calls: list[Any] = []

        def boom(fut: Any) -> None:
            calls.append(("boom", fut))
            raise ValueError("callback failed")

        # Registered before completion (the completion path) ...
        for future in futures:
            assert future is not None
            future.add_done_callback(boom if future is futures[1] else calls.append)
        batch.complete(100, -1, None)
        assert calls == []  # never inline
        await _callbacks_ran(loop, calls, 3)
        assert calls[0] is futures[0] and calls[1] == ("boom", futures[1]) and calls[2] is futures[2]
        # ... and after it (the deferred path): the same rules.
        for future in futures:
            assert future is not None
            future.add_done_callback(boom if future is futures[0] else calls.append)
        assert len(calls) == 3
        await _callbacks_ran(loop, calls, 6)
        assert calls[3] == ("boom", futures[0]) and calls[4:] == futures[1:]
        assert [type(r["exception"]) for r in reported] == [ValueError, ValueError]
        assert all("Exception in callback" in r["message"] for r in reported)
    finally:
        loop.set_exception_handler(None)


def test_record_futures_are_made_by_send_only() -> None:
    import pytest

    from aioproducer.internals.batch import FutureRecordMetadata

    with pytest.raises(TypeError, match="Producer.send"):
        FutureRecordMetadata()


async def test_cancelling_a_record_future_stops_waiting_not_delivery() -> None:
    import pytest

    loop = asyncio.get_running_loop()
    batch = _batch(loop)
    delivered: list[Any] = []
    cancelled = batch.try_append(1, None, b"a", None, lambda md, err: delivered.append(("a", md, err)))
    kept = batch.try_append(1, None, b"b", None, lambda md, err: delivered.append(("b", md, err)))
    assert cancelled is not None and kept is not None
    calls: list[Any] = []
    cancelled.add_done_callback(calls.append)
    cancelled.add_done_callback(calls.append)
    assert cancelled.remove_done_callback(calls.append) == 2  # both registrations go
    cancelled.add_done_callback(calls.append)

    assert not cancelled.cancelled() and not cancelled.done()
    assert cancelled.cancel() is True
    assert cancelled.cancelled() and cancelled.done() and not kept.done()
    with pytest.raises(asyncio.CancelledError):
        cancelled.result()
    with pytest.raises(asyncio.CancelledError):
        cancelled.exception()
    await _callbacks_ran(loop, calls, 1)  # its done-callback ran once, soon
    assert calls == [cancelled]

    batch.complete(40, -1, None)
    await _callbacks_ran(loop, calls, 1)  # completion does not run it again
    assert cancelled.cancel() is False and kept.cancel() is False
    assert kept.result().offset == 41  # the batch and the other record are unaffected
    # on_delivery reports both records, in send order: the cancelled one was still sent.
    assert [(name, md.offset, err) for name, md, err in delivered] == [("a", 40, None), ("b", 41, None)]


async def test_an_on_delivery_raising_cancelled_error_is_logged_and_waiters_still_wake() -> None:
    loop = asyncio.get_running_loop()
    batch = _batch(loop)
    seen: list[Any] = []

    def cancelled(metadata: Any, error: Any) -> None:
        raise asyncio.CancelledError()

    first = batch.try_append(1, None, b"a", None, cancelled)
    second = batch.try_append(1, None, b"b", None, lambda md, err: seen.append(-1 if md is None else md.offset))
    assert first is not None and second is not None
    waiter = batch.add_waiter()
    assert batch.complete(10, -1, None)
    assert waiter.done() and seen == [11]  # the other callback ran and the waiter is released
    assert (await first).offset == 10


@pytest.mark.parametrize("leaving", [SystemExit, KeyboardInterrupt])
def test_an_on_delivery_raising_system_exit_leaves_the_loop_not_the_sender(leaving: type[BaseException]) -> None:
    """complete() runs in the sender task: it must return, and the exception leave the loop from a handle."""
    loop = asyncio.new_event_loop()
    try:
        batch = _batch(loop)
        seen: list[int] = []

        def leave(metadata: Any, error: Any) -> None:
            raise leaving()

        first = batch.try_append(1, None, b"a", None, leave)
        second = batch.try_append(1, None, b"b", None, lambda md, err: seen.append(-1 if md is None else md.offset))
        assert first is not None and second is not None
        waiter = batch.add_waiter()
        assert batch.complete(10, -1, None)  # does not raise into its caller
        assert waiter.done() and seen == [11] and batch.is_done
        assert first.result().offset == 10
        with pytest.raises(leaving):
            loop.run_until_complete(asyncio.sleep(0))  # the loop's next turn lets it out, as asyncio's handles do
        assert loop.run_until_complete(_one()) == 1  # and the loop goes on
    finally:
        loop.close()


async def _one() -> int:
    return 1


@pytest.mark.parametrize("leaving", [SystemExit, KeyboardInterrupt])
def test_a_done_callback_raising_system_exit_leaves_the_loop_and_the_others_still_run(
    leaving: type[BaseException],
) -> None:
    """As with asyncio's own handles: the exception leaves the loop, the callbacks after it run on its next turn."""
    loop = asyncio.new_event_loop()
    try:
        batch = _batch(loop)
        futures = [batch.try_append(1, None, b"v", None, None) for _ in range(3)]
        calls: list[Any] = []

        def leave(fut: Any) -> None:
            calls.append("leave")
            raise leaving()

        for future in futures:
            assert future is not None
            future.add_done_callback(leave if future is futures[0] else calls.append)
        gathered = asyncio.gather(*[f for f in futures if f is not None])  # one more done-callback per record, after the ones above
        batch.complete(5, -1, None)
        with pytest.raises(leaving):
            loop.run_until_complete(asyncio.sleep(0))
        assert calls == ["leave"]
        results = loop.run_until_complete(gathered)  # would never end if the rest of the batch's callbacks were lost
        assert calls == ["leave", futures[1], futures[2]]
        assert [md.offset for md in results] == [5, 6, 7]
    finally:
        loop.close()


async def test_removing_one_records_done_callback_leaves_the_batchs_others() -> None:
    """Done-callbacks wait in one list per batch: removing one record's touches no other record's."""
    loop = asyncio.get_running_loop()
    batch = _batch(loop)
    futures = [batch.try_append(1, None, b"v", None, None) for _ in range(3)]
    calls: list[Any] = []

    def other(fut: Any) -> None:
        calls.append(("other", fut))

    for future in futures:
        assert future is not None
        future.add_done_callback(calls.append)
        future.add_done_callback(other)
    first, middle, last = futures
    assert first is not None and middle is not None and last is not None
    assert middle.remove_done_callback(calls.append) == 1
    assert middle.remove_done_callback(calls.append) == 0  # already gone
    batch.complete(7, -1, None)
    assert middle.remove_done_callback(other) == 0  # scheduled: too late, as asyncio's
    await _callbacks_ran(loop, calls, 5)
    # In the order added, the removed one missing.
    assert calls == [first, ("other", first), ("other", middle), last, ("other", last)]


async def test_a_split_batchs_waiting_done_callbacks_follow_their_records() -> None:
    """MESSAGE_TOO_LARGE splits a batch: each record's callbacks move to the piece that now holds it."""
    loop = asyncio.get_running_loop()
    batch = _batch(loop)
    futures = [batch.try_append(1, None, bytes(400), None, None) for _ in range(6)]
    calls: list[Any] = []
    for future in reversed(futures):  # added out of send order: they run in the order added
        assert future is not None
        future.add_done_callback(calls.append)
    pieces = batch.split(1000)
    assert len(pieces) > 1 and batch.done_callbacks is None
    for offset, piece in zip((200, 300, 400, 500, 600), pieces[1:]):  # all but the first piece
        piece.complete(offset, -1, None)
    def added_order(piece: ProducerBatch) -> list[Any]:
        return [f for f in futures[::-1] if f is not None and f._batch is piece]

    later = [f for piece in pieces[1:] for f in added_order(piece)]
    await _callbacks_ran(loop, calls, len(later))
    assert calls == later  # exactly the completed pieces' records, each piece's in the order added
    pieces[0].complete(100, -1, None)
    await _callbacks_ran(loop, calls, 6)
    assert calls == later + added_order(pieces[0])
