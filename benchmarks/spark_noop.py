"""A Python streaming data source that writes nothing: the floor of any Python sink (``spark_sink --floors``).

What it measures is PySpark's own part of a Python sink: each micro-batch's rows turned into Arrow
and sent to the Python workers, which read them, plus the driver's round trips to its Python
processes (``streamWriter``, ``commit``). Registered by ``benchmarks/spark_sink.py``; the workers
import it by name, so the benchmark puts the project's root on their ``PYTHONPATH``.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

FORMAT = "aioproducer-benchmark-noop"


class _Read(WriterCommitMessage):
    """What a task read: its rows."""

    def __init__(self, rows: int) -> None:
        self.rows = rows


class _NoopWriter(DataSourceStreamArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> _Read:
        return _Read(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[Any], batchId: int) -> None:
        pass

    def abort(self, messages: list[Any], batchId: int) -> None:
        pass


class NoopDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def streamWriter(self, schema: StructType, overwrite: bool) -> _NoopWriter:
        return _NoopWriter()
