"""Progress of a long run on stderr: one updating line on a terminal, plain lines otherwise.

Why two forms: on a terminal a line rewritten in place (``\\r`` and the ANSI
erase-line code) shows progress without scrolling the summary away; in a log
file or a pipe, escape codes are noise, so a plain line is written every
:data:`PLAIN_INTERVAL_S` seconds instead (and nothing for short runs).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TextIO

__all__ = ["PLAIN_INTERVAL_S", "TTY_INTERVAL_S", "progress"]

TTY_INTERVAL_S = 0.25
PLAIN_INTERVAL_S = 5.0
_ERASE_LINE = "\r\x1b[K"


async def _show(stream: TextIO, describe: Callable[[], str], tty: bool) -> None:
    interval = TTY_INTERVAL_S if tty else PLAIN_INTERVAL_S
    while True:
        await asyncio.sleep(interval)  # a display refresh period, not a wait for a condition
        if tty:
            stream.write(f"{_ERASE_LINE}{describe()}")
        else:
            stream.write(f"{describe()}\n")
        stream.flush()


@contextlib.asynccontextmanager
async def progress(stream: TextIO, describe: Callable[[], str], enabled: bool = True) -> AsyncIterator[None]:
    """Show ``describe()`` periodically while the block runs; on a terminal, erase it at the end."""
    if not enabled:
        yield
        return
    tty = stream.isatty()
    task = asyncio.create_task(_show(stream, describe, tty))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        if tty:
            stream.write(_ERASE_LINE)
            stream.flush()
