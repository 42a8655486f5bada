"""One Arrow record batch of sink columns → what the producer takes (runs on the executors).

The task hands each batch to ``Producer.send_arrow()`` as Arrow (``sink_batches_by_topic``:
the columns renamed as ``send_arrow`` names them, split by topic, no copy but the split). For
a producer ``send_arrow()`` refuses, ``RecordColumns`` turns it into Python values:

Spark hands each task its rows as Arrow record batches (``mapInArrow``, or a data source's
Arrow writer). Columns are converted whole, by pyarrow, not row by row: strings to their UTF-8
bytes, timestamps to epoch milliseconds, headers to ``(key, value)`` pairs. A record's values are
then plain ``bytes``/``int``/``None``, which is what the producer's fast path takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from aioproducer.spark.columns import SinkColumns

__all__ = ["RecordColumns", "canonical_columns", "sink_batches_by_topic", "sink_payload_bytes"]


def canonical_columns(batch: pa.RecordBatch) -> SinkColumns:
    """The sink columns of a batch ``sink_batches_by_topic`` renamed (their own names, no topic)."""
    return SinkColumns(**{name: name for name in batch.schema.names})

_UNITS_PER_MS = {"s": 1, "ms": 1, "us": 1000, "ns": 1_000_000}


@dataclass
class RecordColumns:
    """The records of one Arrow batch, column by column (None: the column is absent)."""

    values: list[bytes | None]
    keys: list[bytes | None] | None
    topics: list[str | None] | None
    partitions: list[int | None] | None
    headers: list[list[tuple[str, bytes | None]] | None] | None
    timestamps: list[int | None] | None
    #: Key, value and header value bytes, summed by Arrow: the task's ``bytes`` statistic.
    payload_bytes: int

    @classmethod
    def from_batch(cls, batch: pa.RecordBatch, columns: SinkColumns) -> RecordColumns:
        get = batch.column
        values = _as_bytes(get(columns.value))
        keys = _as_bytes(get(columns.key)) if columns.key is not None else None
        size = _byte_count(get(columns.value)) + (_byte_count(get(columns.key)) if columns.key is not None else 0)
        headers = None
        if columns.headers is not None:
            headers, header_bytes = _headers(get(columns.headers))
            size += header_bytes
        return cls(
            values=values,
            keys=keys,
            topics=get(columns.topic).to_pylist() if columns.topic is not None else None,
            partitions=get(columns.partition).to_pylist() if columns.partition is not None else None,
            headers=headers,
            timestamps=_epoch_ms(get(columns.timestamp)) if columns.timestamp is not None else None,
            payload_bytes=size,
        )

    @property
    def plain(self) -> bool:
        """Whether only values and keys are set, to one topic: the records ``send_many()`` takes."""
        return self.topics is None and self.partitions is None and self.headers is None and self.timestamps is None


def _as_bytes(array: pa.Array) -> list[Any]:
    if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
        array = array.cast(pa.binary() if pa.types.is_string(array.type) else pa.large_binary())
    return array.to_pylist()  # type: ignore[no-any-return]


def _byte_count(array: pa.Array) -> int:
    """The bytes of a binary or string column's values; of another type (a column a serializer turns into bytes), its Arrow size."""
    if not (pa.types.is_binary(array.type) or pa.types.is_string(array.type)
            or pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type)):
        return int(array.nbytes)
    total = pc.sum(pc.binary_length(array)).as_py()
    return int(total or 0)


def _epoch_ms(array: pa.Array) -> list[int | None]:
    """Timestamps (any unit, any time zone: Arrow stores UTC) → epoch milliseconds, rounded down as Spark's ``unix_millis``."""
    per_ms = _UNITS_PER_MS[array.type.unit]
    raw: list[int | None] = array.cast(pa.int64()).to_pylist()
    if array.type.unit == "s":
        return [None if t is None else t * 1000 for t in raw]
    return [None if t is None else t // per_ms for t in raw]


def _headers(array: pa.Array) -> tuple[list[list[tuple[str, bytes | None]] | None], int]:
    rows: list[list[dict[str, Any]] | None] = array.to_pylist()
    out: list[list[tuple[str, bytes | None]] | None] = []
    size = 0
    for row in rows:
        if row is None:
            out.append(None)
            continue
        pairs = [(h["key"], h["value"]) for h in row]
        size += sum(len(v) for _, v in pairs if v is not None)
        out.append(pairs)
    return out, size


def sink_batches_by_topic(
    batch: pa.RecordBatch, columns: SinkColumns, topic: str | None
) -> list[tuple[str | None, pa.RecordBatch]]:
    """``batch`` as ``send_arrow()`` takes it: (topic, rows) per topic, the columns under their sink names.

    The DataFrame's names (any case) become ``value``, ``key``, ... without copying a column.
    With a ``topic`` column the rows are split by topic by Arrow (a filter per distinct topic;
    order within a topic kept); rows with a null topic come last, under None.
    """
    named = [(name, canonical) for name, canonical in zip(
        (columns.value, columns.key, columns.partition, columns.headers, columns.timestamp),
        ("value", "key", "partition", "headers", "timestamp"),
    ) if name is not None]
    rows = pa.RecordBatch.from_arrays([batch.column(name) for name, _ in named], names=[c for _, c in named])
    if columns.topic is None:
        return [(topic, rows)]
    topics = batch.column(columns.topic)
    out: list[tuple[str | None, pa.RecordBatch]] = []
    for name in pc.unique(topics.drop_null()).to_pylist():
        out.append((name, rows.filter(pc.equal(topics, name))))
    if topics.null_count:
        out.append((None, rows.filter(pc.is_null(topics))))
    return out


def sink_payload_bytes(batch: pa.RecordBatch, columns: SinkColumns) -> int:
    """Key, value and header value bytes of ``batch``, summed by Arrow: the task's ``bytes`` statistic."""
    size = _byte_count(batch.column(columns.value))
    if columns.key is not None:
        size += _byte_count(batch.column(columns.key))
    if columns.headers is not None:
        entries = pc.list_flatten(batch.column(columns.headers))
        if len(entries):
            size += _byte_count(pc.struct_field(entries, "value"))
    return size
