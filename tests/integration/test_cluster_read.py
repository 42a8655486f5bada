"""``MockCluster.read()``: a topic read back through aioproducer's own Fetch, checked against aiokafka.

Records go in through the real ``Producer`` (every codec, several headers with a
None value among them, null keys and null values, six partitions) and come back
through :meth:`MockCluster.read`; aiokafka's consumer (``auto_offset_reset=
"earliest"``, a decoder aioproducer does not share) reads the same topic, and the
two must agree field by field. Then what the read does besides decoding: waiting
for ``count`` records produced after it started, timing out with the counts,
following a leader that moved while it read, refusing an unknown topic without
creating it, a closed cluster and bad arguments.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.config import ProducerConfig
from aioproducer.errors import KafkaTimeoutError, ProtocolError, UnknownTopicOrPartitionError
from aioproducer.network.client import KafkaClient
from aioproducer.protocol import compression
from aioproducer.protocol.records import RecordBatchBuilder
from aioproducer.testing import ConsumerRecord, MockCluster, MockClusterClosedError
from aioproducer.testing.raw_produce import produce_batch
from aioproducer.testing.readback import read_topic
from readback import read_topic_aiokafka

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PARTITIONS = 6
FETCH = 1

Row = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]


def rows(n: int = 36, tag: str = "") -> list[Row]:
    """``n`` records over the six partitions: null keys, null values, no headers or several (one None)."""
    out: list[Row] = []
    for i in range(n):
        key = None if i % 4 == 0 else f"key-{i}".encode()
        value = None if i % 5 == 0 else f"value-{tag}{i}-".encode() * (i + 1)
        headers: list[tuple[str, bytes | None]] = (
            [] if i % 3 == 0 else [("trace", f"t{i}".encode()), ("empty", None), ("trace", b""), ("\u00e9", b"\xff")]
        )
        out.append((i % PARTITIONS, key, value, headers))
    return out


async def produce(bootstrap_servers: str, topic: str, records: list[Row], **config: Any) -> None:
    """Send ``records`` to their partitions, each half acknowledged before the next: two batches or more a partition.

    A partition of several batches is what a read must walk from one Fetch to the next.
    """
    half = len(records) // 2
    async with Producer(bootstrap_servers=bootstrap_servers, **config) as producer:
        for part in (records[:half], records[half:]):
            futures = [
                await producer.send(topic, value=value, key=key, headers=headers, partition=partition)
                for partition, key, value, headers in part
            ]
            await asyncio.gather(*futures)


def fields(records: list[ConsumerRecord]) -> list[tuple[Any, ...]]:
    return [dataclasses.astuple(r) for r in records]


def as_rows(records: list[ConsumerRecord]) -> list[Row]:
    return [(r.partition, r.key, r.value, list(r.headers)) for r in records]


def by_partition(records: list[Row]) -> list[Row]:
    """``records`` in the order a read returns them: by partition, then as sent."""
    return sorted(records, key=lambda r: r[0])


@pytest.mark.parametrize("codec", CODECS)
async def test_read_equals_aiokafka_for_every_codec(mock_cluster: MockCluster, codec: str) -> None:
    sent = rows()
    await produce(mock_cluster.bootstrap_servers, "orders", sent, compression_type=codec, linger_ms=20)
    records = await mock_cluster.read("orders")
    assert as_rows(records) == by_partition(sent)
    assert fields(records) == await read_topic_aiokafka(mock_cluster.bootstrap_servers, "orders", range(PARTITIONS))
    assert [(r.partition, r.offset) for r in records] == sorted((r.partition, r.offset) for r in records)
    assert all(r.topic == "orders" and r.timestamp > 0 for r in records)


async def test_read_of_an_empty_topic_is_empty(mock_cluster: MockCluster) -> None:
    assert await mock_cluster.read("orders") == []
    assert await mock_cluster.read("orders", count=0) == []


async def _fetch_seen(mc: MockCluster) -> None:
    """Until a mock broker received a Fetch (the read has begun polling)."""
    while not any(r.api_key == FETCH for r in mc.requests()):
        await asyncio.sleep(0.01)


async def test_count_waits_for_records_produced_after_the_read_began(mock_cluster: MockCluster) -> None:
    mock_cluster.start_request_tracking()
    reading = asyncio.create_task(mock_cluster.read("orders", count=12, timeout=20.0))
    async with asyncio.timeout(10):
        await _fetch_seen(mock_cluster)
    assert not reading.done()
    sent = rows(12)
    await produce(mock_cluster.bootstrap_servers, "orders", sent)
    records = await reading
    assert as_rows(records) == by_partition(sent)


async def test_count_returns_everything_up_to_the_end_offsets_not_just_count(mock_cluster: MockCluster) -> None:
    """A duplicate past the ``count``-th record is still returned: a cut at ``count`` would hide it."""
    sent: list[Row] = [(0, b"k", b"once", []), (0, b"k", b"twice", []), (0, b"k", b"twice", [])]
    await produce(mock_cluster.bootstrap_servers, "orders", sent)
    records = await mock_cluster.read("orders", count=2)
    assert [r.value for r in records] == [b"once", b"twice", b"twice"]


async def test_count_never_reached_raises_a_timeout_naming_the_counts(mock_cluster: MockCluster) -> None:
    await produce(mock_cluster.bootstrap_servers, "orders", rows(2))
    with pytest.raises(KafkaTimeoutError, match=r"'orders'.* wanted 5 records, read 2 within 0.5 s"):
        await mock_cluster.read("orders", count=5, timeout=0.5)


@pytest.mark.parametrize("old_leader_down", [False, True], ids=["moved", "moved-old-leader-down"])
async def test_read_follows_a_leader_moved_mid_read(mock_cluster: MockCluster, old_leader_down: bool) -> None:
    """Every partition's leader moves while a read waits for records: it fetches from the new leaders."""
    for p in range(PARTITIONS):
        mock_cluster.set_partition_leader("orders", p, 1)
    first = rows(12, "a")
    await produce(mock_cluster.bootstrap_servers, "orders", first)
    mock_cluster.start_request_tracking()
    reading = asyncio.create_task(mock_cluster.read("orders", count=24, timeout=20.0))
    async with asyncio.timeout(10):
        await _fetch_seen(mock_cluster)
    for p in range(PARTITIONS):
        mock_cluster.set_partition_leader("orders", p, 2 + p % 2)
    if old_leader_down:
        mock_cluster.broker_down(1)
    mock_cluster.clear_requests()
    second = rows(12, "b")
    await produce(mock_cluster.bootstrap_servers, "orders", second)
    records = await reading
    assert as_rows(records) == by_partition(first + second)
    assert {r.broker_id for r in mock_cluster.requests() if r.api_key == FETCH} >= {2, 3}
    if not old_leader_down:
        assert fields(records) == await read_topic_aiokafka(mock_cluster.bootstrap_servers, "orders", range(PARTITIONS))


async def test_transactions_on_the_mock_committed_and_aborted_without_markers(mock_cluster: MockCluster) -> None:
    """The mock writes its transaction markers with a zero CRC: they are read (and dropped) all the same."""
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, transactional_id="read-mock") as producer:
        async with producer.transaction():
            await producer.send("orders", value=b"committed", partition=0)
        producer.begin_transaction()
        await (await producer.send("orders", value=b"aborted", partition=0))
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send("orders", value=b"last", partition=0)
    records = await mock_cluster.read("orders", count=3)
    assert [(r.offset, r.value) for r in records] == [(0, b"committed"), (2, b"aborted"), (4, b"last")]
    # aiokafka checks the markers' CRCs too, and refuses them: not here.
    assert fields(records) == await read_topic_aiokafka(mock_cluster.bootstrap_servers, "orders", range(PARTITIONS),
                                                        check_crcs=False)


async def test_fetch_errors_of_a_stale_leader_are_retried(mock_cluster: MockCluster) -> None:
    sent = rows(6)
    await produce(mock_cluster.bootstrap_servers, "orders", sent)
    mock_cluster.push_request_errors(FETCH, 6, 6, 6)  # NOT_LEADER_OR_FOLLOWER, three Fetches in a row
    assert as_rows(await mock_cluster.read("orders", timeout=10.0)) == by_partition(sent)


async def test_a_timeout_names_what_was_last_retried(mock_cluster: MockCluster) -> None:
    await produce(mock_cluster.bootstrap_servers, "orders", rows(1))
    mock_cluster.push_request_errors(FETCH, *[6] * 10_000)
    with pytest.raises(KafkaTimeoutError, match="wanted 1 records, read 0 .*NotLeaderOrFollowerError"):
        await mock_cluster.read("orders", count=1, timeout=0.5)


async def test_no_broker_listening_is_a_timeout_naming_the_connection() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    with pytest.raises(KafkaTimeoutError, match=f"read 0 within 0.5 s .*127.0.0.1:{port}"):
        await read_topic(f"127.0.0.1:{port}", "orders", timeout=0.5)


async def test_a_corrupt_batch_raises_a_protocol_error_at_once(mock_cluster: MockCluster) -> None:
    """The mock stores a batch without checking its CRC: the read checks it, and does not retry it."""
    builder = RecordBatchBuilder(compression.NONE, 1 << 16)
    builder.append(1_700_000_000_000, b"k", b"value", None)
    corrupt = bytearray(builder.build(-1, -1, -1, False))
    corrupt[-1] ^= 0xFF
    client = KafkaClient(ProducerConfig(bootstrap_servers=mock_cluster.bootstrap_servers))
    await client.bootstrap()
    try:
        await produce_batch(client, "orders", 0, bytes(corrupt))
    finally:
        await client.close()
    with pytest.raises(ProtocolError, match="CRC"):
        await mock_cluster.read("orders", timeout=10.0)


async def test_unknown_topic_raises_the_brokers_error_and_is_not_created(mock_cluster: MockCluster) -> None:
    for _ in range(2):  # had the first read created it, the second would return [] instead
        with pytest.raises(UnknownTopicOrPartitionError, match="'nope'"):
            await mock_cluster.read("nope", count=1, timeout=5.0)


async def test_a_closed_mock_cluster_refuses_to_read() -> None:
    mc = MockCluster(brokers=1, topics={"orders": 1})
    mc.close()
    with pytest.raises(MockClusterClosedError):
        await mc.read("orders")


@pytest.mark.parametrize(
    ("topic", "kwargs", "error", "match"),
    [
        ("", {}, ValueError, "topic"),
        (None, {}, TypeError, "topic"),
        ("orders", {"count": -1}, ValueError, "count"),
        ("orders", {"count": True}, TypeError, "count"),
        ("orders", {"count": 1.5}, TypeError, "count"),
        ("orders", {"timeout": 0}, ValueError, "timeout"),
        ("orders", {"timeout": "5"}, TypeError, "timeout"),
    ],
)
async def test_bad_arguments_raise_at_the_call_naming_them(
    mock_cluster: MockCluster, topic: Any, kwargs: dict[str, Any], error: type[Exception], match: str
) -> None:
    mock_cluster.start_request_tracking()
    with pytest.raises(error, match=match):
        await mock_cluster.read(topic, **kwargs)
    assert mock_cluster.requests() == []  # refused before any request
