"""send_many(): the bulk path delivers exactly what per-record send() would, in order."""

from __future__ import annotations

import asyncio
from collections import defaultdict

import pytest

from aioproducer import Producer, RecordMetadata
from aioproducer.partitioner import partition_for_key

from conftest import BrokerUnderTest
from readback import read_with


@pytest.mark.parametrize("keyed", [True, False], ids=["keyed", "keyless"])
async def test_send_many_delivers_every_record_in_order(cluster: BrokerUnderTest, keyed: bool) -> None:
    values = [b"value-%05d" % i for i in range(3000)]
    keys = [b"key-%03d" % (i % 50) for i in range(3000)] if keyed else None
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5, batch_size=4096) as producer:
        futures = await producer.send_many(cluster.topic, values, keys)
        results: list[RecordMetadata] = await asyncio.gather(*futures)
    assert len(results) == len(values)
    by_partition: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for index, md in enumerate(results):
        if keys is not None:
            assert md.partition == partition_for_key(keys[index], 6)
        by_partition[md.partition].append((md.offset, index))
    if keys is None:  # about 300 batches of 4 KB: the sticky partition moved on as batches filled
        assert len(by_partition) > 1
    for partition, entries in by_partition.items():
        offsets = [offset for offset, _ in entries]
        assert offsets == sorted(offsets), "send order must be offset order within a partition"
        read = await read_with("aiokafka", cluster.bootstrap_servers, cluster.topic, partition,
                               count=len(entries), start_offset=offsets[0])
        assert [(r.offset, r.value) for r in read] == [(offset, values[i]) for offset, i in entries]


async def test_send_many_hands_records_needing_send_to_send(cluster: BrokerUnderTest) -> None:
    # str values need the default UTF-8 path and a large value needs the size check: both go
    # through send(), in their place in the sequence.
    values: list[object] = [b"a", "text", b"b" * 5000, None]
    async with Producer(bootstrap_servers=cluster.bootstrap_servers) as producer:
        futures = await producer.send_many(cluster.topic, values, [b"k"] * 4)
        results = await asyncio.gather(*futures)
    partition = results[0].partition
    assert {md.partition for md in results} == {partition}
    read = await read_with("confluent-kafka", cluster.bootstrap_servers, cluster.topic, partition,
                           count=4, start_offset=results[0].offset)
    assert [r.value for r in read] == [b"a", b"text", b"b" * 5000, None]


async def test_keyless_send_many_hands_records_needing_send_to_send_in_their_place(cluster: BrokerUnderTest) -> None:
    """The keyless bulk path fills a batch after its first record; a value it cannot take goes through send()."""
    values: list[object] = [b"a", b"b", "text", b"c", None, b"d" * 5000, b"e"]
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=50) as producer:
        futures = await producer.send_many(cluster.topic, values)
        results = await asyncio.gather(*futures)
    partition = results[0].partition
    assert {md.partition for md in results} == {partition}  # one sticky batch's worth
    assert [md.offset for md in results] == list(range(results[0].offset, results[0].offset + len(values)))
    read = await read_with("kafka-python", cluster.bootstrap_servers, cluster.topic, partition,
                           count=len(values), start_offset=results[0].offset)
    assert [r.value for r in read] == [b"a", b"b", b"text", b"c", None, b"d" * 5000, b"e"]
