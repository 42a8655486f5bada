"""Rebootstrap (KIP-899, KIP-1102) and client.dns.lookup, without sockets: the trigger's state on an
injected clock, the bootstrap resolution on an injected resolver, Metadata v13's top-level error code."""

from __future__ import annotations

import logging

import pytest

from aioproducer.errors import KafkaConnectionError, RebootstrapRequiredError
from aioproducer.network.client import resolve_bootstrap_servers
from aioproducer.network.metadata import RebootstrapTrigger
from aioproducer.protocol import messages as m

from conftest import FakeResolver

TRIGGER_MS = 1000
log = logging.getLogger("test_rebootstrap")


# ------------------------------------------------------------------ the trigger


def test_not_due_before_any_attempt() -> None:
    trigger = RebootstrapTrigger("rebootstrap", TRIGGER_MS)
    assert not trigger.needs_rebootstrap(10_000_000)


def test_due_once_an_attempt_ran_longer_than_the_trigger() -> None:
    trigger = RebootstrapTrigger("rebootstrap", TRIGGER_MS)
    trigger.attempt_started(5000)
    assert not trigger.needs_rebootstrap(5000 + TRIGGER_MS)  # Java: strictly more than the trigger
    assert trigger.needs_rebootstrap(5000 + TRIGGER_MS + 1)


def test_a_later_attempt_does_not_restart_a_running_timer() -> None:
    trigger = RebootstrapTrigger("rebootstrap", TRIGGER_MS)
    trigger.attempt_started(0)
    trigger.attempt_started(900)  # the next refresh of the same outage
    assert trigger.needs_rebootstrap(TRIGGER_MS + 1)


def test_a_metadata_answer_stops_the_timer() -> None:
    trigger = RebootstrapTrigger("rebootstrap", TRIGGER_MS)
    trigger.attempt_started(0)
    trigger.metadata_updated()
    assert not trigger.needs_rebootstrap(10 * TRIGGER_MS)
    trigger.attempt_started(10 * TRIGGER_MS)  # the next outage starts its own period
    assert not trigger.needs_rebootstrap(11 * TRIGGER_MS)
    assert trigger.needs_rebootstrap(11 * TRIGGER_MS + 1)


def test_a_rebootstrap_gives_the_bootstrap_servers_a_full_period() -> None:
    trigger = RebootstrapTrigger("rebootstrap", TRIGGER_MS)
    trigger.attempt_started(0)
    assert trigger.needs_rebootstrap(2000)
    trigger.rebootstrapped(2000)
    assert not trigger.needs_rebootstrap(2000 + TRIGGER_MS)
    assert trigger.needs_rebootstrap(2000 + TRIGGER_MS + 1)


def test_rebootstrap_required_is_due_at_once() -> None:
    trigger = RebootstrapTrigger("rebootstrap", 300_000)
    trigger.attempt_started(50)
    trigger.rebootstrap_required()
    assert trigger.needs_rebootstrap(50)


def test_none_is_never_due() -> None:
    trigger = RebootstrapTrigger("none", TRIGGER_MS)
    assert not trigger.enabled
    trigger.attempt_started(0)
    trigger.rebootstrap_required()
    assert not trigger.needs_rebootstrap(100 * TRIGGER_MS)


# ------------------------------------------------------------ client.dns.lookup


async def test_use_all_dns_ips_keeps_the_names_for_each_connection_to_resolve() -> None:
    resolver = FakeResolver({}, {})
    servers = [("kafka.example", 9092), ("10.0.0.9", 9093)]
    assert await resolve_bootstrap_servers(servers, "use_all_dns_ips", resolver, log) == servers
    assert resolver.asked == []  # resolved at every connection attempt, so a rebootstrap sees DNS changes


async def test_canonical_replaces_each_address_by_its_canonical_name() -> None:
    resolver = FakeResolver(
        {"kafka.example": ["10.0.0.1", "10.0.0.2", "10.0.0.3"], "other": ["10.0.0.1"]},
        {"10.0.0.1": "b1.internal", "10.0.0.2": "b2.internal", "10.0.0.3": "b1.internal"},
    )
    resolved = await resolve_bootstrap_servers(
        [("kafka.example", 9092), ("other", 9092)], "resolve_canonical_bootstrap_servers_only", resolver, log
    )
    assert resolved == [("b1.internal", 9092), ("b2.internal", 9092)]  # each once, in the resolver's order


async def test_canonical_skips_what_does_not_resolve_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    resolver = FakeResolver({"kafka.example": ["10.0.0.1", "10.0.0.7"]}, {"10.0.0.1": "b1.internal"})
    with caplog.at_level(logging.WARNING, "test_rebootstrap"):
        resolved = await resolve_bootstrap_servers(
            [("gone.example", 9092), ("kafka.example", 9094)], "resolve_canonical_bootstrap_servers_only", resolver, log
        )
    assert resolved == [("b1.internal", 9094)]
    assert "gone.example:9092 does not resolve" in caplog.text
    assert "10.0.0.7 of kafka.example has no canonical name" in caplog.text


async def test_canonical_with_nothing_resolved_is_a_connection_error() -> None:
    with pytest.raises(KafkaConnectionError, match="gone.example:9092"):
        await resolve_bootstrap_servers(
            [("gone.example", 9092)], "resolve_canonical_bootstrap_servers_only", FakeResolver({}, {}), log
        )


# ------------------------------------------------------------------ Metadata v13

# MetadataResponse v13 (flexible): correlation id 7, header tags; throttle 0; one broker
# (1, "h", 9092, rack null, tags); cluster id "c"; controller 1; no topics; ErrorCode 129; tags.
GOLDEN_V13 = bytes.fromhex(
    "00000007" "00"
    "00000000"
    "02" "00000001" "0268" "00002384" "00" "00"
    "0263"
    "00000001"
    "01"
    "0081"
    "00"
)


def test_metadata_v13_response_has_a_top_level_error_code() -> None:
    assert m.decode_response(m.METADATA, 13, GOLDEN_V13) == (7, {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}],
        "cluster_id": "c",
        "controller_id": 1,
        "topics": [],
        "error_code": RebootstrapRequiredError.errno,
    })
    body = {"brokers": [{"node_id": 1, "host": "h", "port": 9092, "rack": None}], "cluster_id": "c",
            "controller_id": 1, "topics": [], "error_code": 129}
    assert m.encode_response(m.METADATA, 13, 7, body)[4:] == GOLDEN_V13


def test_metadata_v12_has_no_top_level_error_code() -> None:
    body = {"brokers": [], "topics": [], "error_code": 129}
    _, decoded = m.decode_response(m.METADATA, 12, m.encode_response(m.METADATA, 12, 1, body)[4:])
    assert "error_code" not in decoded


def test_metadata_v13_request_is_v12s_body() -> None:
    body = {"topics": [{"name": "t"}], "allow_auto_topic_creation": True, "include_topic_authorized_operations": False}
    v12 = m.encode_request(m.METADATA, 12, 3, "c", body)
    v13 = m.encode_request(m.METADATA, 13, 3, "c", body)
    assert v12[:6] == v13[:6] and v12[8:] == v13[8:]  # size, api key; version differs; header and body alike
    assert v13[6:8] == b"\x00\x0d"


async def test_the_system_resolver_resolves_and_reverse_resolves_a_literal_address() -> None:
    from aioproducer.network.client import DnsResolver

    resolver = DnsResolver()
    assert await resolver.addresses("127.0.0.1", 9092) == ["127.0.0.1"]
    name = await resolver.canonical_name("127.0.0.1")  # "localhost" here, the address itself without a name
    assert name and await resolver.addresses(name, 9092)
    with pytest.raises(OSError):
        await resolver.addresses("no-such-host.invalid", 9092)  # RFC 2606: never resolves
