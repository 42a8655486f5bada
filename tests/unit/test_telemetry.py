"""Client telemetry (KIP-714), pure: the OTLP encoding, the two requests' frames, the subscription/push cycle.

The OTLP bytes are checked two ways: a small MetricsData written out byte by byte from
metrics.proto's field numbers, and a larger one against the ``protobuf`` runtime parsing
them with descriptors built here from the same .proto facts (an independent decoder). The
state machine runs on a fake clock: no sleeping, every time passed in.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import math
import uuid
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from aioproducer import Producer
from aioproducer.config import ProducerConfig
from aioproducer.testing import FakeProducer
from aioproducer.errors import (
    AuthenticationError,
    ConfigError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from aioproducer.internals.telemetry import (
    DEFAULT_PUSH_INTERVAL_MS,
    ClientTelemetry,
    TelemetrySender,
    TelemetryState,
    kip714_metrics,
)
from aioproducer.protocol import compression, messages
from aioproducer.protocol.otlp import (
    AGGREGATION_TEMPORALITY_CUMULATIVE,
    AGGREGATION_TEMPORALITY_DELTA,
    DataPoint,
    Metric,
    decode_metrics_data,
    encode_metrics_data,
)

INSTANCE = uuid.UUID("0123456789abcdef0123456789abcdef")
LOG = logging.getLogger("test.telemetry")
P = "org.apache.kafka.producer."

# ------------------------------------------------------------------------ OTLP


def test_otlp_golden_bytes_of_one_sum_point() -> None:
    data = encode_metrics_data(
        [Metric("a", [DataPoint(5, time_unix_nano=2, start_time_unix_nano=1)], monotonic=True,
                temporality=AGGREGATION_TEMPORALITY_DELTA)],
        resource={"k": "v"},
    )
    point = "11" + "0100000000000000" + "19" + "0200000000000000" + "31" + "0500000000000000"  # 2, 3, 6
    sum_ = "0a1b" + point + "1001" + "1801"  # data_points, temporality DELTA, is_monotonic
    metric = "0a0161" + "3a21" + sum_  # name "a", sum = 7
    scope_metrics = "0a00" + "1226" + metric  # an empty scope, metrics = 2
    resource = "0a08" + "0a016b" + "1203" + "0a0176"  # attributes: key "k", AnyValue string "v"
    resource_metrics = "0a0a" + resource + "122a" + scope_metrics
    assert data.hex() == "0a38" + resource_metrics


def test_otlp_golden_bytes_of_a_gauge_with_an_attribute() -> None:
    data = encode_metrics_data([Metric("g", [DataPoint(1.5, 7, attributes={"topic": "t"})])])
    point = "19" + "0700000000000000" + "21" + "000000000000f83f" + "3a0c" + "0a05746f706963" + "12030a0174"
    gauge = "0a20" + point
    metric = "0a0167" + "2a22" + gauge  # name "g", gauge = 5
    assert data.hex() == "0a2f" + "0a00" + "122b" + "0a00" + "1227" + metric


def _otlp_classes() -> dict[str, Any]:
    """MetricsData and friends for the protobuf runtime, from metrics.proto/common.proto's field numbers."""
    f = descriptor_pb2.FileDescriptorProto(name="otlp_test.proto", package="t", syntax="proto3")
    T = descriptor_pb2.FieldDescriptorProto

    def msg(name: str, *fields: tuple[str, int, int, str | None, bool]) -> None:
        m = f.message_type.add(name=name)
        for fname, number, ftype, tname, repeated in fields:
            fd = m.field.add(name=fname, number=number, type=ftype,
                             label=T.LABEL_REPEATED if repeated else T.LABEL_OPTIONAL)
            if tname:
                fd.type_name = ".t." + tname

    msg("AnyValue", ("string_value", 1, T.TYPE_STRING, None, False), ("int_value", 3, T.TYPE_INT64, None, False))
    msg("KeyValue", ("key", 1, T.TYPE_STRING, None, False), ("value", 2, T.TYPE_MESSAGE, "AnyValue", False))
    msg("Resource", ("attributes", 1, T.TYPE_MESSAGE, "KeyValue", True))
    msg("Scope", ("name", 1, T.TYPE_STRING, None, False), ("version", 2, T.TYPE_STRING, None, False))
    msg("Point", ("start_time_unix_nano", 2, T.TYPE_FIXED64, None, False),
        ("time_unix_nano", 3, T.TYPE_FIXED64, None, False), ("as_double", 4, T.TYPE_DOUBLE, None, False),
        ("as_int", 6, T.TYPE_SFIXED64, None, False), ("attributes", 7, T.TYPE_MESSAGE, "KeyValue", True))
    msg("Gauge", ("data_points", 1, T.TYPE_MESSAGE, "Point", True))
    msg("Sum", ("data_points", 1, T.TYPE_MESSAGE, "Point", True),
        ("aggregation_temporality", 2, T.TYPE_INT32, None, False), ("is_monotonic", 3, T.TYPE_BOOL, None, False))
    msg("Metric", ("name", 1, T.TYPE_STRING, None, False), ("description", 2, T.TYPE_STRING, None, False),
        ("unit", 3, T.TYPE_STRING, None, False), ("gauge", 5, T.TYPE_MESSAGE, "Gauge", False),
        ("sum", 7, T.TYPE_MESSAGE, "Sum", False))
    msg("ScopeMetrics", ("scope", 1, T.TYPE_MESSAGE, "Scope", False), ("metrics", 2, T.TYPE_MESSAGE, "Metric", True))
    msg("ResourceMetrics", ("resource", 1, T.TYPE_MESSAGE, "Resource", False),
        ("scope_metrics", 2, T.TYPE_MESSAGE, "ScopeMetrics", True))
    msg("MetricsData", ("resource_metrics", 1, T.TYPE_MESSAGE, "ResourceMetrics", True))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName("t." + name))
            for name in ("MetricsData",)}


def test_otlp_bytes_parse_with_the_protobuf_runtime() -> None:
    metrics = [
        Metric(P + "record.send.total", [DataPoint(25, 200, 100)], monotonic=True),
        Metric(P + "topic.record.send.total", [DataPoint(20, 200, 100, {"topic": "a"}),
                                               DataPoint(5, 200, 100, {"topic": "b"})], monotonic=True),
        Metric(P + "request.latency.avg", [DataPoint(3.25, 200)], description="d", unit="ms"),
        Metric("negative", [DataPoint(-7, 200)]),
    ]
    data = encode_metrics_data(metrics, resource={"client_id": "c", "n": -1}, scope_name="s", scope_version="1")
    parsed = _otlp_classes()["MetricsData"].FromString(data)
    (rm,) = parsed.resource_metrics
    assert {(a.key, a.value.string_value or a.value.int_value) for a in rm.resource.attributes} == {
        ("client_id", "c"), ("n", -1)}
    (sm,) = rm.scope_metrics
    assert (sm.scope.name, sm.scope.version) == ("s", "1")
    names = [m.name for m in sm.metrics]
    assert names == [m.name for m in metrics]
    total = sm.metrics[0]
    assert total.HasField("sum") and total.sum.is_monotonic
    assert total.sum.aggregation_temporality == AGGREGATION_TEMPORALITY_CUMULATIVE
    assert (total.sum.data_points[0].as_int, total.sum.data_points[0].start_time_unix_nano) == (25, 100)
    topics = {(p.attributes[0].value.string_value, p.as_int) for p in sm.metrics[1].sum.data_points}
    assert topics == {("a", 20), ("b", 5)}
    latency = sm.metrics[2]
    assert latency.HasField("gauge") and latency.gauge.data_points[0].as_double == 3.25
    assert (latency.description, latency.unit) == ("d", "ms")
    assert sm.metrics[3].gauge.data_points[0].as_int == -7
    assert parsed.SerializeToString() == data  # the runtime writes the same bytes back
    resource, decoded = decode_metrics_data(data)
    assert resource == {"client_id": "c", "n": -1}
    assert decoded == metrics


def test_otlp_decoder_refuses_truncated_input() -> None:
    data = encode_metrics_data([Metric("a", [DataPoint(1, 1)])])
    with pytest.raises(ValueError, match="truncated"):
        decode_metrics_data(data[:-3])


# ----------------------------------------------------------------- KIP-714 names


def test_kip714_names_attributes_kinds_and_prefix_filter() -> None:
    snapshot = {
        "record-send-total": 10, "request-latency-avg": 2.5, "metadata-age": math.inf,
        "record-queue-time-avg": math.nan, "topic.my.topic.record-send-total": 7,
        "node-1.request-latency-max": 4.0, "buffer-total-bytes": 100,
    }
    everything = {m.name: m for m in kip714_metrics(snapshot, ("",), 50, 10)}
    assert set(everything) == {
        P + "record.send.total", P + "request.latency.avg", P + "topic.record.send.total",
        P + "node.request.latency.max", P + "buffer.total.bytes",
    }  # no point for a value that is not finite
    assert everything[P + "record.send.total"].monotonic
    assert everything[P + "record.send.total"].points == [DataPoint(10, 50, 10)]
    assert not everything[P + "request.latency.avg"].monotonic
    assert everything[P + "request.latency.avg"].points == [DataPoint(2.5, 50, 0)]
    assert everything[P + "topic.record.send.total"].points[0].attributes == {"topic": "my.topic"}
    assert everything[P + "node.request.latency.max"].points[0].attributes == {"node_id": "1"}
    some = [m.name for m in kip714_metrics(snapshot, (P + "record.", P + "node."), 50, 10)]
    assert some == [P + "node.request.latency.max", P + "record.send.total"]
    assert kip714_metrics(snapshot, (), 50, 10) == []


def test_kip714_delta_temporality_pushes_the_change_since_the_last_push() -> None:
    last: dict[Any, Any] = {}
    first = kip714_metrics({"record-send-total": 10, "request-rate": 1.0}, ("",), 50, 10, last)
    second = kip714_metrics({"record-send-total": 25, "request-rate": 2.0}, ("",), 90, 50, last)
    by_name = {m.name: m for m in second}
    assert {m.name: m.points[0].value for m in first} == {P + "record.send.total": 10, P + "request.rate": 1.0}
    assert by_name[P + "record.send.total"].points[0].value == 15
    assert by_name[P + "record.send.total"].temporality == AGGREGATION_TEMPORALITY_DELTA
    assert by_name[P + "request.rate"].points[0].value == 2.0  # a gauge is never a delta


# ------------------------------------------------------------------- the frames


def test_get_telemetry_subscriptions_request_golden() -> None:
    frame = messages.encode_request(messages.GET_TELEMETRY_SUBSCRIPTIONS, 0, 7, "c",
                                    {"client_instance_id": INSTANCE})
    # size, api key 71, v0, correlation 7, client id "c" (int16 length), header tags; uuid, body tags
    assert frame.hex() == "0000001d" + "0047" + "0000" + "00000007" + "000163" + "00" + INSTANCE.hex + "00"


def test_push_telemetry_request_golden() -> None:
    body = {"client_instance_id": INSTANCE, "subscription_id": 5, "terminating": True,
            "compression_type": compression.GZIP, "metrics": b"\x01\x02"}
    frame = messages.encode_request(messages.PUSH_TELEMETRY, 0, 1, None, body)
    expected = ("0048" + "0000" + "00000001" + "ffff" + "00"
                + INSTANCE.hex + "00000005" + "01" + "01" + "03" + "0102" + "00")  # compact bytes: length + 1
    assert frame.hex() == "%08x" % (len(expected) // 2) + expected
    header, decoded = messages.decode_request(frame[4:])
    assert header.api_key == messages.PUSH_TELEMETRY and decoded == body


def test_get_telemetry_subscriptions_response_decodes() -> None:
    body = {"throttle_time_ms": 0, "error_code": 0, "client_instance_id": INSTANCE, "subscription_id": 9,
            "accepted_compression_types": [3, 1], "push_interval_ms": 1000, "telemetry_max_bytes": 4096,
            "delta_temporality": True, "requested_metrics": [P]}
    wire = ("00000002" + "00" + "00000000" + "0000" + INSTANCE.hex + "00000009" + "03" + "0301" + "000003e8"
            + "00001000" + "01" + "02" + "%02x" % (len(P) + 1) + P.encode().hex() + "00")
    frame = bytes.fromhex(wire)
    assert messages.encode_response(messages.GET_TELEMETRY_SUBSCRIPTIONS, 0, 2, body)[4:] == frame
    assert messages.decode_response(messages.GET_TELEMETRY_SUBSCRIPTIONS, 0, frame) == (2, body)
    push = bytes.fromhex("00000003" + "00" + "000000c8" + "0075" + "00")
    assert messages.decode_response(messages.PUSH_TELEMETRY, 0, push) == (
        3, {"throttle_time_ms": 200, "error_code": 117})


# ------------------------------------------------------------ the state machine


class Snapshot:
    """The producer's Java metrics, changed by the test between pushes."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {"record-send-total": 0, "request-latency-max": 1.0}

    def __call__(self) -> dict[str, Any]:
        return dict(self.values)


def machine(jitter: float = 0.5) -> tuple[ClientTelemetry, Snapshot]:
    snapshot = Snapshot()
    wall = iter(range(1_000, 10**9, 1_000))
    telemetry = ClientTelemetry(snapshot, resource={"client_id": "c"}, log=LOG, now=0.0,
                                jitter=lambda: jitter, wall_ns=lambda: next(wall))
    return telemetry, snapshot


def subscription(**overrides: Any) -> dict[str, Any]:
    body = {"throttle_time_ms": 0, "error_code": 0, "client_instance_id": INSTANCE, "subscription_id": 9,
            "accepted_compression_types": [], "push_interval_ms": 1000, "telemetry_max_bytes": 1 << 20,
            "delta_temporality": False, "requested_metrics": [P]}
    body.update(overrides)
    return body


def subscribed(now: float = 0.0, **overrides: Any) -> tuple[ClientTelemetry, Snapshot]:
    telemetry, snapshot = machine()
    request = telemetry.next_request(now)
    assert request == (messages.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": uuid.UUID(int=0)})
    telemetry.on_subscriptions(subscription(**overrides), now)
    return telemetry, snapshot


def pushed_values(body: dict[str, Any]) -> dict[str, Any]:
    data = body["metrics"]
    if body["compression_type"] != compression.NONE:
        data = compression.decompress(body["compression_type"], data)
    return {m.name: m.points[0].value for m in decode_metrics_data(data)[1]}


def push_acknowledged(telemetry: ClientTelemetry, snapshot: Snapshot, send_total: int, now: float) -> dict[str, Any]:
    """The push made with ``record-send-total`` at ``send_total``, answered with no error; its body."""
    snapshot.values["record-send-total"] = send_total
    _, body = telemetry.next_request(now) or (0, {})
    telemetry.on_push({"throttle_time_ms": 0, "error_code": 0}, now)
    return body


def test_asks_at_once_then_pushes_after_the_jittered_then_the_full_interval() -> None:
    telemetry, snapshot = machine(jitter=0.25)  # first push at 0.75 × the interval
    assert telemetry.time_to_next_request(0) == 0
    assert telemetry.next_request(0) is not None
    assert telemetry.time_to_next_request(0) == math.inf  # the answer is awaited
    assert telemetry.next_request(0) is None
    telemetry.on_subscriptions(subscription(), 10)
    assert telemetry.client_instance_id == INSTANCE and telemetry.state is TelemetryState.PUSH_NEEDED
    assert telemetry.time_to_next_request(10) == 750
    assert telemetry.next_request(759) is None
    snapshot.values["record-send-total"] = 3
    api, body = telemetry.next_request(760) or (0, {})
    assert api == messages.PUSH_TELEMETRY
    assert body["client_instance_id"] == INSTANCE and body["subscription_id"] == 9
    assert body["terminating"] is False
    assert pushed_values(body)[P + "record.send.total"] == 3
    telemetry.on_push({"throttle_time_ms": 0, "error_code": 0}, 770)
    assert telemetry.time_to_next_request(770) == 1000  # the push interval, from the answer
    assert telemetry.next_request(1769) is None
    assert telemetry.next_request(1770) is not None


def test_the_second_ask_sends_the_instance_id_the_broker_gave() -> None:
    telemetry, _ = subscribed()
    telemetry.next_request(1000)
    telemetry.on_push({"throttle_time_ms": 0, "error_code": 117}, 1000)  # UNKNOWN_SUBSCRIPTION_ID
    assert telemetry.state is TelemetryState.SUBSCRIPTION_NEEDED
    assert telemetry.next_request(1000) == (messages.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": INSTANCE})


def test_each_value_comes_from_its_own_counter() -> None:
    telemetry, snapshot = subscribed(requested_metrics=[""])
    snapshot.values.update({"record-send-total": 11, "record-error-total": 2, "record-retry-total": 5,
                            "request-total": 4, "request-latency-max": 9.5})
    _, body = telemetry.next_request(1000) or (0, {})
    assert {k.removeprefix(P): v for k, v in pushed_values(body).items()} == {
        "record.send.total": 11, "record.error.total": 2, "record.retry.total": 5, "request.total": 4,
        "request.latency.max": 9.5,
    }


def test_an_empty_subscription_is_asked_again_after_the_interval_and_never_pushed() -> None:
    telemetry, _ = subscribed(requested_metrics=[], push_interval_ms=2000)
    assert telemetry.state.name == "SUBSCRIPTION_NEEDED"
    assert telemetry.time_to_next_request(0) == 2000
    assert (telemetry.next_request(2000) or (0,))[0] == messages.GET_TELEMETRY_SUBSCRIPTIONS
    assert telemetry.initiate_close() is False  # nothing subscribed: no terminating push
    assert telemetry.state is TelemetryState.TERMINATED


@pytest.mark.parametrize("code", [117, 76])  # UNKNOWN_SUBSCRIPTION_ID, UNSUPPORTED_COMPRESSION_TYPE
def test_errors_that_ask_for_the_subscription_again_at_once(code: int) -> None:
    telemetry, _ = subscribed()
    telemetry.next_request(1000)
    telemetry.on_push({"throttle_time_ms": 0, "error_code": code}, 1000)
    assert telemetry.state is TelemetryState.SUBSCRIPTION_NEEDED and telemetry.time_to_next_request(1000) == 0


@pytest.mark.parametrize("code", [118, 89])  # TELEMETRY_TOO_LARGE, THROTTLING_QUOTA_EXCEEDED
def test_errors_that_ask_for_the_subscription_again_after_the_interval(code: int) -> None:
    """Java 4.3's maybeFetchErrorIntervalMs: the push interval, then GetTelemetrySubscriptions (not a push)."""
    telemetry, _ = subscribed()
    telemetry.next_request(1000)
    telemetry.on_push({"throttle_time_ms": 0, "error_code": code}, 1000)
    assert telemetry.state is TelemetryState.SUBSCRIPTION_NEEDED and telemetry.time_to_next_request(1000) == 1000
    assert telemetry.next_request(1999) is None
    assert telemetry.next_request(2000) == (messages.GET_TELEMETRY_SUBSCRIPTIONS, {"client_instance_id": INSTANCE})


@pytest.mark.parametrize("code", [35, 42, 87, 7, 1])  # UNSUPPORTED_VERSION, INVALID_REQUEST, INVALID_RECORD; any other
def test_errors_that_end_telemetry(code: int) -> None:
    telemetry, _ = subscribed()
    telemetry.next_request(1000)
    telemetry.on_push({"throttle_time_ms": 0, "error_code": code}, 1000)
    assert telemetry.state is TelemetryState.TERMINATED
    assert telemetry.time_to_next_request(10**9) == math.inf and telemetry.next_request(10**9) is None


def test_a_broker_without_kip714_ends_it_another_failure_asks_again_later() -> None:
    telemetry, _ = machine()
    telemetry.next_request(0)
    telemetry.on_failure(UnsupportedVersionError("no GetTelemetrySubscriptions"), 0)
    assert telemetry.state is TelemetryState.TERMINATED
    telemetry, _ = machine()
    telemetry.next_request(0)
    telemetry.on_failure(KafkaConnectionError("gone"), 5)
    assert telemetry.state is TelemetryState.SUBSCRIPTION_NEEDED
    assert telemetry.time_to_next_request(5) == DEFAULT_PUSH_INTERVAL_MS


@pytest.mark.parametrize("error", [KafkaConnectionError("reset"), KafkaTimeoutError("late"), OSError("unreachable")])
def test_a_push_without_an_answer_asks_again_after_javas_default_interval(error: Exception) -> None:
    """Java's handleFailedRequest: a retriable failure waits 5 minutes, not the subscription's interval."""
    telemetry, _ = subscribed()
    telemetry.next_request(1000)
    telemetry.on_failure(error, 1000)
    assert telemetry.state is TelemetryState.SUBSCRIPTION_NEEDED
    assert telemetry.time_to_next_request(1000) == DEFAULT_PUSH_INTERVAL_MS != telemetry.push_interval_ms


def test_a_failure_that_is_not_retriable_ends_telemetry_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    telemetry, _ = subscribed()
    telemetry.next_request(1000)
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        telemetry.on_failure(AuthenticationError("bad password"), 1000)
    assert telemetry.state is TelemetryState.TERMINATED
    assert "client telemetry stopped" in caplog.text


def test_a_subscription_error_java_does_not_map_ends_telemetry(caplog: pytest.LogCaptureFixture) -> None:
    """Java 4.3: an error code telemetry does not expect disables it ("Unmapped error for telemetry")."""
    telemetry, _ = machine()
    telemetry.next_request(0)
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        telemetry.on_subscriptions(subscription(error_code=7), 0)  # REQUEST_TIMED_OUT
    assert telemetry.state is TelemetryState.TERMINATED and telemetry.next_request(10**9) is None
    assert "RequestTimedOutError" in caplog.text


def test_a_throttled_answer_delays_the_next_request() -> None:
    telemetry, _ = subscribed()
    telemetry.next_request(1000)
    telemetry.on_push({"throttle_time_ms": 5000, "error_code": 0}, 1000)
    assert telemetry.time_to_next_request(1000) == 5000


def test_close_sends_one_terminating_push_without_waiting_for_the_interval() -> None:
    telemetry, snapshot = subscribed()
    snapshot.values["record-send-total"] = 8
    assert telemetry.initiate_close() is True
    assert telemetry.time_to_next_request(1) == 0
    _, body = telemetry.next_request(1) or (0, {})
    assert body["terminating"] is True and pushed_values(body)[P + "record.send.total"] == 8
    telemetry.on_push({"throttle_time_ms": 0, "error_code": 0}, 2)
    assert telemetry.state is TelemetryState.TERMINATED and telemetry.next_request(10**9) is None


def test_close_during_a_push_sends_the_terminating_one_after_it() -> None:
    telemetry, _ = subscribed()
    telemetry.next_request(1000)
    assert telemetry.initiate_close() is True
    telemetry.on_push({"throttle_time_ms": 0, "error_code": 0}, 1001)
    _, body = telemetry.next_request(1001) or (0, {})
    assert body["terminating"] is True


def test_pushes_compressed_with_the_first_accepted_type() -> None:
    telemetry, _ = subscribed(accepted_compression_types=[compression.GZIP, compression.NONE])
    _, body = telemetry.next_request(1000) or (0, {})
    assert body["compression_type"] == compression.GZIP
    assert decode_metrics_data(gzip.decompress(body["metrics"]))[1]


def test_delta_temporality_subscription_pushes_deltas() -> None:
    telemetry, snapshot = subscribed(delta_temporality=True)
    first = push_acknowledged(telemetry, snapshot, 10, 1000)
    snapshot.values["record-send-total"] = 14
    _, second = telemetry.next_request(2000) or (0, {})
    assert pushed_values(first)[P + "record.send.total"] == 10
    assert pushed_values(second)[P + "record.send.total"] == 4


def test_delta_of_each_topic_from_its_own_last_value() -> None:
    last: dict[Any, Any] = {}
    kip714_metrics({"topic.a.record-send-total": 10, "topic.b.record-send-total": 5}, ("",), 50, 10, last)
    (metric,) = kip714_metrics({"topic.a.record-send-total": 12, "topic.b.record-send-total": 9}, ("",), 90, 50, last)
    assert {p.attributes["topic"]: p.value for p in metric.points} == {"a": 2, "b": 4}


@pytest.mark.parametrize("bad", ["yes", 1, "0", None, [True]])
def test_enable_metrics_push_bad_values_name_the_key(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"enable\.metrics\.push must be a boolean"):
        ProducerConfig(enable_metrics_push=bad)  # type: ignore[arg-type]  # a bad value on purpose


def test_enable_metrics_push_defaults_to_true_as_java() -> None:
    assert ProducerConfig().enable_metrics_push is True
    assert ProducerConfig({"enable.metrics.push": "FALSE"}).enable_metrics_push is False


async def test_the_task_asks_pushes_on_close_and_ends() -> None:
    """TelemetrySender over a fake ``send_any``: the ask at once, the terminating push on close(), then the end."""
    sent: list[tuple[int, dict[str, Any]]] = []

    async def send_any(api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        sent.append((api_key, body))
        if api_key == messages.GET_TELEMETRY_SUBSCRIPTIONS:
            return subscription(push_interval_ms=3_600_000)
        return {"throttle_time_ms": 0, "error_code": 0}

    telemetry, _ = machine()
    task_owner = TelemetrySender(telemetry, send_any, lambda: 0.0, LOG)
    task = asyncio.get_running_loop().create_task(task_owner.run())
    deadline = asyncio.get_running_loop().time() + 5
    while telemetry.state is not TelemetryState.PUSH_NEEDED:
        assert asyncio.get_running_loop().time() < deadline, "no subscription"
        await asyncio.sleep(0)
    assert task_owner.close() is True
    await asyncio.wait_for(task, 5)
    assert [(api, body.get("terminating")) for api, body in sent] == [
        (messages.GET_TELEMETRY_SUBSCRIPTIONS, None), (messages.PUSH_TELEMETRY, True)]


async def test_the_task_ends_on_a_broker_without_kip714() -> None:
    async def send_any(api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        raise UnsupportedVersionError("API key 71 is not supported by the broker")

    telemetry, _ = machine()
    await asyncio.wait_for(TelemetrySender(telemetry, send_any, lambda: 0.0, LOG).run(), 5)
    assert telemetry.state is TelemetryState.TERMINATED


async def test_close_with_nothing_subscribed_says_so() -> None:
    """An empty subscription: close() reports no terminating push due (the engine then cancels the task)."""
    async def send_any(api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        return subscription(requested_metrics=[])

    telemetry, _ = machine()
    sender = TelemetrySender(telemetry, send_any, lambda: 0.0, LOG)
    task = asyncio.get_running_loop().create_task(sender.run())
    deadline = asyncio.get_running_loop().time() + 5
    while telemetry.subscription_id != 9:
        assert asyncio.get_running_loop().time() < deadline, "no subscription"
        await asyncio.sleep(0)
    assert sender.close() is False
    await asyncio.wait_for(task, 5)
    assert telemetry.state is TelemetryState.TERMINATED


# ------------------------------------------------------------ telemetry.max.bytes


def sizes(snapshot: Snapshot, codec: int, requested: list[str] | None = None) -> tuple[int, int]:
    """The uncompressed and ``codec``-compressed sizes of a push of ``snapshot`` (built by a twin machine)."""
    twin, values = subscribed(requested_metrics=requested or [P])
    values.values.update(snapshot.values)
    _, body = twin.next_request(10**6) or (0, {})
    plain = body["metrics"]
    return len(plain), len(compression.compress(codec, plain)) if codec != compression.NONE else len(plain)


def big_snapshot(snapshot: Snapshot, topics: int = 40) -> None:
    """Many alike points: OTLP that gzip shrinks to a fraction."""
    snapshot.values.update({f"topic.orders-{i}.record-send-total": i for i in range(topics)})


def test_a_push_over_the_limit_is_not_sent_warned_once_and_the_subscription_asked_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    telemetry, snapshot = subscribed()
    big_snapshot(snapshot)
    size, _ = sizes(snapshot, compression.NONE)
    telemetry.on_subscriptions(subscription(telemetry_max_bytes=size - 1), 0)  # the same subscription, 9
    with caplog.at_level(logging.INFO, logger=LOG.name):
        assert telemetry.next_request(1000) is None
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert f"a push of {size} bytes" in warning.getMessage() and f"({size - 1})" in warning.getMessage()
    assert "telemetry.max.bytes" in warning.getMessage()
    # As after the broker's TELEMETRY_TOO_LARGE: the subscription again, a push interval later.
    assert telemetry.state is TelemetryState.SUBSCRIPTION_NEEDED and telemetry.time_to_next_request(1000) == 1000
    assert (telemetry.next_request(2000) or (0,))[0] == messages.GET_TELEMETRY_SUBSCRIPTIONS
    caplog.clear()
    telemetry.on_subscriptions(subscription(telemetry_max_bytes=size - 1), 2000)  # still subscription 9
    with caplog.at_level(logging.INFO, logger=LOG.name):
        assert telemetry.next_request(4000) is None
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "once per subscription"
    telemetry.next_request(5000)
    telemetry.on_subscriptions(subscription(subscription_id=10, telemetry_max_bytes=size - 1), 5000)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        assert telemetry.next_request(7000) is None
    assert [r.levelno for r in caplog.records].count(logging.WARNING) == 1, "a new subscription is warned of"


def test_a_push_at_the_limit_goes_and_no_limit_before_a_subscription_says_one() -> None:
    telemetry, snapshot = subscribed()
    big_snapshot(snapshot)
    size, _ = sizes(snapshot, compression.NONE)
    telemetry.on_subscriptions(subscription(telemetry_max_bytes=size), 0)
    _, body = telemetry.next_request(1000) or (0, {})
    assert len(body["metrics"]) == size
    telemetry.on_push({"throttle_time_ms": 0, "error_code": 0}, 1000)
    telemetry.on_subscriptions(subscription(telemetry_max_bytes=0), 1000)
    assert telemetry.next_request(5000) is not None


def test_a_compressed_push_whose_metrics_are_over_the_limit_is_not_sent() -> None:
    """Kafka 4.3's broker decompresses with the limit too (its exporter then fails: INVALID_RECORD, telemetry over)."""
    telemetry, snapshot = subscribed(accepted_compression_types=[compression.GZIP])
    big_snapshot(snapshot)
    size, compressed = sizes(snapshot, compression.GZIP)
    assert compressed * 2 < size
    telemetry.on_subscriptions(subscription(accepted_compression_types=[compression.GZIP],
                                            telemetry_max_bytes=compressed + 10), 0)
    assert telemetry.next_request(1000) is None
    assert telemetry.state is TelemetryState.SUBSCRIPTION_NEEDED


def test_a_push_that_compression_makes_larger_than_the_limit_is_not_sent() -> None:
    """The broker's first check is the bytes on the wire (TELEMETRY_TOO_LARGE): gzip makes a tiny push larger."""
    telemetry, snapshot = subscribed(requested_metrics=[P + "record.send.total"],
                                     accepted_compression_types=[compression.GZIP])
    size, compressed = sizes(snapshot, compression.GZIP, [P + "record.send.total"])
    assert compressed > size
    telemetry.on_subscriptions(subscription(requested_metrics=[P + "record.send.total"], telemetry_max_bytes=size,
                                            accepted_compression_types=[compression.GZIP]), 0)
    assert telemetry.next_request(1000) is None
    telemetry.next_request(2000)
    telemetry.on_subscriptions(subscription(requested_metrics=[P + "record.send.total"],
                                            telemetry_max_bytes=compressed,
                                            accepted_compression_types=[compression.GZIP]), 2000)
    _, body = telemetry.next_request(4000) or (0, {})
    assert body["compression_type"] == compression.GZIP and len(body["metrics"]) == compressed


def test_a_delta_push_not_sent_leaves_its_counts_for_the_next() -> None:
    telemetry, snapshot = subscribed(delta_temporality=True)
    first = push_acknowledged(telemetry, snapshot, 10, 1000)
    snapshot.values["record-send-total"] = 30
    telemetry.on_subscriptions(subscription(delta_temporality=True, telemetry_max_bytes=10), 1000)
    assert telemetry.next_request(3000) is None
    telemetry.next_request(4000)
    telemetry.on_subscriptions(subscription(delta_temporality=True), 4000)
    snapshot.values["record-send-total"] = 35
    _, second = telemetry.next_request(6000) or (0, {})
    assert pushed_values(first)[P + "record.send.total"] == 10
    assert pushed_values(second)[P + "record.send.total"] == 25  # 30 - 10, not lost with the dropped push, + 5


def test_a_terminating_push_over_the_limit_ends_telemetry_unsent() -> None:
    telemetry, snapshot = subscribed(telemetry_max_bytes=10)
    assert telemetry.initiate_close() is True
    assert telemetry.next_request(1) is None
    assert telemetry.state is TelemetryState.TERMINATED


# -------------------------------------------------------------------- compression


def test_types_this_client_does_not_use_are_passed_over_in_the_brokers_order() -> None:
    accepted = [compression.ZSTD, compression.LZ4, compression.GZIP, compression.SNAPPY]  # Kafka 4.3's list
    for unsupported, expected in [
        ((), compression.ZSTD), ((compression.ZSTD,), compression.LZ4),
        ((compression.ZSTD, compression.LZ4), compression.GZIP),
        ((compression.ZSTD, compression.LZ4, compression.GZIP), compression.SNAPPY),
        (tuple(accepted), compression.NONE),
    ]:
        snapshot = Snapshot()
        telemetry = ClientTelemetry(snapshot, resource={}, log=LOG, now=0.0, jitter=lambda: 0.5,
                                    unsupported_compression_types=unsupported)
        telemetry.next_request(0)
        telemetry.on_subscriptions(subscription(accepted_compression_types=accepted), 0)
        _, body = telemetry.next_request(1000) or (0, {})
        assert body["compression_type"] == expected, unsupported
        assert pushed_values(body)[P + "record.send.total"] == 0


def test_unsupported_compression_type_drops_that_type_and_asks_again_at_once(caplog: pytest.LogCaptureFixture) -> None:
    accepted = [compression.ZSTD, compression.GZIP]
    telemetry, _ = subscribed(accepted_compression_types=accepted)
    pushes = []
    for now in (1000.0, 3000.0, 5000.0):
        _, body = telemetry.next_request(now) or (0, {})
        pushes.append(body["compression_type"])
        with caplog.at_level(logging.INFO, logger=LOG.name):
            telemetry.on_push({"throttle_time_ms": 0, "error_code": 76}, now)
        assert telemetry.state is TelemetryState.SUBSCRIPTION_NEEDED and telemetry.time_to_next_request(now) == 0
        telemetry.next_request(now)
        telemetry.on_subscriptions(subscription(accepted_compression_types=accepted), now)  # the same list again
    assert pushes == [compression.ZSTD, compression.GZIP, compression.NONE]
    assert telemetry.unsupported_compression_types == {compression.ZSTD, compression.GZIP}
    assert "the broker refused zstd" in caplog.text


def test_a_type_that_fails_to_compress_is_dropped_and_the_push_goes_uncompressed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Java's createPushRequest: the push goes as is, the type joins unsupportedCompressionTypes."""
    def broken(codec: int, data: bytes, level: int | None = None) -> bytes:
        raise RuntimeError("no zstd here")

    telemetry, _ = subscribed(accepted_compression_types=[compression.ZSTD, compression.GZIP])
    monkeypatch.setattr(compression, "compress", broken)
    _, body = telemetry.next_request(1000) or (0, {})
    assert body["compression_type"] == compression.NONE and decode_metrics_data(body["metrics"])[1]
    assert telemetry.unsupported_compression_types == {compression.ZSTD}
    monkeypatch.undo()
    telemetry.on_push({"throttle_time_ms": 0, "error_code": 0}, 1000)
    _, body = telemetry.next_request(2000) or (0, {})
    assert body["compression_type"] == compression.GZIP


# ------------------------------------------------------------------ subscriptions


def test_a_subscription_asked_again_keeps_the_delta_ledger() -> None:
    """Java resets its last values only when the temporality changes: a re-ask must not push the totals twice."""
    telemetry, snapshot = subscribed(delta_temporality=True)
    snapshot.values["record-send-total"] = 10
    telemetry.next_request(1000)
    telemetry.on_push({"throttle_time_ms": 0, "error_code": 117}, 1000)  # UNKNOWN_SUBSCRIPTION_ID
    telemetry.next_request(1000)
    telemetry.on_subscriptions(subscription(subscription_id=10, delta_temporality=True), 1000)
    snapshot.values["record-send-total"] = 14
    _, body = telemetry.next_request(2000) or (0, {})
    assert body["subscription_id"] == 10 and pushed_values(body)[P + "record.send.total"] == 4
    telemetry.on_push({"throttle_time_ms": 0, "error_code": 117}, 2000)
    telemetry.next_request(2000)
    telemetry.on_subscriptions(subscription(subscription_id=11, delta_temporality=False), 2000)
    _, body = telemetry.next_request(3000) or (0, {})
    assert pushed_values(body)[P + "record.send.total"] == 14  # cumulative now: the total
    telemetry.on_push({"throttle_time_ms": 0, "error_code": 117}, 3000)
    telemetry.next_request(3000)
    telemetry.on_subscriptions(subscription(subscription_id=12, delta_temporality=True), 3000)
    _, body = telemetry.next_request(4000) or (0, {})
    assert pushed_values(body)[P + "record.send.total"] == 14  # delta again: the ledger starts over


def test_each_new_subscription_jitters_its_first_push() -> None:
    """Java's updateSubscriptionResult staggers the first push of every subscription, not only the first one."""
    draws = iter([0.0, 0.9])
    telemetry = ClientTelemetry(Snapshot(), resource={}, log=LOG, now=0.0, jitter=lambda: next(draws))
    telemetry.next_request(0)
    telemetry.on_subscriptions(subscription(), 0)
    assert telemetry.time_to_next_request(0) == 500
    telemetry.next_request(500)
    telemetry.on_push({"throttle_time_ms": 0, "error_code": 117}, 500)
    telemetry.next_request(500)
    telemetry.on_subscriptions(subscription(subscription_id=10), 500)
    assert telemetry.time_to_next_request(500) == pytest.approx(1400)


# ----------------------------------------------------------------- client_instance_id


async def test_client_instance_id_waits_for_the_subscription_and_then_keeps_the_brokers_id() -> None:
    answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def send_any(api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        if api_key == messages.GET_TELEMETRY_SUBSCRIPTIONS:
            return await answer
        return {"throttle_time_ms": 0, "error_code": 0}

    telemetry, _ = machine()
    sender = TelemetrySender(telemetry, send_any, lambda: 0.0, LOG)
    task = asyncio.get_running_loop().create_task(sender.run())
    try:
        assert await sender.client_instance_id(0) is None  # no answer yet, no wait
        waiting = asyncio.get_running_loop().create_task(sender.client_instance_id(30))
        await asyncio.sleep(0)
        assert not waiting.done()
        answer.set_result(subscription(push_interval_ms=3_600_000))
        assert await asyncio.wait_for(waiting, 5) == INSTANCE
        assert await sender.client_instance_id(0) == INSTANCE
    finally:
        task.cancel()


async def test_client_instance_id_is_none_at_once_when_telemetry_ends_without_one() -> None:
    async def send_any(api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        raise UnsupportedVersionError("API key 71 is not supported by the broker")

    telemetry, _ = machine()
    sender = TelemetrySender(telemetry, send_any, lambda: 0.0, LOG)
    task = asyncio.get_running_loop().create_task(sender.run())
    assert await asyncio.wait_for(sender.client_instance_id(3600), 5) is None
    await asyncio.wait_for(task, 5)


@pytest.mark.parametrize("bad", [-1, -0.5, math.nan, True, "1", None])
async def test_client_instance_id_refuses_a_bad_timeout_naming_it(bad: Any) -> None:
    producer = Producer(bootstrap_servers="localhost:1")
    with pytest.raises(ValueError, match="timeout must be a number of seconds >= 0"):
        await producer.client_instance_id(bad)


async def test_client_instance_id_without_telemetry_or_before_start_is_an_illegal_state() -> None:
    with pytest.raises(IllegalStateError, match=r"set enable\.metrics\.push to true"):
        await Producer(bootstrap_servers="localhost:1", enable_metrics_push=False).client_instance_id(1)
    with pytest.raises(IllegalStateError, match=r"no telemetry runs: the producer is not started"):
        await Producer(bootstrap_servers="localhost:1").client_instance_id(1)
    async with FakeProducer() as fake:  # the engine runs its telemetry; the fake's broker has no KIP-714
        assert await fake.client_instance_id(0) is None
