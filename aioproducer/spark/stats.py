"""What each task wrote, sent back to the driver as one row, and the totals over a write."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Iterable

import pyarrow as pa

from aioproducer.internals.transactions import PreparedTransaction

__all__ = ["TaskStats", "WriteStats", "TASK_STATS_DDL"]


@dataclass(frozen=True)
class TaskStats:
    """One successful task: its Spark partition and attempt, and what it wrote.

    ``records`` were acknowledged by Kafka (or, in a transaction, committed); ``failed`` is
    non-zero only with ``on_error="count"`` (by default a task with a failed record fails, and
    Spark retries it). ``skipped``: a transactional task that found its batch already committed
    by an earlier run and wrote nothing. ``transactional_id``, ``producer_id`` and
    ``producer_epoch``: a transactional task's prepared transaction, which the driver commits
    once the whole write succeeded (see :mod:`aioproducer.spark.task`).
    """

    partition: int
    attempt: int
    records: int
    bytes: int
    failed: int
    seconds: float
    skipped: bool = False
    first_error: str | None = None
    transactional_id: str | None = None
    producer_id: int = -1
    producer_epoch: int = -1

    @property
    def prepared(self) -> PreparedTransaction | None:
        """The transaction this task left for the driver to commit, if any."""
        if self.transactional_id is None:
            return None
        return PreparedTransaction(self.transactional_id, self.producer_id, self.producer_epoch)

    def to_arrow(self) -> pa.RecordBatch:
        return pa.RecordBatch.from_pylist([asdict(self)], schema=_ARROW_SCHEMA)

    @classmethod
    def from_row(cls, row: Any) -> TaskStats:
        return cls(**{f.name: row[f.name] for f in fields(cls)})


#: The tasks' output schema, in Spark's DDL: the same fields as :class:`TaskStats`.
TASK_STATS_DDL = (
    "partition int, attempt int, records long, bytes long, failed long, seconds double, "
    "skipped boolean, first_error string, transactional_id string, producer_id long, producer_epoch int"
)

_ARROW_SCHEMA = pa.schema(
    [
        ("partition", pa.int32()),
        ("attempt", pa.int32()),
        ("records", pa.int64()),
        ("bytes", pa.int64()),
        ("failed", pa.int64()),
        ("seconds", pa.float64()),
        ("skipped", pa.bool_()),
        ("first_error", pa.string()),
        ("transactional_id", pa.string()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int32()),
    ]
)


@dataclass(frozen=True)
class WriteStats:
    """A whole write: every successful task's statistics, and totals over them.

    ``seconds`` is the driver's wall time for the write (the Spark job); ``batch_id`` is the
    micro-batch or the transactional batch written, if any.
    """

    tasks: list[TaskStats] = field(default_factory=list)
    seconds: float = 0.0
    batch_id: int | None = None

    @classmethod
    def of(cls, tasks: Iterable[TaskStats], seconds: float, batch_id: int | None) -> WriteStats:
        return cls(sorted(tasks, key=lambda t: t.partition), seconds, batch_id)

    @property
    def records(self) -> int:
        return sum(t.records for t in self.tasks)

    @property
    def bytes(self) -> int:
        return sum(t.bytes for t in self.tasks)

    @property
    def failed(self) -> int:
        return sum(t.failed for t in self.tasks)

    @property
    def skipped_tasks(self) -> int:
        return sum(1 for t in self.tasks if t.skipped)

    @property
    def retried_tasks(self) -> int:
        """Tasks that succeeded on a later attempt than the first: Spark retried them."""
        return sum(1 for t in self.tasks if t.attempt > 0)

    def __str__(self) -> str:
        rate = self.records / self.seconds if self.seconds > 0 else 0.0
        text = (
            f"{self.records} records ({self.bytes} bytes) in {len(self.tasks)} tasks, {self.seconds:.2f} s "
            f"({rate:,.0f} records/s); failed {self.failed}, retried tasks {self.retried_tasks}"
        )
        if self.skipped_tasks:
            text += f", tasks skipped as already committed {self.skipped_tasks}"
        return text
