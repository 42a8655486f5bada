"""Client telemetry (KIP-714) on real Kafka: the broker's client-metrics reporter receives what the producer pushes.

One broker of its own (a reporter plugin on its classpath, a FaultProxy in front): the
``TelemetryRecorder`` of ``tests/java`` writes each push the broker accepts to a file as a JSON
line, decoded here with :func:`aioproducer.protocol.otlp.decode_metrics_data`. A client-metrics
subscription (``kafka-configs --entity-type client-metrics``) asks the producers whose
``client.id`` starts with ``telemetry-`` for the ``org.apache.kafka.producer.`` metrics every 500 ms.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.protocol import compression, messages
from aioproducer.internals.telemetry import TelemetryState
from aioproducer.protocol.otlp import AGGREGATION_TEMPORALITY_DELTA, Metric, decode_metrics_data
from aioproducer.testing import KafkaCluster
from aioproducer.testing.kafka import KafkaUnavailableError, compile_java, kafka_libs
from conftest import REAL_BROKER_TIMEOUTS, kafka_or_skip, new_topic
from helpers import eventually

pytestmark = pytest.mark.integration

RECORDER = Path(__file__).resolve().parents[1] / "java" / "TelemetryRecorder.java"
PREFIX = "org.apache.kafka.producer."


@pytest.fixture(scope="module")
def recorder_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("telemetry") / "pushes.jsonl"


def recording_cluster(recorder_file: Path, **broker_config: str) -> KafkaCluster:
    """One broker (behind a proxy) with the recorder as its metric reporter, writing each push to ``recorder_file``."""
    try:
        classes = compile_java(RECORDER, kafka_libs())
    except KafkaUnavailableError as exc:
        pytest.skip(f"the reporter plugin cannot be compiled here: {exc}")
    return kafka_or_skip(
        brokers=1, proxy=True, extra_classpath=[classes],
        broker_config={"metric.reporters": "TelemetryRecorder", "telemetry.recorder.file": str(recorder_file),
                       **broker_config},
    )


@pytest.fixture(scope="module")
def telemetry_cluster(recorder_file: Path) -> Iterator[KafkaCluster]:
    """One recording broker and a subscription for ``telemetry-*`` clients."""
    cluster = recording_cluster(recorder_file)
    with cluster:
        cluster.set_client_metrics(
            "aioproducer-tests", metrics=[PREFIX], interval_ms=500, match={"client_id": "telemetry-.*"},
        )
        yield cluster


def pushes(path: Path, client_id: str) -> list[dict[str, Any]]:
    """The recorder's lines for ``client_id``, each with its decoded metrics under ``"metrics"``."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text().split("\n")[:-1]:  # the last: empty, or a line the broker is writing
        push = json.loads(line)
        if push["client_id"] == client_id:
            push["metrics"] = {m.name: m for m in decode_metrics_data(base64.b64decode(push["data"]))[1]}
            out.append(push)
    return out


def sent_total(received: list[dict[str, Any]]) -> int | float:
    """``record-send-total`` over the pushes: their deltas add up to the count."""
    return sum(value(p["metrics"][PREFIX + "record.send.total"]) for p in received)


def value(metric: Metric, **attributes: str) -> int | float:
    """The one data point of ``metric`` with these attributes."""
    (point,) = [p for p in metric.points if dict(p.attributes) == attributes]
    return point.value


async def test_the_reporter_receives_the_subscribed_metrics_and_the_terminating_push(
    telemetry_cluster: KafkaCluster, recorder_file: Path,
) -> None:
    topic = new_topic(telemetry_cluster, 1)
    client_id = f"telemetry-{uuid.uuid4().hex[:8]}"
    started = time.monotonic()
    producer = Producer(bootstrap_servers=telemetry_cluster.bootstrap_servers, client_id=client_id,
                        **REAL_BROKER_TIMEOUTS)
    await producer.start()
    try:
        for i in range(25):
            await producer.send(topic, b"v%d" % i)

        def pushed_all() -> bool:
            return sent_total(pushes(recorder_file, client_id)) == 25

        await eventually(pushed_all, timeout=30, what="a push counting the 25 records")
        sender = producer._engine.telemetry
        assert sender is not None
        accepted = sender.telemetry.accepted_compression_types
        # The pushes went compressed with the broker's first choice (Kafka 4.3 accepts them all).
        assert accepted and accepted[0] != compression.NONE
        assert sender.telemetry.next_compression_type() == accepted[0]
    finally:
        await producer.close()
    elapsed_ms = (time.monotonic() - started) * 1000
    received = pushes(recorder_file, client_id)
    last = received[-1]
    assert last["terminating"] is True, "close() sends the terminating push"
    assert [p["terminating"] for p in received].count(True) == 1
    assert {p["client_instance_id"] for p in received} == {last["client_instance_id"]}
    assert all(name.startswith(PREFIX) for p in received for name in p["metrics"])
    # Kafka's brokers ask for delta temporality by default: each push counts what is new since the last.
    assert all(p["metrics"][PREFIX + "record.send.total"].temporality == AGGREGATION_TEMPORALITY_DELTA
               for p in received)
    assert sent_total(received) == 25
    assert sum(value(p["metrics"][PREFIX + "topic.record.send.total"], topic=topic)
               for p in received if PREFIX + "topic.record.send.total" in p["metrics"]) == 25
    assert sum(value(p["metrics"][PREFIX + "record.error.total"]) for p in received) == 0
    assert sum(value(p["metrics"][PREFIX + "request.total"]) for p in received) >= 1
    latency = max(value(p["metrics"][PREFIX + "request.latency.max"]) for p in received
                  if PREFIX + "request.latency.max" in p["metrics"])
    assert 0 < latency < elapsed_ms
    assert not any(p["metrics"][PREFIX + "request.latency.max"].monotonic
                   for p in received if PREFIX + "request.latency.max" in p["metrics"])
    forwarded = telemetry_cluster.proxy(1).stats.requests_forwarded
    assert forwarded.get(messages.GET_TELEMETRY_SUBSCRIPTIONS, 0) >= 1
    assert forwarded.get(messages.PUSH_TELEMETRY, 0) >= 2


async def test_enable_metrics_push_false_pushes_nothing(
    telemetry_cluster: KafkaCluster, recorder_file: Path,
) -> None:
    """Beside a producer that pushes (the control): by the time its terminating push arrived, the other sent none."""
    topic = new_topic(telemetry_cluster, 1)
    proxy = telemetry_cluster.proxy(1)
    before = dict(proxy.stats.requests_forwarded)
    quiet_id, control_id = f"telemetry-off-{uuid.uuid4().hex[:8]}", f"telemetry-on-{uuid.uuid4().hex[:8]}"
    quiet = Producer(bootstrap_servers=telemetry_cluster.bootstrap_servers, client_id=quiet_id,
                     enable_metrics_push=False, **REAL_BROKER_TIMEOUTS)
    control = Producer(bootstrap_servers=telemetry_cluster.bootstrap_servers, client_id=control_id,
                       **REAL_BROKER_TIMEOUTS)
    await quiet.start()
    await control.start()
    try:
        for i in range(5):
            await quiet.send(topic, b"q%d" % i)
            await control.send(topic, b"c%d" % i)
        await eventually(lambda: any(not p["terminating"] for p in pushes(recorder_file, control_id)),
                         timeout=30, what="the control producer's first push")
        await control.close()
        await quiet.send(topic, b"after")
    finally:
        await quiet.close()
        await control.close()
    assert any(p["terminating"] for p in pushes(recorder_file, control_id))
    assert pushes(recorder_file, quiet_id) == []
    after = proxy.stats.requests_forwarded
    # The control producer alone asked and pushed: one GetTelemetrySubscriptions per producer start.
    assert after.get(messages.GET_TELEMETRY_SUBSCRIPTIONS, 0) - before.get(messages.GET_TELEMETRY_SUBSCRIPTIONS, 0) == 1
    control_pushes = len(pushes(recorder_file, control_id))
    assert after.get(messages.PUSH_TELEMETRY, 0) - before.get(messages.PUSH_TELEMETRY, 0) == control_pushes


async def test_a_cluster_without_a_client_metrics_reporter_ends_telemetry_quietly(kafka_cluster: KafkaCluster) -> None:
    """The session's broker has no reporter, so it offers no GetTelemetrySubscriptions: telemetry ends, sends go on."""
    topic = new_topic(kafka_cluster, 1)
    async with Producer(bootstrap_servers=kafka_cluster.bootstrap_servers, client_id="telemetry-none",
                        **REAL_BROKER_TIMEOUTS) as producer:
        sender = producer._engine.telemetry
        assert sender is not None
        await eventually(lambda: sender.telemetry.state is TelemetryState.TERMINATED, timeout=15,
                         what="telemetry ended")
        await producer.send(topic, b"v")
    assert [r.value for r in await kafka_cluster.read(topic, count=1)] == [b"v"]
