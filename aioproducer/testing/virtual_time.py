"""An event loop whose clock jumps: ``max.block.ms``, ``flush(timeout)`` and ``close(timeout)`` in no real time.

The producer reads one clock, its event loop's (``aioproducer/clock.py``: ``loop_ms``), and
every wait it makes is an asyncio timer on that clock. So a loop whose ``time()`` is virtual,
and which jumps to its next timer whenever nothing else can run, takes a producer through a
60-second ``max.block.ms`` wait, or a ``close(timeout=30)`` that has to give up, in
milliseconds, with every deadline reached exactly: no ``sleep`` in the test, no timing in its
assertions::

    from aioproducer.testing import FakeProducer
    from aioproducer.testing.virtual_time import run_in_virtual_time

    async def scenario() -> None:
        async with FakeProducer(autocomplete=False, max_block_ms=60_000, buffer_memory=32_768,
                                batch_size=16_384) as fake:
            ...

    run_in_virtual_time(scenario)

It is trio's ``MockClock(autojump_threshold=0)`` for asyncio: when the loop would block, the
clock moves to the earliest timer instead. What it is for: code whose waits are timers (the
``FakeProducer``, a service's own retry and deadline logic). What it is not for: real sockets
or threads, whose readiness comes in real time while the virtual clock runs ahead (a real
broker's answer would arrive "after" every timeout). With nothing scheduled at all, the loop
blocks on its selector as any loop does, so a thread's ``call_soon_threadsafe`` still wakes it.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

__all__ = ["VirtualTimeLoop", "run_in_virtual_time"]

_T = TypeVar("_T")


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose ``time()`` starts at 0 and moves only when the loop would wait.

    The clock's one writer is the loop's selector (``_JumpingSelector.select``): when no
    callback is ready and no file descriptor is, it moves the clock by the timeout the loop
    asked to wait, which asyncio computes as the time to its earliest timer.
    """

    def __init__(self) -> None:
        #: Seconds, virtual. Writer: _JumpingSelector, through advance().
        self._virtual_now = 0.0
        super().__init__(_JumpingSelector(self.advance))

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        """Move the clock forward (never back): what the selector does instead of blocking."""
        if seconds > 0:
            self._virtual_now += seconds


class _JumpingSelector(selectors.BaseSelector):
    """The platform's selector, except that a wait with a timeout returns at once and moves the clock."""

    def __init__(self, advance: Callable[[float], None]) -> None:
        self._selector = selectors.DefaultSelector()
        self._advance = advance

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._selector.select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:  # no timer at all: only I/O (a thread's wake-up) can move the loop on
            return self._selector.select(None)
        self._advance(timeout)
        return []

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._selector.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._selector.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._selector.modify(fileobj, events, data)

    def get_map(self) -> Mapping[Any, selectors.SelectorKey]:
        return self._selector.get_map()

    def close(self) -> None:
        self._selector.close()


def run_in_virtual_time(main: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run ``main()`` to its end on a fresh :class:`VirtualTimeLoop` (as ``asyncio.run``) and return its result."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main())
