"""The native Produce codec against the generic schema codec, for every version.

``protocol/produce.py`` (the Rust crate's ``native/src/produce/``) must write exactly the bytes ``messages.encode_request``
writes and read exactly the data ``messages.decode_response`` reads; the
generic codec is the reference (it is itself checked against golden frames in
``test_messages.py``). Hostile input must fail the same way: truncation at
every offset and byte-mutated responses either fail in both with
``ProtocolError`` or decode to equal data in both.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aioproducer.errors import ProtocolError, UnsupportedVersionError
from aioproducer.protocol import messages as m
from aioproducer.protocol import produce
from aioproducer.protocol.produce import NodeEndpoint, PartitionResponse, ProduceResponse

VERSIONS = list(range(m.SUPPORTED_VERSIONS[m.PRODUCE][0], m.SUPPORTED_VERSIONS[m.PRODUCE][1] + 1))


def test_codec_covers_every_supported_produce_version() -> None:
    assert (produce.MIN_VERSION, produce.MAX_VERSION) == m.SUPPORTED_VERSIONS[m.PRODUCE]
    assert VERSIONS == list(range(3, 13))


# ------------------------------------------------------------------ requests

SMALL = b"\x01" * 61
LARGE = bytes(range(256)) * 40  # 10,240 bytes: over the splice threshold
BORDER = b"\x07" * produce.SPLICE_THRESHOLD

TOPIC_DATA: list[list[tuple[str, list[tuple[int, Any]]]]] = [
    [],
    [("t", [(0, SMALL)])],
    [("orders", [(0, LARGE), (3, SMALL), (5, BORDER)]), ("payments", [(1, LARGE)])],
    [("a", [(0, None)]), ("ünïcödé-topic", [(2, b""), (7, memoryview(LARGE)), (2**31 - 1, bytearray(SMALL))]), ("c", [])],
    [("t" * 200, [(i, LARGE if i % 2 else SMALL) for i in range(12)])],
]


def generic_body(transactional_id: str | None, acks: int, timeout_ms: int, topic_data: Any) -> dict[str, Any]:
    return {
        "transactional_id": transactional_id,
        "acks": acks,
        "timeout_ms": timeout_ms,
        "topic_data": [
            {"name": name, "partition_data": [{"index": i, "records": r} for i, r in parts]} for name, parts in topic_data
        ],
    }


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("topic_data", TOPIC_DATA, ids=lambda td: f"{len(td)}-topics")
@pytest.mark.parametrize("transactional_id", [None, "tx-1"])
@pytest.mark.parametrize("acks", [0, 1, -1])
@pytest.mark.parametrize("client_id", [None, "", "producer-1"])
def test_request_is_byte_for_byte_the_generic_encoding(
    version: int, topic_data: Any, transactional_id: str | None, acks: int, client_id: str | None
) -> None:
    chunks = produce.encode_produce_request(version, 12345, client_id, transactional_id, acks, 30000, topic_data)
    expected = m.encode_request(
        m.PRODUCE, version, 12345, client_id, generic_body(transactional_id, acks, 30000, topic_data)
    )
    frame = b"".join(chunks)
    assert frame == expected
    assert struct.unpack(">i", frame[:4])[0] == len(frame) - 4
    header, body = m.decode_request(frame[4:])
    assert header == m.RequestHeader(m.PRODUCE, version, 12345, client_id)
    assert body["acks"] == acks


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.none() | st.text(max_size=8),
    transactional_id=st.none() | st.text(max_size=8),
    acks=st.integers(-(2**15), 2**15 - 1),
    timeout_ms=st.integers(-(2**31), 2**31 - 1),
    topic_data=st.lists(
        st.tuples(
            st.text(max_size=10),
            st.lists(
                st.tuples(
                    st.integers(-(2**31), 2**31 - 1),
                    st.none() | st.binary(max_size=300) | st.sampled_from([LARGE, BORDER, BORDER[:-1]]),
                ),
                max_size=4,
            ),
        ),
        max_size=3,
    ),
)
def test_request_matches_generic_for_drawn_values(
    version: int,
    correlation_id: int,
    client_id: str | None,
    transactional_id: str | None,
    acks: int,
    timeout_ms: int,
    topic_data: Any,
) -> None:
    chunks = produce.encode_produce_request(
        version, correlation_id, client_id, transactional_id, acks, timeout_ms, topic_data
    )
    body = generic_body(transactional_id, acks, timeout_ms, topic_data)
    assert b"".join(chunks) == m.encode_request(m.PRODUCE, version, correlation_id, client_id, body)


@pytest.mark.parametrize("version", VERSIONS)
def test_large_record_batches_are_chunks_by_reference(version: int) -> None:
    large2 = bytes(LARGE)
    view = memoryview(LARGE)[1:]
    chunks = produce.encode_produce_request(version, 1, "c", None, 1, 5, [("t", [(0, LARGE), (1, SMALL), (2, view)]), ("u", [(0, large2)])])
    by_identity = [c for c in chunks if c is LARGE or c is view or c is large2]
    assert len(by_identity) == 3
    assert not any(c is SMALL for c in chunks)  # small batches are copied into the frame buffer
    below = BORDER[:-1]
    chunks = produce.encode_produce_request(version, 1, "c", None, 1, 5, [("t", [(0, BORDER), (1, below)])])
    assert any(c is BORDER for c in chunks) and not any(c is below for c in chunks)
    assert sum(len(c) for c in chunks) == struct.unpack(">i", bytes(chunks[0][:4]))[0] + 4
    ending = produce.encode_produce_request(version, 1, "c", None, 1, 5, [("t", [(0, BORDER)])])
    assert all(len(c) for c in ending)  # no empty chunk, even where a batch ends the frame


@pytest.mark.parametrize("version", VERSIONS)
def test_a_batch_in_two_pieces_goes_by_reference_and_encodes_as_the_joined_batch(version: int) -> None:
    """``(header, section)``: a batch sent in place; both pieces are chunks as they are, whatever their size."""
    header, section = bytes(SMALL[:61]), memoryview(LARGE)
    chunks = produce.encode_produce_request(version, 1, "c", None, 1, 5, [("t", [(0, (header, section)), (1, SMALL)])])
    assert [i for i, c in enumerate(chunks) if c is header] == [i - 1 for i, c in enumerate(chunks) if c is section] != []
    joined = [("t", [(0, header + bytes(section)), (1, SMALL)])]
    assert b"".join(chunks) == m.encode_request(m.PRODUCE, version, 1, "c", generic_body(None, 1, 5, joined))
    small = produce.encode_produce_request(version, 1, "c", None, 1, 5, [("t", [(0, (header, memoryview(SMALL)))])])
    assert any(c is header for c in small)  # spliced under the threshold too: never read here
    bad: Any
    for bad, why in (((header,), "pair"), ((header, section, header), "pair"), ((header, 5), "bytes-like")):
        with pytest.raises(ValueError, match=rf"topic_data\[0\] partition 0 records.*{why}"):
            produce.encode_produce_request(version, 1, "c", None, 1, 5, [("t", [(0, bad)])])


@pytest.mark.parametrize("version", VERSIONS)
def test_a_frame_without_large_batches_is_one_bytes_object(version: int) -> None:
    records = bytearray(SMALL)
    topic_data: Any = [("t", [(0, records), (1, memoryview(SMALL)), (3, None)]), ("u", [(0, BORDER[:-1])])]
    chunks = produce.encode_produce_request(version, 1, "c", None, 1, 5, topic_data)
    assert len(chunks) == 1 and type(chunks[0]) is bytes
    assert chunks[0] == m.encode_request(m.PRODUCE, version, 1, "c", generic_body(None, 1, 5, topic_data))


def test_a_request_with_no_topics_is_one_chunk() -> None:
    chunks = produce.encode_produce_request(9, 1, "c", None, 1, 5, [])
    assert chunks == [m.encode_request(m.PRODUCE, 9, 1, "c", generic_body(None, 1, 5, []))]


#: Each bad value and the words the ValueError must say to name it.
BAD_VALUES: list[tuple[dict[str, Any], str]] = [
    ({"acks": 2**15}, "acks"),
    ({"acks": 2**70}, "acks"),  # past 64 bits too: ValueError, not OverflowError
    ({"acks": "1"}, "acks"),
    ({"timeout_ms": 2**31}, "timeout_ms"),
    ({"topic_data": [("t", [(2**31, SMALL)])]}, r"topic_data\[0\] partition 0 index"),
    ({"topic_data": [("t", []), (None, [])]}, r"topic_data\[1\] name"),
    ({"topic_data": [("t", [(0, SMALL), (1, 5)])]}, r"topic_data\[0\] partition 1 records"),
    ({"topic_data": [("t", [(0, SMALL, 1)])]}, r"topic_data\[0\] partition 0"),
    ({"topic_data": [("t\ud800", [])]}, r"topic_data\[0\] name"),  # a lone surrogate has no UTF-8
    ({"topic_data": 5}, "topic_data"),
]


@pytest.mark.parametrize(("bad", "named"), BAD_VALUES)
@pytest.mark.parametrize("version", [3, 9])
def test_values_that_do_not_fit_raise_value_error_naming_them_as_in_the_generic_codec(
    version: int, bad: dict[str, Any], named: str
) -> None:
    args: dict[str, Any] = {"acks": 1, "timeout_ms": 5, "topic_data": [("t", [(0, SMALL)])]} | bad
    with pytest.raises((ValueError, TypeError)):  # the generic codec lets a TypeError through for some
        m.encode_request(m.PRODUCE, version, 1, "c", generic_body(None, args["acks"], args["timeout_ms"], args["topic_data"]))
    with pytest.raises(ValueError, match=rf"^cannot encode Produce v{version}: {named}"):
        produce.encode_produce_request(version, 1, "c", None, args["acks"], args["timeout_ms"], args["topic_data"])


@pytest.mark.parametrize(("argument", "value"), [("correlation_id", 2**31), ("client_id", 5), ("transactional_id", b"tx")])
def test_header_values_that_do_not_fit_raise_value_error_naming_them(argument: str, value: object) -> None:
    args: dict[str, Any] = {"version": 9, "correlation_id": 1, "client_id": "c", "transactional_id": None, "acks": 1,
                            "timeout_ms": 5, "topic_data": []}
    with pytest.raises(ValueError, match=rf"^cannot encode Produce v9: {argument}"):
        produce.encode_produce_request(**(args | {argument: value}))


def test_topic_names_longer_than_int16_only_fit_flexible_versions() -> None:
    topic_data = [("t" * 40000, [(0, SMALL)])]
    for version in (3, 8):
        with pytest.raises(ValueError):
            produce.encode_produce_request(version, 1, "c", None, 1, 5, topic_data)
    for version in (9, 11):
        body = generic_body(None, 1, 5, topic_data)
        assert b"".join(produce.encode_produce_request(version, 1, "c", None, 1, 5, topic_data)) == m.encode_request(
            m.PRODUCE, version, 1, "c", body
        )


@pytest.mark.parametrize("version", [0, 2, 13])
def test_unsupported_versions_raise(version: int) -> None:
    with pytest.raises(UnsupportedVersionError):
        produce.encode_produce_request(version, 1, "c", None, 1, 5, [])
    with pytest.raises(UnsupportedVersionError):
        produce.decode_produce_response(version, b"\x00\x00\x00\x01")
    with pytest.raises(UnsupportedVersionError):
        produce.read_produce_response(version, b"\x00\x00\x00\x01")


# ----------------------------------------------------------------- responses


def expected_response(version: int, correlation_id: int, body: dict[str, Any]) -> ProduceResponse:
    """The generic decoder's dict, in the fast decoder's shape; checks which fields the version has."""
    partitions = []
    for topic in body["responses"]:
        for part in topic["partition_responses"]:
            assert ("log_start_offset" in part) == (version >= 5)
            assert ("record_errors" in part) == ("error_message" in part) == (version >= 8)
            assert ("current_leader" in part) == (version >= 10)
            leader = part.get("current_leader", {"leader_id": -1, "leader_epoch": -1})
            partitions.append(PartitionResponse(
                topic["name"],
                part["index"],
                part["error_code"],
                part["base_offset"],
                part["log_append_time_ms"],
                part.get("log_start_offset", -1),
                tuple((e["batch_index"], e["batch_index_error_message"]) for e in part.get("record_errors", ())),
                part.get("error_message"),
                leader["leader_id"],
                leader["leader_epoch"],
            ))
    assert ("node_endpoints" in body) == (version >= 10)
    endpoints = [NodeEndpoint(n["node_id"], n["host"], n["port"], n["rack"]) for n in body.get("node_endpoints", ())]
    return ProduceResponse(correlation_id, partitions, body["throttle_time_ms"], endpoints)


def assert_same_as_generic(version: int, payload: bytes) -> ProduceResponse:
    """Both native readers against the generic decoder: the named tuples, and the connection's answer."""
    correlation_id, body = m.decode_response(m.PRODUCE, version, payload)
    fast = produce.decode_produce_response(version, payload)
    assert fast == expected_response(version, correlation_id, body)
    answer = produce.read_produce_response(version, payload)
    assert answer.to_response() == fast
    assert (answer.correlation_id, answer.partitions, answer.throttle_time_ms, answer.node_endpoints) == fast
    return fast


def assert_refused(version: int, payload: bytes) -> None:
    """Both native readers refuse ``payload`` with ``ProtocolError``, and nothing else."""
    with pytest.raises(ProtocolError):
        produce.decode_produce_response(version, payload)
    with pytest.raises(ProtocolError):
        produce.read_produce_response(version, payload)


def partition(index: int, **fields: Any) -> dict[str, Any]:
    return {"index": index, "error_code": 0, "base_offset": 100 + index} | fields


SAMPLE_BODIES: list[dict[str, Any]] = [
    {"responses": [], "throttle_time_ms": 0},
    {"responses": [{"name": "t", "partition_responses": [partition(0)]}], "throttle_time_ms": 0},
    {
        "responses": [
            {"name": "orders", "partition_responses": [
                partition(0, log_append_time_ms=1_700_000_000_123, log_start_offset=7),
                partition(3, error_code=6, base_offset=-1,
                          current_leader={"leader_id": 2, "leader_epoch": 9}),
                partition(5, error_code=87, base_offset=-1, error_message="batch rejected",
                          record_errors=[{"batch_index": 0, "batch_index_error_message": "bad key"},
                                         {"batch_index": 4, "batch_index_error_message": None}]),
            ]},
            {"name": "ünïcödé", "partition_responses": [partition(2**31 - 1, error_code=-1, base_offset=2**63 - 1)]},
            {"name": "empty", "partition_responses": []},
        ],
        "throttle_time_ms": 1500,
        "node_endpoints": [{"node_id": 2, "host": "broker-2", "port": 9092, "rack": "r1"},
                           {"node_id": 3, "host": "b3", "port": 19092, "rack": None}],
    },
    {"responses": [{"name": "t", "partition_responses": [
        partition(i, error_code=i % 3, error_message="m" * i or None) for i in range(20)]}], "throttle_time_ms": 2**31 - 1},
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("body", SAMPLE_BODIES, ids=range(len(SAMPLE_BODIES)))
@pytest.mark.parametrize("correlation_id", [0, 7, -(2**31), 2**31 - 1])
def test_response_is_the_generic_decoding(version: int, body: dict[str, Any], correlation_id: int) -> None:
    payload = m.encode_response(m.PRODUCE, version, correlation_id, body)[4:]
    fast = assert_same_as_generic(version, payload)
    assert fast.correlation_id == correlation_id


def test_response_fields_by_version() -> None:
    body = SAMPLE_BODIES[2]
    v3 = produce.decode_produce_response(3, m.encode_response(m.PRODUCE, 3, 1, body)[4:])
    assert v3.partitions[0] == PartitionResponse("orders", 0, 0, 100, 1_700_000_000_123, -1, (), None, -1, -1)
    assert v3.throttle_time_ms == 1500 and v3.node_endpoints == []
    v8 = produce.decode_produce_response(8, m.encode_response(m.PRODUCE, 8, 1, body)[4:])
    assert v8.partitions[0].log_start_offset == 7
    assert v8.partitions[2].record_errors == ((0, "bad key"), (4, None))
    assert v8.partitions[2].error_message == "batch rejected"
    assert v8.partitions[1][-2:] == (-1, -1)  # no leader hints before v10
    v10 = produce.decode_produce_response(10, m.encode_response(m.PRODUCE, 10, 1, body)[4:])
    assert (v10.partitions[1].leader_id, v10.partitions[1].leader_epoch) == (2, 9)
    assert v10.node_endpoints == [NodeEndpoint(2, "broker-2", 9092, "r1"), NodeEndpoint(3, "b3", 19092, None)]
    assert [(p.topic, p.partition) for p in v10.partitions] == [
        ("orders", 0), ("orders", 3), ("orders", 5), ("ünïcödé", 2**31 - 1)
    ]


def _response_bodies(version: int) -> st.SearchStrategy[dict[str, Any]]:
    text = st.text(max_size=8)
    int16, int32, int64 = (st.integers(-(2**b), 2**b - 1) for b in (15, 31, 63))
    part: dict[str, Any] = {"index": int32, "error_code": int16, "base_offset": int64, "log_append_time_ms": int64}
    if version >= 5:
        part["log_start_offset"] = int64
    if version >= 8:
        part["record_errors"] = st.lists(
            st.fixed_dictionaries({"batch_index": int32, "batch_index_error_message": st.none() | text}), max_size=2
        )
        part["error_message"] = st.none() | text
    if version >= 10:
        part["current_leader"] = st.fixed_dictionaries({"leader_id": int32, "leader_epoch": int32})
    body: dict[str, Any] = {
        "responses": st.lists(
            st.fixed_dictionaries({"name": text, "partition_responses": st.lists(st.fixed_dictionaries(part), max_size=3)}),
            max_size=3,
        ),
        "throttle_time_ms": int32,
    }
    if version >= 10:
        body["node_endpoints"] = st.lists(
            st.fixed_dictionaries({"node_id": int32, "host": text, "port": int32, "rack": st.none() | text}), max_size=2
        )
    return st.fixed_dictionaries(body)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_response_matches_generic_for_drawn_bodies(version: int, data: st.DataObject, correlation_id: int) -> None:
    body = data.draw(_response_bodies(version))
    payload = m.encode_response(m.PRODUCE, version, correlation_id, body)[4:]
    assert_same_as_generic(version, payload)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("body", SAMPLE_BODIES[1:3], ids=["one", "many"])
def test_truncation_at_every_offset_raises_protocol_error(version: int, body: dict[str, Any]) -> None:
    payload = m.encode_response(m.PRODUCE, version, 1, body)[4:]
    assert_same_as_generic(version, payload)
    for cut in range(len(payload)):
        assert_refused(version, payload[:cut])


@pytest.mark.parametrize("version", VERSIONS)
def test_trailing_bytes_after_a_response_are_ignored(version: int) -> None:
    payload = m.encode_response(m.PRODUCE, version, 1, SAMPLE_BODIES[2])[4:]
    assert produce.decode_produce_response(version, payload + b"\x00\x01") == produce.decode_produce_response(
        version, payload
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_accepts_bytearray_and_memoryview(version: int) -> None:
    payload = m.encode_response(m.PRODUCE, version, 1, SAMPLE_BODIES[2])[4:]
    fast = produce.decode_produce_response(version, payload)
    assert produce.decode_produce_response(version, bytearray(payload)) == fast
    assert produce.decode_produce_response(version, memoryview(b"xx" + payload)[2:]) == fast
    assert produce.read_produce_response(version, bytearray(payload)).to_response() == fast
    assert produce.read_produce_response(version, memoryview(b"xx" + payload)[2:]).to_response() == fast


def test_unknown_tagged_fields_are_skipped_and_known_ones_checked() -> None:
    # v10 partition with an unknown tag 1 after current_leader (tag 0), and a body with unknown tag 5.
    payload = bytes.fromhex(
        "00000003" "00"  # header v1
        "02" "02" "74"  # responses: [t]
        "02" "00000000" "0000" "0000000000000005" "ffffffffffffffff" "0000000000000000"
        "01" "00"  # record_errors: [], error_message: null
        "02" "00" "09" "00000002" "00000007" "00" "01" "02" "abcd"  # tags 0 (leader 2, epoch 7) and 1 (unknown)
        "00"  # topic tags
        "00000000"  # throttle
        "01" "05" "01" "ff"  # body: unknown tag 5
    )
    fast = assert_same_as_generic(10, payload)
    assert fast.partitions[0].leader_id == 2 and fast.node_endpoints == []
    # The same bytes in v9, where tag 0 is not known yet: ignored.
    assert assert_same_as_generic(9, payload).partitions[0].leader_id == -1
    # A known tagged struct with trailing bytes, or tags out of order, is malformed.
    for bad in (
        payload.replace(bytes.fromhex("0009000000020000000700"), bytes.fromhex("000a00000002000000070000")),
        payload.replace(bytes.fromhex("02" "00" "09"), bytes.fromhex("02" "01" "09")).replace(bytes.fromhex("01" "02" "abcd"), bytes.fromhex("00" "02" "abcd")),
        payload.replace(bytes.fromhex("01" "02" "abcd"), bytes.fromhex("00" "09" "00000003" "00000008" "00")),  # tag 0 twice
        payload.replace(bytes.fromhex("01" "05" "01" "ff"), bytes.fromhex("01" "05" "02" "ff")),  # body tag past the end
    ):
        assert bad != payload
        with pytest.raises(ProtocolError):
            m.decode_response(m.PRODUCE, 10, bad)
        assert_refused(10, bad)


@pytest.mark.parametrize("version", [3, 8, 9, 10])
@pytest.mark.parametrize(
    "patch",
    [
        ("responses count -1", lambda v: (4, b"\xff\xff\xff\xff") if v < 9 else (5, b"\x00")),
        ("topic name null", lambda v: (8, b"\xff\xff") if v < 9 else (6, b"\x00")),
    ],
    ids=lambda p: p[0] if isinstance(p, tuple) else str(p),
)
def test_nulls_for_non_nullable_fields_raise_protocol_error(version: int, patch: Any) -> None:
    payload = bytearray(m.encode_response(m.PRODUCE, version, 1, SAMPLE_BODIES[1])[4:])
    offset, replacement = patch[1](version)
    payload[offset : offset + len(replacement)] = replacement
    with pytest.raises(ProtocolError):
        m.decode_response(m.PRODUCE, version, bytes(payload))
    assert_refused(version, bytes(payload))


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_mutated_responses_fail_or_decode_exactly_as_the_generic_codec(version: int, data: st.DataObject) -> None:
    body = data.draw(st.sampled_from(SAMPLE_BODIES[1:]))
    payload = bytearray(m.encode_response(m.PRODUCE, version, 1, body)[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    mutated = bytes(payload)
    try:
        m.decode_response(m.PRODUCE, version, mutated)
    except ProtocolError:
        assert_refused(version, mutated)
        return
    assert_same_as_generic(version, mutated)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=100, deadline=None)
@given(payload=st.binary(max_size=120))
def test_random_bytes_raise_only_protocol_error_as_the_generic_codec(version: int, payload: bytes) -> None:
    try:
        m.decode_response(m.PRODUCE, version, payload)
    except ProtocolError:
        assert_refused(version, payload)
        return
    assert_same_as_generic(version, payload)


V8_ONE_PARTITION = (
    "00000001"  # correlation id
    "00000001" "0001" "74"  # responses: [t]
    "00000001" "00000000" "0000" "0000000000000005" "ffffffffffffffff" "0000000000000000"
    "00000000"  # record_errors: []
    "{error_message}"
    "00000000"  # throttle_time_ms
)
V9_EMPTY = "00000001" "00" "01" "00000000" "{body_tags}"  # no responses, throttle 0, body tagged fields


@pytest.mark.parametrize(
    ("version", "payload_hex"),
    [
        (8, V8_ONE_PARTITION.format(error_message="fffe")),  # string length -2
        (8, V8_ONE_PARTITION.format(error_message="8000")),
        (8, V8_ONE_PARTITION.replace("0001" "74", "fffe" "74").format(error_message="ffff")),  # topic name: -2
        (9, V9_EMPTY.format(body_tags="01" "8080808010" "00")),  # tag 2**32: overflows 32 bits
        (9, V9_EMPTY.format(body_tags="01" "ffffffff1f" "00")),
        (9, V9_EMPTY.format(body_tags="01" "808080808000" "00")),  # a 6-byte varint
        (9, V9_EMPTY.format(body_tags="02" "01" "00" "01" "00")),  # tag 1 twice
        (10, V9_EMPTY.format(body_tags="01" "00" "01" "00")),  # node_endpoints: null
        (10, V9_EMPTY.format(body_tags="01" "00" "02" "01" "00")),  # node_endpoints: [], one byte left over
    ],
)
def test_malformed_lengths_and_varints_raise_protocol_error(version: int, payload_hex: str) -> None:
    payload = bytes.fromhex(payload_hex)
    with pytest.raises(ProtocolError):
        m.decode_response(m.PRODUCE, version, payload)
    with pytest.raises(ProtocolError):
        produce.decode_produce_response(version, payload)


def test_the_malformed_payloads_differ_from_valid_ones_only_where_intended() -> None:
    # Guards the table above: unpatched, the same payloads decode.
    assert_same_as_generic(8, bytes.fromhex(V8_ONE_PARTITION.format(error_message="ffff")))
    assert_same_as_generic(8, bytes.fromhex(V8_ONE_PARTITION.format(error_message="000161")))
    assert_same_as_generic(9, bytes.fromhex(V9_EMPTY.format(body_tags="01" "ffffffff0f" "00")))  # tag 2**32 - 1
    assert_same_as_generic(10, bytes.fromhex(V9_EMPTY.format(body_tags="01" "00" "01" "01")))  # node_endpoints: []


# ------------------------------------------------------------------ golden bytes

GOLDEN_PARTITIONS: Any = [("t", [(2, b"\xaa\xbb\xcc"), (3, None)])]
_CLASSIC_REQUEST = (
    "00000031" "0000" "{version}" "00000007"  # size, api key, version, correlation id
    "0001" "63"  # client_id "c"
    "ffff" "ffff" "00007530"  # transactional_id null, acks -1, timeout_ms 30000
    "00000001" "0001" "74" "00000002"  # [topic "t", 2 partitions]
    "00000002" "00000003" "aabbcc"  # partition 2, 3 bytes of records
    "00000003" "ffffffff"  # partition 3, null records
)
_FLEXIBLE_REQUEST = (
    "00000029" "0000" "{version}" "00000007"
    "0001" "63" "00"  # client_id "c" (a classic STRING in header v2 too), no header tags
    "02" "78" "ffff" "00007530"  # transactional_id "x" (compact), acks -1, timeout_ms 30000
    "02" "02" "74" "03"  # [topic "t", 2 partitions]: compact counts, count + 1
    "00000002" "04" "aabbcc" "00"  # partition 2, records length 3 + 1, no partition tags
    "00000003" "00" "00"  # partition 3, null records
    "00" "00"  # no topic tags, no body tags
)


@pytest.mark.parametrize(
    ("version", "transactional_id", "frame_hex"),
    [
        (3, None, _CLASSIC_REQUEST.format(version="0003")),
        (8, None, _CLASSIC_REQUEST.format(version="0008")),
        (9, "x", _FLEXIBLE_REQUEST.format(version="0009")),
        (12, "x", _FLEXIBLE_REQUEST.format(version="000c")),
    ],
)
def test_request_golden_bytes(version: int, transactional_id: str | None, frame_hex: str) -> None:
    frame = bytes.fromhex(frame_hex)
    assert produce.encode_produce_request(version, 7, "c", transactional_id, -1, 30000, GOLDEN_PARTITIONS) == [frame]
    assert m.encode_request(m.PRODUCE, version, 7, "c", generic_body(transactional_id, -1, 30000, GOLDEN_PARTITIONS)) == frame


_V3_RESPONSE = (
    "00000001"  # correlation id
    "00000001" "0001" "74" "00000001"  # [topic "t", 1 partition]
    "00000000" "0000" "0000000000000005" "ffffffffffffffff"  # index 0, no error, base offset 5, no append time
    "00000064"  # throttle_time_ms 100
)
_V8_RESPONSE = (
    "00000001" "00000001" "0001" "74" "00000001"
    "00000000" "0057" "ffffffffffffffff" "ffffffffffffffff" "0000000000000007"  # error 87, log_start_offset 7
    "00000001" "00000004" "0003" "626164"  # record_errors: [(4, "bad")]
    "0001" "6d"  # error_message "m"
    "00000064"
)
_V10_RESPONSE = (
    "00000003" "00"  # correlation id, no header tags
    "02" "02" "74" "02"  # [topic "t", 1 partition]
    "00000000" "0006" "ffffffffffffffff" "ffffffffffffffff" "0000000000000000"  # NOT_LEADER_OR_FOLLOWER
    "01" "00"  # no record errors, null error_message
    "01" "00" "09" "00000002" "00000007" "00"  # tag 0, current_leader: leader 2, epoch 7
    "00"  # no topic tags
    "00000000"  # throttle_time_ms
    "01" "00" "0d" "02" "00000002" "0268" "00002384" "00" "00"  # tag 0, node_endpoints: [(2, "h", 9092, null)]
)


@pytest.mark.parametrize(
    ("version", "payload_hex", "expected"),
    [
        (3, _V3_RESPONSE, ProduceResponse(1, [PartitionResponse("t", 0, 0, 5, -1, -1, (), None, -1, -1)], 100, [])),
        (4, _V3_RESPONSE, ProduceResponse(1, [PartitionResponse("t", 0, 0, 5, -1, -1, (), None, -1, -1)], 100, [])),
        (8, _V8_RESPONSE, ProduceResponse(1, [PartitionResponse("t", 0, 87, -1, -1, 7, ((4, "bad"),), "m", -1, -1)], 100, [])),
        (10, _V10_RESPONSE, ProduceResponse(
            3, [PartitionResponse("t", 0, 6, -1, -1, 0, (), None, 2, 7)], 0, [NodeEndpoint(2, "h", 9092, None)]
        )),
        (9, _V10_RESPONSE, ProduceResponse(3, [PartitionResponse("t", 0, 6, -1, -1, 0, (), None, -1, -1)], 0, [])),
    ],
)
def test_response_golden_bytes(version: int, payload_hex: str, expected: ProduceResponse) -> None:
    payload = bytes.fromhex(payload_hex)
    assert assert_same_as_generic(version, payload) == expected
    response = produce.decode_produce_response(version, payload)
    assert type(response) is ProduceResponse and type(response.partitions[0]) is PartitionResponse
    assert all(type(e) is NodeEndpoint for e in response.node_endpoints)
    assert response.partitions[0].topic == "t"


def test_v5_reads_a_log_start_offset_that_v3_and_v4_do_not_have() -> None:
    with pytest.raises(ProtocolError):  # v5 wants 8 more bytes per partition than the v3 bytes hold
        produce.decode_produce_response(5, bytes.fromhex(_V3_RESPONSE))


# ------------------------------------------------------------------ fuzz: never a crash


def _damage(data: st.DataObject, payload: bytes) -> bytes:
    """The payload truncated, cut, grown or overwritten (bytes chosen to break varints and lengths)."""
    damaged = bytearray(payload)
    for _ in range(data.draw(st.integers(1, 3), label="damages")):
        at = data.draw(st.integers(0, len(damaged)), label="at")
        kind = data.draw(st.sampled_from(["truncate", "overwrite", "insert", "delete"]), label="kind")
        noise = data.draw(st.binary(min_size=1, max_size=6) | st.sampled_from([b"\x80", b"\xff" * 5, b"\x00", b"\x7f\xff"]))
        if kind == "truncate":
            del damaged[at:]
        elif kind == "overwrite":
            damaged[at : at + len(noise)] = noise
        elif kind == "insert":
            damaged[at:at] = noise
        else:
            del damaged[at : at + len(noise)]
    return bytes(damaged)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), container=st.sampled_from([bytes, bytearray, memoryview]))
def test_fuzz_damaged_responses_decode_exactly_or_raise_only_protocol_error(
    version: int, data: st.DataObject, container: Any
) -> None:
    """Drawn bodies, damaged: the native decoder raises ProtocolError (and nothing else, never a
    panic's RuntimeError) exactly when the generic codec refuses them, and otherwise agrees."""
    body = data.draw(_response_bodies(version), label="body")
    damaged = _damage(data, m.encode_response(m.PRODUCE, version, 1, body)[4:])
    try:
        correlation_id, generic = m.decode_response(m.PRODUCE, version, damaged)
    except ProtocolError:
        event("refused")
        with pytest.raises(ProtocolError):
            produce.decode_produce_response(version, container(damaged))
        with pytest.raises(ProtocolError):
            produce.read_produce_response(version, container(damaged))
        return
    event("decoded")
    expected = expected_response(version, correlation_id, generic)
    assert produce.decode_produce_response(version, container(damaged)) == expected
    assert produce.read_produce_response(version, container(damaged)).to_response() == expected
