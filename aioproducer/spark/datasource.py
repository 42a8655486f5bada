"""``df.write.format("aioproducer")``: the sink as a Python data source (Spark 4 and later).

.. code-block:: python

    from aioproducer.spark import register_data_source
    register_data_source(spark)
    (df.write.format("aioproducer")
       .option("kafka.bootstrap.servers", "host:9092").option("topic", "out").mode("append").save())

Options: ``topic``; ``transactional`` (``"true"``), ``batch.id`` and ``progress.topic`` for an
exactly-once write; ``on.error`` (``fail`` or ``count``); every other option is a producer
setting, with or without the ``kafka.`` prefix that Spark's own Kafka sink takes. The columns
and guarantees are :func:`~aioproducer.spark.write_kafka`'s, and so is the code that runs in the
tasks. The write is checked when Spark plans it, before any task runs. Spark's save() returns
nothing, so the statistics that ``write_kafka`` returns are not available here; Kafka topics are
append-only, so only the ``append`` mode is taken.

The same source streams: ``writeStream.format("aioproducer")`` (PySpark 4.1 and later), with the
same options less ``batch.id`` and plus ``metrics.path``; see :mod:`aioproducer.spark.streaming`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from aioproducer.spark.commit import abort_prepared, commit_prepared
from aioproducer.spark.sink import make_plan
from aioproducer.spark.stats import TaskStats
from aioproducer.spark.task import TaskPlan, run_this_task

__all__ = ["KafkaDataSource", "register_data_source", "FORMAT"]

#: The name given to ``df.write.format(...)``.
FORMAT = "aioproducer"
_WHAT = f'df.write.format("{FORMAT}")'
_SINK_OPTIONS = ("topic", "transactional", "batch.id", "progress.topic", "on.error")
_STREAM_OPTIONS = (*_SINK_OPTIONS, "metrics.path")
#: Options Spark itself passes to the data source, which are not producer settings.
_SPARK_OPTIONS = ("path", "checkpointlocation")


def register_data_source(spark: SparkSession) -> None:
    """Make ``df.write.format("aioproducer")`` available in ``spark``'s session."""
    spark.dataSource.register(KafkaDataSource)


class KafkaDataSource(DataSource):
    """Writes a DataFrame to Kafka; see the module docstring for the options."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def writer(self, schema: StructType, overwrite: bool) -> _Writer:
        if overwrite:
            raise ValueError(f"{_WHAT}: Kafka topics are append-only; use mode(\"append\"), not overwrite")
        sink, config = _split_options(self.options, _SINK_OPTIONS)
        plan = make_plan(
            schema,
            config,
            sink.get("topic"),
            transactional=_flag(sink.get("transactional", "false"), _WHAT),
            batch_id=_batch_id(sink.get("batch.id")),
            progress_topic=sink.get("progress.topic"),
            on_error=sink.get("on.error", "fail"),
            what=_WHAT,
        )
        return _Writer(plan)

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        """The writer of ``writeStream.format("aioproducer")``: every option checked here, before any task runs."""
        from aioproducer.spark import streaming

        streaming.require_stream_writer()
        what = streaming._WHAT
        sink, config = _split_options(self.options, _STREAM_OPTIONS)
        if "batch.id" in sink:
            raise ValueError(f"{what}: option batch.id is not taken in a stream: each micro-batch's id is its batch id")
        transactional = _flag(sink.get("transactional", "false"), what)
        on_error = sink.get("on.error", "fail")
        if on_error not in ("fail", "count"):
            raise ValueError(f"{what}: option on.error must be fail or count, not {on_error!r}")
        if "progress.topic" in sink and not transactional:
            raise ValueError(f"{what}: option progress.topic is for transactional=true (it holds the micro-batch records)")
        plan = make_plan(
            schema,
            config,
            sink.get("topic"),
            transactional=transactional,
            batch_id=0 if transactional else None,  # each task takes its micro-batch's id
            progress_topic=sink.get("progress.topic"),
            on_error=on_error,
            what=what,
        )
        metrics_path = sink.get("metrics.path")
        if metrics_path is not None and not metrics_path.strip():
            raise ValueError(f"{what}: option metrics.path is empty; give a directory (or drop the option)")
        return streaming.stream_writer(plan, overwrite, metrics_path)


def _split_options(given: Any, names: tuple[str, ...]) -> tuple[dict[str, str], dict[str, Any]]:
    """The sink's own options, and the producer settings (the rest, without Spark's ``kafka.`` prefix)."""
    options = {str(k).lower(): v for k, v in given.items()}
    sink = {name: options.pop(name) for name in names if name in options}
    config = {k.removeprefix("kafka."): v for k, v in options.items() if k not in _SPARK_OPTIONS}
    return sink, config


@dataclass
class _Committed(WriterCommitMessage):
    """What one task wrote: its statistics, for the driver's ``commit``."""

    stats: TaskStats


class _Writer(DataSourceArrowWriter):
    def __init__(self, plan: TaskPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Committed:
        return _Committed(run_this_task(self.plan, iterator))

    def commit(self, messages: list[Any]) -> None:
        """Commit the transactions the tasks prepared (exactly once); at least once, each task flushed already."""
        if self.plan.exactly_once is not None:
            commit_prepared(self.plan.config, _stats(messages), self.plan.exactly_once.batch_id)

    def abort(self, messages: list[Any]) -> None:
        """Abort the prepared transactions of the tasks that succeeded; acknowledged records of at-least-once stay."""
        if self.plan.exactly_once is not None:
            abort_prepared(self.plan.config, _stats(messages))


def _stats(messages: list[Any]) -> list[TaskStats]:
    """The tasks' statistics; Spark gives None for a task that did not report."""
    return [m.stats for m in messages if isinstance(m, _Committed)]


def _flag(text: str, what: str) -> bool:
    lowered = str(text).strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{what}: option transactional must be true or false, not {text!r}")
    return lowered == "true"


def _batch_id(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{_WHAT}: option batch.id must be an integer, not {text!r}") from None
