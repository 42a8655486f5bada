"""The driver's half of an exactly-once write: commit the transactions its successful tasks prepared.

Each transactional task leaves its transaction prepared (see :mod:`aioproducer.spark.task`);
Spark returns the statistics of the attempts that succeeded, one per partition, only once the
whole job did. This module ends those transactions from the driver, on a producer of its own
(``complete_transaction`` asks only the transaction coordinators), all at once.

If a commit fails (its transaction was fenced, or aborted after ``transaction.timeout.ms``),
the others are still committed and the error names the partitions that were not: running the
same batch id again writes exactly those, because the committed ones find their marker.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Callable, Iterable, Mapping, TypeVar

from aioproducer.errors import KafkaError
from aioproducer.producer import Producer
from aioproducer.spark.stats import TaskStats

__all__ = ["commit_prepared", "abort_prepared", "SparkCommitError"]

T = TypeVar("T")


class SparkCommitError(KafkaError):
    """Transactions of an exactly-once write that the driver could not commit: run the batch again."""


def commit_prepared(config: Mapping[str, Any], tasks: Iterable[TaskStats], batch_id: int | None) -> None:
    """Commit every task's prepared transaction; raise :class:`SparkCommitError` naming those that failed."""
    prepared = [t for t in tasks if t.prepared is not None]
    if not prepared:
        return
    errors = _on_driver(lambda: _complete(config, prepared, commit=True))
    failed = [(task, error) for task, error in zip(prepared, errors) if error is not None]
    if failed:
        detail = "; ".join(f"partition {t.partition}: {e!r}" for t, e in failed)
        raise SparkCommitError(
            f"{len(failed)} of {len(prepared)} transactions of batch {batch_id} were not committed ({detail}). "
            "Their rows are not visible to read_committed consumers; run the same batch id again: "
            "it writes those partitions and skips the committed ones"
        ) from failed[0][1]


def abort_prepared(config: Mapping[str, Any], tasks: Iterable[TaskStats]) -> None:
    """Abort every task's prepared transaction (a failed write); errors are ignored: the next run fences them anyway."""
    prepared = [t for t in tasks if t.prepared is not None]
    if prepared:
        _on_driver(lambda: _complete(config, prepared, commit=False))


async def _complete(config: Mapping[str, Any], tasks: list[TaskStats], *, commit: bool) -> list[BaseException | None]:
    async with Producer(dict(config)) as producer:
        results = await asyncio.gather(
            *(producer.complete_transaction(t.prepared, commit=commit) for t in tasks if t.prepared is not None),
            return_exceptions=True,
        )
    errors: list[BaseException | None] = []
    for result in results:
        if isinstance(result, BaseException) and not isinstance(result, Exception):
            raise result  # cancellation, KeyboardInterrupt
        errors.append(result if isinstance(result, BaseException) else None)
    return errors


def _on_driver(make: Callable[[], Awaitable[T]]) -> T:
    """Run a coroutine to completion from synchronous driver code, even under a running event loop.

    ``write_kafka`` is synchronous, as Spark's actions are, but may be called from a coroutine
    (a notebook, an async service): then the coroutine runs on a loop of its own in a thread.
    """

    async def main() -> T:
        return await make()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(main())
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="aioproducer-spark-commit") as thread:
        return thread.submit(asyncio.run, main()).result()
