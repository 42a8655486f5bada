"""SASL as states of the connection state machine: handshake, round trips, failures, KIP-368 re-authentication.

Driven by hand, as ``test_connection_state``: broker answers encoded with the generic codec,
a scripted mechanism standing in for PLAIN/SCRAM/OAUTHBEARER (their own bytes are tested in
``test_sasl``), no event loop.
"""

from __future__ import annotations

from typing import Any

import pytest

from aioproducer.errors import SaslAuthenticationFailedError, UnsupportedSaslMechanismError, UnsupportedVersionError
from aioproducer.protocol import messages
from aioproducer.protocol.connection_state import (
    Chunks,
    ClientConnection,
    ConnectionBroken,
    ConnectionState,
    DataToSend,
    Event,
    RequestFailed,
    ResponseReceived,
)
from test_connection_state import TOPIC_DATA, answer, api_versions_body, header_of, produce_body

Machine = ClientConnection[str]


class Scripted:
    """A mechanism that sends ``messages`` in turn and expects ``challenges`` in turn; the last answer ends it."""

    def __init__(self, messages_out: list[bytes], challenges: list[bytes], mechanism: str = "SCRAM-SHA-256") -> None:
        self.mechanism = mechanism
        self._out = list(messages_out)
        self._expected = list(challenges)
        self.seen: list[bytes] = []

    def initial_response(self) -> bytes:
        return self._out.pop(0)

    def respond(self, challenge: bytes) -> bytes | None:
        self.seen.append(challenge)
        if challenge != self._expected.pop(0):
            raise SaslAuthenticationFailedError("the server's signature does not match")
        return self._out.pop(0) if self._out else None


def with_sasl() -> dict[str, Any]:
    body = api_versions_body()
    body["api_keys"] += [
        {"api_key": messages.SASL_HANDSHAKE, "min_version": 0, "max_version": 1},
        {"api_key": messages.SASL_AUTHENTICATE, "min_version": 0, "max_version": 2},
    ]
    return body


def machine() -> Machine:
    return ClientConnection(client_id="t", address="b:9092", node_id=1, request_timeout_ms=1000, reauth_fraction=0.5)


def state(m: Machine) -> ConnectionState:
    """Read afresh: mypy would narrow ``m.state`` across the calls that change it."""
    return m.state


def only_frame(events: list[Event[str]]) -> Chunks:
    assert len(events) == 1 and isinstance(events[0], DataToSend), events
    return events[0].data


def request_of(frame: Chunks) -> tuple[messages.RequestHeader, dict[str, Any]]:
    data = b"".join(frame)
    return messages.decode_request(data[4:])


def authenticate(m: Machine, mechanism: Scripted, lifetime_ms: int = 0) -> tuple[list[Event[str]], list[dict[str, Any]]]:
    """Negotiate and run the handshake and the round trips as a broker that accepts; every request body seen."""
    frame = m.initiate("connect", 0.0, sasl=mechanism)
    frame = only_frame(m.receive_data(answer(frame, with_sasl()), 0.0))
    assert state(m) is ConnectionState.SASL_HANDSHAKE and not m.has_free_slot
    bodies = [request_of(frame)[1]]
    frame = only_frame(m.receive_data(answer(frame, {"error_code": 0, "mechanisms": ["PLAIN", mechanism.mechanism]}), 0.0))
    challenges = [b"server-first", b"server-final"]
    events: list[Event[str]] = []
    for challenge in challenges:
        assert state(m) is ConnectionState.AUTHENTICATING
        bodies.append(request_of(frame)[1])
        reply = {"error_code": 0, "error_message": None, "auth_bytes": challenge, "session_lifetime_ms": lifetime_ms}
        events = m.receive_data(answer(frame, reply), 10.0)
        if events and isinstance(events[0], DataToSend):
            frame = events[0].data
    return events, bodies


def test_a_sasl_connection_is_ready_only_after_the_mechanism_is_satisfied() -> None:
    m = machine()
    mechanism = Scripted([b"client-first", b"client-final"], [b"server-first", b"server-final"])
    events, bodies = authenticate(m, mechanism)
    assert [type(e) for e in events] == [ResponseReceived]
    assert isinstance(events[0], ResponseReceived) and events[0].token == "connect"
    assert "api_keys" in events[0].body  # the ApiVersions answer, as without SASL
    assert bodies == [{"mechanism": "SCRAM-SHA-256"}, {"auth_bytes": b"client-first"}, {"auth_bytes": b"client-final"}]
    assert state(m) is ConnectionState.READY and m.has_free_slot and m.in_flight_count == 0
    assert m.reauthenticate_at is None  # the broker gave no session lifetime


def test_a_mechanism_the_broker_does_not_enable_fails_naming_what_it_enables() -> None:
    m = machine()
    frame = m.initiate("connect", 0.0, sasl=Scripted([b"x"], [], mechanism="SCRAM-SHA-512"))
    frame = only_frame(m.receive_data(answer(frame, with_sasl()), 0.0))
    events = m.receive_data(answer(frame, {"error_code": 33, "mechanisms": ["PLAIN"]}), 0.0)
    assert [type(e) for e in events] == [RequestFailed, ConnectionBroken]
    assert isinstance(events[0], RequestFailed)
    error = events[0].error
    assert isinstance(error, UnsupportedSaslMechanismError) and not error.retriable
    assert str(error) == (
        "[Error 33] UNSUPPORTED_SASL_MECHANISM: broker b:9092 (node 1) refused SASL mechanism SCRAM-SHA-512: it enables PLAIN"
    )
    assert state(m) is ConnectionState.CLOSED


def test_wrong_credentials_fail_with_the_brokers_reason() -> None:
    m = machine()
    frame = m.initiate("connect", 0.0, sasl=Scripted([b"\0alice\0wrong"], [], mechanism="PLAIN"))
    frame = only_frame(m.receive_data(answer(frame, with_sasl()), 0.0))
    frame = only_frame(m.receive_data(answer(frame, {"error_code": 0, "mechanisms": ["PLAIN"]}), 0.0))
    reply = {"error_code": 58, "error_message": "Authentication failed: Invalid username or password", "auth_bytes": b""}
    events = m.receive_data(answer(frame, reply), 0.0)
    assert [type(e) for e in events] == [RequestFailed, ConnectionBroken]
    assert isinstance(events[0], RequestFailed) and isinstance(events[0].error, SaslAuthenticationFailedError)
    assert str(events[0].error) == (
        "[Error 58] SASL_AUTHENTICATION_FAILED: SASL PLAIN authentication failed at broker b:9092 (node 1): "
        "Authentication failed: Invalid username or password"
    )


def test_a_server_the_mechanism_does_not_trust_fails_the_connection() -> None:
    m = machine()
    frame = m.initiate("connect", 0.0, sasl=Scripted([b"client-first", b"client-final"], [b"server-first", b"signed"]))
    frame = only_frame(m.receive_data(answer(frame, with_sasl()), 0.0))
    frame = only_frame(m.receive_data(answer(frame, {"error_code": 0, "mechanisms": ["SCRAM-SHA-256"]}), 0.0))
    frame = only_frame(m.receive_data(answer(frame, {"error_code": 0, "auth_bytes": b"server-first"}), 0.0))
    events = m.receive_data(answer(frame, {"error_code": 0, "auth_bytes": b"forged"}), 0.0)
    assert [type(e) for e in events] == [RequestFailed, ConnectionBroken]
    assert isinstance(events[0], RequestFailed)
    assert isinstance(events[0].error, SaslAuthenticationFailedError)
    assert "b:9092 (node 1)" in str(events[0].error) and "signature does not match" in str(events[0].error)


def test_a_broker_without_sasl_handshake_v1_fails_instead_of_sending_unframed_tokens() -> None:
    m = machine()
    frame = m.initiate("connect", 0.0, sasl=Scripted([b"x"], []))
    body = api_versions_body()
    body["api_keys"].append({"api_key": messages.SASL_HANDSHAKE, "min_version": 0, "max_version": 0})
    events = m.receive_data(answer(frame, body), 0.0)
    assert [type(e) for e in events] == [RequestFailed, ConnectionBroken]
    assert isinstance(events[0], RequestFailed) and isinstance(events[0].error, UnsupportedVersionError)


def test_sasl_requests_cannot_be_sent_by_the_owner() -> None:
    m = machine()
    m.receive_data(answer(m.initiate("connect", 0.0), api_versions_body()), 0.0)
    with pytest.raises(ValueError, match="sent by the connection itself"):
        m.send_request("x", messages.SASL_AUTHENTICATE, 2, {"auth_bytes": b""}, 0.0)


def test_reauthentication_is_due_at_the_fraction_of_the_session_lifetime() -> None:
    m = machine()
    authenticate(m, Scripted([b"client-first", b"client-final"], [b"server-first", b"server-final"]), lifetime_ms=1000)
    assert m.reauthenticate_at == 10.0 + 500.0  # answered at 10 ms, reauth_fraction 0.5


def test_reauthentication_waits_for_the_answers_in_flight_and_takes_no_new_request_meanwhile() -> None:
    """KIP-368: requests in flight are answered as usual; the handshake follows the last of them."""
    m = machine()
    authenticate(m, Scripted([b"cf", b"cl"], [b"server-first", b"server-final"]), lifetime_ms=1000)
    first = m.send_produce("p1", TOPIC_DATA, 20.0, acks=1, timeout_ms=100)
    second = m.send_produce("p2", TOPIC_DATA, 20.0, acks=1, timeout_ms=100)
    assert m.begin_reauthentication("reauth", Scripted([b"again"], [b""], mechanism="OAUTHBEARER"), 30.0) == []
    assert state(m) is ConnectionState.REAUTHENTICATING and m.is_established and not m.has_free_slot
    events = m.receive_data(answer(first, produce_body(5)), 31.0)
    assert [type(e) for e in events] == [ResponseReceived]  # answered; the second still out: no handshake yet
    events = m.receive_data(answer(second, produce_body(6)), 32.0)
    assert [type(e) for e in events] == [ResponseReceived, DataToSend]
    assert isinstance(events[0], ResponseReceived) and events[0].token == "p2"
    assert isinstance(events[1], DataToSend)
    handshake = events[1].data
    assert request_of(handshake)[1] == {"mechanism": "OAUTHBEARER"}
    frame = only_frame(m.receive_data(answer(handshake, {"error_code": 0, "mechanisms": ["OAUTHBEARER"]}), 33.0))
    assert request_of(frame)[1] == {"auth_bytes": b"again"}
    done = m.receive_data(answer(frame, {"error_code": 0, "auth_bytes": b"", "session_lifetime_ms": 2000}), 40.0)
    assert [type(e) for e in done] == [ResponseReceived]
    assert isinstance(done[0], ResponseReceived) and done[0].token == "reauth"
    assert state(m) is ConnectionState.READY and m.has_free_slot
    assert m.reauthenticate_at == 40.0 + 1000.0


def test_reauthentication_with_nothing_in_flight_sends_the_handshake_at_once() -> None:
    m = machine()
    authenticate(m, Scripted([b"cf", b"cl"], [b"server-first", b"server-final"]), lifetime_ms=1000)
    frame = only_frame(m.begin_reauthentication("reauth", Scripted([b"x"], [b""], mechanism="PLAIN"), 500.0))
    assert header_of(frame).api_key == messages.SASL_HANDSHAKE


def test_a_failed_reauthentication_fails_its_token_and_breaks_the_connection() -> None:
    m = machine()
    authenticate(m, Scripted([b"cf", b"cl"], [b"server-first", b"server-final"]), lifetime_ms=1000)
    frame = only_frame(m.begin_reauthentication("reauth", Scripted([b"x"], [b""], mechanism="PLAIN"), 500.0))
    frame = only_frame(m.receive_data(answer(frame, {"error_code": 0, "mechanisms": ["PLAIN"]}), 501.0))
    events = m.receive_data(answer(frame, {"error_code": 58, "error_message": "token expired", "auth_bytes": b""}), 502.0)
    assert [type(e) for e in events] == [RequestFailed, ConnectionBroken]
    assert isinstance(events[0], RequestFailed) and events[0].token == "reauth"
    assert state(m) is ConnectionState.CLOSED and m.reauthenticate_at is None
