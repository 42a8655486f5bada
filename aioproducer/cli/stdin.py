"""Lines (or records ended by another one-byte delimiter) of a file descriptor, read in a thread so the event loop never blocks on input.

Why a thread and ``os.read``: a blocking read in the loop would stall the
producer's network I/O while the user types (or a pipe is slow); ``os.read``
returns whatever is available (a typed line at once, up to 64 KiB of a pipe),
so an interactive line is sent immediately and a big pipe is read in large
chunks. At most :data:`_AHEAD` chunks wait in memory: the reader thread holds
back until the consumer has taken one, so input is streamed, never slurped.
The thread is a daemon: an interrupted run does not wait for it.

Lines are assembled by :class:`LineAssembler` in time linear in the input, however
long a line is: the pieces of an unfinished line are kept in a list and joined once,
when its newline comes (adding each chunk to a growing ``bytes`` copies the line
again per chunk: a 64 MB line took a minute). A line longer than ``max_line_bytes``
is not kept at all: it could never be sent (see :class:`OversizedLine`), so memory
stays bounded by that limit even for endless input without a newline.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import AsyncGenerator
from dataclasses import dataclass

__all__ = ["LineAssembler", "OversizedLine", "read_lines"]

_CHUNK = 1 << 16
_AHEAD = 4


@dataclass(frozen=True)
class OversizedLine:
    """A line longer than the limit, dropped as it was read: only its length is known."""

    length: int


#: One input line: its bytes (without ``\n`` or ``\r\n``), or the marker of a dropped one.
Line = bytes | OversizedLine


class LineAssembler:
    """Splits chunks of a byte stream into lines, each byte copied a bounded number of times.

    ``copied`` counts the bytes copied into lines (the chunk split and the joins), so a
    test can check that the work is linear in the input without timing anything.
    """

    def __init__(self, max_line_bytes: int | None = None, delimiter: bytes = b"\n") -> None:
        if len(delimiter) != 1:
            raise ValueError(f"delimiter must be one byte, got {delimiter!r}")
        self._limit = max_line_bytes
        self._delimiter = delimiter
        self._strip_cr = delimiter == b"\n"  # "\r\n" line ends count as "\n" ones
        self._pieces: list[bytes] = []
        self._pending = 0  # bytes of the unfinished line so far (kept in _pieces unless oversized)
        self._oversized = False
        self.copied = 0

    def feed(self, chunk: bytes) -> list[Line]:
        """The lines that ``chunk`` completes, in order; its unterminated rest waits for the next chunk."""
        parts = chunk.split(self._delimiter)
        self.copied += len(chunk)
        rest = parts.pop()
        lines: list[Line] = []
        if parts:
            lines.append(self._complete(parts[0]))
            lines.extend(self._check(part) for part in parts[1:])
        self._keep(rest)
        return lines

    def finish(self) -> list[Line]:
        """At end of input: the last line if it had no newline (an empty rest is no line)."""
        if not self._pending:
            return []
        return [self._complete(b"")]

    def _keep(self, rest: bytes) -> None:
        if not rest:
            return
        self._pending += len(rest)
        if self._oversized:
            return
        self._pieces.append(rest)
        if self._limit is not None and self._pending > self._limit + self._strip_cr:  # a "\r" still to strip
            self._oversized = True
            self._pieces.clear()

    def _complete(self, last: bytes) -> Line:
        """The unfinished line ended by ``last``: joined once (or its length, if oversized)."""
        if not self._pending:
            return self._check(last)
        length = self._pending + len(last)
        oversized = self._oversized
        pieces = self._pieces
        self._pieces, self._pending, self._oversized = [], 0, False
        if oversized:
            return OversizedLine(length - 1 if self._strip_cr and last.endswith(b"\r") else length)
        pieces.append(last)
        line = b"".join(pieces)
        self.copied += len(line)
        return self._check(line)

    def _check(self, line: bytes) -> Line:
        if self._strip_cr and line.endswith(b"\r"):
            line = line[:-1]
            self.copied += len(line)
        if self._limit is not None and len(line) > self._limit:
            return OversizedLine(len(line))
        return line


class _Handoff:
    """The reader thread's way into the loop, closed when the consumer stops.

    Why: the thread may be blocked in ``os.read`` when the run ends (Ctrl-C, an error); input
    arriving after that (or the end of it) must not be handed to a loop that is closed, which
    raises in the thread and prints its traceback after the command's summary. ``close`` and
    ``put`` hold one lock, so the loop is never called once the consumer has left.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[bytes | OSError]) -> None:
        self._loop, self._queue = loop, queue
        self._lock = threading.Lock()
        self.open = True
        self.room = threading.Semaphore(_AHEAD)

    def put(self, item: bytes | OSError) -> bool:
        """Hand ``item`` to the loop; False once the consumer has stopped (the thread then ends)."""
        with self._lock:
            if not self.open:
                return False
            self._loop.call_soon_threadsafe(self._queue.put_nowait, item)
            return True

    def close(self) -> None:
        with self._lock:
            self.open = False
        self.room.release()  # a thread waiting for room wakes up and sees it is closed


def _reader(fd: int, handoff: _Handoff) -> None:
    """Thread body: push chunks, then ``b""`` at end of input (or the OSError that ended it)."""
    while True:
        handoff.room.acquire()
        if not handoff.open:
            return
        try:
            chunk: bytes | OSError = os.read(fd, _CHUNK)
        except OSError as exc:
            chunk = exc
        if not handoff.put(chunk) or not chunk or isinstance(chunk, OSError):
            return


async def read_lines(fd: int, max_line_bytes: int | None = None, delimiter: bytes = b"\n") -> AsyncGenerator[list[Line], None]:
    """Yield lists of complete lines (see :class:`LineAssembler`); a last unterminated line counts."""
    queue: asyncio.Queue[bytes | OSError] = asyncio.Queue()
    handoff = _Handoff(asyncio.get_running_loop(), queue)
    assembler = LineAssembler(max_line_bytes, delimiter)
    threading.Thread(target=_reader, args=(fd, handoff), name="aioproducer-stdin", daemon=True).start()
    try:
        while True:
            chunk = await queue.get()
            if isinstance(chunk, OSError):
                raise chunk
            if not chunk:
                break
            lines = assembler.feed(chunk)
            if lines:
                yield lines
            handoff.room.release()
    finally:
        handoff.close()
    last = assembler.finish()
    if last:
        yield last
