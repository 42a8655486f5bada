"""Which of the Kafka sink's columns a DataFrame has: checked on the driver, before any task runs.

The columns are those of Spark's built-in Kafka sink (``df.write.format("kafka")``): ``value``
(required; binary or string), ``key`` (binary or string), ``topic`` (string; required unless a
topic is given to the call), ``partition`` (int), ``headers``
(``array<struct<key:string,value:binary>>``), plus ``timestamp`` (timestamp), which the built-in
sink does not take. Names match case-insensitively, as Spark resolves columns by default.

Unlike the built-in sink, a column with any other name is an error, not silently dropped: a
misspelt ``heders`` would otherwise lose every header without a word. Select the columns to write.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
    TimestampType,
)

__all__ = ["SinkColumns", "plan_columns", "SINK_COLUMNS"]

#: The column names the sink reads, in the order their rules are listed in the module docstring.
SINK_COLUMNS = ("value", "key", "topic", "partition", "headers", "timestamp")

_HEADERS_TYPE = "array<struct<key:string,value:binary>>"


@dataclass(frozen=True)
class SinkColumns:
    """The DataFrame's own name of each sink column it has (None: absent). Shipped to the executors."""

    value: str
    key: str | None = None
    topic: str | None = None
    partition: str | None = None
    headers: str | None = None
    timestamp: str | None = None

    @property
    def names(self) -> list[str]:
        """The DataFrame's names of the columns present, in a fixed order: what the tasks are given."""
        found = (self.value, self.key, self.topic, self.partition, self.headers, self.timestamp)
        return [name for name in found if name is not None]


def plan_columns(
    schema: StructType, topic: str | None, what: str, *, serialized: frozenset[str] = frozenset()
) -> SinkColumns:
    """Check ``schema`` against the sink's column rules; raise ``ValueError``/``TypeError`` naming ``what``.

    ``topic`` is the topic given to the call: with it, a ``topic`` column is ignored (as the
    built-in sink's ``topic`` option overrides the column); without it, the column is required.
    ``serialized`` names the columns (``"key"``, ``"value"``) a configured serializer turns into
    bytes: they may be of any type (a struct for Avro: each row reaches it as a dict).
    """
    if topic is not None and (not isinstance(topic, str) or not topic):
        raise ValueError(f"{what}: topic must be a non-empty string or None, not {topic!r}")
    found: dict[str, str] = {}
    unknown: list[str] = []
    for field in schema.fields:
        canonical = field.name.lower()
        if canonical not in SINK_COLUMNS:
            unknown.append(field.name)
        elif canonical in found:
            raise ValueError(f"{what}: the DataFrame has two columns named {canonical!r} ({found[canonical]!r}, {field.name!r})")
        else:
            if canonical not in serialized:
                _check_type(canonical, field.name, field.dataType, what)
            found[canonical] = field.name
    have = [f.name for f in schema.fields]
    if unknown:
        raise ValueError(
            f"{what}: the DataFrame has column(s) {unknown} that the Kafka sink does not read; it reads "
            f"{list(SINK_COLUMNS)} (value required). Select the columns to write, for example "
            "df.selectExpr('CAST(id AS STRING) AS key', 'to_json(struct(*)) AS value')"
        )
    if "value" not in found:
        raise ValueError(f"{what}: the DataFrame has no 'value' column (binary or string), which is required; its columns: {have}")
    if topic is None and "topic" not in found:
        raise ValueError(f"{what}: no topic: give topic=... or a string 'topic' column (the DataFrame's columns: {have})")
    return SinkColumns(
        value=found["value"],
        key=found.get("key"),
        topic=None if topic is not None else found.get("topic"),
        partition=found.get("partition"),
        headers=found.get("headers"),
        timestamp=found.get("timestamp"),
    )


def _check_type(canonical: str, name: str, data_type: DataType, what: str) -> None:
    if canonical in ("value", "key"):
        ok, expected = isinstance(data_type, (BinaryType, StringType)), "binary or string"
    elif canonical == "topic":
        ok, expected = isinstance(data_type, StringType), "string"
    elif canonical == "partition":
        ok, expected = isinstance(data_type, IntegerType), "int"
    elif canonical == "timestamp":
        ok, expected = isinstance(data_type, TimestampType), "timestamp"
    else:
        ok, expected = _is_headers_type(data_type), _HEADERS_TYPE
    if not ok:
        raise TypeError(f"{what}: column {name!r} is {data_type.simpleString()}; the Kafka sink takes {expected} there")


def _is_headers_type(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = data_type.elementType.fields
    return (
        len(fields) == 2
        and fields[0].name == "key"
        and isinstance(fields[0].dataType, StringType)
        and fields[1].name == "value"
        and isinstance(fields[1].dataType, BinaryType)
    )
