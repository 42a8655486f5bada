"""BufferPool: budget, FIFO fairness, timeouts and cancellation that leak nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aioproducer.errors import KafkaTimeoutError, ProducerClosedError, RecordTooLargeError
from aioproducer.internals.buffer_pool import BufferPool
from aioproducer.lifecycle import Lifecycle, State


async def test_try_allocate_within_budget_and_deallocate_restores() -> None:
    pool = BufferPool(1000, 100)
    assert pool.try_allocate(600)
    assert pool.available_memory == 400
    assert not pool.try_allocate(500)
    pool.deallocate(600)
    assert pool.available_memory == 1000


async def test_larger_than_total_fails_at_once() -> None:
    pool = BufferPool(1000, 100)
    with pytest.raises(RecordTooLargeError, match="buffer.memory"):
        await pool.allocate(1001, 10_000)
    assert pool.available_memory == 1000


async def test_waiters_are_served_first_come_first_served() -> None:
    pool = BufferPool(1000, 100)
    assert pool.try_allocate(1000)
    order: list[str] = []

    async def take(name: str, size: int) -> None:
        await pool.allocate(size, 10_000)
        order.append(name)

    big = asyncio.create_task(take("big", 800))
    await asyncio.sleep(0)  # let it queue
    small = asyncio.create_task(take("small", 100))
    await asyncio.sleep(0)
    assert pool.queued == 2
    # A small allocation must not jump ahead of the big one waiting in front of it.
    assert not pool.try_allocate(50)
    pool.deallocate(500)
    await asyncio.sleep(0)
    assert order == []  # 500 free: the head (800) does not fit, the small one waits behind it
    pool.deallocate(500)
    await asyncio.gather(big, small)
    assert order == ["big", "small"]
    assert pool.available_memory == 100


async def test_timed_out_waiter_leaves_without_memory() -> None:
    pool = BufferPool(1000, 100)
    assert pool.try_allocate(1000)
    with pytest.raises(KafkaTimeoutError, match="max.block.ms=20"):
        await pool.allocate(500, 20)
    assert pool.queued == 0
    pool.deallocate(1000)
    assert pool.available_memory == 1000


async def test_cancelled_waiter_does_not_block_the_line() -> None:
    pool = BufferPool(1000, 100)
    assert pool.try_allocate(1000)
    first = asyncio.create_task(pool.allocate(900, 10_000))
    await asyncio.sleep(0)
    second = asyncio.create_task(pool.allocate(100, 10_000))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    pool.deallocate(100)
    await second
    assert pool.available_memory == 0
    assert pool.queued == 0


async def test_memory_granted_then_cancelled_is_returned() -> None:
    pool = BufferPool(1000, 100)
    assert pool.try_allocate(1000)
    waiter = asyncio.create_task(pool.allocate(400, 10_000))
    await asyncio.sleep(0)
    pool.deallocate(400)  # grants the waiter in this iteration...
    waiter.cancel()  # ...but it is cancelled before it resumes
    await asyncio.gather(waiter, return_exceptions=True)
    assert waiter.cancelled()
    assert pool.available_memory == 400


async def test_close_fails_waiters_with_a_clear_error() -> None:
    lifecycle = Lifecycle(State.RUNNING)  # the test plays the engine, which moves it before closing the pool
    pool = BufferPool(1000, 100, lifecycle)
    assert pool.try_allocate(1000)
    waiter = asyncio.create_task(pool.allocate(10, 10_000))
    await asyncio.sleep(0)
    lifecycle.close()
    pool.close()
    with pytest.raises(ProducerClosedError, match="closed"):
        await waiter
    with pytest.raises(ProducerClosedError):
        await pool.allocate(10, 10_000)


async def test_charge_overdraws_and_later_allocations_wait_for_the_payback() -> None:
    pool = BufferPool(1000, 100)
    assert pool.try_allocate(900)
    pool.charge(300)  # memory already in use, counted now: the pool is 200 bytes overdrawn
    assert pool.available_memory == 0  # never negative: nothing is free (Java's buffer-available-bytes)
    assert not pool.try_allocate(1)
    waiter = asyncio.ensure_future(pool.allocate(100, 5_000))
    await asyncio.sleep(0)
    assert not waiter.done() and pool.exhausted()
    pool.deallocate(250)  # pays back the 200 overdrawn first: 50 free, still short of the 100 asked for
    await asyncio.sleep(0)
    assert not waiter.done() and pool.available_memory == 50
    pool.deallocate(950)
    await waiter
    assert pool.available_memory == 1000 - 100


#: One step on a pool of 1000 bytes: open a reservation, charge a held one more (a batch that
#: stopped growing), or return a held one (a batch that completed); ``pick`` chooses which.
_STEPS = st.lists(
    st.tuples(st.sampled_from(["allocate", "charge", "deallocate"]), st.integers(0, 1200), st.integers(0, 10**6)),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(_STEPS)
def test_available_memory_is_what_is_not_held_and_never_negative(steps: list[tuple[str, int, int]]) -> None:
    """``available_memory`` = max(0, total - bytes held), whatever the order of reservations, charges, returns.

    Java's ``buffer-available-bytes`` is the memory no batch holds: never negative. The
    charge of a batch's objects may overdraw the budget (see ``BufferPool.charge``); the
    overdraft is then owed, not shown as negative memory (issue #25 saw -46,747).
    """
    total = 1000
    pool = BufferPool(total, 100)
    held: list[int] = []  # what each open reservation holds now
    for op, size, pick in steps:
        if op == "allocate":
            if pool.try_allocate(size):
                held.append(size)
            else:
                assert size > total - sum(held)
        elif op == "charge" and held:
            held[pick % len(held)] += size
            pool.charge(size)
        elif op == "deallocate" and held:
            pool.deallocate(held.pop(pick % len(held)))
        assert pool.available_memory == max(0, total - sum(held)), (held, pool.available_memory)
    for size in held:
        pool.deallocate(size)
    assert pool.available_memory == total


async def test_a_wait_for_memory_is_measured_on_the_engines_clock() -> None:
    """The pool reads the clock it is given (the engine's), as every metrics window does: no second clock."""
    from aioproducer.internals.metrics import ProducerMetrics

    now = [1_000.0]
    metrics = ProducerMetrics()
    pool = BufferPool(1000, 100, metrics=metrics, clock=lambda: now[0])
    assert pool.try_allocate(1000)
    waiter = asyncio.ensure_future(pool.allocate(300, 60_000))
    await asyncio.sleep(0)  # it queued
    assert pool.queued == 1
    now[0] += 250.0  # 250 ms pass on the engine's clock, none on the wall's
    pool.deallocate(300)
    await waiter
    assert metrics.bufferpool_wait_time_total_ns == 250_000_000


async def test_each_waiter_expires_at_its_own_deadline_and_frees_the_line_behind_it() -> None:
    """Each waiter has its own deadline: the one behind the head gives up first and the line goes on."""
    pool = BufferPool(1000, 100)
    assert pool.try_allocate(900)
    late = asyncio.create_task(pool.allocate(800, 5_000))  # the head, waiting long
    early = asyncio.create_task(pool.allocate(900, 30))  # behind it, giving up first
    await asyncio.sleep(0)
    small = asyncio.create_task(pool.allocate(100, 5_000))  # fits now, but waits in line
    await asyncio.sleep(0)
    assert pool.queued == 3
    with pytest.raises(KafkaTimeoutError, match="max.block.ms=30 ms"):
        await early
    assert not late.done() and not small.done()
    pool.deallocate(700)  # the head now fits; the small one behind it follows only once there is room
    await late
    assert not small.done()
    pool.deallocate(100)
    await small
    assert pool.queued == 0 and pool.available_memory == 0


async def test_a_head_that_gives_up_lets_the_smaller_waiters_behind_it_in() -> None:
    pool = BufferPool(1000, 100)
    assert pool.try_allocate(700)
    big = asyncio.create_task(pool.allocate(900, 20))
    await asyncio.sleep(0)
    small = asyncio.create_task(pool.allocate(300, 5_000))
    await asyncio.sleep(0)
    assert not small.done()  # 300 free, but it is behind the head
    with pytest.raises(KafkaTimeoutError):
        await big
    await small
    assert pool.available_memory == 0 and pool.queued == 0


def test_returning_more_than_was_handed_out_is_a_bookkeeping_error_that_changes_nothing() -> None:
    pool = BufferPool(1000, 100)
    assert pool.try_allocate(300)
    with pytest.raises(AssertionError, match="more memory than it handed out"):
        pool.deallocate(301)
    assert pool.available_memory == 700
    pool.deallocate(300)
    assert pool.available_memory == 1000
    with pytest.raises(ValueError, match="buffer.memory must be positive"):
        BufferPool(0, 100)


def test_the_line_keeps_one_timer_and_each_waiter_still_expires_at_its_own_deadline() -> None:
    """Waits served one after another arm the line's timer once, not once each; a waiter whose
    deadline is past the armed time still fails exactly at its own (the timer is armed again)."""
    from aioproducer.testing.virtual_time import run_in_virtual_time

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        pool = BufferPool(1000, 100)
        armed: list[float] = []
        call_at = loop.call_at

        def spy(when: float, callback: Any, *args: Any, context: Any = None) -> asyncio.TimerHandle:
            if callback == pool._expire_due:
                armed.append(when)
            return call_at(when, callback, *args, context=context)

        setattr(loop, "call_at", spy)
        assert pool.try_allocate(1000)
        for _ in range(50):
            waiter = asyncio.ensure_future(pool.allocate(100, 60_000))
            await asyncio.sleep(0)
            assert pool.queued == 1
            pool.deallocate(100)
            await waiter
        assert armed == [60.0]
        await asyncio.sleep(10)  # virtual: the next waiter's deadline (70 s) is past the armed timer's
        with pytest.raises(KafkaTimeoutError, match="max.block.ms=60000 ms"):
            await pool.allocate(100, 60_000)
        assert loop.time() == 70.0
        assert armed == [60.0, 70.0] and pool.queued == 0

    run_in_virtual_time(scenario)


def test_a_pool_whose_loop_ended_with_its_timer_armed_still_times_out_a_waiter_on_a_new_loop() -> None:
    """The line's timer belongs to a loop: a waiter on another loop arms one there (a closed loop's never fires)."""
    from aioproducer.testing.virtual_time import run_in_virtual_time

    pool = BufferPool(1000, 100)
    assert pool.try_allocate(1000)

    async def served_at_once() -> None:  # arms the line's timer at 0.01 s of this loop, left armed when it ends
        waiter = asyncio.ensure_future(pool.allocate(100, 10))
        await asyncio.sleep(0)
        pool.deallocate(100)
        await waiter

    async def times_out() -> float:
        with pytest.raises(KafkaTimeoutError, match="max.block.ms=30000 ms"):
            await asyncio.wait_for(pool.allocate(100, 30_000), 120)
        return asyncio.get_running_loop().time()

    run_in_virtual_time(served_at_once)
    assert run_in_virtual_time(times_out) == 30.0
