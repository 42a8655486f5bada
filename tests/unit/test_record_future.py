"""FutureRecordMetadata's done-callbacks behave as asyncio's: soon, in order, errors reported."""

from __future__ import annotations

import asyncio
from typing import Any

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
