"""Message codec: golden frames, header rules, round trips of every API version, hostile input.

Round trips use bodies drawn by hypothesis from each schema, so every field of
every supported version is exercised; the golden frames are written out byte by
byte from the Kafka protocol guide, independently of the schemas, so a layout
mistake made symmetrically in encoder and decoder still fails here.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aioproducer.errors import ProtocolError, UnsupportedVersionError
from aioproducer.protocol import messages as m
from aioproducer.protocol.schema import ArrayOf, Field, FieldType, MessageSchema, Output, Primitive, StructOf

ALL_VERSIONS = [(key, v) for key, (low, high) in sorted(m.SUPPORTED_VERSIONS.items()) for v in range(low, high + 1)]


def ids(params: list[tuple[int, int]]) -> list[str]:
    return [f"{m.API_NAMES[key]}-v{v}" for key, v in params]


# ------------------------------------------------- bodies drawn from schemas

_INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def _primitive(t: Primitive) -> st.SearchStrategy[Any]:
    if t.name in _INT_RANGES:
        bits = _INT_RANGES[t.name]
        return st.integers(-(2**bits), 2**bits - 1)
    if t.name == "uint16":
        return st.integers(0, 2**16 - 1)
    if t.name == "bool":
        return st.booleans()
    if t.name == "string":
        return st.text(max_size=12)
    if t.name in ("bytes", "records"):
        return st.binary(max_size=40)
    if t.name == "uuid":
        return st.uuids()
    raise AssertionError(t.name)


def _value(t: FieldType, version: int) -> st.SearchStrategy[Any]:
    if isinstance(t, Primitive):
        return _primitive(t)
    if isinstance(t, ArrayOf):
        return st.lists(_value(t.element, version), max_size=3)
    return _struct(t, version)


def _field(f: Field, version: int) -> st.SearchStrategy[Any]:
    value = _value(f.type, version)
    return st.none() | value if version in f.nullable else value


def _struct(s: StructOf, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({f.name: _field(f, version) for f in s.fields if version in f.versions})


def request_bodies(key: int, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return _struct(m.REQUEST_SCHEMAS[key].body, version)


def response_bodies(key: int, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return _struct(m.RESPONSE_SCHEMAS[key].body, version)


# ------------------------------------------------------------- round trips


@pytest.mark.parametrize(("key", "version"), ALL_VERSIONS, ids=ids(ALL_VERSIONS))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1), client_id=st.none() | st.text(max_size=8))
def test_request_round_trip(key: int, version: int, data: st.DataObject, correlation_id: int, client_id: str | None) -> None:
    body = data.draw(request_bodies(key, version))
    frame = m.encode_request(key, version, correlation_id, client_id, body)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    header, decoded = m.decode_request(frame[4:])
    assert header == m.RequestHeader(key, version, correlation_id, client_id)
    assert decoded == body


@pytest.mark.parametrize(("key", "version"), ALL_VERSIONS, ids=ids(ALL_VERSIONS))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_response_round_trip(key: int, version: int, data: st.DataObject, correlation_id: int) -> None:
    body = data.draw(response_bodies(key, version))
    if key == m.API_VERSIONS and body["error_code"] == m.UNSUPPORTED_VERSION_ERROR_CODE:
        body["error_code"] = 0  # 35 triggers the v0 fallback (a v0-shaped body may parse), tested below
    frame = m.encode_response(key, version, correlation_id, body)
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    assert m.peek_correlation_id(frame[4:]) == correlation_id
    assert m.decode_response(key, version, frame[4:]) == (correlation_id, body)


@pytest.mark.parametrize(("key", "version"), ALL_VERSIONS, ids=ids(ALL_VERSIONS))
def test_empty_body_encodes_schema_defaults(key: int, version: int) -> None:
    _, request = m.decode_request(m.encode_request(key, version, 1, None, {})[4:])
    assert set(request) == {f.name for f in m.REQUEST_SCHEMAS[key].fields if version in f.versions}
    _, response = m.decode_response(key, version, m.encode_response(key, version, 1, {})[4:])
    assert set(response) == {f.name for f in m.RESPONSE_SCHEMAS[key].fields if version in f.versions}


# ----------------------------------------------------------- golden frames


def test_api_versions_v0_request_golden() -> None:
    frame = m.encode_request(m.API_VERSIONS, 0, 1, "abc", {})
    assert frame == bytes.fromhex(
        "0000000d"  # size: 13
        "0012"  # api_key 18
        "0000"  # api_version 0
        "00000001"  # correlation_id
        "0003" + b"abc".hex()  # client_id, classic nullable string
    )


def test_api_versions_v3_request_golden_header_v2() -> None:
    frame = m.encode_request(
        m.API_VERSIONS, 3, 7, None, {"client_software_name": "ap", "client_software_version": "1"}
    )
    assert frame == bytes.fromhex(
        "00000011"  # size: 17
        "0012" "0003" "00000007"
        "ffff"  # null client_id stays int16-length even in header v2
        "00"  # header tagged fields
        "03" + b"ap".hex() +  # compact string
        "02" + b"1".hex() +
        "00"  # body tagged fields
    )


def test_api_versions_v3_response_uses_header_v0() -> None:
    payload = bytes.fromhex(
        "00000005"  # correlation_id, then NO header tagged-field byte
        "0000"  # error_code
        "02" "0000" "0000" "000b" "00"  # api_keys: [Produce 0..11], element tags
        "00000000"  # throttle_time_ms
        "00"  # tagged fields
    )
    correlation_id, body = m.decode_response(m.API_VERSIONS, 3, payload)
    assert correlation_id == 5
    assert body["api_keys"] == [{"api_key": 0, "min_version": 0, "max_version": 11}]
    assert body["finalized_features_epoch"] == -1
    assert m.encode_response(m.API_VERSIONS, 3, 5, body)[4:] == payload


def test_api_versions_unsupported_version_falls_back_to_v0_body() -> None:
    payload = bytes.fromhex(
        "00000009"
        "0023"  # UNSUPPORTED_VERSION
        "00000001" "0012" "0000" "0002"  # v0 classic array: ApiVersions 0..2
    )
    assert m.decode_response(m.API_VERSIONS, 3, payload) == (
        9,
        {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]},
    )


def test_api_versions_unsupported_version_in_requested_format_still_decodes() -> None:
    body = {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]}
    payload = m.encode_response(m.API_VERSIONS, 3, 4, body)[4:]
    correlation_id, decoded = m.decode_response(m.API_VERSIONS, 3, payload)
    assert correlation_id == 4
    assert decoded["error_code"] == 35 and decoded["api_keys"] == body["api_keys"]


def test_produce_v3_request_golden() -> None:
    body = {"acks": 1, "timeout_ms": 1000, "topic_data": [{"name": "t", "partition_data": [{"index": 2, "records": b"abc"}]}]}
    assert m.encode_request(m.PRODUCE, 3, 1, "c", body) == bytes.fromhex(
        "00000029"  # size: 41
        "0000" "0003" "00000001" "0001" "63"  # header v1
        "ffff"  # transactional_id: null
        "0001" "000003e8"  # acks, timeout_ms
        "00000001" "0001" "74"  # one topic "t"
        "00000001" "00000002"  # one partition, index 2
        "00000003" + b"abc".hex()  # records: nullable bytes
    )


def test_produce_v9_request_golden_flexible() -> None:
    body = {"transactional_id": "tx", "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"\x01\x02"}]}]}
    assert m.encode_request(m.PRODUCE, 9, 2, None, body) == bytes.fromhex(
        "00000022"  # size: 34
        "0000" "0009" "00000002" "ffff" "00"  # header v2
        "03" + b"tx".hex() +  # compact nullable string
        "ffff" "00007530"
        "02" "02" "74"  # compact array of 1, compact string "t"
        "02" "00000000"  # compact array of 1, index 0
        "03" "0102"  # compact nullable bytes
        "00" "00" "00"  # partition, topic, body tagged fields
    )


def test_produce_v10_response_tagged_fields_golden() -> None:
    payload = bytes.fromhex(
        "00000003" "00"  # header v1
        "02" "02" "74"  # responses: [t]
        "02" "00000000" "0006"  # partition 0, NOT_LEADER_OR_FOLLOWER
        "ffffffffffffffff" "ffffffffffffffff" "ffffffffffffffff"  # base, append time, log start
        "01" "00"  # record_errors: [], error_message: null
        "01" "00" "09" "00000002" "00000007" "00"  # tag 0 current_leader: leader 2, epoch 7, its tags
        "00"  # topic tagged fields
        "00000000"  # throttle_time_ms
        "01" "00" "0d" "02" "00000002" "02" "68" "00002384" "00" "00"  # tag 0 node_endpoints: [2 h:9092 null]
    )
    correlation_id, body = m.decode_response(m.PRODUCE, 10, payload)
    assert correlation_id == 3
    partition = body["responses"][0]["partition_responses"][0]
    assert partition["error_code"] == 6
    assert partition["current_leader"] == {"leader_id": 2, "leader_epoch": 7}
    assert body["node_endpoints"] == [{"node_id": 2, "host": "h", "port": 9092, "rack": None}]
    assert m.encode_response(m.PRODUCE, 10, 3, body)[4:] == payload


def test_init_producer_id_v0_response_golden() -> None:
    payload = bytes.fromhex("0000002a" "00000000" "0000" "0000000000003039" "0005")
    assert m.decode_response(m.INIT_PRODUCER_ID, 0, payload) == (
        42, {"throttle_time_ms": 0, "error_code": 0, "producer_id": 12345, "producer_epoch": 5}
    )


def test_offset_fetch_v1_request_golden() -> None:
    frame = m.encode_request(m.OFFSET_FETCH, 1, 7, None, {"group_id": "g", "topics": [
        {"name": "t", "partition_indexes": [0, 3]}]})
    assert frame[4:] == bytes.fromhex(
        "0009" "0001" "00000007" "ffff"  # header v1, null client id
        "0001" "67"  # group_id "g"
        "00000001" "0001" "74"  # topics: [t]
        "00000002" "00000000" "00000003"  # partition_indexes [0, 3]
    )


def test_offset_fetch_v7_request_golden_flexible_with_require_stable() -> None:
    frame = m.encode_request(m.OFFSET_FETCH, 7, 7, None, {"group_id": "g", "require_stable": True, "topics": [
        {"name": "t", "partition_indexes": [0, 3]}]})
    assert frame[4:] == bytes.fromhex(
        "0009" "0007" "00000007" "ffff" "00"  # header v2
        "02" "67"  # compact group_id "g"
        "02" "02" "74"  # compact topics: [t]
        "03" "00000000" "00000003" "00"  # compact partition_indexes [0, 3], topic tagged fields
        "01"  # require_stable
        "00"  # body tagged fields
    )


def test_offset_fetch_v2_request_null_topics_means_all() -> None:
    frame = m.encode_request(m.OFFSET_FETCH, 2, 7, None, {"group_id": "g", "topics": None})
    assert frame[4:].endswith(bytes.fromhex("0001" "67" "ffffffff"))
    assert m.decode_request(frame[4:])[1] == {"group_id": "g", "topics": None}
    with pytest.raises(ValueError, match="OffsetFetchRequest v1"):
        m.encode_request(m.OFFSET_FETCH, 1, 7, None, {"group_id": "g", "topics": None})


def test_offset_fetch_v1_response_golden() -> None:
    payload = bytes.fromhex(
        "00000007"  # header v0
        "00000001" "0001" "74"  # topics: [t]
        "00000001" "00000000" "ffffffffffffffff"  # partition 0, no committed offset
        "ffff" "0000"  # null metadata, no error
    )
    assert m.decode_response(m.OFFSET_FETCH, 1, payload) == (7, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "committed_offset": -1, "metadata": None, "error_code": 0}]}]})


def test_offset_fetch_v7_response_golden() -> None:
    payload = bytes.fromhex(
        "00000007" "00"  # header v1
        "00000000"  # throttle_time_ms
        "02" "02" "74"  # topics: [t]
        "02" "00000003" "000000000000002a" "ffffffff"  # partition 3, offset 42, leader epoch -1
        "00" "0058" "00"  # null metadata, UNSTABLE_OFFSET_COMMIT, partition tagged fields
        "00"  # topic tagged fields
        "0000" "00"  # top-level error_code, body tagged fields
    )
    correlation_id, body = m.decode_response(m.OFFSET_FETCH, 7, payload)
    assert correlation_id == 7
    assert body == {"throttle_time_ms": 0, "error_code": 0, "topics": [{"name": "t", "partitions": [
        {"partition_index": 3, "committed_offset": 42, "committed_leader_epoch": -1, "metadata": None,
         "error_code": 88}]}]}
    assert m.encode_response(m.OFFSET_FETCH, 7, 7, body)[4:] == payload


def test_fetch_v4_request_golden() -> None:
    body = {"max_wait_ms": 200, "min_bytes": 1, "isolation_level": 1, "topics": [
        {"topic": "t", "partitions": [{"partition": 2, "fetch_offset": 5, "partition_max_bytes": 1024}]}]}
    assert m.encode_request(m.FETCH, 4, 7, None, body)[4:] == bytes.fromhex(
        "0001" "0004" "00000007" "ffff"  # header v1, null client id
        "ffffffff"  # replica_id -1: a consumer
        "000000c8" "00000001" "7fffffff"  # max_wait_ms 200, min_bytes 1, max_bytes default
        "01"  # isolation_level: read_committed
        "00000001" "0001" "74"  # topics: [t]
        "00000001" "00000002" "0000000000000005" "00000400"  # partition 2 at offset 5, 1 KiB
    )


def test_fetch_v12_request_golden_flexible() -> None:
    body = {"max_wait_ms": 100, "min_bytes": 1, "topics": [
        {"topic": "t", "partitions": [{"partition": 0, "fetch_offset": 9, "partition_max_bytes": 16}]}]}
    assert m.encode_request(m.FETCH, 12, 3, None, body)[4:] == bytes.fromhex(
        "0001" "000c" "00000003" "ffff" "00"  # header v2
        "ffffffff" "00000064" "00000001" "7fffffff" "00"  # replica, wait, min, max bytes, read_uncommitted
        "00000000" "ffffffff"  # session 0, epoch -1: a full fetch, no session
        "02" "02" "74"  # compact topics: [t]
        "02" "00000000" "ffffffff" "0000000000000009"  # partition 0, current leader epoch -1, offset 9
        "ffffffff" "ffffffffffffffff" "00000010" "00"  # last fetched epoch, log start, max bytes, tags
        "00"  # topic tagged fields
        "01"  # forgotten_topics_data: []
        "01"  # rack_id ""
        "00"  # body tagged fields (cluster_id null: omitted)
    )


def test_fetch_v12_response_golden_aborted_transactions_and_tagged_leader() -> None:
    payload = bytes.fromhex(
        "00000003" "00"  # header v1
        "00000000" "0000" "00000000"  # throttle, error_code, session_id
        "02" "02" "74"  # responses: [t]
        "02" "00000001" "0000"  # partition 1, no error
        "000000000000000a" "0000000000000008" "0000000000000000"  # HW 10, LSO 8, log start 0
        "02" "00000000000003e9" "0000000000000004" "00"  # aborted: [producer 1001 from offset 4], its tags
        "ffffffff"  # preferred_read_replica -1
        "04" "616263"  # records: compact nullable bytes b"abc"
        "01" "01" "09" "00000002" "00000007" "00"  # tagged: current_leader (tag 1) = leader 2, epoch 7
        "00"  # topic tagged fields
        "00"  # body tagged fields
    )
    correlation_id, body = m.decode_response(m.FETCH, 12, payload)
    assert correlation_id == 3
    part = body["responses"][0]["partitions"][0]
    assert (part["partition_index"], part["high_watermark"], part["last_stable_offset"]) == (1, 10, 8)
    assert part["aborted_transactions"] == [{"producer_id": 1001, "first_offset": 4}]
    assert part["current_leader"] == {"leader_id": 2, "leader_epoch": 7}
    assert part["diverging_epoch"] == {"epoch": -1, "end_offset": -1}
    assert bytes(part["records"]) == b"abc"
    assert m.encode_response(m.FETCH, 12, 3, body)[4:] == payload


def test_fetch_v4_response_null_aborted_transactions_and_records() -> None:
    payload = bytes.fromhex(
        "00000005"  # header v0
        "00000000"  # throttle_time_ms
        "00000001" "0001" "74"  # responses: [t]
        "00000001" "00000000" "0006"  # partition 0, NOT_LEADER_OR_FOLLOWER
        "ffffffffffffffff" "ffffffffffffffff"  # HW, LSO unknown
        "ffffffff" "ffffffff"  # aborted_transactions: null, records: null
    )
    assert m.decode_response(m.FETCH, 4, payload) == (5, {"throttle_time_ms": 0, "responses": [
        {"topic": "t", "partitions": [{"partition_index": 0, "error_code": 6, "high_watermark": -1,
                                       "last_stable_offset": -1, "aborted_transactions": None, "records": None}]}]})


def test_list_offsets_v1_request_golden() -> None:
    body = {"topics": [{"name": "t", "partitions": [{"partition_index": 3, "timestamp": -2}]}]}
    assert m.encode_request(m.LIST_OFFSETS, 1, 9, None, body)[4:] == bytes.fromhex(
        "0002" "0001" "00000009" "ffff"  # header v1
        "ffffffff"  # replica_id -1
        "00000001" "0001" "74"  # topics: [t]
        "00000001" "00000003" "fffffffffffffffe"  # partition 3, timestamp -2: earliest
    )


def test_list_offsets_v7_request_and_response_golden_flexible() -> None:
    body = {"isolation_level": 1, "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}]}
    assert m.encode_request(m.LIST_OFFSETS, 7, 9, None, body)[4:] == bytes.fromhex(
        "0002" "0007" "00000009" "ffff" "00"  # header v2
        "ffffffff" "01"  # replica_id -1, read_committed
        "02" "02" "74"  # compact topics: [t]
        "02" "00000000" "ffffffff" "ffffffffffffffff" "00"  # partition 0, leader epoch -1, latest, tags
        "00" "00"  # topic, body tagged fields
    )
    payload = bytes.fromhex(
        "00000009" "00"  # header v1
        "00000000"  # throttle_time_ms
        "02" "02" "74"  # topics: [t]
        "02" "00000000" "0000" "ffffffffffffffff" "000000000000002a" "00000003" "00"  # offset 42, epoch 3
        "00" "00"
    )
    assert m.decode_response(m.LIST_OFFSETS, 7, payload) == (9, {"throttle_time_ms": 0, "topics": [
        {"name": "t", "partitions": [{"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 42,
                                      "leader_epoch": 3}]}]})


# ------------------------------------------------------------ header rules


@pytest.mark.parametrize(
    ("key", "version", "request_header", "response_header"),
    [
        (m.PRODUCE, 8, 1, 0), (m.PRODUCE, 9, 2, 1), (m.PRODUCE, 11, 2, 1),
        (m.METADATA, 8, 1, 0), (m.METADATA, 9, 2, 1),
        (m.INIT_PRODUCER_ID, 1, 1, 0), (m.INIT_PRODUCER_ID, 2, 2, 1),
        (m.API_VERSIONS, 2, 1, 0), (m.API_VERSIONS, 3, 2, 0),  # the exception
        (m.SASL_HANDSHAKE, 1, 1, 0),
        (m.OFFSET_FETCH, 5, 1, 0), (m.OFFSET_FETCH, 6, 2, 1),
        (m.FETCH, 11, 1, 0), (m.FETCH, 12, 2, 1), (m.LIST_OFFSETS, 5, 1, 0), (m.LIST_OFFSETS, 6, 2, 1),
    ],
)
def test_header_versions(key: int, version: int, request_header: int, response_header: int) -> None:
    assert m.request_header_version(key, version) == request_header
    assert m.response_header_version(key, version) == response_header
    # Frame = size + header + body: the header length is what is left around the body.
    request_body = _body_bytes(m.REQUEST_SCHEMAS[key], version)
    response_body = _body_bytes(m.RESPONSE_SCHEMAS[key], version)
    request = m.encode_request(key, version, 1, None, {})
    response = m.encode_response(key, version, 1, {})
    assert request.endswith(request_body)
    assert response.endswith(response_body)
    assert len(request) - 4 - len(request_body) == {1: 10, 2: 11}[request_header]
    assert len(response) - 4 - len(response_body) == {0: 4, 1: 5}[response_header]


def _body_bytes(schema: MessageSchema, version: int) -> bytes:
    out = Output()
    schema.codec(version).encode(out, {})
    return out.getvalue()


def test_response_header_v1_tagged_fields_are_skipped() -> None:
    body = {"throttle_time_ms": 1, "error_code": 0, "producer_id": 9, "producer_epoch": 2}
    payload = m.encode_response(m.INIT_PRODUCER_ID, 2, 77, body)[4:]
    assert payload[4] == 0  # header v1: empty tagged-field section
    with_tag = payload[:4] + bytes.fromhex("01" "05" "02" "abcd") + payload[5:]
    assert m.decode_response(m.INIT_PRODUCER_ID, 2, with_tag) == (77, body)


def test_unknown_tagged_fields_in_body_are_ignored() -> None:
    body = {"throttle_time_ms": 1, "error_code": 0, "producer_id": 9, "producer_epoch": 2}
    payload = m.encode_response(m.INIT_PRODUCER_ID, 4, 5, body)[4:]
    assert payload[-1] == 0
    with_tag = payload[:-1] + bytes.fromhex("01" "1f" "03" "010203")
    assert m.decode_response(m.INIT_PRODUCER_ID, 4, with_tag) == (5, body)


def test_tagged_field_equal_to_default_is_omitted() -> None:
    base = {"responses": [{"name": "t", "partition_responses": [{"index": 0}]}]}
    with_default = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "current_leader": {"leader_id": -1, "leader_epoch": -1}}]}]}
    moved = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "current_leader": {"leader_id": 1, "leader_epoch": -1}}]}]}
    assert m.encode_response(m.PRODUCE, 10, 1, base) == m.encode_response(m.PRODUCE, 10, 1, with_default)
    assert m.encode_response(m.PRODUCE, 10, 1, base) != m.encode_response(m.PRODUCE, 10, 1, moved)


# ---------------------------------------------------- versions and defaults


@pytest.mark.parametrize(("key", "version"), [(m.PRODUCE, 2), (m.PRODUCE, 13), (m.METADATA, 0), (m.METADATA, 14),
                                               (m.API_VERSIONS, 4), (m.INIT_PRODUCER_ID, 5),
                                               (m.OFFSET_FETCH, 0), (m.OFFSET_FETCH, 8),
                                               (m.FETCH, 3), (m.FETCH, 13), (m.LIST_OFFSETS, 0),
                                               (m.LIST_OFFSETS, 8), (99, 0)])
def test_unsupported_versions_raise(key: int, version: int) -> None:
    with pytest.raises(UnsupportedVersionError):
        m.encode_request(key, version, 1, None, {})
    with pytest.raises(UnsupportedVersionError):
        m.encode_response(key, version, 1, {})
    with pytest.raises(UnsupportedVersionError):
        m.decode_response(key, version, b"\x00\x00\x00\x01")


def test_supported_versions_contract() -> None:
    assert (m.PRODUCE, m.METADATA, m.OFFSET_FETCH, m.API_VERSIONS, m.INIT_PRODUCER_ID) == (0, 3, 9, 18, 22)
    assert m.SUPPORTED_VERSIONS[m.PRODUCE] == (3, 12)  # v12: transactions v2 only; v13+ name topics by id
    assert m.SUPPORTED_VERSIONS[m.END_TXN] == m.SUPPORTED_VERSIONS[m.TXN_OFFSET_COMMIT] == (0, 5)  # v5: transactions v2
    assert m.SUPPORTED_VERSIONS[m.METADATA] == (1, 13)  # v13: the top-level error code (KIP-1102)
    assert m.SUPPORTED_VERSIONS[m.API_VERSIONS] == (0, 3)
    assert m.SUPPORTED_VERSIONS[m.INIT_PRODUCER_ID] == (0, 4)
    assert m.SUPPORTED_VERSIONS[m.OFFSET_FETCH] == (1, 7)  # v0 read ZooKeeper; v8+ batch groups
    assert (m.FETCH, m.LIST_OFFSETS) == (1, 2)
    assert m.SUPPORTED_VERSIONS[m.FETCH] == (4, 12)  # Kafka 4 removed v0-3; v13+ name topics by id
    assert m.SUPPORTED_VERSIONS[m.LIST_OFFSETS] == (1, 7)  # Kafka 4 removed v0; v8+ tiered storage
    for key in (m.FIND_COORDINATOR, m.ADD_PARTITIONS_TO_TXN, m.ADD_OFFSETS_TO_TXN, m.END_TXN,
                m.TXN_OFFSET_COMMIT, m.SASL_HANDSHAKE, m.SASL_AUTHENTICATE):
        assert key in m.SUPPORTED_VERSIONS


def test_missing_fields_take_json_defaults() -> None:
    _, req = m.decode_request(m.encode_request(m.PRODUCE, 3, 1, None, {"acks": 1, "timeout_ms": 5})[4:])
    assert req == {"transactional_id": None, "acks": 1, "timeout_ms": 5, "topic_data": []}
    _, req = m.decode_request(m.encode_request(m.METADATA, 4, 1, None, {"topics": None})[4:])
    assert req == {"topics": None, "allow_auto_topic_creation": True}
    _, req = m.decode_request(m.encode_request(m.INIT_PRODUCER_ID, 3, 1, None, {})[4:])
    assert req == {"transactional_id": None, "transaction_timeout_ms": 0, "producer_id": -1, "producer_epoch": -1}
    _, resp = m.decode_response(m.METADATA, 10, m.encode_response(m.METADATA, 10, 1, {
        "topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]})[4:])
    topic = resp["topics"][0]
    assert topic["topic_id"] == uuid.UUID(int=0)
    assert topic["topic_authorized_operations"] == -(2**31)
    assert topic["partitions"][0]["leader_epoch"] == -1
    assert resp["controller_id"] == -1 and resp["cluster_id"] is None


def test_fields_the_version_lacks_are_ignored_and_absent() -> None:
    body = {"cluster_id": "c", "controller_id": 3, "throttle_time_ms": 5, "brokers": [], "topics": []}
    _, decoded = m.decode_response(m.METADATA, 1, m.encode_response(m.METADATA, 1, 1, body)[4:])
    assert decoded == {"brokers": [], "controller_id": 3, "topics": []}


def test_metadata_v12_null_topic_name_and_topic_ids() -> None:
    topic_id = uuid.uuid4()
    body = {"topics": [{"topic_id": topic_id, "name": None}], "include_topic_authorized_operations": True}
    _, decoded = m.decode_request(m.encode_request(m.METADATA, 12, 1, "x", body)[4:])
    assert decoded["topics"] == [{"topic_id": topic_id, "name": None}]
    with pytest.raises(ValueError):
        m.encode_request(m.METADATA, 9, 1, "x", body)  # names are not nullable before v10


def test_encode_rejects_values_that_do_not_fit() -> None:
    with pytest.raises(ValueError):
        m.encode_request(m.PRODUCE, 3, 1, None, {"acks": 2**15})
    with pytest.raises(ValueError):
        m.encode_request(m.PRODUCE, 3, 1, None, {"topic_data": [{"name": None}]})
    with pytest.raises(ValueError):
        m.encode_request(m.PRODUCE, 3, 1, None, {"topic_data": None})


# ------------------------------------------------------------- hot path


def test_large_records_are_spliced_not_copied() -> None:
    records = bytes(range(256)) * 64
    body = {"acks": -1, "timeout_ms": 1, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
    for version in (8, 11):
        chunks = m.encode_request_chunks(m.PRODUCE, version, 1, "c", body)
        assert any(chunk is records for chunk in chunks)
        frame = m.encode_request(m.PRODUCE, version, 1, "c", body)
        assert b"".join(chunks) == frame
        _, decoded = m.decode_request(frame[4:])
        assert decoded["topic_data"][0]["partition_data"][0]["records"] == records


def test_records_accept_memoryview() -> None:
    records = memoryview(b"\x00" * 5000)
    body = {"topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}
    _, decoded = m.decode_request(m.encode_request(m.PRODUCE, 9, 1, None, body)[4:])
    assert decoded["topic_data"][0]["partition_data"][0]["records"] == bytes(records)


# --------------------------------------------------------- hostile input

SAMPLE_RESPONSES: list[tuple[int, int, dict[str, Any]]] = [
    (m.PRODUCE, 8, {"responses": [{"name": "t", "partition_responses": [
        {"index": 1, "error_code": 87, "base_offset": 3, "record_errors": [{"batch_index": 0, "batch_index_error_message": "bad"}],
         "error_message": "oops"}]}], "throttle_time_ms": 2}),
    (m.PRODUCE, 11, {"responses": [{"name": "t", "partition_responses": [
        {"index": 1, "error_code": 6, "current_leader": {"leader_id": 2, "leader_epoch": 4}}]}],
        "node_endpoints": [{"node_id": 2, "host": "b2", "port": 9092, "rack": "r"}]}),
    (m.METADATA, 12, {"brokers": [{"node_id": 1, "host": "h", "port": 1, "rack": None}], "cluster_id": "c",
                      "topics": [{"name": "t", "topic_id": uuid.UUID(int=7), "partitions": [
                          {"partition_index": 0, "leader_id": 1, "replica_nodes": [1, 2], "isr_nodes": [1]}]}]}),
    (m.METADATA, 5, {"brokers": [{"node_id": 1, "host": "h", "port": 1}], "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "leader_id": 1, "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": [2]}]}]}),
    (m.API_VERSIONS, 3, {"api_keys": [{"api_key": 0, "min_version": 3, "max_version": 11}],
                         "supported_features": [{"name": "f", "min_version": 1, "max_version": 2}], "zk_migration_ready": True}),
    (m.INIT_PRODUCER_ID, 4, {"producer_id": 5, "producer_epoch": 1}),
    (m.OFFSET_FETCH, 1, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "committed_offset": 9, "metadata": "m", "error_code": 0}]}]}),
    (m.OFFSET_FETCH, 7, {"topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "committed_offset": 9, "committed_leader_epoch": 2, "metadata": None, "error_code": 88}]}],
        "error_code": 16}),
]


@pytest.mark.parametrize(("key", "version", "body"), SAMPLE_RESPONSES)
def test_truncation_at_every_offset_raises_protocol_error(key: int, version: int, body: dict[str, Any]) -> None:
    payload = m.encode_response(key, version, 1, body)[4:]
    assert m.decode_response(key, version, payload)[0] == 1
    for cut in range(len(payload)):
        with pytest.raises(ProtocolError):
            m.decode_response(key, version, payload[:cut])


@pytest.mark.parametrize(("key", "version", "body"), SAMPLE_RESPONSES)
def test_trailing_bytes_after_a_response_are_ignored(key: int, version: int, body: dict[str, Any]) -> None:
    # Real peers (librdkafka's mock) append bytes after flexible bodies; Java ignores them too.
    payload = m.encode_response(key, version, 1, body)[4:]
    assert m.decode_response(key, version, payload + b"\x00") == m.decode_response(key, version, payload)


def test_trailing_bytes_after_a_request_raise_protocol_error() -> None:
    body: dict[str, Any] = {"transactional_id": None, "acks": 1, "timeout_ms": 5, "topic_data": []}
    payload = m.encode_request(m.PRODUCE, 9, 1, "c", body)[4:]
    with pytest.raises(ProtocolError):
        m.decode_request(payload + b"\x00")


def test_truncated_request_raises_protocol_error() -> None:
    body = {"transactional_id": "t", "acks": 1, "timeout_ms": 5,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"abc"}]}]}
    payload = m.encode_request(m.PRODUCE, 9, 1, "c", body)[4:]
    for cut in range(len(payload)):
        with pytest.raises(ProtocolError):
            m.decode_request(payload[:cut])


def test_peek_correlation_id() -> None:
    assert m.peek_correlation_id(b"\x00\x00\x01\x00rest") == 256
    assert m.peek_correlation_id(memoryview(b"\xff\xff\xff\xff")) == -1
    with pytest.raises(ProtocolError):
        m.peek_correlation_id(b"\x00\x01")


@pytest.mark.parametrize(("key", "version"), ALL_VERSIONS, ids=ids(ALL_VERSIONS))
@settings(max_examples=60, deadline=None)
@given(payload=st.binary(max_size=120))
def test_fuzz_decode_response_raises_only_protocol_error(key: int, version: int, payload: bytes) -> None:
    try:
        m.decode_response(key, version, payload)
    except ProtocolError:
        pass


@pytest.mark.parametrize(("key", "version", "body"), SAMPLE_RESPONSES)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_fuzz_mutated_valid_responses(key: int, version: int, body: dict[str, Any], data: st.DataObject) -> None:
    payload = bytearray(m.encode_response(key, version, 1, body)[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(payload) - 1))
        payload[index] = data.draw(st.integers(0, 255))
    try:
        m.decode_response(key, version, bytes(payload))
    except ProtocolError:
        pass


@settings(max_examples=200, deadline=None)
@given(payload=st.binary(max_size=80))
def test_fuzz_decode_request_raises_only_protocol_or_version_errors(payload: bytes) -> None:
    try:
        m.decode_request(payload)
    except (ProtocolError, UnsupportedVersionError):
        pass
