"""One TCP connection to one broker: the asyncio side of :mod:`aioproducer.protocol.connection_state`.

Theory of operation. Everything about the Kafka protocol on a connection
(correlation ids, requests awaiting answers, in-flight slots, request
deadlines, ApiVersions negotiation, framing, the ``acks=0`` bookkeeping) is
in :class:`~aioproducer.protocol.connection_state.ClientConnection`, a state
machine that does no I/O. :class:`BrokerConnection` is the adapter that gives
it a socket and a clock:

* it writes the frames the state machine returns, in order: through the
  transport, or, for large ones on a plaintext connection, through the
  connection's writer thread (``SocketWriter``), so that the kernel's copy of a
  large request is not made on the event loop's thread (``_write_frame``);
* what the socket reads is fed to it as the transport hands it over (``_DirectFeed``, the
  transport's protocol once connected), with no task between; one reader task waits for the
  stream's end (``b""``) or error and feeds that;
* one timer (``loop.call_at``) fires at the state machine's
  :attr:`~aioproducer.protocol.connection_state.ClientConnection.next_deadline`
  and hands it the time: that is the only place a request times out;
* it turns the machine's events into outcomes: every request carries a
  callback as its token, called ``(response, None)`` or ``(None, error)``
  exactly once.

There is one request path. :meth:`BrokerConnection.send_produce`, the
sender's hot path, hands the caller's callback to the machine and returns:
no task, future or timeout context per request (with one record per batch a
producer sends a request for every two or three records, and those objects
would cost more than the encoding). :meth:`~BrokerConnection.send` and
:meth:`~BrokerConnection.produce` are the awaitable forms: their token is a
callback that settles a future, and they first wait for an in-flight slot
(Java's ``max.in.flight.requests.per.connection``) in a FIFO of waiters.

Whatever breaks the stream (end of stream, a reset, a malformed frame, a
request timeout: Java too closes the connection on a request timeout, since
the stream can no longer be matched up) fails *every* request in flight at
once with a retriable :class:`~aioproducer.errors.KafkaConnectionError`, so a
sender learns about a dead broker immediately instead of after
``request.timeout.ms``. A connection that broke by itself drops its socket
(unsent bytes with it: nobody waits for their answers) and calls ``on_lost``.

Who owns what. The state machine owns the protocol state listed in its
module docstring, including ``close_reason`` and ``node_id`` (read and set
through properties here). This class owns the socket (``_writer``), the
writer thread (``_socket_writer``), the reader task, the timer (``_timer``/``_timer_at``), the slot waiters
(``_slot_waiters``), whether the socket side was torn down (``_torn_down``)
and the callbacks given by its owner (``on_lost``, ``on_throttle``). All of
it is touched only from the event loop thread.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import logging
import os
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeAlias

from aioproducer._version import __version__
from aioproducer.clock import Clock, loop_clock
from aioproducer.errors import KafkaConnectionError, KafkaError, SslAuthenticationError
from aioproducer.logs import client_logger
from aioproducer.stats import ByteCounts
from aioproducer.protocol.connection_state import (
    MAX_RESPONSE_SIZE,
    PRODUCE_CLIENT_THROTTLE_VERSION,
    Chunks,
    ClientConnection,
    ConnectionBroken,
    ConnectionState,
    DataToSend,
    Event,
    ProduceAnswered,
    RequestFailed,
    ResponseReceived,
    SaslMechanism,
    Throttled,
)
from aioproducer.protocol.produce import AnyProduceResponse, TopicData

try:
    from aioproducer._native import SocketWriter
except ImportError:  # not a Unix: every frame goes through the transport
    SocketWriter = None  # type: ignore[assignment,misc]

__all__ = [
    "MAX_RESPONSE_SIZE", "PRODUCE_CLIENT_THROTTLE_VERSION", "Authenticator", "BrokerConnection", "OpenStreams",
    "ProduceCallback", "ProduceToken",
]

log: logging.Logger = logging.getLogger(__name__)

#: Called once per :meth:`BrokerConnection.send_produce`: ``(response, None)`` or ``(None, error)``.
ProduceCallback: TypeAlias = Callable[[AnyProduceResponse | None, KafkaError | None], None]


class ProduceToken:
    """A Produce request's ``on_response`` that also takes the answers of one read together.

    Called as any :data:`ProduceCallback` (``token(response, error)`` calls
    ``on_outcome(token, response, error)``), it is told each outcome the usual way: an error, a
    throttled answer, an answer read alone. But when one read of the socket holds several
    answers in a row to requests whose tokens share ``on_answers`` (the same object), the
    connection calls ``on_answers(tokens, answers)`` once for them instead, in the order they
    were read. Why: at 1-10 KB records the sender's answer path is Python per answer, and about
    five answers come in a read (``benchmarks/README.md``, "The answers of a read together").
    ``request`` is the owner's, opaque here (the sender's node, batches and send time).
    """

    __slots__ = ("on_outcome", "on_answers", "request")

    def __init__(
        self,
        on_outcome: Callable[[ProduceToken, AnyProduceResponse | None, KafkaError | None], None],
        on_answers: Callable[[list[ProduceToken], list[AnyProduceResponse]], None],
        request: Any,
    ) -> None:
        self.on_outcome = on_outcome
        self.on_answers = on_answers
        self.request = request

    def __call__(self, response: AnyProduceResponse | None, error: KafkaError | None) -> None:
        self.on_outcome(self, response, error)


#: The token of every request: told its outcome exactly once.
_Callback: TypeAlias = Callable[[Any, KafkaError | None], None]
#: Sends one request on a reserved slot: ``(token, now_ms) -> frame``.
_Submit: TypeAlias = Callable[[_Callback, float], Chunks]

#: Bytes asked of the stream per read; a read returns what is there, up to this.
_READ_SIZE = 256 * 1024
#: Each open connection's read buffer (``_DirectFeed``): Produce answers are a few hundred bytes,
#: and a larger answer (metadata) takes more than one read.
_FEED_BUFFER_SIZE = 64 * 1024

_READY = ConnectionState.READY
_CLOSED = ConnectionState.CLOSED

#: A ``send_produce`` frame at least this large is written by the connection's writer thread
#: (``SocketWriter``, native/src/socket_writer.rs), on a plaintext connection once it is ready;
#: smaller ones through the transport, unless frames are still queued on the thread (the order is
#: kept). Measured with ``benchmarks/socket_writer.py`` (one mock broker, the loop thread's CPU
#: per request, transport against thread, medians of 3, on the shared 2-core machine under a
#: load average of 18, so to be measured again quiet): 4 KB 26.5 -> 22.4 µs, 16 KB 24.8 -> 29.1,
#: 64 KB 36.6 -> 28.9, 256 KB 108.5 -> 38.6. Below 64 KB the hand-over did not clearly pay: it
#: costs the loop's thread 5-7 µs when the thread sleeps (waking it is a system call and a
#: scheduling) and 1.5-3 µs when it is busy (a buffer view per chunk), measured apart on a socket
#: pair (a 96 KB frame in 1 or 7 chunks, 5,000 calls), where ``send()`` of 55 KB costs 13-16 µs.
#: Measured again at a load of 1.9-2.6 (2026-12-02, ``socket_writer.py``): per request 4 KB 32.6
#: -> 33.2 µs, 16 KB 31.5 -> 28.8, 64 KB 36.4 -> 32.0, 256 KB 91.8 -> 41.7; and end to end, 20,000
#: x 10 KB records (requests of about 55 KB), medians of 7, loop / process CPU µs a record and
#: rec/s: transport only 51.8 / 61.3, 18,234; the thread from 32 KB 57.2 / 83.1, 12,798; from 16 KB
#: 52.4 / 75.7, 17,177. A 55 KB request's hand-over does not lower the loop's CPU and costs the
#: process 15-20 µs a record: the threshold stays.
#: Raised to 256 KB once the frames of one callback became one write (``flush_writes``), whose size
#: it is now (2026-12-03, quiet machine): the sender's five requests to a node are about 100 KB at
#: 10 KB records and 150 KB at 1 KB, and with the thread from 64 KB they cost the process 79.5 µs
#: a 10 KB record against 57.7 on the loop alone (loop 60.9 and 57.7, 15,262 and 17,172 rec/s,
#: the peers' layout, medians of 6 interleaved); at 1 KB 9.95 against 8.45 µs (loop 8.4 both).
#: ``socket_writer.py``, 20,000 x 10 KB, one broker: transport only 33,931 rec/s, from 64 KB
#: 30,732 (process 51.4 µs a record), from 256 KB 38,080 (33.8).
#: Back to 64 KB once the thread gathered its writes (2026-12-04): it made a ``send`` per chunk,
#: and a request sent in place is a dozen chunks (61-byte batch headers among them), each a TCP
#: segment of its own through the whole loopback path; now every queued frame goes in one
#: ``sendmsg`` (up to 512 chunks), as the loop's pass writes. The peers' layout, shared
#: ``on_delivery``, interleaved with the tree before (256 KB, a send per chunk), medians: 10 KB
#: 33,955 -> 36,565 rec/s (8 of 8), CPU 29.4 -> 30.8 µs a record; 1 KB 323,630 -> 347,632 (6
#: rounds); 10 KB ``gather()`` 29,170 -> 31,406; 1 KB ``gather()`` 161,900 -> 169,933 (6 of 6);
#: 100 B, lz4 with idempotence and p99 at 20,000 rec/s level. From 32 KB measured level with 64.
WRITER_THREAD_MIN_BYTES = 64 * 1024

#: A ``send_produce`` frame of at most this many chunks, written on the loop's thread while the
#: transport's buffer is empty, goes out in one ``os.writev`` of its chunks (``_write_direct``):
#: asyncio 3.11's ``writelines`` joins the frame into one new bytes object first (55 KB: 2.7 µs
#: hot, about 17 µs a request under cProfile with the chunks just built) and runs the transport's
#: ``write`` in Python. Bounded well under ``IOV_MAX`` (1024).
_WRITEV_MAX_CHUNKS = 256
_writev = getattr(os, "writev", None)

class _DirectFeed(asyncio.BufferedProtocol):
    """The transport's protocol once a connection is open: what it reads goes to the connection at once.

    Why: through a ``StreamReader`` each read is fed to the reader, wakes the reader task (a
    future, a loop callback, a task step) and comes back through ``read()``: per Produce response,
    and with 10 KB records a response answers about two records in the peers' layout
    (``docs/design/native-batches.md``). Everything else goes to the streams' own protocol, so the
    ``StreamWriter`` keeps working (``drain()``'s flow control, ``wait_closed()``) and the reader
    still sees the end of the stream or its error, which the reader task waits for.

    Why buffered: a plain protocol's transport reads with ``recv(256 KiB)``, a new object of that
    size per read, which glibc maps and unmaps for each one (``mmap``, ``mremap`` to the few
    hundred bytes of answers read, ``munmap``): 3.4 % of the loop's samples in the peers' worker at
    10 KB (py-spy, 2026-12-03). Reading into one buffer kept per connection (``recv_into``) copies
    out only the bytes read.
    """

    __slots__ = ("_streams", "_receive", "_buffer")

    def __init__(self, streams: asyncio.StreamReaderProtocol, receive: Callable[[bytes], None]) -> None:
        self._streams = streams
        self._receive = receive
        self._buffer = memoryview(bytearray(_FEED_BUFFER_SIZE))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._buffer

    def buffer_updated(self, nbytes: int) -> None:
        self._receive(self._buffer[:nbytes].tobytes())

    def data_received(self, data: bytes) -> None:
        """For an event loop whose transports do not read into a protocol's buffer."""
        self._receive(data)

    def eof_received(self) -> bool | None:
        return self._streams.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._streams.connection_lost(exc)

    def pause_writing(self) -> None:
        self._streams.pause_writing()

    def resume_writing(self) -> None:
        self._streams.resume_writing()


def _settle(future: asyncio.Future[Any], result: Any, error: KafkaError | None) -> None:
    """The token callback of an awaitable request; a done future means the caller gave up."""
    if future.done():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


#: Opens the streams to a broker, ``(host, port) -> (reader, writer)``: ``asyncio.open_connection`` by default.
OpenStreams = Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]
#: Makes the SASL mechanism's client for one authentication (a new OAUTHBEARER token each time).
#: Makes the SASL mechanism client for one authentication with the broker at the given host
#: (GSSAPI names the broker's host in the service principal it asks a ticket for).
Authenticator = Callable[[str], Awaitable[SaslMechanism]]


class BrokerConnection:
    """A pipelined, version-negotiated connection to one broker.

    Lifecycle: construct, ``await connect()``, any number of concurrent
    ``await send(...)`` and ``send_produce(...)``, ``await close()``. A
    connection is never reopened: once broken (``is_connected`` false) the
    owner replaces it with a new one, which is what
    :class:`~aioproducer.network.client.KafkaClient` does.
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
        open_streams: OpenStreams | None = None,
        authenticator: Authenticator | None = None,
        reauth_fraction: float = 0.9,
        byte_counts: ByteCounts | None = None,
        on_lost: Callable[[BrokerConnection, KafkaError], None] | None = None,
        on_sendable: Callable[[], None] | None = None,
    ) -> None:
        self.host = host
        #: Lines about this connection name the client.id it sends (see logs.py).
        self._log = client_logger(__name__, client_id)
        #: Where the bytes written and read are counted (the client's, for ``Producer.metrics()``).
        self.byte_counts = byte_counts
        self.port = port
        self._protocol: ClientConnection[_Callback] = ClientConnection(
            client_id=client_id,
            address=f"{host}:{port}",
            node_id=node_id,
            max_in_flight=max_in_flight,
            request_timeout_ms=request_timeout_ms,
            client_software_version=__version__,
            reauth_fraction=reauth_fraction,
        )
        self.connect_timeout_ms = connect_timeout_ms
        #: How the byte streams to ``host:port`` are opened: plain TCP unless the owner gives another
        #: way (a TLS context; a scripted peer in benchmarks). The one place a transport is made.
        self._open_streams: OpenStreams = open_streams or asyncio.open_connection
        #: Makes the SASL mechanism's client for each authentication (SASL listeners only): async,
        #: because an OAUTHBEARER token comes from the user's provider. None: no SASL.
        self._authenticator = authenticator
        #: KIP-368: the timer that starts the next re-authentication, and the one under way.
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        #: Called with ``(node_id, throttle_time_ms)`` when a Produce response asks the client to hold
        #: off (KIP-219); the owner (the client) stops sending to this broker for that long. The node
        #: id is read at the call: a bootstrap connection gets its node's id when the client adopts it.
        self.on_throttle = on_throttle
        #: Called once if the connection breaks by itself (not by ``close()``): the client
        #: marks metadata stale, since the broker may have left or lost its leaderships.
        self.on_lost = on_lost
        #: Called when the connection takes requests again after re-authenticating (KIP-368): a
        #: sender that found it busy is asleep, and nothing else would wake it.
        self.on_sendable = on_sendable

        self._connect_called = False
        self._torn_down = False
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The loop's clock in milliseconds (``clock.loop_clock``), the state machine's "now"; set by ``connect()``.
        self._now: Clock = self._clock_unset
        self._writer: asyncio.StreamWriter | None = None
        #: The writer thread of a plaintext connection, made at its first large frame once ready
        #: (``_write_frame``), stopped by ``_teardown``; None before and on a TLS connection.
        self._socket_writer: SocketWriter | None = None
        #: Whether large frames may go to a writer thread: a plain socket, on a Unix. Set by connect().
        self._may_offload = False
        #: The plain socket's descriptor, for ``_write_direct``; -1 on TLS or without ``os.writev``.
        #: Set by connect(); used only while the transport is not closing (then the socket is open).
        self._fd = -1
        #: ``send_produce`` frames held until the end of the loop's current callback, written then as
        #: one (``_write_frame``, ``flush_writes``); written by those two and dropped by ``_teardown``.
        self._held: Chunks = []
        #: How many requests' frames ``_held`` holds (for the byte counts at their write). Writers:
        #: ``send_produce``, ``_write_frame``, ``_write_held``, the teardown.
        self._held_requests = 0
        self._reader_task: asyncio.Task[None] | None = None
        #: Fires at the state machine's next deadline (at most one armed), at ``_timer_at`` ms.
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        #: Callers of _request waiting for a slot, oldest first; a freed slot is reserved
        #: for the first of them directly, so no newcomer takes it first.
        self._slot_waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def __repr__(self) -> str:
        return f"<BrokerConnection node={self.node_id} {self.address} {self._protocol.state.value}>"

    # ------------------------------------------------------------------ state

    @property
    def node_id(self) -> int:
        """The broker's id; negative for a bootstrap connection whose id is not known yet."""
        return self._protocol.node_id

    @node_id.setter
    def node_id(self, node_id: int) -> None:
        self._protocol.node_id = node_id

    @property
    def client_id(self) -> str | None:
        return self._protocol.client_id

    @property
    def max_in_flight(self) -> int:
        return self._protocol.max_in_flight

    @property
    def request_timeout_ms(self) -> int:
        return self._protocol.request_timeout_ms

    @property
    def close_reason(self) -> KafkaError | None:
        """Why the connection closed; ``None`` while open."""
        return self._protocol.close_reason

    @property
    def address(self) -> str:
        """``host:port``, as error messages show it."""
        return f"{self.host}:{self.port}"

    @property
    def is_connected(self) -> bool:
        """True once versions are negotiated (and SASL done) until the connection breaks or is closed.

        Still true while re-authenticating: the connection stays, only new requests wait.
        """
        return self._protocol.is_established

    @property
    def never_answered(self) -> bool:
        """Requests expecting an answer were sent on it (past the handshake) and none was answered."""
        return self._protocol.never_answered

    @property
    def in_flight_count(self) -> int:
        """Requests sent (or being sent) that still hold an in-flight slot."""
        return self._protocol.in_flight_count

    @property
    def max_in_flight_observed(self) -> int:
        """The highest ``in_flight_count`` ever reached: lets tests check the limit held."""
        return self._protocol.max_in_flight_observed

    def can_send_more(self) -> bool:
        """Whether a ``send()`` now would be written at once rather than wait for a slot."""
        protocol = self._protocol
        return protocol.has_free_slot  # READY (not re-authenticating) and a slot free

    @property
    def free_slots(self) -> int:
        """How many ``send_produce`` calls now would be written at once (``can_send_more`` as a count)."""
        return self._protocol.free_slots

    @property
    def broker_api_versions(self) -> dict[int, tuple[int, int]]:
        """The broker's ``api_key -> (min, max)`` ranges from ApiVersions (a copy)."""
        return self._protocol.broker_api_versions

    @property
    def finalized_features(self) -> dict[str, int]:
        """The cluster's finalized feature levels this broker reported in ApiVersions (KIP-584), a copy."""
        return self._protocol.finalized_features

    @property
    def finalized_features_epoch(self) -> int:
        """The epoch of :attr:`finalized_features` (-1: none reported)."""
        return self._protocol.finalized_features_epoch

    def api_version(self, api_key: int) -> int:
        """The highest version of ``api_key`` that both aioproducer and the broker speak.

        Raises :class:`~aioproducer.errors.UnsupportedVersionError` naming both
        ranges when they do not overlap (or one side lacks the API): a
        configuration problem (a too old or too new broker), not something to retry.
        """
        return self._protocol.api_version(api_key)

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
        peer's answer is not Kafka; :class:`KafkaTimeoutError` when it does
        not answer within ``request_timeout_ms``. On any failure the connection is closed.
        """
        if self._connect_called:
            raise RuntimeError(f"{self!r}: connect() may be called once")
        self._connect_called = True
        loop = self._loop = asyncio.get_running_loop()
        self._now = loop_clock(loop)
        try:
            reader = await self._open()
            if self._protocol.state is _CLOSED:
                raise self._not_connected_error()  # close() ran while the socket was opening
            self._set_buffer_sizes()
            self._feed_directly()
            sock = self._plain_socket()
            self._may_offload = SocketWriter is not None and sock is not None
            self._fd = sock.fileno() if sock is not None and _writev is not None else -1
            mechanism = await self._new_mechanism()
            self._reader_task = asyncio.create_task(self._read_loop(reader), name=f"aioproducer-reader-{self.address}")
            negotiated: asyncio.Future[Any] = loop.create_future()
            token = functools.partial(_settle, negotiated)
            self._write(self._protocol.initiate(token, self._now(), mechanism), token)
            self._arm_timer()
            await self._drain()
            await negotiated
            if not self.is_connected:
                raise self._not_connected_error()  # the stream broke right after the ApiVersions answer
            self._schedule_reauthentication()
        except BaseException as exc:
            reason = exc if isinstance(exc, KafkaError) else None
            await self._close(reason)
            raise

    async def _new_mechanism(self) -> SaslMechanism | None:
        """A fresh SASL mechanism client for one authentication, or None without SASL."""
        if self._authenticator is None:
            return None
        return await self._authenticator(self.host)

    # ------------------------------------------------------ re-authentication

    def _schedule_reauthentication(self) -> None:
        """Start re-authenticating when the state machine says the session is running out (KIP-368)."""
        at = self._protocol.reauthenticate_at
        loop = self._loop
        if at is None or loop is None or self._torn_down:
            return
        self._reauth_timer = loop.call_at(at / 1000.0, self._start_reauthentication)

    def _start_reauthentication(self) -> None:
        self._reauth_timer = None
        if not self._torn_down:
            self._reauth_task = asyncio.ensure_future(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        """One re-authentication: a new mechanism client (a new token), the exchange, the next schedule.

        Requests in flight are answered meanwhile; new ones wait for a slot, which frees
        when it ends. Its failure breaks the connection like any other.
        """
        try:
            mechanism = await self._new_mechanism()
        except KafkaError as exc:
            self._abort(exc)
            return
        if mechanism is None or self._protocol.state is not _READY:
            return
        loop = self._loop
        assert loop is not None
        done: asyncio.Future[Any] = loop.create_future()
        events = self._protocol.begin_reauthentication(functools.partial(_settle, done), mechanism, self._now())
        if events:
            self._handle(events)
        try:
            await done
        except KafkaError as exc:
            self._log.warning("%r: re-authentication failed: %s", self, exc)
            return
        self._log.debug("%r: re-authenticated", self)
        self._schedule_reauthentication()
        if self.on_sendable is not None:
            self.on_sendable()

    async def _open(self) -> asyncio.StreamReader:
        """The TCP connection, within ``connect_timeout_ms``."""
        deadline = asyncio.timeout(self.connect_timeout_ms / 1000)
        try:
            # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancellation
            # that arrives as the connection completes, and a close() while starting then
            # waited for a whole bootstrap (measured: 15 s against a slow broker).
            async with deadline:
                reader, self._writer = await self._open_streams(self.host, self.port)
        except TimeoutError:
            if not deadline.expired():
                raise
            raise KafkaConnectionError(
                f"timed out connecting to {self.address} (node {self.node_id}) after {self.connect_timeout_ms} ms"
            ) from None
        except OSError as exc:
            raise KafkaConnectionError(
                f"could not connect to {self.address} (node {self.node_id}): {exc.strerror or exc}"
            ) from exc
        return reader

    def _feed_directly(self) -> None:
        """Hand what the socket reads to the state machine as it arrives (``_DirectFeed``), before anything is sent.

        Only over asyncio's own streams (``open_connection``, with or without TLS); a stream of
        another kind (an ``open_streams`` of a test's) keeps the reader task's reads. A broker
        speaks only when spoken to, so nothing is in the reader before the first request;
        whatever were would still be read by the reader task, in order, ahead of the rest.
        """
        assert self._writer is not None
        transport = self._writer.transport
        streams = transport.get_protocol()
        if isinstance(streams, asyncio.StreamReaderProtocol):
            transport.set_protocol(_DirectFeed(streams, self._receive))

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
        broker never answers: returns once the frame is written, which frees the slot.

        Raises :class:`KafkaConnectionError` (retriable) when the connection is
        or becomes broken, :class:`KafkaTimeoutError` when no response came in
        ``request_timeout_ms`` (the connection is then closed), and
        :class:`ProtocolError` when this request's response does not decode.
        """
        if not self.is_connected:
            raise self._not_connected_error()
        if version is None:
            version = self.api_version(api_key)
        protocol = self._protocol
        chosen = version

        def submit(token: _Callback, now: float) -> Chunks:
            return protocol.send_request(
                token, api_key, chosen, body, now, expect_response=expect_response, reserved=True
            )

        response = await self._request(submit, expect_response)
        return response if expect_response else None

    async def produce(
        self,
        topic_data: TopicData,
        *,
        acks: int,
        timeout_ms: int,
        transactional_id: str | None = None,
        transaction_v2: bool = False,
    ) -> AnyProduceResponse | None:
        """Send one Produce request through the fast codec and wait for its response.

        ``transaction_v2``: as Produce v12 (transactions v2, ``ClientConnection.produce_version``).

        ``None`` for ``acks=0`` (no response; returns once the frame is written,
        so a producer that sends faster than the socket drains is held back).
        Errors as :meth:`send`.
        """
        if not self.is_connected:
            raise self._not_connected_error()
        protocol = self._protocol
        protocol.produce_version(transaction_v2)  # an UnsupportedVersionError before waiting for a slot

        def submit(token: _Callback, now: float) -> Chunks:
            return protocol.send_produce(
                token, topic_data, now, acks=acks, timeout_ms=timeout_ms, transactional_id=transactional_id,
                reserved=True, transaction_v2=transaction_v2,
            )

        response: AnyProduceResponse | None = await self._request(submit, acks != 0)
        return response if acks != 0 else None

    def send_produce(
        self,
        topic_data: TopicData,
        *,
        acks: int,
        timeout_ms: int,
        on_response: ProduceCallback,
        transactional_id: str | None = None,
        transaction_v2: bool = False,
    ) -> None:
        """Write one Produce request now; its outcome goes to ``on_response`` later.

        No task, no future, no await. Needs a free in-flight slot (check :meth:`can_send_more`
        first; ``RuntimeError`` otherwise) and a response (``acks`` 1 or -1; ``acks=0`` has no
        response to free the slot and no flow control: use :meth:`produce`). Raises
        :class:`KafkaConnectionError` when not connected and ``ValueError`` for values that do
        not encode, in both cases before anything is sent.

        ``on_response(response, None)`` runs when the response is read,
        ``on_response(None, error)`` when the request times out
        (:class:`KafkaTimeoutError`), the connection breaks or is closed
        (:class:`KafkaConnectionError`) or the response does not decode
        (:class:`ProtocolError`): exactly once, never from inside this call.
        """
        if acks == 0:
            raise ValueError("acks=0 gets no response: use produce()")
        if not self.try_send_produce(topic_data, on_response, acks, timeout_ms, transactional_id, transaction_v2):
            self._protocol.check_sendable()  # raises why: not READY, or no slot free
            raise AssertionError(f"{self!r}: the state machine took no request and says it could")

    def try_send_produce(
        self,
        topic_data: TopicData,
        on_response: ProduceCallback,
        acks: int,
        timeout_ms: int,
        transactional_id: str | None,
        transaction_v2: bool,
    ) -> bool:
        """:meth:`send_produce` if the connection takes the request now (True); else False, nothing done.

        The sender's hot path (``ClientConnection.try_send_produce``): False when not READY, no
        slot is free or ``acks`` is 0, and the sender then sends through a task that waits for
        what is missing. The frame is held, to leave with the pass's other requests in one write
        (``_write_frame``'s way for it, written out).
        """
        frame = self._protocol.try_send_produce(
            on_response, topic_data, self._now(), acks, timeout_ms, transactional_id, transaction_v2
        )
        if frame is None:
            return False
        held = self._held
        if not held:
            loop = self._loop
            assert loop is not None
            try:
                loop.call_soon(self.flush_writes)
            except BaseException:  # a closed loop: as a write refused in _write
                self._abort(KafkaConnectionError(f"writing to {self.address} (node {self.node_id}) failed"),
                            skip=on_response)
                raise
        held.extend(frame)
        self._held_requests += 1  # counted in the byte counts when written (``_write_held``)
        if self._timer is None:
            self._arm_timer()
        return True

    async def _request(self, submit: _Submit, expect_response: bool) -> Any:
        """The awaitable form of a request: a slot, a future-settling token, the write, the outcome.

        ``submit`` sends the request on the slot reserved here. Without a
        response expected, the result is None once the frame is written.
        """
        await self._acquire_slot()
        loop = self._loop
        assert loop is not None
        future: asyncio.Future[Any] = loop.create_future()
        token = functools.partial(_settle, future)
        try:
            frame = submit(token, self._now())
        except BaseException:
            self._release_slot()  # not connected, or the body does not encode: nothing was sent
            raise
        self._write(frame, token)
        self._arm_timer()
        try:
            await self._drain()
        finally:
            if not expect_response and self._protocol.request_written(token):
                _settle(future, None, None)
                self._wake_slot_waiters()
        return await future

    def _clock_unset(self) -> float:
        raise AssertionError(f"{self!r}: the clock is read before connect()")

    def _write(self, frame: Chunks, token: _Callback, offload: bool = False) -> None:
        """Write a request's frame; if that is refused, the caller gets the exception, not ``token``.

        ``offload``: the frame may start the writer thread (``_write_frame``): ``send_produce``'s
        only, whose requests are bounded by the in-flight slots and need no drain. An awaitable
        form's frame (``acks=0`` above all: "sent" is "drained") goes through the transport
        unless the thread still holds frames, which keeps the order.
        """
        writer = self._writer
        assert writer is not None
        try:
            # A socket error in here surfaces later, in the reader (connection lost), which fails the request.
            self._write_frame(writer, frame, offload)
        except BaseException:
            self._abort(KafkaConnectionError(f"writing to {self.address} (node {self.node_id}) failed"), skip=token)
            raise

    def _write_frame(self, writer: asyncio.StreamWriter, frame: Chunks, offload: bool = False) -> None:
        """Every frame's one way out, in order: held to go with the others of this callback, or written now.

        Why held: the sender's pass writes a node up to ``max.in.flight`` requests one after
        another (five in nearly every pass of the peers' worker, at 100 B, 1 KB and 10 KB
        alike), and each write to a socket pays the kernel's fixed cost of a send. Held, a
        ``send_produce`` frame goes out with the others of the same loop callback in one write,
        scheduled at the first and called by the sender at the end of its pass (``flush_writes``): ``benchmarks/write_coalescing.py`` measures
        what that saves. Any other frame (an awaited request, whose "sent" means "drained", or
        one written before the connection is ready) writes what is held first, then itself.
        A frame is counted in the byte counts when it is written: a held one with the others
        held (``_write_held``), any other here.
        """
        protocol = self._protocol
        if offload and protocol.state is _READY:
            held = self._held
            if not held:
                loop = self._loop
                assert loop is not None
                loop.call_soon(self.flush_writes)
            held.extend(frame)
            self._held_requests += 1
            return
        if self._held:
            self._write_held(writer)
        self._write_counted(writer, frame, offload, 1)

    def flush_writes(self) -> None:
        """Write the frames held in this callback now, as one; a write that fails closes the connection.

        The sender calls it at the end of its pass, so that its requests leave in the same
        callback; each first held frame also schedules it (``call_soon``), so that nothing
        depends on a caller remembering to. A no-op when nothing is held.
        """
        writer = self._writer
        if not self._held or self._torn_down or writer is None:
            return
        try:
            self._write_held(writer)
        except Exception as exc:  # noqa: BLE001 - as a write refused in _write: the requests fail, not the loop
            self._abort(KafkaConnectionError(f"writing to {self.address} (node {self.node_id}) failed: {exc!r}"))

    def _write_held(self, writer: asyncio.StreamWriter) -> None:
        """The held frames out as one write, counted in the byte counts together (one call, not one a request)."""
        frame, self._held = self._held, []
        requests, self._held_requests = self._held_requests, 0
        self._write_counted(writer, frame, True, requests)

    def _write_counted(self, writer: asyncio.StreamWriter, frame: Chunks, offload: bool, requests: int) -> None:
        """``frame`` (``requests`` requests' chunks) out through ``_write_out``, then counted in the byte counts."""
        size = sum(map(len, frame))
        self._write_out(writer, frame, size, offload)
        counts = self.byte_counts
        if counts is not None:
            counts.sent(self._protocol.node_id, size, self._now(), requests)

    def _write_out(self, writer: asyncio.StreamWriter, frame: Chunks, size: int, offload: bool) -> None:
        """Frames out, in order: the writer thread, one ``writev`` (``offload``: ``send_produce``'s only), or the transport.

        Why a thread: the kernel's copy of a request into the socket is done by whichever thread
        calls ``send()``, and for large requests it is the largest single cost of the event loop's
        thread (``docs/design/native-batches.md``; ``WRITER_THREAD_MIN_BYTES`` for the figures).
        The thread never takes the GIL and copies nothing: it reads the chunks in place. Small
        frames stay on the loop's thread: handing over costs a wake-up, and a request/acknowledge
        caller would wait for the thread to be scheduled. The order of the
        stream is kept: while the thread has frames, every frame goes to it; a frame goes to a
        new or idle thread only when the transport's buffer is empty.
        """
        thread = self._socket_writer
        if thread is not None and not thread.idle:
            thread.write(frame)
        elif not offload or self._protocol.state is not _READY:
            writer.writelines(frame)
        else:
            transport = writer.transport
            if size >= WRITER_THREAD_MIN_BYTES and self._may_offload and transport.get_write_buffer_size() == 0:
                if thread is None:
                    thread = self._socket_writer = self._start_writer_thread()
                if thread is None:
                    writer.writelines(frame)
                else:
                    thread.write(frame)
            elif (
                self._fd >= 0
                and len(frame) <= _WRITEV_MAX_CHUNKS
                and not transport.is_closing()
                and transport.get_write_buffer_size() == 0
            ):
                self._write_direct(writer, frame, size)
            else:
                writer.writelines(frame)

    def _write_direct(self, writer: asyncio.StreamWriter, frame: Chunks, size: int) -> None:
        """A frame out through the socket's descriptor in one ``writev``, what it did not take to the transport.

        Only while the transport's buffer is empty (nothing of the stream is waiting, so the
        order is kept) and it is not closing (so the descriptor is still its socket's). A
        would-block or any other error writes nothing here: the transport then takes the whole
        frame and meets the error itself, closing the connection as it always did.
        """
        assert _writev is not None
        try:
            sent = _writev(self._fd, frame)
        except OSError:
            sent = 0
        if sent == size:
            return
        rest: Chunks = []
        for chunk in frame:
            length = len(chunk)
            if sent >= length:
                sent -= length
            elif sent:
                rest.append(memoryview(chunk)[sent:])
                sent = 0
            else:
                rest.append(chunk)
        writer.writelines(rest)

    def _plain_socket(self) -> socket.socket | None:
        """The connection's socket if it is a plain one (no TLS: the transport encrypts), else None."""
        writer = self._writer
        if writer is None or writer.get_extra_info("sslcontext") is not None:
            return None
        sock = writer.get_extra_info("socket")
        return sock if sock is not None and sock.fileno() >= 0 else None

    def _start_writer_thread(self) -> SocketWriter | None:
        """The writer thread, over a duplicate of the socket it owns; None (and no more tries) if it cannot start."""
        sock = self._plain_socket()
        assert sock is not None and SocketWriter is not None
        try:
            # The thread owns the duplicate from here and closes it, also when it cannot start.
            return SocketWriter(os.dup(sock.fileno()))
        except OSError as exc:  # no descriptor left, or no thread: the transport writes, as it always can
            self._may_offload = False
            self._log.warning("%r: large requests are written on the event loop's thread: %s", self, exc)
            return None

    async def _drain(self) -> None:
        """Wait until the transport's buffer is low: flow control for the awaitable forms.

        Never hangs on a dead connection: a request timeout (or any break)
        drops the socket, which ends the wait.
        """
        writer = self._writer
        assert writer is not None
        try:
            await writer.drain()
        except OSError as exc:
            self._abort(KafkaConnectionError(f"writing to {self.address} (node {self.node_id}) failed: {exc}"))

    # ------------------------------------------------------------------ slots

    async def _acquire_slot(self) -> None:
        """Wait until an in-flight slot is free (FIFO among waiters) and reserve it."""
        protocol = self._protocol
        if protocol.has_free_slot and not self._slot_waiters:
            protocol.acquire_slot()
            return
        loop = self._loop
        assert loop is not None
        waiter: asyncio.Future[None] = loop.create_future()
        self._slot_waiters.append(waiter)
        try:
            await waiter  # _wake_slot_waiters reserved the slot for us
        except BaseException:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self._release_slot()  # reserved, but we are not going to use it
            else:
                try:
                    self._slot_waiters.remove(waiter)
                except ValueError:
                    pass
            raise

    def _release_slot(self) -> None:
        self._protocol.release_slot()
        self._wake_slot_waiters()

    def _wake_slot_waiters(self) -> None:
        """Reserve free slots for the first waiters, in order."""
        waiters = self._slot_waiters
        protocol = self._protocol
        while waiters and protocol.has_free_slot:
            waiter = waiters.popleft()
            if not waiter.done():
                protocol.acquire_slot()
                waiter.set_result(None)

    # ------------------------------------------------------------------ timer

    def _arm_timer(self) -> None:
        """Have the timer fire at the state machine's next deadline (it only moves later, but be sure)."""
        deadline = self._protocol.next_deadline
        if deadline is None or self._torn_down:
            return
        timer = self._timer
        if timer is not None:
            if self._timer_at <= deadline:
                return
            timer.cancel()
        loop = self._loop
        assert loop is not None
        self._timer_at = deadline
        self._timer = loop.call_at(deadline / 1000.0, self._on_timer)

    def _on_timer(self) -> None:
        """A deadline may have passed: let the state machine decide, then re-arm."""
        self._timer = None
        events = self._protocol.check_timeouts(self._now())
        if events:
            self._handle(events)
        else:
            self._arm_timer()

    # ------------------------------------------------------------------- read

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        """Feed what the socket reads to the state machine until the stream ends or breaks.

        Never raises: every way out other than cancellation closes the
        connection, which fails what is in flight.
        """
        protocol = self._protocol
        try:
            while True:
                data = await reader.read(_READ_SIZE)  # with _DirectFeed: only the end of the stream, or its error
                if not data and self._socket_writer is not None and self._socket_writer.error is not None:
                    # The writer thread failed and shut the socket down: its error is the cause.
                    self._abort(KafkaConnectionError(
                        f"connection to {self.address} (node {self.node_id}) broke: {self._socket_writer.error}"
                    ))
                    return
                self._receive(data)
                if not data or protocol.state is _CLOSED:
                    return
        except ssl.SSLError as exc:
            if protocol.is_established:
                self._abort(KafkaConnectionError(f"TLS connection to {self.address} (node {self.node_id}) broke: {exc}"))
            else:  # the broker refused us after the handshake (TLS 1.3 sends "certificate required" then)
                self._abort(SslAuthenticationError(
                    f"TLS with {self.address} (node {self.node_id}) failed before the first answer: "
                    f"{exc.reason or exc} (does the broker require a client certificate: ssl.keystore.*?)"
                ))
        except OSError as exc:
            self._abort(KafkaConnectionError(f"connection to {self.address} (node {self.node_id}) broke: {exc}"))

    def _receive(self, data: bytes) -> None:
        """What the socket read (``b\"\"``: its end), through the state machine to its events' outcomes."""
        if self._torn_down:
            return  # closed meanwhile: every request in flight was failed already
        counts = self.byte_counts
        if counts is not None:
            counts.received(self.node_id, len(data))
        events = self._protocol.receive_data(data, self._now())
        if events:
            self._handle(events)

    def _handle(self, events: list[Event[_Callback]]) -> None:
        """Act on the state machine's events, in order (the answers of a run of :class:`ProduceToken` together)."""
        broken = events[-1] if isinstance(events[-1], ConnectionBroken) else None
        if broken is not None:
            self._teardown(requested=False)
            self._log_closing(events, broken.error)
        else:
            self._wake_slot_waiters()  # before any callback could take a slot meant for a waiter
        tokens: list[ProduceToken] = []  # a run of ProduceToken answers not handed over yet
        answers: list[Any] = []
        for event in events:
            if type(event) is ProduceAnswered:
                pairs: Iterable[tuple[Any, Any]] = zip(event.tokens, event.answers)
            elif type(event) is ResponseReceived:
                pairs = ((event.token, event.body),)
            else:
                tokens, answers = self._end_run(tokens, answers)
                if isinstance(event, RequestFailed):
                    self._run_callback(event.token, None, event.error)
                elif isinstance(event, Throttled):
                    self._report_throttle(event.throttle_time_ms)
                elif isinstance(event, DataToSend):
                    self._send_data(event.data)
                continue
            for token, answer in pairs:
                if type(token) is ProduceToken:
                    if tokens and tokens[0].on_answers is not token.on_answers:
                        tokens, answers = self._end_run(tokens, answers)
                    tokens.append(token)
                    answers.append(answer)
                else:
                    tokens, answers = self._end_run(tokens, answers)
                    self._run_callback(token, answer, None)
        self._end_run(tokens, answers)
        if broken is not None:
            if self.on_lost is not None:
                self.on_lost(self, broken.error)
        else:
            self._arm_timer()

    def _end_run(self, tokens: list[ProduceToken], answers: list[Any]) -> tuple[list[ProduceToken], list[Any]]:
        """End a run of answers (``_handle``): hand it over if it has any, and start an empty one."""
        if tokens:
            self._run_answers(tokens, answers)
        return [], []

    def _run_answers(self, tokens: list[ProduceToken], answers: list[Any]) -> None:
        """Hand a run of answers to their tokens' ``on_answers`` (one alone: to the token itself), bugs reported."""
        if len(tokens) == 1:
            self._run_callback(tokens[0], answers[0], None)
            return
        try:
            tokens[0].on_answers(tokens, answers)
        except Exception as exc:  # noqa: BLE001 - the reader must survive its callers' bugs
            self._report_bug("exception in a Produce response callback", exc)

    def _report_throttle(self, throttle_time_ms: int) -> None:
        """Pass a Produce response's throttle time (v6+, KIP-219) to the owner, which holds the node back."""
        if self.on_throttle is None:
            return
        try:
            self.on_throttle(self.node_id, throttle_time_ms)
        except Exception as exc:  # noqa: BLE001 - the reader must survive its owner's bugs
            self._report_bug("exception in the on_throttle callback", exc)

    def _send_data(self, data: Chunks) -> None:
        """Write a request the state machine sends by itself (an ApiVersions retry, a SASL step)."""
        writer = self._writer
        if self._torn_down or writer is None:
            return
        try:
            self._write_frame(writer, data)
        except Exception as exc:  # noqa: BLE001 - the transport refused: the request fails, not the reader
            self._abort(KafkaConnectionError(f"writing to {self.address} (node {self.node_id}) failed: {exc!r}"))

    def _report_bug(self, message: str, exc: Exception) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_exception_handler({"message": f"{self!r}: {message}", "exception": exc})

    def _run_callback(self, callback: _Callback, response: Any, error: KafkaError | None) -> None:
        """Tell a request its outcome; a callback's bugs are reported, never allowed to break the stream."""
        try:
            callback(response, error)
        except Exception as exc:  # noqa: BLE001 - the reader must survive its callers' bugs
            self._report_bug("exception in a Produce response callback", exc)

    def _not_connected_error(self) -> KafkaError:
        if self.close_reason is not None:
            return KafkaConnectionError(f"connection to {self.address} is closed: {self.close_reason}")
        return KafkaConnectionError(f"not connected to {self.address} (node {self.node_id})")

    # ------------------------------------------------------------------ close

    def _abort(self, error: KafkaError, *, requested: bool = False, skip: _Callback | None = None) -> None:
        """Break the connection now: fail every request in flight with ``error``, drop the socket.

        Synchronous so the reader task, a failed write and ``close()`` can all
        call it without awaiting; only the first call has an effect. ``skip``:
        a request whose caller learns of the failure by an exception instead.
        Awaiting the socket's end and the reader task is left to ``close()``.
        """
        if self._torn_down:
            return
        events = self._protocol.close(error)
        self._teardown(requested=requested)
        self._log_closing(events, error)
        for event in events:
            if isinstance(event, RequestFailed) and event.token is not skip:
                self._run_callback(event.token, None, event.error)
        if not requested and self.on_lost is not None:
            self.on_lost(self, error)

    def _teardown(self, *, requested: bool) -> None:
        """The socket side of closing: timer, slot waiters, socket, reader task.

        A connection that broke by itself drops its socket with whatever is
        still unsent (every request was failed: nobody waits for those bytes,
        and a graceful close would wait for a peer that may never read them);
        one closed on request closes gracefully.
        """
        self._torn_down = True
        # Frames held for this callback's write belong to requests failed with the connection:
        # never written, they cannot reach the broker after their records were retried (nor are
        # they counted as written).
        self._held = []
        self._held_requests = 0
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        reauth = self._reauth_task
        if reauth is not None and not reauth.done() and reauth is not asyncio.current_task():
            reauth.cancel()
        waiters, self._slot_waiters = self._slot_waiters, collections.deque()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(self._not_connected_error())
        thread = self._socket_writer
        if thread is not None:
            if requested:
                thread.close()  # writes what it holds, then closes its descriptor: the transport's close follows
            else:
                sock = self._plain_socket()
                thread.abort(-1 if sock is None else sock.fileno())  # ends a write in progress at once
        writer = self._writer
        if writer is not None:
            if requested:
                writer.close()
            else:
                writer.transport.abort()
        task = self._reader_task
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    def _log_closing(self, events: list[Event[_Callback]], error: KafkaError) -> None:
        failed = sum(1 for e in events if isinstance(e, RequestFailed))
        if failed:
            self._log.info("%r: closing with %d requests in flight: %s", self, failed, error)

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
