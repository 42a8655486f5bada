"""The producer's one clock: monotonic time in milliseconds (no I/O, no state).

At the bottom of the package, beside ``stats.py``, so that every layer (``network/``
included) can take it as its default. Every part that reads the time takes a
``clock: Callable[[], float]`` in milliseconds: a test passes a fake one and reaches every
deadline (linger, backoff, delivery timeout, ``max.block.ms`` of a coordinator round trip, a
transaction call) without sleeping.

The producer's engine reads :func:`loop_ms`, the running event loop's own clock, so that what
the parts compute ("60 s from now") and what asyncio waits on (``asyncio.timeout``,
``wait_for``, ``call_at``) are one clock, not two that agree only because both happen to read
``time.monotonic()``. That is what lets a loop with a virtual clock
(``aioproducer.testing.virtual_time``) run a ``max.block.ms`` wait or a bounded ``close()``
end to end in no real time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["Clock", "loop_ms", "monotonic_ms"]

#: A clock: "now" in milliseconds, from any fixed origin (only differences mean anything).
Clock = Callable[[], float]


def monotonic_ms() -> float:
    """``time.monotonic()`` in milliseconds: never goes back, not the wall clock."""
    return time.monotonic() * 1000.0


def loop_ms() -> float:
    """The running event loop's clock (``loop.time()``) in milliseconds; ``time.monotonic()`` outside one.

    asyncio's default loop reads ``time.monotonic()``, so in production this is
    :func:`monotonic_ms` read through the loop (about 0.1 µs a call; the engine reads it per
    batch and per wait, never per record). Outside a running loop (a producer built before its
    loop starts) it falls back to the monotonic clock, which is that loop's origin too.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return time.monotonic() * 1000.0
    return loop.time() * 1000.0
