"""``writeStream.format("aioproducer")``: Structured Streaming into Kafka (PySpark 4.1 and later).

.. code-block:: python

    register_data_source(spark)
    (stream.writeStream.format("aioproducer")
       .option("kafka.bootstrap.servers", "host:9092").option("topic", "out")
       .option("checkpointLocation", "/checkpoints/q1").start())

Each micro-batch runs the batch sink's tasks (:mod:`aioproducer.spark.task`) on its rows, as
Arrow batches from PySpark's ``DataSourceStreamArrowWriter``; the driver's ``commit(messages,
batchId)`` ends the micro-batch. The options, the columns and the output mode are checked in
``streamWriter()``, which Spark calls when the query plans its first micro-batch, before any
task runs: a mistake ends the query, and ``awaitTermination()`` raises naming the option.

**At least once** (the default): every task flushes, and a task with a record that was not
written fails, so Spark fails the micro-batch; a restarted query runs it again.

**Exactly once** (``transactional=true``): each task writes its rows in a transaction with the id
``<transactional.id>-<query id>-<partition>`` and prepares it; the driver's ``commit`` commits
them all, ``abort`` aborts them. The query id comes from the checkpoint, so it is the same after
a restart: the restarted query's tasks fence the dead driver's tasks and abort what they left
open. Inside each task's transaction, the offset ``batchId + 1`` is committed for the consumer
group ``<transactional.id>-<query id>-<partition>`` on partition 0 of ``progress.topic``
(default: ``topic``): the record that the micro-batch is written becomes visible exactly when
the driver's commit commits the rows. A micro-batch that the checkpoint says to run again (the
driver died after our commit, before Spark wrote its own commit log) finds that record and
writes nothing.

The micro-batch's id and the query's id reach the tasks as the local properties Spark sets on
every job of a micro-batch (``streaming.sql.batchId``, ``sql.streaming.queryId``).

Output modes: ``append`` only. ``complete`` reaches ``streamWriter`` as ``overwrite=True`` and is
refused (a topic cannot be truncated); ``update`` is refused by Spark itself for every Python data
source before this code runs: use ``foreachBatch(kafka_batch_writer(...))`` for it.

``option("metrics.path", directory)``: the driver's commit writes each micro-batch's statistics
there (PySpark gives a Python sink no way into ``query.lastProgress``); read them with
:func:`aioproducer.spark.sink_metrics`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterator

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import WriterCommitMessage

from aioproducer.spark.commit import abort_prepared, commit_prepared
from aioproducer.spark.metrics import write_metrics
from aioproducer.spark.stats import TaskStats, WriteStats
from aioproducer.spark.task import ExactlyOnce, TaskPlan, run_this_task

try:  # PySpark 4.1 and later; on 4.0 the module imports and streamWriter() says why it cannot run
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # exercised by a test that removes the class, as on PySpark 4.0
    DataSourceStreamArrowWriter = None  # type: ignore[assignment,misc]

_WriterBase: Any = DataSourceStreamArrowWriter if DataSourceStreamArrowWriter is not None else object

__all__ = ["StreamCommitted", "stream_writer", "require_stream_writer", "BATCH_ID_KEY", "QUERY_ID_KEY"]

#: The local properties Spark sets on each job of a micro-batch; Python tasks read them from TaskContext.
BATCH_ID_KEY = "streaming.sql.batchId"
QUERY_ID_KEY = "sql.streaming.queryId"

_WHAT = 'writeStream.format("aioproducer")'


@dataclass
class StreamCommitted(WriterCommitMessage):
    """What one task of a micro-batch wrote, and which micro-batch of which query it took itself for."""

    stats: TaskStats
    batch_id: int
    query_id: str


def require_stream_writer() -> None:
    """Refuse a streaming query on a PySpark without ``DataSourceStreamArrowWriter`` (4.0), saying what to do."""
    if DataSourceStreamArrowWriter is None:
        import pyspark

        raise RuntimeError(
            f"{_WHAT} needs PySpark 4.1 or later (pyspark.sql.datasource.DataSourceStreamArrowWriter); "
            f"this is PySpark {pyspark.__version__}. On it, stream with "
            "writeStream.foreachBatch(aioproducer.spark.kafka_batch_writer(...))"
        )


def stream_writer(plan: TaskPlan, overwrite: bool, metrics_path: str | None) -> Any:
    """The writer Spark ships to the tasks and calls on the driver; ``plan`` was checked by the caller."""
    require_stream_writer()
    if overwrite:
        raise ValueError(
            f"{_WHAT}: outputMode(\"complete\") rewrites the whole result each micro-batch, and a Kafka topic cannot "
            "be truncated: use outputMode(\"append\") (or foreachBatch(kafka_batch_writer(...)) to write each result)"
        )
    return _StreamWriter(plan, metrics_path)


class _StreamWriter(_WriterBase):  # type: ignore[misc]
    """One query's writer: ``write`` in the tasks of every micro-batch, ``commit`` / ``abort`` on the driver."""

    def __init__(self, plan: TaskPlan, metrics_path: str | None) -> None:
        self.plan = plan
        self.metrics_path = metrics_path

    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamCommitted:
        batch_id, query_id = _micro_batch()
        plan = self.plan
        if plan.exactly_once is not None:
            eo = plan.exactly_once
            plan = replace(plan, exactly_once=ExactlyOnce(f"{eo.prefix}-{query_id}", batch_id, eo.progress_topic))
        return StreamCommitted(run_this_task(plan, iterator), batch_id, query_id)

    def commit(self, messages: list[Any], batchId: int) -> None:
        """Commit the prepared transactions (exactly once), then record the micro-batch's statistics."""
        tasks = _tasks(messages, batchId)
        if self.plan.exactly_once is not None:
            commit_prepared(self.plan.config, tasks, batchId)
        if self.metrics_path is not None:
            write_metrics(self.metrics_path, WriteStats.of(tasks, max((t.seconds for t in tasks), default=0.0), batchId))

    def abort(self, messages: list[Any], batchId: int) -> None:
        """Abort what the successful tasks prepared; at least once, what they flushed stays (the re-run writes it again)."""
        if self.plan.exactly_once is not None:
            abort_prepared(self.plan.config, [m.stats for m in messages if isinstance(m, StreamCommitted)])


def _micro_batch() -> tuple[int, str]:
    """The running task's micro-batch id and query id, from the local properties Spark gives its jobs."""
    context = TaskContext.get()
    batch = context.getLocalProperty(BATCH_ID_KEY) if context is not None else None
    query = context.getLocalProperty(QUERY_ID_KEY) if context is not None else None
    if batch is None or query is None:
        raise RuntimeError(
            f"{_WHAT}: this task has no {BATCH_ID_KEY} / {QUERY_ID_KEY} local property; "
            "it must run in a micro-batch of a streaming query"
        )
    return int(batch), query


def _tasks(messages: list[Any], batch_id: int) -> list[TaskStats]:
    """The tasks' statistics, after checking that each task wrote the micro-batch being committed."""
    tasks = []
    for message in messages:
        if not isinstance(message, StreamCommitted):
            continue  # Spark gives None for a task that did not report
        if message.batch_id != batch_id:
            raise RuntimeError(f"{_WHAT}: a task wrote micro-batch {message.batch_id} but Spark commits {batch_id}")
        tasks.append(message.stats)
    return tasks
