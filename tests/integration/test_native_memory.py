"""A million records sent and acknowledged leave the producer's memory flat (issue #28's safety bar).

The data plane is native now: a leak there (a builder's section, a built batch, a record's
future or callback kept past its acknowledgement) would not show in Python's object counts
but does in ``tracemalloc`` (PyO3's allocations of Python objects) and in the process's
resident set. Against the session's real Kafka node, a separate process, so the resident
set is the producer's alone (librdkafka's mock would keep the records in this process).
After a warm-up (the allocator's arenas, the connection buffers, the metadata), the resident
set may move by what the allocator keeps, not by what a million records would leak:
100 bytes leaked per record would be 100 MB.
"""

from __future__ import annotations

import gc
import os
import tracemalloc
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.testing import KafkaCluster
from conftest import new_topic

pytestmark = pytest.mark.timeout(300)

CHUNK = 10_000
VALUES = [b"v" * 100] * CHUNK
KEYS = [b"key-%d" % i for i in range(CHUNK)]


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class Acks:
    """Counts what ``on_delivery`` reports; the callback keeps nothing per record."""

    def __init__(self) -> None:
        self.ok = 0
        self.failed = 0

    def __call__(self, metadata: Any, error: BaseException | None) -> None:
        if error is None:
            self.ok += 1
        else:
            self.failed += 1


async def send_acknowledged(producer: Producer, topic: str, records: int, acks: Acks) -> None:
    for _ in range(records // CHUNK):
        await producer.send_many(topic, VALUES, KEYS, on_delivery=acks)
    await producer.flush()


async def test_a_million_acknowledged_records_leave_memory_flat(kafka_cluster: KafkaCluster) -> None:
    topic = new_topic(kafka_cluster)
    acks = Acks()
    async with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers, linger_ms=5) as producer:
        await send_acknowledged(producer, topic, 200_000, acks)  # warm-up
        gc.collect()
        before = resident_bytes()
        await send_acknowledged(producer, topic, 1_000_000, acks)
        gc.collect()
        grown = resident_bytes() - before
        # What Python and the native module still hold after a further 200k (tracemalloc
        # slows every allocation, so it watches a shorter run): nothing per record.
        tracemalloc.start()
        try:
            await send_acknowledged(producer, topic, 200_000, acks)
            gc.collect()
            held, _peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert (acks.ok, acks.failed) == (1_400_000, 0)
    assert held < 1_000_000, f"{held} bytes still held after 200k acknowledged records"
    assert grown < 32 * 1024 * 1024, f"resident set grew {grown / 1e6:.1f} MB over 1M acknowledged records"
