"""What the cluster command lines share: topic specs and waiting to be told to stop."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

__all__ = ["topic_spec", "wait_for_stop"]


class _Terminate(Exception):
    """Raised in the main thread by the SIGTERM handler, to unwind to the cleanup."""


def topic_spec(spec: str) -> tuple[str, int]:
    """Parse ``NAME:PARTITIONS`` (``NAME`` alone means one partition)."""
    name, sep, count = spec.rpartition(":")
    if not sep:
        return spec, 1
    try:
        partitions = int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME:PARTITIONS, got {spec!r}") from None
    if not name or partitions < 1:
        raise argparse.ArgumentTypeError(f"expected NAME:PARTITIONS with PARTITIONS >= 1, got {spec!r}")
    return name, partitions


def _raise_terminate(signum: int, frame: FrameType | None) -> None:
    raise _Terminate()


def _wait_for_stdin_eof(wake_fd: int) -> None:
    """Read and discard stdin until EOF, then wake the main thread by writing ``_STDIN_EOF`` to ``wake_fd``."""
    try:
        fd = sys.stdin.fileno()
        while os.read(fd, 65536):
            pass
    except (OSError, ValueError):
        pass  # a broken or closed stdin means the same thing as EOF here
    os.write(wake_fd, _STDIN_EOF)


#: What the stdin thread writes to the wake-up pipe; a signal's wake-up byte is its number (2 or 15).
_STDIN_EOF = b"\xff"


def wait_for_stop(until_stdin_eof: bool, ready_lines: Sequence[str]) -> None:
    """Print ``ready_lines``, then block until SIGINT or SIGTERM, or (``until_stdin_eof``) until stdin closes.

    The lines are printed only once SIGTERM is handled: a parent that reads the
    first line and terminates the process at once must get a clean exit.

    The main thread blocks reading a pipe that is also the signals' wake-up fd
    (``signal.set_wakeup_fd``), not on a lock: the kernel may hand SIGTERM to any
    thread that does not block it, and librdkafka's mock cluster thread does not.
    A signal taken by that thread runs CPython's C handler there, which only marks
    the signal for the main thread; a main thread asleep on a lock was never woken,
    and the process hung (3 to 7 runs in 24-40 at a load of 2-4, in a loop of
    start-then-SIGTERM). The handler also writes the signal's number to the wake-up
    fd, so the read returns whichever thread took it, and the Python handler runs.
    """
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    previous = signal.signal(signal.SIGTERM, _raise_terminate)
    try:
        for line in ready_lines:
            print(line, flush=True)
        if until_stdin_eof:
            threading.Thread(target=_wait_for_stdin_eof, args=(write_fd,), name="stdin-eof", daemon=True).start()
        # A signal's byte wakes the read; its Python handler then raises at the loop's next step.
        while os.read(read_fd, 1) != _STDIN_EOF:
            pass
    except (KeyboardInterrupt, _Terminate):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.set_wakeup_fd(previous_wakeup)
        os.close(read_fd)
        # write_fd is left open for the process's exit to close: the stdin thread, a daemon, may still
        # write to it, and a closed fd's number could by then name another file.
