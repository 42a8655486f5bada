"""Kafka framing for the fault proxy, without I/O: bytes in, whole frames out.

Theory of operation. A Kafka connection is two byte streams, each a sequence
of frames: an int32 big-endian size, then that many bytes of payload. TCP
delivers those bytes in chunks that ignore frame boundaries, so
:class:`FrameSplitter` buffers a stream's bytes and hands out each frame once
all of it has arrived (size prefix included, so the frames joined together are
the stream byte for byte). A size that is negative or larger than
``max_frame_size`` cannot come from a Kafka peer; waiting for that many bytes
would hang forever, so it raises :class:`MalformedFrameError` instead.

:class:`FrameMatcher` sits on both streams of one connection. A request
payload starts with ``api_key`` int16, ``api_version`` int16,
``correlation_id`` int32; a response payload starts with the
``correlation_id`` of its request. The matcher remembers ``correlation_id ->
api_key`` of every request that expects an answer and pops it when the answer
arrives, so each response is labelled with the API it answers (the fault
proxy swallows "the next Produce response" this way). Matching is by
correlation id, never by counting: a Produce request with ``acks=0`` gets no
response at all, and the matcher knows so by reading its ``acks`` field
(after the request header's client id and, from Produce v3, the
transactional id), so such a request leaves nothing behind to mismatch later
answers or leak.

Everything here is synchronous and pure, owned by whoever feeds it (the fault
proxy keeps one matcher per proxied connection, on its event loop thread), so
it is tested with plain bytes and no sockets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aioproducer.errors import ProtocolError
from aioproducer.protocol.primitives import Reader

__all__ = [
    "MAX_FRAME_SIZE",
    "FrameMatcher",
    "FrameSplitter",
    "MalformedFrameError",
    "RequestFrame",
    "ResponseFrame",
    "produce_acks",
]

#: Largest frame accepted: the broker's default ``socket.request.max.bytes``
#: (100 MiB), also aioproducer's own limit for responses.
MAX_FRAME_SIZE: Final = 100 * 1024 * 1024

_SIZE_PREFIX: Final = 4
_REQUEST_HEADER_MIN: Final = 8  # api_key, api_version, correlation_id
_RESPONSE_HEADER_MIN: Final = 4  # correlation_id
_PRODUCE: Final = 0
_PRODUCE_FIRST_TRANSACTIONAL_ID: Final = 3  # Produce v3 added transactional_id before acks
_PRODUCE_FIRST_FLEXIBLE: Final = 9  # Produce v9+: header v2, compact strings (KIP-482)


class MalformedFrameError(ValueError):
    """The bytes are not a Kafka frame stream: impossible size, or a payload too short for its header."""


class FrameSplitter:
    """Cut one byte stream into whole frames, each with its 4-byte size prefix.

    The buffer holds at most one incomplete frame between calls. After a
    :class:`MalformedFrameError` the stream has no frame boundaries left to
    trust, so every later :meth:`feed` raises again.
    """

    __slots__ = ("_buffer", "_max_frame_size", "_broken")

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self._buffer = bytearray()
        self._max_frame_size = max_frame_size
        self._broken: MalformedFrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received that do not complete a frame yet."""
        return len(self._buffer)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add ``data``; return the frames it completes, oldest first (possibly none)."""
        if self._broken is not None:
            raise self._broken
        buffer = self._buffer
        buffer += data
        frames: list[bytes] = []
        pos = 0
        while len(buffer) - pos >= _SIZE_PREFIX:
            size = int.from_bytes(buffer[pos : pos + _SIZE_PREFIX], "big", signed=True)
            if not 0 <= size <= self._max_frame_size:
                self._broken = MalformedFrameError(
                    f"frame size {size} at stream offset +{pos} is outside 0..{self._max_frame_size}"
                )
                raise self._broken
            end = pos + _SIZE_PREFIX + size
            if end > len(buffer):
                break
            frames.append(bytes(buffer[pos:end]))
            pos = end
        del buffer[:pos]
        return frames


@dataclass(frozen=True, slots=True)
class RequestFrame:
    """A whole request frame (``data``, size prefix included) and its header fields."""

    data: bytes
    api_key: int
    api_version: int
    correlation_id: int
    #: False only for Produce with ``acks=0``, which the broker never answers.
    expects_response: bool


@dataclass(frozen=True, slots=True)
class ResponseFrame:
    """A whole response frame and the API key of the request it answers.

    ``api_key`` is None when no pending request had this correlation id
    (a broker bug, or a response to a request the matcher never saw).
    """

    data: bytes
    correlation_id: int
    api_key: int | None


def _int(data: bytes, start: int, length: int) -> int:
    return int.from_bytes(data[start : start + length], "big", signed=True)


def produce_acks(payload: bytes | bytearray | memoryview) -> int | None:
    """The ``acks`` field of a Produce request payload (no size prefix); None if truncated.

    Layout (Kafka protocol guide): request header v1 (v2 from Produce v9:
    plus tagged fields), then from v3 ``transactional_id`` (a nullable string,
    compact from v9), then ``acks`` int16.
    """
    r = Reader(payload)
    try:
        r.int16()  # api_key
        version = r.int16()
        r.int32()  # correlation_id
        r.nullable_string()  # client_id: never compact, even in header v2
        flexible = version >= _PRODUCE_FIRST_FLEXIBLE
        if flexible:
            r.skip_tagged_fields()
        if version >= _PRODUCE_FIRST_TRANSACTIONAL_ID:
            if flexible:
                r.compact_nullable_string()
            else:
                r.nullable_string()
        return r.int16()
    except ProtocolError:
        return None


class FrameMatcher:
    """Both directions of one Kafka connection: frames out, responses matched to requests.

    Feed the client's bytes to :meth:`from_client` and the broker's to
    :meth:`from_broker`, each in the order they arrived. A response arriving
    for a request that has not been seen yet cannot happen on a real
    connection (the broker answers what it read), so the caller must feed a
    request before its response: the fault proxy does, since it reads a
    request before forwarding it.
    """

    __slots__ = ("_requests", "_responses", "_pending")

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self._requests = FrameSplitter(max_frame_size)
        self._responses = FrameSplitter(max_frame_size)
        #: correlation id -> api key of requests forwarded and not answered yet.
        self._pending: dict[int, int] = {}

    @property
    def pending(self) -> dict[int, int]:
        """``correlation_id -> api_key`` of requests still awaiting a response (a copy)."""
        return dict(self._pending)

    def from_client(self, data: bytes | bytearray | memoryview) -> list[RequestFrame]:
        """Split the client's bytes into requests and remember those that will be answered."""
        out: list[RequestFrame] = []
        for frame in self._requests.feed(data):
            if len(frame) < _SIZE_PREFIX + _REQUEST_HEADER_MIN:
                raise MalformedFrameError(f"request frame of {len(frame) - 4} bytes has no header")
            api_key = _int(frame, 4, 2)
            correlation_id = _int(frame, 8, 4)
            expects = api_key != _PRODUCE or produce_acks(memoryview(frame)[4:]) != 0
            if expects:
                self._pending[correlation_id] = api_key
            out.append(RequestFrame(frame, api_key, _int(frame, 6, 2), correlation_id, expects))
        return out

    def from_broker(self, data: bytes | bytearray | memoryview) -> list[ResponseFrame]:
        """Split the broker's bytes into responses, each labelled with its request's API key."""
        out: list[ResponseFrame] = []
        for frame in self._responses.feed(data):
            if len(frame) < _SIZE_PREFIX + _RESPONSE_HEADER_MIN:
                raise MalformedFrameError(f"response frame of {len(frame) - 4} bytes has no correlation id")
            correlation_id = _int(frame, 4, 4)
            out.append(ResponseFrame(frame, correlation_id, self._pending.pop(correlation_id, None)))
        return out
