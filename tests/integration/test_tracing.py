"""OpenTelemetry (``Producer(tracing=True)`` / ``tracer_provider=``): a span per record that ends at its acknowledgement.

The SDK's in-memory span exporter (behind a ``SimpleSpanProcessor``, which exports at ``end()``)
and metric reader stand in for a collector. When the broker answered is observed from inside the
sender (``Sender._complete_answers``, the moment the Produce response is handled) and when the
record's future became done from a done-callback: the span must end between the two.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import propagate, trace
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from aioproducer import Producer
from aioproducer.errors import ConfigError, InvalidRecordError, ProducerClosedError
from aioproducer.internals.batch import ProducerBatch, RecordErrors
from aioproducer.internals.sender import Sender
from aioproducer.protocol import compression
from aioproducer.protocol.records import RecordBatchBuilder
from aioproducer.testing import FakeProducer, KafkaCluster, MockCluster

from conftest import new_topic
from readback import read_aiokafka

pytestmark = pytest.mark.integration

PRODUCE = 0
INVALID_RECORD = 87  # not retriable
MESSAGE_TOO_LARGE = 10
FAST: dict[str, Any] = {"linger_ms": 5, "request_timeout_ms": 2000, "delivery_timeout_ms": 5000}


class Otel:
    """A tracer provider exporting to memory as each span ends, and a meter provider read on demand."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    def spans(self, name: str = "send orders") -> list[ReadableSpan]:
        return [s for s in self.exporter.get_finished_spans() if s.name == name]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            point
            for rm in data.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == metric
            for point in m.data.data_points
        ]

    def producer(self, bootstrap: str, **config: Any) -> Producer:
        return Producer(
            bootstrap_servers=bootstrap, tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **config
        )


@pytest.fixture
def otel() -> Iterator[Otel]:
    made = Otel()
    yield made
    made.tracer_provider.shutdown()
    made.meter_provider.shutdown()


@pytest.fixture
def acks(monkeypatch: pytest.MonkeyPatch) -> dict[tuple[str, int], int]:
    """(topic, partition) -> when the first Produce response for it was handled (time.time_ns, the spans' clock)."""
    seen: dict[tuple[str, int], int] = {}
    original = Sender._complete_answers

    def spy(self: Sender, requests: list[list[ProducerBatch]], responses: list[Any], now: float) -> None:
        at = time.time_ns()
        for batches in requests:
            for batch in batches:
                seen.setdefault((batch.topic, batch.partition), at)
        original(self, requests, responses, now)

    monkeypatch.setattr(Sender, "_complete_answers", spy)
    return seen


def _traceparent(span: ReadableSpan) -> bytes:
    context = span.get_span_context()
    assert context is not None
    return b"00-%032x-%016x-%02x" % (context.trace_id, context.span_id, context.trace_flags)


def _offset(span: ReadableSpan) -> int:
    """The record's offset the span names (-1 if none)."""
    offset = (span.attributes or {}).get("messaging.kafka.offset", -1)
    assert isinstance(offset, int)
    return offset


def _by_offset(spans: list[ReadableSpan]) -> dict[tuple[str, int], ReadableSpan]:
    """(partition id, offset) -> span, for the spans of records acknowledged with an offset."""
    return {
        (str((s.attributes or {})["messaging.destination.partition.id"]), _offset(s)): s for s in spans if _offset(s) >= 0
    }


async def test_one_span_per_record_ending_at_its_acknowledgement(
    mock_cluster: MockCluster, otel: Otel, acks: dict[tuple[str, int], int]
) -> None:
    done_at: dict[int, int] = {}
    parent_tracer = otel.tracer_provider.get_tracer("test")
    async with otel.producer(mock_cluster.bootstrap_servers, client_id="svc", **FAST) as producer:
        with parent_tracer.start_as_current_span("handler") as parent:
            futures = [await producer.send("orders", b"v%d" % i, b"k%d" % i) for i in range(12)]
            futures += [await producer.send("orders", b"s", "text-key"), await producer.send("orders", None, partition=2)]
        for i, future in enumerate(futures):
            future.add_done_callback(lambda _f, i=i: done_at.setdefault(i, time.time_ns()))  # type: ignore[misc]
        results = [await f for f in futures]
        await asyncio.sleep(0)  # the done-callbacks run one loop turn after completion
    spans = otel.spans()
    assert len(spans) == len(futures) == len(done_at)
    by_offset = _by_offset(spans)
    assert len(by_offset) == len(futures)  # every span has its record's own offset
    leader_ports = {int(hp.rsplit(":", 1)[1]) for hp in mock_cluster.bootstrap_servers.split(",")}
    for i, metadata in enumerate(results):
        span = by_offset[(str(metadata.partition), metadata.offset)]
        assert span.kind is SpanKind.PRODUCER
        assert span.status.status_code is StatusCode.UNSET
        assert span.parent is not None and span.parent.span_id == parent.get_span_context().span_id
        assert span.context is not None
        assert span.context.trace_id == parent.get_span_context().trace_id
        attributes = dict(span.attributes or {})
        assert attributes.pop("server.port") in leader_ports
        assert attributes.pop("server.address") == "127.0.0.1"
        expected = {
            "messaging.system": "kafka",
            "messaging.operation.name": "send",
            "messaging.operation.type": "send",
            "messaging.destination.name": "orders",
            "messaging.destination.partition.id": str(metadata.partition),
            "messaging.kafka.offset": metadata.offset,
            "messaging.client.id": "svc",
        }
        if i == 12:
            expected["messaging.kafka.message.key"] = "text-key"  # a str key only; bytes keys are not recorded
        if i == 13:
            expected["messaging.kafka.message.tombstone"] = True
        assert attributes == expected
        assert span.start_time is not None and span.end_time is not None
        # Ended when the broker's answer was handled, before the future's callbacks saw it done.
        assert acks[("orders", metadata.partition)] <= span.end_time <= done_at[i]


async def test_traceparent_header_read_back_by_aiokafka_and_a_callers_own_kept(
    mock_cluster: MockCluster, otel: Otel
) -> None:
    mine = b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with otel.producer(mock_cluster.bootstrap_servers, **FAST) as producer:
        futures = [await producer.send("orders", b"a", partition=1, headers=[("app", b"x")]),
                   await producer.send("orders", b"b", partition=1),
                   await producer.send("orders", b"c", partition=1, headers={"traceparent": mine})]
        await asyncio.gather(*futures)
    spans = sorted(otel.spans(), key=_offset)
    records = await read_aiokafka(mock_cluster.bootstrap_servers, "orders", 1, count=3)
    assert records[0].headers == [("app", b"x"), ("traceparent", _traceparent(spans[0]))]
    assert records[1].headers == [("traceparent", _traceparent(spans[1]))]
    assert records[2].headers == [("traceparent", mine)]  # the caller's, not duplicated


async def test_a_failed_record_span_has_status_error_and_error_type_and_the_metrics_count_it(
    mock_cluster: MockCluster, otel: Otel
) -> None:
    async with otel.producer(mock_cluster.bootstrap_servers, **FAST) as producer:
        ok = [await producer.send("orders", b"ok", partition=0) for _ in range(3)]
        await asyncio.gather(*ok)
        mock_cluster.push_request_errors(PRODUCE, INVALID_RECORD)
        bad = [await producer.send("orders", b"bad", partition=0) for _ in range(2)]
        errors = await asyncio.gather(*bad, return_exceptions=True)
        with pytest.raises(InvalidRecordError):  # refused by send() itself: its span ends there
            await producer.send("orders", b"v", timestamp_ms=-1)
    refused = otel.spans()[-1]
    assert refused.status.status_code is StatusCode.ERROR and refused.attributes is not None
    assert refused.attributes["error.type"] == "aioproducer.errors.InvalidRecordError"
    assert all(isinstance(e, Exception) for e in errors), errors
    failed = [s for s in otel.spans() if s.status.status_code is StatusCode.ERROR and s is not refused]
    assert len(failed) == 2 and len(otel.spans()) == 6
    error_type = f"{type(errors[0]).__module__}.{type(errors[0]).__qualname__}"
    for span in failed:
        assert span.attributes is not None
        assert span.attributes["error.type"] == error_type
        assert "messaging.kafka.offset" not in span.attributes
    sent = {p.attributes.get("error.type"): p.value for p in otel.points("messaging.client.sent.messages")}
    assert sent == {None: 3, error_type: 2}  # not the record send() refused: it was never sent
    durations = {p.attributes.get("error.type"): p for p in otel.points("messaging.client.operation.duration")}
    assert durations[None].count == 3 and durations[error_type].count == 2
    assert durations["aioproducer.errors.InvalidRecordError"].count == 1
    spans_ok = [s for s in otel.spans() if s.status.status_code is StatusCode.UNSET]
    longest = max((s.end_time - s.start_time) / 1e9 for s in spans_ok)  # type: ignore[operator]
    assert 0 < durations[None].max <= longest + 1e-6 and durations[None].attributes["messaging.destination.name"] == "orders"


async def test_spans_end_once_for_cancelled_futures_callbacks_split_batches_and_close(
    mock_cluster: MockCluster, otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    """Every way a record ends: its future cancelled (still delivered), on_delivery (future dropped), split, close()."""
    reports: list[Any] = []
    config = {**FAST, "linger_ms": 60_000, "delivery_timeout_ms": 70_000}
    with caplog.at_level(logging.WARNING):
        async with otel.producer(mock_cluster.bootstrap_servers, **config) as producer:
            cancelled = await producer.send("orders", b"c", partition=0)
            assert cancelled.cancel()
            await producer.send("orders", b"cb", partition=0, on_delivery=lambda m, e: reports.append(m))
            big = [await producer.send("orders", b"r%03d" % i + b"." * 150, partition=2) for i in range(40)]
            mock_cluster.push_request_errors(PRODUCE, MESSAGE_TOO_LARGE)  # the 40 records' batch is split
            await producer.flush()
            pending = [await producer.send("orders", b"p", partition=3) for _ in range(2)]
            await producer.close(timeout=0)
    assert all(isinstance(f.exception(), ProducerClosedError) for f in pending)
    spans = otel.spans()
    assert len(spans) == 44 and not [r for r in caplog.records if "already ended" in r.getMessage() or "ended span" in r.getMessage()]
    by_offset = _by_offset(spans)
    assert ("0", 0) in by_offset and ("0", 1) in by_offset and reports[0].offset == 1
    assert [by_offset[("2", f.result().offset)].start_time for f in big] == sorted(
        by_offset[("2", o)].start_time for o in range(40)  # type: ignore[type-var]
    )
    closed = [s for s in spans if s.status.status_code is StatusCode.ERROR]
    assert len(closed) == 2
    assert all(s.attributes and s.attributes["error.type"] == "aioproducer.errors.ProducerClosedError" for s in closed)


async def test_records_of_an_aborted_transaction_end_their_spans_with_the_abort(mock_cluster: MockCluster, otel: Otel) -> None:
    async with otel.producer(mock_cluster.bootstrap_servers, transactional_id="tx-traced", linger_ms=60_000) as producer:
        producer.begin_transaction()
        futures = [await producer.send("orders", b"v", partition=p) for p in (0, 1)]
        await producer.abort_transaction()
        errors = [f.exception() for f in futures]
    spans = otel.spans()
    assert len(spans) == 2 and all(s.status.status_code is StatusCode.ERROR for s in spans)
    assert {(s.attributes or {})["error.type"] for s in spans} == {f"{type(e).__module__}.{type(e).__qualname__}" for e in errors}


async def test_kip_467_each_record_span_gets_its_own_error() -> None:
    """A batch the broker refused record by record: the bad record's span names its error, the others theirs."""
    from aioproducer.errors import InvalidRecordError as Bad
    from aioproducer.errors import KafkaError
    from aioproducer.tracing import Tracing

    otel = Otel()
    tracing = Tracing("c", otel.tracer_provider, otel.meter_provider, metadata=lambda: None)
    batch = ProducerBatch("orders", 4, RecordBatchBuilder(compression.NONE, 1 << 16), 0.0, 0, asyncio.get_running_loop())
    for _ in range(3):
        span, start = tracing.start("orders", None, b"v")
        future = batch.try_append(1, None, b"v", None, None)
        assert future is not None
        tracing.attach(span, start, future)
    batch.fail_per_record(RecordErrors({1: Bad("record 1 is bad")}, KafkaError("another record of the batch failed")))
    batch.complete(-1, -1, KafkaError("batch"))
    assert batch.complete(-1, -1, None) is False  # a late answer ends nothing twice
    types = [s.attributes["error.type"] for s in otel.spans()]  # type: ignore[index]
    assert types == ["aioproducer.errors.KafkaError", "aioproducer.errors.InvalidRecordError", "aioproducer.errors.KafkaError"]


async def test_send_many_traces_each_record(mock_cluster: MockCluster, otel: Otel) -> None:
    async with otel.producer(mock_cluster.bootstrap_servers, **FAST) as producer:
        futures = await producer.send_many("orders", [b"a", b"b", b"c"], keys=[b"1", None, b"3"])
        results = await asyncio.gather(*futures)
    by_offset = _by_offset(otel.spans())
    assert sorted(by_offset) == sorted((str(m.partition), m.offset) for m in results)


def test_bad_tracing_arguments_are_refused_naming_them() -> None:
    with pytest.raises(ConfigError, match="tracing must be True or False"):
        Producer(bootstrap_servers="localhost:9092", tracing="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="meter_provider"):
        Producer(bootstrap_servers="localhost:9092", meter_provider=MeterProvider())
    with pytest.raises(ConfigError, match="tracing=False with a tracer_provider"):
        Producer(bootstrap_servers="localhost:9092", tracing=False, tracer_provider=TracerProvider())


async def test_without_opentelemetry_the_producer_works_and_asking_for_tracing_says_what_is_missing(
    mock_cluster: MockCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "aioproducer.tracing", raising=False)
    with pytest.raises(ImportError, match=re.escape("tracing=True: OpenTelemetry tracing needs the opentelemetry-api")):
        Producer(bootstrap_servers=mock_cluster.bootstrap_servers, tracing=True)
    with pytest.raises(ImportError, match=re.escape("tracer_provider: ") + ".*" + re.escape("aioproducer[opentelemetry]")):
        Producer(bootstrap_servers=mock_cluster.bootstrap_servers, tracer_provider=object())
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST) as producer:
        metadata = await producer.send_and_wait("orders", b"v", headers=[("h", b"1")], partition=0)
    assert metadata.offset == 0
    assert "aioproducer.tracing" not in sys.modules


def test_a_producer_without_tracing_imports_no_opentelemetry() -> None:
    code = (
        "import sys\nfrom aioproducer import Producer\n"
        "Producer(bootstrap_servers='localhost:9092')\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'aioproducer.tracing'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


async def test_real_kafka_consumer_finds_the_span_in_the_traceparent_header(kafka_cluster: KafkaCluster) -> None:
    otel = Otel()
    topic = new_topic(kafka_cluster, partitions=1)
    async with otel.producer(kafka_cluster.bootstrap_servers, linger_ms=5) as producer:
        with trace.get_tracer("test", tracer_provider=otel.tracer_provider).start_as_current_span("job"):
            futures = [await producer.send(topic, b"v%d" % i, b"k") for i in range(3)]
        results = await asyncio.gather(*futures)
    spans = otel.spans(f"send {topic}")
    records = await read_aiokafka(kafka_cluster.bootstrap_servers, topic, 0, count=3)
    by_offset = {_offset(s): s for s in spans}
    assert sorted(by_offset) == [m.offset for m in results] == [r.offset for r in records] == [0, 1, 2]
    host, port = kafka_cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)
    for record in records:
        span = by_offset[record.offset]
        assert dict(record.headers)["traceparent"] == _traceparent(span)
        assert span.attributes is not None and span.attributes["server.port"] == int(port)
    otel.tracer_provider.shutdown()
    otel.meter_provider.shutdown()


async def test_a_fake_producer_traces_as_the_real_one(otel: Otel) -> None:
    """FakeProducer: a span per record, ended at its (in-memory) acknowledgement or failure; traceparent in history."""
    async with FakeProducer(
        topics={"orders": 2}, autocomplete=False, tracer_provider=otel.tracer_provider, meter_provider=otel.meter_provider
    ) as fake:
        ok = await fake.send("orders", b"ok", partition=1)
        bad = await fake.send("orders", b"bad", partition=0)
        assert otel.spans() == []  # held: not acknowledged yet
        fake.complete_next()
        fake.fail_next(InvalidRecordError("refused"))
        metadata = await ok
        with pytest.raises(InvalidRecordError):
            await bad
    by_value = {s.attributes.get("messaging.destination.partition.id") if s.attributes else None: s for s in otel.spans()}
    assert by_value["1"].status.status_code is StatusCode.UNSET and _offset(by_value["1"]) == metadata.offset == 0
    assert by_value["0"].status.status_code is StatusCode.ERROR
    [record] = fake.history()
    assert dict(record.headers)["traceparent"] == _traceparent(by_value["1"])


class _Failing(SpanProcessor):
    """A span processor whose ``on_start`` or ``on_end`` raises (an exporter gone wrong)."""

    def __init__(self, at: str) -> None:
        self.at = at

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.at == "start":
            raise RuntimeError("processor on_start failed")

    def on_end(self, span: ReadableSpan) -> None:
        if self.at == "end":
            raise RuntimeError("processor on_end failed")


class _FailingPropagator(TextMapPropagator):
    def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
        carrier["half-written"] = "x"  # what it wrote before raising must not reach the record
        raise RuntimeError("propagator inject failed")

    def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
        raise NotImplementedError

    @property
    def fields(self) -> set[str]:
        return {"half-written"}


def _tracing_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "aioproducer.tracing" and r.levelno == logging.WARNING]


async def test_a_raising_on_start_sends_every_record_untraced_and_logs_sparingly(
    mock_cluster: MockCluster, otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    otel.tracer_provider.add_span_processor(_Failing("start"))
    with caplog.at_level(logging.WARNING, logger="aioproducer.tracing"):
        async with otel.producer(mock_cluster.bootstrap_servers, **FAST) as producer:
            futures = [await producer.send("orders", b"v%d" % i, partition=0) for i in range(20)]
            results = await asyncio.gather(*futures)
            with pytest.raises(InvalidRecordError):  # a bad record still gets its own error, not the tracer's
                await producer.send("orders", b"v", timestamp_ms=-1)
    assert sorted(m.offset for m in results) == list(range(results[0].offset, results[0].offset + 20))
    records = await read_aiokafka(mock_cluster.bootstrap_servers, "orders", 0, count=20)
    assert [r.value for r in records] == [b"v%d" % i for i in range(20)]
    assert all(r.headers == [] for r in records)  # untraced: no traceparent of a span that never started
    warnings = _tracing_warnings(caplog)
    assert len(warnings) == 2  # the 1st and the 10th of 21 faults, not one line per record
    assert "span start (1 time(s) so far)" in warnings[0] and "span start (10 time(s) so far)" in warnings[1]


async def test_a_raising_propagator_sends_every_record_with_its_span_and_no_header(
    mock_cluster: MockCluster, otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    previous = propagate.get_global_textmap()
    propagate.set_global_textmap(_FailingPropagator())
    try:
        with caplog.at_level(logging.WARNING, logger="aioproducer.tracing"):
            async with otel.producer(mock_cluster.bootstrap_servers, **FAST) as producer:
                futures = [await producer.send("orders", b"v", partition=1, headers=[("app", b"x")]) for _ in range(5)]
                results = await asyncio.gather(*futures)
    finally:
        propagate.set_global_textmap(previous)
    records = await read_aiokafka(mock_cluster.bootstrap_servers, "orders", 1, count=5)
    assert [r.headers for r in records] == [[("app", b"x")]] * 5  # the caller's header only
    spans = otel.spans()
    assert sorted(_offset(s) for s in spans) == sorted(m.offset for m in results)  # every span ended at its ack
    assert len(_tracing_warnings(caplog)) == 1 and "span inject" in _tracing_warnings(caplog)[0]


async def test_a_raising_on_end_still_ends_every_other_span_of_the_batch(
    mock_cluster: MockCluster, otel: Otel, caplog: pytest.LogCaptureFixture
) -> None:
    otel.tracer_provider.add_span_processor(_Failing("end"))  # after the exporting processor: it saw each end
    with caplog.at_level(logging.WARNING, logger="aioproducer.tracing"):
        async with otel.producer(mock_cluster.bootstrap_servers, **{**FAST, "linger_ms": 60_000, "delivery_timeout_ms": 70_000}) as producer:
            futures = [await producer.send("orders", b"v", partition=2) for _ in range(20)]
            await producer.flush()  # one batch of 20 records
            results = await asyncio.gather(*futures)
    assert len({m.offset for m in results}) == 20
    spans = otel.spans()
    assert len(spans) == 20 and all(s.end_time is not None for s in spans)
    [duration] = otel.points("messaging.client.operation.duration")
    assert duration.count == 20
    assert [p.value for p in otel.points("messaging.client.sent.messages")] == [20]
    assert len(_tracing_warnings(caplog)) == 2  # the 1st and the 10th
