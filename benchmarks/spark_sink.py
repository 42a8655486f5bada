"""Spark's built-in Kafka sink against ``aioproducer.spark.write_kafka``: the same DataFrames, one run.

One real Kafka node (``aioproducer.testing.KafkaCluster``) and one Spark session in local mode
(``--master``, default ``local[2]``). Two DataFrames, each cached in memory first so that
neither sink pays for computing it: 1,000,000 rows of a 100-byte value, and 100,000 rows of a
10 KB value. Each round writes each DataFrame with both sinks, in alternating order, to a fresh
6-partition topic, after one untimed small write with each (Python workers started, classes
loaded); the report is the median time per sink and the ratio of throughputs. Every
write is checked by the topic's high watermarks: exactly the DataFrame's rows, or the run fails.

Both sinks get the same producer settings (``acks=all``, ``linger.ms=5``, idempotence on: both
producers' defaults), and each its own ``batch.size`` (Spark's sink Java's 16384, aioproducer's
sinks 262144: ``aioproducer.spark.sink.SINK_BATCH_SIZE``) unless ``--batch-size`` gives both one. The built-in sink is ``org.apache.spark:spark-sql-kafka-0-10_2.13`` of the
installed PySpark's version and its runtime dependencies, fetched with Maven (as the broker's
jars are) into ``~/.cache/aioproducer/spark/<version>`` and given to Spark as ``spark.jars``;
jars that PySpark already ships are left out.

``--streaming``: the same rows as a stream. Each DataFrame is first written as Parquet files
(untimed), and each round runs one Structured Streaming query per sink over them
(``readStream.parquet``, ``maxFilesPerTrigger`` files per micro-batch, ``availableNow``), Spark's
``writeStream.format("kafka")`` against ``writeStream.format("aioproducer")`` (at least once), a
fresh checkpoint each; the time is the query's, from ``start()`` to its end. ``--floors`` adds two
sinks that write nothing to each round, Spark's ``noop`` and a Python data source's
(``benchmarks/spark_noop.py``): what Spark and PySpark's Python data sources cost before any sink
writes a record.

    python -m benchmarks.spark_sink [--rounds R] [--scale 0.1] [--streaming [--floors]]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyspark
from pyspark.sql import DataFrame, SparkSession

from aioproducer.spark import register_data_source, write_kafka
from aioproducer.testing import KafkaCluster
from benchmarks.spark_noop import FORMAT as NOOP_FORMAT
from benchmarks.spark_noop import NoopDataSource
from aioproducer.testing.kafka import SERVER_JVM_OPTIONS, KafkaUnavailableError, maven_classpath, require_tool

SINKS = ("spark built-in", "aioproducer")
#: ``--floors``: what a query costs with sinks that write nothing, Spark's ``noop`` and a Python data source's.
FLOORS = ("spark noop", "python no-op")
PRODUCER = {"acks": "all", "linger.ms": "5"}

def sink_jars(version: str) -> list[Path]:
    """The built-in Kafka sink's jars for Spark ``version``, minus those PySpark already has."""
    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aioproducer" / "spark" / version
    libs = home / "libs"
    if not (home / "libs.complete").exists():
        mvn = require_tool("mvn", "to fetch Spark's Kafka sink from Maven Central")
        home.mkdir(parents=True, exist_ok=True)
        try:
            maven_classpath(mvn, "spark-kafka-sink", [("org.apache.spark", "spark-sql-kafka-0-10_2.13", version)], home)
        except KafkaUnavailableError as exc:
            raise SystemExit(
                f"{exc}\nA PySpark release can reach PyPI before its jars reach Maven Central: install a PySpark "
                "whose version is there (pip install 'pyspark[sql]==4.2.0')."
            ) from exc
        (home / "libs.complete").write_text(version + "\n")
    shipped = {_artifact(p.name) for p in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    return sorted(p for p in libs.glob("*.jar") if _artifact(p.name) not in shipped)


def _artifact(jar: str) -> str:
    """``kafka-clients-3.9.1.jar`` → ``kafka-clients``: the name without its version."""
    parts = jar.removesuffix(".jar").split("-")
    while parts and parts[-1][:1].isdigit():
        parts.pop()
    return "-".join(parts)


def frames(spark: SparkSession, scale: float) -> dict[str, tuple[DataFrame, int]]:
    small, large = int(1_000_000 * scale), int(100_000 * scale)
    out = {
        f"{small:,} x 100 B": (spark.range(small).selectExpr("CAST(repeat('x', 100) AS BINARY) AS value"), small),
        f"{large:,} x 10 KB": (spark.range(large).selectExpr("CAST(repeat('y', 10240) AS BINARY) AS value"), large),
    }
    for df, rows in out.values():
        df.persist()
        assert df.count() == rows  # computed and cached before any sink reads it
    return out


def write(sink: str, df: DataFrame, bootstrap: str, topic: str, settings: dict[str, str]) -> float:
    started = time.perf_counter()
    if sink == "aioproducer":
        write_kafka(df, {"bootstrap.servers": bootstrap, **settings}, topic=topic)
    else:
        writer = df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
        for key, value in settings.items():
            writer = writer.option(f"kafka.{key}", value)
        writer.mode("append").save()
    return time.perf_counter() - started


FILES, FILES_PER_TRIGGER = 8, 2  # --streaming: four micro-batches per query


def stream(
    sink: str, folder: Path, checkpoint: Path, spark: SparkSession, bootstrap: str, topic: str, settings: dict[str, str]
) -> float:
    """One streaming query over ``folder``'s Parquet files into ``topic``; its wall time."""
    source = spark.readStream.schema("value binary").option("maxFilesPerTrigger", FILES_PER_TRIGGER).parquet(str(folder))
    formats = {"aioproducer": "aioproducer", "spark built-in": "kafka", "spark noop": "noop", "python no-op": NOOP_FORMAT}
    writer = source.writeStream.format(formats[sink])
    writer = writer.option("kafka.bootstrap.servers", bootstrap).option("topic", topic).option("checkpointLocation", str(checkpoint))
    for key, value in settings.items():
        writer = writer.option(f"kafka.{key}", value)
    started = time.perf_counter()
    writer.trigger(availableNow=True).start().awaitTermination()
    return time.perf_counter() - started


def as_files(spark: SparkSession, data: dict[str, tuple[DataFrame, int]], home: Path) -> dict[str, Path]:
    """Each DataFrame written once as FILES Parquet files: the streaming queries' input."""
    folders = {}
    for n, (name, (df, _)) in enumerate(data.items()):
        folders[name] = home / f"input-{n}"
        df.repartition(FILES).write.parquet(str(folders[name]))
    return folders


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the row counts (smoke test: 0.05)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--streaming", action="store_true", help="Structured Streaming queries instead of batch writes")
    parser.add_argument("--floors", action="store_true",
                        help="with --streaming: also Spark's noop sink and a Python data source that writes nothing")
    parser.add_argument("--jars-version", default=pyspark.__version__, help="the Kafka connector's version (Maven Central may lag PyPI)")
    parser.add_argument("--batch-size", type=int, default=None,
                        help="give both sinks this batch.size (default: each its own, 16384 for Spark's, 262144 for aioproducer's)")
    args = parser.parse_args(argv)
    settings = PRODUCER if args.batch_size is None else {**PRODUCER, "batch.size": str(args.batch_size)}
    jars = sink_jars(args.jars_version)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = str(Path(__file__).resolve().parent.parent)  # the workers import benchmarks.spark_noop by name
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    floors = FLOORS if args.streaming and args.floors else ()
    spark = (
        SparkSession.builder.master(args.master).appName("aioproducer-spark-sink-benchmark")
        .config("spark.jars", ",".join(str(j) for j in jars)).config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "4g").getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register_data_source(spark)
    spark.dataSource.register(NoopDataSource)
    times: dict[tuple[str, str], list[float]] = {}
    home = Path(tempfile.mkdtemp(prefix="spark-sink-bench-"))
    try:
        with KafkaCluster(brokers=1, topics={}, jvm_options=SERVER_JVM_OPTIONS) as cluster:
            data = frames(spark, args.scale)
            warm = spark.range(1000).selectExpr("CAST(repeat('w', 100) AS BINARY) AS value")
            folders = as_files(spark, {"warm": (warm, 1000), **data}, home) if args.streaming else {}
            for sink in SINKS:  # untimed: starts the Python workers and loads the sink's classes
                topic = f"warm-{sink.replace(' ', '-')}"
                cluster.create_topic(topic, partitions=6)
                if args.streaming:
                    stream(sink, folders["warm"], home / f"checkpoint-{topic}", spark, cluster.bootstrap_servers, topic, settings)
                else:
                    write(sink, warm, cluster.bootstrap_servers, topic, settings)
            n = 0
            for round_ in range(args.rounds):
                for name, (df, rows) in data.items():
                    order = SINKS if round_ % 2 == 0 else SINKS[::-1]
                    for sink in (*order, *floors):
                        n += 1
                        topic = f"bench-{n}"
                        cluster.create_topic(topic, partitions=6)
                        if args.streaming:
                            seconds = stream(
                                sink, folders[name], home / f"checkpoint-{n}", spark, cluster.bootstrap_servers, topic, settings
                            )
                        else:
                            seconds = write(sink, df, cluster.bootstrap_servers, topic, settings)
                        written = rows if sink in FLOORS else sum(cluster.high_watermarks(topic).values())
                        if written != rows:
                            print(f"FAILED: {sink} wrote {written} of {rows} rows to {topic}", file=sys.stderr)
                            return 1
                        times.setdefault((name, sink), []).append(seconds)
                        print(f"round {round_ + 1} {name:>18} {sink:>15}: {seconds:6.2f} s", file=sys.stderr)
    finally:
        spark.stop()
        shutil.rmtree(home, ignore_errors=True)
    report(times, args, pyspark.__version__)
    return 0


def report(times: dict[tuple[str, str], list[float]], args: Any, version: str) -> None:
    mode = f"streaming (availableNow, {FILES} files, {FILES_PER_TRIGGER} per micro-batch)" if args.streaming else "batch"
    sizes = "each sink's own batch.size" if args.batch_size is None else f"batch.size {args.batch_size} for both sinks"
    print(f"Spark {version}, master {args.master}, {mode}, {args.rounds} rounds, median seconds; one Kafka node; {os.cpu_count()} cores; {sizes}")
    print(f"load average at the end: {os.getloadavg()[0]:.2f} (1 min)")
    print()
    column = '`writeStream.format("aioproducer")`' if args.streaming else "aioproducer `write_kafka`"
    floors = [sink for sink in FLOORS if any(s == sink for _, s in times)]
    extra = "".join(f" | {sink} (floor)" for sink in floors)
    print(f"| DataFrame | Spark's built-in sink | {column} | aioproducer / built-in (throughput){extra} |")
    print("|---|---|---|---|" + "---|" * len(floors))
    for name in dict.fromkeys(name for name, _ in times):
        builtin = statistics.median(times[(name, SINKS[0])])
        ours = statistics.median(times[(name, SINKS[1])])
        cells = "".join(f" | {statistics.median(times[(name, sink)]):.2f} s" for sink in floors)
        print(f"| {name} | {builtin:.2f} s | {ours:.2f} s | {builtin / ours:.2f}x{cells} |")


if __name__ == "__main__":
    sys.exit(main())
