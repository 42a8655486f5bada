"""Lines of a file descriptor, read in a thread so the event loop never blocks on input.

Why a thread and ``os.read``: a blocking read in the loop would stall the
producer's network I/O while the user types (or a pipe is slow); ``os.read``
returns whatever is available (a typed line at once, up to 64 KiB of a pipe),
so an interactive line is sent immediately and a big pipe is read in large
chunks. At most :data:`_AHEAD` chunks wait in memory: the reader thread holds
back until the consumer has taken one, so input is streamed, never slurped.
The thread is a daemon: an interrupted run does not wait for it.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncIterator

__all__ = ["read_lines"]

_CHUNK = 1 << 16
_AHEAD = 4


def _reader(fd: int, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes | OSError], room: threading.Semaphore) -> None:
    """Thread body: push chunks, then ``b""`` at end of input (or the OSError that ended it)."""
    while True:
        room.acquire()
        try:
            chunk = os.read(fd, _CHUNK)
        except OSError as exc:
            loop.call_soon_threadsafe(queue.put_nowait, exc)
            return
        loop.call_soon_threadsafe(queue.put_nowait, chunk)
        if not chunk:
            return


async def read_lines(fd: int) -> AsyncIterator[list[bytes]]:
    """Yield lists of complete lines (without ``\\n`` or ``\\r\\n``); a last unterminated line counts."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes | OSError] = asyncio.Queue()
    room = threading.Semaphore(_AHEAD)
    threading.Thread(target=_reader, args=(fd, loop, queue, room), name="aioproducer-stdin", daemon=True).start()
    partial = b""
    while True:
        chunk = await queue.get()
        if isinstance(chunk, OSError):
            raise chunk
        if not chunk:
            break
        lines = (partial + chunk).split(b"\n")
        partial = lines.pop()
        yield [line[:-1] if line.endswith(b"\r") else line for line in lines]
        room.release()
    if partial:
        yield [partial[:-1] if partial.endswith(b"\r") else partial]
