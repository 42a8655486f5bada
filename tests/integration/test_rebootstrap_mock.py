"""Rebootstrap (KIP-899, KIP-1102) of KafkaClient on librdkafka's mock clusters, on a fake clock.

A FaultProxy stands for the bootstrap name: re-pointed from one mock cluster to another, it is a
cluster that moved behind the same address. Every connection attempt is recorded (an ``open_streams``
that notes the address), so a test sees which addresses the client still tries.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import NamedTuple

import pytest

from aioproducer.errors import KafkaConnectionError
from aioproducer.network.client import KafkaClient, NoBrokerAnsweredError
from aioproducer.protocol import messages
from aioproducer.testing import FaultProxy, MockCluster
from test_client import Config, FakeClock, servers
from conftest import FakeResolver

pytestmark = pytest.mark.integration

TRIGGER_MS = 1000
REBOOTSTRAP_REQUIRED = 129


class Recorder:
    """``open_streams`` that records every address a connection is attempted to."""

    def __init__(self) -> None:
        self.attempts: list[tuple[str, int]] = []

    async def __call__(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        self.attempts.append((host, port))
        return await asyncio.open_connection(host, port)


@pytest.fixture
def old() -> Iterator[MockCluster]:
    with MockCluster(brokers=2) as mc:
        yield mc


@pytest.fixture
def new() -> Iterator[MockCluster]:
    with MockCluster(brokers=3) as mc:
        yield mc


class Proxied(NamedTuple):
    """A client bootstrapped through a proxy in front of a mock cluster, on a fake clock, recording its connections."""

    client: KafkaClient
    proxy: FaultProxy
    clock: FakeClock
    recorder: Recorder


@contextlib.asynccontextmanager
async def proxied(upstream: MockCluster, strategy: str = "rebootstrap") -> AsyncIterator[Proxied]:
    clock, recorder = FakeClock(), Recorder()
    with FaultProxy(servers(upstream)[0]) as proxy:
        config = Config([(proxy.host, proxy.port)], reconnect_backoff_ms=1, reconnect_backoff_max_ms=1,
                        metadata_recovery_strategy=strategy, metadata_recovery_rebootstrap_trigger_ms=TRIGGER_MS)
        client = KafkaClient(config, clock=clock, open_streams=recorder)
        try:
            await client.bootstrap()
            yield Proxied(client, proxy, clock, recorder)
        finally:
            await client.close()


async def _move(proxy: FaultProxy, old: MockCluster, new: MockCluster) -> set[tuple[str, int]]:
    """The cluster behind the proxy moves: the old one's brokers are gone; returns their addresses."""
    gone = set(servers(old))
    proxy.set_upstream(servers(new)[0])
    old.close()
    return gone


async def test_no_metadata_for_the_trigger_rebootstraps_to_the_moved_cluster(old: MockCluster, new: MockCluster) -> None:
    async with proxied(old) as (client, proxy, clock, recorder):
        first = await client.connection(next(iter(client.metadata.nodes)))
        gone = await _move(proxy, old, new)
        proxy.refuse()  # the bootstrap name is down for a while too: nothing answers
        with pytest.raises(NoBrokerAnsweredError):
            await client.refresh_metadata()
        assert client.rebootstrap_count == 0
        clock.now += TRIGGER_MS + 1
        proxy.refuse(False)
        recorder.attempts.clear()
        metadata = await client.refresh_metadata()
        assert client.rebootstrap_count == 1
        assert {(n.host, n.port) for n in metadata.nodes.values()} == set(servers(new))
        assert not first.is_connected  # the stale view's connections were closed
        assert not gone & set(recorder.attempts)  # no stale node was tried after the rebootstrap
        assert recorder.attempts[0] == (proxy.host, proxy.port)


async def test_none_keeps_trying_the_old_view(old: MockCluster, new: MockCluster) -> None:
    async with proxied(old, "none") as (client, proxy, clock, recorder):
        before = dict(client.metadata.nodes)
        gone = await _move(proxy, old, new)
        recorder.attempts.clear()
        for _ in range(2):
            clock.now += 10 * TRIGGER_MS
            with pytest.raises(NoBrokerAnsweredError):
                await client.refresh_metadata()
        assert set(recorder.attempts) <= gone  # never the bootstrap address again
        assert dict(client.metadata.nodes) == before
        assert client.rebootstrap_count == 0


async def test_metadata_answers_reset_the_trigger(old: MockCluster) -> None:
    async with proxied(old) as (client, proxy, clock, recorder):
        for _ in range(3):
            clock.now += 10 * TRIGGER_MS
            await client.refresh_metadata()
        assert client.rebootstrap_count == 0


async def test_rebootstrap_required_rebootstraps_at_once(old: MockCluster) -> None:
    async with proxied(old) as (client, proxy, clock, recorder):
        first = await client.connection(next(iter(client.metadata.nodes)))
        old.push_request_errors(messages.METADATA, REBOOTSTRAP_REQUIRED)
        metadata = await client.refresh_metadata()  # no clock move: the broker's word is enough
        assert client.rebootstrap_count == 1
        assert {(n.host, n.port) for n in metadata.nodes.values()} == set(servers(old))
        assert not first.is_connected


async def test_rebootstrap_required_twice_fails_the_refresh_as_unreachable(old: MockCluster) -> None:
    async with proxied(old) as (client, proxy, clock, recorder):
        old.push_request_errors(messages.METADATA, REBOOTSTRAP_REQUIRED, REBOOTSTRAP_REQUIRED)
        with pytest.raises(NoBrokerAnsweredError, match="REBOOTSTRAP_REQUIRED after a rebootstrap") as exc:
            await client.refresh_metadata()
        assert exc.value.connection_level  # bootstrap() and the sender retry it
        assert client.rebootstrap_count == 1
        assert (await client.refresh_metadata()).nodes


async def test_rebootstrap_required_under_none_keeps_the_view(old: MockCluster) -> None:
    async with proxied(old, "none") as (client, proxy, clock, recorder):
        before = dict(client.metadata.nodes)
        old.push_request_errors(messages.METADATA, REBOOTSTRAP_REQUIRED)
        with pytest.raises(KafkaConnectionError, match="REBOOTSTRAP_REQUIRED"):
            await client.refresh_metadata()
        assert dict(client.metadata.nodes) == before
        assert client.rebootstrap_count == 0


async def test_set_upstream_moves_new_connections_only(old: MockCluster, new: MockCluster) -> None:
    from aioproducer.network.connection import BrokerConnection

    body = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    with FaultProxy(servers(old)[0]) as proxy:
        before = BrokerConnection(proxy.host, proxy.port, -1, client_id="t")
        await before.connect()
        proxy.set_upstream(servers(new)[0])
        after = BrokerConnection(proxy.host, proxy.port, -1, client_id="t")
        await after.connect()
        try:
            for conn, cluster in ((before, old), (after, new)):
                answer = await conn.send(messages.METADATA, body)
                assert answer is not None
                assert {(b["host"], b["port"]) for b in answer["brokers"]} == set(servers(cluster))
            assert proxy.upstream == servers(new)[0]
        finally:
            await before.close()
            await after.close()


async def test_canonical_bootstrap_names_are_resolved_again_at_each_rebootstrap(old: MockCluster) -> None:
    host, port = servers(old)[0]
    resolver = FakeResolver({"kafka.alias": [host]}, {host: host})
    config = Config([("kafka.alias", port)], client_dns_lookup="resolve_canonical_bootstrap_servers_only",
                    metadata_recovery_rebootstrap_trigger_ms=TRIGGER_MS)
    recorder = Recorder()
    client = KafkaClient(config, clock=FakeClock(), open_streams=recorder, resolver=resolver)
    try:
        await client.bootstrap()
        assert recorder.attempts[0] == (host, port)  # the canonical name, never the alias
        assert ("kafka.alias", port) not in recorder.attempts
        assert resolver.asked == ["kafka.alias"]
        await client.refresh_metadata()
        assert resolver.asked == ["kafka.alias"]  # resolved once per (re)bootstrap, not per refresh
        old.push_request_errors(messages.METADATA, REBOOTSTRAP_REQUIRED)
        await client.refresh_metadata()
        assert resolver.asked == ["kafka.alias", "kafka.alias"]
    finally:
        await client.close()


async def test_a_bootstrap_name_that_does_not_resolve_is_a_retriable_bootstrap_failure() -> None:
    config = Config([("gone.example", 9092)], client_dns_lookup="resolve_canonical_bootstrap_servers_only")
    client = KafkaClient(config, clock=FakeClock(), resolver=FakeResolver({}, {}))
    try:
        with pytest.raises(NoBrokerAnsweredError, match="gone.example:9092") as exc:
            await client.refresh_metadata()
        assert exc.value.connection_level
    finally:
        await client.close()
