"""Spark writes with ``transactional=True`` on real Kafka: each row once after a task retry and after a rerun.

A task's first attempt is killed, as an executor crash, after part of its rows reached the log:
Spark's Python workers get SIGKILL once the log holds them, while the task waits for its slow
last rows; Spark retries the task. With the default at-least-once write the killed attempt's
rows are then in the topic twice; with ``transactional=True`` a read_committed consumer sees
every row exactly once, and a rerun of the same batch id writes nothing. Read back by aiokafka
in read_committed and read_uncommitted modes.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from aioproducer.spark import write_kafka
from aioproducer.testing import KafkaCluster
from conftest import new_topic
from readback import read_isolated
from spark_support import spark  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.integration

ROWS = 2000
BATCH_ROWS = 500  # four Arrow batches per task
SLOW_FROM = 1000  # rows from here on take 5 ms each (Java's Thread.sleep, in the JVM): the task is caught mid-way


def frame(session: SparkSession, start: int = 0) -> DataFrame:
    """ROWS rows in one partition, values ``str(id)``; the first SLOW_FROM come at once, the rest slowly."""
    slow = f"CASE WHEN id - {start} >= {SLOW_FROM} THEN reflect('java.lang.Thread', 'sleep', CAST(5 AS BIGINT)) END"
    return session.range(start, start + ROWS, numPartitions=1).selectExpr(
        f"CAST(concat(CAST(id AS STRING), coalesce(left({slow}, 0), '')) AS BINARY) AS value",
        "CAST(CAST(id % 7 AS STRING) AS BINARY) AS key",
    )


def expected(start: int = 0) -> Counter[bytes]:
    return Counter(str(i).encode() for i in range(start, start + ROWS))


class WorkerKiller:
    """Kills Spark's Python workers (``SIGKILL``, as a crash) once ``records`` are in the topic's log.

    The log's end counts open transactions too (read_uncommitted): the records of the attempt
    that is running. A killed task fails; Spark starts new workers and runs it again.
    """

    def __init__(self, bootstrap: str, topic: str, records: int) -> None:
        self.killed: list[int] = []
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(bootstrap, topic, records), daemon=True)

    def __enter__(self) -> WorkerKiller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join(30)

    def _run(self, bootstrap: str, topic: str, records: int) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            # read_uncommitted: the end of the log, open transactions included (librdkafka's default is the LSO)
            {"bootstrap.servers": bootstrap, "group.id": "spark-test-watermarks", "isolation.level": "read_uncommitted"}
        )
        try:
            while not self._done.is_set():
                ends = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in (0, 1)]
                if sum(ends) >= records:
                    self.killed = kill_python_workers()
                    return
                self._done.wait(0.02)  # polling the broker: a watermark has no event to wait on
        finally:
            consumer.close()


def kill_python_workers() -> list[int]:
    """SIGKILL every process running ``pyspark.daemon`` (the daemon and the workers it forked)."""
    killed = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read()
        except OSError:
            continue
        if b"pyspark.daemon" in command:
            try:
                os.kill(int(entry), signal.SIGKILL)
                killed.append(int(entry))
            except ProcessLookupError:
                pass
    return killed


def config(cluster: KafkaCluster, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, **extra}


async def committed(cluster: KafkaCluster, topic: str) -> Counter[bytes]:
    return Counter(await read_isolated(cluster.bootstrap_servers, topic, [0, 1], committed=True, timeout=30))


async def everything(cluster: KafkaCluster, topic: str) -> Counter[bytes]:
    return Counter(await read_isolated(cluster.bootstrap_servers, topic, [0, 1], committed=False, timeout=30))


@pytest.fixture
def small_batches(spark: SparkSession) -> Iterator[None]:
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH_ROWS))
    yield
    spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


@pytest.mark.usefixtures("small_batches")
async def test_at_least_once_a_retried_task_writes_its_first_rows_twice(
    spark: SparkSession, kafka_cluster: KafkaCluster
) -> None:
    """The control: the crash does leave the first attempt's rows in the log, so the next test proves something."""
    topic = new_topic(kafka_cluster, 2)
    with WorkerKiller(kafka_cluster.bootstrap_servers, topic, SLOW_FROM) as killer:
        stats = write_kafka(frame(spark), config(kafka_cluster), topic)
    assert killer.killed and stats.retried_tasks == 1
    got = await everything(kafka_cluster, topic)
    assert set(got) == set(expected())  # nothing lost
    assert sum(got.values()) - ROWS >= SLOW_FROM  # the killed attempt's rows, again


@pytest.mark.usefixtures("small_batches")
async def test_transactional_each_row_once_after_a_task_retry_and_a_rerun(
    spark: SparkSession, kafka_cluster: KafkaCluster
) -> None:
    topic = new_topic(kafka_cluster, 2)
    cfg = config(kafka_cluster, **{"transactional.id": f"{topic}-job"})
    with WorkerKiller(kafka_cluster.bootstrap_servers, topic, SLOW_FROM) as killer:
        stats = write_kafka(frame(spark), cfg, topic, transactional=True, batch_id=0)
    assert killer.killed and stats.retried_tasks == 1
    assert stats.records == ROWS and stats.skipped_tasks == 0
    assert await committed(kafka_cluster, topic) == expected()
    # The killed attempt's rows are in the log (read_uncommitted), hidden by the abort its successor wrote.
    assert sum((await everything(kafka_cluster, topic)).values()) >= ROWS + SLOW_FROM

    again = write_kafka(frame(spark), cfg, topic, transactional=True, batch_id=0)  # a rerun of batch 0
    assert (again.records, again.skipped_tasks) == (0, 1)
    assert await committed(kafka_cluster, topic) == expected()

    following = write_kafka(frame(spark, ROWS), cfg, topic, transactional=True, batch_id=1)
    assert (following.records, following.skipped_tasks) == (ROWS, 0)
    assert await committed(kafka_cluster, topic) == expected() + expected(ROWS)


async def test_transactional_tasks_keep_their_own_progress(spark: SparkSession, kafka_cluster: KafkaCluster) -> None:
    """Three partitions, three transactional ids and markers; a topic column, so a progress topic."""
    out, progress = new_topic(kafka_cluster, 2), new_topic(kafka_cluster, 1)
    df = spark.range(300, numPartitions=3).selectExpr(f"'{out}' AS topic", "CAST(CAST(id AS STRING) AS BINARY) AS value")
    cfg = config(kafka_cluster, **{"transactional.id": f"{out}-job"})
    first = write_kafka(df, cfg, transactional=True, batch_id=5, progress_topic=progress)
    assert [t.records for t in first.tasks] == [100, 100, 100]
    rerun = write_kafka(df, cfg, transactional=True, batch_id=5, progress_topic=progress)
    assert rerun.skipped_tasks == 3 and rerun.records == 0
    older = write_kafka(df, cfg, transactional=True, batch_id=4, progress_topic=progress)
    assert older.skipped_tasks == 3  # batch ids only go forward: an older one is done too
    assert await committed(kafka_cluster, out) == Counter(str(i).encode() for i in range(300))
