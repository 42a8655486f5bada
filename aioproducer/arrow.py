"""What ``Producer.send_arrow()`` returns: the delivery of a call's rows, reported per run of rows.

``send_arrow`` appends its rows natively (``native/src/arrow/``) in runs, one run per batch
a partition's rows filled; each batch reports each of its runs here once, when it completes
(``ProducerBatch._report_arrow``). So a call costs Python work per batch, never per row: no
future, callback or metadata object per row. What is kept is a count of delivered and failed
rows, the first ``MAX_ERRORS`` errors with their row indices and, only when asked for
(``row_outcomes=True``), every row's offset (in ``ArrowRecords``, 8 bytes a row).
"""

from __future__ import annotations

import array
import asyncio
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from aioproducer._native import ArrowRecords

__all__ = ["ArrowDelivery", "ArrowDeliveryReport", "MAX_ERRORS"]

#: How many row errors a report keeps (the first ones, by completion): enough to say what went
#: wrong without holding an exception per row of a failed million-row call.
MAX_ERRORS = 10


@dataclass(frozen=True)
class ArrowDeliveryReport:
    """The outcome of a ``send_arrow()`` call's rows, once every row completed."""

    #: Rows queued by the call.
    rows: int
    #: Rows the broker acknowledged.
    delivered: int
    #: Rows that failed (``rows - delivered``).
    failed: int
    #: The first ``MAX_ERRORS`` failures: (row index in the data as given, error).
    errors: tuple[tuple[int, BaseException], ...]
    #: With ``row_outcomes=True``: each row's offset (``array('q')``, -1 for a failed row, a row
    #: never queued (the call failed part-way) or an offset the broker did not give, as with
    #: ``acks=0``); else None.
    offsets: array.array[int] | None

    def raise_for_errors(self) -> None:
        """Raise the first row's error (with the count in its notes) if any row failed.

        The error is the batch's, shared by its failed rows (and by every call on this report):
        its note is added once, however often this is called.
        """
        if self.failed:
            row, error = self.errors[0]
            note = f"send_arrow: {self.failed} of {self.rows} rows failed; row {row} is the first reported"
            if note not in getattr(error, "__notes__", ()):
                error.add_note(note)
            raise error


class ArrowDelivery:
    """Awaitable delivery of one ``send_arrow()`` call: ``await delivery`` gives its ``ArrowDeliveryReport``.

    Completed by the batches holding its rows, one ``run_done`` per run. It never raises for a
    failed row: the report counts them (``raise_for_errors()`` for the fail-fast style). ``done()``,
    ``delivered``, ``failed`` and ``errors`` may be read at any time; ``rows`` is the call's row count.
    """

    __slots__ = ("rows", "delivered", "failed", "errors", "_records", "_future")

    def __init__(self, records: ArrowRecords, loop: asyncio.AbstractEventLoop) -> None:
        self.rows: int = len(records)
        self.delivered: int = 0
        self.failed: int = 0
        self.errors: list[tuple[int, BaseException]] = []
        #: The planned order and per-row offsets, until the report is made (then dropped).
        self._records: ArrowRecords | None = records
        self._future: asyncio.Future[ArrowDeliveryReport] = loop.create_future()
        if self.rows == 0:
            self._finish()

    def run_done(self, start: int, count: int, base_offset: int, error: BaseException | None) -> None:
        """A run of ``count`` rows from planned position ``start`` completed: at ``base_offset`` on, or with ``error``."""
        records = self._records
        assert records is not None  # no run completes after the last one
        if error is None:
            self.delivered += count
        else:
            self.failed += count
            if len(self.errors) < MAX_ERRORS:
                self.errors += ((records.row_index(start + k), error) for k in range(min(count, MAX_ERRORS - len(self.errors))))
        records.set_offsets(start, count, base_offset if error is None else -1)
        if self.delivered + self.failed >= self.rows:
            self._finish()

    def truncate(self, queued: int) -> None:
        """The call failed after queuing ``queued`` rows (memory wait timed out, producer closed): only those complete."""
        self.rows = queued
        if self.delivered + self.failed >= queued and not self._future.done():
            self._finish()

    def _finish(self) -> None:
        if self._future.done():
            return
        records, self._records = self._records, None
        raw = records.offsets() if records is not None else None
        offsets = None
        if raw is not None:
            offsets = array.array("q")
            offsets.frombytes(raw)
        self._future.set_result(
            ArrowDeliveryReport(self.rows, self.delivered, self.failed, tuple(self.errors), offsets)
        )

    def done(self) -> bool:
        return self._future.done()

    def report(self) -> ArrowDeliveryReport:
        """The report once done (``asyncio.InvalidStateError`` before)."""
        return self._future.result()

    def __await__(self) -> Generator[Any, None, ArrowDeliveryReport]:
        # shield: cancelling the awaiting task must not cancel the delivery others may await.
        return asyncio.shield(self._future).__await__()

    def __repr__(self) -> str:
        return f"<ArrowDelivery rows={self.rows} delivered={self.delivered} failed={self.failed}>"
