"""``producer.metrics()`` against a real Kafka broker: known traffic, retries the broker causes, expiry, a quota.

On the session's one-node cluster (``kafka_cluster``), each test with topics of its own:

* acknowledged records counted exactly, per producer and per topic;
* the broker paused (SIGSTOP): requests time out and are retried until ``delivery.timeout.ms``;
  with one record per batch, ``record-retry-total`` equals the retries the sender logged and
  ``record-error-total`` the records that expired;
* a ``producer_byte_rate`` quota for the producer's ``client.id``: the broker throttles, the
  throttle times show, and the producer writes nothing to the broker while it is throttled (KIP-219).

The mock cluster cannot throttle (librdkafka's mock has no such call and answers every
Produce with ``throttle_time_ms`` 0), which is why the quota is tested here.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import time
import uuid
from typing import Any

import pytest

from aioproducer import KafkaTimeoutError, Producer
from aioproducer.network.client import KafkaClient
from aioproducer.network.connection import BrokerConnection
from aioproducer.testing import KafkaCluster
from conftest import REAL_BROKER_TIMEOUTS, new_topic

pytestmark = pytest.mark.integration

#: bytes/s. The broker measures a new client's rate over at least 10 s (its default 11 samples of 1 s):
#: it throttles once ~200 KB went through, for (bytes past that) / QUOTA s, so rounds of 10 KB keep it short.
QUOTA = 20_000


def _idle_sane(m: dict[str, Any], wall_ms: float) -> None:
    """What every producer's metrics say once its records are all answered."""
    assert m["buffer-available-bytes"] == m["buffer-total-bytes"] > 0
    assert m["requests-in-flight"] == 0 and m["waiting-threads"] == 0
    assert 0 <= m["metadata-age"] < wall_ms / 1000
    assert m["connection-count"] == 1  # one node, one connection (Java's count: open connections now)


async def test_sends_retries_and_expiry_are_counted_as_the_broker_answered(
    kafka_cluster: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """300 records acknowledged; then the broker paused (SIGSTOP) until 3 records expire; then 3 more acknowledged.

    While paused, each Produce request times out after ``request.timeout.ms`` (1 s) and its batch
    is retried (retriable) until ``delivery.timeout.ms`` (1.5 s) expires it. One record per batch:
    ``record-retry-total`` must equal the retries the sender logged, ``record-error-total`` the
    3 records expired. (``min.insync.replicas`` above the replication factor would have made the
    broker answer NOT_ENOUGH_REPLICAS, but Kafka 4 caps it at the replication factor: on one
    broker such records are acknowledged.)
    """
    caplog.set_level(logging.DEBUG, "aioproducer.sender")
    good, paused = new_topic(kafka_cluster, 3), new_topic(kafka_cluster, 3)
    config: dict[str, Any] = {
        "client_id": "metrics-known-traffic", "request_timeout_ms": 1000, "delivery_timeout_ms": 1500,
        "retry_backoff_ms": 50, "retry_backoff_max_ms": 100, "linger_ms": 0,
    }
    started = time.monotonic()
    async with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers, **config) as producer:
        acked = [await producer.send(good, value=b"v%d" % i, key=b"k%d" % i) for i in range(300)]
        acked += [await producer.send(paused, value=b"before", partition=p) for p in range(3)]
        assert len(await asyncio.gather(*acked)) == 303
        kafka_cluster.pause_broker(1)
        try:
            doomed = [await producer.send(paused, value=b"expires", partition=p) for p in range(3)]
            outcomes = await asyncio.gather(*doomed, return_exceptions=True)
        finally:
            kafka_cluster.resume_broker(1)
        assert all(isinstance(o, KafkaTimeoutError) for o in outcomes), outcomes
        after = [await producer.send(paused, value=b"after", partition=p) for p in range(3)]
        await asyncio.gather(*after)
        m = producer.metrics()
        wall_ms = (time.monotonic() - started) * 1000
    assert m["record-send-total"] == 306 == m["records_sent"]
    assert m[f"topic.{good}.record-send-total"] == 300 and m[f"topic.{paused}.record-send-total"] == 6
    assert m["record-error-total"] == 3 == m[f"topic.{paused}.record-error-total"] == m["records_failed"]
    assert m["record-error-rate"] > 0 and m["record-send-rate"] > 0
    # The retries, as the sender logged them: one line per batch retried, one record per batch on this topic.
    retried = [r for r in caplog.records if re.search(rf"\] retrying {paused}-\d \(attempt \d+\) after ", r.getMessage())]
    assert len(retried) >= 3  # each expiring batch timed out at least once before its delivery timeout
    assert m[f"topic.{paused}.record-retry-total"] == len(retried)
    assert m["record-retry-total"] >= len(retried) and m["record-retry-rate"] > 0
    assert m[f"topic.{good}.byte-total"] > 300 * 2
    for name in ("request-latency-avg", "request-latency-max", "record-queue-time-avg", "record-queue-time-max"):
        assert 0 < m[name] < wall_ms, (name, m[name])
    assert m["request-latency-avg"] <= m["request-latency-max"]
    assert m["record-queue-time-avg"] <= m["record-queue-time-max"]
    assert m["produce-throttle-time-max"] == 0  # no quota for this client id
    _idle_sane(m, wall_ms)


async def test_a_client_quota_throttles_and_the_producer_holds_back_for_the_throttle_time(
    kafka_cluster: KafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``produce-throttle-time-avg/max`` > 0 past a ``producer_byte_rate`` quota; nothing is written while throttled.

    Java's ``NetworkClient`` mutes a node for the ``throttle_time_ms`` of its answer (KIP-219);
    so does ``KafkaClient.throttle``. Recorded here on the client's own clock: each throttle
    as it is reported, each Produce request as it is written.
    """
    client_id = f"throttled-{uuid.uuid4().hex[:8]}"
    topic = new_topic(kafka_cluster, 1)
    await asyncio.to_thread(kafka_cluster.set_client_quota, client_id, producer_byte_rate=QUOTA)
    throttles: list[tuple[int, float, float]] = []
    writes: list[tuple[int, float]] = []
    real_throttle, real_try_send_produce = KafkaClient.throttle, BrokerConnection.try_send_produce

    def throttle(self: KafkaClient, node_id: int, throttle_time_ms: float) -> None:
        throttles.append((node_id, self._clock(), throttle_time_ms))
        real_throttle(self, node_id, throttle_time_ms)

    def try_send_produce(self: BrokerConnection, *args: Any) -> bool:
        now = time.monotonic() * 1000.0  # KafkaClient's default clock
        written = real_try_send_produce(self, *args)
        if written:  # the sender's one way to write a Produce request now (else through a task)
            writes.append((self.node_id, now))
        return written

    monkeypatch.setattr(KafkaClient, "throttle", throttle)
    monkeypatch.setattr(BrokerConnection, "try_send_produce", try_send_produce)
    started = time.monotonic()
    async with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers, client_id=client_id, linger_ms=5, **REAL_BROKER_TIMEOUTS) as producer:
        sent = 0
        while not producer.metrics()["produce-throttle-time-max"] > 0:  # NaN before the first answer
            assert sent * 2000 < 2 * 10 * QUOTA, "not throttled after twice the bytes the quota allows in 10 s"
            await asyncio.gather(*[await producer.send(topic, value=b"x" * 2000) for _ in range(5)])
            sent += 5
        # One more round: the producer may write it only once the throttle is over.
        await asyncio.gather(*[await producer.send(topic, value=b"y" * 2000) for _ in range(5)])
        m = producer.metrics()
        wall_ms = (time.monotonic() - started) * 1000
    # Not below the wall time: a throttle is the broker's verdict on what comes next, and the last answer may carry one.
    assert 0 < m["produce-throttle-time-avg"] <= m["produce-throttle-time-max"]
    assert m["record-send-total"] == sent + 5
    throttled = [(node, at, ms) for node, at, ms in throttles if ms > 0]
    assert throttled, "the broker's throttle never reached the client"
    early = [(node, at, ms, t) for node, at, ms in throttled for n, t in writes if n == node and at < t < at + ms]
    assert early == [], "Produce written to a throttled broker"
    assert any(t >= at + ms for node, at, ms in throttled for n, t in writes if n == node), "nothing written after a throttle"
    _idle_sane(m, wall_ms)
    assert not math.isnan(m["request-latency-max"])


def test_set_client_quota_names_the_bad_argument(kafka_cluster: KafkaCluster) -> None:
    with pytest.raises(ValueError, match="client_id"):
        kafka_cluster.set_client_quota("", producer_byte_rate=1)
    for bad in (0, -5, True, 1.5):
        with pytest.raises(ValueError, match="producer_byte_rate"):
            kafka_cluster.set_client_quota("c", producer_byte_rate=bad)  # type: ignore[arg-type]
