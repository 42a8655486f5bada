"""``writeStream.format("aioproducer")`` on real Kafka: at least once, exactly once, the refusals at query start.

Input files are written whole before a query starts (one micro-batch each), read back by aiokafka.
The exactly-once test runs a micro-batch again the way a driver dying after the sink's commit
and before Spark's own commit log does: by deleting that commit log entry, so the restarted
query runs the batch again; the rows must not appear twice. A task dies mid-write in each of
its three attempts (a row with a partition the topic lacks) while the micro-batch's other task
succeeds: nothing is visible ``read_committed`` (a task that committed instead of preparing
fails here), and the restarted query writes each row once. The update-mode route through
``foreachBatch``. Refusals: the query fails before any Spark job, and the error names the
option. Time: about 130 s on two cores under a load of 4-5, of which about 25 s start Spark and
the Kafka node (shared with the other Spark tests of a worker); the dying-task test, since it
has a second task, took 184 s alone under a load of 20-25 (not measured at a moderate load).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, Callable

import pandas as pd  # type: ignore[import-untyped]
import pytest
from confluent_kafka import Consumer, TopicPartition
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col
from pyspark.sql.pandas.functions import pandas_udf
from pyspark.sql.streaming.query import StreamingQuery

from aioproducer.spark import kafka_batch_writer, register_data_source, sink_metrics
from aioproducer.testing import KafkaCluster
from conftest import new_topic
from spark_support import jobs_run, spark  # noqa: F401  (the session fixture)
from stream_support import assert_each_once_in_order, file_stream, number_of, progress_rows, read_values, write_file

pytestmark = pytest.mark.integration

ROWS = 300  # per file, so per micro-batch


@pytest.fixture(scope="module")
def streaming(spark: SparkSession) -> SparkSession:
    register_data_source(spark)
    return spark


def finish(query: StreamingQuery) -> list[dict[str, Any]]:
    """Wait for an availableNow / once query to end (bounded); its progress per micro-batch."""
    assert query.awaitTermination(180), "the query did not end within 180 s"
    return list(query.recentProgress)


async def test_at_least_once_through_the_three_triggers_with_metrics(
    streaming: SparkSession, kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    topic = new_topic(kafka_cluster, 2)
    folder, checkpoint, metrics = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "metrics"
    expected = write_file(folder, 0, ROWS) + write_file(folder, ROWS, ROWS)

    def query() -> Any:
        return file_stream(streaming, folder, kafka_cluster.bootstrap_servers, topic, checkpoint, {"metrics.path": str(metrics)})

    progress = finish(query().trigger(availableNow=True).start())  # two micro-batches, a file each
    expected += write_file(folder, 2 * ROWS, ROWS)
    progress += finish(query().trigger(once=True).start())
    expected += write_file(folder, 3 * ROWS, ROWS)
    running = query().trigger(processingTime="200 milliseconds").start()
    try:
        deadline = time.monotonic() + 120
        while sum(progress_rows(running.recentProgress).values()) < ROWS and time.monotonic() < deadline:
            running.awaitTermination(0.2)  # the query's own wait: returns early if it fails
        progress += list(running.recentProgress)
    finally:
        running.stop()

    rows = {batch: count for batch, count in progress_rows(progress).items() if count}
    assert sorted(rows.values()) == [ROWS] * 4  # a file per micro-batch, through every trigger
    assert_each_once_in_order(await read_values(kafka_cluster.bootstrap_servers, topic, 2, committed=False), expected)

    written = {b.batch_id: b for b in sink_metrics(metrics)}
    assert {batch: written[batch].records for batch in rows} == rows
    payload = {sum(len(v) + len(v.split("|")[0]) for v in expected[i : i + ROWS]) for i in range(0, len(expected), ROWS)}
    assert {written[batch].bytes for batch in rows} <= payload  # key and value bytes of the batch's file
    assert all(written[batch].failed == 0 for batch in rows)


async def test_exactly_once_skips_a_micro_batch_run_again_after_its_commit(
    streaming: SparkSession, kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    topic = new_topic(kafka_cluster, 2)
    folder, checkpoint, metrics = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "metrics"
    expected = write_file(folder, 0, ROWS) + write_file(folder, ROWS, ROWS) + write_file(folder, 2 * ROWS, ROWS)
    options = {"transactional": "true", "kafka.transactional.id": f"{topic}-q", "metrics.path": str(metrics)}

    def run() -> list[dict[str, Any]]:
        stream = file_stream(streaming, folder, kafka_cluster.bootstrap_servers, topic, checkpoint, options)
        return finish(stream.trigger(availableNow=True).start())

    first = progress_rows(run())
    assert sorted(first.values()) == [ROWS] * 3
    assert_each_once_in_order(await read_values(kafka_cluster.bootstrap_servers, topic, 2, committed=True), expected)

    last = max(first)
    forget_commit(checkpoint, last)  # as if the driver died after our commit, before Spark's
    rerun = progress_rows(run())
    assert rerun == {last: ROWS}  # Spark ran the micro-batch again, with the same rows
    again = {b.batch_id: b for b in sink_metrics(metrics)}[last]
    assert again.records == 0 and again.skipped_tasks == len(again.tasks) > 0
    assert_each_once_in_order(await read_values(kafka_cluster.bootstrap_servers, topic, 2, committed=True), expected)

    expected += write_file(folder, 3 * ROWS, ROWS)  # and the query goes on
    assert list(progress_rows(run()).values()) == [ROWS]
    assert_each_once_in_order(await read_values(kafka_cluster.bootstrap_servers, topic, 2, committed=True), expected)


# The rows are split by key between two sink tasks (about 4000 each); the failing task gets 250-row
# Arrow batches, and the bad row is in one of its last, so the batches before it have been sent
# (Spark's input to the sink arrives after the UDF is done with the whole file).
FAIL_AT, BATCH_ROWS, TASK_ROWS = 7500, 250, 8000


def log_end(bootstrap: str, topic: str) -> int:
    """Records in the topic's log, committed or not (read_uncommitted: prepared and aborted transactions count)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "log-end", "isolation.level": "read_uncommitted"})
    try:
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in (0, 1))
    finally:
        consumer.close()


def bad_partition_while(flag: Path) -> Callable[[DataFrame], DataFrame]:
    """A ``partition`` column: null (the partitioner's choice), but 99 for row FAIL_AT while ``flag`` exists.

    The topic has two partitions, so the sink's task with that row dies on its Arrow batch, after
    sending the batches before it: in every attempt, as long as the flag is there. The rows are
    then split by key between two sink tasks: the other one succeeds in every attempt.
    """

    def partition(values: pd.Series) -> pd.Series:
        bad = flag.exists()
        return pd.Series([99 if bad and number_of(v) == FAIL_AT else None for v in values], dtype="Int32")

    udf: Any = pandas_udf(partition, "int")  # type: ignore[call-overload]
    # Two tasks, a key in one (its rows in order): the other task succeeds, and its prepared
    # transaction must stay invisible while the micro-batch fails.
    return lambda df: df.withColumn("partition", udf(col("value"))).repartition(2, "key")


async def test_a_task_dying_mid_write_in_every_attempt_aborts_and_the_rerun_writes_each_row_once(
    streaming: SparkSession, kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    topic = new_topic(kafka_cluster, 2)
    folder, checkpoint, flag = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "fail"
    expected = write_file(folder, 0, TASK_ROWS)
    flag.touch()
    # buffer.memory 32 KB holds a tenth of the rows before FAIL_AT: the task's sends wait for the
    # broker to take earlier batches, so rows are in the log before the task dies (a condition, not
    # a race between the sender and the failing batch).
    options = {"transactional": "true", "kafka.transactional.id": f"{topic}-q", "kafka.buffer.memory": "32768", "kafka.batch.size": "4096"}
    streaming.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(BATCH_ROWS))
    try:
        stream = file_stream(
            streaming, folder, kafka_cluster.bootstrap_servers, topic, checkpoint, options, bad_partition_while(flag)
        )
        with pytest.raises(StreamingQueryException, match="has partition 99"):
            stream.trigger(availableNow=True).start().awaitTermination(180)
    finally:
        streaming.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    # The attempts had written rows before they died, and the task beside them all of its rows: none visible.
    assert log_end(kafka_cluster.bootstrap_servers, topic) > TASK_ROWS - FAIL_AT
    assert await read_values(kafka_cluster.bootstrap_servers, topic, 2, committed=True) == []  # all aborted

    flag.unlink()  # the restarted query runs the micro-batch again, and it succeeds
    stream = file_stream(streaming, folder, kafka_cluster.bootstrap_servers, topic, checkpoint, options, bad_partition_while(flag))
    finish(stream.trigger(availableNow=True).start())
    assert_each_once_in_order(await read_values(kafka_cluster.bootstrap_servers, topic, 2, committed=True), expected)


def forget_commit(checkpoint: Path, batch: int) -> None:
    """Delete Spark's commit log entry of ``batch`` (and its checksum file): a restart runs the batch again."""
    for name in (str(batch), f".{batch}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=name.endswith(".crc"))


REFUSALS = [
    pytest.param({"topic": None}, "", "no topic: give topic=", id="no-topic"),
    pytest.param({"transactional": "yes"}, "", "option transactional must be true or false", id="transactional"),
    pytest.param({"transactional": "true"}, "", "transactional.id", id="transactional-id"),
    pytest.param({"batch.id": "3"}, "", "option batch.id is not taken in a stream", id="batch-id"),
    pytest.param({"on.error": "ignore"}, "", "option on.error must be fail or count", id="on-error"),
    pytest.param({"kafka.acks": "7"}, "", "acks must be one of", id="producer-setting"),
    pytest.param({}, "extra-column", "'colour'", id="column"),
    pytest.param({}, "complete", 'outputMode("complete")', id="output-mode"),
]


@pytest.mark.parametrize(("options", "shape", "named"), REFUSALS)
def test_a_bad_query_fails_at_start_naming_the_option(
    streaming: SparkSession, kafka_cluster: KafkaCluster, tmp_path: Path, options: dict[str, str | None], shape: str, named: str
) -> None:
    folder = tmp_path / "in"
    write_file(folder, 0, 10)
    source = streaming.readStream.schema("key string, value string").json(str(folder))
    mode = "append"
    if shape == "extra-column":
        source = source.selectExpr("key", "value", "'red' AS colour")
    elif shape == "complete":
        source = source.groupBy("key").count().selectExpr("key", "CAST(count AS STRING) AS value")
        mode = "complete"
    writer = source.writeStream.format("aioproducer").outputMode(mode).option("checkpointLocation", str(tmp_path / "checkpoint"))
    settings: dict[str, str | None] = {"kafka.bootstrap.servers": kafka_cluster.bootstrap_servers, "topic": "never-written", **options}
    for name, value in settings.items():
        if value is not None:
            writer = writer.option(name, value)
    query = writer.trigger(availableNow=True).start()
    with pytest.raises(StreamingQueryException) as failed:
        query.awaitTermination(120)
    assert named in str(failed.value)
    assert jobs_run(streaming, str(query.runId)) == []  # refused before any task ran


def test_update_mode_is_refused_by_spark_before_the_sink(streaming: SparkSession, kafka_cluster: KafkaCluster, tmp_path: Path) -> None:
    """What the docs quote: Spark refuses update for every Python data source; foreachBatch is the route."""
    write_file(tmp_path / "in", 0, 10)
    source = streaming.readStream.schema("key string, value string").json(str(tmp_path / "in"))
    query = (
        source.groupBy("key").count().selectExpr("key", "CAST(count AS STRING) AS value")
        .writeStream.format("aioproducer").outputMode("update")
        .option("kafka.bootstrap.servers", kafka_cluster.bootstrap_servers).option("topic", "never-written")
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    )
    with pytest.raises(StreamingQueryException, match="aioproducer does not support Update mode"):
        query.awaitTermination(120)


async def test_update_mode_through_foreach_batch_writes_each_changed_row_once(
    streaming: SparkSession, kafka_cluster: KafkaCluster, tmp_path: Path
) -> None:
    """The route the docs give for update mode: foreachBatch(kafka_batch_writer(..., transactional=True))."""
    topic = new_topic(kafka_cluster, 2)
    folder = tmp_path / "in"
    rows = 280  # each of the 7 keys 40 times per file: each micro-batch changes every key's count
    for n in range(3):
        write_file(folder, n * rows, rows)
    counts = (
        streaming.readStream.schema("key string, value string").option("maxFilesPerTrigger", 1).json(str(folder))
        .groupBy("key").count()
        .selectExpr("key", "concat(key, '|', lpad(CAST(count AS STRING), 8, '0')) AS value")
    )
    config = {"bootstrap.servers": kafka_cluster.bootstrap_servers, "transactional.id": f"{topic}-update"}
    query = (
        counts.writeStream.outputMode("update")
        .foreachBatch(kafka_batch_writer(config, topic=topic, transactional=True))
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    )
    finish(query)
    expected = [f"k{k}|{rows // 7 * (b + 1):08d}" for b in range(3) for k in range(7)]
    assert_each_once_in_order(await read_values(kafka_cluster.bootstrap_servers, topic, 2, committed=True), expected)


def test_pyspark_without_the_stream_arrow_writer_imports_and_refuses_a_stream() -> None:
    """On PySpark 4.0 (no DataSourceStreamArrowWriter) the batch source works and a stream is refused, saying why."""
    script = textwrap.dedent(
        """
        import pyspark.sql.datasource as api
        del api.DataSourceStreamArrowWriter  # as on PySpark 4.0
        from pyspark.sql.types import StructType, StructField, StringType
        from aioproducer.spark.datasource import KafkaDataSource
        source = KafkaDataSource({"kafka.bootstrap.servers": "localhost:9092", "topic": "t"})
        schema = StructType([StructField("value", StringType())])
        source.writer(schema, False)  # the batch sink is not affected
        try:
            source.streamWriter(schema, False)
        except RuntimeError as exc:
            print(exc)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "needs PySpark 4.1 or later" in done.stdout and "foreachBatch" in done.stdout
