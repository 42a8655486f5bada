"""The producer's waits on one clock, driven end to end in virtual time (``aioproducer.testing.virtual_time``).

Each test runs a ``FakeProducer`` (the real producer's engine, intake, accumulator, buffer
pool and transaction state machine; no network) on a ``VirtualTimeLoop``: the loop's clock
jumps to its next timer whenever nothing can run, and the engine reads that same clock
(``clock.loop_ms``). So a 60-second ``max.block.ms`` wait, a ``flush(timeout)`` and a bounded
``close()`` run to their deadlines in no real time, and each test checks the deadline was
met exactly, on the clock the producer reads, with no sleep and no real-time measurement.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

import pytest

from aioproducer import FutureRecordMetadata, KafkaTimeoutError, ProducerClosedError
from aioproducer.testing import FakeProducer
from aioproducer.testing.virtual_time import VirtualTimeLoop, run_in_virtual_time

# One batch per record in the fake, each reserving batch.size: in _filled(), two fill the pool.


def _now() -> float:
    return asyncio.get_running_loop().time()


async def _filled() -> tuple[FakeProducer, list[FutureRecordMetadata]]:
    """A started fake whose buffer memory is all held by two undelivered records."""
    fake = FakeProducer(autocomplete=False, buffer_memory=32_768, batch_size=16_384, max_block_ms=60_000)
    await fake.start()
    held = [await fake.send("events", b"held") for _ in range(2)]
    return fake, held


async def _raises_at(call: Awaitable[object], error: type[BaseException], seconds: float) -> BaseException:
    """Await ``call``; it must raise ``error`` exactly ``seconds`` later on the loop's clock."""
    started = _now()
    with pytest.raises(error) as caught:
        await call
    assert _now() - started == pytest.approx(seconds)
    return caught.value


def test_the_loop_jumps_to_its_next_timer_and_still_wakes_for_a_thread() -> None:
    async def scenario() -> tuple[float, str]:
        await asyncio.sleep(3600)
        slept = _now()
        loop = asyncio.get_running_loop()
        woken = loop.create_future()
        threading.Thread(target=loop.call_soon_threadsafe, args=(woken.set_result, "woken")).start()
        return slept, await woken  # no timer at all now: the loop blocks on its selector, as any loop

    assert run_in_virtual_time(scenario) == (3600.0, "woken")


def test_a_memory_wait_ends_at_max_block_ms_on_the_producers_clock() -> None:
    async def scenario() -> None:
        fake, held = await _filled()
        error = await _raises_at(fake.send("events", b"more"), KafkaTimeoutError, 60.0)
        assert "max.block.ms=60000" in str(error)
        # The pool timed the wait on the engine's clock: the loop's, so 60 virtual seconds.
        assert fake.metrics()["bufferpool-wait-time-total"] == pytest.approx(60e9)
        assert fake.complete_next(2) == 2 and all(f.done() and f.exception() is None for f in held)
        await fake.send("events", b"fits now")  # the producer goes on
        await fake.close()

    run_in_virtual_time(scenario)


def test_memory_freed_during_the_wait_lets_the_record_in_at_that_moment() -> None:
    async def scenario() -> None:
        fake, _ = await _filled()
        started = _now()

        async def deliver_one_later() -> None:
            await asyncio.sleep(20)
            fake.complete_next(1)

        releaser = asyncio.ensure_future(deliver_one_later())
        waiting = await fake.send("events", b"waited")
        assert _now() - started == pytest.approx(20.0)
        await releaser
        fake.complete_next(2)
        assert (await waiting).offset == 2
        await fake.close()

    run_in_virtual_time(scenario)


def test_flush_with_a_timeout_gives_up_at_it_and_the_records_stay_in_flight() -> None:
    async def scenario() -> None:
        fake, held = await _filled()
        error = await _raises_at(fake.flush(5), KafkaTimeoutError, 5.0)
        assert "5" in str(error) and not any(f.done() for f in held)
        fake.complete_next(2)
        await fake.flush(5)
        await fake.close()

    run_in_virtual_time(scenario)


def _pending_commit(fake: FakeProducer) -> Callable[[], Awaitable[asyncio.Task[None]]]:
    async def begin() -> asyncio.Task[None]:
        fake.begin_transaction()
        await fake.send("events", b"in the transaction")
        commit = asyncio.ensure_future(fake.commit_transaction())
        await asyncio.sleep(5)  # the commit waits for the held record
        assert not commit.done()
        return commit

    return begin


@pytest.mark.parametrize(
    ("timeout", "bound", "committer_sees"),
    [
        (30.0, 30.0, ProducerClosedError),  # close() stops the commit at t=35, before its own bound
        (None, 60.0, KafkaTimeoutError),  # the commit's own max.block.ms (from t=0) ends first, at t=60
    ],
)
def test_close_ends_a_pending_commit_at_its_bound(
    timeout: float | None, bound: float, committer_sees: type[BaseException]
) -> None:
    """``close(timeout)`` gives a pending commit what is left of ``timeout``; without one, ``max.block.ms``."""

    async def scenario() -> None:
        fake = FakeProducer(autocomplete=False, transactional_id="orders-tx", max_block_ms=60_000)
        await fake.start()
        commit = await _pending_commit(fake)()
        started = _now()
        await fake.close(timeout)
        assert _now() - started == pytest.approx(bound)
        # The committer is told why (never a CancelledError it did not ask for).
        with pytest.raises(committer_sees, match="commit_transaction"):
            await commit

    run_in_virtual_time(scenario)


def test_a_commit_waits_max_block_ms_then_a_second_call_waits_for_the_same_outcome() -> None:
    async def scenario() -> None:
        fake = FakeProducer(autocomplete=False, transactional_id="orders-tx", max_block_ms=60_000)
        await fake.start()
        fake.begin_transaction()
        await fake.send("events", b"in the transaction")
        await _raises_at(fake.commit_transaction(), KafkaTimeoutError, 60.0)
        again = asyncio.ensure_future(fake.commit_transaction())
        await asyncio.sleep(10)
        fake.complete_next(1)
        await again
        assert [r.value for r in fake.history("events")] == [b"in the transaction"]
        await fake.close()

    run_in_virtual_time(scenario)


def test_a_virtual_time_loop_is_an_ordinary_selector_loop() -> None:
    loop = VirtualTimeLoop()
    try:
        assert isinstance(loop, asyncio.SelectorEventLoop) and loop.time() == 0.0
        loop.advance(-5)  # never back
        assert loop.time() == 0.0
    finally:
        loop.close()
