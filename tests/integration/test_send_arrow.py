"""send_arrow(): Arrow rows to Kafka natively, read back by independent decoders.

Rows are read back with aiokafka and confluent-kafka (``readback.py``), never with the producer's
own decoder: keys, values, headers, timestamps, partitions and per-partition order are what the
data said. Faults are the librdkafka mock's (``push_request_errors``), as in
``test_producer_faults.py``.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pyarrow as pa
import pytest

from aioproducer import ConfigError, InvalidRecordError, KafkaTimeoutError, Producer
from aioproducer.partitioner import partition_for_key
from aioproducer.testing import MockCluster

from helpers import FAST_RETRIES
from readback import read_all_records, read_all_values, read_with

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 6
PRODUCE = 0
NOT_LEADER_OR_FOLLOWER = 6
MESSAGE_TOO_LARGE = 10
NETWORK_EXCEPTION = 13
INVALID_TIMESTAMP = 32
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def keyed_table(n: int, keyless_every: int = 0) -> pa.Table:
    keys = [None if keyless_every and i % keyless_every == 0 else b"key-%03d" % (i % 40) for i in range(n)]
    return pa.table({
        "value": pa.array([b"value-%06d" % i for i in range(n)]),
        "key": pa.array(keys, pa.binary()),
        "headers": pa.array([[{"key": "row", "value": b"%d" % i}] if i % 2 else None for i in range(n)], HEADERS),
        "timestamp": pa.array([1_700_000_000_000 + i for i in range(n)], pa.timestamp("ms")),
    })


async def test_rows_read_back_with_their_keys_headers_timestamps_in_order(mock_cluster: MockCluster) -> None:
    n = 3000
    table = keyed_table(n, keyless_every=5)
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, linger_ms=5, batch_size=4096) as producer:
        delivery = await producer.send_arrow(TOPIC, table, row_outcomes=True)
        report = await delivery
    assert (report.rows, report.delivered, report.failed, report.errors) == (n, n, 0, ())
    assert report.offsets is not None and min(report.offsets) >= 0
    records = await read_all_records(mock_cluster.bootstrap_servers, TOPIC, range(PARTITIONS))
    rows = table.to_pylist()
    seen = 0
    for partition, got in records.items():
        indices = [int(r.value.split(b"-")[1]) for r in got if r.value is not None]
        keyed = [i for i in indices if rows[i]["key"] is not None]
        assert keyed == sorted(keyed), "rows of a key keep their order in their partition"
        for r, i in zip(got, indices):
            row = rows[i]
            assert report.offsets[i] == r.offset
            assert r.key == row["key"] and r.timestamp == 1_700_000_000_000 + i
            assert r.headers == ([("row", b"%d" % i)] if i % 2 else [])
            if row["key"] is not None:
                assert partition == partition_for_key(row["key"], PARTITIONS)
        seen += len(got)
    assert seen == n


async def test_a_polars_frame_read_back_by_confluent_kafka(mock_cluster: MockCluster) -> None:
    import polars as pl
    frame = pl.DataFrame({"value": ["a", None, "a value longer than twelve bytes"], "key": ["k", "k", "k"]})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        report = await (await producer.send_arrow(TOPIC, frame))
    assert report.delivered == 3
    got = await read_with("confluent-kafka", mock_cluster.bootstrap_servers, TOPIC, partition_for_key(b"k", PARTITIONS), count=3)
    assert [r.value for r in got] == [b"a", None, b"a value longer than twelve bytes"]  # None: a tombstone


@pytest.mark.parametrize("codes", [(NOT_LEADER_OR_FOLLOWER,) * 3, (NETWORK_EXCEPTION, 0, NOT_LEADER_OR_FOLLOWER)], ids=["not-leader", "mixed"])
async def test_retries_deliver_every_row_once_in_order_with_idempotence(mock_cluster: MockCluster, codes: tuple[int, ...]) -> None:
    config = {**FAST_RETRIES, "max_in_flight_requests_per_connection": 1, "batch_size": 2048}
    mock_cluster.push_request_errors(PRODUCE, *codes)
    n = 2000
    table = pa.table({"value": [b"v%05d" % i for i in range(n)], "partition": pa.array([i % PARTITIONS for i in range(n)], pa.int32())})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        report = await (await producer.send_arrow(TOPIC, table))
        assert producer.metrics()["record-retry-total"] > 0  # the errors hit our requests
    assert report.delivered == n and report.failed == 0
    got = await read_all_values(mock_cluster.bootstrap_servers, TOPIC, range(PARTITIONS))
    for p in range(PARTITIONS):
        assert got[p] == [b"v%05d" % i for i in range(p, n, PARTITIONS)]


async def test_a_small_buffer_memory_makes_send_arrow_wait_and_everything_arrives(mock_cluster: MockCluster) -> None:
    n = 20_000  # about 2.4 MB of rows through 64 KB of buffer.memory
    table = pa.table({"value": [b"x" * 100 + b"%06d" % i for i in range(n)], "key": [b"k%d" % (i % 13) for i in range(n)]})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, buffer_memory=65536, batch_size=8192) as producer:
        report = await (await producer.send_arrow(TOPIC, table))
        metrics = producer.metrics()
    assert report.delivered == n
    assert metrics["bufferpool-wait-time-total"] > 0  # it had to wait for memory, as send() does
    got = await read_all_values(mock_cluster.bootstrap_servers, TOPIC, range(PARTITIONS))
    assert sum(len(v) for v in got.values()) == n


async def test_max_block_ms_out_while_waiting_for_memory_hands_back_the_queued_rows(mock_cluster: MockCluster) -> None:
    table = pa.table({"value": [b"x" * 1000] * 200, "partition": [0] * 200})
    config = {**FAST_RETRIES, "delivery_timeout_ms": 1100, "buffer_memory": 32768, "batch_size": 8192, "max_block_ms": 300}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        await producer.partitions_for(TOPIC)  # metadata while the brokers are up
        for broker in (1, 2, 3):
            mock_cluster.broker_down(broker)
        with pytest.raises(KafkaTimeoutError) as caught:
            await producer.send_arrow(TOPIC, table)
        delivery = caught.value.delivery  # type: ignore[attr-defined]
        report = await delivery
    assert 0 < report.rows < 200 and report.failed == report.rows  # what was queued expired; nothing else waits


async def test_per_row_errors_are_counted_with_the_first_rows_named(mock_cluster: MockCluster) -> None:
    n = 100
    table = pa.table({"value": [b"v%d" % i for i in range(n)], "partition": pa.array([0] * 50 + [1] * 50, pa.int8())})
    for p in range(PARTITIONS):
        mock_cluster.set_partition_leader(TOPIC, p, 1)  # one broker: the error hits the one request
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, linger_ms=50, enable_idempotence=False) as producer:
        await producer.partitions_for(TOPIC)
        mock_cluster.push_request_errors(PRODUCE, INVALID_TIMESTAMP)
        report = await (await producer.send_arrow(TOPIC, table, row_outcomes=True))
    assert report.rows == n and report.failed == n and report.delivered == 0
    assert len(report.errors) == 10 and all(type(e).__name__ == "InvalidTimestampError" for _, e in report.errors)
    assert {row for row, _ in report.errors} <= set(range(n))
    assert report.offsets is not None and set(report.offsets) == {-1}
    with pytest.raises(Exception, match="INVALID_TIMESTAMP|timestamp") as caught:
        report.raise_for_errors()
    assert any("100 of 100 rows failed" in note for note in caught.value.__notes__)


async def test_raise_for_errors_adds_its_note_once_however_often_it_is_called(mock_cluster: MockCluster) -> None:
    """The error raised is the batch's, shared by every failed row: a second call must not note it again."""
    table = pa.table({"value": [b"a", b"b", b"c"], "partition": pa.array([0, 0, 0], pa.int8())})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, linger_ms=50, enable_idempotence=False) as producer:
        await producer.partitions_for(TOPIC)
        mock_cluster.push_request_errors(PRODUCE, INVALID_TIMESTAMP)
        report = await (await producer.send_arrow(TOPIC, table))
    assert report.failed == 3 and {id(error) for _, error in report.errors} == {id(report.errors[0][1])}
    raised = []
    for _ in range(3):
        with pytest.raises(Exception, match="INVALID_TIMESTAMP|timestamp") as caught:
            report.raise_for_errors()
        raised.append(caught.value)
    assert raised[0] is raised[1] is raised[2]
    assert raised[0].__notes__ == ["send_arrow: 3 of 3 rows failed; row 0 is the first reported"]


async def test_a_split_batch_reports_each_row_from_its_piece(mock_cluster: MockCluster) -> None:
    config = {**FAST_RETRIES, "linger_ms": 60_000, "delivery_timeout_ms": 70_000}
    table = pa.table({"value": [b"r%03d" % i + b"." * 150 for i in range(40)], "partition": [2] * 40})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        delivery = await producer.send_arrow(TOPIC, table, row_outcomes=True)
        mock_cluster.push_request_errors(PRODUCE, MESSAGE_TOO_LARGE)
        await producer.flush()
        report = await delivery
        assert producer.metrics()["batch-split-total"] == 1
    assert report.delivered == 40 and report.offsets is not None and list(report.offsets) == list(range(40))


async def test_a_bad_row_queues_nothing(mock_cluster: MockCluster) -> None:
    table = pa.table({"value": [b"a", b"b", b"c"], "partition": [0, 1, 6]})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        with pytest.raises(InvalidRecordError, match="row 2 has partition 6"):
            await producer.send_arrow(TOPIC, table)
        with pytest.raises(TypeError, match='"key"'):
            await producer.send_arrow(TOPIC, pa.table({"value": [b"a"], "key": [1]}))
        await producer.flush()
        assert producer.metrics()["record-send-total"] == 0
        await (await producer.send_arrow(TOPIC, table.slice(0, 2)))  # the producer is fine
        assert producer.metrics()["record-send-total"] == 2
        empty = await (await producer.send_arrow(TOPIC, table.slice(0, 0)))
        assert (empty.rows, empty.delivered, empty.failed) == (0, 0, 0)


class _PassThrough:
    """An interceptor that changes nothing: still a per-record hook send_arrow could not call."""

    def on_send(self, record: Any) -> Any:
        return record

    def on_acknowledgement(self, metadata: Any, error: Any) -> None:
        pass


@pytest.mark.parametrize(
    "hook, named",
    [
        ({"value_serializer": lambda topic, value: value}, "value.serializer"),
        ({"key_serializer": lambda topic, key: key}, "key.serializer"),
        ({"partitioner_class": lambda *args: 0}, "partitioner.class"),
        ({"interceptor_classes": [_PassThrough()]}, "interceptor.classes"),
        ({"tracing": True}, "tracing"),
    ],
    ids=["value.serializer", "key.serializer", "partitioner.class", "interceptor.classes", "tracing"],
)
async def test_per_record_hooks_are_refused_not_skipped(mock_cluster: MockCluster, hook: dict[str, Any], named: str) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **hook) as producer:
        with pytest.raises(ConfigError, match=re.escape(named)):
            await producer.send_arrow(TOPIC, pa.table({"value": [b"a"]}))
        await producer.flush()
        assert producer.metrics()["record-send-total"] == 0


async def test_partitioner_ignore_keys_sends_keyed_rows_to_the_sticky_partition(mock_cluster: MockCluster) -> None:
    table = pa.table({"value": [b"v%d" % i for i in range(50)], "key": [b"k%d" % i for i in range(50)]})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, partitioner_ignore_keys=True, linger_ms=50) as producer:
        report = await (await producer.send_arrow(TOPIC, table, row_outcomes=True))
    assert report.delivered == 50
    got = await read_all_values(mock_cluster.bootstrap_servers, TOPIC, range(PARTITIONS))
    assert [values for values in got.values() if values] == [[b"v%d" % i for i in range(50)]]  # one sticky batch


async def test_send_arrow_in_a_transaction_and_outside_one(mock_cluster: MockCluster) -> None:
    from aioproducer import IllegalStateError

    table = pa.table({"value": [b"a", b"b"], "key": [b"k", b"k"]})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, transactional_id="arrow-tx") as producer:
        with pytest.raises(IllegalStateError, match="send_arrow"):
            await producer.send_arrow(TOPIC, table)
        async with producer.transaction():
            delivery = await producer.send_arrow(TOPIC, table)
        assert (await delivery).delivered == 2
    # confluent-kafka: aiokafka's reader does not take the mock's transaction markers.
    got = await read_with("confluent-kafka", mock_cluster.bootstrap_servers, TOPIC, partition_for_key(b"k", PARTITIONS), count=2)
    assert [r.value for r in got] == [b"a", b"b"]


async def test_keyless_rows_fill_sticky_batches_and_move_on(mock_cluster: MockCluster) -> None:
    n = 5000
    table = pa.table({"value": [b"v%05d" % i + b"." * 90 for i in range(n)]})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, batch_size=4096, linger_ms=5) as producer:
        report = await (await producer.send_arrow(TOPIC, table))
    assert report.delivered == n
    got = await read_all_values(mock_cluster.bootstrap_servers, TOPIC, range(PARTITIONS))
    used = [p for p, values in got.items() if values]
    assert len(used) > 1  # about 120 batches of 4 KB: the sticky partition switched
    for values in got.values():
        assert values == sorted(values)  # keyless rows keep their order in each partition
    assert sum(len(v) for v in got.values()) == n


async def test_concurrent_calls_waiting_for_memory_give_every_byte_back(mock_cluster: MockCluster) -> None:
    """Two calls fill the same partition through a small buffer.memory: one opens the batch the other
    waited memory for, which then gives its reservation back. Every byte is free at the end."""
    table = pa.table({"value": [b"x" * 200] * 3000, "partition": [0] * 3000})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, buffer_memory=40_000, batch_size=4096) as producer:
        deliveries = await asyncio.gather(*(producer.send_arrow(TOPIC, table) for _ in range(3)))
        reports = [await d for d in deliveries]
        await producer.flush()
        metrics = producer.metrics()
    assert [r.delivered for r in reports] == [3000] * 3
    assert metrics["bufferpool-wait-time-total"] > 0
    assert metrics["buffer-available-bytes"] == metrics["buffer-total-bytes"]
