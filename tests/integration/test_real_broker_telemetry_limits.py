"""Client telemetry (KIP-714) on real Kafka: the broker's ``telemetry.max.bytes`` and each compression type.

One broker of its own, with the ``TelemetryRecorder`` of ``tests/java`` as its client-metrics
reporter, a FaultProxy in front, and ``telemetry.max.bytes`` lowered to :data:`MAX_BYTES`:
a producer's whole metric set is over it uncompressed and under it compressed, a single metric
is far under it. Two client-metrics subscriptions: ``codec-*`` clients push one metric,
``big-*`` clients every producer metric, both every 200 ms.

Kafka 4.3 accepts the four types in a fixed order (zstd, lz4, gzip, snappy; no broker or
subscription setting changes it), so the push in each type is picked with
``ClientTelemetry``'s ``unsupported_compression_types`` (Java's field of that name), given to
its constructor, and the cycle runs on a :class:`KafkaClient` of its own.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.config import ProducerConfig
from aioproducer.internals.telemetry import ClientTelemetry, TelemetrySender, TelemetryState
from aioproducer.network.client import KafkaClient
from aioproducer.protocol import compression, messages
from aioproducer.protocol.otlp import DataPoint, Metric, decode_metrics_data, encode_metrics_data
from aioproducer.protocol.primitives import ZERO_UUID
from aioproducer.testing import KafkaCluster
from conftest import REAL_BROKER_TIMEOUTS, new_topic
from helpers import eventually
from test_real_broker_telemetry import PREFIX, recording_cluster
from test_real_broker_telemetry import pushes as pushes_of

pytestmark = pytest.mark.integration

#: Under a producer's metrics zstd-compressed (about 1 KB after a few sends), under what it pushes
#: uncompressed even just started (about 2 KB, 4 KB after a few sends): every push of a ``big-*`` producer is over.
MAX_BYTES = 1500
#: Kafka 4.3's ClientMetricsManager.SUPPORTED_COMPRESSION_TYPES, its answer's AcceptedCompressionTypes.
KAFKA_ORDER = [compression.ZSTD, compression.LZ4, compression.GZIP, compression.SNAPPY]
LOG = logging.getLogger("test.telemetry.limits")


@pytest.fixture(scope="module")
def recorder_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("telemetry-limits") / "pushes.jsonl"


@pytest.fixture(scope="module")
def limited_cluster(recorder_file: Path) -> Iterator[KafkaCluster]:
    cluster = recording_cluster(recorder_file, **{"telemetry.max.bytes": str(MAX_BYTES)})
    with cluster:
        cluster.set_client_metrics("codecs", metrics=[PREFIX + "record.send.total"], interval_ms=200,
                                   match={"client_id": "codec-.*"})
        cluster.set_client_metrics("everything", metrics=[PREFIX], interval_ms=200, match={"client_id": "big-.*"})
        yield cluster


async def _client(cluster: KafkaCluster, client_id: str) -> AsyncIterator[KafkaClient]:
    client = KafkaClient(ProducerConfig(bootstrap_servers=cluster.bootstrap_servers, client_id=client_id))
    await client.bootstrap()
    try:
        yield client
    finally:
        await client.close()


def kafka_uuid(value: uuid.UUID) -> str:
    """Java's ``Uuid.toString()``: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def monotonic_ms() -> float:
    return time.monotonic() * 1000


@pytest.mark.parametrize("codec", [compression.ZSTD, compression.LZ4, compression.GZIP, compression.SNAPPY],
                         ids=["zstd", "lz4", "gzip", "snappy"])
async def test_a_push_in_each_compression_type_is_decoded_by_the_broker(
    limited_cluster: KafkaCluster, recorder_file: Path, codec: int,
) -> None:
    client_id = f"codec-{compression.CODEC_NAMES[codec]}-{uuid.uuid4().hex[:8]}"
    pushes: list[tuple[int, bool, int]] = []
    async for client in _client(limited_cluster, client_id):
        async def send_any(api_key: int, body: dict[str, Any]) -> dict[str, Any]:
            response = await client.send_any(api_key, body)
            if api_key == messages.PUSH_TELEMETRY:
                pushes.append((body["compression_type"], body["terminating"], response["error_code"]))
            return response

        telemetry = ClientTelemetry(
            lambda: {"record-send-total": 7}, resource={"client_id": client_id}, log=LOG, now=monotonic_ms(),
            jitter=lambda: 0.5, unsupported_compression_types=set(KAFKA_ORDER) - {codec},
        )
        sender = TelemetrySender(telemetry, send_any, monotonic_ms, LOG)
        task = asyncio.get_running_loop().create_task(sender.run())
        try:
            await eventually(lambda: any(not terminating for _, terminating, _ in pushes), timeout=20,
                             what="a push")
            assert telemetry.accepted_compression_types == tuple(KAFKA_ORDER)
            assert sender.close() is True
            await asyncio.wait_for(task, 10)
        finally:
            task.cancel()
    assert telemetry.state is TelemetryState.TERMINATED
    assert pushes and pushes[-1][1] is True
    assert {(c, error) for c, _, error in pushes} == {(codec, 0)}, "every push in the type, every one accepted"
    received = pushes_of(recorder_file, client_id)
    assert len(received) == len(pushes)
    assert {p["client_instance_id"] for p in received} == {kafka_uuid(telemetry.client_instance_id)}
    # Delta temporality (the broker's default): the first push counts the 7, the next ones nothing new.
    assert sum(p["metrics"][PREFIX + "record.send.total"].points[0].value for p in received) == 7


async def test_a_producer_whose_push_is_over_telemetry_max_bytes_sends_none_and_warns_once(
    limited_cluster: KafkaCluster, recorder_file: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    topic = new_topic(limited_cluster, 1)
    client_id = f"big-{uuid.uuid4().hex[:8]}"
    proxy = limited_cluster.proxy(1)
    before = dict(proxy.stats.requests_forwarded)

    def asked() -> int:
        return proxy.stats.requests_forwarded.get(messages.GET_TELEMETRY_SUBSCRIPTIONS, 0) - before.get(
            messages.GET_TELEMETRY_SUBSCRIPTIONS, 0)

    with caplog.at_level(logging.INFO, logger="aioproducer.telemetry"):
        async with Producer(bootstrap_servers=limited_cluster.bootstrap_servers, client_id=client_id,
                            **REAL_BROKER_TIMEOUTS) as producer:
            for i in range(10):
                await producer.send(topic, b"v%d" % i)
            # Each dropped push asks for the subscription again a push interval later: three asks, two drops at least.
            await eventually(lambda: asked() >= 3, timeout=30, what="the subscription asked again")
            sender = producer._engine.telemetry
            assert sender is not None and sender.telemetry.telemetry_max_bytes == MAX_BYTES
    after = proxy.stats.requests_forwarded
    assert after.get(messages.PUSH_TELEMETRY, 0) == before.get(messages.PUSH_TELEMETRY, 0), "no push sent"
    assert pushes_of(recorder_file, client_id) == []
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("aioproducer.telemetry")]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    found = re.search(r"a push of (\d+) bytes \((\d+) compressed with zstd\) is over the broker's "
                      r"telemetry\.max\.bytes \((\d+)\)", warnings[0].getMessage())
    assert found, warnings[0].getMessage()
    size, compressed, limit = map(int, found.groups())
    # The case that matters: the zstd bytes would pass the broker's first check, the metrics its second.
    assert compressed <= MAX_BYTES < size and limit == MAX_BYTES, (size, compressed)


def _otlp(points: int) -> bytes:
    """Metrics data of ``points`` alike points: 200 are 9 KB, 1 KB gzipped."""
    return encode_metrics_data([Metric(PREFIX + "topic.record.send.total",
                                       [DataPoint(i, 2, 1, {"topic": f"t{i}"}) for i in range(points)],
                                       monotonic=True)])


@pytest.mark.parametrize(("codec", "points", "error"), [
    (compression.NONE, 400, 118),  # the bytes on the wire are over: TELEMETRY_TOO_LARGE
    (compression.GZIP, 200, 87),  # the wire bytes are under, the metrics over: the export fails, INVALID_RECORD
    (compression.GZIP, 10, 0),  # both under: accepted
], ids=["plain-over", "gzip-under-metrics-over", "both-under"])
async def test_the_broker_refuses_a_push_over_its_limit_by_either_size(
    limited_cluster: KafkaCluster, codec: int, points: int, error: int,
) -> None:
    """The facts ClientTelemetry's check stands on (Kafka 4.3.1's ClientMetricsManager), asked raw."""
    data = _otlp(points)
    sent = compression.compress(codec, data) if codec != compression.NONE else data
    assert (len(sent) <= MAX_BYTES) == (error != 118) and (len(data) <= MAX_BYTES) == (error == 0)
    async for client in _client(limited_cluster, f"big-raw-{uuid.uuid4().hex[:8]}"):
        subscription = await client.send_any(messages.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": ZERO_UUID})
        assert subscription["error_code"] == 0 and subscription["telemetry_max_bytes"] == MAX_BYTES
        # A terminating push is not held to the push interval.
        answer = await client.send_any(messages.PUSH_TELEMETRY, {
            "client_instance_id": subscription["client_instance_id"],
            "subscription_id": subscription["subscription_id"], "terminating": True,
            "compression_type": codec, "metrics": sent,
        })
        assert answer["error_code"] == error


async def test_client_instance_id_is_the_id_every_push_went_under(
    limited_cluster: KafkaCluster, recorder_file: Path,
) -> None:
    """Java's clientInstanceId(): the id the broker gave, the one its reporter files each push under."""
    topic = new_topic(limited_cluster, 1)
    client_id = f"codec-producer-{uuid.uuid4().hex[:8]}"
    async with Producer(bootstrap_servers=limited_cluster.bootstrap_servers, client_id=client_id,
                        **REAL_BROKER_TIMEOUTS) as producer:
        instance = await producer.client_instance_id(10)
        assert instance is not None
        for i in range(3):
            await producer.send(topic, b"v%d" % i)

        def pushed_all() -> bool:
            counted = sum(p["metrics"][PREFIX + "record.send.total"].points[0].value
                          for p in pushes_of(recorder_file, client_id))
            return bool(counted == 3)

        await eventually(pushed_all, timeout=30, what="a push counting the 3 records")
    received = pushes_of(recorder_file, client_id)
    assert received[-1]["terminating"] is True
    assert {p["client_instance_id"] for p in received} == {kafka_uuid(instance)}
    assert await producer.client_instance_id(0) == instance  # still known after close(), as Java's


async def test_a_transactional_producers_pushes_carry_its_transactional_id(
    limited_cluster: KafkaCluster, recorder_file: Path,
) -> None:
    """Java's ClientTelemetryProvider puts ``transactional_id`` in a producer's OTLP resource; a plain one has none."""
    client_ids = {tid: f"codec-txn-{uuid.uuid4().hex[:8]}" for tid in (f"tx-{uuid.uuid4().hex[:8]}", None)}
    for transactional_id, client_id in client_ids.items():
        async with Producer(bootstrap_servers=limited_cluster.bootstrap_servers, client_id=client_id,
                            transactional_id=transactional_id, **REAL_BROKER_TIMEOUTS):
            await eventually(lambda: bool(pushes_of(recorder_file, client_id)), timeout=30, what="a push")
        resources = {json.dumps(decode_metrics_data(base64.b64decode(p["data"]))[0], sort_keys=True)
                     for p in pushes_of(recorder_file, client_id)}
        expected = {"client_id": client_id} | ({} if transactional_id is None else {"transactional_id": transactional_id})
        assert resources == {json.dumps(expected, sort_keys=True)}
