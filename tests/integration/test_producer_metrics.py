"""``producer.metrics()``'s Java metrics, driven by known traffic through the mock cluster."""

from __future__ import annotations

import asyncio
import math
import time
from array import array
from collections.abc import Sequence
from typing import Any

import pytest

from aioproducer import KafkaTimeoutError, Producer
from aioproducer.internals.metrics import DeliveryLatency
from aioproducer.testing import MockCluster
from helpers import FAST_RETRIES

pytestmark = pytest.mark.integration

TOPIC = "orders"
PRODUCE = 0
NOT_LEADER_OR_FOLLOWER = 6
FAST = FAST_RETRIES


async def test_metrics_of_acknowledged_and_retried_records(mock_cluster: MockCluster) -> None:
    started = time.monotonic()
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST) as producer:
        first = producer.metrics()
        assert first["record-send-total"] == 0 and first["request-total"] == 0
        await (await producer.send(TOPIC, value=b"warm", partition=0))
        mock_cluster.push_request_errors(PRODUCE, *(NOT_LEADER_OR_FOLLOWER,) * 3)
        futures = [await producer.send(TOPIC, value=b"v%d" % i, partition=i % 6) for i in range(200)]
        await asyncio.gather(*futures)
        await producer.send_and_wait("other", value=b"x" * 50, partition=0)
        m = producer.metrics()
        wall_ms = (time.monotonic() - started) * 1000
    # Kept as they were, beside the Java names.
    assert m["records_sent"] == 202 and m["records_failed"] == 0 and m["last_error"] is None
    assert m["record-send-total"] == 202 and m["record-error-total"] == 0
    assert m["topic.orders.record-send-total"] == 201 and m["topic.other.record-send-total"] == 1
    assert m["record-retry-total"] >= 3  # each injected error sent a batch (at least one record) back
    assert m["topic.orders.record-retry-total"] == m["record-retry-total"]
    assert m["record-retry-rate"] > 0 and m["record-send-rate"] > 0
    assert m["request-total"] > 3 and m["request-rate"] > 0
    assert m["topic.orders.byte-total"] > 200 * 2 and m["topic.other.byte-total"] > 50
    assert m["buffer-available-bytes"] == m["buffer-total-bytes"] == m["buffer_total_bytes"]
    assert m["waiting-threads"] == 0 and m["requests-in-flight"] == 0
    assert m["bufferpool-wait-time-total"] == 0 and m["bufferpool-wait-ratio"] == 0
    for name in ("request-latency-avg", "request-latency-max", "record-queue-time-avg", "record-queue-time-max"):
        assert 0 <= m[name] <= wall_ms, name
    assert 0 < m["request-latency-avg"] <= m["request-latency-max"] < wall_ms
    assert m["produce-throttle-time-max"] == 0  # the mock does not throttle
    assert m["batch-size-max"] >= m["batch-size-avg"] > 0
    assert m["record-size-max"] >= m["record-size-avg"] > 0
    assert m["records-per-request-avg"] >= 1
    assert m["compression-rate-avg"] == 1.0  # no compression
    assert 0 <= m["metadata-age"] < wall_ms / 1000
    assert m["connection-count"] >= 1
    assert m["outgoing-byte-total"] > m["topic.orders.byte-total"] and m["incoming-byte-total"] > 0
    assert m["outgoing-byte-rate"] > 0
    node_latency = [k for k in m if k.startswith("node-") and k.endswith(".request-latency-max")]
    assert node_latency and all(0 < m[k] < wall_ms for k in node_latency if not math.isnan(m[k]))
    assert sum(v for k, v in m.items() if k.startswith("node-") and k.endswith(".outgoing-byte-total")) == m[
        "outgoing-byte-total"
    ]
    assert sum(v for k, v in m.items() if k.startswith("node-") and k.endswith(".incoming-byte-total")) == m[
        "incoming-byte-total"
    ]
    node_requests = sum(v for k, v in m.items() if k.startswith("node-") and k.endswith(".request-total"))
    assert node_requests > m["request-total"]  # every kind of request (Metadata, ApiVersions ...), not Produce only
    assert all(m[k] > 0 for k in m if k.startswith("node-") and k.endswith(".outgoing-byte-rate"))
    assert m["topic.orders.record-send-rate"] > 0 and m["topic.orders.byte-rate"] > 0
    assert m["topic.orders.record-retry-rate"] > 0 and m["topic.orders.record-error-rate"] == 0
    assert m["topic.orders.compression-rate"] == 1.0 and m["batch-split-total"] == 0


class _Observed(DeliveryLatency):
    """The histogram, keeping what each batch recorded."""

    __slots__ = ("observed",)

    def __init__(self) -> None:
        super().__init__()
        self.observed: list[tuple[int, float, float]] = []

    def record_batches(self, rows: Sequence[float] | bytes, unfolded_sum: float, unfolded_max: float) -> tuple[int, float, float]:
        it = iter(array("d", rows).tolist() if isinstance(rows, bytes) else rows)  # a fold's rows come packed
        self.observed += ((int(records), first, last) for records, first, last in zip(it, it, it))
        return super().record_batches(rows, unfolded_sum, unfolded_max)


async def test_delivery_latency_of_acknowledged_records(mock_cluster: MockCluster) -> None:
    started = time.monotonic()
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST) as producer:
        await producer.send_and_wait(TOPIC, value=b"before", partition=0)
        assert producer.metrics()["delivery-latency-avg"] > 0  # always recorded
        histogram = producer._engine.metrics.delivery_latency = _Observed()  # observes what each batch adds
        observed = histogram.observed
        mock_cluster.push_request_errors(PRODUCE, NOT_LEADER_OR_FOLLOWER)  # one batch is retried: still counted once
        for _ in range(3):
            futures = [await producer.send(TOPIC, value=b"v%d" % i, partition=i % 3) for i in range(50)]
            await asyncio.gather(*futures)
        await producer.send_and_wait("other", value=b"x")
        m = producer.metrics()
        wall_ms = (time.monotonic() - started) * 1000
    assert m["record-send-total"] - 1 == 151 == histogram.count == sum(n for n, _, _ in observed)
    assert len(observed) < 151  # per batch, not per record
    assert all(0 <= last <= first < wall_ms and first > 0 for _, first, last in observed), observed
    assert histogram.cumulative()[-1] == (math.inf, 151)
    assert 0 < histogram.sum_ms <= 151 * max(first for _, first, _ in observed)
    assert 0 < m["delivery-latency-avg"] <= m["delivery-latency-max"] < wall_ms
    assert m["delivery-latency-max"] == max(first for _, first, _ in observed)


async def test_metrics_of_records_expired_past_delivery_timeout(mock_cluster: MockCluster) -> None:
    started = time.monotonic()
    for p in range(6):
        mock_cluster.set_partition_leader(TOPIC, p, 1 + p % 3)  # p0 on broker 1
    config = {**FAST, "delivery_timeout_ms": 1000, "request_timeout_ms": 500, "linger_ms": 0}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        await (await producer.send(TOPIC, value=b"before", partition=0))
        mock_cluster.broker_down(1)
        lost = [await producer.send(TOPIC, value=b"lost-%d" % i, partition=0) for i in range(10)]
        kept = [await producer.send(TOPIC, value=b"kept-%d" % i, partition=1) for i in range(5)]
        await asyncio.gather(*kept)
        results = await asyncio.gather(*lost, return_exceptions=True)
        assert all(isinstance(r, KafkaTimeoutError) for r in results), results
        m = producer.metrics()
        wall_ms = (time.monotonic() - started) * 1000
    assert m["record-error-total"] == 10 == m["records_failed"]
    assert m["topic.orders.record-error-total"] == 10 and m["record-error-rate"] > 0
    assert m["record-send-total"] == 6 == m["records_sent"]
    assert m["buffer-available-bytes"] == m["buffer-total-bytes"]
    assert m["record-queue-time-max"] <= wall_ms


async def test_metrics_count_waits_for_buffer_memory(mock_cluster: MockCluster) -> None:
    config = {**FAST, "buffer_memory": 64 * 1024, "batch_size": 16 * 1024, "linger_ms": 50}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        futures = [await producer.send(TOPIC, value=b"x" * 4000, partition=i % 6) for i in range(200)]
        await asyncio.gather(*futures)
        m = producer.metrics()
    assert m["bufferpool-wait-time-total"] > 0  # ns
    assert 0 < m["bufferpool-wait-ratio"]
    assert m["waiting-threads"] == 0 and m["buffer-available-bytes"] == m["buffer-total-bytes"]
    assert m["record-send-total"] == 200


async def test_window_settings_are_honoured(mock_cluster: MockCluster) -> None:
    config = {**FAST, "metrics_sample_window_ms": 100, "metrics_num_samples": 2}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        await producer.send_and_wait(TOPIC, value=b"v", partition=0)
        assert producer.metrics()["request-latency-max"] > 0
        await asyncio.sleep(0.25)  # past 2 windows of 100 ms: the samples are obsolete
        m = producer.metrics()
    assert math.isnan(m["request-latency-max"]) and m["record-send-rate"] == 0.0
    assert m["record-send-total"] == 1  # totals are cumulative
