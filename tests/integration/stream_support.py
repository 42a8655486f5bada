"""What the streaming tests share: input files, a query's builder, and reading the topic back.

Input: JSON-lines files, one per micro-batch (``maxFilesPerTrigger`` 1), each row a key ``k<n % 7>``
and a value ``k<n % 7>|<n>`` (zero-padded): the value says its key and its place, so the
order per key can be checked on values alone. Spark's file source keeps the files of each
micro-batch in its checkpoint, so a micro-batch run again after a restart reads the same rows.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.readwriter import DataStreamWriter

from readback import read_isolated

SCHEMA = "key string, value string"
KEYS = 7


def value_of(n: int, pad: int = 0) -> str:
    """Row ``n``'s value, ``pad`` dots longer."""
    return f"k{n % KEYS}|{n:08d}" + "." * pad


def number_of(value: str) -> int:
    return int(value.split("|")[1].rstrip("."))


def write_file(folder: Path, start: int, rows: int, pad: int = 0) -> list[str]:
    """One input file with rows ``start .. start + rows - 1``; returns their values. Written whole, then renamed in."""
    folder.mkdir(parents=True, exist_ok=True)
    values = [value_of(n, pad) for n in range(start, start + rows)]
    lines = "".join(json.dumps({"key": v.split("|")[0], "value": v}) + "\n" for v in values)
    temporary = folder.parent / f".{folder.name}-{start}.tmp"
    temporary.write_text(lines)
    temporary.rename(folder / f"rows-{start:08d}.json")
    return values


def file_stream(
    spark: SparkSession,
    folder: Path,
    bootstrap: str,
    topic: str,
    checkpoint: Path,
    options: dict[str, str] | None = None,
    transform: Callable[[DataFrame], DataFrame] = lambda df: df,
) -> DataStreamWriter:
    """``folder``'s files, one per micro-batch, through ``transform``, into ``topic`` through ``writeStream.format("aioproducer")``."""
    rows = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(folder))
    writer = (
        transform(rows)
        .writeStream.format("aioproducer")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.linger.ms", "5")
        .option("topic", topic)
        .option("checkpointLocation", str(checkpoint))
    )
    for name, value in (options or {}).items():
        writer = writer.option(name, value)
    return writer


async def read_values(bootstrap: str, topic: str, partitions: int, *, committed: bool) -> list[str]:
    """Every value of ``topic``, in log order per partition (read_committed or read_uncommitted)."""
    values = await read_isolated(bootstrap, topic, range(partitions), committed=committed, timeout=60)
    return [v.decode() for v in values]


def assert_each_once_in_order(values: list[str], expected: list[str]) -> None:
    """Every expected value exactly once, nothing else, and per key in the order of the input."""
    counts = Counter(values)
    missing = [v for v in expected if v not in counts]
    twice = {v: c for v, c in counts.items() if c > 1}
    extra = set(counts) - set(expected)
    assert not missing and not twice and not extra, f"missing {missing[:5]} ({len(missing)}), twice {list(twice)[:5]} ({len(twice)}), extra {len(extra)}"
    assert_in_order_per_key(values)


def assert_in_order_per_key(values: list[str]) -> None:
    """Per key, each value's number is above the last one's (a duplicate may repeat one: at least once)."""
    last: dict[str, int] = {}
    for value in values:
        key = value.split("|")[0]
        place = number_of(value)
        assert place >= last.get(key, -1), f"key {key}: {place} after {last[key]}"
        last[key] = place


def progress_rows(progress: list[dict[str, Any]]) -> dict[int, int]:
    """Input rows per micro-batch id, from a query's ``recentProgress``."""
    return {int(p["batchId"]): int(p["numInputRows"]) for p in progress}
