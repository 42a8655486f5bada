"""The producer's one clock: monotonic time in milliseconds (no I/O, no state).

At the bottom of the package, beside ``stats.py``, so that every layer (``network/``
included) can take it as its default. Every part that reads the time takes a
``clock: Callable[[], float]`` in milliseconds, by default :func:`monotonic_ms`: a test
passes a fake one and reaches every deadline (linger, backoff, delivery timeout,
``max.block.ms`` of a coordinator round trip, a transaction call) without sleeping.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["Clock", "monotonic_ms"]

#: A clock: "now" in milliseconds, from any fixed origin (only differences mean anything).
Clock = Callable[[], float]


def monotonic_ms() -> float:
    """``time.monotonic()`` in milliseconds: never goes back, not the wall clock."""
    return time.monotonic() * 1000.0
