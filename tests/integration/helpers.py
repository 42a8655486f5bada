"""Small helpers shared by the integration tests (import as ``from helpers import ...``)."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest


async def eventually(predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    """Yield to the loop until ``predicate()`` holds; fail the test after ``timeout`` s instead of hanging.

    For states reached through other tasks (a request in flight, a waiter queued), where there is
    no event to await from outside.
    """
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not met within {timeout} s")
        await asyncio.sleep(0.002)


def closed_port() -> int:
    """A localhost port nothing listens on (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def other_tasks() -> set[asyncio.Task[Any]]:
    """Tasks still running besides the current one: what a clean close must leave none of."""
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()}


#: Mock-cluster producers whose retries, timeouts and reconnects come within a test's patience.
FAST_RETRIES: dict[str, Any] = {
    "request_timeout_ms": 1000,
    "delivery_timeout_ms": 3000,
    "retry_backoff_ms": 20,
    "retry_backoff_max_ms": 100,
    "reconnect_backoff_ms": 10,
    "reconnect_backoff_max_ms": 100,
    "linger_ms": 2,
}
