"""End to end delivery: what the producer sends reads back byte-exact, where and in the order it said.

Every record is read back by two independent consumers (aiokafka and
confluent-kafka/librdkafka) at the offset its ``RecordMetadata`` reported, for
every codec. Batch boundaries are read from the partition log itself, decoded
by kafka-python (a third, independent RecordBatch decoder), to check that
``linger.ms`` and ``batch.size`` shape batches as configured.

The readers here are small and local on purpose (assign + seek, no group);
``tests/integration/readback.py`` will offer shared ones.
"""

from __future__ import annotations

from typing import Any

import asyncio
from dataclasses import dataclass

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import OFFSET_BEGINNING, Consumer
from confluent_kafka import KafkaError as CKafkaError
from confluent_kafka import TopicPartition as CTopicPartition
from kafka.client_async import KafkaClient as KpClient
from kafka.protocol.fetch import FetchRequest
from kafka.record.memory_records import MemoryRecords
from kafka.structs import TopicPartition as KpTopicPartition

from aioproducer import Producer, RecordMetadata

from conftest import BrokerUnderTest

pytestmark = pytest.mark.integration

PARTITIONS = 6
FAST = {"request_timeout_ms": 1000, "delivery_timeout_ms": 3000, "retry_backoff_ms": 20, "reconnect_backoff_ms": 10}


# ------------------------------------------------------------------ readers


@dataclass(frozen=True)
class Read:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


async def read_aiokafka(bootstrap: str, topic: str, partitions: range | list[int]) -> dict[int, list[Read]]:
    """Every record of the partitions, from offset 0 to the high watermark, through aiokafka."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [AioTopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        out: dict[int, list[Read]] = {p: [] for p in partitions}

        def behind() -> bool:
            return any(ends[tp] > 0 and (not out[tp.partition] or out[tp.partition][-1].offset < ends[tp] - 1) for tp in tps)

        async with asyncio.timeout(10):
            while behind():
                for tp, messages in (await consumer.getmany(timeout_ms=500)).items():
                    out[tp.partition] += [Read(m.offset, m.key, m.value, tuple(m.headers), m.timestamp) for m in messages]
        return out
    finally:
        await consumer.stop()


def read_confluent(bootstrap: str, topic: str, partitions: range | list[int]) -> dict[int, list[Read]]:
    """The same through librdkafka's consumer (blocking: call via ``asyncio.to_thread``)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "aioproducer-readback",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 10,
        }
    )
    try:
        consumer.assign([CTopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        out: dict[int, list[Read]] = {p: [] for p in partitions}
        at_end: set[int] = set()
        for _ in range(500):  # bounded: at most 500 polls of 0.1 s
            m: Any = consumer.poll(0.1)
            if m is None:
                continue
            if m.error():
                if m.error().code() != CKafkaError._PARTITION_EOF:
                    raise AssertionError(f"confluent consumer error: {m.error()}")
                at_end.add(m.partition())
                if at_end == set(partitions):
                    return out
                continue
            out[m.partition()].append(Read(m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp()[1]))
        raise AssertionError(f"{topic}: no end of partitions within the poll budget")
    finally:
        consumer.close()


@dataclass(frozen=True)
class RawBatch:
    base_offset: int
    size_in_bytes: int
    compression_type: int
    producer_id: int
    base_sequence: int
    values: list[bytes | None]


def read_raw_batches(bootstrap: str, topic: str, partition: int) -> list[RawBatch]:
    """The partition log as RecordBatches, decoded by kafka-python (Fetch v4; blocking)."""
    client = KpClient(bootstrap_servers=bootstrap, api_version=(2, 5))
    try:
        client.set_topics([topic])
        client.poll(future=client.cluster.request_update())
        leader = client.cluster.leader_for_partition(KpTopicPartition(topic, partition))
        assert leader is not None, f"no leader known for {topic}-{partition}"
        batches: list[RawBatch] = []
        offset = 0
        while True:
            assert client.await_ready(leader, timeout_ms=5000)
            request = FetchRequest[4](-1, 0, 0, 1 << 24, 0, [(topic, [(partition, offset, 1 << 24)])])
            future = client.send(leader, request)
            client.poll(future=future)
            part = future.value.topics[0][1][0]
            assert part[1] == 0, f"fetch error {part[1]}"
            records = MemoryRecords(part[-1])
            fetched = 0
            while (batch := records.next_batch()) is not None:
                batches.append(
                    RawBatch(
                        batch.base_offset,
                        batch.size_in_bytes,
                        batch.compression_type,
                        batch.producer_id,
                        batch.base_sequence,
                        [r.value for r in batch],
                    )
                )
                offset = batch.next_offset
                fetched += 1
            if not fetched:
                return batches
    finally:
        client.close()


# ------------------------------------------------------------------ data


@dataclass(frozen=True)
class Sent:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def _records(n: int) -> list[Sent]:
    """Varied records: null/empty/binary keys and values, headers with duplicates and nulls, sizes up to 3 KiB."""
    out = []
    for i in range(n):
        key = None if i % 7 == 0 else (b"" if i % 11 == 0 else b"key-%d" % (i % 13))
        if i % 9 == 0:
            value: bytes | None = None
        elif i % 10 == 0:
            value = b""
        else:
            value = bytes((i * 31 + j) % 256 for j in range(i * 17 % 3000)) + b"#%d" % i
        headers: tuple[tuple[str, bytes | None], ...] = ()
        if i % 3 == 0:
            headers = (("trace", b"t%d" % i), ("dup", b"1"), ("dup", b"2"), ("null", None), ("h\u00e9", b"\x00\xff"))
        out.append(Sent(key, value, headers, 1_700_000_000_000 + i))
    return out


async def _produce(producer: Producer, topic: str, records: list[Sent]) -> list[RecordMetadata]:
    futures = []
    for i, r in enumerate(records):
        # Spread explicitly, so every partition gets records whatever the keys hash to.
        futures.append(
            await producer.send(
                topic, value=r.value, key=r.key, headers=list(r.headers), partition=i % PARTITIONS, timestamp_ms=r.timestamp
            )
        )
    return list(await asyncio.gather(*futures))


def _expected_by_partition(records: list[Sent], metadata: list[RecordMetadata]) -> dict[int, list[tuple[int, Sent]]]:
    by_partition: dict[int, list[tuple[int, Sent]]] = {}
    for r, md in zip(records, metadata):
        by_partition.setdefault(md.partition, []).append((md.offset, r))
    return by_partition


def _check_partition(got: list[Read], expected: list[tuple[int, Sent]], who: str) -> None:
    offsets = [o for o, _ in expected]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets), f"{who}: offsets not in send order"
    assert [g.offset for g in got] == offsets, f"{who}: log offsets differ from RecordMetadata offsets"
    for g, (offset, s) in zip(got, expected):
        assert (g.key, g.value, g.headers, g.timestamp) == (s.key, s.value, s.headers, s.timestamp), (
            f"{who}: record at offset {offset} differs"
        )


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
async def test_every_record_reads_back_byte_exact_at_its_offset_in_send_order(
    cluster: BrokerUnderTest, codec: str
) -> None:
    records = _records(240)
    async with Producer(
        bootstrap_servers=cluster.bootstrap_servers, compression_type=codec, linger_ms=2, batch_size=8192, **cluster.timeouts(FAST)
    ) as producer:
        metadata = await _produce(producer, cluster.topic, records)
    assert [md.partition for md in metadata] == [i % PARTITIONS for i in range(len(records))]
    for r, md in zip(records, metadata):
        assert md.topic == cluster.topic
        assert md.serialized_key_size == (-1 if r.key is None else len(r.key))
        assert md.serialized_value_size == (-1 if r.value is None else len(r.value))

    expected = _expected_by_partition(records, metadata)
    got_aio = await read_aiokafka(cluster.bootstrap_servers, cluster.topic, range(PARTITIONS))
    got_ck = await asyncio.to_thread(read_confluent, cluster.bootstrap_servers, cluster.topic, range(PARTITIONS))
    for partition in range(PARTITIONS):
        _check_partition(got_aio[partition], expected[partition], f"aiokafka {codec} p{partition}")
        _check_partition(got_ck[partition], expected[partition], f"confluent {codec} p{partition}")
    raw = await asyncio.to_thread(read_raw_batches, cluster.bootstrap_servers, cluster.topic, 0)
    codec_id = ["none", "gzip", "snappy", "lz4", "zstd"].index(codec)
    assert raw and {b.compression_type for b in raw} == {codec_id}


async def test_keyed_records_keep_send_order_per_partition(cluster: BrokerUnderTest) -> None:
    """Records with keys go through the partitioner; order per partition is send order."""
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=1, **cluster.timeouts(FAST)) as producer:
        futures = [await producer.send(cluster.topic, value=b"%d" % i, key=b"user-%d" % (i % 17)) for i in range(500)]
        metadata = list(await asyncio.gather(*futures))
    by_partition: dict[int, list[bytes]] = {}
    for i, md in enumerate(metadata):
        by_partition.setdefault(md.partition, []).append(b"%d" % i)
    assert len(by_partition) > 1
    got_all = await read_aiokafka(cluster.bootstrap_servers, cluster.topic, range(PARTITIONS))
    for partition, values in by_partition.items():
        got = got_all[partition]
        assert [g.value for g in got] == values
        assert [g.offset for g in got] == list(range(len(values)))


async def test_batch_size_bounds_every_batch(cluster: BrokerUnderTest) -> None:
    """With a long linger, only batch.size closes a batch: each is <= batch.size, and the next record would not fit."""
    batch_size = 1024
    n = 60
    value = b"x" * 100
    async with Producer(
        bootstrap_servers=cluster.bootstrap_servers, linger_ms=60_000, batch_size=batch_size, **{**cluster.timeouts(FAST), "delivery_timeout_ms": 90_000}
    ) as producer:
        futures = [await producer.send(cluster.topic, value=value, partition=2) for _ in range(n)]
        await producer.flush()
        metadata = [f.result() for f in futures]
    raw = await asyncio.to_thread(read_raw_batches, cluster.bootstrap_servers, cluster.topic, 2)
    assert sum(len(b.values) for b in raw) == n
    assert len(raw) > 1
    for batch in raw:
        assert batch.size_in_bytes <= batch_size, batch
    per_record = (raw[0].size_in_bytes - 61) / len(raw[0].values)
    for batch in raw[:-1]:
        assert len(batch.values) == len(raw[0].values)
        assert batch.size_in_bytes + per_record > batch_size, "a batch was closed before it was full"
    # Every record's metadata names its batch's base offset + its index in the batch.
    starts = {b.base_offset for b in raw}
    assert [md.offset for md in metadata] == list(range(n))
    assert {md.offset for md in metadata if md.offset in starts} == starts


async def test_linger_collects_records_sent_one_by_one_into_one_batch(cluster: BrokerUnderTest) -> None:
    """linger.ms keeps a non-full batch open: records sent in separate loop iterations share it."""
    async with Producer(
        bootstrap_servers=cluster.bootstrap_servers, linger_ms=60_000, **{**cluster.timeouts(FAST), "delivery_timeout_ms": 90_000}
    ) as producer:
        futures = []
        for i in range(5):
            futures.append(await producer.send(cluster.topic, value=b"%d" % i, partition=1))
            await asyncio.sleep(0)  # let the sender run between sends: still nothing to send
        assert not any(f.done() for f in futures)
        await producer.flush()
    raw = await asyncio.to_thread(read_raw_batches, cluster.bootstrap_servers, cluster.topic, 1)
    assert [b.values for b in raw] == [[b"0", b"1", b"2", b"3", b"4"]]


async def test_zero_linger_sends_each_awaited_record_in_its_own_batch(cluster: BrokerUnderTest) -> None:
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=0, **cluster.timeouts(FAST)) as producer:
        for i in range(5):
            await (await producer.send(cluster.topic, value=b"%d" % i, partition=3))
    raw = await asyncio.to_thread(read_raw_batches, cluster.bootstrap_servers, cluster.topic, 3)
    assert [b.values for b in raw] == [[b"%d" % i] for i in range(5)]


async def test_batch_size_zero_means_one_record_per_batch(cluster: BrokerUnderTest) -> None:
    async with Producer(
        bootstrap_servers=cluster.bootstrap_servers, linger_ms=60_000, batch_size=0, **{**cluster.timeouts(FAST), "delivery_timeout_ms": 90_000}
    ) as producer:
        futures = [await producer.send(cluster.topic, value=b"%d" % i, partition=4) for i in range(6)]
        await producer.flush()
        assert [f.result().offset for f in futures] == list(range(6))
    raw = await asyncio.to_thread(read_raw_batches, cluster.bootstrap_servers, cluster.topic, 4)
    assert [b.values for b in raw] == [[b"%d" % i] for i in range(6)]


async def test_idempotent_batches_carry_consecutive_sequences(cluster: BrokerUnderTest) -> None:
    """Idempotence is on by default: one producer id, sequences = offsets on a fresh partition."""
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5, batch_size=300, **cluster.timeouts(FAST)) as producer:
        futures = [await producer.send(cluster.topic, value=b"v%02d" % i, partition=0) for i in range(40)]
        await producer.flush()
        producer_id = producer.metrics()["producer_id"]
        assert all(f.result() for f in futures)
    raw = await asyncio.to_thread(read_raw_batches, cluster.bootstrap_servers, cluster.topic, 0)
    assert len(raw) > 1
    assert {b.producer_id for b in raw} == {producer_id} and producer_id >= 0
    assert [b.base_sequence for b in raw] == [b.base_offset for b in raw]

