"""The connection state machine, driven by hand: bytes and clock readings in, events out.

No event loop, no socket: every test feeds the machine what a broker would send
(encoded with the generic codec, the broker side of ``messages``) at the times
it chooses, and checks the events. Tokens are plain strings.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aioproducer.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    ProtocolError,
    UnsupportedVersionError,
)
from aioproducer.protocol import messages
from aioproducer.protocol.connection_state import (
    Chunks,
    ClientConnection,
    ConnectionBroken,
    ConnectionState,
    DataToSend,
    Event,
    ProduceAnswered,
    RequestFailed,
    ResponseReceived,
    Throttled,
)
from aioproducer.protocol.produce import ProduceAnswer

OUR_API_VERSIONS = messages.SUPPORTED_VERSIONS[messages.API_VERSIONS][1]
TIMEOUT = 1000
TOPIC_DATA = [("orders", [(0, b"records")])]

Machine = ClientConnection[str]


# ------------------------------------------------------------------ helpers


def header_of(frame: Chunks) -> messages.RequestHeader:
    """What the broker reads from a request frame."""
    data = b"".join(frame)
    assert int.from_bytes(data[:4], "big") == len(data) - 4
    return messages.decode_request(data[4:])[0]


def api_versions_body(produce_max: int = 9, error_code: int = 0) -> dict[str, Any]:
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": messages.PRODUCE, "min_version": 3, "max_version": produce_max},
            {"api_key": messages.METADATA, "min_version": 1, "max_version": 8},
            {"api_key": messages.API_VERSIONS, "min_version": 0, "max_version": OUR_API_VERSIONS},
        ],
    }


def answer(frame: Chunks, body: dict[str, Any]) -> bytes:
    """The response frame a broker sends to ``frame``."""
    header = header_of(frame)
    return messages.encode_response(header.api_key, header.api_version, header.correlation_id, body)


def produce_body(base_offset: int = 0, throttle_time_ms: int = 0) -> dict[str, Any]:
    return {
        "responses": [{"name": "orders", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": base_offset}]}],
        "throttle_time_ms": throttle_time_ms,
    }


def ready(max_in_flight: int = 5, produce_max: int = 9, **kwargs: Any) -> Machine:
    """A machine that negotiated versions at time 0."""
    machine: Machine = ClientConnection(
        client_id="t", address="b:9092", node_id=1, max_in_flight=max_in_flight, request_timeout_ms=TIMEOUT, **kwargs
    )
    body = api_versions_body(produce_max)
    events = machine.receive_data(answer(machine.initiate("connect", 0), body), 0)
    assert outcomes(events) == [("ok", "connect", 0)]
    assert state(machine) is ConnectionState.READY and machine.in_flight_count == 0
    return machine


def state(machine: Machine) -> ConnectionState:
    """The machine's state (a function, so that mypy does not hold on to a narrowed property)."""
    return machine.state


def produce(machine: Machine, token: str, now: float = 0, acks: int = -1) -> Chunks:
    return machine.send_produce(token, TOPIC_DATA, now, acks=acks, timeout_ms=5000)


def outcomes(events: list[Event[str]]) -> list[tuple[str, str, Any]]:
    """Events as (kind, token, detail) for compact assertions.

    The detail of a response is its first base offset (Produce) or its error code (other APIs).
    """
    result: list[tuple[str, str, Any]] = []
    for event in events:
        if isinstance(event, ResponseReceived):
            body = event.body
            result.append(("ok", event.token, body.partitions[0].base_offset if isinstance(body, ProduceAnswer) else body.get("error_code")))
        elif isinstance(event, ProduceAnswered):  # answers read together: one each, as ResponseReceived says
            result += [("ok", token, body.partitions[0].base_offset) for token, body in zip(event.tokens, event.answers)]
        elif isinstance(event, RequestFailed):
            result.append(("failed", event.token, type(event.error)))
        elif isinstance(event, ConnectionBroken):
            result.append(("broken", "", type(event.error)))
        elif isinstance(event, Throttled):
            result.append(("throttled", "", event.throttle_time_ms))
        else:
            result.append(("send", "", header_of(event.data).api_version))
    return result


# -------------------------------------------------------------- negotiation


def test_negotiation_starts_at_our_highest_api_versions_and_ends_ready() -> None:
    machine: Machine = ClientConnection(client_id="t", client_software_version="1.2")
    assert state(machine) is ConnectionState.NEW
    frame = machine.initiate("connect", 0)
    header, body = messages.decode_request(b"".join(frame)[4:])
    assert (header.api_key, header.api_version, header.correlation_id) == (messages.API_VERSIONS, OUR_API_VERSIONS, 0)
    assert body["client_software_version"] == "1.2"
    assert state(machine) is ConnectionState.NEGOTIATING and machine.in_flight_count == 1
    with pytest.raises(KafkaConnectionError):
        produce(machine, "too early")  # nothing but negotiation before READY
    machine.receive_data(answer(frame, api_versions_body(produce_max=7)), 5)
    assert state(machine) is ConnectionState.READY
    assert machine.api_version(messages.PRODUCE) == 7
    assert machine.broker_api_versions[messages.METADATA] == (1, 8)
    with pytest.raises(RuntimeError):
        machine.initiate("again", 6)


def test_api_versions_falls_back_to_v0_when_the_broker_rejects_our_version() -> None:
    machine: Machine = ClientConnection(client_id="t")
    first = machine.initiate("connect", 0)
    # KIP-511: an old broker answers in v0 format, without ranges.
    rejection = messages.encode_response(
        messages.API_VERSIONS, 0, header_of(first).correlation_id,
        {"error_code": messages.UNSUPPORTED_VERSION_ERROR_CODE, "api_keys": []},
    )
    events = machine.receive_data(rejection, 10)
    assert outcomes(events) == [("send", "", 0)]  # the retry, at v0
    retry = events[0]
    assert isinstance(retry, DataToSend)
    assert header_of(retry.data).correlation_id == 1
    assert state(machine) is ConnectionState.NEGOTIATING and machine.in_flight_count == 1
    assert machine.next_deadline == 10 + 1000 * 30  # counted from the retry (default timeout 30 s)
    events = machine.receive_data(answer(retry.data, api_versions_body()), 20)
    assert outcomes(events) == [("ok", "connect", 0)]
    assert state(machine) is ConnectionState.READY


def test_api_versions_retries_at_the_highest_version_the_broker_offers() -> None:
    machine: Machine = ClientConnection(client_id="t")
    first = machine.initiate("connect", 0)
    body = {"error_code": messages.UNSUPPORTED_VERSION_ERROR_CODE,
            "api_keys": [{"api_key": messages.API_VERSIONS, "min_version": 0, "max_version": 2}]}
    events = machine.receive_data(messages.encode_response(messages.API_VERSIONS, 0, header_of(first).correlation_id, body), 1)
    assert outcomes(events) == [("send", "", 2)]


def test_a_rejection_in_the_requested_version_s_format_also_falls_back() -> None:
    """librdkafka's mock answers UNSUPPORTED_VERSION in a body that decodes neither as v0 nor as v3."""
    machine: Machine = ClientConnection(client_id="t")
    first = machine.initiate("connect", 0)
    correlation_id = header_of(first).correlation_id.to_bytes(4, "big")
    payload = correlation_id + messages.UNSUPPORTED_VERSION_ERROR_CODE.to_bytes(2, "big") + b"\x7f"  # then garbage
    events = machine.receive_data(len(payload).to_bytes(4, "big") + payload, 1)
    assert outcomes(events) == [("send", "", 0)]


def test_negotiation_refused_otherwise_is_unsupported_version_and_breaks() -> None:
    machine: Machine = ClientConnection(client_id="t", address="b:1", node_id=3)
    frame = machine.initiate("connect", 0)
    events = machine.receive_data(answer(frame, api_versions_body(error_code=2)), 1)  # not UNSUPPORTED_VERSION (35)
    assert outcomes(events) == [("failed", "connect", UnsupportedVersionError), ("broken", "", UnsupportedVersionError)]
    assert "error code 2" in str(machine.close_reason)
    assert state(machine) is ConnectionState.CLOSED and machine.in_flight_count == 0


def test_no_common_version_names_both_ranges() -> None:
    machine = ready(produce_max=2)  # a broker older than Produce v3
    with pytest.raises(UnsupportedVersionError, match="v3-v12.*the broker v3-v2"):
        produce(machine, "p")
    assert machine.in_flight_count == 0


# ---------------------------------------------------------------- pipelining


def test_pipelined_requests_are_answered_in_order() -> None:
    machine = ready()
    frames = [produce(machine, f"p{i}", now=i) for i in range(3)]
    metadata = machine.send_request("m", messages.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False}, 3)
    assert [header_of(f).correlation_id for f in [*frames, metadata]] == [1, 2, 3, 4]
    assert machine.in_flight_count == 4 and machine.max_in_flight_observed == 4
    metadata_body: dict[str, Any] = {"brokers": [], "topics": [], "cluster_id": None, "controller_id": 1}
    data = b"".join(answer(f, produce_body(base_offset=10 * i)) for i, f in enumerate(frames)) + answer(metadata, metadata_body)
    events = machine.receive_data(data, 4)  # every answer in one read
    assert outcomes(events) == [("ok", "p0", 0), ("ok", "p1", 10), ("ok", "p2", 20), ("ok", "m", None)]
    assert machine.in_flight_count == 0 and machine.next_deadline is None


@pytest.mark.parametrize("piece", [1, 3, 7, 1000])
def test_frames_split_and_joined_across_reads(piece: int) -> None:
    machine = ready()
    frames = [produce(machine, f"p{i}") for i in range(3)]
    data = b"".join(answer(f, produce_body(base_offset=i)) for i, f in enumerate(frames))
    events: list[Event[str]] = []
    for start in range(0, len(data), piece):
        events += machine.receive_data(data[start : start + piece], 1)
    assert outcomes(events) == [("ok", "p0", 0), ("ok", "p1", 1), ("ok", "p2", 2)]


@given(count=st.integers(min_value=1, max_value=5), pieces=st.lists(st.integers(min_value=1, max_value=120), max_size=40))
def test_any_split_of_the_stream_gives_the_same_events(count: int, pieces: list[int]) -> None:
    machine = ready()
    frames = [produce(machine, f"p{i}") for i in range(count)]
    data = b"".join(answer(f, produce_body(base_offset=i)) for i, f in enumerate(frames))
    events: list[Event[str]] = []
    start = 0
    for size in pieces:  # reads of these sizes, then the rest in one
        events += machine.receive_data(data[start : start + size], 1)
        start += size
        if start >= len(data):
            break
    if start < len(data):
        events += machine.receive_data(data[start:], 1)
    assert outcomes(events) == [("ok", f"p{i}", i) for i in range(count)]
    assert machine.in_flight_count == 0 and state(machine) is ConnectionState.READY


def test_a_frame_is_only_handled_once_whole() -> None:
    machine = ready()
    frame = answer(produce(machine, "p"), produce_body(base_offset=7))
    assert machine.receive_data(frame[:2], 1) == []  # half a size prefix
    assert machine.receive_data(frame[2:9], 1) == []  # the prefix and part of the body
    assert machine.receive_data(frame[9:-1], 1) == []
    assert outcomes(machine.receive_data(frame[-1:], 1)) == [("ok", "p", 7)]


def test_a_large_response_in_many_small_reads_is_reassembled() -> None:
    machine = ready()
    frame = machine.send_request("m", messages.METADATA, 8, {"topics": None, "allow_auto_topic_creation": False}, 0)
    topics = [{"error_code": 0, "name": f"topic-{i}", "is_internal": False, "partitions": []} for i in range(3000)]
    data = answer(frame, {"brokers": [], "topics": topics, "cluster_id": None, "controller_id": 1})
    assert len(data) > 50_000
    events: list[Event[str]] = []
    for start in range(0, len(data), 1000):
        events += machine.receive_data(data[start : start + 1000], 1)
    assert len(events) == 1 and isinstance(events[0], ResponseReceived)
    assert len(events[0].body["topics"]) == 3000


# ------------------------------------------------------------ correlation ids


def test_an_answer_out_of_order_fails_the_head_and_breaks_the_connection() -> None:
    machine = ready()
    first, second = produce(machine, "first"), produce(machine, "second")
    events = machine.receive_data(answer(second, produce_body()), 1)
    assert outcomes(events) == [
        ("failed", "first", ProtocolError),
        ("failed", "second", KafkaConnectionError),
        ("broken", "", KafkaConnectionError),
    ]
    head_error = events[0]
    assert isinstance(head_error, RequestFailed) and "out of step" in str(head_error.error)
    assert isinstance(machine.close_reason, KafkaConnectionError)
    assert isinstance(machine.close_reason.__cause__, ProtocolError)
    assert state(machine) is ConnectionState.CLOSED and machine.in_flight_count == 0
    assert machine.receive_data(answer(first, produce_body()), 2) == []  # nothing is read after the break


def test_an_answer_with_nothing_in_flight_breaks_the_connection() -> None:
    machine = ready()
    unsolicited = messages.encode_response(messages.API_VERSIONS, 0, 77, api_versions_body())
    events = machine.receive_data(unsolicited, 1)
    assert outcomes(events) == [("broken", "", KafkaConnectionError)]
    assert "correlation id 77" in str(machine.close_reason) and "no request in flight" in str(machine.close_reason)
    with pytest.raises(KafkaConnectionError, match="is closed: .*no request in flight"):
        produce(machine, "late")


def test_a_malformed_body_fails_its_request_with_protocol_error() -> None:
    machine = ready()
    first = produce(machine, "first")
    produce(machine, "second")
    correlation_id = header_of(first).correlation_id.to_bytes(4, "big")
    payload = correlation_id + b"\x00\x05"  # a body cut short
    events = machine.receive_data(len(payload).to_bytes(4, "big") + payload, 1)
    assert outcomes(events) == [
        ("failed", "first", ProtocolError), ("failed", "second", KafkaConnectionError), ("broken", "", KafkaConnectionError)
    ]


# ------------------------------------------------------------------- timeouts


def test_the_oldest_request_times_out_at_its_deadline_and_breaks_the_connection() -> None:
    machine = ready()
    produce(machine, "first", now=100)
    produce(machine, "second", now=200)
    assert machine.next_deadline == 100 + TIMEOUT
    assert machine.check_timeouts(100 + TIMEOUT - 1) == []
    events = machine.check_timeouts(100 + TIMEOUT)
    assert outcomes(events) == [
        ("failed", "first", KafkaTimeoutError),
        ("failed", "second", KafkaConnectionError),
        ("broken", "", KafkaConnectionError),
    ]
    timeout = events[0]
    assert isinstance(timeout, RequestFailed)
    assert f"request.timeout.ms={TIMEOUT}" in str(timeout.error) and "Produce" in str(timeout.error)
    assert state(machine) is ConnectionState.CLOSED and machine.next_deadline is None
    assert machine.check_timeouts(10_000) == []


def test_each_request_has_its_own_deadline() -> None:
    machine = ready()
    first = produce(machine, "first", now=0)
    produce(machine, "second", now=600)
    assert outcomes(machine.receive_data(answer(first, produce_body()), 900)) == [("ok", "first", 0)]
    assert machine.next_deadline == 600 + TIMEOUT
    assert machine.check_timeouts(1200) == []  # past the first request's deadline, not the second's
    assert outcomes(machine.check_timeouts(1600))[0] == ("failed", "second", KafkaTimeoutError)


def test_negotiation_times_out_too() -> None:
    machine: Machine = ClientConnection(client_id="t", request_timeout_ms=200)
    machine.initiate("connect", 50)
    assert machine.next_deadline == 250
    assert outcomes(machine.check_timeouts(250)) == [("failed", "connect", KafkaTimeoutError), ("broken", "", KafkaConnectionError)]


# ------------------------------------------------------------- broken frames


@pytest.mark.parametrize(
    ("data", "hint"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "speaks HTTP"),
        (b"<html><body>", "speaks HTTP"),
        (b"\x15\x03\x03\x00\x02\x02\x32", "TLS alert"),
        (b"\x16\x03\x03\x00\x02\x02\x32", "TLS handshake"),
        (b"\xff\xff\xff\xff", "does not speak the Kafka protocol"),  # a negative size
        (b"\x00\x00\x00\x02\x00\x00", "does not speak the Kafka protocol"),  # shorter than a correlation id
    ],
    ids=["http", "html", "tls-alert", "tls-handshake", "negative", "too-short"],
)
def test_an_impossible_frame_size_names_the_peer(data: bytes, hint: str) -> None:
    machine = ready()
    produce(machine, "p")
    events = machine.receive_data(data, 1)
    assert outcomes(events) == [("failed", "p", ProtocolError), ("broken", "", KafkaConnectionError)]
    failure = events[0]
    assert isinstance(failure, RequestFailed)
    assert "impossible size" in str(failure.error) and hint in str(failure.error)


def test_a_frame_larger_than_the_limit_is_refused_before_it_is_read() -> None:
    machine = ready(max_response_size=100)
    produce(machine, "p")
    events = machine.receive_data((101).to_bytes(4, "big") + b"\x00" * 10, 1)  # not waiting for the other 91 bytes
    assert outcomes(events)[0] == ("failed", "p", ProtocolError)
    assert "impossible size 101" in str(machine.close_reason)


def test_garbage_during_negotiation_fails_it_with_protocol_error() -> None:
    machine: Machine = ClientConnection(client_id="t")
    machine.initiate("connect", 0)
    events = machine.receive_data(b"HTTP/1.1 400 Bad Request\r\n\r\n", 1)
    assert outcomes(events) == [("failed", "connect", ProtocolError), ("broken", "", KafkaConnectionError)]


@pytest.mark.parametrize(("partial", "where"), [(b"", "between frames"), (b"\x00\x00\x00\x40\x00", "mid-frame")])
def test_end_of_stream_fails_everything_and_says_where(partial: bytes, where: str) -> None:
    machine = ready()
    produce(machine, "p")
    if partial:
        assert machine.receive_data(partial, 1) == []
    events = machine.receive_data(b"", 2)
    assert outcomes(events) == [("failed", "p", KafkaConnectionError), ("broken", "", KafkaConnectionError)]
    assert f"closed by the broker {where}" in str(machine.close_reason)


# ---------------------------------------------------------------------- acks=0


def test_acks0_holds_its_slot_until_written_and_expects_no_answer() -> None:
    machine = ready()
    produce(machine, "fire-and-forget", acks=0)
    assert machine.in_flight_count == 1 and machine.next_deadline == TIMEOUT  # until written
    assert machine.request_written("fire-and-forget")
    assert machine.in_flight_count == 0 and machine.next_deadline is None
    assert not machine.request_written("fire-and-forget")  # once
    later = produce(machine, "later")
    assert outcomes(machine.receive_data(answer(later, produce_body(base_offset=3)), 1)) == [("ok", "later", 3)]


def test_an_answer_to_acks0_is_dropped_and_the_stream_stays_in_step() -> None:
    """librdkafka's mock broker answers acks=0 Produce requests; Kafka never does."""
    machine = ready()
    unanswered = produce(machine, "acks0", acks=0)
    machine.request_written("acks0")
    later = produce(machine, "later")
    data = answer(unanswered, produce_body()) + answer(later, produce_body(base_offset=5))
    assert outcomes(machine.receive_data(data, 1)) == [("ok", "later", 5)]
    assert state(machine) is ConnectionState.READY


def test_an_acks0_request_not_written_in_time_times_out() -> None:
    machine = ready()
    produce(machine, "stuck", now=10, acks=0)
    events = machine.check_timeouts(10 + TIMEOUT)
    assert outcomes(events) == [("failed", "stuck", KafkaTimeoutError), ("broken", "", KafkaConnectionError)]
    assert "could not be written within request.timeout.ms" in str(machine.close_reason)


def test_acks0_through_the_generic_codec_is_tracked_the_same_way() -> None:
    machine = ready()
    body = {"transactional_id": None, "acks": 0, "timeout_ms": 5000,
            "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": b"r"}]}]}
    machine.send_request("acks0", messages.PRODUCE, 9, body, 0, expect_response=False)
    assert machine.in_flight_count == 1 and machine.request_written("acks0") and machine.in_flight_count == 0


# ----------------------------------------------------------------------- slots


def test_slots_bound_the_requests_in_flight() -> None:
    machine = ready(max_in_flight=2)
    first = produce(machine, "a")
    produce(machine, "b")
    assert not machine.has_free_slot
    with pytest.raises(RuntimeError, match="no in-flight slot"):
        produce(machine, "c")
    with pytest.raises(RuntimeError):
        machine.acquire_slot()
    assert machine.in_flight_count == 2  # the refused request took nothing
    machine.receive_data(answer(first, produce_body()), 1)
    assert machine.has_free_slot and machine.in_flight_count == 1
    assert machine.max_in_flight_observed == 2


def test_a_reserved_slot_is_used_by_the_next_request_or_given_back() -> None:
    machine = ready(max_in_flight=1)
    machine.acquire_slot()  # for a waiter in line
    assert not machine.has_free_slot
    machine.send_produce("waiter", TOPIC_DATA, 0, acks=1, timeout_ms=5000, reserved=True)
    assert machine.in_flight_count == 1  # the request holds the reserved slot, not a second one
    machine.close(KafkaConnectionError("closed"))
    assert machine.in_flight_count == 0
    fresh = ready(max_in_flight=1)
    fresh.acquire_slot()
    fresh.release_slot()
    assert fresh.in_flight_count == 0
    with pytest.raises(RuntimeError):
        fresh.release_slot()


def test_a_body_that_does_not_encode_takes_nothing() -> None:
    machine = ready()
    with pytest.raises(ValueError):
        machine.send_request("bad", messages.METADATA, 8, {"topics": 5}, 0)
    with pytest.raises(ValueError):
        machine.send_produce("bad", [("orders", [(2**40, b"r")])], 0, acks=1, timeout_ms=5000)
    assert machine.in_flight_count == 0
    assert header_of(produce(machine, "good")).correlation_id == 1  # no correlation id used up


def test_try_send_produce_takes_nothing_when_the_connection_cannot_take_the_request_now() -> None:
    """The sender's hot path: None (no slot, no correlation id, no deadline taken) where send_produce raises."""
    def attempt(machine: Machine, acks: int = 1) -> Chunks | None:
        return machine.try_send_produce("t", TOPIC_DATA, 0, acks, 5000, None, False)

    full = ready(max_in_flight=1)
    produce(full, "first")
    assert attempt(full) is None and full.in_flight_count == 1 and full.next_deadline == TIMEOUT
    with pytest.raises(RuntimeError):
        produce(full, "second")
    assert attempt(ready(), acks=0) is None  # acks=0 has no answer to free the slot: produce() instead
    fresh: Machine = ClientConnection(client_id="t", address="b:9092", node_id=1, max_in_flight=5, request_timeout_ms=TIMEOUT)
    assert attempt(fresh) is None and fresh.in_flight_count == 0  # not READY
    closed = ready()
    closed.close(KafkaConnectionError("gone"))
    assert attempt(closed) is None and closed.in_flight_count == 0
    with pytest.raises(KafkaConnectionError):
        produce(closed, "late")
    machine = ready()
    assert attempt(machine) is not None and attempt(machine) is not None
    assert machine.in_flight_count == 2
    assert header_of(produce(machine, "third")).correlation_id == 3  # each took one correlation id, in order


# -------------------------------------------------------------------- throttle


@pytest.mark.parametrize(
    ("produce_max", "expected"),
    [(9, [("throttled", "", 300), ("ok", "p", 0)]), (6, [("throttled", "", 300), ("ok", "p", 0)]), (5, [("ok", "p", 0)])],
)
def test_produce_throttle_is_reported_from_v6_before_the_response(produce_max: int, expected: list[Any]) -> None:
    machine = ready(produce_max=produce_max)
    frame = produce(machine, "p")
    assert outcomes(machine.receive_data(answer(frame, produce_body(throttle_time_ms=300)), 1)) == expected


def test_the_answers_of_one_read_come_out_in_order_a_throttle_among_them_and_the_tail_kept() -> None:
    """Three answers and the start of a fourth in one read: the native path takes the first, stops
    at the throttled one (the general path reports its throttle before it), takes the third, and
    keeps the fourth's first bytes until the rest comes."""
    machine = ready()
    frames = [produce(machine, token) for token in "abcd"]
    read = b"".join(
        answer(frame, produce_body(base_offset=offset, throttle_time_ms=300 if token == "b" else 0))
        for frame, token, offset in zip(frames, "abc", (10, 20, 30))
    )
    last = answer(frames[3], produce_body(base_offset=40))
    assert outcomes(machine.receive_data(read + last[:7], 1)) == [
        ("ok", "a", 10), ("throttled", "", 300), ("ok", "b", 20), ("ok", "c", 30),
    ]
    assert machine.in_flight_count == 1 and machine.free_slots == 4
    assert outcomes(machine.receive_data(last[7:], 2)) == [("ok", "d", 40)]
    assert machine.in_flight_count == 0 and machine.free_slots == 5


def test_the_answers_a_read_holds_in_a_row_are_one_event_in_the_order_sent() -> None:
    """Three Produce answers in one read: one ``ProduceAnswered``, its tokens and answers paired in order."""
    machine = ready()
    frames = [produce(machine, token) for token in "abc"]
    read = b"".join(answer(frame, produce_body(base_offset=offset)) for frame, offset in zip(frames, (10, 20, 30)))
    events = machine.receive_data(read, 1)
    assert len(events) == 1 and isinstance(events[0], ProduceAnswered)
    assert events[0].tokens == ["a", "b", "c"]
    assert [body.partitions[0].base_offset for body in events[0].answers] == [10, 20, 30]
    assert machine.in_flight_count == 0 and machine.free_slots == 5


# ---------------------------------------------------------------------- close


def test_close_fails_everything_once_and_ignores_what_comes_after() -> None:
    machine = ready()
    frame = produce(machine, "a")
    produce(machine, "b", acks=0)
    events = machine.close(KafkaConnectionError("closed by the owner"))
    assert outcomes(events) == [("failed", "a", KafkaConnectionError), ("failed", "b", KafkaConnectionError)]
    assert state(machine) is ConnectionState.CLOSED and machine.in_flight_count == 0
    assert str(machine.close_reason) == "closed by the owner"
    assert machine.close(KafkaConnectionError("again")) == []
    assert machine.receive_data(answer(frame, produce_body()), 1) == []
    assert not machine.request_written("b")


def test_a_connection_closed_before_it_started_refuses_to_start() -> None:
    machine: Machine = ClientConnection(client_id="t")
    assert machine.close(KafkaConnectionError("closed")) == []
    with pytest.raises(RuntimeError):
        machine.initiate("connect", 0)


def test_never_answered_is_a_request_sent_past_the_handshake_and_no_answer_yet() -> None:
    """What the client backs off for when the connection is lost: the handshake's answers and acks=0 do not count."""
    machine = ready()
    assert not machine.never_answered  # negotiated: answers, but to the machine's own requests
    produce(machine, "fire-and-forget", acks=0)
    assert not machine.never_answered  # acks=0 expects nothing
    frame = produce(machine, "p1")
    assert machine.never_answered
    machine.receive_data(answer(frame, produce_body()), 1)
    assert not machine.never_answered
    other = ready()
    other.send_request("meta", messages.METADATA, 1, {"topics": []}, 0)
    assert other.never_answered
