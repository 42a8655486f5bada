"""A Spark Structured Streaming job into Kafka with ``writeStream.format("aioproducer")``.

The input is one of: JSON-lines files landing in a folder (``--input``: ``{"key": ..., "value": ...}``
per line, one file per micro-batch by default), Spark's rate source (``--rate``: rows per
second, key ``value % 16``), or a Kafka topic read by Spark's own Kafka source
(``--kafka-source-topic``, from its earliest offset, ``--max-offsets-per-trigger`` records per
micro-batch; needs Spark's Kafka connector in ``--jars``).
Each row becomes one record with the row's key and value.

At least once by default; ``--transactional-id`` writes exactly once, also across restarts from
the ``--checkpoint`` folder (kill the job, run it again with the same checkpoint: each row is
in the topic once for ``read_committed`` consumers). ``--sink kafka`` writes with Spark's own
Kafka sink instead, for comparison (``--jars``; at least once). ``--trigger``:
``availableNow`` (what is there, then stop), ``once``, or a processing-time interval such as
``"1 second"`` (runs until killed).

    python examples/spark_streaming.py --bootstrap-servers 127.0.0.1:9092 --topic out \\
        --checkpoint /tmp/ck --input /tmp/incoming --transactional-id orders-stream

Spark runs in local mode (``--master``, default ``local[2]``), its Python workers on this interpreter.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from aioproducer.spark import register_data_source

SINKS = ("aioproducer", "kafka")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bootstrap-servers", required=True, help="Kafka to write to (and to read --kafka-source-topic from)")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--checkpoint", type=Path, required=True, help="the query's checkpoint folder: where a restart resumes")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", type=Path, help="a folder of JSON-lines files with key and value")
    source.add_argument("--rate", type=int, help="Spark's rate source: rows per second")
    source.add_argument("--kafka-source-topic", help="a Kafka topic, read by Spark's Kafka source from its earliest offset")
    parser.add_argument("--max-files-per-trigger", type=int, default=1, help="files per micro-batch with --input (default 1)")
    parser.add_argument("--max-offsets-per-trigger", type=int, help="records per micro-batch with --kafka-source-topic (default: all)")
    parser.add_argument("--trigger", default="availableNow", help='availableNow (default), once, or an interval such as "1 second"')
    parser.add_argument("--transactional-id", help="exactly once: the prefix of the tasks' transactional ids")
    parser.add_argument("--sink", choices=SINKS, default="aioproducer", help="kafka: Spark's own sink, for comparison")
    parser.add_argument("--metrics-path", help="a folder for each micro-batch's statistics (aioproducer.spark.sink_metrics)")
    parser.add_argument("--jars", default="", help="comma-separated jars for Spark: its Kafka connector, for --sink kafka or --kafka-source-topic")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    if args.input is not None and not args.input.is_dir():
        parser.error(f"--input {args.input}: no such folder")
    if args.max_offsets_per_trigger is not None and (args.kafka_source_topic is None or args.max_offsets_per_trigger < 1):
        parser.error("--max-offsets-per-trigger takes a positive count, with --kafka-source-topic")
    if args.sink == "kafka" and (args.transactional_id or args.metrics_path):
        parser.error("--sink kafka is Spark's own sink: it takes neither --transactional-id nor --metrics-path")
    return args


def session(args: argparse.Namespace) -> SparkSession:
    """A local Spark session whose Python workers import aioproducer from this interpreter."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(args.master).appName("aioproducer-spark-streaming").config("spark.ui.enabled", "false")
    if args.jars:
        builder = builder.config("spark.jars", args.jars)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register_data_source(spark)
    return spark


def rows(spark: SparkSession, args: argparse.Namespace) -> DataFrame:
    """The stream's rows, as a key and a value column."""
    if args.input is not None:
        files = spark.readStream.schema("key string, value string").option("maxFilesPerTrigger", args.max_files_per_trigger)
        return files.json(str(args.input))
    if args.rate is not None:
        rate = spark.readStream.format("rate").option("rowsPerSecond", args.rate).load()
        return rate.selectExpr("CAST(value % 16 AS STRING) AS key", "CAST(value AS STRING) AS value")
    kafka = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("subscribe", args.kafka_source_topic)
        .option("startingOffsets", "earliest")  # a new query reads the topic from its start; a restart, from its checkpoint
    )
    if args.max_offsets_per_trigger is not None:
        kafka = kafka.option("maxOffsetsPerTrigger", args.max_offsets_per_trigger)
    return kafka.load().selectExpr("key", "value")


def start(df: DataFrame, args: argparse.Namespace) -> StreamingQuery:
    """Start the query into ``--topic`` with the chosen sink and trigger."""
    writer = (
        df.writeStream.format(args.sink)
        .option("kafka.bootstrap.servers", args.bootstrap_servers)
        .option("topic", args.topic)
        .option("checkpointLocation", str(args.checkpoint))
    )
    if args.sink == "aioproducer":
        writer = writer.option("kafka.linger.ms", "5")
        if args.transactional_id:
            writer = writer.option("transactional", "true").option("kafka.transactional.id", args.transactional_id)
        if args.metrics_path:
            writer = writer.option("metrics.path", args.metrics_path)
    if args.trigger == "availableNow":
        writer = writer.trigger(availableNow=True)
    elif args.trigger == "once":
        writer = writer.trigger(once=True)
    else:
        writer = writer.trigger(processingTime=args.trigger)
    return writer.start()


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    spark = session(args)
    try:
        query = start(rows(spark, args), args)
        query.awaitTermination()
        written = sum(int(p["numInputRows"]) for p in query.recentProgress)
        print(f"query {query.id}: {len(query.recentProgress)} micro-batches, {written} rows")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
