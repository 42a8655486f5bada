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


def _wait_for_stdin_eof(done: threading.Event) -> None:
    """Read and discard stdin until EOF, then ask the main thread to stop."""
    try:
        fd = sys.stdin.fileno()
        while os.read(fd, 65536):
            pass
    except (OSError, ValueError):
        pass  # a broken or closed stdin means the same thing as EOF here
    done.set()


def wait_for_stop(until_stdin_eof: bool, ready_lines: Sequence[str]) -> None:
    """Print ``ready_lines``, then block until SIGINT or SIGTERM, or (``until_stdin_eof``) until stdin closes.

    The lines are printed only once SIGTERM is handled: a parent that reads the
    first line and terminates the process at once must get a clean exit.
    """
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, _raise_terminate)
    try:
        for line in ready_lines:
            print(line, flush=True)
        if until_stdin_eof:
            threading.Thread(target=_wait_for_stdin_eof, args=(stop,), name="stdin-eof", daemon=True).start()
        # Event.wait is interrupted by the exceptions the SIGINT/SIGTERM
        # handlers raise, so no polling is needed.
        stop.wait()
    except (KeyboardInterrupt, _Terminate):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
