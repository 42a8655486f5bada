"""Spark DataFrames written with ``aioproducer.spark``, in local mode, read back by aiokafka.

Every column form of the sink, on the mock and on real Kafka; refusals on the driver before any
task runs; a task with a failed record failing and Spark retrying it (at least once: nothing
lost); ``on_error="count"``; one producer per Python worker, reused by the next write.
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from aioproducer import ConfigError
from aioproducer.protocol import messages
from aioproducer.config import ProducerConfig
from aioproducer.spark import WriteStats, kafka_batch_writer, register_data_source, write_kafka
from aioproducer.spark.sink import SINK_BATCH_SIZE, make_plan
from aioproducer.testing import MockCluster
from conftest import PARTITIONS, BrokerUnderTest
from readback import ReadRecord, read_all_records, read_all_values
from spark_support import jobs_run, spark  # noqa: F401  (the session fixture)

pytestmark = pytest.mark.integration

UTC = dt.timezone.utc
HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
EVERY_COLUMN = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", StringType()),
        StructField("partition", IntegerType()),
        StructField("headers", HEADERS),
        StructField("timestamp", TimestampType()),
    ]
)


def _ts(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, UTC)


#: (key, value, partition, headers, timestamp ms): nulls in every nullable place, empty values,
#: non-ASCII text, a header with a null value, the epoch as timestamp.
ROWS: list[tuple[bytes | None, str | None, int | None, list[tuple[str, bytes | None]] | None, int | None]] = [
    (b"k0", "v0", 0, [("h", b"1"), ("h", b"2")], 1_700_000_000_123),
    (None, "keyless", 1, None, 1_600_000_000_000),
    (b"k2", None, 2, [("tomb", None)], 1_700_000_000_456),
    (b"k3", "\u00fcn\u00ef \u2603", None, [], None),
    (b"", "", 3, [("empty", b"")], 1_000),
    (b"k5", "epoch", 4, None, 0),
    (b"k6", "v6", 0, None, 1_700_000_000_999),
]


def every_column_frame(session: SparkSession) -> DataFrame:
    data = [
        (key, value, partition, None if headers is None else [{"key": k, "value": v} for k, v in headers],
         None if ts is None else _ts(ts))
        for key, value, partition, headers, ts in ROWS
    ]
    return session.createDataFrame(data, EVERY_COLUMN, verifySchema=False).coalesce(1)  # one task: rows in order


def config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "linger.ms": 5, "request.timeout.ms": 15_000, **extra}


async def read_everything(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> dict[int, list[ReadRecord]]:
    return await read_all_records(bootstrap, topic, range(partitions), timeout=30)


def assert_every_row_read_back(got: dict[int, list[ReadRecord]], before_ms: int) -> None:
    """Each row of :data:`ROWS` once, as written: its partition, key, value, headers, timestamp, and order."""
    assert sum(len(r) for r in got.values()) == len(ROWS)
    for key, value, partition, headers, ts in ROWS:
        where = [p for p, records in got.items() for r in records if r.key == key]
        assert len(where) == 1, (key, got)
        record = next(r for r in got[where[0]] if r.key == key)
        if partition is not None:
            assert where[0] == partition
        assert record.value == (None if value is None else value.encode())
        assert record.headers == (headers or [])
        if ts is not None:
            assert record.timestamp == ts
        else:
            assert record.timestamp >= before_ms  # the producer's clock: written after the test began
    in_zero = [r.key for r in got[0]]
    assert in_zero == [b"k0", b"k6"]  # rows of one partition keep their order


async def test_every_column_form_reads_back_exactly(spark: SparkSession, cluster: BrokerUnderTest) -> None:
    before_ms = int(dt.datetime.now(UTC).timestamp() * 1000)
    stats = write_kafka(every_column_frame(spark), config(cluster.bootstrap_servers), topic=cluster.topic)
    assert (stats.records, stats.failed) == (len(ROWS), 0)
    assert_every_row_read_back(await read_everything(cluster.bootstrap_servers, cluster.topic), before_ms)
    assert stats.bytes == sum(len(k or b"") + len((v or "").encode()) + sum(len(x or b"") for _, x in h or [])
                              for k, v, _, h, _ in ROWS)


async def test_binary_values_string_keys_and_a_topic_column(spark: SparkSession, mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("other", 2)
    rows = [("orders" if i % 3 else "other", f"key{i}", bytes([i]) * i) for i in range(30)]
    frame = spark.createDataFrame(rows, "topic string, key string, value binary").repartition(3)
    stats = write_kafka(frame, config(mock_cluster.bootstrap_servers))
    assert stats.records == 30 and len(stats.tasks) == 3
    orders = await read_everything(mock_cluster.bootstrap_servers, "orders")
    other = await read_everything(mock_cluster.bootstrap_servers, "other", 2)
    seen = {r.key: r.value for records in [*orders.values(), *other.values()] for r in records}
    assert seen == {f"key{i}".encode(): bytes([i]) * i for i in range(30)}
    assert sum(map(len, other.values())) == 10


def test_the_topic_argument_overrides_the_topic_column(spark: SparkSession, mock_cluster: MockCluster) -> None:
    frame = spark.createDataFrame([("nowhere", b"v")], "topic string, value binary")
    stats = write_kafka(frame, config(mock_cluster.bootstrap_servers), topic="orders")
    assert stats.records == 1


@pytest.mark.parametrize(
    ("schema", "kwargs", "error", "match"),
    [
        ("key binary", {"topic": "t"}, ValueError, "no 'value' column"),
        ("value int", {"topic": "t"}, TypeError, "column 'value' is int; the Kafka sink takes binary or string"),
        ("value binary, partition long", {"topic": "t"}, TypeError, "'partition' is bigint"),
        ("value binary, headers array<string>", {"topic": "t"}, TypeError, r"array<struct<key:string,value:binary>>"),
        ("value binary, timestamp long", {"topic": "t"}, TypeError, "'timestamp' is bigint"),
        ("value binary, heders array<string>", {"topic": "t"}, ValueError, r"column\(s\) \['heders'\]"),
        ("value binary, VALUE binary", {"topic": "t"}, ValueError, "two columns named 'value'"),
        ("value binary", {}, ValueError, "no topic"),
        ("value binary", {"topic": ""}, ValueError, "topic must be a non-empty string"),
        ("value binary", {"topic": "t", "on_error": "skip"}, ValueError, "on_error must be one of"),
        ("value binary", {"topic": "t", "progress_topic": "p"}, ValueError, "progress_topic is for transactional=True"),
        ("value binary", {"topic": "t", "transactional": True, "batch_id": 1}, ValueError, "needs transactional.id"),
    ],
)
def test_a_wrong_write_is_refused_on_the_driver_before_any_task_runs(
    spark: SparkSession, schema: str, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    frame = spark.createDataFrame([], schema)
    group = f"refused-{abs(hash(schema + repr(kwargs)))}"
    spark.sparkContext.setJobGroup(group, "a refused write")
    with pytest.raises(error, match=match):
        write_kafka(frame, {"bootstrap.servers": "localhost:1"}, **kwargs)
    assert jobs_run(spark, group) == []


def test_bad_configuration_is_refused_on_the_driver_naming_the_key(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(ConfigError, match="linger.ms"):
        write_kafka(frame, {"bootstrap.servers": "localhost:1", "linger.ms": "soon"}, topic="t")
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        write_kafka(frame, {"linger.ms": 5}, topic="t")
    with pytest.raises(ValueError, match="transactional.id='x' but transactional=False"):
        write_kafka(frame, {"bootstrap.servers": "localhost:1", "transactional.id": "x"}, topic="t")
    with pytest.raises(ValueError, match="batch_id, an int >= 0"):
        write_kafka(frame, {"bootstrap.servers": "localhost:1", "transactional.id": "x"}, topic="t", transactional=True)
    with pytest.raises(TypeError, match="config must be picklable"):
        import threading

        write_kafka(frame, {"bootstrap.servers": "localhost:1", "key.serializer": _Unpicklable(threading.Lock())}, topic="t")


class _Unpicklable:
    """A serializer that holds a lock: valid configuration, but it cannot be shipped to executors."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def __call__(self, topic: str, data: Any) -> bytes:
        return bytes(data)


def test_a_row_send_refuses_fails_the_write_with_the_producers_reason(spark: SparkSession, mock_cluster: MockCluster) -> None:
    # Kafka has no timestamps before 1970 (as Java's ProducerRecord, send() refuses them); every
    # attempt of the task fails the same way and the job fails with the reason.
    frame = spark.createDataFrame([(b"v", _ts(-1000))], "value binary, timestamp timestamp")
    with pytest.raises(Exception, match=r"invalid timestamp_ms -1000"):
        write_kafka(frame, config(mock_cluster.bootstrap_servers), topic="orders")


def test_a_task_with_a_failed_record_fails_and_spark_retries_it_nothing_lost(
    spark: SparkSession, mock_cluster: MockCluster
) -> None:
    # INVALID_RECORD (87) is not retriable: the producer fails the batch, the task fails, Spark retries it.
    mock_cluster.push_request_errors(messages.PRODUCE, 87)
    frame = spark.range(2000).selectExpr("CAST(id AS STRING) AS key", "CAST(CAST(id AS STRING) AS BINARY) AS value")
    stats = write_kafka(frame, config(mock_cluster.bootstrap_servers, retries=0), topic="orders")
    assert stats.retried_tasks == 1 and stats.failed == 0
    values = Counter(v for vs in _values(mock_cluster, "orders").values() for v in vs)
    assert set(values) == {str(i).encode() for i in range(2000)}  # at least once: nothing lost


def test_on_error_count_reports_failed_records_and_the_task_succeeds(spark: SparkSession, mock_cluster: MockCluster) -> None:
    mock_cluster.push_request_errors(messages.PRODUCE, 87)
    frame = spark.range(200).selectExpr("CAST(CAST(id AS STRING) AS BINARY) AS value").coalesce(1)
    stats = write_kafka(frame, config(mock_cluster.bootstrap_servers, retries=0), topic="orders", on_error="count")
    assert stats.retried_tasks == 0
    assert 0 < stats.failed and stats.records + stats.failed == 200
    assert stats.tasks[0].first_error is not None and "InvalidRecord" in stats.tasks[0].first_error
    written = sum(len(v) for v in _values(mock_cluster, "orders").values())
    assert written == stats.records


def test_a_worker_reuses_its_producer_for_the_next_write(spark: SparkSession, mock_cluster: MockCluster) -> None:
    # Four tasks on two task threads, twice: every Python worker process has run a task of this config.
    frame = spark.range(400).selectExpr("CAST(CAST(id AS STRING) AS BINARY) AS value").repartition(4)
    cfg = config(mock_cluster.bootstrap_servers)
    write_kafka(frame, cfg, topic="orders")
    write_kafka(frame, cfg, topic="orders")
    mock_cluster.start_request_tracking()
    write_kafka(frame, cfg, topic="orders")
    api_keys = Counter(r.api_key for r in mock_cluster.requests())
    assert api_keys[messages.PRODUCE] > 0
    # No new connection (each opens with ApiVersions) and no new producer id: the same producer.
    assert api_keys[messages.API_VERSIONS] == 0 and api_keys[messages.INIT_PRODUCER_ID] == 0


def _values(mock: MockCluster, topic: str) -> dict[int, list[bytes]]:
    import asyncio

    return asyncio.run(read_all_values(mock.bootstrap_servers, topic, range(PARTITIONS), timeout=30))


async def test_the_data_source_writes_what_write_kafka_writes(spark: SparkSession, mock_cluster: MockCluster) -> None:
    register_data_source(spark)
    before_ms = int(dt.datetime.now(UTC).timestamp() * 1000)
    (every_column_frame(spark).write.format("aioproducer")
        .option("kafka.bootstrap.servers", mock_cluster.bootstrap_servers).option("linger.ms", "5")
        .option("topic", "orders").mode("append").save())
    assert_every_row_read_back(await read_everything(mock_cluster.bootstrap_servers, "orders"), before_ms)


@pytest.mark.parametrize(
    ("schema", "options", "mode", "match"),
    [
        ("value binary", {"topic": "t"}, "overwrite", "append-only"),
        ("key binary", {"topic": "t"}, "append", "no 'value' column"),
        ("value binary", {"topic": "t", "linger.ms": "soon"}, "append", "linger.ms"),
        ("value binary", {"topic": "t", "transactional": "yes"}, "append", "transactional must be true or false"),
        ("value binary", {"topic": "t", "batch.id": "first"}, "append", "batch.id must be an integer"),
    ],
)
def test_the_data_source_refuses_a_wrong_write_before_any_task_runs(
    spark: SparkSession, schema: str, options: dict[str, str], mode: str, match: str
) -> None:
    register_data_source(spark)
    group = f"refused-ds-{abs(hash(schema + repr(options) + mode))}"
    spark.sparkContext.setJobGroup(group, "a refused write")
    writer = spark.createDataFrame([], schema).write.format("aioproducer").option("bootstrap.servers", "localhost:1")
    with pytest.raises(Exception, match=match):
        writer.options(**options).mode(mode).save()
    assert jobs_run(spark, group) == []


def test_foreach_batch_writes_each_micro_batch_and_tells_its_id(
    spark: SparkSession, mock_cluster: MockCluster, tmp_path: Any
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    for n in range(3):  # one file per micro-batch (maxFilesPerTrigger=1)
        path = source / f"part-{n}.json"
        path.write_text("".join(f'{{"value": "b{n}-{i}"}}\n' for i in range(10 + n)))
        os.utime(path, (1_700_000_000 + n * 60, 1_700_000_000 + n * 60))  # the file source goes by age
    seen: list[tuple[int, int]] = []

    def on_batch(batch_id: int, stats: WriteStats) -> None:
        seen.append((batch_id, stats.records))

    stream = spark.readStream.schema("value string").option("maxFilesPerTrigger", 1).json(str(source))
    query = (
        stream.writeStream.foreachBatch(kafka_batch_writer(config(mock_cluster.bootstrap_servers), "orders", on_batch=on_batch))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120)
    assert query.exception() is None
    assert sorted(seen) == [(0, 10), (1, 11), (2, 12)]
    values = Counter(v for vs in _values(mock_cluster, "orders").values() for v in vs)
    assert values == Counter(f"b{n}-{i}".encode() for n in range(3) for i in range(10 + n))


def test_a_sinks_producer_batches_256_kib_unless_the_configuration_says_otherwise() -> None:
    """A sink's default ``batch.size`` is its own (``SINK_BATCH_SIZE``); a configured one is kept."""
    schema = StructType([StructField("value", BinaryType())])

    def batch_size(config: dict[str, Any]) -> Any:
        plan = make_plan(
            schema, {"bootstrap.servers": "localhost:1", **config}, "t",
            transactional=False, batch_id=None, progress_topic=None, on_error="fail", what="test",
        )
        return ProducerConfig(plan.config).batch_size

    assert SINK_BATCH_SIZE == 262_144
    assert batch_size({}) == SINK_BATCH_SIZE
    assert batch_size({"batch.size": "16384"}) == 16384
    assert batch_size({"batch.size": 1000}) == 1000


def test_the_batch_writer_refuses_bad_arguments_when_it_is_made() -> None:
    with pytest.raises(TypeError, match="on_batch must be callable"):
        kafka_batch_writer({"bootstrap.servers": "localhost:1"}, "t", on_batch=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="linger.ms"):
        kafka_batch_writer({"bootstrap.servers": "localhost:1", "linger.ms": "soon"}, "t")


async def test_rows_written_as_avro_through_the_registry_read_by_confluents_deserializer(
    spark: SparkSession, mock_cluster: MockCluster
) -> None:
    """A struct column serialized by ``AvroSerializer`` in the tasks; the schema id looked up once per worker."""
    import json

    from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from aioproducer.schema_registry import SchemaRegistryClient
    from aioproducer.schema_registry.avro import AvroSerializer
    from aioproducer.testing import SchemaRegistry

    schema = json.dumps({
        "type": "record", "name": "Order", "namespace": "shop",
        "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}, {"name": "note", "type": ["null", "string"]}],
    })
    mock_cluster.create_topic("avro-orders", 3)
    rows = [(i, i / 2, None if i % 5 else f"n{i}") for i in range(300)]
    with SchemaRegistry() as registry:
        serializer = AvroSerializer(SchemaRegistryClient({"url": registry.url}), schema)
        frame = spark.createDataFrame(rows, "id long, amount double, note string").repartition(4).selectExpr(
            "CAST(id AS STRING) AS key", "struct(id, amount, note) AS value"
        )
        stats = write_kafka(frame, config(mock_cluster.bootstrap_servers), topic="avro-orders", value_serializer=serializer)
        assert (stats.records, stats.failed, len(stats.tasks)) == (300, 0, 4)
        registrations = [path for method, path in registry.requests if method == "POST"]
        assert 1 <= len(registrations) <= 2  # local[2]: two Python workers at most, each asks once
        got = await read_everything(mock_cluster.bootstrap_servers, "avro-orders", 3)
        deserializer = AvroDeserializer(ConfluentClient({"url": registry.url}))
        decoded = {
            r.key: deserializer(r.value, SerializationContext("avro-orders", MessageField.VALUE))
            for records in got.values() for r in records
        }
    assert decoded == {str(i).encode(): {"id": i, "amount": i / 2, "note": note} for i, _, note in rows}


def test_a_struct_value_needs_a_serializer_given_once(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(1, 2.0)], "id long, amount double").selectExpr("struct(id, amount) AS value")
    with pytest.raises(TypeError, match="column 'value' is struct<id:bigint,amount:double>; the Kafka sink takes binary or string"):
        write_kafka(frame, config("localhost:9092"), topic="t")
    with pytest.raises(ValueError, match="value_serializer= is given and config has 'value.serializer' too"):
        write_kafka(frame, {**config("localhost:9092"), "value.serializer": bytes}, topic="t", value_serializer=bytes)
