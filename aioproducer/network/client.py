"""KafkaClient: bootstrap, cluster metadata, one connection per broker, Produce.

Theory of operation. The client owns every :class:`BrokerConnection` (at most
one per node id, opened on first use) and the current
:class:`~aioproducer.network.metadata.ClusterMetadata` snapshot. It does no
work on its own: there is no background task. Whoever drives the producer
(the sender loop) asks :meth:`KafkaClient.time_to_next_update` on its
wake-ups and calls :meth:`refresh_metadata` when it is due, asks
:meth:`is_ready` / :meth:`connection_delay` to skip brokers in reconnect
backoff without blocking, and calls :meth:`connection` to talk to leaders.

Times. Every duration here is in milliseconds, as in the Java client's
``NetworkClient``/``Metadata``, and every time *point* (``now``) is in
milliseconds of the injected ``clock`` (default: ``clock.monotonic_ms``),
so backoff and staleness logic can be tested with a fake clock.

Metadata follows ``org.apache.kafka.clients.Metadata``: the client tracks a
set of topics and always asks for all of them (never for "all topics"), with
``allow_auto_topic_creation`` on, as the Java producer's ``ProducerMetadata``
asks: a broker with ``auto.create.topics.enable=true`` creates a topic the
first time a producer sends to it, one with it off answers
``UNKNOWN_TOPIC_OR_PARTITION`` until ``max.block.ms`` (both checked against a
real broker in ``tests/integration/test_real_broker_topics.py``). Concurrent
refreshes share one request; a snapshot is stale after ``metadata.max.age.ms`` or once someone called
:meth:`request_update` (a leader moved, a connection died).

Reconnect backoff follows ``ClusterConnectionStates``: after the n-th
consecutive failed attempt to reach a node the next attempt waits
``reconnect.backoff.ms * 2**(n-1)``, jittered by ±20 %, capped at
``reconnect.backoff.max.ms``; a successful connection resets it. A connection lost before it
answered any of the requests sent on it counts as a failed attempt too (``_note_lost``). :meth:`KafkaClient.bootstrap`
backs off the same way between rounds over every bootstrap server, until its timeout.

Reachability. A node is *unreachable* from the first failed attempt to connect
to it until an attempt succeeds: one outage episode, however many attempts it
takes (the consecutive failures the backoff counts). Each episode is logged
once at WARNING when it begins (the node, its address, why) and once at INFO
when it ends (after how long, how many attempts), on this module's logger
``aioproducer.network.client``: not once per failed attempt, as Java's
``NetworkClient`` logs, and nothing for a lost connection that the next attempt
restores (a broker closing an idle connection, a restart between two attempts). For the whole cluster,
:attr:`KafkaClient.brokers_reachable` is false from an attempt that failed
while no connection to any broker was live until any connection succeeds.

Rebootstrap (KIP-899, KIP-1102), as Java 4.x's ``NetworkClient`` with
``metadata.recovery.strategy=rebootstrap`` (the default): after the nodes of
the current view, a metadata refresh tries the bootstrap servers too (with
``none`` only before the first metadata, as Java: the view is all it knows
after that). When no metadata arrived for
``metadata.recovery.rebootstrap.trigger.ms`` (a :class:`RebootstrapTrigger`
started at the first attempt after the last success), or a Metadata answer
(v13+) says REBOOTSTRAP_REQUIRED (129), the next refresh first
*rebootstraps*: every connection is closed (requests in flight fail as a lost
connection does, and the sender retries them), the view is emptied (no stale
node is tried again), the bootstrap servers are resolved again
(``client.dns.lookup``) and asked. :func:`resolve_bootstrap_servers` says what
``client.dns.lookup`` does.

Throttling (KIP-219) follows it too: a Produce response (v6+) with
``throttle_time_ms > 0`` makes :meth:`is_ready` false for that node until the
time is up (:meth:`throttle_delay` says how long, so the sender sleeps until
then), across reconnects, as Java mutes the node in its connection states.
"""

from __future__ import annotations

import asyncio
import logging
import random
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from aioproducer import errors
from aioproducer.clock import monotonic_ms
from aioproducer.errors import (
    AuthenticationError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolError,
)
from aioproducer.logs import LogLike, client_logger
from aioproducer.stats import ByteCounts
from aioproducer.network.connection import Authenticator, BrokerConnection, OpenStreams
from aioproducer.network.metadata import ClusterMetadata, Node, RebootstrapTrigger
from aioproducer.protocol import messages

__all__ = [
    "BootstrapResolver",
    "ClientClosedError",
    "ClientConfig",
    "DnsResolver",
    "KafkaClient",
    "NoBrokerAnsweredError",
    "resolve_bootstrap_servers",
]

log: logging.Logger = logging.getLogger(__name__)

_T = TypeVar("_T")

#: ±20 %: the jitter Java applies to reconnect and metadata backoff so that clients which
#: lost a broker together do not all come back at the same instant.
_BACKOFF_JITTER = 0.2


class ClientConfig(Protocol):
    """The settings :class:`KafkaClient` reads; ``ProducerConfig`` has them all.

    Declared as read-only properties so a frozen dataclass satisfies it.
    """

    @property
    def bootstrap_servers(self) -> Sequence[tuple[str, int]]: ...
    @property
    def client_id(self) -> str: ...
    @property
    def max_in_flight_requests_per_connection(self) -> int: ...
    @property
    def request_timeout_ms(self) -> int: ...
    @property
    def reconnect_backoff_ms(self) -> int: ...
    @property
    def reconnect_backoff_max_ms(self) -> int: ...
    @property
    def metadata_max_age_ms(self) -> int: ...
    @property
    def metadata_max_idle_ms(self) -> int: ...
    @property
    def socket_connection_setup_timeout_ms(self) -> int: ...
    @property
    def send_buffer_bytes(self) -> int: ...
    @property
    def receive_buffer_bytes(self) -> int: ...
    @property
    def retry_backoff_ms(self) -> int: ...
    @property
    def retry_backoff_max_ms(self) -> int: ...
    @property
    def metadata_recovery_strategy(self) -> str: ...
    @property
    def metadata_recovery_rebootstrap_trigger_ms(self) -> int: ...
    @property
    def client_dns_lookup(self) -> str: ...


class BootstrapResolver(Protocol):
    """Name resolution for the bootstrap servers; :class:`DnsResolver` asks the system, a test injects its own."""

    async def addresses(self, host: str, port: int) -> list[str]:
        """Every IP address ``host`` resolves to, in the resolver's order; empty or an OSError if none."""
        ...

    async def canonical_name(self, address: str) -> str:
        """The name a reverse lookup of ``address`` gives (the address itself when it has none)."""
        ...


class DnsResolver:
    """The system's resolver, through the event loop's executor (``getaddrinfo``, ``getnameinfo``)."""

    async def addresses(self, host: str, port: int) -> list[str]:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return list(dict.fromkeys(str(info[4][0]) for info in infos))

    async def canonical_name(self, address: str) -> str:
        # No NI_NAMEREQD: an address without a name comes back as itself, as Java's getCanonicalHostName.
        name, _port = await asyncio.get_running_loop().getnameinfo((address, 0))
        return str(name)


async def resolve_bootstrap_servers(
    servers: Sequence[tuple[str, int]], lookup: str, resolver: BootstrapResolver, log: LogLike
) -> list[tuple[str, int]]:
    """The addresses to bootstrap from, as ``client.dns.lookup`` says (Java's ``ClientUtils``).

    ``use_all_dns_ips``: the names as given; every connection attempt resolves its name
    again and tries each address it resolves to in turn (asyncio's ``open_connection``),
    so a name whose first address is dead still connects, and a rebootstrap sees DNS
    changes. ``resolve_canonical_bootstrap_servers_only``: each name is resolved now and
    each of its addresses replaced by its canonical name (reverse lookup), for setups
    where the alias is not what the brokers' certificates or principals name (an address
    without a name stays itself, as in Java). A name that does not resolve, or an address
    whose reverse lookup fails, is skipped with a warning, as Java skips an unresolved one.
    Raises :class:`KafkaConnectionError` when nothing is left (retried as a broker down).
    """
    if lookup != "resolve_canonical_bootstrap_servers_only":
        return list(servers)
    resolved: list[tuple[str, int]] = []
    for host, port in servers:
        try:
            addresses = await resolver.addresses(host, port)
        except OSError as exc:
            log.warning("bootstrap server %s:%d does not resolve (%s): skipped", host, port, exc)
            continue
        for address in addresses:
            try:
                name = await resolver.canonical_name(address)
            except OSError as exc:
                log.warning("bootstrap address %s of %s has no canonical name (%s): skipped", address, host, exc)
                continue
            if (name, port) not in resolved:
                resolved.append((name, port))
    if not resolved:
        raise KafkaConnectionError(
            "no bootstrap server resolved to a canonical name (client.dns.lookup=resolve_canonical_bootstrap_servers_only): "
            + ", ".join(f"{h}:{p}" for h, p in servers)
        )
    return resolved


@dataclass(slots=True)
class _NodeBackoff:
    """Reconnect bookkeeping for one node (Java's ``NodeConnectionState``)."""

    failures: int = 0
    #: Connections in a row that were set up, sent requests and were lost before answering any
    #: (a broker or proxy that closes each one right after authentication): the backoff counts
    #: them as failed attempts, or the producer would reconnect in a loop. Reset by any other
    #: lost connection.
    closed_early: int = 0
    last_attempt_ms: float = float("-inf")
    backoff_ms: float = 0.0
    last_error: errors.KafkaError | None = None  # why the last attempt failed; None once one succeeded
    unreachable_since: float = 0.0  # when the first failed attempt of the current episode began (failures > 0)


class ClientClosedError(KafkaConnectionError):
    """The client closed (or is closing) while the caller waited on it."""


class NoBrokerAnsweredError(KafkaConnectionError):
    """No broker answered a request any broker can answer; the message names each one's failure.

    ``errors`` keeps them, so that :meth:`KafkaClient.bootstrap` can tell a cluster that is
    down (refused, reset, silent: worth retrying) from one that can never answer this client
    (a port that does not speak Kafka, a broker too old), which it must not retry.
    """

    def __init__(self, message: str, errors: Sequence[KafkaError]) -> None:
        super().__init__(message)
        self.errors: tuple[KafkaError, ...] = tuple(errors)

    @property
    def connection_level(self) -> bool:
        """Whether a failure was the network's (refused, reset, timed out), or nothing was tried at all."""
        return not self.errors or any(isinstance(e, (KafkaConnectionError, KafkaTimeoutError)) for e in self.errors)


class _RebootstrapNow(Exception):
    """A Metadata answer said REBOOTSTRAP_REQUIRED under ``rebootstrap``: the refresh rebootstraps and asks again."""


async def _sleep_ms(ms: float) -> None:
    await asyncio.sleep(ms / 1000.0)


class KafkaClient:
    """Connections to a Kafka cluster plus the metadata needed to find leaders.

    Mutable state is touched only from the event loop thread. ``_connecting``
    holds at most one connect attempt per node so concurrent callers share it;
    ``_refresh`` likewise holds the one Metadata request in flight.
    """

    def __init__(
        self,
        config: ClientConfig,
        *,
        clock: Callable[[], float] = monotonic_ms,
        rng: random.Random | None = None,
        allow_auto_topic_creation: bool = True,
        open_streams: OpenStreams | None = None,
        authenticator: Authenticator | None = None,
        sleep: Callable[[float], Awaitable[None]] = _sleep_ms,
        byte_counts: ByteCounts | None = None,
        on_sendable: Callable[[], None] | None = None,
        on_metadata: Callable[[ClusterMetadata], None] | None = None,
        resolver: BootstrapResolver | None = None,
    ) -> None:
        if not config.bootstrap_servers:
            raise errors.ConfigError("bootstrap_servers is empty: nowhere to connect")
        self._config = config
        #: This client's lines name its producer's client.id (see logs.py); its connections' do too.
        self._log = client_logger(__name__, config.client_id)
        self._allow_auto_topic_creation = allow_auto_topic_creation
        self._clock = clock
        #: Waits ``ms`` milliseconds between bootstrap rounds: a test passes one that moves its fake clock.
        self._sleep = sleep
        self._rng = rng or random.Random()
        #: Why the last bootstrap round failed (every server's failure), None once one answered.
        self.bootstrap_failure: KafkaConnectionError | None = None
        #: How every connection is secured (``aioproducer.security``): TLS streams, the SASL mechanism.
        self._open_streams = open_streams
        self._authenticator = authenticator
        self._metadata = ClusterMetadata.empty()
        #: Called with each new snapshot as it is installed (the producer drops its per-topic caches).
        self._on_metadata = on_metadata
        #: The sender's wake-up: called when a connection takes requests again after re-authenticating,
        #: and when one is lost (metadata is then due: an idle producer must look for its brokers too).
        self._on_sendable = on_sendable
        #: Tracked topics and when each was last used (``add_topic``); idle ones are dropped.
        self._topics: dict[str, float] = {}
        self._last_refresh_ms = float("-inf")  # last successful refresh
        self._last_attempt_ms = float("-inf")  # last refresh started, successful or not
        #: Refreshes failed in a row, and the wait after the last one before the next may start:
        #: ``retry.backoff.ms`` doubling per failure up to ``retry.backoff.max.ms``, jittered
        #: (KIP-580, Java's ``Metadata`` since 3.7). Written by ``_refresh_done`` only.
        self._refresh_failures = 0
        self._refresh_backoff_ms = float(config.retry_backoff_ms)
        # An update is wanted while _wanted_seq > _done_seq; a refresh records the
        # _wanted_seq it started at, so a request made while it is in flight survives it.
        self._wanted_seq = 1
        self._done_seq = 0
        self._refresh: asyncio.Task[ClusterMetadata] | None = None
        self._refresh_topics: frozenset[str] = frozenset()
        self._conns: dict[int, BrokerConnection] = {}
        #: Bytes every connection of this client wrote and read (``Producer.metrics()``).
        self.byte_counts: ByteCounts = byte_counts if byte_counts is not None else ByteCounts()
        self._connecting: dict[int, asyncio.Task[BrokerConnection]] = {}
        self._backoff: dict[int, _NodeBackoff] = {}
        #: node -> clock time until which a broker asked not to be sent to (KIP-219); kept over reconnects.
        self._throttled_until: dict[int, float] = {}
        #: Set by close() and abandon() only: no connection opens and no refresh starts any more. The
        #: client's own fact, not the producer's lifecycle (which it does not read): the producer's
        #: engine closes it when it moves the lifecycle to CLOSED, and after a start that failed.
        self._closed = False
        # wait_for_metadata() callers, and those of them interrupt_waits() cancelled (see there).
        self._metadata_waiters: set[asyncio.Task[Any]] = set()
        self._interrupted: set[asyncio.Task[Any]] = set()
        self._waits_interrupted = False
        self._closing_conns: list[BrokerConnection] = []  # what close() is closing: abort() drops them
        #: node id -> (host, port) named by a FindCoordinator answer for a node the metadata lacks.
        self._unlisted: dict[int, tuple[str, int]] = {}
        #: The cluster's finalized features (KIP-584) with the highest epoch any broker reported
        #: in ApiVersions, and that epoch: written by ``_note_features`` on every connection.
        self._finalized_features: dict[str, int] = {}
        self._finalized_features_epoch = -1
        #: Clock time of the failed attempt that began the cluster-wide outage (no broker reachable), or None.
        self._no_broker_since: float | None = None
        #: When to rebootstrap (metadata.recovery.*); the bootstrap addresses, resolved on first use and again
        #: after every rebootstrap (client.dns.lookup); how many rebootstraps this client made.
        self._trigger = RebootstrapTrigger(
            config.metadata_recovery_strategy, config.metadata_recovery_rebootstrap_trigger_ms
        )
        self._resolver: BootstrapResolver = resolver or DnsResolver()
        self._bootstrap_addresses: list[tuple[str, int]] | None = None
        self.rebootstrap_count: int = 0

    # --------------------------------------------------------------- metadata

    @property
    def metadata(self) -> ClusterMetadata:
        """The latest snapshot (empty before :meth:`bootstrap`); replaced, never mutated."""
        return self._metadata

    @property
    def topics(self) -> frozenset[str]:
        """The topics every Metadata request asks for."""
        return frozenset(self._topics)

    def add_topic(self, topic: str) -> None:
        """Track ``topic`` as used now; a topic new to the set marks metadata stale so the next refresh has it.

        The producer calls this once per topic per metadata snapshot it sends
        with (not per record), the sender for topics with queued records.
        """
        if topic not in self._topics and topic not in self._metadata.topics:
            self._wanted_seq += 1
        self._topics[topic] = self._clock()

    def _expire_idle_topics(self, now: float) -> None:
        """Forget topics unused for ``metadata.max.idle.ms`` (Java's ``ProducerMetadata``).

        Without it every topic ever named stays in every Metadata request: a
        service that once sent to many topics (or to many mistyped ones) pays
        for all of them on each refresh, for good.
        """
        idle = self._config.metadata_max_idle_ms
        expired = [t for t, used in self._topics.items() if now - used > idle]
        for topic in expired:
            del self._topics[topic]
        if expired:
            self._log.debug("metadata: stopped tracking %d topics idle for %d ms", len(expired), idle)

    def update_leader(self, topic: str, partition: int, leader: int, leader_epoch: int, node: Node | None) -> bool:
        """Take a new leader from a Produce answer (KIP-951) if it is newer than what is known.

        Saves the Metadata round trip after a leader move; returns whether the
        snapshot changed. An older or equal leader epoch is ignored (KIP-320).
        """
        metadata = self._metadata.with_leader(topic, partition, leader, leader_epoch, node)
        if metadata is None:
            return False
        self._install(metadata)
        return True

    def _install(self, metadata: ClusterMetadata) -> None:
        self._metadata = metadata
        if self._on_metadata is not None:
            self._on_metadata(metadata)

    def _wake_sender(self) -> None:
        if self._on_sendable is not None:
            self._on_sendable()

    def _connection_lost(self, conn: BrokerConnection, error: KafkaError) -> None:
        """A connection broke (EOF, reset, timeout): its broker may have left or lost leadership.

        As Java's ``NetworkClient.handleServerDisconnect``: metadata is marked for
        update, and the sender woken to act on it now. Asleep until its next batch or
        ``metadata.max.age.ms``, an idle producer would not try its brokers again, so it
        would neither log an outage nor see it in ``brokers_reachable`` until traffic came.
        """
        self._log.debug("connection to node %s lost (%s): metadata will be refreshed", conn.node_id, error)
        if self._conns.get(conn.node_id) is conn:  # set up: a failed connect() is counted by _connect
            self._note_lost(conn, error)
        self.request_update()
        self._wake_sender()

    def _note_lost(self, conn: BrokerConnection, error: KafkaError) -> None:
        """A set-up connection broke: one sent requests that it never answered backs the node off.

        A broker (or a proxy) that authenticates each connection and closes it at once would
        otherwise be reconnected to without pause, since the connect itself succeeded. Such a
        loss counts as a failed attempt: the next connection waits ``reconnect.backoff.ms``,
        doubling per loss in a row up to ``reconnect.backoff.max.ms``, with one WARNING per
        run of them. Java's ``ClusterConnectionStates.disconnected`` waits the base backoff
        after every loss; a connection that answered, or was never asked anything (idle, or
        ``acks=0`` only), is replaced here at once (a broker closing an idle connection, a
        restart between two attempts).
        """
        state = self._backoff.setdefault(conn.node_id, _NodeBackoff())
        if not conn.never_answered:
            state.closed_early = 0
            return
        state.closed_early += 1
        state.last_attempt_ms = self._clock()
        state.backoff_ms = self._reconnect_backoff_ms(state.failures + state.closed_early)
        if state.closed_early == 1:
            self._log.warning(
                "node %s (%s): the connection was lost before the broker answered any request (%s); reconnecting "
                "with backoff up to reconnect.backoff.max.ms=%d ms",
                conn.node_id, conn.address, error, self._config.reconnect_backoff_max_ms,
            )

    def request_update(self) -> None:
        """Mark the metadata stale: :meth:`time_to_next_update` says it is due (after ``retry.backoff.ms``).

        A refresh already in flight does not count: it may have been asked
        before the change that made the caller call this.
        """
        self._wanted_seq += 1

    @property
    def update_requested(self) -> bool:
        """Whether an update was asked for that no refresh started since has answered."""
        return self._wanted_seq > self._done_seq

    def metadata_age(self, now: float | None = None) -> float:
        """Milliseconds since the last successful refresh (``inf`` before the first)."""
        return (self._clock() if now is None else now) - self._last_refresh_ms

    def time_to_next_update(self, now: float | None = None) -> float:
        """Milliseconds until metadata should be refreshed (0: now).

        As Java's ``Metadata.timeToNextUpdate``: when an update was requested
        or the snapshot reached ``metadata.max.age.ms``, but never sooner than
        ``retry.backoff.ms`` after the previous attempt, so a cluster that
        cannot answer is not asked in a tight loop; after failed refreshes in a
        row that wait doubles per failure up to ``retry.backoff.max.ms`` (KIP-580).
        What a sender loop bounds its sleep with, instead of polling.
        """
        now = self._clock() if now is None else now
        expire = 0.0 if self.update_requested else self._config.metadata_max_age_ms - self.metadata_age(now)
        allow = self._last_attempt_ms + self._refresh_backoff_ms - now
        return max(0.0, expire, allow)

    async def bootstrap(self, timeout_ms: float = 0.0) -> ClusterMetadata:
        """Fetch the first metadata, trying every bootstrap server until one answers or ``timeout_ms`` passed.

        A round tries each server in turn (:meth:`refresh_metadata`); when none answered,
        the next round waits ``reconnect.backoff.ms * 2**(n-1)``, jittered ±20 % and capped at
        ``reconnect.backoff.max.ms``, as Java's ``NetworkClient`` keeps retrying its bootstrap
        nodes until ``max.block.ms``: a broker restarting for a few seconds must not fail a
        service's startup. Only connection-level failures are retried: an
        :class:`AuthenticationError` (wrong credentials, untrusted certificate) would fail
        the same way on every try, so it is raised at once. Rounds and waits are timed by
        the client's ``clock`` and ``sleep``; ``timeout_ms=0`` makes one round.

        Raises :class:`KafkaTimeoutError` naming the last round's failures when no round
        answered in time (:attr:`bootstrap_failure` keeps them for a caller that cancels
        this call first, e.g. for a server that never answers, whose round outlasts the bound).
        """
        deadline = self._clock() + timeout_ms
        rounds = 0
        while True:
            try:
                metadata = await self.refresh_metadata()
            except NoBrokerAnsweredError as exc:
                if self._closed or not exc.connection_level:
                    raise
                self.bootstrap_failure = exc
                rounds += 1
                remaining = deadline - self._clock()
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"no bootstrap server answered within {timeout_ms:g} ms ({rounds} rounds); last: {exc}"
                    ) from exc
                delay = min(self._reconnect_backoff_ms(rounds), remaining)
                # WARNING, as Java's NetworkClient warns of each bootstrap connection that fails: a wrong
                # address or a cluster that is down shows at once, not after max.block.ms of silence.
                self._log.warning("no bootstrap server answered (round %d: %s); trying again in %.0f ms, "
                                  "until max.block.ms", rounds, exc, delay)
                await self._sleep(delay)
                continue
            self.bootstrap_failure = None
            return metadata

    async def refresh_metadata(self, topics: Iterable[str] | None = None) -> ClusterMetadata:
        """Send one Metadata request for every tracked topic (``topics`` are tracked first).

        Concurrent calls share a request in flight when it already covers
        their topics, otherwise they wait for it and send the next one, so a
        burst of callers costs at most two requests. Cancelling a caller does
        not cancel the shared request.
        """
        if self._closed:
            raise KafkaConnectionError("the client is closed")
        for topic in topics or ():
            self.add_topic(topic)
        while True:
            task = self._refresh
            if task is not None and task.done():
                task = self._refresh = None
            if task is None:
                self._expire_idle_topics(self._clock())
                wanted = frozenset(self._topics)
                self._refresh_topics = wanted
                self._last_attempt_ms = self._clock()
                task = self._refresh = asyncio.create_task(
                    self._do_refresh(wanted, self._wanted_seq), name="aioproducer-metadata-refresh"
                )
                task.add_done_callback(self._refresh_done)
                return await asyncio.shield(task)
            if self._topics.keys() <= self._refresh_topics:
                return await asyncio.shield(task)
            await asyncio.wait([task])  # its outcome is not ours: ours needs more topics

    def _refresh_done(self, task: asyncio.Task[ClusterMetadata]) -> None:
        if self._refresh is task:
            self._refresh = None
        if task.cancelled():
            return
        config = self._config
        if task.exception() is None:  # retrieved here so a refresh nobody awaits any more is not reported
            self._refresh_failures = 0
            self._refresh_backoff_ms = float(config.retry_backoff_ms)
        else:
            self._refresh_failures += 1
            self._refresh_backoff_ms = self._backoff_ms(
                config.retry_backoff_ms, config.retry_backoff_max_ms, self._refresh_failures
            )

    async def _do_refresh(self, topics: frozenset[str], seq: int) -> ClusterMetadata:
        """One Metadata request to the least loaded broker; installs the snapshot it returns."""
        body: dict[str, Any] = {
            "topics": [{"name": t} for t in sorted(topics)],
            "allow_auto_topic_creation": self._allow_auto_topic_creation,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        moved: list[BrokerConnection] = []

        def install(response: dict[str, Any]) -> ClusterMetadata:
            if response.get("error_code") == errors.RebootstrapRequiredError.errno:
                if self._trigger.enabled:
                    self._trigger.rebootstrap_required()  # KIP-1102: the broker says our view is stale
                    raise _RebootstrapNow()
                # Under none, as Java: not an update (the answer names no broker); the view stays.
                failure = KafkaConnectionError("a broker answered REBOOTSTRAP_REQUIRED (metadata.recovery.strategy=none)")
                raise NoBrokerAnsweredError(str(failure), [failure])
            metadata = ClusterMetadata.from_response(response).keeping_newer_leaders(self._metadata)
            for node_id, conn in list(self._conns.items()):
                node = metadata.nodes.get(node_id)
                if node is not None and (node.host, node.port) != (conn.host, conn.port):
                    moved.append(self._conns.pop(node_id))  # reached at its new address on next use
            self._install(metadata)
            self._last_refresh_ms = self._clock()
            self._done_seq = max(self._done_seq, seq)
            if metadata.nodes:  # as Java: an answer naming no broker (one starting up) is no update
                self._trigger.metadata_updated()
            return metadata

        try:
            for _ in range(2):  # a second REBOOTSTRAP_REQUIRED right after a rebootstrap is a failed attempt
                await self._maybe_rebootstrap()
                try:
                    return await self._send_any(messages.METADATA, body, install)
                except _RebootstrapNow:
                    self._log.info("a broker answered REBOOTSTRAP_REQUIRED: rebootstrapping")
            failure = KafkaConnectionError("the bootstrap servers answered REBOOTSTRAP_REQUIRED after a rebootstrap")
            raise NoBrokerAnsweredError(str(failure), [failure])
        finally:
            await asyncio.gather(*(c.close() for c in moved))

    async def _maybe_rebootstrap(self) -> None:
        """Start the rebootstrap timer for this attempt; rebootstrap first if it is due."""
        now = self._clock()
        self._trigger.attempt_started(now)
        if self._trigger.needs_rebootstrap(now):
            await self.rebootstrap(now)

    async def rebootstrap(self, now: float | None = None) -> None:
        """Forget the cluster view and start again from the bootstrap servers (Java's ``Metadata.rebootstrap``).

        Every connection is closed (their requests in flight fail as on a lost connection, so
        the sender retries them), the view emptied so no stale node is tried again, and the
        bootstrap servers resolved again on their next use. Called by a refresh when the
        :class:`RebootstrapTrigger` is due; the timer restarts so the bootstrap servers get
        ``metadata.recovery.rebootstrap.trigger.ms`` to answer.
        """
        now = self._clock() if now is None else now
        self.rebootstrap_count += 1
        self._log.info(
            "rebootstrapping (metadata.recovery.strategy=rebootstrap): dropping %d known nodes and %d connections, "
            "resolving the bootstrap servers again", len(self._metadata.nodes), len(self._conns),
        )
        conns = list(self._conns.values())
        self._conns.clear()
        self._unlisted.clear()
        self._bootstrap_addresses = None
        self._install(ClusterMetadata.empty())
        self._trigger.rebootstrapped(now)
        await asyncio.gather(*(c.close() for c in conns))

    async def _bootstrap_list(self) -> list[tuple[str, int]]:
        """The bootstrap addresses, resolved as ``client.dns.lookup`` says on first use after a (re)bootstrap."""
        if self._bootstrap_addresses is None:
            self._bootstrap_addresses = await resolve_bootstrap_servers(
                self._config.bootstrap_servers, self._config.client_dns_lookup, self._resolver, self._log
            )
        return self._bootstrap_addresses

    async def send_any(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        """Send a request any broker can answer (FindCoordinator) to the least loaded one; its answer."""
        return await self._send_any(api_key, body, lambda response: response)

    async def _send_any(
        self, api_key: int, body: dict[str, Any], handle: Callable[[dict[str, Any]], _T]
    ) -> _T:
        """Send to the least loaded broker, falling back as Java's ``leastLoadedNode`` does.

        Tried in order until one answers: live connections (fewest requests
        in flight first), known nodes not in reconnect backoff, then each
        bootstrap server on a fresh connection with a pseudo node id (-1,
        -2, ...). ``handle`` runs on the response before a bootstrap
        connection is kept (as its node's connection, when the metadata now
        lists a node at that address) or closed. Raises
        :class:`KafkaConnectionError` listing every failure when none answered.
        """
        if self._closed:
            raise KafkaConnectionError("the client is closed")
        failures: list[tuple[str, KafkaError]] = []
        live = sorted(
            (c for c in self._conns.values() if c.is_connected), key=lambda c: c.in_flight_count
        )
        for conn in live:
            if (response := await self._try_send(conn, api_key, body, failures)) is not None:
                return handle(response)
        tried = {c.node_id for c in live}
        now = self._clock()
        for node_id in list(self._metadata.nodes):
            if node_id in tried or self.connection_delay(node_id, now) > 0:
                continue
            try:
                conn = await self.connection(node_id)
            except KafkaError as exc:
                failures.append((f"node {node_id}", exc))
                continue
            if (response := await self._try_send(conn, api_key, body, failures)) is not None:
                return handle(response)
        # Java's KIP-899 rebootstrap when no node of the view is available; with
        # metadata.recovery.strategy=none the bootstrap servers serve only until the first metadata.
        use_bootstrap = self._trigger.enabled or not self._metadata.nodes
        try:
            bootstrap = await self._bootstrap_list() if use_bootstrap else []
        except KafkaConnectionError as exc:
            failures.append(("bootstrap.servers", exc))
            bootstrap = []
        for index, (host, port) in enumerate(bootstrap):
            conn = self._new_connection(host, port, -1 - index)
            try:
                try:
                    await conn.connect()
                except AuthenticationError:
                    raise  # TLS or SASL refused: another server of the same cluster would refuse too
                except KafkaError as exc:
                    failures.append((f"{host}:{port}", exc))
                    self._attempt_failed()
                    continue
                self._no_broker_since = None  # a broker answers: the cluster is reachable
                self._note_features(conn)
                if (response := await self._try_send(conn, api_key, body, failures)) is not None:
                    return handle(response)
            finally:
                if not self._adopt(conn):
                    await conn.close()
        raise NoBrokerAnsweredError(
            f"no broker answered {messages.API_NAMES.get(api_key, api_key)}: "
            + ("; ".join(f"{where}: {exc}" for where, exc in failures) or "no broker known"),
            [exc for _where, exc in failures],
        )

    @staticmethod
    async def _try_send(
        conn: BrokerConnection, api_key: int, body: dict[str, Any], failures: list[tuple[str, KafkaError]]
    ) -> dict[str, Any] | None:
        """``conn.send``, with a connection-level failure noted in ``failures`` and ``None`` returned."""
        try:
            response = await conn.send(api_key, body)
        except (KafkaConnectionError, KafkaTimeoutError, ProtocolError) as exc:
            failures.append((conn.address, exc))
            return None
        assert response is not None  # expect_response=True
        return response

    def _adopt(self, conn: BrokerConnection) -> bool:
        """Keep a live bootstrap connection as the connection of the node at the same address.

        Saves a second TCP connection to a broker we already talk to.
        Returns whether ``conn`` was kept.
        """
        if not conn.is_connected:
            return False
        for node_id, node in self._metadata.nodes.items():
            if (node.host, node.port) == (conn.host, conn.port):
                if node_id in self._conns or node_id in self._connecting:
                    return False  # the node has its own connection, or will have (see _connect)
                conn.node_id = node_id
                self._conns[node_id] = conn
                self._node_reachable(node_id, conn)
                return True
        return False

    async def wait_for_metadata(self, topic: str, timeout_ms: float) -> tuple[int, ...]:
        """Return ``topic``'s partitions, refreshing metadata until it appears or time runs out.

        What ``send()`` does before partitioning (Java's ``waitOnMetadata``,
        bounded by ``max.block.ms``): the topic is tracked, metadata refreshed,
        and while the topic is unknown refreshed again every ``retry.backoff.ms``
        (while no broker answers, after the growing backoff of failed refreshes,
        :meth:`time_to_next_update`). A non-retriable topic error (authorization,
        invalid name) is raised at once. After ``timeout_ms`` raises
        ``KafkaTimeoutError("Topic X not present in metadata after N ms")``.
        After :meth:`interrupt_waits` (or :meth:`close`) it raises
        :class:`ClientClosedError` at once, whatever it was waiting on.
        """
        task = asyncio.current_task()
        assert task is not None
        if self._waits_interrupted:
            raise ClientClosedError("the client is closing: no more metadata waits")
        self._metadata_waiters.add(task)
        try:
            return await self._wait_for_metadata(topic, timeout_ms)
        except asyncio.CancelledError:
            # Ours (interrupt_waits) if we cancelled this task and nobody else did too.
            if task in self._interrupted and task.uncancel() == 0:
                raise ClientClosedError("the client closed while waiting for metadata") from None
            raise
        finally:
            self._metadata_waiters.discard(task)
            self._interrupted.discard(task)

    def interrupt_waits(self) -> None:
        """End every :meth:`wait_for_metadata`, now and later, with :class:`ClientClosedError`.

        For the producer's ``close()``: a ``send()`` waiting for metadata then could never
        queue its record, so it must fail at once rather than sleep out ``max.block.ms``,
        or see the ``CancelledError`` of the refresh that ``close()`` cancels. The waiting
        tasks are cancelled and the cancellation turned into the error (as
        ``asyncio.timeout`` turns its own into ``TimeoutError``), so a wait ends
        wherever it is suspended, and a cancellation from elsewhere stays one.
        """
        self._waits_interrupted = True
        for task in self._metadata_waiters - self._interrupted:
            self._interrupted.add(task)
            task.cancel()

    async def _wait_for_metadata(self, topic: str, timeout_ms: float) -> tuple[int, ...]:
        self.add_topic(topic)
        deadline = self._clock() + timeout_ms
        attempted = False
        unreachable: KafkaConnectionError | None = None  # the last refresh that reached no broker
        while True:
            partitions = self._metadata.partitions_for(topic)
            if partitions:
                return partitions
            code = self._metadata.topic_error(topic)
            # A topic error is believed only from a refresh made for this call: one cached from
            # minutes ago (an ACL fixed since, a topic created since) must be asked again.
            if attempted and topic in self._metadata.topics and code and not errors.error_for_code(code).retriable:
                raise errors.error_for_code(code)(f"topic {topic!r}")
            remaining = deadline - self._clock()
            if remaining > 0 and attempted:
                await asyncio.sleep(min(self._refresh_backoff_ms, remaining) / 1000)  # KIP-580, see time_to_next_update
                remaining = deadline - self._clock()
            if remaining <= 0:
                message = f"Topic {topic} not present in metadata after {timeout_ms:g} ms"
                if unreachable is None:
                    raise KafkaTimeoutError(message)
                # Say why: "not present" alone reads like a missing topic when no broker answered.
                raise KafkaTimeoutError(f"{message}: no broker answered ({unreachable})") from unreachable
            attempted = True
            try:
                async with asyncio.timeout(remaining / 1000):
                    await self.refresh_metadata()
                unreachable = None
            except TimeoutError:
                pass
            except KafkaConnectionError as exc:
                unreachable = exc
                self._log.debug("metadata refresh for %r failed, will retry: %s", topic, exc)

    # ------------------------------------------------------------ connections

    def _new_connection(self, host: str, port: int, node_id: int) -> BrokerConnection:
        conn = BrokerConnection(
            host,
            port,
            node_id,
            client_id=self._config.client_id,
            max_in_flight=self._config.max_in_flight_requests_per_connection,
            request_timeout_ms=self._config.request_timeout_ms,
            connect_timeout_ms=self._config.socket_connection_setup_timeout_ms,
            send_buffer_bytes=self._config.send_buffer_bytes,
            receive_buffer_bytes=self._config.receive_buffer_bytes,
            on_throttle=self.throttle,
            open_streams=self._open_streams,
            authenticator=self._authenticator,
            # KIP-368: re-authenticate at 85-95 % of the session, drawn per connection as Java does.
            reauth_fraction=self._rng.uniform(0.85, 0.95),
            byte_counts=self.byte_counts,
            on_lost=self._connection_lost,
            on_sendable=self._wake_sender,
        )
        return conn

    def connection_delay(self, node_id: int, now: float | None = None) -> float:
        """Milliseconds before a connection attempt to ``node_id`` may start (0: now).

        0 as well for a node already connected. Never blocks: the sender uses
        it to skip nodes in backoff and to bound its sleep.
        """
        conn = self._conns.get(node_id)
        if conn is not None and conn.is_connected:
            return 0.0
        state = self._backoff.get(node_id)
        if state is None or not (state.failures or state.closed_early):
            return 0.0
        now = self._clock() if now is None else now
        return max(0.0, state.last_attempt_ms + state.backoff_ms - now)

    def is_ready(self, node_id: int) -> bool:
        """Whether ``node_id`` has a live connection with a free in-flight slot and is not throttled."""
        return self.free_slots(node_id) > 0

    def free_slots(self, node_id: int) -> int:
        """How many requests ``node_id`` takes now (``is_ready`` as a count): its connection's free in-flight slots."""
        conn = self._conns.get(node_id)
        if conn is None or (self._throttled_until and self.throttle_delay(node_id) > 0.0):
            return 0
        return conn.free_slots

    def throttle(self, node_id: int, throttle_time_ms: float) -> None:
        """The broker answered with ``throttle_time_ms`` (KIP-219): send it nothing until then.

        As Java's ``NetworkClient``, which mutes the node in ``ClusterConnectionStates``:
        a client that kept sending would be muted by the broker and see its requests
        time out instead. A later, shorter throttle does not shorten an earlier one.
        """
        until = self._clock() + throttle_time_ms
        if until > self._throttled_until.get(node_id, float("-inf")):
            self._throttled_until[node_id] = until

    def throttle_delay(self, node_id: int, now: float | None = None) -> float:
        """Milliseconds until ``node_id``'s throttle ends (0: not throttled); what the sender sleeps for."""
        until = self._throttled_until.get(node_id)
        if until is None:
            return 0.0
        now = self._clock() if now is None else now
        if now >= until:
            del self._throttled_until[node_id]  # keeps is_ready's check a falsy dict in the common case
            return 0.0
        return until - now

    def flush_writes(self, nodes: Iterable[int]) -> None:
        """Write now what the connections to ``nodes`` hold (``BrokerConnection.flush_writes``): the sender's pass ended."""
        conns = self._conns
        for node in nodes:
            conn = conns.get(node)
            if conn is not None:
                conn.flush_writes()

    def connection_for(self, node_id: int) -> BrokerConnection | None:
        """The connection to ``node_id`` as it stands (None: none set up); never blocks, never connects.

        What the sender writes a Produce request to synchronously after :meth:`is_ready` said yes
        (:meth:`BrokerConnection.try_send_produce`, which says whether it took it: not, when the
        connection broke or is re-authenticating since).
        """
        return self._conns.get(node_id)

    @property
    def connection_count(self) -> int:
        """How many broker connections are live (Java's ``connection-count``)."""
        return sum(1 for conn in self._conns.values() if conn.is_connected)

    def is_connected(self, node_id: int) -> bool:
        """Whether ``node_id`` has a live connection (slots free or not)."""
        conn = self._conns.get(node_id)
        return conn is not None and conn.is_connected

    async def connection(self, node_id: int) -> BrokerConnection:
        """The live connection to ``node_id``, connecting first if there is none.

        A dead connection is replaced. A node in reconnect backoff is waited
        for (at most ``reconnect.backoff.max.ms``); check :meth:`is_ready` /
        :meth:`connection_delay` first to avoid waiting. Concurrent callers
        share one connect attempt. Raises :class:`KafkaConnectionError` when
        the node is not in the metadata or cannot be reached.
        """
        if self._closed:
            raise KafkaConnectionError("the client is closed")
        conn = self._conns.get(node_id)
        if conn is not None:
            if conn.is_connected:
                return conn
            del self._conns[node_id]
            await conn.close()
            conn = self._conns.get(node_id)  # another caller may have replaced it meanwhile
            if conn is not None and conn.is_connected:
                return conn
        task = self._connecting.get(node_id)
        if task is None:
            task = asyncio.create_task(self._connect(node_id), name=f"aioproducer-connect-{node_id}")
            self._connecting[node_id] = task
            task.add_done_callback(lambda t: self._connect_done(node_id, t))
        return await asyncio.shield(task)

    async def connection_to(self, node_id: int, host: str, port: int) -> BrokerConnection:
        """:meth:`connection`, at ``host:port`` when the metadata does not list ``node_id`` (yet).

        For coordinators: a FindCoordinator answer names the broker's id, host and port, and that
        broker may have been down at the last metadata update, so the snapshot would lack it
        until ``metadata.max.age.ms`` (minutes of failed transactions). As Java's
        TransactionManager, connect to the address the answer names; a metadata update is
        requested too. The metadata's address wins once it lists the node.
        """
        if node_id not in self._metadata.nodes:
            self._unlisted[node_id] = (host, port)
            self.request_update()
        return await self.connection(node_id)

    def _connect_done(self, node_id: int, task: asyncio.Task[BrokerConnection]) -> None:
        if self._connecting.get(node_id) is task:
            del self._connecting[node_id]
        if not task.cancelled():
            task.exception()  # retrieved: every caller may have been cancelled

    async def _connect(self, node_id: int) -> BrokerConnection:
        node = self._metadata.nodes.get(node_id)
        address = (node.host, node.port) if node is not None else self._unlisted.get(node_id)
        if address is None:
            raise KafkaConnectionError(f"node {node_id} is not in the cluster metadata")
        delay = self.connection_delay(node_id)
        if delay > 0:
            await asyncio.sleep(delay / 1000)
        state = self._backoff.setdefault(node_id, _NodeBackoff())
        state.last_attempt_ms = self._clock()
        conn = self._new_connection(*address, node_id)
        try:
            await conn.connect()
        except KafkaError as exc:
            if state.failures == 0:
                state.unreachable_since = state.last_attempt_ms
                self._log.warning(
                    "node %s (%s) is unreachable: %s; retrying with backoff up to reconnect.backoff.max.ms=%d ms",
                    node_id, conn.address, exc, self._config.reconnect_backoff_max_ms,
                )
            state.last_error = exc
            state.failures += 1
            state.backoff_ms = self._reconnect_backoff_ms(state.failures + state.closed_early)
            self._attempt_failed()
            self.request_update()  # the broker may have moved or left
            raise
        if self._closed:
            await conn.close()
            raise KafkaConnectionError("the client was closed while connecting")
        self._node_reachable(node_id, conn)
        self._note_features(conn)
        current = self._conns.get(node_id)
        if current is not None and current.is_connected:
            # Never overwrite a connection: one dropped unclosed keeps its socket open and its
            # reader task, held by nothing else (asyncio holds tasks weakly), dies pending.
            await conn.close()
            return current
        self._conns[node_id] = conn
        if current is not None:
            await current.close()  # a broken one nobody removed yet
        return conn

    def _note_features(self, conn: BrokerConnection) -> None:
        """Keep the newest finalized features a broker reported (a higher epoch; brokers learn of a change at different times)."""
        epoch = conn.finalized_features_epoch
        if epoch > self._finalized_features_epoch:
            self._finalized_features = conn.finalized_features
            self._finalized_features_epoch = epoch

    def finalized_feature_level(self, name: str) -> int:
        """The cluster's finalized level of feature ``name`` (KIP-584), as the newest ApiVersions said; 0: not finalized or not known."""
        return self._finalized_features.get(name, 0)

    def _node_reachable(self, node_id: int, conn: BrokerConnection) -> None:
        """A connection to ``node_id`` succeeded: its backoff resets and its outage episode, if any, ends."""
        self._no_broker_since = None
        state = self._backoff.get(node_id)
        if state is None or state.failures == 0:
            return
        self._log.info(
            "node %s (%s) is reachable again after %.1f s and %d failed connection attempts",
            node_id, conn.address, max(0.0, self._clock() - state.unreachable_since) / 1000, state.failures,
        )
        state.failures = 0
        state.last_error = None

    def _attempt_failed(self) -> None:
        """A connection attempt failed: with no live connection to any broker, a cluster-wide outage begins."""
        if self._no_broker_since is None and not any(c.is_connected for c in self._conns.values()):
            self._no_broker_since = self._clock()

    @property
    def brokers_reachable(self) -> bool:
        """False during a cluster-wide outage: from a connection attempt that failed while no
        connection to any broker was live, until a connection to any broker (or bootstrap
        server) succeeds. True before any attempt failed, and while idle connections are closed
        by the brokers (nothing failed: the next attempt will tell).
        """
        return self._no_broker_since is None

    def connection_error(self, node_id: int) -> errors.KafkaError | None:
        """Why the last attempt to connect to ``node_id`` failed, if it did and none succeeded since."""
        state = self._backoff.get(node_id)
        return None if state is None else state.last_error

    def _reconnect_backoff_ms(self, failures: int) -> float:
        """``reconnect.backoff.ms * 2**(failures-1)`` jittered ±20 %, capped at the max."""
        return self._backoff_ms(self._config.reconnect_backoff_ms, self._config.reconnect_backoff_max_ms, failures)

    def _backoff_ms(self, base: int, cap: int, failures: int) -> float:
        """``base * 2**(failures-1)`` jittered ±20 %, capped at ``cap`` (or ``base`` if above it)."""
        term = base * 2.0 ** min(failures - 1, 62)
        jittered = term * self._rng.uniform(1 - _BACKOFF_JITTER, 1 + _BACKOFF_JITTER)
        return min(jittered, max(cap, base))

    # ------------------------------------------------------------------ close

    async def close(self, deadline_ms: float | None = None) -> None:
        """Close every connection and wait for pending connects and refreshes to end. Idempotent.

        ``deadline_ms`` (on the client's clock; None: none) bounds the graceful part: a socket closes
        gracefully once the peer has read what is buffered, which a broker that stopped
        reading never does. What is not closed by then is dropped (:meth:`BrokerConnection.abort`).
        """
        self._closed = True
        self.interrupt_waits()
        left = None if deadline_ms is None else max(0.0, deadline_ms - self._clock()) / 1000
        try:
            async with asyncio.timeout(left):
                await self._close_gracefully()
        except TimeoutError:
            self._log.info("client close ran out of time: dropping the connections, unsent bytes with them")
            await self._abort_all()

    def _background(self) -> list[asyncio.Task[Any]]:
        """Connect attempts and the Metadata refresh in flight, each cancelled."""
        pending: list[asyncio.Task[Any]] = [*self._connecting.values()]
        if self._refresh is not None:
            pending.append(self._refresh)
        for task in pending:
            task.cancel()
        return pending

    async def _close_gracefully(self) -> None:
        pending = self._background()
        if pending:
            await asyncio.wait(pending)
        conns = list(self._conns.values())
        self._conns.clear()
        self._closing_conns = conns
        await asyncio.gather(*(c.close() for c in conns))

    def abandon(self) -> None:
        """Drop everything now, synchronously: for a producer collected without ``close()``."""
        self._closed = True
        self.interrupt_waits()
        self._background()
        for conn in [*self._conns.values(), *self._closing_conns]:
            conn.abort_socket()
        self._conns.clear()

    async def _abort_all(self) -> None:
        """Drop every socket now; wait only for our own cancelled tasks, which end at their next step."""
        pending = self._background()
        conns = [*self._conns.values(), *self._closing_conns]
        self._conns.clear()
        await asyncio.gather(*(c.abort() for c in conns))
        if pending:
            await asyncio.wait(pending)
