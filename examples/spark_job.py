"""A PySpark batch job: a CSV file (or generated rows) → a DataFrame → Kafka, with ``write_kafka``.

Each CSV row ``order_id,customer,amount`` becomes one record: key ``customer`` (a customer's
orders go to one Kafka partition, in file order as far as one Spark task reads them), value the
row as JSON, header ``source`` the file name.
The job prints the write's statistics. ``--transactional`` writes exactly once per ``--batch-id``
(run it twice with the same id: the second run writes nothing).

    python examples/spark_job.py --bootstrap-servers 127.0.0.1:9092 --topic orders --csv orders.csv
    python examples/spark_job.py --rows 100000 --topic orders          # an embedded mock cluster

Without ``--bootstrap-servers`` the job starts librdkafka's mock cluster in-process
(``aioproducer[testing]``). Spark runs in local mode (``--master``, default ``local[2]``), its
Python workers on this interpreter.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from aioproducer.spark import write_kafka


def orders(spark: SparkSession, csv: Path | None, rows: int) -> DataFrame:
    """The job's input: the CSV file, or ``rows`` generated orders with the same columns."""
    if csv is not None:
        df = spark.read.csv(str(csv), header=True, schema="order_id long, customer string, amount double")
        source = csv.name
    else:
        df = spark.range(rows).selectExpr(
            "id AS order_id", "concat('customer-', CAST(id % 97 AS STRING)) AS customer", "round(id * 0.37, 2) AS amount"
        )
        source = "generated"
    return df.select(
        F.col("customer").alias("key"),
        F.to_json(F.struct("order_id", "customer", "amount")).alias("value"),
        F.array(F.struct(F.lit("source").alias("key"), F.lit(source).cast("binary").alias("value"))).alias("headers"),
    )


@contextlib.contextmanager
def cluster(bootstrap: str | None, topic: str) -> Iterator[str]:
    """The given bootstrap servers, or an embedded mock cluster with ``topic`` (6 partitions)."""
    if bootstrap:
        yield bootstrap
        return
    from aioproducer.testing import MockCluster

    with MockCluster(brokers=3, topics={topic: 6}) as mock:
        print(f"embedded mock cluster at {mock.bootstrap_servers}", file=sys.stderr)
        yield mock.bootstrap_servers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--bootstrap-servers", help="Kafka to write to (default: an embedded mock cluster)")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--csv", type=Path, help="input CSV with header order_id,customer,amount")
    parser.add_argument("--rows", type=int, default=10_000, help="generated rows when no --csv (default 10000)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--transactional", action="store_true", help="exactly once, with --transactional-id and --batch-id")
    parser.add_argument("--transactional-id", default="spark-job", help="prefix of the tasks' transactional ids")
    parser.add_argument("--batch-id", type=int, default=0)
    args = parser.parse_args(argv)
    if args.csv is not None and not args.csv.is_file():
        parser.error(f"--csv {args.csv}: no such file")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers import aioproducer from here too
    spark = SparkSession.builder.master(args.master).appName("aioproducer-spark-job").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        with cluster(args.bootstrap_servers, args.topic) as bootstrap:
            config: dict[str, object] = {"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4"}
            if args.transactional:
                config["transactional.id"] = args.transactional_id
            stats = write_kafka(
                orders(spark, args.csv, args.rows),
                config,
                topic=args.topic,
                transactional=args.transactional,
                batch_id=args.batch_id if args.transactional else None,
            )
            print(stats)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
