"""The driver side: check a write, run it as one Spark job, gather the tasks' statistics.

``write_kafka(df, config, topic=...)`` checks the DataFrame's columns and the producer
configuration on the driver, so a mistake fails before any task runs; then runs
``df.mapInArrow`` with the task function of :mod:`aioproducer.spark.task` and collects the one
statistics row each task returns.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, Callable, Iterator, Mapping

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import DataFrame

from aioproducer.config import ProducerConfig
from aioproducer.spark.columns import plan_columns
from aioproducer.spark.commit import commit_prepared
from aioproducer.spark.stats import TASK_STATS_DDL, TaskStats, WriteStats
from aioproducer.spark.task import ExactlyOnce, TaskPlan, run_this_task

__all__ = ["write_kafka", "kafka_batch_writer", "make_plan", "task_function"]

_ON_ERROR = ("fail", "count")
#: ``transaction.timeout.ms`` of an exactly-once write unless the configuration sets it: a
#: task's transaction stays open until the driver commits it at the end of the whole job, so
#: the producer's default (one minute) would abort the transactions of a longer write. 15 min
#: is the broker's default ``transaction.max.timeout.ms``.
SPARK_TRANSACTION_TIMEOUT_MS = 900_000
#: ``batch.size`` of every sink's producer unless the configuration sets it (Java's default is
#: 16384). A sink's task hands the producer a partition's rows at once and waits only for the
#: last acknowledgement, so larger batches delay nothing anyone waits for, and they take the
#: per-batch and per-request cost off the rows: at 16384 every 10 KB row is a batch and half a
#: request of its own. 256 KiB puts 25 such rows in a batch; ``buffer.memory`` (32 MiB) still
#: holds 128 open batches, so a keyed write to a topic of many partitions keeps batching.
#: Measured in ``benchmarks/README.md`` ("Streaming").
SINK_BATCH_SIZE = 262_144
_dumps: Callable[[Any], bytes] = cloudpickle.dumps  # what Spark ships a task's closure with


def write_kafka(
    df: DataFrame,
    config: Mapping[str, Any],
    topic: str | None = None,
    *,
    transactional: bool = False,
    batch_id: int | None = None,
    progress_topic: str | None = None,
    on_error: str = "fail",
    key_serializer: Any = None,
    value_serializer: Any = None,
) -> WriteStats:
    """Write ``df``'s rows to Kafka, one record per row; return what was written.

    Columns as Spark's Kafka sink: ``value`` (binary or string; required), ``key``, ``topic``
    (when ``topic`` is not given), ``partition``, ``headers``, plus ``timestamp``; see
    :mod:`aioproducer.spark.columns`. ``config`` is the producer configuration (Java keys or
    Python keywords), which must be picklable: give TLS and SASL settings as files and strings.

    At least once by default: a task with a record that was not written fails, and Spark runs
    it again (``on_error="count"`` instead counts such records in the statistics and goes on).
    ``transactional=True``: exactly once, for a batch identified by ``batch_id``; ``config``'s
    ``transactional.id`` is the prefix of each task's own id, and ``progress_topic`` (default:
    ``topic``) holds the markers of the batches written. See the docs' "Spark" page
    (docs/how-to/spark.md) for what that guarantees. Without ``transactional``, ``batch_id`` only labels the statistics.

    ``key_serializer`` / ``value_serializer`` (or the ``key.serializer`` / ``value.serializer``
    keys of ``config``) turn the column's rows into bytes in the tasks; the column may then be
    of any type, a struct reaching the serializer as a dict. A registry serializer
    (``aioproducer.schema_registry``) looks its schema up once per Python worker.
    """
    plan = make_plan(
        df.schema,
        with_serializers(config, key_serializer, value_serializer, "write_kafka"),
        topic,
        transactional=transactional,
        batch_id=batch_id,
        progress_topic=progress_topic,
        on_error=on_error,
        what="write_kafka",
    )
    started = time.monotonic()
    rows = df.select(*plan.columns.names).mapInArrow(task_function(plan), TASK_STATS_DDL).collect()
    tasks = [TaskStats.from_row(row) for row in rows]
    if plan.exactly_once is not None:  # every task succeeded: commit what they prepared
        commit_prepared(plan.config, tasks, batch_id)
    return WriteStats.of(tasks, time.monotonic() - started, batch_id)


def with_serializers(config: Mapping[str, Any], key_serializer: Any, value_serializer: Any, what: str) -> Mapping[str, Any]:
    """``config`` with the serializers given as keywords, as its ``key.serializer`` / ``value.serializer``."""
    if key_serializer is None and value_serializer is None:
        return config
    merged = dict(config)
    for key, keyword, serializer in (("key.serializer", "key_serializer", key_serializer), ("value.serializer", "value_serializer", value_serializer)):
        if serializer is None:
            continue
        if key in merged or keyword in merged:
            raise ValueError(f"{what}: {keyword}= is given and config has {key!r} too: give it once")
        merged[key] = serializer
    return merged


def kafka_batch_writer(
    config: Mapping[str, Any],
    topic: str | None = None,
    *,
    transactional: bool = False,
    progress_topic: str | None = None,
    on_error: str = "fail",
    on_batch: Callable[[int, WriteStats], None] | None = None,
    key_serializer: Any = None,
    value_serializer: Any = None,
) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function for Structured Streaming: ``write_kafka`` each micro-batch.

    ``stream.writeStream.foreachBatch(kafka_batch_writer(config, topic="out")).start()``.
    The micro-batch's id is the ``batch_id`` of a transactional write, so with
    ``transactional=True`` a micro-batch that Spark runs again after a restart is not written
    twice. ``on_batch(batch_id, stats)`` is called on the driver after each micro-batch.
    """
    config = with_serializers(config, key_serializer, value_serializer, "kafka_batch_writer")
    ProducerConfig(dict(config))  # fail at the call that made the writer, not at the first batch
    if on_batch is not None and not callable(on_batch):
        raise TypeError(f"kafka_batch_writer: on_batch must be callable or None, not {type(on_batch).__name__}")

    def write_batch(df: DataFrame, batch_id: int) -> None:
        stats = write_kafka(
            df, config, topic, transactional=transactional, batch_id=batch_id, progress_topic=progress_topic, on_error=on_error
        )
        if on_batch is not None:
            on_batch(batch_id, stats)

    return write_batch


def make_plan(
    schema: Any,
    config: Mapping[str, Any],
    topic: str | None,
    *,
    transactional: bool,
    batch_id: int | None,
    progress_topic: str | None,
    on_error: str,
    what: str,
) -> TaskPlan:
    """Check every argument on the driver, against the DataFrame's ``schema``; make the plan the tasks run."""
    if not isinstance(config, Mapping):
        raise TypeError(f"{what}: config must be a mapping of producer settings, not {type(config).__name__}")
    if on_error not in _ON_ERROR:
        raise ValueError(f"{what}: on_error must be one of {list(_ON_ERROR)}, not {on_error!r}")
    settings = dict(config)
    if "batch.size" not in settings:  # a mapping's keys are Java's (ProducerConfig refuses batch_size)
        settings["batch.size"] = SINK_BATCH_SIZE
    cfg = ProducerConfig(settings)  # a bad key or value fails here, on the driver
    # A configured serializer takes the column's rows as Python values (a struct as a dict).
    serialized = frozenset(name for name, s in (("key", cfg.key_serializer), ("value", cfg.value_serializer)) if s is not None)
    columns = plan_columns(schema, topic, what, serialized=serialized)
    cfg.require_bootstrap_servers()
    exactly_once = None
    if transactional:
        exactly_once = _exactly_once(cfg, topic, batch_id, progress_topic, on_error, what)
        settings = {k: v for k, v in settings.items() if k not in ("transactional.id", "transactional_id")}
        if "transaction.timeout.ms" not in settings and "transaction_timeout_ms" not in settings:
            settings["transaction.timeout.ms"] = SPARK_TRANSACTION_TIMEOUT_MS
    elif cfg.transactional_id is not None:
        raise ValueError(
            f"{what}: config has transactional.id={cfg.transactional_id!r} but transactional=False; "
            "give transactional=True (the id is then the prefix of each task's own id) or drop the key"
        )
    elif progress_topic is not None:
        raise ValueError(f"{what}: progress_topic is for transactional=True writes (it holds their batch markers)")
    return TaskPlan(settings, _config_key(settings, what), columns, topic, on_error, exactly_once)


def _exactly_once(
    cfg: ProducerConfig, topic: str | None, batch_id: int | None, progress_topic: str | None, on_error: str, what: str
) -> ExactlyOnce:
    if cfg.transactional_id is None:
        raise ValueError(
            f"{what}: transactional=True needs transactional.id in config: the prefix of each task's "
            "transactional id (<prefix>-<partition>), stable across runs of the job"
        )
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise ValueError(f"{what}: transactional=True needs batch_id, an int >= 0 that identifies the batch, not {batch_id!r}")
    if on_error != "fail":
        raise ValueError(f"{what}: on_error={on_error!r} cannot go with transactional=True: a transaction commits all its records or none")
    marker_topic = progress_topic if progress_topic is not None else topic
    if not isinstance(marker_topic, str) or not marker_topic:
        raise ValueError(f"{what}: transactional=True with a 'topic' column needs progress_topic=..., the topic whose partition 0 holds the batch markers")
    return ExactlyOnce(cfg.transactional_id, batch_id, marker_topic)


def _config_key(settings: dict[str, Any], what: str) -> str:
    try:
        pickled = _dumps(settings)
    except Exception as exc:  # cloudpickle raises several types; the message names the value
        raise TypeError(
            f"{what}: config must be picklable to reach Spark's executors ({exc}); give TLS and SASL "
            "settings as file paths and strings, not ssl_context or token provider objects"
        ) from exc
    return hashlib.sha256(pickled).hexdigest()


def task_function(plan: TaskPlan) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of a write: one task's batches in, one statistics row out."""

    def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield run_this_task(plan, batches).to_arrow()

    return write_partition
