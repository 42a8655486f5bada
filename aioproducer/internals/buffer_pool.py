"""BufferPool: the ``buffer.memory`` budget that makes ``send()`` apply backpressure.

Theory of operation
-------------------
The Java producer's ``BufferPool`` hands out ``ByteBuffer`` objects and keeps a
free list of ``batch.size`` buffers so that the common allocation is a pop.
Here a batch's bytes live in its native builder's section, and the free list is
the native side's (``native/src/spare.rs``: a done batch's section kept for the
next, up to 256 KB a thread, outside this budget); what this pool keeps is the *budget*:
the total bytes reserved by open and in-flight batches never exceeds
``buffer.memory``. This pool therefore deals in reservations (integers), with
the Java pool's invariants kept:

* ``available_memory`` = ``total`` minus everything reserved and not yet returned,
  and never below 0: what Java's ``buffer-available-bytes`` metric reports, the
  memory no batch holds. A reservation of ``batch.size`` bytes is the pooled,
  standard size; a record larger than ``batch.size`` reserves exactly what it needs.
* Unlike Java, the budget also covers the Python objects a batch holds per
  record (futures, callbacks: as heavy as the bytes for small records). They are
  charged when a batch stops growing (``charge``), which may overdraw the budget:
  what is charged past it is owed (the overdraft), paid back first by the next
  returns, and every allocation waits until it is. So ``buffer.memory`` bounds
  what the producer holds, up to the objects of one batch per partition, and no
  figure goes negative (issue #25 saw ``-46747`` while 64 sends waited).
* Waiters are served strictly first come, first served: an allocation that
  cannot be satisfied queues behind earlier waiters even if it is small, so a
  large record is never starved by a stream of small ones.
* A waiter that times out (``max.block.ms``) or is cancelled leaves the queue
  and takes nothing with it; memory it was about to receive goes to the next
  waiter. The line has one timer (``_arm``), not one a waiter.

Only the event loop's thread touches the pool: no locks are needed, the
waiters are futures.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque

from aioproducer._native import MemoryBudget
from aioproducer.clock import Clock, monotonic_ms
from aioproducer.errors import KafkaTimeoutError, ProducerClosedError, RecordTooLargeError
from aioproducer.internals.metrics import ProducerMetrics
from aioproducer.lifecycle import Lifecycle, LifecycleView, State

__all__ = ["BufferPool"]


class _Waiter:
    __slots__ = ("size", "future", "deadline", "max_time_to_block_ms")

    def __init__(self, size: int, future: asyncio.Future[None], deadline: float, max_time_to_block_ms: float) -> None:
        self.size = size
        self.future = future
        #: When ``max.block.ms`` runs out for it, on the event loop's clock (``loop.time()``, seconds).
        self.deadline = deadline
        self.max_time_to_block_ms = max_time_to_block_ms

    def expire(self) -> None:
        """``max.block.ms`` ran out: its ``allocate()`` raises, then leaves the line (``_abandon``)."""
        self.future.set_exception(
            KafkaTimeoutError(
                f"failed to allocate {self.size} bytes of buffer.memory within "
                f"max.block.ms={int(self.max_time_to_block_ms)} ms"
            )
        )


class BufferPool:
    """A FIFO-fair budget of ``total`` bytes, reserved per batch."""

    def __init__(
        self,
        total: int,
        pool_size: int,
        lifecycle: LifecycleView | None = None,
        metrics: ProducerMetrics | None = None,
        clock: Clock = monotonic_ms,
    ) -> None:
        # pool_size is batch.size, and batch.size=0 (no batching) is valid: every
        # reservation is then exactly the record's size.
        if total <= 0 or pool_size < 0:
            raise ValueError("buffer.memory must be positive and batch.size non-negative")
        self.total = total
        self.pool_size = pool_size
        #: The figures, native (``native/src/budget.rs``): free bytes, the overdraft (charged past the
        #: budget, see ``charge``: owed, repaid before anything is free), whether anyone waits.
        #: Invariants: 0 <= available <= total, overdraft > 0 only while available == 0; bytes held
        #: = total - available + overdraft. Written by this pool's methods and, in their place, by
        #: the keyed lane's batch opening (``RecordQueues.open_keyed``: a charge, then a
        #: ``try_allocate``); read by anyone. Only the event loop's thread touches it.
        self.budget: MemoryBudget = MemoryBudget(total)
        #: The line; ``budget.waiting`` says whether it is empty (``_serve_waiters`` keeps it so).
        self._waiters: deque[_Waiter] = deque()
        #: The producer's lifecycle, read only (see ``lifecycle.py``): no memory is handed out once it is
        #: closing. A standalone pool (tests) reads one of its own that stays RUNNING.
        self.lifecycle: LifecycleView = lifecycle if lifecycle is not None else Lifecycle(State.RUNNING)
        #: The line's one timer (``_expire_due``, a ``loop.call_at``; ``when()`` is its time): never
        #: later than the earliest deadline of a waiter in line, and left armed when the line empties
        #: (it then fires once for nothing). Written by ``_arm`` and ``_expire_due``; ``close`` cancels it.
        self._timer: asyncio.TimerHandle | None = None
        #: The loop the timer is armed on: a waiter on another (a pool outliving its loop, in
        #: tests) arms one on its own, as a timer of a closed loop never fires.
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        #: Where a wait for memory is recorded (``bufferpool-wait-time-total``, ``-ratio``); only waits are.
        self.metrics = metrics
        #: The engine's clock (ms): a wait for memory is measured on it, as every window of the metrics is.
        self._clock = clock

    @property
    def available_memory(self) -> int:
        """Bytes of ``buffer.memory`` no batch holds (Java's ``buffer-available-bytes``): 0 to ``total``.

        A waiter for more than this waits; one for less may still wait behind an earlier, larger one.
        """
        return self.budget.available

    @property
    def queued(self) -> int:
        """How many allocations are waiting for memory."""
        return len(self._waiters)

    def exhausted(self) -> bool:
        """True when someone waits for memory: the sender should drain now, not linger."""
        return bool(self._waiters)

    def try_allocate(self, size: int) -> bool:
        """Reserve ``size`` bytes without waiting; False if it would have to wait."""
        return self.budget.try_allocate(size)

    def charge(self, size: int) -> None:
        """Reserve ``size`` bytes now, even past the budget (then the next allocations wait).

        For memory already in use that the budget must still count: the Python objects of
        a batch that just stopped growing. Overdrawing once per batch keeps ``send()`` from
        blocking on memory it already holds, while every allocation after it waits until the
        overdraft is paid back: no batch opens meanwhile, so the bound is ``buffer.memory`` plus
        the objects of the batches open then (one per partition). ``available_memory`` stays 0
        until the overdraft is repaid: it reports free memory, never a debt.
        """
        self.budget.charge(size)

    async def allocate(self, size: int, max_time_to_block_ms: float) -> None:
        """Reserve ``size`` bytes, waiting in line at most ``max_time_to_block_ms``.

        Raises ``RecordTooLargeError`` at once when ``size`` exceeds the whole
        pool (waiting could never help) and ``KafkaTimeoutError`` when the time
        runs out.
        """
        if size > self.total:
            raise RecordTooLargeError(
                f"attempt to allocate {size} bytes, but buffer.memory is only {self.total} bytes"
            )
        if self.lifecycle.closing:
            raise ProducerClosedError("the producer is closed: no buffer memory is handed out")
        if self.try_allocate(size):
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        deadline = loop.time() + max(0.0, max_time_to_block_ms) / 1000.0
        waiter = _Waiter(size, future, deadline, max_time_to_block_ms)
        self._waiters.append(waiter)
        self.budget.waiting = True
        timer = self._timer
        if timer is None or deadline < timer.when() or loop is not self._timer_loop:
            self._arm(loop, deadline)
        started_ms = self._clock()
        try:
            await future
        except BaseException:
            self._abandon(waiter)
            raise
        finally:
            metrics = self.metrics
            if metrics is not None:
                now_ms = self._clock()
                metrics.record_buffer_wait(round((now_ms - started_ms) * 1e6), now_ms)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        """The line's timer at ``when`` (loop time), in place of the one armed later.

        Why one timer for the line, not one a waiter: a waiter's own ``call_later``, cancelled
        when memory came, was most of a wait's cost (asyncio's ``TimerHandle`` and its heap,
        where a cancelled timer stays until its time or a clean-up; at 1 KB records one send in
        200 waits, at 10 KB one in 13). Waiters wait ``max.block.ms`` each, so a new one's
        deadline is the latest and the armed timer serves it: a timer is armed about once a
        ``max.block.ms``.
        """
        timer = self._timer
        if timer is not None:
            timer.cancel()
        self._timer = loop.call_at(when, self._expire_due, loop)
        self._timer_loop = loop

    def _expire_due(self, loop: asyncio.AbstractEventLoop) -> None:
        """The line's timer: every waiter whose deadline has come fails; the timer is armed for the earliest left.

        Due is what asyncio called the timer for (its ``when()``, or the loop's time if later):
        each waiter expires when its own ``call_later`` would have.
        """
        timer = self._timer
        due = loop.time() if timer is None else max(loop.time(), timer.when())
        self._timer = None
        earliest = math.inf
        for waiter in self._waiters:
            if waiter.future.done():
                continue
            if waiter.deadline <= due:
                waiter.expire()
            elif waiter.deadline < earliest:
                earliest = waiter.deadline
        if earliest < math.inf:
            self._arm(loop, earliest)

    def _abandon(self, waiter: _Waiter) -> None:
        """A waiter gave up (timeout, cancellation, close): it must leave owning nothing."""
        future = waiter.future
        if future.done() and not future.cancelled() and future.exception() is None:
            # Memory was granted in the same loop iteration the waiter gave up: give it back.
            self.deallocate(waiter.size)
            return
        if not future.done():
            future.cancel()
        self._remove_waiter(waiter)

    def _remove_waiter(self, waiter: _Waiter) -> None:
        try:
            self._waiters.remove(waiter)
        except ValueError:
            pass
        self._serve_waiters()

    def deallocate(self, size: int) -> None:
        """Return ``size`` bytes (an overdraft is repaid first) and wake the waiters at the head of the line that now fit.

        A return of more than was handed out raises ``AssertionError``: a bookkeeping bug must not go unnoticed.
        """
        self.budget.deallocate(size)
        if self._waiters:
            self._serve_waiters()

    def _serve_waiters(self) -> None:
        """Hand memory to the head of the line while it fits; ``budget.waiting`` follows the line."""
        waiters = self._waiters
        budget = self.budget
        while waiters:
            head = waiters[0]
            if head.future.done():  # timed out or cancelled, not yet removed
                waiters.popleft()
                continue
            if head.size > budget.available:
                break
            waiters.popleft()
            budget.take(head.size)
            head.future.set_result(None)
        budget.waiting = bool(waiters)  # the lane must not take memory past a waiter

    def close(self) -> None:
        """Fail every waiter: the producer is closing and no memory will be handed out.

        The engine moved the lifecycle to CLOSING first, so no allocation queues after this.
        """
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.future.done():
                waiter.future.set_exception(ProducerClosedError("the producer closed while waiting for buffer memory"))
        self.budget.waiting = False
        timer = self._timer
        if timer is not None:
            timer.cancel()
            self._timer = None

