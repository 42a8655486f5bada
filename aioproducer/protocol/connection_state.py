"""The client side of one Kafka connection as a pure state machine: bytes and time in, events out.

Why sans-I/O. Everything that makes a Kafka connection correct is bookkeeping:
which correlation id answers which request, how many requests may be in
flight, when a request has waited too long, which API versions were agreed,
where one response frame ends and the next begins. None of it needs a socket
or an event loop, and all of it is easier to get right when it can be tested
by feeding bytes and clock readings to an object and looking at what comes
out, as h11 does for HTTP. :class:`ClientConnection` is that object; the
asyncio adapter, :class:`~aioproducer.network.connection.BrokerConnection`,
only moves bytes between it and a socket, keeps one timer at
:attr:`ClientConnection.next_deadline` and turns events into callbacks.

How it is driven. The owner calls:

* :meth:`~ClientConnection.initiate` once the TCP connection is up: it returns
  the ApiVersions request to write, and negotiation starts;
* :meth:`~ClientConnection.send_request` / :meth:`~ClientConnection.send_produce`
  to send a request: they return the frame to write, as chunks for
  ``writelines`` (Produce keeps its hand-written codec);
* :meth:`~ClientConnection.receive_data` with whatever the socket gave, ``b""``
  at end of stream;
* :meth:`~ClientConnection.check_timeouts` with the time, when the clock
  passes :attr:`~ClientConnection.next_deadline`;
* :meth:`~ClientConnection.request_written` when an ``acks=0`` Produce frame
  (which gets no answer) has been written out;
* :meth:`~ClientConnection.close` when the owner closes the connection.

:meth:`~ClientConnection.receive_data`, :meth:`~ClientConnection.check_timeouts`
and :meth:`~ClientConnection.close` return a list of events, to handle in order: a
:class:`ResponseReceived` or :class:`RequestFailed` per request, carrying the
opaque *token* the owner gave with the request (a callback, a future: the
state machine never looks at it), or one :class:`ProduceAnswered` for Produce
answers read in a row on the hot path; :class:`DataToSend` when the machine itself
has a request to write (an ApiVersions retry); :class:`Throttled` when a
Produce response asks the client to hold off (KIP-219); :class:`ConnectionBroken`
last, once, when the stream can no longer be trusted. Every request ends in
exactly one :class:`ResponseReceived` or :class:`RequestFailed` (or a place in a
:class:`ProduceAnswered`), except an
``acks=0`` one that :meth:`~ClientConnection.request_written` completes (it
returns True: the owner, which called it, knows).

Time is "now" in milliseconds from any monotonic clock, passed in by the
caller: the machine never reads a clock.

States (:class:`ConnectionState`)::

    NEW --initiate()--> NEGOTIATING --ApiVersions answered--------------------------> READY
                            |   (with a SASL mechanism:)                               ^  |
                            +--> SASL_HANDSHAKE --agreed--> AUTHENTICATING --done------+  |
                                                                                          |
    READY --begin_reauthentication()--> REAUTHENTICATING --done--> READY  <---------------+
     any state --- close() / broken / authentication failed ---> CLOSED

Authentication (SASL_PLAINTEXT, SASL_SSL). :meth:`~ClientConnection.initiate`
takes the mechanism's client (a :class:`SaslMechanism`: the first message, then
a reply per server challenge, checking the server where the mechanism can):
after ApiVersions the machine sends SaslHandshake v1 (the mechanism), then
SaslAuthenticate round trips until the mechanism is satisfied; only then is the
connection READY and the negotiation token answered. A refused mechanism or
failed authentication fails that token with :class:`UnsupportedSaslMechanismError`
or :class:`SaslAuthenticationFailedError` naming the broker, and breaks the
connection. Kafka's session lifetime (``connections.max.reauth.ms``, KIP-368)
comes back with the last SaslAuthenticate answer: :attr:`~ClientConnection.reauthenticate_at`
says when to authenticate again, which the owner starts with
:meth:`~ClientConnection.begin_reauthentication` and a fresh mechanism client
(an OAUTHBEARER token is fetched by the owner, asynchronously, first). While
REAUTHENTICATING no new request is accepted (``has_free_slot`` is False); the
requests in flight are answered as usual, and once none awaits an answer the
handshake goes out as a :class:`DataToSend` event. Its end is answered on the
token given to ``begin_reauthentication``.

Who owns what. :class:`ClientConnection` owns, and alone changes:

* ``_state``, ``close_reason``: the lifecycle; ``close_reason`` is set once,
  when the state becomes CLOSED;
* ``_sequence``: requests encoded so far; a request's correlation id is its
  sequence number modulo 2**31;
* ``_in_flight``: requests written that await a response, oldest first (a
  broker answers a connection's requests in order); each entry holds one slot;
* ``_unwritten``: ``acks=0`` Produce requests handed out but not reported
  written; each holds one slot; ``_unanswered``: the correlation ids of recent
  ``acks=0`` requests, in case a broker answers them after all;
* ``_slots_held``/``_max_slots_held``: in-flight slots in use (entries of the
  two queues above plus slots reserved by :meth:`~ClientConnection.acquire_slot`);
* ``_buffer``/``_needed``: bytes of an incomplete frame and how many make it whole;
* ``_broker_versions``, ``_produce_version``: the negotiated API versions;
* ``_negotiation_version``: the ApiVersions version last sent while NEGOTIATING;
* ``_auth``: the authentication under way (mechanism client, token, whether the
  handshake is out), None outside SASL_HANDSHAKE, AUTHENTICATING, REAUTHENTICATING;
  ``_reauthenticate_at``: when the session runs out, scaled by ``reauth_fraction``.

``client_id``, ``max_in_flight``, ``request_timeout_ms``, ``max_response_size`` and
``reauth_fraction`` are configuration, fixed at construction. ``node_id`` and ``address`` are only
for messages; the owner may update ``node_id`` (a bootstrap connection learns
its broker's id later).
"""

from __future__ import annotations

import collections
import enum
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, TypeAlias, TypeVar

from aioproducer.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
    error_for_code,
)
from aioproducer.protocol import messages, produce
from aioproducer.protocol.produce import TopicData

__all__ = [
    "MAX_RESPONSE_SIZE",
    "PRODUCE_CLIENT_THROTTLE_VERSION",
    "ClientConnection",
    "ConnectionBroken",
    "ConnectionState",
    "DataToSend",
    "Event",
    "ProduceAnswered",
    "RequestFailed",
    "ResponseReceived",
    "SaslMechanism",
    "Throttled",
    "not_kafka_hint",
]

#: Largest response frame accepted. Responses a producer gets are small (a
#: Metadata response for thousands of partitions is a few MiB); a larger size
#: prefix means we are reading garbage, and trusting it would make us wait for
#: gigabytes that never come instead of failing.
MAX_RESPONSE_SIZE: Final = 100 * 1024 * 1024

#: The first Produce version whose throttle_time_ms the client must wait out itself (KIP-219).
PRODUCE_CLIENT_THROTTLE_VERSION: Final = 6

#: How many acks=0 correlation ids to remember in case the broker answers them
#: after all; a real broker never does, so this only bounds memory.
_MAX_UNANSWERED: Final = 1024

_CORRELATION_MASK: Final = 0x7FFFFFFF
_SIZE: Final = struct.Struct(">i")

Token = TypeVar("Token")
Chunks: TypeAlias = list[bytes | bytearray | memoryview]


class ConnectionState(enum.Enum):
    """Where a connection is in its life (see the module docstring for the transitions)."""

    NEW = "new"
    NEGOTIATING = "negotiating"
    SASL_HANDSHAKE = "sasl-handshake"
    AUTHENTICATING = "authenticating"
    READY = "ready"
    REAUTHENTICATING = "reauthenticating"
    CLOSED = "closed"


class SaslMechanism(Protocol):
    """The client side of one SASL authentication (``aioproducer.security.sasl`` has PLAIN, SCRAM, OAUTHBEARER).

    Pure: bytes in, bytes out. ``respond`` gets each server message and returns the next
    client message, or None once the mechanism is satisfied (for SCRAM: the server's
    signature checked); it raises :class:`SaslAuthenticationFailedError` when the server
    cannot be trusted.
    """

    mechanism: str

    def initial_response(self) -> bytes: ...

    def respond(self, challenge: bytes) -> bytes | None: ...


#: SASL requests are the machine's own: an owner sending one would desynchronize authentication.
_SASL_APIS: Final = frozenset((messages.SASL_HANDSHAKE, messages.SASL_AUTHENTICATE))


# ------------------------------------------------------------------ events


@dataclass(slots=True)
class ResponseReceived(Generic[Token]):
    """The response to the request sent with ``token``, decoded.

    ``body`` is a :class:`~aioproducer.protocol.produce.ProduceAnswer` for
    :meth:`ClientConnection.send_produce`, else the generic codec's dict (for
    negotiation: the ApiVersions response that was accepted).
    """

    token: Token
    body: Any


@dataclass(slots=True)
class ProduceAnswered(Generic[Token]):
    """Produce requests answered in a row, in the order sent: ``tokens[i]``'s answer is ``answers[i]``.

    What :class:`ResponseReceived` says of each, for the answers the hot path reads together
    (``produce.read_produce_answers``: about five a read at 10 KB records). One event for
    them, not one each: the per-answer object and its handling were about 1 µs an answer.
    Each answer is a :class:`~aioproducer.protocol.produce.ProduceAnswer`.
    """

    tokens: list[Token]
    answers: list[Any]


@dataclass(slots=True)
class RequestFailed(Generic[Token]):
    """The request sent with ``token`` will get no (usable) response.

    ``error``: :class:`KafkaTimeoutError` for the request that timed out,
    :class:`ProtocolError` for the one whose response was malformed,
    :class:`UnsupportedVersionError` for a negotiation the broker refused,
    and :class:`KafkaConnectionError` (retriable) for every other request on
    a connection that broke or was closed.
    """

    token: Token
    error: KafkaError


@dataclass(slots=True)
class DataToSend:
    """A request the state machine sends by itself (an ApiVersions retry): write ``data``."""

    data: Chunks


@dataclass(slots=True)
class Throttled:
    """A Produce response (v6+) asks the client not to send to this broker for ``throttle_time_ms``."""

    throttle_time_ms: int


@dataclass(slots=True)
class ConnectionBroken:
    """The stream broke (end of stream, garbage, a timeout): close the socket. Always the last event."""

    error: KafkaError


Event: TypeAlias = (
    ResponseReceived[Token] | ProduceAnswered[Token] | RequestFailed[Token] | DataToSend | Throttled | ConnectionBroken
)


# -------------------------------------------------------------- requests


@dataclass(slots=True)
class _Pending(Generic[Token]):
    """A request handed out whose outcome is not known yet; it holds one in-flight slot."""

    token: Token
    correlation_id: int
    sequence: int
    api_key: int
    version: int
    #: When the request fails with a timeout (ms, the caller's clock).
    deadline: float
    #: Decode with the hand-written Produce codec (else the generic one).
    fast_produce: bool


@dataclass(slots=True)
class _Authentication(Generic[Token]):
    """One authentication under way: the mechanism's client and the token its outcome answers."""

    token: Token
    client: SaslMechanism
    #: The ApiVersions answer, delivered on ``token`` once authenticated (None when re-authenticating).
    negotiated: Any = None
    handshake_sent: bool = False


def _api_name(api_key: int) -> str:
    """A human name for error messages ("Produce (0)")."""
    name = messages.API_NAMES.get(api_key)
    return f"{name} ({api_key})" if name else f"API key {api_key}"


def _is_unsupported_api_versions(entry: _Pending[Any], payload: bytes) -> bool:
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


def not_kafka_hint(head: bytes) -> str:
    """What the first bytes of a bad frame say about the peer (a wrong port is the usual cause)."""
    if head.startswith(b"HTTP") or head[:3] in (b"<ht", b"<!D", b"<HT"):
        return "the peer speaks HTTP, not the Kafka protocol (is this a web or REST port?)"
    if head[:1] == b"\x15" and head[1:2] == b"\x03":
        return "the peer answered with a TLS alert: it expects TLS (security.protocol SSL or SASL_SSL)"
    if head[:1] == b"\x16" and head[1:2] == b"\x03":
        return "the peer answered with a TLS handshake: it expects TLS (security.protocol SSL or SASL_SSL)"
    return f"the peer does not speak the Kafka protocol (first bytes {head!r})"


class ClientConnection(Generic[Token]):
    """The protocol state of one client connection to one broker (see the module docstring).

    Never does I/O and never reads a clock; not thread-safe (one owner drives it).
    """

    def __init__(
        self,
        *,
        client_id: str | None,
        address: str = "broker",
        node_id: int = -1,
        max_in_flight: int = 5,
        request_timeout_ms: int = 30000,
        client_software_name: str = "aioproducer",
        client_software_version: str = "0",
        max_response_size: int = MAX_RESPONSE_SIZE,
        reauth_fraction: float = 0.9,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, got {max_in_flight}")
        if not 0.0 < reauth_fraction <= 1.0:
            raise ValueError(f"reauth_fraction must be in (0, 1], got {reauth_fraction}")
        self.client_id = client_id
        #: ``host:port`` and the broker's id, for messages only.
        self.address = address
        self.node_id = node_id
        self.max_in_flight = max_in_flight
        self.request_timeout_ms = request_timeout_ms
        self.max_response_size = max_response_size
        self._software = (client_software_name, client_software_version)
        self._state = ConnectionState.NEW
        #: Why the connection closed; None while it is not CLOSED.
        self.close_reason: KafkaError | None = None
        self._sequence = 0
        self._in_flight: collections.deque[_Pending[Token]] = collections.deque()
        self._unwritten: collections.deque[_Pending[Token]] = collections.deque()
        #: (sequence, correlation id) of recent acks=0 requests, oldest first: see _match.
        self._unanswered: collections.deque[tuple[int, int]] = collections.deque(maxlen=_MAX_UNANSWERED)
        self._slots_held = 0
        self._max_slots_held = 0
        self._buffer = bytearray()
        self._needed = 4
        self._broker_versions: dict[int, tuple[int, int]] = {}
        self._produce_version: int | None = None
        self._finalized_features: dict[str, int] = {}
        self._finalized_features_epoch = -1
        self._negotiation_version = 0
        #: Re-authenticate this far into the session lifetime the broker gives (Java draws 85-95 %).
        self.reauth_fraction = reauth_fraction
        self._auth: _Authentication[Token] | None = None
        self._pending_sasl: SaslMechanism | None = None
        self._reauthenticate_at: float | None = None
        #: Whether the owner sent a request that expects an answer (past negotiation and SASL),
        #: and whether the broker answered one: a connection lost with requests sent and none
        #: answered was no use, and its owner backs off before the next one (``never_answered``).
        self.requested: bool = False
        self.answered: bool = False

    def __repr__(self) -> str:
        return f"<ClientConnection node={self.node_id} {self.address} {self._state.value}>"

    # --------------------------------------------------------------- state

    @property
    def state(self) -> ConnectionState:
        return self._state

    @property
    def in_flight_count(self) -> int:
        """Slots in use: requests awaiting an answer, acks=0 frames not yet written, reserved slots."""
        return self._slots_held

    @property
    def max_in_flight_observed(self) -> int:
        """The highest ``in_flight_count`` ever reached: lets tests check the limit held."""
        return self._max_slots_held

    @property
    def has_free_slot(self) -> bool:
        """Whether a request may be sent now: READY (not re-authenticating) and a slot free."""
        return self._slots_held < self.max_in_flight and self._state is ConnectionState.READY

    @property
    def free_slots(self) -> int:
        """How many requests may be sent now (``has_free_slot`` as a count): 0 unless READY."""
        if self._state is not ConnectionState.READY:
            return 0
        return max(0, self.max_in_flight - self._slots_held)

    @property
    def never_answered(self) -> bool:
        """Requests expecting an answer were sent and none was answered (yet)."""
        return self.requested and not self.answered

    @property
    def is_established(self) -> bool:
        """Negotiated and authenticated; True while re-authenticating, which keeps the connection."""
        return self._state is ConnectionState.READY or self._state is ConnectionState.REAUTHENTICATING

    @property
    def reauthenticate_at(self) -> float | None:
        """When to start re-authenticating (ms), None when the broker set no session lifetime (KIP-368)."""
        return self._reauthenticate_at

    @property
    def next_deadline(self) -> float | None:
        """When :meth:`check_timeouts` may next fail a request (ms), None when nothing can time out.

        Requests are sent with the same timeout in time order, so the oldest of
        each queue is the first to expire.
        """
        in_flight, unwritten = self._in_flight, self._unwritten
        if in_flight:
            deadline = in_flight[0].deadline
            return min(deadline, unwritten[0].deadline) if unwritten else deadline
        return unwritten[0].deadline if unwritten else None

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

    def produce_version(self, transaction_v2: bool = False) -> int:
        """The Produce version for this broker, computed once (the hot path asks per request).

        v12 (``transaction_v2``: a transaction under ``transaction.version`` 2 adds its partitions
        by producing to them) or at most v11: a broker takes v12 inside a transaction only
        under transactions v2, so nobody else sends it. A broker without v12 asked for it is an
        :class:`UnsupportedVersionError` (the cluster finalized a feature this broker lacks).
        """
        if transaction_v2:
            version = self.api_version(messages.PRODUCE)
            if version < produce.TRANSACTION_V2_VERSION:
                raise UnsupportedVersionError(
                    f"broker {self.address} (node {self.node_id}) speaks Produce up to v{version}, but the "
                    f"cluster's transaction.version is 2, which needs v{produce.TRANSACTION_V2_VERSION}"
                )
            return produce.TRANSACTION_V2_VERSION
        cached = self._produce_version
        if cached is None:
            cached = self._produce_version = min(self.api_version(messages.PRODUCE), produce.TRANSACTION_V2_VERSION - 1)
        return cached

    @property
    def finalized_features(self) -> dict[str, int]:
        """The cluster's finalized feature levels from ApiVersions v3+ (KIP-584), ``name -> max level`` (a copy).

        ``transaction.version`` among them says whether transactions v2 may be used. Empty
        before the answer, or from a broker older than ApiVersions v3.
        """
        return dict(self._finalized_features)

    @property
    def finalized_features_epoch(self) -> int:
        """The epoch of :attr:`finalized_features` (-1: none): a higher one is the newer word."""
        return self._finalized_features_epoch

    # --------------------------------------------------------------- slots

    def acquire_slot(self) -> None:
        """Reserve an in-flight slot for a request sent later with ``reserved=True``.

        For an owner that queues its callers for slots: it reserves for the
        first in line as soon as one frees, so a newcomer cannot take it first.
        """
        if self._slots_held >= self.max_in_flight:
            raise RuntimeError(f"{self!r}: no in-flight slot free")
        self._take_slot()

    def release_slot(self) -> None:
        """Give back a slot reserved with :meth:`acquire_slot` and not used."""
        if self._slots_held <= 0:
            raise RuntimeError(f"{self!r}: release_slot() without a slot held")
        self._slots_held -= 1

    def _take_slot(self) -> None:
        held = self._slots_held = self._slots_held + 1
        if held > self._max_slots_held:
            self._max_slots_held = held

    # ---------------------------------------------------------- negotiation

    def initiate(self, token: Token, now: float, sasl: SaslMechanism | None = None) -> Chunks:
        """Start ApiVersions negotiation (KIP-35/511), then SASL with ``sasl``: the request to write first.

        Negotiation ends with :class:`ResponseReceived` for ``token`` (the
        accepted ApiVersions response; the state is then READY) or
        :class:`RequestFailed` followed by :class:`ConnectionBroken`.
        """
        if self._state is not ConnectionState.NEW:
            raise RuntimeError(f"{self!r}: initiate() in state {self._state.value}")
        self._state = ConnectionState.NEGOTIATING
        self._pending_sasl = sasl
        version = messages.SUPPORTED_VERSIONS[messages.API_VERSIONS][1]
        return self._send_api_versions(token, version, now)

    def _send_api_versions(self, token: Token, version: int, now: float) -> Chunks:
        self._negotiation_version = version
        name, software_version = self._software
        body = {"client_software_name": name, "client_software_version": software_version}
        self._take_slot()
        return self._register(token, messages.API_VERSIONS, version, body, now)

    def _on_api_versions(self, token: Token, body: dict[str, Any], now: float, events: list[Event[Token]]) -> None:
        """Negotiation's answer: accept it, retry at a lower version, or fail.

        A broker that does not know our ApiVersions version answers
        UNSUPPORTED_VERSION in v0 format, listing the ApiVersions range it does
        know (KIP-511); we retry at the highest version in both ranges, or v0
        when it gave none, as the Java client and librdkafka do.
        """
        our_min = messages.SUPPORTED_VERSIONS[messages.API_VERSIONS][0]
        version = self._negotiation_version
        error_code = body.get("error_code", 0)
        if error_code == messages.UNSUPPORTED_VERSION_ERROR_CODE and version > our_min:
            offered = [
                int(k["max_version"]) for k in body.get("api_keys") or () if k["api_key"] == messages.API_VERSIONS
            ]
            # The broker's max when it told us (never higher than what failed), else v0.
            retry = max(our_min, min(offered[0], version - 1) if offered else 0)
            events.append(DataToSend(self._send_api_versions(token, retry, now)))
            return
        if error_code != 0:
            error = UnsupportedVersionError(
                f"broker {self.address} (node {self.node_id}) rejected ApiVersions "
                f"v{version} with error code {error_code}"
            )
            events.append(RequestFailed(token, error))
            self._break(error, events)
            return
        self._broker_versions = {
            int(k["api_key"]): (int(k["min_version"]), int(k["max_version"])) for k in body.get("api_keys") or ()
        }
        self._finalized_features = {
            str(f["name"]): int(f["max_version_level"]) for f in body.get("finalized_features") or ()
        }
        self._finalized_features_epoch = int(body.get("finalized_features_epoch", -1))
        sasl, self._pending_sasl = self._pending_sasl, None
        if sasl is not None:
            self._state = ConnectionState.SASL_HANDSHAKE
            auth = self._auth = _Authentication(token, sasl, negotiated=body)
            self._send_handshake(auth, now, events)
            return
        self._state = ConnectionState.READY
        events.append(ResponseReceived(token, body))

    # -------------------------------------------------------- authentication

    def begin_reauthentication(self, token: Token, sasl: SaslMechanism, now: float) -> list[Event[Token]]:
        """Authenticate the connection again (KIP-368); events, as :meth:`receive_data` returns them.

        No new request is accepted until it ends. The handshake goes out once no request
        awaits an answer: at once if none does (a :class:`DataToSend` event here), else
        after the last answer. The outcome comes on ``token``: :class:`ResponseReceived`
        (the last SaslAuthenticate answer), or :class:`RequestFailed` and :class:`ConnectionBroken`.
        """
        if self._state is not ConnectionState.READY:
            raise RuntimeError(f"{self!r}: begin_reauthentication() in state {self._state.value}")
        self._state = ConnectionState.REAUTHENTICATING
        self._reauthenticate_at = None
        auth = self._auth = _Authentication(token, sasl)
        events: list[Event[Token]] = []
        if not self._in_flight:
            self._send_handshake(auth, now, events)
        return events

    def _send_handshake(self, auth: _Authentication[Token], now: float, events: list[Event[Token]]) -> None:
        """SaslHandshake v1: v0 would carry the SASL messages unframed, which aioproducer does not speak."""
        try:
            version = self.api_version(messages.SASL_HANDSHAKE)
            if version < 1:
                raise UnsupportedVersionError(
                    f"broker {self.address} (node {self.node_id}) speaks SaslHandshake v0 only "
                    "(SASL without Kafka framing, Kafka < 1.0): not supported"
                )
        except UnsupportedVersionError as exc:
            self._fail_authentication(exc, events)
            return
        auth.handshake_sent = True
        self._take_slot()
        body = {"mechanism": auth.client.mechanism}
        events.append(DataToSend(self._register(auth.token, messages.SASL_HANDSHAKE, version, body, now)))

    def _send_authenticate(self, auth: _Authentication[Token], data: bytes, now: float) -> Chunks:
        self._take_slot()
        version = self.api_version(messages.SASL_AUTHENTICATE)
        return self._register(auth.token, messages.SASL_AUTHENTICATE, version, {"auth_bytes": data}, now)

    def _on_sasl_response(self, head: _Pending[Token], body: Any, now: float, events: list[Event[Token]]) -> None:
        auth = self._auth
        assert auth is not None
        mechanism = auth.client.mechanism
        code = int(body.get("error_code", 0))
        if head.api_key == messages.SASL_HANDSHAKE:
            if code:
                enabled = ", ".join(body.get("mechanisms") or ()) or "none"
                cls = UnsupportedSaslMechanismError if code == UnsupportedSaslMechanismError.errno else error_for_code(code)
                self._fail_authentication(
                    cls(f"broker {self.address} (node {self.node_id}) refused SASL mechanism {mechanism}: it enables {enabled}"),
                    events,
                )
                return
            if self._state is ConnectionState.SASL_HANDSHAKE:
                self._state = ConnectionState.AUTHENTICATING
            self._next_auth_message(auth, lambda: auth.client.initial_response(), now, events)
            return
        if code:
            reason = body.get("error_message") or "no reason given"
            cls = SaslAuthenticationFailedError if code == SaslAuthenticationFailedError.errno else error_for_code(code)
            self._fail_authentication(
                cls(f"SASL {mechanism} authentication failed at broker {self.address} (node {self.node_id}): {reason}"),
                events,
            )
            return
        challenge: bytes = body.get("auth_bytes") or b""
        if self._next_auth_message(auth, lambda: auth.client.respond(challenge), now, events):
            return
        lifetime = int(body.get("session_lifetime_ms") or 0)
        self._reauthenticate_at = now + lifetime * self.reauth_fraction if lifetime > 0 else None
        self._auth = None
        result = auth.negotiated if self._state is ConnectionState.AUTHENTICATING else body
        self._state = ConnectionState.READY
        events.append(ResponseReceived(auth.token, result))

    def _next_auth_message(
        self, auth: _Authentication[Token], make: Callable[[], bytes | None], now: float, events: list[Event[Token]]
    ) -> bool:
        """Send the mechanism's next message; False when it has none (authenticated). Fails on its error."""
        try:
            data: bytes | None = make()
        except KafkaError as exc:
            error = SaslAuthenticationFailedError(
                f"SASL {auth.client.mechanism} authentication with broker {self.address} (node {self.node_id}) failed: {exc}"
            )
            error.__cause__ = exc
            self._fail_authentication(error, events)
            return True
        if data is None:
            return False
        events.append(DataToSend(self._send_authenticate(auth, data, now)))
        return True

    def _fail_authentication(self, error: KafkaError, events: list[Event[Token]]) -> None:
        auth, self._auth = self._auth, None
        if auth is not None:
            events.append(RequestFailed(auth.token, error))
        self._break(error, events)

    # ------------------------------------------------------------- sending

    def send_request(
        self,
        token: Token,
        api_key: int,
        version: int,
        body: dict[str, Any],
        now: float,
        *,
        expect_response: bool = True,
        reserved: bool = False,
    ) -> Chunks:
        """Encode a request with the generic codec and track it; the frame to write.

        Needs READY and a free slot, or one reserved with :meth:`acquire_slot`
        (``reserved=True``), which the request then holds. ``expect_response=False``
        is for Produce with ``acks=0``, which the broker never answers: its slot
        is held until :meth:`request_written`. ``ValueError`` when the body does
        not encode; nothing is tracked then (a reserved slot stays reserved).
        """
        self._check_sendable(reserved)
        if expect_response:
            self.requested = True
        if api_key in _SASL_APIS:
            raise ValueError(f"{_api_name(api_key)} is sent by the connection itself (pass a mechanism to initiate())")
        frame = messages.encode_request_chunks(
            api_key, version, self._sequence & _CORRELATION_MASK, self.client_id, body
        )
        return self._track(token, api_key, version, now, expect_response, reserved, frame, False)

    def send_produce(
        self,
        token: Token,
        topic_data: TopicData,
        now: float,
        *,
        acks: int,
        timeout_ms: int,
        transactional_id: str | None = None,
        reserved: bool = False,
        transaction_v2: bool = False,
    ) -> Chunks:
        """:meth:`send_request` for Produce at the negotiated version, with the hand-written codec.

        ``transaction_v2``: Produce v12, for a transaction under ``transaction.version`` 2 (see
        :meth:`produce_version`). ``acks=0`` expects no response (see :meth:`send_request`).
        The common case (READY, a free slot, an answer expected) is :meth:`try_send_produce`'s.
        """
        if not reserved and acks:
            frame = self.try_send_produce(token, topic_data, now, acks, timeout_ms, transactional_id, transaction_v2)
            if frame is not None:
                return frame
        self._check_sendable(reserved)
        if acks:
            self.requested = True
        version = self.produce_version(transaction_v2)
        frame = produce.encode_produce_request(
            version, self._sequence & _CORRELATION_MASK, self.client_id, transactional_id, acks, timeout_ms, topic_data
        )
        return self._track(token, messages.PRODUCE, version, now, acks != 0, reserved, frame, True)

    def try_send_produce(
        self,
        token: Token,
        topic_data: TopicData,
        now: float,
        acks: int,
        timeout_ms: int,
        transactional_id: str | None,
        transaction_v2: bool,
    ) -> Chunks | None:
        """A Produce request's frame if the connection takes it now, tracked on a slot of its own; else None.

        None, with nothing changed, unless READY with a free slot and ``acks`` 1 or -1: the
        caller then waits for a slot or a connection (:meth:`send_produce` says which with an
        exception). ``ValueError`` when the batches do not encode, before anything is tracked.
        The sender's hot path: the question (a slot free?) and the request in one call, where they
        were five (the client's, the adapter's and this machine's checks, then the request);
        ``_check_sendable``'s and ``_track``'s steps written out (their calls were about 1 µs of a
        request's 6.8, 2026-12-04). With the memory wait's own way (``RecordIntake.wait_and_append``)
        0.43 µs of the loop's CPU a 10 KB batch and its request (``benchmarks/README.md``, stop 68).
        """
        held = self._slots_held
        if self._state is not ConnectionState.READY or held >= self.max_in_flight or not acks:
            return None
        cached = self._produce_version
        version = self.produce_version(transaction_v2) if cached is None or transaction_v2 else cached
        sequence = self._sequence
        correlation_id = sequence & _CORRELATION_MASK
        frame: Chunks = produce.encode_produce_request(
            version, correlation_id, self.client_id, transactional_id, acks, timeout_ms, topic_data
        )
        self.requested = True
        held = self._slots_held = held + 1
        if held > self._max_slots_held:
            self._max_slots_held = held
        self._sequence = sequence + 1
        self._in_flight.append(
            _Pending(token, correlation_id, sequence, messages.PRODUCE, version, now + self.request_timeout_ms, True)
        )
        return frame

    def check_sendable(self) -> None:
        """Raise why a request cannot be sent now (not READY: ``KafkaConnectionError``; no free slot: ``RuntimeError``)."""
        self._check_sendable(False)

    def _check_sendable(self, reserved: bool) -> None:
        if self._state is not ConnectionState.READY:
            raise KafkaConnectionError(self._not_ready_message())
        if not reserved and self._slots_held >= self.max_in_flight:
            raise RuntimeError(f"{self!r}: no in-flight slot free (check has_free_slot first)")

    def _not_ready_message(self) -> str:
        if self.close_reason is not None:
            return f"connection to {self.address} is closed: {self.close_reason}"
        return f"not connected to {self.address} (node {self.node_id})"

    def _track(
        self,
        token: Token,
        api_key: int,
        version: int,
        now: float,
        expect_response: bool,
        reserved: bool,
        frame: Chunks,
        fast_produce: bool,
    ) -> Chunks:
        """Take the slot (unless reserved) and queue the request just encoded."""
        if not reserved:
            self._take_slot()
        sequence = self._sequence
        self._sequence = sequence + 1
        entry = _Pending(
            token, sequence & _CORRELATION_MASK, sequence, api_key, version, now + self.request_timeout_ms, fast_produce
        )
        if expect_response:
            self._in_flight.append(entry)
        else:
            self._unanswered.append((sequence, entry.correlation_id))
            self._unwritten.append(entry)
        return frame

    def _register(self, token: Token, api_key: int, version: int, body: dict[str, Any], now: float) -> Chunks:
        """Encode and queue a request the machine sends itself, on a slot already taken."""
        frame = messages.encode_request_chunks(api_key, version, self._sequence & _CORRELATION_MASK, self.client_id, body)
        return self._track(token, api_key, version, now, True, True, frame, False)

    def request_written(self, token: Token) -> bool:
        """An ``acks=0`` request's frame is written: its slot is free. False if it had failed already.

        The owner reports it when its write has drained (or when it stops
        waiting for that: the slot must not leak).
        """
        unwritten = self._unwritten
        for entry in unwritten:
            if entry.token is token:
                unwritten.remove(entry)
                self._slots_held -= 1
                return True
        return False

    # ----------------------------------------------------------- receiving

    def receive_data(self, data: bytes, now: float) -> list[Event[Token]]:
        """Feed bytes read from the socket (``b""``: the peer closed it); events for complete frames.

        Frames may arrive in any pieces: a partial frame is kept until the
        rest comes. Bytes arriving after the connection closed are ignored.
        ``now`` dates the requests the machine sends in reply (ApiVersions retries).
        """
        events: list[Event[Token]] = []
        if self._state is ConnectionState.CLOSED:
            return events
        if not data:
            where = "mid-frame" if self._buffer else "between frames"
            self._break(
                KafkaConnectionError(
                    f"connection to {self.address} (node {self.node_id}) closed by the broker {where}"
                ),
                events,
            )
            return events
        buffer = self._buffer
        if buffer:
            buffer += data
            if len(buffer) < self._needed:
                return events  # still inside a frame: no copy until it is whole
            data = bytes(buffer)
            buffer.clear()
        self._parse(data, now, events)
        return events

    def _parse(self, data: bytes, now: float, events: list[Event[Token]]) -> None:
        """Handle every whole frame in ``data``; keep the incomplete tail in the buffer.

        The hot path first: on a READY connection with no ``acks=0`` request's answer possibly in
        the stream, the Produce answers at the front are read in one native call
        (``produce.read_produce_answers``), which takes only what the general path below would
        take the same way and leaves it the rest, one frame at a time (a throttled answer, any
        other request's, a malformed one, which it then says what is wrong with).
        """
        pos, end = 0, len(data)
        in_flight = self._in_flight
        needed = 4
        while end - pos >= 4:
            if in_flight and not self._unanswered and self._state is ConnectionState.READY:
                pos, answered = produce.read_produce_answers(
                    in_flight, data, pos, self.max_response_size, events, ProduceAnswered
                )
                if answered:
                    self._slots_held -= answered
                    self.answered = True
                    if end - pos < 4:
                        break
            size: int = _SIZE.unpack_from(data, pos)[0]
            if not 4 <= size <= self.max_response_size:
                error = ProtocolError(
                    f"response frame from {self.address} has impossible size {size}: "
                    f"{not_kafka_hint(data[pos : pos + 4])}"
                )
                self._fail_stream(error, events)
                return
            frame_end = pos + 4 + size
            if frame_end > end:
                needed = 4 + size
                break
            self._on_frame(data[pos + 4 : frame_end], now, events)
            if self._state is ConnectionState.CLOSED:
                return
            pos = frame_end
        self._needed = needed
        if pos < end:
            self._buffer += data[pos:] if pos else data

    def _on_frame(self, payload: bytes, now: float, events: list[Event[Token]]) -> None:
        """Match one response frame to the oldest request in flight and emit its outcome."""
        try:
            head = self._match(payload)
            if head is None:
                return
            body = self._decode(head, payload)
        except ProtocolError as exc:
            self._fail_stream(exc, events)
            return
        self._in_flight.popleft()
        self._slots_held -= 1
        self._on_response(head, body, now, events)

    def _match(self, payload: bytes) -> _Pending[Token] | None:
        """The request ``payload`` answers (None: an acks=0 one, dropped); ProtocolError if none can be.

        A broker answers in order, so the answer belongs to the oldest request
        in flight; the correlation id is only a cross-check, and a mismatch
        means the stream is out of step.
        """
        correlation_id: int = _SIZE.unpack_from(payload, 0)[0]
        head = self._in_flight[0] if self._in_flight else None
        unanswered = self._unanswered
        if unanswered:
            if head is not None:
                # acks=0 requests sent before ``head`` will not be answered any more once ``head`` is.
                while unanswered and unanswered[0][0] < head.sequence and unanswered[0][1] != correlation_id:
                    unanswered.popleft()
            if unanswered and unanswered[0][1] == correlation_id:
                # An answer to an acks=0 Produce. Kafka sends none, librdkafka's mock
                # broker does; as librdkafka's client does, drop it.
                unanswered.popleft()
                return None
        if head is None:
            raise ProtocolError(
                f"{self.address} sent a response (correlation id {correlation_id}) with no request in flight"
            )
        if correlation_id != head.correlation_id:
            raise ProtocolError(
                f"{self.address} answered correlation id {correlation_id} while "
                f"{head.correlation_id} was next: the stream is out of step"
            )
        return head

    def _decode(self, head: _Pending[Token], payload: bytes) -> Any:
        """The response body; ProtocolError when it does not decode (the ApiVersions fallback aside)."""
        try:
            if head.fast_produce:
                return produce.read_produce_response(head.version, payload)
            # ApiVersions' v0 fallback (KIP-511) is handled by decode_response.
            return messages.decode_response(head.api_key, head.version, payload)[1]
        except ProtocolError:
            if not _is_unsupported_api_versions(head, payload):
                raise
            # The broker refused our ApiVersions version in a body that is neither
            # v0 nor the version we sent (librdkafka's mock broker does this). The
            # error code alone is enough: negotiation falls back to v0, as Java's
            # ApiVersionsResponse.parse + NetworkClient do when no range is given.
            return {"error_code": messages.UNSUPPORTED_VERSION_ERROR_CODE, "api_keys": []}
        except Exception as exc:  # a decoder's contract is ProtocolError only; hold it to that
            raise ProtocolError(
                f"{_api_name(head.api_key)} v{head.version} response from {self.address} does not decode: {exc!r}"
            ) from exc

    def _on_response(self, head: _Pending[Token], body: Any, now: float, events: list[Event[Token]]) -> None:
        """Emit a decoded response's events; during negotiation or authentication, go on with it instead."""
        state = self._state
        if state is ConnectionState.NEGOTIATING:  # only the ApiVersions request is in flight
            self._on_api_versions(head.token, body, now, events)
            return
        if head.api_key in _SASL_APIS:
            self._on_sasl_response(head, body, now, events)
            return
        if state is ConnectionState.REAUTHENTICATING:
            self._emit_response(head, body, events)
            auth = self._auth
            if auth is not None and not auth.handshake_sent and not self._in_flight:
                self._send_handshake(auth, now, events)  # the last answer before re-authenticating
            return
        self._emit_response(head, body, events)

    def _emit_response(self, head: _Pending[Token], body: Any, events: list[Event[Token]]) -> None:
        self.answered = True
        if head.api_key == messages.PRODUCE and head.version >= PRODUCE_CLIENT_THROTTLE_VERSION:
            throttle_ms = body.throttle_time_ms if head.fast_produce else body.get("throttle_time_ms", 0)
            if throttle_ms > 0:
                # Up to v5 the broker throttled by holding the answer back; from v6 the
                # client must hold off itself, or the broker mutes it (KIP-219).
                events.append(Throttled(throttle_ms))
        events.append(ResponseReceived(head.token, body))

    # ------------------------------------------------------------ timeouts

    def check_timeouts(self, now: float) -> list[Event[Token]]:
        """Fail the request whose deadline ``now`` reached, and break the connection.

        As in Java, a timeout closes the connection: the request may still be
        answered, and the stream could no longer be matched up.
        """
        events: list[Event[Token]] = []
        if self._state is ConnectionState.CLOSED:
            return events
        for queue, what in ((self._in_flight, "got no response"), (self._unwritten, "could not be written")):
            if queue and now >= queue[0].deadline:
                expired = queue.popleft()
                self._slots_held -= 1
                error = KafkaTimeoutError(
                    f"{_api_name(expired.api_key)} request to {self.address} (node {self.node_id}) {what} "
                    f"within request.timeout.ms={self.request_timeout_ms}; connection closed"
                )
                events.append(RequestFailed(expired.token, error))
                self._break(KafkaConnectionError(f"connection to {self.address} closed: {error}"), events)
                break
        return events

    # ------------------------------------------------------------- closing

    def close(self, error: KafkaError) -> list[Event[Token]]:
        """The owner closes the connection (or saw the socket fail): fail everything with ``error``.

        Returns the :class:`RequestFailed` events, without :class:`ConnectionBroken`
        (the owner knows). Idempotent: only the first call has an effect.
        """
        events: list[Event[Token]] = []
        if self._state is not ConnectionState.CLOSED:
            self._close(error, events)
        return events

    def _fail_stream(self, error: ProtocolError, events: list[Event[Token]]) -> None:
        """The stream is unreadable: the request it answered learns the cause, the others that it closed."""
        if self._in_flight:
            head = self._in_flight.popleft()
            self._slots_held -= 1
            events.append(RequestFailed(head.token, error))
        broken = KafkaConnectionError(f"connection to {self.address} closed: {error}")
        broken.__cause__ = error
        self._break(broken, events)

    def _break(self, error: KafkaError, events: list[Event[Token]]) -> None:
        self._close(error, events)
        events.append(ConnectionBroken(error))

    def _close(self, error: KafkaError, events: list[Event[Token]]) -> None:
        self._state = ConnectionState.CLOSED
        self.close_reason = error
        self._auth = None
        self._reauthenticate_at = None
        self._buffer.clear()
        for queue in (self._in_flight, self._unwritten):
            while queue:
                entry = queue.popleft()
                self._slots_held -= 1
                events.append(RequestFailed(entry.token, error))
