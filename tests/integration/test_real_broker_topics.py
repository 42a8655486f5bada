"""Topics as a real broker handles them: auto-creation on and off, and ``LogAppendTime``.

What the Java producer does, and so what aioproducer does: its Metadata
requests allow auto-creation, so a broker with ``auto.create.topics.enable=true``
(Kafka's default) creates a topic on the first send to it, with the broker's
``num.partitions``; with it off, the topic stays unknown and ``send()`` fails
after ``max.block.ms`` with "Topic ... not present in metadata".

A topic with ``message.timestamp.type=LogAppendTime`` gets the broker's clock
as every record's timestamp: the producer's ``RecordMetadata.timestamp`` must
be that time (taken from the Produce response), not the create time it sent,
and consumers must read the same value, flagged as log-append time.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any
from collections.abc import Iterator

import pytest

from aioproducer import KafkaTimeoutError, Producer, RecordMetadata
from aioproducer.errors import MessageTooLargeError
from aioproducer.testing import KafkaCluster

from conftest import kafka_or_skip, new_topic
from readback import JavaRecord, read_java_raw, read_with

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_123  # a create time far in the past: a log-append time cannot be mistaken for it


@pytest.fixture(scope="module")
def no_auto_create() -> Iterator[KafkaCluster]:
    cluster = kafka_or_skip(brokers=1, broker_config={"auto.create.topics.enable": False})
    with cluster:
        yield cluster


async def test_auto_creation_on_creates_the_topic_on_first_send(kafka_cluster: KafkaCluster) -> None:
    topic = f"auto-{uuid.uuid4().hex[:12]}"
    async with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers, max_block_ms=30_000) as producer:
        md = await (await producer.send(topic, b"first", key=b"k"))
        assert (md.topic, md.partition, md.offset) == (topic, 0, 0)
        assert await producer.partitions_for(topic) == [0]  # the broker's num.partitions=1
    got = await read_with("confluent-kafka", kafka_cluster.bootstrap_servers, topic, 0, count=1)
    assert [(r.key, r.value) for r in got] == [(b"k", b"first")]


async def test_auto_creation_off_fails_after_max_block_ms_and_creates_nothing(no_auto_create: KafkaCluster) -> None:
    topic = f"absent-{uuid.uuid4().hex[:12]}"
    async with Producer(bootstrap_servers=no_auto_create.bootstrap_servers, max_block_ms=1500) as producer:
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match=f"Topic {topic} not present in metadata after 1500 ms"):
            await producer.send(topic, b"lost")
        assert time.monotonic() - started >= 1.5
        # The producer is not poisoned: a topic that exists still works.
        existing = new_topic(no_auto_create, 1)
        assert (await (await producer.send(existing, b"ok"))).offset == 0
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": no_auto_create.bootstrap_servers})
    assert topic not in admin.list_topics(timeout=10).topics


async def test_log_append_time_is_the_brokers_clock_in_metadata_and_for_consumers(kafka_cluster: KafkaCluster) -> None:
    topic = new_topic(kafka_cluster, 1, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    reported: list[RecordMetadata | None] = []
    async with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers, linger_ms=20) as producer:
        futures = [await producer.send(topic, b"v%d" % i, timestamp_ms=T0 + i) for i in range(4)]
        futures.append(await producer.send(topic, b"v4", timestamp_ms=T0 + 4, on_delivery=lambda md, _: reported.append(md)))
        metadata = [await f for f in futures]
    after = int(time.time() * 1000)
    # aiokafka's timestamp_type: 1, LogAppendTime, from the future (native) and from on_delivery (Python).
    assert [md.timestamp_type for md in metadata] == [1] * 5
    assert [md.timestamp_type if md else None for md in reported] == [1]
    stamps = {md.timestamp for md in metadata}
    assert len(stamps) == 1, "one batch, one append time"  # linger.ms=20 put the five in one batch
    (stamp,) = stamps
    assert before - 1000 <= stamp <= after + 1000, (before, stamp, after)  # the broker's clock, not T0
    java = await _read_java(kafka_cluster, topic, 5)
    assert {(r.timestamp_type, r.timestamp) for r in java} == {("LogAppendTime", stamp)}
    aio = await read_with("aiokafka", kafka_cluster.bootstrap_servers, topic, 0, count=5)
    assert [r.timestamp for r in aio] == [stamp] * 5


async def test_create_time_topic_keeps_the_producers_timestamps(kafka_cluster: KafkaCluster) -> None:
    """The control case: with the default CreateTime, metadata and consumers see what was sent."""
    topic = new_topic(kafka_cluster, 1)
    async with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers) as producer:
        futures = [await producer.send(topic, b"v%d" % i, timestamp_ms=T0 + i) for i in range(3)]
        assert [((await f).timestamp, (await f).timestamp_type) for f in futures] == [(T0, 0), (T0 + 1, 0), (T0 + 2, 0)]
    java = await _read_java(kafka_cluster, topic, 3)
    assert [(r.timestamp_type, r.timestamp) for r in java] == [("CreateTime", T0 + i) for i in range(3)]


async def _read_java(cluster: KafkaCluster, topic: str, count: int) -> list[JavaRecord]:
    return await asyncio.to_thread(read_java_raw, cluster.bootstrap_servers, topic, 0, count=count, timeout=30)


@pytest.mark.parametrize("callbacks", [False, True], ids=["futures", "on_delivery"])
async def test_a_batch_over_the_topics_max_message_bytes_is_split_until_it_fits(
    kafka_cluster: KafkaCluster, callbacks: bool
) -> None:
    """max.message.bytes below batch.size: the refused batch is halved until each piece fits; all arrive in order.

    With ``on_delivery`` on every other record the batch holds those records' callbacks, not their
    futures: the futures kept here must still get each its own offset, from the piece that holds it.
    """
    topic = new_topic(kafka_cluster, 1, config={"max.message.bytes": 1200})
    values = [b"%03d" % i + b"x" * 97 for i in range(60)]  # ~7 KB together, one batch under linger.ms
    reported: dict[int, int] = {}

    def reporter(i: int) -> Any:
        return lambda md, err: reported.__setitem__(i, md.offset if err is None else -2)

    async with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers, linger_ms=200) as producer:
        futures = [
            await producer.send(topic, v, partition=0, on_delivery=reporter(i) if callbacks and i % 2 else None)
            for i, v in enumerate(values)
        ]
        offsets = [(await f).offset for f in futures]
        assert offsets == list(range(60))
        assert reported == ({i: i for i in range(1, 60, 2)} if callbacks else {})
        # One record over the limit cannot be split: it fails at once, naming the sizes.
        started = time.monotonic()
        with pytest.raises(MessageTooLargeError, match=r"1 record\(s\) .* in a \d+-byte batch as too large"):
            await (await producer.send(topic, b"y" * 2000, partition=0))
        assert time.monotonic() - started < 5
    got = await read_with("confluent-kafka", kafka_cluster.bootstrap_servers, topic, 0, count=60)
    assert [r.value for r in got] == values
