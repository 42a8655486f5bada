"""The few OpenTelemetry (OTLP) metric messages KIP-714 pushes, encoded as protobuf by hand.

KIP-714 carries the client's metrics as an OTLP ``MetricsData``
(``opentelemetry/proto/metrics/v1/metrics.proto``). A producer needs only numbers: a
cumulative count becomes a monotonic ``Sum``, everything else a ``Gauge``, each with one
``NumberDataPoint`` per tag set. Hand-written so that the package needs no generated code
and no ``opentelemetry-proto`` dependency; pure: values in, bytes out (and back, for tests
and the broker-side reader).

Field numbers (metrics.proto, common.proto, resource.proto):

* MetricsData: resource_metrics = 1
* ResourceMetrics: resource = 1, scope_metrics = 2
* Resource: attributes = 1; KeyValue: key = 1, value = 2; AnyValue: string_value = 1, int_value = 3
* ScopeMetrics: scope = 1, metrics = 2; InstrumentationScope: name = 1, version = 2
* Metric: name = 1, description = 2, unit = 3, gauge = 5, sum = 7
* Gauge: data_points = 1; Sum: data_points = 1, aggregation_temporality = 2, is_monotonic = 3
* NumberDataPoint: start_time_unix_nano = 2 (fixed64), time_unix_nano = 3 (fixed64),
  as_double = 4 (double), as_int = 6 (sfixed64), attributes = 7
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "AGGREGATION_TEMPORALITY_CUMULATIVE",
    "AGGREGATION_TEMPORALITY_DELTA",
    "DataPoint",
    "Metric",
    "decode_metrics_data",
    "encode_metrics_data",
]

AGGREGATION_TEMPORALITY_DELTA: Final = 1
AGGREGATION_TEMPORALITY_CUMULATIVE: Final = 2

_VARINT: Final = 0
_I64: Final = 1
_LEN: Final = 2
_DOUBLE: Final = struct.Struct("<d")
_FIXED64: Final = struct.Struct("<Q")
_SFIXED64: Final = struct.Struct("<q")


@dataclass(frozen=True)
class DataPoint:
    """One value of a metric at ``time_unix_nano``, for one set of attributes (a topic, a node)."""

    value: int | float
    time_unix_nano: int
    start_time_unix_nano: int = 0
    attributes: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Metric:
    """A metric by its KIP-714 name; ``monotonic`` makes it a ``Sum`` (a running count), else a ``Gauge``."""

    name: str
    points: Sequence[DataPoint]
    monotonic: bool = False
    temporality: int = AGGREGATION_TEMPORALITY_CUMULATIVE
    description: str = ""
    unit: str = ""


# ----------------------------------------------------------------- encoding


def _varint(out: bytearray, value: int) -> None:
    if value < 0:
        value += 1 << 64  # int64 negatives: ten bytes, two's complement
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _key(out: bytearray, number: int, wire: int) -> None:
    _varint(out, (number << 3) | wire)


def _bytes_field(out: bytearray, number: int, payload: bytes | bytearray) -> None:
    _key(out, number, _LEN)
    _varint(out, len(payload))
    out += payload


def _string_field(out: bytearray, number: int, text: str) -> None:
    if text:  # proto3: an empty string is the default, not written
        _bytes_field(out, number, text.encode())


def _key_value(key: str, value: str | int) -> bytearray:
    any_value = bytearray()
    if isinstance(value, int):
        _key(any_value, 3, _VARINT)
        _varint(any_value, value)
    else:
        _bytes_field(any_value, 1, value.encode())
    out = bytearray()
    _string_field(out, 1, key)
    _bytes_field(out, 2, any_value)
    return out


def _data_point(point: DataPoint) -> bytearray:
    out = bytearray()
    if point.start_time_unix_nano:
        _key(out, 2, _I64)
        out += _FIXED64.pack(point.start_time_unix_nano)
    _key(out, 3, _I64)
    out += _FIXED64.pack(point.time_unix_nano)
    if isinstance(point.value, int) and not isinstance(point.value, bool):
        _key(out, 6, _I64)
        out += _SFIXED64.pack(point.value)
    else:
        _key(out, 4, _I64)
        out += _DOUBLE.pack(float(point.value))
    for key in sorted(point.attributes):
        _bytes_field(out, 7, _key_value(key, point.attributes[key]))
    return out


def _metric(metric: Metric) -> bytearray:
    points = bytearray()
    for point in metric.points:
        _bytes_field(points, 1, _data_point(point))
    out = bytearray()
    _string_field(out, 1, metric.name)
    _string_field(out, 2, metric.description)
    _string_field(out, 3, metric.unit)
    if metric.monotonic:
        _key(points, 2, _VARINT)
        _varint(points, metric.temporality)
        _key(points, 3, _VARINT)
        _varint(points, 1)
        _bytes_field(out, 7, points)
    else:
        _bytes_field(out, 5, points)
    return out


def encode_metrics_data(
    metrics: Sequence[Metric],
    *,
    resource: Mapping[str, str | int] | None = None,
    scope_name: str = "",
    scope_version: str = "",
) -> bytes:
    """One ``MetricsData`` holding one ``ResourceMetrics`` with one ``ScopeMetrics`` of ``metrics``."""
    resource_bytes = bytearray()
    for key in sorted(resource or {}):
        _bytes_field(resource_bytes, 1, _key_value(key, (resource or {})[key]))
    scope = bytearray()
    _string_field(scope, 1, scope_name)
    _string_field(scope, 2, scope_version)
    scope_metrics = bytearray()
    _bytes_field(scope_metrics, 1, scope)
    for metric in metrics:
        _bytes_field(scope_metrics, 2, _metric(metric))
    resource_metrics = bytearray()
    _bytes_field(resource_metrics, 1, resource_bytes)
    _bytes_field(resource_metrics, 2, scope_metrics)
    out = bytearray()
    _bytes_field(out, 1, resource_metrics)
    return bytes(out)


# ----------------------------------------------------------------- decoding


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """The (number, wire type, value) of each field of one message: LEN values as bytes, I64 as 8 raw bytes."""
    out: list[tuple[int, int, Any]] = []
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            if pos >= len(data):
                raise ValueError("OTLP: truncated varint")
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result

    while pos < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        value: Any
        if wire == _VARINT:
            value = varint()
        elif wire == _I64:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == _LEN:
            size = varint()
            value, pos = data[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise ValueError(f"OTLP: wire type {wire} not expected")
        if pos > len(data):
            raise ValueError("OTLP: truncated field")
        out.append((number, wire, value))
    return out


def _decode_key_value(data: bytes) -> tuple[str, str | int]:
    key, value = "", ""
    for number, _wire, raw in _fields(data):
        if number == 1:
            key = raw.decode()
        elif number == 2:
            for inner, _w, val in _fields(raw):
                value = val.decode() if inner == 1 else (val - (1 << 64) if val >= 1 << 63 else val)
    return key, value


def _decode_point(data: bytes) -> DataPoint:
    value: int | float = 0
    time = start = 0
    attributes: dict[str, str] = {}
    for number, _wire, raw in _fields(data):
        if number == 2:
            start = _FIXED64.unpack(raw)[0]
        elif number == 3:
            time = _FIXED64.unpack(raw)[0]
        elif number == 4:
            value = _DOUBLE.unpack(raw)[0]
        elif number == 6:
            value = _SFIXED64.unpack(raw)[0]
        elif number == 7:
            key, val = _decode_key_value(raw)
            attributes[key] = str(val)
    return DataPoint(value, time, start, attributes)


def _decode_metric(data: bytes) -> Metric:
    name = description = unit = ""
    points: list[DataPoint] = []
    monotonic = False
    temporality = AGGREGATION_TEMPORALITY_CUMULATIVE
    for number, _wire, raw in _fields(data):
        if number == 1:
            name = raw.decode()
        elif number == 2:
            description = raw.decode()
        elif number == 3:
            unit = raw.decode()
        elif number in (5, 7):
            for inner, _w, val in _fields(raw):
                if inner == 1:
                    points.append(_decode_point(val))
                elif inner == 2:
                    temporality = val
                elif inner == 3:
                    monotonic = bool(val)
    return Metric(name, points, monotonic, temporality, description, unit)


def decode_metrics_data(data: bytes) -> tuple[dict[str, str | int], list[Metric]]:
    """The resource attributes and the metrics of a ``MetricsData`` (the subset :func:`encode_metrics_data` writes)."""
    resource: dict[str, str | int] = {}
    metrics: list[Metric] = []
    for number, _wire, resource_metrics in _fields(bytes(data)):
        if number != 1:
            continue
        for inner, _w, raw in _fields(resource_metrics):
            if inner == 1:
                for attr_number, _aw, attr in _fields(raw):
                    if attr_number == 1:
                        key, value = _decode_key_value(attr)
                        resource[key] = value
            elif inner == 2:
                metrics.extend(_decode_metric(m) for n, _mw, m in _fields(raw) if n == 2)
    return resource, metrics
