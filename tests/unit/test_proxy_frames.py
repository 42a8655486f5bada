"""The fault proxy's sans-I/O part: frames cut from arbitrary chunks, responses matched to requests.

Requests are encoded by aioproducer's generic codec where it can (real frames,
every Produce version aioproducer speaks) and by hand where the codec cannot
(Produce v2, a header with tagged fields, garbage), so the acks parser is
checked against layouts written independently of it.
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from aioproducer.protocol import messages
from aioproducer.testing.proxy_frames import (
    FrameMatcher,
    FrameSplitter,
    MalformedFrameError,
    produce_acks,
)

PRODUCE, METADATA, API_VERSIONS = 0, 3, 18


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def request(api_key: int, correlation_id: int, version: int = 1, rest: bytes = b"\x00\x01c") -> bytes:
    """A request frame: header v1 fields by hand, then ``rest`` (by default client id "c")."""
    return frame(struct.pack(">hhi", api_key, version, correlation_id) + rest)


def response(correlation_id: int, body: bytes = b"body") -> bytes:
    return frame(struct.pack(">i", correlation_id) + body)


def produce(acks: int, correlation_id: int, version: int) -> bytes:
    body: dict[str, Any] = {"transactional_id": None, "acks": acks, "timeout_ms": 1000, "topic_data": []}
    return messages.encode_request(PRODUCE, version, correlation_id, "client", body)


def cut(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` split at the given offsets (sorted, deduplicated, clamped): chunk boundaries as TCP picks them."""
    points = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)])]


# ----------------------------------------------------------------- splitting


@given(
    payloads=st.lists(st.binary(max_size=300), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=30),
)
def test_frames_come_out_whole_whatever_the_chunk_boundaries(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    splitter = FrameSplitter()
    out: list[bytes] = []
    for chunk in cut(stream, cuts):
        out += splitter.feed(chunk)
    assert out == [frame(p) for p in payloads]
    assert splitter.buffered == 0


def test_an_incomplete_frame_waits_for_its_last_byte() -> None:
    splitter = FrameSplitter()
    whole = frame(b"abcdef")
    assert splitter.feed(whole[:3]) == []  # not even the size yet
    assert splitter.feed(whole[3:-1]) == []
    assert splitter.buffered == len(whole) - 1
    assert splitter.feed(whole[-1:] + whole[:2]) == [whole]
    assert splitter.buffered == 2


def test_one_chunk_can_carry_several_frames_and_a_zero_length_one() -> None:
    assert FrameSplitter().feed(frame(b"a") + frame(b"") + frame(b"bc")) == [frame(b"a"), frame(b""), frame(b"bc")]


@pytest.mark.parametrize("size", [-1, -(2**31), 101, 2**31 - 1])
def test_impossible_sizes_raise_and_the_stream_stays_broken(size: int) -> None:
    splitter = FrameSplitter(max_frame_size=100)
    with pytest.raises(MalformedFrameError, match=f"frame size {size} "):
        splitter.feed(frame(b"ok") + struct.pack(">i", size))
    with pytest.raises(MalformedFrameError):
        splitter.feed(frame(b"fine again?"))


def test_the_largest_allowed_frame_passes() -> None:
    assert FrameSplitter(max_frame_size=5).feed(frame(b"12345")) == [frame(b"12345")]


# ------------------------------------------------------------------ matching


def test_responses_are_labelled_with_their_requests_api_key_by_correlation_id() -> None:
    m = FrameMatcher()
    requests = m.from_client(request(METADATA, 7) + request(PRODUCE, 8, version=3, rest=b"\xff\xff\xff\xff\x00\x01"))
    assert [(r.api_key, r.correlation_id, r.api_version) for r in requests] == [(METADATA, 7, 1), (PRODUCE, 8, 3)]
    assert m.pending == {7: METADATA, 8: PRODUCE}
    # Answered out of order (a broker never does, but matching must not rely on it).
    [second, first] = m.from_broker(response(8) + response(7))
    assert (second.correlation_id, second.api_key) == (8, PRODUCE)
    assert (first.correlation_id, first.api_key) == (7, METADATA)
    assert second.data == response(8)
    assert m.pending == {}


def test_a_response_nobody_asked_for_has_no_api_key() -> None:
    m = FrameMatcher()
    m.from_client(request(METADATA, 1))
    [stray] = m.from_broker(response(99))
    assert stray.api_key is None
    assert m.pending == {1: METADATA}
    [again] = m.from_broker(response(1) + response(1))[1:]  # the second answer to 1 is a stray too
    assert again.api_key is None


@pytest.mark.parametrize("version", range(3, 12))
def test_acks_0_produce_expects_no_response_and_leaves_nothing_pending(version: int) -> None:
    m = FrameMatcher()
    frames = m.from_client(produce(0, 1, version) + produce(-1, 2, version) + produce(1, 3, version))
    assert [f.expects_response for f in frames] == [False, True, True]
    assert m.pending == {2: PRODUCE, 3: PRODUCE}
    # The next answer is matched to request 2, not to the unanswered request 1.
    [answer] = m.from_broker(response(2))
    assert answer.api_key == PRODUCE
    assert m.pending == {3: PRODUCE}


def test_acks_parsed_from_hand_written_layouts() -> None:
    # Produce v2: header v1 (client id "ab"), no transactional_id, acks 0.
    assert produce_acks(struct.pack(">hhih", PRODUCE, 2, 5, 2) + b"ab" + struct.pack(">hi", 0, 100)) == 0
    # Produce v3: null client id, transactional_id "tx", acks -1.
    assert produce_acks(struct.pack(">hhih", PRODUCE, 3, 5, -1) + struct.pack(">h", 2) + b"tx" + b"\xff\xff") == -1
    # Produce v9: header v2 with one tagged field (tag 0, 3 bytes), compact transactional_id "tx", acks 1.
    v9 = struct.pack(">hhih", PRODUCE, 9, 5, 1) + b"c" + b"\x01\x00\x03xyz" + b"\x03tx" + struct.pack(">h", 1)
    assert produce_acks(v9) == 1
    # Truncated before acks: unknown, so the request is assumed to be answered.
    assert produce_acks(v9[:-1]) is None
    assert FrameMatcher().from_client(frame(v9[:-1]))[0].expects_response


def test_matching_survives_arbitrary_chunking_of_both_directions() -> None:
    requests = produce(0, 1, 9) + request(METADATA, 2) + produce(-1, 3, 7) + request(API_VERSIONS, 4)
    responses = response(2) + response(3, b"x" * 50) + response(4)
    m = FrameMatcher()
    got = []
    for chunk in cut(requests, list(range(0, len(requests), 3))):
        got += m.from_client(chunk)
    labelled = []
    for chunk in cut(responses, list(range(0, len(responses), 5))):
        labelled += [(r.correlation_id, r.api_key) for r in m.from_broker(chunk)]
    assert b"".join(r.data for r in got) == requests
    assert labelled == [(2, METADATA), (3, PRODUCE), (4, API_VERSIONS)]


def test_frames_too_short_for_their_header_are_malformed() -> None:
    with pytest.raises(MalformedFrameError, match="request frame of 7 bytes"):
        FrameMatcher().from_client(frame(b"\x00" * 7))
    with pytest.raises(MalformedFrameError, match="response frame of 3 bytes"):
        FrameMatcher().from_broker(frame(b"\x00" * 3))


def test_a_malformed_size_in_one_direction_raises_from_that_direction() -> None:
    m = FrameMatcher(max_frame_size=1000)
    with pytest.raises(MalformedFrameError):
        m.from_broker(struct.pack(">i", 1001))
    assert [r.correlation_id for r in m.from_client(request(METADATA, 1))] == [1]
