"""FaultProxy: a Kafka-aware TCP proxy in front of one broker listener, to break the network on purpose.

Theory of operation. A test points its client (or a broker's advertised
listener) at the proxy instead of the broker; the proxy forwards bytes both
ways and, on command, misbehaves the way networks and brokers do::

    with FaultProxy(("127.0.0.1", broker_port)) as proxy:
        conn = BrokerConnection(proxy.host, proxy.port, 1, client_id="t")
        proxy.swallow_responses(1, api_key=0, then="close")  # next Produce: written, answer lost
        proxy.wait_swallowed(1, timeout=5)

Binding and upstream. The listening socket is bound in the constructor (port 0:
the OS picks), so ``proxy.port`` is known before the broker behind it even
exists; a cluster can start one proxy per broker, advertise the proxies' ports
and start the brokers afterwards. The upstream connection is opened lazily,
one per accepted client connection: a broker that is down or restarting is
seen by clients as a connection that closes (RST) at once, and a new client
connection after the restart reaches the new broker.

Threading. The proxy runs its own event loop on a daemon thread, so it serves
sync tests, blocking clients on other threads and asyncio tests on another
loop alike. Every piece of mutable state (connections, rules, counters) is
owned by :class:`_ProxyCore` and touched only on that loop. The public
methods of :class:`FaultProxy` are synchronous and thread-safe: they submit a
coroutine to the loop and wait for its result, so when ``drop_connections()``
returns the sockets are closed. ``FaultProxy`` itself owns only the thread,
the loop and the ``closed`` flag (behind a lock). Call them from any thread
except the proxy's own (that would deadlock; it raises instead). From an
asyncio test they block the test's loop only for the hand-over;
:meth:`FaultProxy.wait_swallowed_async` is the form that waits without blocking.

Data path. Per proxied connection, two pump tasks read (client -> upstream,
upstream -> client) and two writer tasks write; between them an unbounded
queue of items (data, graceful close, abort), each stamped with the time it
may be written (arrival + delay). Reading never stops, so while
:meth:`~FaultProxy.pause` holds the writers the bytes pile up in the proxy, as
at a hung broker whose socket buffers still accept data. Because every item
goes through the same queue, delays and pauses keep the order of bytes, of
closes and of aborts.

Kafka awareness. With ``kafka_frames=True`` (the default) each pump cuts its
stream into frames with :class:`~aioproducer.testing.proxy_frames.FrameMatcher`
and forwards whole frames only, so each response is known by the API key of
the request it answers (matched by correlation id; ``acks=0`` Produce requests
get no answer and leave no trace). That is what
:meth:`~FaultProxy.swallow_responses` needs: the request reaches the broker,
the broker's answer reaches the proxy, and the proxy throws it away. Then the
client connection is aborted (``then="close"``: the client sees a request
written whose response is lost) or stays open and silent for good
(``then="hang"``: the client has to time out). A stream that does not parse
as Kafka frames (negative or absurd size) is aborted and counted in
``stats.malformed_streams``. TLS or SASL-encrypted bytes cannot be parsed:
use ``kafka_frames=False``, which forwards opaque chunks; drop, delay, pause
and refuse still work, ``swallow_responses`` raises.

Closing. A client or broker closing its side (EOF) closes the whole proxied
connection gracefully once the bytes queued before it are written (Kafka does
not half-close). Faults close with an abort that sends RST (``SO_LINGER`` 0).
:meth:`FaultProxy.close` is idempotent: it closes the listener, aborts every
connection, stops the loop and joins the thread.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import socket
import struct
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NamedTuple

from aioproducer.testing._loop_thread import LoopThreadService
from aioproducer.testing.proxy_frames import FrameMatcher, MalformedFrameError

__all__ = ["FaultProxy", "ProxyClosedError", "ProxyStats", "Then"]

log: logging.Logger = logging.getLogger(__name__)


#: What happens to a connection after one of its responses was swallowed.
Then = Literal["close", "hang"]

_READ_SIZE: Final = 64 * 1024
#: How long a graceful close may take to flush before the socket is aborted.
_CLOSE_FLUSH_S: Final = 1.0
#: How long close() waits for the loop to tear everything down.
_SHUTDOWN_S: Final = 10.0

_DATA, _EOF, _ABORT = 0, 1, 2


class ProxyClosedError(RuntimeError):
    """A :class:`FaultProxy` method was called after :meth:`~FaultProxy.close`."""


@dataclass(frozen=True, slots=True)
class ProxyStats:
    """A snapshot of the proxy's counters since it was created.

    "Forwarded" counts frames written to the other side's socket (a request
    held by a pause or a delay is not forwarded yet). Frame counts stay zero
    with ``kafka_frames=False``; byte counts do not.
    """

    connections_accepted: int
    #: Of those accepted, closed at once because of :meth:`FaultProxy.refuse`.
    connections_refused: int
    connections_open: int
    #: Client connections closed because the upstream connection failed.
    upstream_failures: int
    #: api_key -> requests written to the broker.
    requests_forwarded: dict[int, int]
    responses_forwarded: int
    #: Responses thrown away by :meth:`FaultProxy.swallow_responses` rules.
    responses_swallowed: int
    #: Responses thrown away because their connection hangs (``then="hang"``).
    responses_discarded: int
    bytes_from_client: int
    bytes_to_upstream: int
    bytes_from_upstream: int
    bytes_to_client: int
    #: Connections aborted because their bytes were not Kafka frames.
    malformed_streams: int


@dataclass(slots=True)
class _Counters:
    """The mutable form of :class:`ProxyStats`; owned by the proxy loop."""

    connections_accepted: int = 0
    connections_refused: int = 0
    upstream_failures: int = 0
    requests_forwarded: collections.Counter[int] = field(default_factory=collections.Counter)
    responses_forwarded: int = 0
    responses_swallowed: int = 0
    responses_discarded: int = 0
    bytes_from_client: int = 0
    bytes_to_upstream: int = 0
    bytes_from_upstream: int = 0
    bytes_to_client: int = 0
    malformed_streams: int = 0


@dataclass(slots=True)
class _SwallowRule:
    """The next ``remaining`` responses to ``api_key`` (None: any) are thrown away."""

    remaining: int
    api_key: int | None
    then: Then

    def take(self, api_key: int | None) -> bool:
        """Whether to swallow a response to ``api_key``; counts it if so."""
        if self.remaining <= 0 or (self.api_key is not None and api_key != self.api_key):
            return False
        self.remaining -= 1
        return True


class _Item(NamedTuple):
    """What a writer task does next, not before ``due`` (loop time)."""

    due: float
    kind: int  # _DATA, _EOF or _ABORT
    data: bytes = b""
    requests: tuple[int, ...] = ()  # api keys of the request frames in ``data``
    responses: int = 0  # response frames in ``data``


def _linger_zero(sock: Any) -> None:
    """Make closing ``sock`` (a socket, or asyncio's ``TransportSocket`` view of one) send RST, not FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass  # already closed: closing it is all there is to do


def _reset(sock: socket.socket) -> None:
    """Close a socket no transport owns yet with RST."""
    _linger_zero(sock)
    sock.close()


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close at once with RST, dropping unsent bytes: a network failure, not a goodbye."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        _linger_zero(sock)
    writer.transport.abort()


async def _close_gracefully(writer: asyncio.StreamWriter) -> None:
    """Flush and close (FIN); abort if the peer does not let the bytes out in time."""
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), _CLOSE_FLUSH_S)
    except (OSError, TimeoutError):
        _abort(writer)


class _Link:
    """One client connection and its upstream connection. Owned by the proxy loop.

    ``ending`` is resolved once, by whoever first decides the link is over
    (a pump at EOF or error, a writer at a close/abort item, a fault):
    True to abort, False to close gracefully. :meth:`_ProxyCore._serve` waits
    for it and tears everything down.
    """

    def __init__(self, sock: socket.socket, kafka_frames: bool) -> None:
        #: The accepted socket; owned by ``client_writer``'s transport once that exists.
        self.sock = sock
        self.client_reader: asyncio.StreamReader | None = None
        self.client_writer: asyncio.StreamWriter | None = None
        self.upstream_reader: asyncio.StreamReader | None = None
        self.upstream_writer: asyncio.StreamWriter | None = None
        self.matcher = FrameMatcher() if kafka_frames else None
        self.to_upstream: asyncio.Queue[_Item] = asyncio.Queue()
        self.to_client: asyncio.Queue[_Item] = asyncio.Queue()
        #: After a swallow with then="hang": nothing reaches the client any more.
        self.hung = False
        #: The broker closed a hung link: the client's bytes go nowhere now.
        self.upstream_gone = False
        self.ending: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.task: asyncio.Task[None] | None = None

    def end(self, abort: bool) -> None:
        """Ask for the link to be torn down (the first request wins)."""
        if not self.ending.done():
            self.ending.set_result(abort)


class _ProxyCore:
    """All the proxy's state and behaviour; every method runs on the proxy loop."""

    def __init__(self, upstream: tuple[str, int], kafka_frames: bool, connect_timeout: float) -> None:
        self._upstream = upstream
        self._kafka_frames = kafka_frames
        self._connect_timeout = connect_timeout
        self._listener: socket.socket | None = None
        self._links: set[_Link] = set()
        self._counters = _Counters()
        self._delay = 0.0
        self._refusing = False
        self._swallow: _SwallowRule | None = None
        self._flowing = asyncio.Event()
        self._flowing.set()
        #: Set (and replaced) whenever a response is swallowed: wakes wait_swallowed.
        self._swallowed_event = asyncio.Event()

    # ------------------------------------------------------------ lifecycle

    async def start(self, listener: socket.socket) -> None:
        # Not asyncio.start_server: in Python 3.11 a connection accepted just before
        # Server.close() is leaked (its transport fails to attach to the closed server).
        # Accepting here, synchronously, leaves no moment where a socket has no owner.
        asyncio.get_running_loop().add_reader(listener.fileno(), self._accept, listener)
        self._listener = listener

    async def shutdown(self) -> None:
        """Stop listening, abort every connection and wait until they are gone."""
        if self._listener is not None:
            asyncio.get_running_loop().remove_reader(self._listener.fileno())
            self._listener.close()
            self._listener = None
        await self.drop_connections()
        self._flowing.set()

    # ------------------------------------------------------------- controls

    async def drop_connections(self) -> int:
        links = list(self._links)
        for link in links:
            link.end(abort=True)
        await asyncio.gather(*(link.task for link in links if link.task is not None), return_exceptions=True)
        return len(links)

    async def swallow_responses(self, count: int, api_key: int | None, then: Then) -> None:
        self._swallow = _SwallowRule(count, api_key, then)

    async def set_delay(self, seconds: float) -> None:
        self._delay = seconds

    async def set_flowing(self, on: bool) -> None:
        if on:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def refuse(self, on: bool) -> None:
        self._refusing = on

    async def set_upstream(self, upstream: tuple[str, int]) -> None:
        self._upstream = upstream

    async def heal(self) -> None:
        self._swallow = None
        self._delay = 0.0
        self._refusing = False
        self._flowing.set()

    async def wait_swallowed(self, n: int, timeout: float) -> None:
        try:
            async with asyncio.timeout(timeout):
                while self._counters.responses_swallowed < n:
                    await self._swallowed_event.wait()
        except TimeoutError:
            c = self._counters
            left = self._swallow.remaining if self._swallow is not None else 0
            raise TimeoutError(
                f"{c.responses_swallowed} of {n} responses swallowed within {timeout} s "
                f"(rule: {left} still to swallow; responses forwarded: {c.responses_forwarded}, "
                f"requests forwarded: {dict(c.requests_forwarded)}, connections open: {len(self._links)})"
            ) from None

    async def stats(self) -> ProxyStats:
        c = self._counters
        return ProxyStats(
            connections_accepted=c.connections_accepted,
            connections_refused=c.connections_refused,
            connections_open=len(self._links),
            upstream_failures=c.upstream_failures,
            requests_forwarded=dict(c.requests_forwarded),
            responses_forwarded=c.responses_forwarded,
            responses_swallowed=c.responses_swallowed,
            responses_discarded=c.responses_discarded,
            bytes_from_client=c.bytes_from_client,
            bytes_to_upstream=c.bytes_to_upstream,
            bytes_from_upstream=c.bytes_from_upstream,
            bytes_to_client=c.bytes_to_client,
            malformed_streams=c.malformed_streams,
        )

    # ------------------------------------------------------------ a client

    def _accept(self, listener: socket.socket) -> None:
        """The listener is readable: take every pending connection (each at once owned by a link)."""
        while True:
            try:
                sock, _ = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of descriptors, say: the next readiness retries
                log.warning("fault proxy: accept failed: %r", exc)
                return
            self._counters.connections_accepted += 1
            if self._refusing:
                self._counters.connections_refused += 1
                _reset(sock)
                continue
            sock.setblocking(False)
            link = _Link(sock, self._kafka_frames)
            self._links.add(link)
            link.task = asyncio.create_task(self._serve(link), name="fault-proxy-link")

    async def _serve(self, link: _Link) -> None:
        """Connect upstream, run the four tasks of ``link`` until it ends, tear it down."""
        tasks: list[asyncio.Task[None]] = []
        abort = True
        try:
            if await self._open_client(link) and await self._connect_upstream(link):
                assert link.client_writer is not None and link.upstream_writer is not None
                tasks = [
                    asyncio.create_task(self._pump(link, to_upstream=True)),
                    asyncio.create_task(self._pump(link, to_upstream=False)),
                    asyncio.create_task(self._write(link, link.to_upstream, link.upstream_writer, True)),
                    asyncio.create_task(self._write(link, link.to_client, link.client_writer, False)),
                ]
                abort = await link.ending
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if link.client_writer is None:
                _reset(link.sock)  # open_connection failed or was cancelled: nobody else closes it
            writers = [w for w in (link.client_writer, link.upstream_writer) if w is not None]
            if abort:
                for w in writers:
                    _abort(w)
            else:
                await asyncio.gather(*(_close_gracefully(w) for w in writers))
            self._links.discard(link)

    @staticmethod
    async def _open_client(link: _Link) -> bool:
        """Wrap the accepted socket in streams; False if it is already dead."""
        try:
            link.client_reader, link.client_writer = await asyncio.open_connection(sock=link.sock)
        except OSError:
            return False
        return True

    async def _connect_upstream(self, link: _Link) -> bool:
        """Open the link's upstream connection, unless the link ends first; False if it failed."""
        connecting = asyncio.ensure_future(
            asyncio.wait_for(asyncio.open_connection(*self._upstream), self._connect_timeout)
        )
        either: list[asyncio.Future[Any]] = [connecting, link.ending]
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not connecting.done():
                connecting.cancel()
                await asyncio.gather(connecting, return_exceptions=True)
        if connecting.cancelled() or link.ending.done():
            if not connecting.cancelled() and connecting.exception() is None:
                _abort(connecting.result()[1])
            return False
        error = connecting.exception()
        if error is not None:
            self._counters.upstream_failures += 1
            log.debug("fault proxy: upstream %s:%d failed: %r", *self._upstream, error)
            return False
        link.upstream_reader, link.upstream_writer = connecting.result()
        return True

    # ------------------------------------------------------------ data path

    async def _pump(self, link: _Link, *, to_upstream: bool) -> None:
        """Read one side until EOF or error, queueing what the other side should get."""
        reader = link.client_reader if to_upstream else link.upstream_reader
        queue = link.to_upstream if to_upstream else link.to_client
        assert reader is not None
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await reader.read(_READ_SIZE)
            except OSError:
                link.end(abort=True)
                return
            if not data:
                if not to_upstream and link.hung:
                    link.upstream_gone = True  # a hung client hears nothing, not even this
                else:
                    queue.put_nowait(_Item(loop.time() + self._delay, _EOF))
                return
            try:
                items = self._requests(link, data) if to_upstream else self._responses(link, data)
            except MalformedFrameError as exc:
                self._counters.malformed_streams += 1
                log.warning("fault proxy: aborting a connection that is not Kafka: %s", exc)
                link.end(abort=True)
                return
            for item in items:
                queue.put_nowait(item)

    def _requests(self, link: _Link, data: bytes) -> list[_Item]:
        """Client bytes -> what to forward upstream (whole frames, or opaque chunks)."""
        self._counters.bytes_from_client += len(data)
        due = asyncio.get_running_loop().time() + self._delay
        if link.matcher is None:
            return [_Item(due, _DATA, data)]
        frames = link.matcher.from_client(data)
        if not frames:
            return []
        joined = b"".join(f.data for f in frames)
        return [_Item(due, _DATA, joined, requests=tuple(f.api_key for f in frames))]

    def _responses(self, link: _Link, data: bytes) -> list[_Item]:
        """Broker bytes -> what to forward to the client, applying the swallow rule frame by frame."""
        c = self._counters
        c.bytes_from_upstream += len(data)
        due = asyncio.get_running_loop().time() + self._delay
        if link.matcher is None:
            return [] if link.hung else [_Item(due, _DATA, data)]
        kept: list[bytes] = []
        for frame in link.matcher.from_broker(data):
            if link.hung:
                c.responses_discarded += 1
                continue
            rule = self._swallow
            if rule is None or not rule.take(frame.api_key):
                kept.append(frame.data)
                continue
            c.responses_swallowed += 1
            self._swallowed_event.set()
            self._swallowed_event = asyncio.Event()
            if rule.then == "close":
                # Later frames of this chunk die with the connection, like bytes lost in a reset.
                return self._with_data(due, kept, [_Item(due, _ABORT)])
            link.hung = True
        return self._with_data(due, kept, [])

    @staticmethod
    def _with_data(due: float, frames: list[bytes], tail: list[_Item]) -> list[_Item]:
        if not frames:
            return tail
        return [_Item(due, _DATA, b"".join(frames), responses=len(frames)), *tail]

    async def _write(
        self, link: _Link, queue: asyncio.Queue[_Item], writer: asyncio.StreamWriter, upstream: bool
    ) -> None:
        """Write queued items in order, each not before its due time nor while paused."""
        loop = asyncio.get_running_loop()
        c = self._counters
        while True:
            item = await queue.get()
            wait = item.due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            await self._flowing.wait()
            if item.kind != _DATA:
                link.end(abort=item.kind == _ABORT)
                return
            if upstream and link.upstream_gone:
                continue
            try:
                writer.write(item.data)
                await writer.drain()
            except OSError:
                link.end(abort=True)
                return
            if upstream:
                c.bytes_to_upstream += len(item.data)
                c.requests_forwarded.update(item.requests)
            else:
                c.bytes_to_client += len(item.data)
                c.responses_forwarded += item.responses


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv4 or IPv6, as ``host`` resolves)."""
    family, _, _, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.create_server(address[:2], family=family)
    sock.setblocking(False)
    return sock


class FaultProxy(LoopThreadService):
    """A TCP proxy in front of one Kafka broker listener that injects faults on command.

    See the module docstring for how it works. ``upstream`` is the broker's
    ``(host, port)``, connected to per client connection; ``host``/``port``
    is where the proxy listens (port 0: any free port, see :attr:`port`).
    ``connect_timeout`` bounds each upstream connect (seconds).
    """

    _kind = "FaultProxy"
    _closed_error = ProxyClosedError
    _shutdown_timeout = _SHUTDOWN_S

    def __init__(
        self,
        upstream: tuple[str, int],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        kafka_frames: bool = True,
        connect_timeout: float = 5.0,
    ) -> None:
        self.upstream: tuple[str, int] = upstream
        self.kafka_frames = kafka_frames
        sock = _listen(host, port)
        self.host: str = host
        self.port: int = sock.getsockname()[1]
        self._start_thread(f"fault-proxy-{self.port}")
        try:
            self._core: _ProxyCore = self._run(self._make_core(upstream, kafka_frames, connect_timeout))
            self._run(self._core.start(sock))
        except BaseException:
            sock.close()
            self.close()
            raise

    @staticmethod
    async def _make_core(upstream: tuple[str, int], kafka_frames: bool, connect_timeout: float) -> _ProxyCore:
        return _ProxyCore(upstream, kafka_frames, connect_timeout)  # made on the loop that owns it

    # ------------------------------------------------------------- plumbing

    @property
    def address(self) -> str:
        """``host:port`` of the listener, as ``bootstrap.servers`` wants it (IPv6 in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def stats(self) -> ProxyStats:
        """The counters now (a consistent snapshot taken on the proxy loop)."""
        return self._run(self._core.stats())

    # ------------------------------------------------------------- controls

    def drop_connections(self) -> int:
        """Abort (RST) every open client connection and its upstream connection; return how many.

        When this returns, the sockets are closed. New connections are
        accepted as before.
        """
        return self._run(self._core.drop_connections())

    def swallow_responses(self, count: int = 1, *, api_key: int | None = 0, then: Then = "close") -> None:
        """Throw away the next ``count`` responses to requests of ``api_key`` (0: Produce; None: any).

        The requests still reach the broker and it answers; only the answer
        is lost. ``then="close"``: abort that client connection right after
        (in order with the responses before it), so the client sees a request
        written whose response never came. ``then="hang"``: the connection
        stays open but nothing more reaches the client on it (responses are
        counted in ``responses_discarded``), so the client has to time out.
        Replaces the previous rule; ``count=0`` clears it.
        """
        if not self.kafka_frames:
            raise RuntimeError(
                "swallow_responses needs kafka_frames=True: with opaque (e.g. TLS) streams "
                "the proxy cannot tell one response from another"
            )
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        if then not in ("close", "hang"):
            raise ValueError(f"then must be 'close' or 'hang', got {then!r}")
        self._run(self._core.swallow_responses(count, api_key, then))

    def set_delay(self, ms: float) -> None:
        """Delay every chunk forwarded from now on, both ways, by ``ms`` (order is kept)."""
        if ms < 0:
            raise ValueError(f"delay must be >= 0 ms, got {ms}")
        self._run(self._core.set_delay(ms / 1000))

    def pause(self) -> None:
        """Stop writing in both directions, connections open; bytes read meanwhile are kept in order."""
        self._run(self._core.set_flowing(False))

    def resume(self) -> None:
        """Deliver what :meth:`pause` held back and go on forwarding."""
        self._run(self._core.set_flowing(True))

    def set_upstream(self, upstream: tuple[str, int]) -> None:
        """Forward client connections accepted from now on to ``upstream``; open ones keep theirs.

        For a bootstrap address that outlives its brokers: a cluster that moved to new
        ports behind the same name (a load balancer, a DNS alias re-pointed). Open
        connections are not touched: :meth:`drop_connections` ends them if the test wants.
        """
        self._run(self._core.set_upstream(upstream))
        self.upstream = upstream

    def refuse(self, on: bool = True) -> None:
        """While on, accept new client connections and abort them at once (RST); open ones are kept."""
        self._run(self._core.refuse(on))

    def heal(self) -> None:
        """End every fault at once: no rule swallowing responses, no delay, not paused, not refusing.

        Connections already dropped stay dropped; counters (:attr:`stats`) are kept. The pytest
        plugin's ``fault_proxy`` fixture calls it after each test, so one test's fault never
        reaches the next.
        """
        self._run(self._core.heal())

    def wait_swallowed(self, n: int, timeout: float) -> None:
        """Block until ``n`` responses in total have been swallowed, or raise ``TimeoutError`` naming the counts."""
        self._run(self._core.wait_swallowed(n, timeout))

    async def wait_swallowed_async(self, n: int, timeout: float) -> None:
        """:meth:`wait_swallowed` for asyncio code: waits without blocking the caller's loop."""
        future = self._submit(self._core.wait_swallowed(n, timeout))
        try:
            await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if future.cancelled():  # the proxy closed under us, not our caller cancelling
                raise ProxyClosedError(f"{self!r} was closed while waiting") from None
            raise

    # ------------------------------------------------------------ lifecycle

    def _shutdown(self) -> Coroutine[Any, Any, None] | None:
        """At ``close()``: close the listener and every connection (then the loop stops, the thread is joined)."""
        core: _ProxyCore | None = getattr(self, "_core", None)
        return None if core is None else core.shutdown()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<FaultProxy {self.host}:{self.port} -> {self.upstream[0]}:{self.upstream[1]} {state}>"
