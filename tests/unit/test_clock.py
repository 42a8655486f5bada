"""The producer's clock: the native reading of asyncio's clock agrees with the loop's own."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from aioproducer import _native
from aioproducer.clock import loop_clock

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the native clock is built on Linux only")


@linux_only
def test_native_monotonic_ms_reads_time_monotonic_in_milliseconds() -> None:
    for _ in range(1000):
        before = time.monotonic() * 1000.0
        now = _native.monotonic_ms()
        after = time.monotonic() * 1000.0
        assert before <= now <= after


@linux_only
def test_an_asyncio_loops_clock_is_read_natively() -> None:
    async def clock_of_running_loop() -> object:
        return loop_clock(asyncio.get_running_loop())

    assert asyncio.run(clock_of_running_loop()) is _native.monotonic_ms


class _ShiftedLoop(asyncio.SelectorEventLoop):
    """A loop with a clock of its own, as uvloop and a virtual clock have."""

    def time(self) -> float:
        return 1000.0 + super().time()


def test_a_loop_with_its_own_clock_is_read_through_it() -> None:
    loop = _ShiftedLoop()
    try:
        clock = loop_clock(loop)
        before = loop.time() * 1000.0
        now = clock()
        assert before <= now <= loop.time() * 1000.0
        assert now >= 1_000_000.0 + time.monotonic() * 1000.0 - 1000.0  # the loop's clock, not time.monotonic's
    finally:
        loop.close()
