"""One TCP connection to one broker: frames, correlation ids, pipelining.

Theory of operation. Kafka's protocol is request/response over a single TCP
stream; every frame is a 4-byte big-endian size followed by that many bytes.
A broker processes the requests of one connection in order and answers them
in order, so the connection needs no lookup table: requests sent but not yet
answered wait in a FIFO (``_in_flight``) and each response frame belongs to
the request at its head. The correlation id in the response header is only a
cross-check; a mismatch means the stream is out of step and nothing read from
it afterwards can be trusted, so the connection is torn down.

Several requests are *pipelined*: ``send()`` writes its frame without waiting
for earlier responses, bounded by ``max_in_flight`` (Java's
``max.in.flight.requests.per.connection``). The bound is a semaphore whose
slot is owned by the in-flight entry: it is released when that entry's
response is read, when the connection breaks, or, for an ``acks=0`` Produce
request that gets no response, once the frame is written.

One reader task per connection reads frames and resolves futures. Whatever
breaks the stream (EOF, reset, a malformed frame, a request timeout; Java too
closes the connection on request timeout because the stream can no longer be
matched up) fails *every* in-flight request at once with a retriable
:class:`~aioproducer.errors.KafkaConnectionError`, so a sender learns about a
dead broker immediately instead of after ``request.timeout.ms``.

On connect the connection negotiates versions with ApiVersions (KIP-35/511)
and afterwards sends each API at the highest version both sides speak.

Produce, the hot path, has a path of its own. :meth:`BrokerConnection.send_produce`
is synchronous: it encodes with the hand-written codec of
:mod:`aioproducer.protocol.produce`, writes the frame and returns; the response
is decoded by the same codec and handed to a callback straight from the reader
task. No task, future or timeout context is created per request (with one
record per batch, a producer sends a request for every two or three records,
and those per-request objects cost more than the encoding). Request timeouts
are one timer per connection, armed at the deadline of the oldest request in
flight: the broker answers in order, so the head is always the first to expire.
"""

from __future__ import annotations

import asyncio
import socket
import collections
import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

import aioproducer
from aioproducer.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolError,
    UnsupportedVersionError,
)
from aioproducer.protocol import messages, produce
from aioproducer.protocol.produce import ProduceResponse, TopicData

__all__ = ["MAX_RESPONSE_SIZE", "BrokerConnection", "ProduceCallback"]

log = logging.getLogger(__name__)

#: Largest response frame accepted. Responses a producer gets are small (a
#: Metadata response for thousands of partitions is a few MiB); a larger size
#: prefix means we are reading garbage, and trusting it would make us wait for
#: gigabytes that never come instead of failing.
MAX_RESPONSE_SIZE = 100 * 1024 * 1024

#: How many acks=0 correlation ids to remember in case the broker answers them
#: after all; a real broker never does, so this only bounds memory.
_MAX_UNANSWERED = 1024

_NEW, _CONNECTING, _READY, _CLOSED = "new", "connecting", "ready", "closed"

#: The first Produce version whose throttle_time_ms the client must wait out itself (KIP-219).
PRODUCE_CLIENT_THROTTLE_VERSION = 6


#: Called once per :meth:`BrokerConnection.send_produce`: ``(response, None)`` or ``(None, error)``.
ProduceCallback: TypeAlias = Callable[[ProduceResponse | None, KafkaError | None], None]
_Chunks: TypeAlias = list[bytes | bytearray | memoryview]


@dataclass(slots=True)
class _InFlight:
    """A request written (or being written) whose response has not been read yet.

    Its outcome goes to ``future`` (``send()``/``produce()`` callers await it)
    or to ``callback`` (:meth:`BrokerConnection.send_produce`), never both.
    ``decode`` is None for the generic codec (by ``api_key``/``version``).
    """

    correlation_id: int
    sequence: int
    api_key: int
    version: int
    future: asyncio.Future[Any] | None
    deadline: float
    decode: Callable[[bytes], Any] | None = None
    callback: ProduceCallback | None = None


def _api_name(api_key: int) -> str:
    """A human name for error messages ("Produce (0)")."""
    name = messages.API_NAMES.get(api_key)
    return f"{name} ({api_key})" if name else f"API key {api_key}"


def _is_unsupported_api_versions(entry: _InFlight, payload: bytes) -> bool:
    """Whether ``payload`` answers an ApiVersions v1+ request with UNSUPPORTED_VERSION.

    The error code is the body's first field in every version and the
    response header of ApiVersions is always v0 (4 bytes), so it can be read
    even when the rest does not decode.
    """
    return (
        entry.api_key == messages.API_VERSIONS
        and entry.version > 0
        and int.from_bytes(payload[4:6], "big", signed=True)
        == messages.UNSUPPORTED_VERSION_ERROR_CODE
    )


class BrokerConnection:
    """A pipelined, version-negotiated connection to one broker.

    Lifecycle: construct, ``await connect()``, any number of concurrent
    ``await send(...)``, ``await close()``. A connection is never reopened:
    once broken (``is_connected`` false) the owner replaces it with a new one,
    which is what :class:`~aioproducer.network.client.KafkaClient` does.

    All state is touched only from the event loop thread; the reader task and
    the ``send()`` callers interleave only at ``await`` points, and the steps
    that must stay together (pick correlation id, enqueue, write) have none.
    """

    def __init__(
        self,
        host: str,
        port: int,
        node_id: int,
        *,
        client_id: str,
        max_in_flight: int = 5,
        request_timeout_ms: int = 30000,
        connect_timeout_ms: int = 10000,
        send_buffer_bytes: int = -1,
        receive_buffer_bytes: int = -1,
        on_throttle: Callable[[int, int], None] | None = None,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        self.host = host
        self.port = port
        #: The broker's id; negative for a bootstrap connection whose id is not known yet.
        self.node_id = node_id
        self.client_id = client_id
        self.max_in_flight = max_in_flight
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        #: Called with ``(node_id, throttle_time_ms)`` when a Produce response asks the client to hold
        #: off (KIP-219); the owner (the client) stops sending to this broker for that long. The node
        #: id is read at the call: a bootstrap connection gets its node's id when the client adopts it.
        self.on_throttle = on_throttle

        self._state = _NEW
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        #: Requests awaiting a response, oldest first (the broker answers in this order).
        self._in_flight: collections.deque[_InFlight] = collections.deque()
        #: Slots held: in-flight entries plus acks=0 frames being written. Not an
        #: asyncio.Semaphore because send_produce() takes a slot without awaiting.
        self._slots_held = 0
        self._max_slots_held = 0
        #: Callers of _request waiting for a slot, oldest first; a freed slot is handed
        #: to the first of them directly (``_slots_held`` stays the same).
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        #: Fires at the oldest in-flight request's deadline (at most one armed).
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Produce version and its decoder, fixed once versions are negotiated.
        self._produce_version: int | None = None
        self._produce_decode: Callable[[bytes], ProduceResponse] | None = None
        #: Requests written so far; the correlation id is this counter mod 2**31.
        self._sequence = 0
        #: (sequence, correlation id) of recent requests sent without expecting a
        #: response (acks=0), oldest first: see _dispatch.
        self._unanswered: collections.deque[tuple[int, int]] = collections.deque(
            maxlen=_MAX_UNANSWERED
        )
        self._broker_versions: dict[int, tuple[int, int]] = {}
        #: Why the connection closed; ``None`` while open.
        self.close_reason: KafkaError | None = None
        #: Called once if the connection breaks by itself (not by ``close()``): the client
        #: marks metadata stale, since the broker may have left or lost its leaderships.
        self.on_lost: Callable[[BrokerConnection, KafkaError], None] | None = None

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.address} {self._state}>"

    # ------------------------------------------------------------------ state

    @property
    def address(self) -> str:
        """``host:port``, as error messages show it."""
        return f"{self.host}:{self.port}"

    @property
    def is_connected(self) -> bool:
        """True once ``connect()`` finished and until the connection breaks or is closed."""
        return self._state == _READY

    @property
    def in_flight_count(self) -> int:
        """Requests sent (or being sent) that still hold an in-flight slot."""
        return self._slots_held

    @property
    def max_in_flight_observed(self) -> int:
        """The highest ``in_flight_count`` ever reached: lets tests check the limit held."""
        return self._max_slots_held

    def can_send_more(self) -> bool:
        """Whether a ``send()`` now would be written at once rather than wait for a slot."""
        return self.is_connected and self._slots_held < self.max_in_flight

    @property
    def broker_api_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's ``api_key -> (min, max)`` ranges from ApiVersions (a copy)."""
        return dict(self._broker_versions)

    def api_version(self, api_key: int) -> int:
        """The highest version of ``api_key`` that both aioproducer and the broker speak.

        Raises :class:`UnsupportedVersionError` naming both ranges when they do
        not overlap (or one side lacks the API), which is a configuration
        problem (a too old or too new broker), not something to retry.
        """
        ours = messages.SUPPORTED_VERSIONS.get(api_key)
        theirs = self._broker_versions.get(api_key)
        if ours is not None and theirs is not None:
            best = min(ours[1], theirs[1])
            if best >= max(ours[0], theirs[0]):
                return best

        def show(r: tuple[int, int] | None) -> str:
            return "none" if r is None else f"v{r[0]}-v{r[1]}"

        raise UnsupportedVersionError(
            f"no common version of {_api_name(api_key)} with broker {self.address} "
            f"(node {self.node_id}): aioproducer speaks {show(ours)}, the broker {show(theirs)}"
        )

    # ---------------------------------------------------------------- connect

    def _set_buffer_sizes(self) -> None:
        """``send.buffer.bytes``/``receive.buffer.bytes`` on the socket (-1 leaves the OS default).

        Set once connected: asyncio's ``open_connection`` creates the socket itself. A receive
        buffer set after the handshake can still grow the window, up to what the handshake's
        window scale allows (Linux advertises a scale large enough for the default maxima).
        """
        assert self._writer is not None
        sock = self._writer.get_extra_info("socket")
        if sock is None:
            return
        for option, size in ((socket.SO_SNDBUF, self.send_buffer_bytes), (socket.SO_RCVBUF, self.receive_buffer_bytes)):
            if size >= 0:
                sock.setsockopt(socket.SOL_SOCKET, option, size)

    async def connect(self) -> None:
        """Open the TCP connection, start the reader and negotiate API versions.

        Raises :class:`KafkaConnectionError` (with ``host:port``) when the
        broker cannot be reached within ``connect_timeout_ms`` or the
        connection breaks during negotiation; :class:`UnsupportedVersionError`
        when no ApiVersions version is common; :class:`ProtocolError` when the
        peer's answer is not Kafka. On any failure the connection is closed.
        """
        if self._state != _NEW:
            raise RuntimeError(f"{self!r}: connect() may be called once")
        self._state = _CONNECTING
        self._loop = asyncio.get_running_loop()
        try:
            deadline = asyncio.timeout(self.connect_timeout_ms / 1000)
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation
                # that arrives as the connection completes, and a close() while starting then
                # waited for a whole bootstrap (measured: 15 s against a slow broker).
                async with deadline:
                    reader, self._writer = await asyncio.open_connection(self.host, self.port)
            except TimeoutError:
                if not deadline.expired():
                    raise
                raise KafkaConnectionError(
                    f"timed out connecting to {self.address} (node {self.node_id}) "
                    f"after {self.connect_timeout_ms} ms"
                ) from None
            except OSError as exc:
                raise KafkaConnectionError(
                    f"could not connect to {self.address} (node {self.node_id}): "
                    f"{exc.strerror or exc}"
                ) from exc
            self._set_buffer_sizes()
            self._reader_task = asyncio.create_task(
                self._read_loop(reader), name=f"aioproducer-reader-{self.address}"
            )
            await self._negotiate_api_versions()
            if self.close_reason is not None:
                # The stream broke right after the ApiVersions answer was read.
                raise self._not_connected_error()
        except BaseException as exc:
            reason = exc if isinstance(exc, KafkaError) else None
            await self._close(reason)
            raise
        self._state = _READY

    async def _negotiate_api_versions(self) -> None:
        """Send ApiVersions at our highest version, stepping down as the broker asks.

        A broker that does not know our ApiVersions version answers
        UNSUPPORTED_VERSION in v0 format, listing the ApiVersions range it does
        know (KIP-511); we retry at the highest version in both ranges, or v0
        when it gave none, as the Java client and librdkafka do.
        """
        our_min, version = messages.SUPPORTED_VERSIONS[messages.API_VERSIONS]
        while True:
            body = await self._request_generic(
                messages.API_VERSIONS,
                version,
                {
                    "client_software_name": "aioproducer",
                    # Read at call time: aioproducer/__init__ imports this module.
                    "client_software_version": aioproducer.__version__,
                },
            )
            error_code = body.get("error_code", 0)
            if error_code == messages.UNSUPPORTED_VERSION_ERROR_CODE and version > our_min:
                offered = [
                    int(k["max_version"])
                    for k in body.get("api_keys") or ()
                    if k["api_key"] == messages.API_VERSIONS
                ]
                # The broker's max when it told us (never higher than what failed), else v0.
                version = max(our_min, min(offered[0], version - 1) if offered else 0)
                log.debug("%r: broker rejected ApiVersions, retrying at v%d", self, version)
                continue
            if error_code != 0:
                raise UnsupportedVersionError(
                    f"broker {self.address} (node {self.node_id}) rejected ApiVersions "
                    f"v{version} with error code {error_code}"
                )
            self._broker_versions = {
                int(k["api_key"]): (int(k["min_version"]), int(k["max_version"]))
                for k in body.get("api_keys") or ()
            }
            return

    # ------------------------------------------------------------------- send

    async def send(
        self,
        api_key: int,
        body: dict[str, Any],
        *,
        expect_response: bool = True,
        version: int | None = None,
    ) -> dict[str, Any] | None:
        """Send one request; return the decoded response body (``None`` without one).

        ``version`` defaults to :meth:`api_version`. Waits for an in-flight slot
        first, so at most ``max_in_flight`` requests are ever outstanding; the
        request timeout counts from the moment the slot is held.
        ``expect_response=False`` is for Produce with ``acks=0``, which the
        broker never answers: the slot is freed as soon as the frame is written.

        Raises :class:`KafkaConnectionError` (retriable) when the connection is
        or becomes broken, :class:`KafkaTimeoutError` when no response came in
        ``request_timeout_ms`` (the connection is then closed), and
        :class:`ProtocolError` when this request's response does not decode.
        """
        if not self.is_connected:
            raise self._not_connected_error()
        if version is None:
            version = self.api_version(api_key)
        response = await self._request_generic(api_key, version, body, expect_response=expect_response)
        return response if expect_response else None

    async def produce(
        self,
        topic_data: TopicData,
        *,
        acks: int,
        timeout_ms: int,
        transactional_id: str | None = None,
    ) -> ProduceResponse | None:
        """Send one Produce request through the fast codec and wait for its response.

        ``None`` for ``acks=0`` (no response; returns once the frame is written,
        so a producer that sends faster than the socket drains is held back).
        Errors as :meth:`send`.
        """
        if not self.is_connected:
            raise self._not_connected_error()
        version, decode = self._produce_codec()
        client_id = self.client_id

        def encode(correlation_id: int) -> _Chunks:
            return produce.encode_produce_request(
                version, correlation_id, client_id, transactional_id, acks, timeout_ms, topic_data
            )

        response: ProduceResponse | None = await self._request(
            messages.PRODUCE, version, encode, decode, expect_response=acks != 0
        )
        return response if acks != 0 else None

    def send_produce(
        self,
        topic_data: TopicData,
        *,
        acks: int,
        timeout_ms: int,
        on_response: ProduceCallback,
        transactional_id: str | None = None,
    ) -> None:
        """Write one Produce request now; its outcome goes to ``on_response`` later.

        The sender's hot path: no task, no future, no await. Needs a free
        in-flight slot (check :meth:`can_send_more` first; ``RuntimeError``
        otherwise) and a response (``acks`` 1 or -1; ``acks=0`` has no response
        to free the slot and no flow control: use :meth:`produce`). Raises
        :class:`KafkaConnectionError` when not connected and ``ValueError`` for
        values that do not encode, in both cases before anything is sent.

        ``on_response(response, None)`` runs when the response is read,
        ``on_response(None, error)`` when the request times out
        (:class:`KafkaTimeoutError`), the connection breaks or is closed
        (:class:`KafkaConnectionError`) or the response does not decode
        (:class:`ProtocolError`): exactly once, never from inside this call.
        """
        if not self.is_connected:
            raise self._not_connected_error()
        if acks == 0:
            raise ValueError("acks=0 gets no response: use produce()")
        if self._slots_held >= self.max_in_flight:
            raise RuntimeError(f"{self!r}: no in-flight slot free; check can_send_more() first")
        version, decode = self._produce_codec()
        sequence = self._sequence
        correlation_id = sequence & 0x7FFFFFFF
        frame = produce.encode_produce_request(
            version, correlation_id, self.client_id, transactional_id, acks, timeout_ms, topic_data
        )
        writer = self._writer
        loop = self._loop
        assert writer is not None and loop is not None
        deadline = loop.time() + self.request_timeout_ms / 1000
        entry = _InFlight(correlation_id, sequence, messages.PRODUCE, version, None, deadline, decode, on_response)
        try:
            # A socket error in here surfaces later, in the reader (connection lost), which fails the entry.
            writer.writelines(frame)
        except BaseException:
            # Nothing was queued (the transport refused outright): the caller handles the exception.
            self._abort(KafkaConnectionError(f"writing to {self.address} (node {self.node_id}) failed"))
            raise
        self._sequence = sequence + 1
        self._take_slot()
        self._in_flight.append(entry)
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._on_timer)

    def _produce_codec(self) -> tuple[int, Callable[[bytes], ProduceResponse]]:
        """The Produce version negotiated with this broker and its decoder, computed once."""
        version, decode = self._produce_version, self._produce_decode
        if version is None or decode is None:
            version = self.api_version(messages.PRODUCE)
            decode = functools.partial(produce.decode_produce_response, version)
            self._produce_version, self._produce_decode = version, decode
        return version, decode

    async def _request_generic(
        self, api_key: int, version: int, body: dict[str, Any], *, expect_response: bool = True
    ) -> dict[str, Any]:
        """:meth:`_request` with the generic schema codec."""
        client_id = self.client_id

        def encode(correlation_id: int) -> _Chunks:
            # Chunks, so a large RecordBatch goes to the socket without being copied into the frame.
            return messages.encode_request_chunks(api_key, version, correlation_id, client_id, body)

        response: dict[str, Any] = await self._request(
            api_key, version, encode, None, expect_response=expect_response
        )
        return response

    async def _request(
        self,
        api_key: int,
        version: int,
        encode: Callable[[int], _Chunks],
        decode: Callable[[bytes], Any] | None,
        *,
        expect_response: bool = True,
    ) -> Any:
        """``send()`` without the readiness and version checks (ApiVersions runs before READY).

        ``encode(correlation_id)`` builds the frame; ``decode(payload)`` reads
        the response (None: the generic codec). Returns ``{}`` when no response
        is expected.
        """
        await self._acquire_slot()
        entry: _InFlight | None = None
        try:
            writer = self._writer
            loop = self._loop
            if self._state not in (_CONNECTING, _READY) or writer is None or loop is None:
                raise self._not_connected_error()
            sequence = self._sequence
            correlation_id = sequence & 0x7FFFFFFF
            frame = encode(correlation_id)
            self._sequence = sequence + 1
            if expect_response:
                deadline = loop.time() + self.request_timeout_ms / 1000
                entry = _InFlight(
                    correlation_id, sequence, api_key, version, loop.create_future(), deadline, decode
                )
                self._in_flight.append(entry)  # from here on the entry owns the slot
                if self._timer is None:
                    self._timer = loop.call_at(deadline, self._on_timer)
            else:
                self._unanswered.append((sequence, correlation_id))
            writer.writelines(frame)
        except BaseException:
            if entry is None:
                self._give_slot()
            raise
        deadline_cm = asyncio.timeout(self.request_timeout_ms / 1000)
        try:
            async with deadline_cm:
                try:
                    await writer.drain()
                except OSError as exc:
                    self._abort(
                        KafkaConnectionError(f"writing to {self.address} (node {self.node_id}) failed: {exc}")
                    )
                if entry is None:
                    if self.close_reason is not None:
                        raise self.close_reason
                    return {}
                assert entry.future is not None
                return await entry.future
        except TimeoutError:
            if not deadline_cm.expired():
                raise  # a TimeoutError subclass (KafkaTimeoutError) from inside, not our deadline
            error = self._timeout_error(api_key)
            self._abort(KafkaConnectionError(f"connection to {self.address} closed: {error}"))
            raise error from None
        finally:
            if entry is None:
                self._give_slot()

    def _timeout_error(self, api_key: int) -> KafkaTimeoutError:
        return KafkaTimeoutError(
            f"{_api_name(api_key)} request to {self.address} (node {self.node_id}) got no "
            f"response within request.timeout.ms={self.request_timeout_ms}; connection closed"
        )

    def _on_timer(self) -> None:
        """The oldest request in flight may have reached its deadline: fail it and close, or re-arm."""
        self._timer = None
        if self._state == _CLOSED or not self._in_flight:
            return
        loop = self._loop
        assert loop is not None
        head = self._in_flight[0]
        if loop.time() < head.deadline:
            self._timer = loop.call_at(head.deadline, self._on_timer)
            return
        # As Java: the stream can no longer be matched up, so the connection closes.
        error = self._timeout_error(head.api_key)
        self._in_flight.popleft()
        self._give_slot()
        self._fail_entry(head, error)
        self._abort(KafkaConnectionError(f"connection to {self.address} closed: {error}"))

    async def _acquire_slot(self) -> None:
        """Wait until an in-flight slot is free (FIFO among waiters) and take it."""
        if self._slots_held < self.max_in_flight and not self._slot_waiters:
            self._take_slot()
            return
        loop = self._loop or asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._slot_waiters.append(waiter)
        try:
            await waiter  # _give_slot hands the slot over: _slots_held already counts it
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self._give_slot()  # handed over, but we are not going to use it
            else:
                try:
                    self._slot_waiters.remove(waiter)
                except ValueError:
                    pass
            raise

    def _take_slot(self) -> None:
        self._slots_held += 1
        if self._slots_held > self._max_slots_held:
            self._max_slots_held = self._slots_held

    def _give_slot(self) -> None:
        waiters = self._slot_waiters
        while waiters:
            waiter = waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes to the waiter
                return
        self._slots_held -= 1

    def _resolve_entry(self, entry: _InFlight, result: Any) -> None:
        callback = entry.callback
        if callback is not None:
            self._run_callback(callback, result, None)
        elif entry.future is not None and not entry.future.done():
            entry.future.set_result(result)  # done = the caller gave up (cancelled); drop the answer

    def _fail_entry(self, entry: _InFlight, error: KafkaError) -> None:
        callback = entry.callback
        if callback is not None:
            self._run_callback(callback, None, error)
        elif entry.future is not None and not entry.future.done():
            entry.future.set_exception(error)

    def _run_callback(
        self, callback: ProduceCallback, response: ProduceResponse | None, error: KafkaError | None
    ) -> None:
        """Run a send_produce() callback; its bugs are reported, never allowed to break the stream."""
        try:
            callback(response, error)
        except Exception as exc:  # noqa: BLE001 - the reader must survive its callers' bugs
            loop = self._loop
            if loop is not None:
                loop.call_exception_handler(
                    {"message": f"{self!r}: exception in a Produce response callback", "exception": exc}
                )

    def _not_connected_error(self) -> KafkaError:
        if self.close_reason is not None:
            return KafkaConnectionError(f"connection to {self.address} is closed: {self.close_reason}")
        return KafkaConnectionError(f"not connected to {self.address} (node {self.node_id})")

    # ------------------------------------------------------------------- read

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        """Read response frames until the stream ends; resolve the head request's future each time.

        Never raises: every way out other than cancellation closes the
        connection through :meth:`_abort`, which fails what is in flight.
        """
        try:
            while True:
                prefix = await reader.readexactly(4)
                size = int.from_bytes(prefix, "big", signed=True)
                if not 4 <= size <= MAX_RESPONSE_SIZE:
                    raise ProtocolError(
                        f"response frame from {self.address} has impossible size {size}: "
                        f"{_not_kafka_hint(prefix)}"
                    )
                payload = await reader.readexactly(size)
                self._dispatch(payload)
        except asyncio.IncompleteReadError as exc:
            where = "mid-frame" if exc.partial else "between frames"
            self._abort(
                KafkaConnectionError(
                    f"connection to {self.address} (node {self.node_id}) closed by the broker {where}"
                )
            )
        except OSError as exc:
            self._abort(
                KafkaConnectionError(f"connection to {self.address} (node {self.node_id}) broke: {exc}")
            )
        except ProtocolError as exc:
            # The request the bad frame answered learns the real cause; the
            # others only that the connection went away.
            if self._in_flight:
                head = self._in_flight.popleft()
                self._give_slot()
                self._fail_entry(head, exc)
            error = KafkaConnectionError(f"connection to {self.address} closed: {exc}")
            error.__cause__ = exc
            self._abort(error)

    def _dispatch(self, payload: bytes) -> None:
        """Match one response frame to the oldest in-flight request and resolve it."""
        correlation_id = messages.peek_correlation_id(payload)
        head = self._in_flight[0] if self._in_flight else None
        unanswered = self._unanswered
        if head is not None:
            # Answers come in order: requests without a response sent before
            # ``head`` will not be answered any more once ``head`` is.
            while unanswered and unanswered[0][0] < head.sequence and unanswered[0][1] != correlation_id:
                unanswered.popleft()
        if unanswered and unanswered[0][1] == correlation_id:
            # An answer to an acks=0 Produce. Kafka sends none, librdkafka's mock
            # broker does; as librdkafka's client does, drop it rather than
            # tear the connection down.
            unanswered.popleft()
            return
        if head is None:
            raise ProtocolError(
                f"{self.address} sent a response (correlation id {correlation_id}) "
                "with no request in flight"
            )
        if correlation_id != head.correlation_id:
            raise ProtocolError(
                f"{self.address} answered correlation id {correlation_id} while "
                f"{head.correlation_id} was next: the stream is out of step"
            )
        body: Any
        try:
            # A ProtocolError leaves ``head`` queued for _read_loop to fail with it.
            # ApiVersions' v0 fallback (KIP-511) is handled by decode_response.
            if head.decode is not None:
                body = head.decode(payload)
            else:
                _, body = messages.decode_response(head.api_key, head.version, payload)
        except ProtocolError:
            if not _is_unsupported_api_versions(head, payload):
                raise
            # The broker refused our ApiVersions version in a body that is neither
            # v0 nor the version we sent (librdkafka's mock broker does this). The
            # error code alone is enough: negotiation falls back to v0, as Java's
            # ApiVersionsResponse.parse + NetworkClient do when no range is given.
            body = {"error_code": messages.UNSUPPORTED_VERSION_ERROR_CODE, "api_keys": []}
        except Exception as exc:  # the decoder's contract is ProtocolError only; hold it to that
            raise ProtocolError(
                f"{_api_name(head.api_key)} v{head.version} response from {self.address} "
                f"does not decode: {exc!r}"
            ) from exc
        self._in_flight.popleft()
        self._give_slot()
        if head.api_key == messages.PRODUCE and self.on_throttle is not None:
            self._report_throttle(head.version, body)
        self._resolve_entry(head, body)

    def _report_throttle(self, version: int, body: Any) -> None:
        """Pass a Produce response's throttle time on, from v6 (KIP-219) where the client must honour it.

        Up to v5 the broker throttled by holding the response back, so waiting again would
        throttle twice. From v6 it answers at once and relies on the client not to send
        until the time is up: one that kept sending would only be muted by the broker
        and see its requests time out.
        """
        if version < PRODUCE_CLIENT_THROTTLE_VERSION or self.on_throttle is None:
            return
        throttle_ms = body.throttle_time_ms if isinstance(body, ProduceResponse) else body.get("throttle_time_ms", 0)
        if throttle_ms > 0:
            self.on_throttle(self.node_id, throttle_ms)

    # ------------------------------------------------------------------ close

    def _abort(self, error: KafkaError, *, requested: bool = False) -> None:
        """Break the connection now: fail every in-flight request with ``error``, close the socket.

        Synchronous so the reader task, a timed-out sender and ``close()`` can
        all call it without awaiting; only the first call has an effect.
        Awaiting the socket's end and the reader task is left to ``close()``.
        """
        if self._state == _CLOSED:
            return
        self._state = _CLOSED
        self.close_reason = error
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._in_flight:
            log.info("%r: closing with %d requests in flight: %s", self, len(self._in_flight), error)
        while self._in_flight:
            entry = self._in_flight.popleft()
            self._give_slot()
            self._fail_entry(entry, error)
        if self._writer is not None:
            self._writer.close()
        task = self._reader_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        if not requested and self.on_lost is not None:
            self.on_lost(self, error)

    def abort_socket(self) -> None:
        """:meth:`abort` without the wait: for callers that cannot await (a producer's ``__del__``)."""
        self._abort(KafkaConnectionError(f"connection to {self.address} (node {self.node_id}) aborted"))
        if self._writer is not None:
            self._writer.transport.abort()

    async def abort(self) -> None:
        """Drop the socket now, unsent bytes with it, and wait for the reader task to end.

        For a close that ran out of time: a graceful close waits until the peer has read
        every buffered byte, which is forever for a peer that stopped reading. Requests in
        flight fail as in :meth:`close`.
        """
        self.abort_socket()
        task = self._reader_task
        if task is not None:
            await asyncio.wait([task])  # cancelled by _abort: ends at its next step

    async def close(self) -> None:
        """Close the connection and wait until its socket and reader task are gone.

        Idempotent. Requests still in flight fail with :class:`KafkaConnectionError`.
        """
        await self._close(None)

    async def _close(self, reason: KafkaError | None) -> None:
        self._abort(
            reason or KafkaConnectionError(f"connection to {self.address} (node {self.node_id}) closed"),
            requested=reason is None,
        )
        task = self._reader_task
        if task is not None:
            await asyncio.wait([task])  # unlike ``await task``, not raising CancelledError
        writer = self._writer
        if writer is not None:
            try:
                await writer.wait_closed()
            except (OSError, asyncio.IncompleteReadError):
                pass  # the socket is closed either way; how the peer ended it no longer matters


def _not_kafka_hint(head: bytes) -> str:
    """What the first bytes of a bad frame say about the peer (a wrong port is the usual cause)."""
    if head.startswith(b"HTTP") or head[:3] in (b"<ht", b"<!D", b"<HT"):
        return "the peer speaks HTTP, not the Kafka protocol (is this a web or REST port?)"
    if head[:1] == b"\x15" and head[1:2] == b"\x03":
        return "the peer answered with a TLS alert: it expects TLS (security.protocol SSL or SASL_SSL)"
    if head[:1] == b"\x16" and head[1:2] == b"\x03":
        return "the peer answered with a TLS handshake: it expects TLS (security.protocol SSL or SASL_SSL)"
    return f"the peer does not speak the Kafka protocol (first bytes {head!r})"

