"""Backpressure: buffer.memory bounds what is queued, send() waits (then times out), in-flight limits hold."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aioproducer import KafkaTimeoutError, Producer
from aioproducer.partitioner import partition_for_key
from aioproducer.testing import MockCluster
from helpers import eventually
from readback import read_all_values

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 6
PRODUCE = 0
KIB = 1024
FAST: dict[str, Any] = {
    "request_timeout_ms": 2000,
    "delivery_timeout_ms": 5000,
    "retry_backoff_ms": 20,
    "reconnect_backoff_ms": 10,
    "reconnect_backoff_max_ms": 100,
    "linger_ms": 0,
}


async def read_values(bootstrap: str, partitions: range = range(PARTITIONS)) -> dict[int, list[bytes]]:
    return await read_all_values(bootstrap, TOPIC, partitions)



async def test_send_waits_for_buffer_memory_instead_of_growing_it(mock_cluster: MockCluster) -> None:
    for broker in mock_cluster.broker_ids:
        mock_cluster.set_rtt(broker, 200)
    total = 64 * KIB
    config = {**FAST, "buffer_memory": total, "batch_size": 16 * KIB}
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        samples: list[dict[str, Any]] = []
        stop = asyncio.Event()

        async def sample() -> None:
            while not stop.is_set():
                samples.append(producer.metrics())
                await asyncio.sleep(0.002)

        sampler = asyncio.create_task(sample())
        futures = []
        for i in range(36):
            p = i % PARTITIONS
            value = b"%03d" % i + bytes([i % 256]) * 4000
            futures.append(await producer.send(TOPIC, value=value, partition=p))
            sent[p].append(value)
            samples.append(producer.metrics())
        await asyncio.gather(*futures)
        stop.set()
        await sampler
        assert producer.metrics()["buffer_available_bytes"] == total
    assert all(0 <= s["buffer_available_bytes"] <= total for s in samples)
    assert max(s["waiting_for_buffer"] for s in samples) > 0, "send() never had to wait for memory"
    for broker in mock_cluster.broker_ids:
        mock_cluster.set_rtt(broker, 0)
    assert await read_values(mock_cluster.bootstrap_servers) == sent


async def test_keyed_records_that_wait_for_memory_go_to_their_key_s_partition_in_order(mock_cluster: MockCluster) -> None:
    """``send()``'s plain route: a keyed record that finds no memory waits and lands where its key says.

    The wait goes straight to the accumulator (``RecordIntake.wait_and_append``), with the
    partition the route computed: a record sent elsewhere, or twice, or lost, shows here.
    """
    for broker in mock_cluster.broker_ids:
        mock_cluster.set_rtt(broker, 100)
    config = {**FAST, "buffer_memory": 64 * KIB, "batch_size": 16 * KIB}
    expected: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        futures = []
        for i in range(60):
            key = b"key-%d" % (i * 7919)
            value = b"%03d" % i + bytes([i % 256]) * 6000
            futures.append(await producer.send(TOPIC, value=value, key=key))
            expected[partition_for_key(key, PARTITIONS)].append(value)
        metadata = await asyncio.gather(*futures)
        assert [m.partition for m in metadata] == [partition_for_key(b"key-%d" % (i * 7919), PARTITIONS) for i in range(60)]
        assert producer.metrics()["bufferpool-wait-time-total"] > 0, "no send() waited for memory"
    for broker in mock_cluster.broker_ids:
        mock_cluster.set_rtt(broker, 0)
    assert await read_values(mock_cluster.bootstrap_servers) == expected


async def test_buffer_available_bytes_never_goes_negative_with_many_waiting_senders() -> None:
    """64 concurrent senders on 64 KiB: memory runs out, and the metric stays within [0, buffer.memory].

    Issue #25 saw ``buffer_available_bytes`` at -46,747 (of 1 MiB) while 64 sends waited: the
    charge for a full batch's futures overdrew the pool, and the overdraft was shown as
    negative free memory. Java's ``buffer-available-bytes`` is the memory no batch holds.
    Four partitions, so that their four 16 KiB batches fill the 64 KiB and keep filling.
    """
    total = 64 * KIB
    config = {**FAST, "buffer_memory": total, "batch_size": 16 * KIB, "linger_ms": 5}
    samples: list[dict[str, Any]] = []
    with MockCluster(brokers=1, topics={"four": 4}) as cluster:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, **config) as producer:

            async def sender(n: int) -> None:
                futures = []
                for i in range(10):  # 640 records of ~100 bytes: the four batches fill, then sends wait
                    futures.append(await producer.send("four", value=b"v" * 100, key=b"%d" % i))
                    samples.append(producer.metrics())
                await asyncio.gather(*futures)

            await asyncio.gather(*(sender(n) for n in range(64)))
            assert producer.metrics()["buffer_available_bytes"] == total
    assert max(s["waiting_for_buffer"] for s in samples) > 0, "send() never had to wait for memory"
    lowest = min(s["buffer_available_bytes"] for s in samples)
    assert 0 <= lowest and max(s["buffer_available_bytes"] for s in samples) <= total, lowest


async def test_a_blocked_send_resumes_when_memory_is_freed(mock_cluster: MockCluster) -> None:
    """4 open batches of 16 KiB fill 64 KiB: a 5th partition's first record waits until a batch completes."""
    mock_cluster.set_rtt(1, 300)
    for p in range(PARTITIONS):
        mock_cluster.set_partition_leader(TOPIC, p, 1)
    config = {**FAST, "buffer_memory": 64 * KIB, "batch_size": 16 * KIB}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        first = [await producer.send(TOPIC, value=b"first-%d" % p, partition=p) for p in range(4)]
        assert producer.metrics()["buffer_available_bytes"] == 0
        blocked = asyncio.create_task(producer.send(TOPIC, value=b"fifth", partition=4))
        await eventually(lambda: producer.metrics()["waiting_for_buffer"] == 1, what="the fifth send waiting")
        assert not blocked.done() and not any(f.done() for f in first)
        fifth = await blocked  # resumes once a 300 ms round trip freed a batch
        assert any(f.done() for f in first)
        assert (await fifth).partition == 4
        await asyncio.gather(*first)
    mock_cluster.set_rtt(1, 0)
    got = await read_values(mock_cluster.bootstrap_servers, range(5))
    assert got == {0: [b"first-0"], 1: [b"first-1"], 2: [b"first-2"], 3: [b"first-3"], 4: [b"fifth"]}


async def test_send_times_out_after_max_block_ms_when_nothing_frees_up(mock_cluster: MockCluster) -> None:
    config = {**FAST, "buffer_memory": 64 * KIB, "batch_size": 16 * KIB, "max_block_ms": 300, "delivery_timeout_ms": 8000}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        await producer.partitions_for(TOPIC)
        for broker in mock_cluster.broker_ids:
            mock_cluster.broker_down(broker)
        earlier = [await producer.send(TOPIC, value=b"earlier-%d" % p, partition=p) for p in range(4)]
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="max.block.ms"):
            await producer.send(TOPIC, value=b"no room", partition=4)
        assert time.monotonic() - started >= 0.29
        metrics = producer.metrics()
        assert metrics["waiting_for_buffer"] == 0 and metrics["buffer_available_bytes"] == 0
        for broker in mock_cluster.broker_ids:
            mock_cluster.broker_up(broker)
        assert [(await f).offset for f in earlier] == [0, 0, 0, 0]  # nothing sent earlier is lost
        assert (await (await producer.send(TOPIC, value=b"later", partition=4))).offset == 0
    got = await read_values(mock_cluster.bootstrap_servers, range(5))
    assert got == {0: [b"earlier-0"], 1: [b"earlier-1"], 2: [b"earlier-2"], 3: [b"earlier-3"], 4: [b"later"]}


@pytest.mark.parametrize("max_in_flight", [1, 2, 5])
async def test_no_more_than_max_in_flight_requests_per_connection(mock_cluster: MockCluster, max_in_flight: int) -> None:
    rtt_ms = 100
    for p in range(PARTITIONS):
        mock_cluster.set_partition_leader(TOPIC, p, 1)
    mock_cluster.set_rtt(1, rtt_ms)
    config = {
        **FAST,
        "max_in_flight_requests_per_connection": max_in_flight,
        "batch_size": 200,  # many small batches: requests queue up behind the limit
    }
    if max_in_flight == 1:
        config["enable_idempotence"] = False
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        await producer.partitions_for(TOPIC)
        # An idempotent producer keeps one batch in flight per partition until the broker has
        # acknowledged one (TransactionManager.should_stop_drain): get that first ack out of the way.
        await asyncio.gather(*[await producer.send(TOPIC, value=b"first", partition=p) for p in range(2)])
        mock_cluster.start_request_tracking()
        futures = [await producer.send(TOPIC, value=b"%04d" % i + b"." * 60, partition=i % 2) for i in range(40)]
        await asyncio.gather(*futures)
        connections = [c for c in producer._engine.client._conns.values()]  # type: ignore[union-attr]
        observed = max(c.max_in_flight_observed for c in connections)
    assert observed == max_in_flight  # reached (the test can fail) and never exceeded
    # From the broker's side: request i + max_in_flight cannot arrive before response i left (rtt later).
    produce = [r.timestamp_us for r in mock_cluster.requests() if r.api_key == PRODUCE and r.broker_id == 1]
    assert len(produce) > 2 * max_in_flight
    gaps = [produce[i + max_in_flight] - produce[i] for i in range(len(produce) - max_in_flight)]
    assert min(gaps) >= rtt_ms * 1000 * 0.9, gaps
    # And the limit was used: the first max_in_flight requests went out together, without waiting.
    assert produce[max_in_flight - 1] - produce[0] < rtt_ms * 1000 * 0.5, produce[:max_in_flight]
