"""DeliveryFailureLog: records the producer accepted and did not deliver, said at WARNING, rate-limited.

Why. A record that fails or expires (``delivery.timeout.ms``) tells only its own
future or ``on_delivery``: a service that answered 202 and never looked at the
future lost it without a word (issue #25: 16,168 records expired, not one log
line). So every batch that completes with an error is counted here, and said on
the logger ``aioproducer.producer``, at WARNING.

How much. At most one line per topic and error class per ``interval_ms`` (10 s by
default): the first failure of a (topic, error class) is logged at once; the ones
after it within the interval are counted, and said in one line when the interval
is over (by a timer, or by the next failure of that kind, whichever comes first),
with the number of records, the partitions and the last error's message. An
outage that expires 100,000 records over six partitions writes one line per 10 s,
not one per record or per batch. ``flush()`` (the producer's ``close()``) says
what is still counted.

What is never logged: a record's key, value or headers (only topic, partition,
counts and the error's class and message), and records failed by an aborted
transaction (``TransactionAbortedError``: the application asked for that outcome).

Cost. Nothing on the success path: the producer calls :meth:`record` from its
batch-completion callback only for a batch that failed, once per batch.

Time. Interval decisions read the injected ``clock`` (milliseconds) only, so tests
drive them with a fake clock; the timer that says the counted failures when nobody
fails any more is merely a wake-up that asks the clock again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from aioproducer.clock import monotonic_ms
from aioproducer.errors import TransactionAbortedError
from aioproducer.logs import LogLike

__all__ = ["DEFAULT_INTERVAL_MS", "DeliveryFailureLog"]

log: logging.Logger = logging.getLogger("aioproducer.producer")

#: At most one line per (topic, error class) per this many milliseconds.
DEFAULT_INTERVAL_MS = 10_000.0
#: Partitions named in one line; more are counted ("and 12 more").
_MAX_PARTITIONS_SHOWN = 8


@dataclass(slots=True)
class _Pending:
    """Failures of one (topic, error class) counted since its last line."""

    logged_ms: float  # when its last line was written
    records: int = 0
    partitions: set[int] = field(default_factory=set)
    last_error: BaseException | None = None


class DeliveryFailureLog:
    """Counts failed records per (topic, error class) and logs them at WARNING, at most once per interval each."""

    def __init__(
        self,
        *,
        interval_ms: float = DEFAULT_INTERVAL_MS,
        clock: Callable[[], float] = monotonic_ms,
        logger: LogLike = log,
    ) -> None:
        if interval_ms <= 0:
            raise ValueError(f"interval_ms must be positive, got {interval_ms}")
        self.interval_ms = interval_ms
        self._clock = clock
        self._log = logger
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = float("inf")  # clock time the armed timer is for

    def record(self, topic: str, partition: int, count: int, error: BaseException) -> None:
        """``count`` records of ``topic``-``partition`` failed with ``error``: log now, or count for later."""
        if isinstance(error, TransactionAbortedError):
            return
        now = self._clock()
        key = (topic, type(error).__name__)
        entry = self._pending.get(key)
        if entry is None:
            self._write(topic, count, {partition}, error, since_ms=None)
            self._pending[key] = _Pending(now)
            return
        entry.records += count
        entry.partitions.add(partition)
        entry.last_error = error
        if now - entry.logged_ms >= self.interval_ms:
            self._say(key, entry, now)
        else:
            self._arm(entry.logged_ms + self.interval_ms - now)

    def flush(self) -> None:
        """Log every count not yet said, whatever the interval (the producer is closing), and stop the timer."""
        now = self._clock()
        for key, entry in list(self._pending.items()):
            if entry.records:
                self._say(key, entry, now)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self._timer_due = float("inf")

    def flush_due(self) -> None:
        """Log the counts whose interval is over; re-arm the timer for the others."""
        self._timer = None
        self._timer_due = float("inf")
        now = self._clock()
        wait = float("inf")
        for key, entry in list(self._pending.items()):
            due = entry.logged_ms + self.interval_ms
            if not entry.records:
                if now >= due:
                    del self._pending[key]  # quiet for a whole interval: its next failure is said at once
                continue
            if now >= due:
                self._say(key, entry, now)
            else:
                wait = min(wait, due - now)
        if wait != float("inf"):
            self._arm(wait)

    def _say(self, key: tuple[str, str], entry: _Pending, now: float) -> None:
        assert entry.last_error is not None
        self._write(key[0], entry.records, entry.partitions, entry.last_error, since_ms=now - entry.logged_ms)
        self._pending[key] = _Pending(now)

    def _write(self, topic: str, records: int, partitions: set[int], error: BaseException, since_ms: float | None) -> None:
        shown = sorted(partitions)
        names = ", ".join(str(p) for p in shown[:_MAX_PARTITIONS_SHOWN])
        if len(shown) > _MAX_PARTITIONS_SHOWN:
            names += f" and {len(shown) - _MAX_PARTITIONS_SHOWN} more"
        when = "" if since_ms is None else f" in the last {since_ms / 1000:.1f} s"
        self._log.warning(
            "%d record(s) for topic %r (partition%s %s) not delivered%s: %s: %s",
            records, topic, "" if len(shown) == 1 else "s", names, when, type(error).__name__, error,
        )

    def _arm(self, delay_ms: float) -> None:
        """A wake-up to say counted failures when no later failure does; one armed, for the earliest."""
        due = self._clock() + delay_ms
        if self._timer is not None:
            if self._timer_due <= due:
                return
            self._timer.cancel()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on a loop (a producer collected after its loop ended): flush() says them
            self._timer = None
            return
        self._timer_due = due
        self._timer = loop.call_later(max(delay_ms, 0.0) / 1000.0 + 0.001, self.flush_due)
