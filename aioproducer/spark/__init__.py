"""Write Spark DataFrames to Kafka with aioproducer (``pip install 'aioproducer[spark]'``).

* :func:`write_kafka` — a batch write, with the columns of Spark's own Kafka sink; returns
  :class:`WriteStats`.
* :func:`kafka_batch_writer` — the same for Structured Streaming's ``foreachBatch``.
* :func:`register_data_source` — on Spark 4, ``df.write.format("aioproducer")``, and on
  PySpark 4.1 and later ``writeStream.format("aioproducer")`` (:mod:`aioproducer.spark.streaming`).
* :func:`sink_metrics` — a streaming query's statistics per micro-batch (``option("metrics.path", ...)``).

At least once by default; exactly once with ``transactional=True`` (see
:mod:`aioproducer.spark.task` for how, and docs/how-to/spark.md for what it guarantees).
"""

from typing import Any

from aioproducer.spark.commit import SparkCommitError
from aioproducer.spark.metrics import sink_metrics
from aioproducer.spark.sink import kafka_batch_writer, write_kafka
from aioproducer.spark.stats import TaskStats, WriteStats
from aioproducer.spark.task import SparkTaskError

__all__ = [
    "write_kafka",
    "kafka_batch_writer",
    "register_data_source",
    "sink_metrics",
    "WriteStats",
    "TaskStats",
    "SparkTaskError",
    "SparkCommitError",
]


def register_data_source(spark: Any) -> None:
    """Make ``df.write.format("aioproducer")`` and ``writeStream.format("aioproducer")`` available in ``spark``'s session.

    See :mod:`aioproducer.spark.datasource` for the options. Imported here, on call, because
    Python data sources do not exist before Spark 4, where everything else works.
    """
    try:
        from aioproducer.spark.datasource import register_data_source as register
    except ImportError as exc:
        raise ImportError(f"register_data_source needs Spark 4 or later (pyspark.sql.datasource): {exc}") from exc
    register(spark)
