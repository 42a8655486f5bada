"""Spark writes with ``transactional=True`` on real Kafka: each row once after a task retry and after a rerun.

The forced retry: the task's first attempt fails in the middle, after part of its rows reached
the log. The failure is planted upstream of the sink, in a pandas UDF of the same task, which on
attempt 0 holds back the second half of the rows until the topic's log end holds the first half
(read_uncommitted: open transactions count), then raises. Spark retries the task. With the
default at-least-once write the first attempt's rows are then in the topic twice (the control:
it shows the failure came after rows reached the log); with ``transactional=True`` a
read_committed consumer sees every row exactly once. Read back by aiokafka in both isolation levels.
The transactional writes run twice: on a cluster under transactions v2 (KIP-890 part 2, Kafka 4.3's
default) and on one under v1.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql.functions import col
from pyspark.sql.pandas.functions import pandas_udf

from aioproducer.spark import register_data_source, write_kafka
from aioproducer.testing import KafkaCluster
from conftest import kafka_or_skip, new_topic
from readback import read_isolated
from spark_support import spark  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.integration

ROWS = 2000
BATCH_ROWS = 500  # four Arrow batches per task
FAIL_FROM = 1000  # attempt 0 fails at this row, once the log holds REACHED records
# The rows the sink surely has by then: Spark's writer towards the sink's worker holds a full
# batch until it has seen the next row, which the failing UDF withholds.
REACHED = FAIL_FROM - BATCH_ROWS
PAD = 200  # value width: a 500-row Arrow batch (100 KB) is past Spark's 64 KB buffer towards the worker


def frame(session: SparkSession, start: int = 0) -> DataFrame:
    """ROWS rows in one partition, values ``id`` left-padded with zeros to PAD bytes."""
    return session.range(start, start + ROWS, numPartitions=1).selectExpr(
        f"CAST(lpad(CAST(id AS STRING), {PAD}, '0') AS BINARY) AS value",
        "CAST(CAST(id % 7 AS STRING) AS BINARY) AS key",
    )


def expected(start: int = 0) -> Counter[bytes]:
    return Counter(str(i).zfill(PAD).encode() for i in range(start, start + ROWS))


def log_end(bootstrap: str, topic: str) -> int:
    """Records in the topic's log (both partitions), committed or not."""
    # read_uncommitted: the log end offset, not the last stable offset (librdkafka's default is read_committed)
    settings = {"bootstrap.servers": bootstrap, "group.id": "spark-test-log-end", "isolation.level": "read_uncommitted"}
    consumer = Consumer(settings)
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in (0, 1))
    finally:
        consumer.close()


def fail_first_attempt_midway(value: Column, bootstrap: str, topic: str) -> Column:
    """``value`` unchanged, but attempt 0 raises at row FAIL_FROM once the log holds REACHED records.

    Runs in a Python worker of the same task as the sink, upstream of it, so the sink has
    received and sent REACHED rows when the task fails. A minute without them in the log
    raises all the same, and the tests' assertions on the log then fail.
    """

    def hold_then_fail(values: pd.Series) -> pd.Series:  # the hints tell Spark: a scalar pandas UDF
        context = TaskContext.get()
        first = int(values.iloc[0].decode())
        if context is None or context.attemptNumber() > 0 or first < FAIL_FROM:
            return values
        deadline = time.monotonic() + 60
        while log_end(bootstrap, topic) < REACHED and time.monotonic() < deadline:
            time.sleep(0.05)  # polling the broker: a log end offset has no event to wait on
        raise RuntimeError("planted failure in the middle of the task's first attempt")

    udf: Any = pandas_udf(hold_then_fail, "binary")  # type: ignore[call-overload]
    result: Column = udf(value)
    return result


def failing(df: DataFrame, cluster: KafkaCluster, topic: str) -> DataFrame:
    return df.withColumn("value", fail_first_attempt_midway(col("value"), cluster.bootstrap_servers, topic))


def config(cluster: KafkaCluster, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, **extra}


async def committed(cluster: KafkaCluster, topic: str) -> Counter[bytes]:
    return Counter(await read_isolated(cluster.bootstrap_servers, topic, [0, 1], committed=True, timeout=30))


async def everything(cluster: KafkaCluster, topic: str) -> Counter[bytes]:
    return Counter(await read_isolated(cluster.bootstrap_servers, topic, [0, 1], committed=False, timeout=30))


@pytest.fixture(scope="module", params=[2, 1], ids=["transaction.version=2", "transaction.version=1"])
def tx_cluster(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    """The transactional writes run under transactions v2 (the session node: Kafka 4.3's default) and under v1."""
    if request.param == 2:
        session: KafkaCluster = request.getfixturevalue("kafka_cluster")
        assert session.transaction_version in (None, 2)
        yield session
        return
    with kafka_or_skip(brokers=1, transaction_version=1) as cluster:
        yield cluster


@pytest.fixture
def small_batches(spark: SparkSession) -> Iterator[None]:
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH_ROWS))
    yield
    spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


@pytest.mark.usefixtures("small_batches")
async def test_at_least_once_a_retried_task_writes_its_first_rows_twice(
    spark: SparkSession, kafka_cluster: KafkaCluster
) -> None:
    """The control: the planted failure leaves the first attempt's rows in the log, so the next test proves something."""
    topic = new_topic(kafka_cluster, 2)
    stats = write_kafka(failing(frame(spark), kafka_cluster, topic), config(kafka_cluster), topic)
    assert stats.retried_tasks == 1 and stats.records == ROWS
    got = await everything(kafka_cluster, topic)
    assert set(got) == set(expected())  # nothing lost
    assert sum(got.values()) - ROWS >= REACHED  # the failed attempt's rows, again


@pytest.mark.usefixtures("small_batches")
async def test_transactional_each_row_once_after_a_task_retry_and_a_rerun(
    spark: SparkSession, tx_cluster: KafkaCluster
) -> None:
    topic = new_topic(tx_cluster, 2)
    cfg = config(tx_cluster, **{"transactional.id": f"{topic}-job"})
    stats = write_kafka(failing(frame(spark), tx_cluster, topic), cfg, topic, transactional=True, batch_id=0)
    assert stats.retried_tasks == 1
    assert stats.records == ROWS and stats.skipped_tasks == 0
    assert await committed(tx_cluster, topic) == expected()
    # The failed attempt's rows are in the log (read_uncommitted), hidden by the abort its successor wrote.
    assert sum((await everything(tx_cluster, topic)).values()) >= ROWS + REACHED

    again = write_kafka(frame(spark), cfg, topic, transactional=True, batch_id=0)  # a rerun of batch 0
    assert (again.records, again.skipped_tasks) == (0, 1)
    assert await committed(tx_cluster, topic) == expected()

    following = write_kafka(frame(spark, ROWS), cfg, topic, transactional=True, batch_id=1)
    assert (following.records, following.skipped_tasks) == (ROWS, 0)
    assert await committed(tx_cluster, topic) == expected() + expected(ROWS)


async def test_transactional_tasks_keep_their_own_progress(spark: SparkSession, tx_cluster: KafkaCluster) -> None:
    """Three partitions, three transactional ids and markers; a topic column, so a progress topic."""
    out, progress = new_topic(tx_cluster, 2), new_topic(tx_cluster, 1)
    df = spark.range(300, numPartitions=3).selectExpr(f"'{out}' AS topic", "CAST(CAST(id AS STRING) AS BINARY) AS value")
    cfg = config(tx_cluster, **{"transactional.id": f"{out}-job"})
    first = write_kafka(df, cfg, transactional=True, batch_id=5, progress_topic=progress)
    assert [t.records for t in first.tasks] == [100, 100, 100]
    rerun = write_kafka(df, cfg, transactional=True, batch_id=5, progress_topic=progress)
    assert rerun.skipped_tasks == 3 and rerun.records == 0
    older = write_kafka(df, cfg, transactional=True, batch_id=4, progress_topic=progress)
    assert older.skipped_tasks == 3  # batch ids only go forward: an older one is done too
    assert await committed(tx_cluster, out) == Counter(str(i).encode() for i in range(300))


@pytest.mark.usefixtures("small_batches")
async def test_the_data_source_commits_once_after_a_task_retry(spark: SparkSession, tx_cluster: KafkaCluster) -> None:
    """The same through ``df.write.format("aioproducer")``: the data source's commit() on the driver ends the transactions."""
    register_data_source(spark)
    topic = new_topic(tx_cluster, 2)

    def save(df: DataFrame, batch: int) -> None:
        (
            df.write.format("aioproducer")
            .option("kafka.bootstrap.servers", tx_cluster.bootstrap_servers)
            .option("kafka.transactional.id", f"{topic}-source")
            .option("topic", topic)
            .option("transactional", "true")
            .option("batch.id", str(batch))
            .mode("append")
            .save()
        )

    save(failing(frame(spark), tx_cluster, topic), 0)
    assert await committed(tx_cluster, topic) == expected()
    assert sum((await everything(tx_cluster, topic)).values()) >= ROWS + REACHED  # the failed attempt's, aborted
    save(frame(spark), 0)  # a rerun of batch 0
    assert await committed(tx_cluster, topic) == expected()
