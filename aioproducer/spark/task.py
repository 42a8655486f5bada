"""One Spark task's write: its Arrow batches → Kafka, at least once or exactly once (runs on the executors).

**At least once** (the default): the task queues its records on the worker process's shared
producer, flushes, and fails if any record failed, so Spark runs it again; a record written by a
failed attempt may then be written twice, none is lost.

**Exactly once** (``ExactlyOnce``): the task writes its rows in one transaction, with its own
``transactional.id``, ``<prefix>-<partition>``, the same for every attempt of the task and every
run of the batch. Starting the producer (``InitProducerId``) fences an earlier attempt that is
still running anywhere and aborts its open transaction. The transaction also commits, as the
consumer group ``<prefix>-<partition>``, the offset ``batch_id + 1`` on partition 0 of the
progress topic (``send_offsets_to_transaction``): the marker that this batch is written. A task
first reads that group's committed offset (``committed_offsets``, waiting out a pending
transaction); if it is past ``batch_id``, the batch was committed by an earlier run and the task
writes nothing.

The task does not commit: it **prepares** (``prepare_transaction``: every record acknowledged,
the transaction left open) and returns the transaction's id and epoch in its statistics; the
driver commits the transactions of the tasks Spark reports as successful, once the whole job
succeeded. Why: a task's Python code cannot tell that its attempt failed. When a computation
upstream of the sink fails in the same task, Spark closes the worker's input as if it ended,
the sink sees a complete-looking input, and the JVM fails the task only after. A task that
committed then would commit a partial batch, and its retry would find the marker and skip the
rest. A prepared transaction of a failed attempt is aborted by the retry's ``InitProducerId``
(or by the coordinator after ``transaction.timeout.ms``). Commit or abort are atomic for records
and marker alike, so a ``read_committed`` consumer sees each row of the batch once.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Iterator

import pyarrow as pa
from pyspark import TaskContext

from aioproducer.errors import KafkaError
from aioproducer.internals.batch import RecordMetadata
from aioproducer.producer import Producer
from aioproducer.arrow import ArrowDelivery
from aioproducer.spark.arrow import RecordColumns, canonical_columns, sink_batches_by_topic, sink_payload_bytes
from aioproducer.spark.columns import SinkColumns
from aioproducer.spark.stats import TaskStats
from aioproducer.spark.worker import input_reader, run, shared_producer

__all__ = ["ExactlyOnce", "TaskPlan", "SparkTaskError", "write_task", "run_this_task"]


class SparkTaskError(KafkaError):
    """Records of a Spark task were not written: the task fails, so Spark retries it."""


@dataclass(frozen=True)
class ExactlyOnce:
    """The transactional write of one batch (see the module docstring)."""

    prefix: str
    batch_id: int
    progress_topic: str

    def transactional_id(self, partition: int) -> str:
        return f"{self.prefix}-{partition}"

    def group_id(self, partition: int) -> str:
        return f"{self.prefix}-{partition}"


@dataclass(frozen=True)
class TaskPlan:
    """Everything a task needs, made and checked on the driver and shipped to the executors."""

    config: dict[str, Any]
    #: A digest of ``config`` made on the driver: which shared producer of a worker serves it.
    config_key: str
    columns: SinkColumns
    topic: str | None
    on_error: str  # "fail" or "count"
    exactly_once: ExactlyOnce | None = None


class _Tally:
    """Delivery failures of one task, counted by the records' callbacks."""

    __slots__ = ("failed", "first_error")

    def __init__(self) -> None:
        self.failed = 0
        self.first_error: BaseException | None = None

    def on_delivery(self, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        if error is not None:
            self.add(error)

    def add(self, error: BaseException) -> None:
        self.add_rows(1, error)

    def add_rows(self, count: int, error: BaseException) -> None:
        self.failed += count
        if self.first_error is None:
            self.first_error = error


def run_this_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch]) -> TaskStats:
    """Write the running Spark task's rows (synchronous: what ``mapInArrow`` and the data source call)."""
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    attempt = context.attemptNumber() if context is not None else 0
    return run(write_task(plan, batches, partition, attempt))


async def write_task(plan: TaskPlan, batches: Iterator[pa.RecordBatch], partition: int, attempt: int) -> TaskStats:
    """Write one task's rows; return its statistics, or raise so that Spark retries the task."""
    started = time.monotonic()
    first = next((b for b in batches if b.num_rows), None)
    if first is None:  # an empty partition: no producer, nothing to mark
        return TaskStats(partition, attempt, 0, 0, 0, time.monotonic() - started)
    rows = itertools.chain([first], batches)
    if plan.exactly_once is not None:
        return await _write_exactly_once(plan, plan.exactly_once, rows, partition, attempt, started)
    return await _write_at_least_once(plan, rows, partition, attempt, started)


async def _write_at_least_once(
    plan: TaskPlan, rows: Iterator[pa.RecordBatch], partition: int, attempt: int, started: float
) -> TaskStats:
    producer = await shared_producer(plan.config_key, plan.config)
    # Failures are counted by the producer, per batch: the tasks of a worker run one after
    # another, so the count's growth during this task is this task's. A callback per record
    # (what on_error="count" takes, for the rows send() refuses) costs about a microsecond each.
    failed_before = producer.metrics()["records_failed"]
    tally = _Tally() if plan.on_error == "count" else None
    try:
        records, size = await _send_batches(producer, rows, plan, tally)
    except BaseException:
        # What this task queued is delivered now, not by a later task's flush; the task fails anyway.
        await producer.flush()
        raise
    await producer.flush()
    if tally is None:
        metrics = producer.metrics()
        tally = _Tally()
        tally.failed = metrics["records_failed"] - failed_before
        tally.first_error = metrics["last_error"] if tally.failed else None
    if tally.failed and plan.on_error == "fail":
        raise SparkTaskError(
            f"Spark task for partition {partition} (attempt {attempt}): {tally.failed} of {records} records "
            f"were not written ({tally.first_error!r}). The task fails so that Spark retries it"
        ) from tally.first_error
    first_error = None if tally.first_error is None else repr(tally.first_error)
    return TaskStats(
        partition, attempt, records - tally.failed, size, tally.failed, time.monotonic() - started, False, first_error
    )


async def _write_exactly_once(
    plan: TaskPlan, eo: ExactlyOnce, rows: Iterator[pa.RecordBatch], partition: int, attempt: int, started: float
) -> TaskStats:
    group = eo.group_id(partition)
    marker = (eo.progress_topic, 0)
    async with Producer({**plan.config, "transactional.id": eo.transactional_id(partition)}) as producer:
        # start() ran InitProducerId: an earlier attempt of this task is fenced, its transaction aborted.
        committed = (await producer.committed_offsets(group, [marker]))[marker]
        if committed is not None and committed > eo.batch_id:
            return TaskStats(partition, attempt, 0, 0, 0, time.monotonic() - started, True)
        producer.begin_transaction()
        try:
            records, size = await _send_batches(producer, rows, plan, None)
            await producer.send_offsets_to_transaction({marker: eo.batch_id + 1}, group)
            prepared = await producer.prepare_transaction()  # the driver commits it: see the module docstring
        except BaseException:
            await _abort_quietly(producer)
            raise
    seconds = time.monotonic() - started
    return TaskStats(
        partition, attempt, records, size, 0, seconds, False, None,
        prepared.transactional_id, prepared.producer_id, prepared.producer_epoch,
    )


async def _abort_quietly(producer: Producer) -> None:
    """Abort after a failure, which is being raised; a failed abort changes nothing (the next attempt fences)."""
    try:
        await producer.abort_transaction()
    except KafkaError:
        pass


async def _send_batches(
    producer: Producer, rows: Iterator[pa.RecordBatch], plan: TaskPlan, tally: _Tally | None
) -> tuple[int, int]:
    """Queue every row; return (rows, payload bytes).

    Each Arrow batch goes to ``send_arrow()`` as it is (one call per topic of the batch): no
    Python object per row. A producer that ``send_arrow()`` refuses (interceptors, serializers,
    a custom partitioner, tracing) takes the per-row path (``RecordColumns``), as does a batch
    with a row the producer refuses when ``tally`` counts refusals (``on_error="count"``: each
    row is then counted on its own). With ``tally``, each row's delivery failure is counted
    there once the rows are delivered (``_count_deliveries``); without it, a refused row raises
    and failures are the producer's count.
    """
    records = size = 0
    arrow = producer.send_arrow_refusal is None
    deliveries: list[ArrowDelivery] = []
    async for batch in _pulled(rows):
        records += batch.num_rows
        size += sink_payload_bytes(batch, plan.columns)
        if arrow:
            await _send_arrow_batch(producer, batch, plan, tally, deliveries)
        else:
            await _send_python(producer, RecordColumns.from_batch(batch, plan.columns), plan.topic, tally)
    if tally is not None:
        await producer.flush()
        await _count_deliveries(deliveries, tally)
    return records, size


async def _send_arrow_batch(
    producer: Producer, batch: pa.RecordBatch, plan: TaskPlan, tally: _Tally | None, deliveries: list[ArrowDelivery]
) -> None:
    """One Spark Arrow batch through ``send_arrow()``, one call per topic (a ``topic`` column is split by Arrow)."""
    for topic, rows in sink_batches_by_topic(batch, plan.columns, plan.topic):
        try:
            if topic is None:
                raise ValueError(f"{rows.num_rows} row(s) have a null 'topic'; give topic=... to the call or fill the column")
            deliveries.append(await producer.send_arrow(topic, rows))
        except (KafkaError, ValueError, TypeError) as exc:
            if tally is None:
                raise
            queued: ArrowDelivery | None = getattr(exc, "delivery", None)
            if topic is None:
                tally.add_rows(rows.num_rows, exc)
            elif queued is not None:  # it failed while queuing (max.block.ms): the rows queued are delivered
                deliveries.append(queued)
                tally.add_rows(rows.num_rows - queued.rows, exc)
            else:  # a row the producer refused, before any was queued: each row on its own, only the bad ones counted
                await _send_each(producer, RecordColumns.from_batch(rows, canonical_columns(rows)), topic, tally.on_delivery, tally)


async def _count_deliveries(deliveries: list[ArrowDelivery], tally: _Tally) -> None:
    """Add the failed rows of delivered ``send_arrow()`` calls to ``tally``."""
    for delivery in deliveries:
        report = await delivery
        if report.failed:
            tally.add_rows(report.failed, report.errors[0][1])


async def _send_python(producer: Producer, columns: RecordColumns, topic: str | None, tally: _Tally | None) -> None:
    """The rows of one batch as Python values: ``send_many()`` when it can take them, else ``send()`` each."""
    on_delivery = tally.on_delivery if tally is not None else None
    if columns.plain and tally is None:
        assert topic is not None  # plain: no topic column, so the call's topic
        await producer.send_many(topic, columns.values, columns.keys, on_delivery=on_delivery)
    else:
        await _send_each(producer, columns, topic, on_delivery, tally)


async def _pulled(rows: Iterator[pa.RecordBatch]) -> AsyncIterator[pa.RecordBatch]:
    """``rows``, each pulled on the input thread: the loop keeps sending while Spark computes the next."""
    loop = asyncio.get_running_loop()
    reader = input_reader()
    while (batch := await loop.run_in_executor(reader, next, rows, None)) is not None:
        yield batch


async def _send_each(
    producer: Producer,
    columns: RecordColumns,
    topic: str | None,
    on_delivery: Any,
    refusals: _Tally | None,
) -> None:
    """Queue the rows one ``send()`` each: per-row topics, partitions, headers or timestamps."""
    count = len(columns.values)
    none = itertools.repeat(None, count)
    for value, key, row_topic, row_partition, row_headers, row_timestamp in zip(
        columns.values,
        columns.keys or none,
        columns.topics or itertools.repeat(topic, count),
        columns.partitions or itertools.repeat(None, count),
        columns.headers or itertools.repeat(None, count),
        columns.timestamps or itertools.repeat(None, count),
    ):
        try:
            if row_topic is None:
                raise ValueError("a row has a null 'topic'; give topic=... to the call or fill the column")
            await producer.send(
                row_topic,
                value,
                key,
                headers=row_headers,
                partition=row_partition,
                timestamp_ms=row_timestamp,
                on_delivery=on_delivery,
            )
        except (KafkaError, ValueError, TypeError) as exc:
            if refusals is None:
                raise
            refusals.add(exc)
