"""FaultProxy in front of librdkafka's mock broker, with aioproducer's BrokerConnection as the client.

The client connects to the proxy's address directly (a Producer would learn
the broker's own address from Metadata and go around the proxy). What the
broker did is checked on the broker, not through the proxy: records are read
back from the mock directly, and its request log shows what arrived.
Conditions are awaited (``eventually``, ``wait_swallowed``), never slept on;
the only fixed waits are the ones that check that nothing happens.
"""

from __future__ import annotations

import asyncio
import gc
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import messages
from aioproducer.protocol.records import RecordBatchBuilder, decode_batches
from aioproducer.testing import FaultProxy, MockCluster, ProxyClosedError
from helpers import closed_port, eventually
from readback import fetch_raw_records

pytestmark = pytest.mark.integration

PRODUCE, METADATA, API_VERSIONS = messages.PRODUCE, messages.METADATA, messages.API_VERSIONS


# ------------------------------------------------------------------ fixtures


def proxy_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("fault-proxy-")]


def broker_address(mc: MockCluster) -> tuple[str, int]:
    host, port = mc.bootstrap_servers.rsplit(":", 1)
    return host, int(port)


@pytest.fixture
def cluster() -> Iterator[MockCluster]:
    with MockCluster(brokers=1, topics={"t": 1}) as mc:
        yield mc


@pytest.fixture
def proxy(cluster: MockCluster) -> Iterator[FaultProxy]:
    with FaultProxy(broker_address(cluster)) as p:
        yield p
    assert proxy_threads() == [], "close() left a proxy thread behind"


async def connect(proxy: FaultProxy, **kwargs: Any) -> BrokerConnection:
    conn = BrokerConnection(proxy.host, proxy.port, 1, client_id="proxy-test", **kwargs)
    await conn.connect()
    return conn


def batch(value: bytes) -> bytes:
    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), b"k", value)
    return builder.build()


def produce_body(value: bytes, acks: int = -1) -> dict[str, Any]:
    return {
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch(value)}]}],
    }


async def stored_values(cluster: MockCluster) -> list[bytes | None]:
    """Every value in t-0, read from the broker directly (not through the proxy)."""
    raw = await fetch_raw_records(cluster.bootstrap_servers, "t", 0)
    return [r.value for b in decode_batches(raw) for r in b.records]


async def grows(read: Any, before: int, what: str) -> None:
    await eventually(lambda: read() > before, what=what)


# ---------------------------------------------------------------- forwarding


async def test_forwards_both_directions_byte_for_byte(cluster: MockCluster, proxy: FaultProxy) -> None:
    conn = await connect(proxy)
    try:
        big = bytes(range(256)) * 1024  # 256 KiB: many TCP chunks each way
        sent = batch(big)
        body = produce_body(b"")
        body["topic_data"][0]["partition_data"][0]["records"] = sent
        response = await conn.send(PRODUCE, body)
        assert response is not None
        assert response["responses"][0]["partition_responses"][0]["error_code"] == 0
    finally:
        await conn.close()
    # Client -> broker: the broker holds exactly the batch that was sent, but for the
    # partitionLeaderEpoch (bytes 12-15) that a broker stamps on append (outside the CRC).
    direct = await fetch_raw_records(cluster.bootstrap_servers, "t", 0)
    assert len(direct) == len(sent)
    assert direct[:12] + direct[16:] == sent[:12] + sent[16:]
    # Broker -> client: a Fetch through the proxy returns exactly what a direct one does.
    assert await fetch_raw_records(proxy.address, "t", 0) == direct
    stats = proxy.stats
    assert stats.requests_forwarded[PRODUCE] == 1
    assert stats.responses_swallowed == 0
    assert stats.bytes_to_upstream == stats.bytes_from_client > len(sent)
    assert stats.bytes_to_client == stats.bytes_from_upstream > len(sent)


# ------------------------------------------------------------------- swallow


async def test_swallow_then_close_loses_the_answer_but_the_broker_appended(
    cluster: MockCluster, proxy: FaultProxy
) -> None:
    proxy.swallow_responses(1, api_key=PRODUCE, then="close")
    conn = await connect(proxy)  # ApiVersions is not Produce: it passes
    try:
        with pytest.raises(KafkaConnectionError):
            await conn.send(PRODUCE, produce_body(b"written-but-lost"))
        assert not conn.is_connected
    finally:
        await conn.close()
    proxy.wait_swallowed(1, timeout=5)
    assert await stored_values(cluster) == [b"written-but-lost"]
    # The rule is used up: the next Produce is answered.
    conn = await connect(proxy)
    try:
        assert await conn.send(PRODUCE, produce_body(b"second")) is not None
    finally:
        await conn.close()
    stats = proxy.stats
    assert (stats.responses_swallowed, stats.requests_forwarded[PRODUCE]) == (1, 2)


async def test_swallow_any_api_catches_the_first_response(proxy: FaultProxy) -> None:
    proxy.swallow_responses(1, api_key=None)
    with pytest.raises(KafkaConnectionError):
        await connect(proxy)  # its ApiVersions answer is the one swallowed
    await proxy.wait_swallowed_async(1, timeout=5)
    assert proxy.stats.requests_forwarded == {API_VERSIONS: 1}


async def test_acks0_produce_gets_no_response_and_does_not_use_up_the_rule(
    cluster: MockCluster, proxy: FaultProxy
) -> None:
    conn = await connect(proxy)
    try:
        proxy.swallow_responses(1, api_key=PRODUCE, then="close")
        await conn.send(PRODUCE, produce_body(b"acks0", acks=0), expect_response=False)
        assert await conn.send(METADATA, {"topics": None, "allow_auto_topic_creation": False}) is not None
        with pytest.raises(KafkaConnectionError):
            await conn.send(PRODUCE, produce_body(b"acks-all"))
    finally:
        await conn.close()
    assert proxy.stats.responses_swallowed == 1
    assert await stored_values(cluster) == [b"acks0", b"acks-all"]


async def test_swallow_then_hang_makes_the_client_time_out(cluster: MockCluster, proxy: FaultProxy) -> None:
    conn = await connect(proxy, request_timeout_ms=500)
    try:
        proxy.swallow_responses(1, api_key=PRODUCE, then="hang")
        first = asyncio.create_task(conn.send(PRODUCE, produce_body(b"one")))
        second = asyncio.create_task(conn.send(PRODUCE, produce_body(b"two")))
        await proxy.wait_swallowed_async(1, timeout=5)
        # The second answer arrives too and is thrown away: the connection stays silent.
        await eventually(lambda: proxy.stats.responses_discarded == 1, what="second response discarded")
        assert proxy.stats.connections_open == 1
        with pytest.raises(KafkaTimeoutError):
            await first
        with pytest.raises(KafkaError):
            await second
    finally:
        await conn.close()
    assert await stored_values(cluster) == [b"one", b"two"]


# --------------------------------------------------------------------- drop


async def test_drop_connections_resets_every_connection_and_new_ones_work(proxy: FaultProxy) -> None:
    conns = [await connect(proxy), await connect(proxy)]
    reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
    try:
        await eventually(lambda: proxy.stats.connections_open == 3, what="3 connections open")
        assert proxy.drop_connections() == 3
        assert proxy.stats.connections_open == 0  # gone when drop_connections() returns
        with pytest.raises(ConnectionResetError):  # RST, not a polite FIN
            await reader.read()
        await eventually(lambda: not any(c.is_connected for c in conns), what="clients notice")
        with pytest.raises(KafkaConnectionError):
            await conns[0].send(API_VERSIONS, {})
    finally:
        writer.close()
        for c in conns:
            await c.close()
    conn = await connect(proxy)  # a fresh upstream connection per client connection
    try:
        assert await conn.send(API_VERSIONS, {}) is not None
    finally:
        await conn.close()
    await eventually(lambda: proxy.stats.connections_open == 0, what="the proxy follows the client's close")
    assert proxy.drop_connections() == 0


# ------------------------------------------------------------ delay, pause


async def test_delay_applies_both_ways_and_keeps_order(proxy: FaultProxy) -> None:
    conn = await connect(proxy)
    try:
        proxy.set_delay(150)
        start = time.monotonic()
        await conn.send(API_VERSIONS, {})
        assert time.monotonic() - start >= 0.3  # 150 ms there, 150 ms back

        # A request delayed 400 ms, then one not delayed: the second still arrives second
        # (the connection would fail on a correlation id out of order otherwise).
        proxy.set_delay(400)
        received = proxy.stats.bytes_from_client
        done: list[str] = []

        async def send(name: str, api_key: int, body: dict[str, Any]) -> None:
            assert await conn.send(api_key, body) is not None
            done.append(name)

        slow = asyncio.create_task(send("slow", METADATA, {"topics": None, "allow_auto_topic_creation": False}))
        await grows(lambda: proxy.stats.bytes_from_client, received, "slow request reached the proxy")
        proxy.set_delay(0)
        fast = asyncio.create_task(send("fast", API_VERSIONS, {}))
        await asyncio.gather(slow, fast)
        assert done == ["slow", "fast"]
    finally:
        await conn.close()


async def test_pause_holds_requests_without_closing_until_resume(cluster: MockCluster, proxy: FaultProxy) -> None:
    conn = await connect(proxy)
    try:
        cluster.start_request_tracking()
        proxy.pause()
        received = proxy.stats.bytes_from_client
        task = asyncio.create_task(conn.send(PRODUCE, produce_body(b"held")))
        await grows(lambda: proxy.stats.bytes_from_client, received, "request reached the proxy")
        done, _ = await asyncio.wait([task], timeout=0.3)  # checking that nothing happens
        assert not done
        assert [r for r in cluster.requests() if r.api_key == PRODUCE] == []
        assert PRODUCE not in proxy.stats.requests_forwarded
        assert proxy.stats.connections_open == 1 and conn.is_connected
        proxy.resume()
        response = await task
        assert response is not None
        assert [r.api_key for r in cluster.requests() if r.api_key == PRODUCE] == [PRODUCE]
    finally:
        await conn.close()
    assert await stored_values(cluster) == [b"held"]


# ------------------------------------------------------------------- refuse


async def test_refuse_accepts_and_resets_until_turned_off(proxy: FaultProxy) -> None:
    proxy.refuse()
    with pytest.raises(KafkaConnectionError):
        await connect(proxy, connect_timeout_ms=5000)
    stats = proxy.stats
    assert (stats.connections_accepted, stats.connections_refused, stats.connections_open) == (1, 1, 0)
    assert stats.bytes_to_upstream == 0
    proxy.refuse(False)
    conn = await connect(proxy)
    await conn.close()


async def test_heal_ends_every_fault_at_once(cluster: MockCluster, proxy: FaultProxy) -> None:
    """Refusing, a delay, paused and a swallow rule, all set: after ``heal()`` a request is answered."""
    proxy.refuse()
    proxy.set_delay(60_000)
    proxy.pause()
    proxy.swallow_responses(5, api_key=None)
    proxy.heal()
    conn = await connect(proxy)
    try:
        assert await conn.send(PRODUCE, produce_body(b"healed")) is not None
    finally:
        await conn.close()
    assert proxy.stats.responses_swallowed == 0
    assert await stored_values(cluster) == [b"healed"]


async def test_upstream_is_connected_per_client_connection(cluster: MockCluster, proxy: FaultProxy) -> None:
    cluster.broker_down(1)
    with pytest.raises(KafkaConnectionError):
        await connect(proxy)
    assert proxy.stats.upstream_failures == 1
    cluster.broker_up(1)
    conn = await connect(proxy)  # the same proxy reaches the broker once it is back
    await conn.close()


async def test_an_upstream_that_never_listened_closes_the_client_connection() -> None:
    with FaultProxy(("127.0.0.1", closed_port())) as p:
        with pytest.raises(KafkaConnectionError):
            conn = BrokerConnection(p.host, p.port, 1, client_id="proxy-test")
            await conn.connect()
        assert p.stats.upstream_failures == 1


# --------------------------------------------------------------- wait, stats


async def test_wait_swallowed_times_out_naming_the_counts(proxy: FaultProxy) -> None:
    proxy.swallow_responses(2)
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=r"0 of 1 responses swallowed within 0.2 s \(rule: 2 still"):
        proxy.wait_swallowed(1, timeout=0.2)
    assert time.monotonic() - start >= 0.2
    with pytest.raises(TimeoutError, match="0 of 3"):
        await proxy.wait_swallowed_async(3, timeout=0.1)
    proxy.wait_swallowed(0, timeout=0.1)  # already true: returns at once


def test_argument_checks(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="then"):
        proxy.swallow_responses(then="explode")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="count"):
        proxy.swallow_responses(-1)
    with pytest.raises(ValueError, match="delay"):
        proxy.set_delay(-5)


async def test_a_stream_that_is_not_kafka_is_aborted(proxy: FaultProxy) -> None:
    reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
    try:
        writer.write(struct.pack(">i", -1) + b"garbage")
        with pytest.raises(ConnectionResetError):
            await reader.read()
    finally:
        writer.close()
    assert proxy.stats.malformed_streams == 1


# ------------------------------------------------------------- opaque bytes


async def test_opaque_mode_forwards_and_still_drops_but_cannot_swallow(cluster: MockCluster) -> None:
    with FaultProxy(broker_address(cluster), kafka_frames=False) as p:
        with pytest.raises(RuntimeError, match="kafka_frames=True"):
            p.swallow_responses(1)
        conn = BrokerConnection(p.host, p.port, 1, client_id="proxy-test")
        await conn.connect()
        try:
            assert await conn.send(PRODUCE, produce_body(b"opaque")) is not None
            p.set_delay(100)
            start = time.monotonic()
            await conn.send(API_VERSIONS, {})
            assert time.monotonic() - start >= 0.2
            assert p.drop_connections() == 1
            await eventually(lambda: not conn.is_connected, what="client notices the drop")
        finally:
            await conn.close()
        stats = p.stats
        assert stats.requests_forwarded == {} and stats.responses_forwarded == 0
        assert stats.bytes_to_upstream > 0 and stats.bytes_to_client > 0
    assert await stored_values(cluster) == [b"opaque"]


# ----------------------------------------------------------------- a producer


async def test_a_producer_bootstrapping_through_the_proxy_rides_out_its_metadata_answer_lost(
    cluster: MockCluster, proxy: FaultProxy
) -> None:
    """The first Metadata answer is lost and its connection closed: start() tries again (#25) and starts."""
    proxy.swallow_responses(1, api_key=METADATA)
    async with Producer(bootstrap_servers=proxy.address, max_block_ms=5000) as producer:
        assert proxy.stats.responses_swallowed == 1
        assert proxy.stats.requests_forwarded[METADATA] >= 2
        md = await producer.send_and_wait("t", b"through")
    assert md.offset == 0
    assert await stored_values(cluster) == [b"through"]


# ----------------------------------------------------------------- lifecycle


def test_close_from_sync_code_is_idempotent_and_leaves_nothing_behind(cluster: MockCluster) -> None:
    before = set(threading.enumerate())
    proxy = FaultProxy(broker_address(cluster))
    assert len(proxy_threads()) == 1
    # A blocking client on this (non-asyncio) thread: one ApiVersions v0 round trip.
    sock = socket.create_connection((proxy.host, proxy.port), timeout=5)
    try:
        sock.sendall(messages.encode_request(API_VERSIONS, 0, 42, "sync", {}))
        size = struct.unpack(">i", sock.recv(4))[0]
        payload = b""
        while len(payload) < size:
            payload += sock.recv(size - len(payload))
        assert struct.unpack(">i", payload[:4])[0] == 42
        proxy.close()
        proxy.close()
        with pytest.raises(ConnectionResetError):  # the open connection was aborted with it
            sock.recv(1)
    finally:
        sock.close()
    assert set(threading.enumerate()) <= before
    assert proxy.closed
    with pytest.raises(ProxyClosedError):
        proxy.drop_connections()
    with pytest.raises(ProxyClosedError):
        proxy.stats
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((proxy.host, proxy.port), timeout=5).close()


def test_binds_at_construction_and_accepts_a_given_port(cluster: MockCluster) -> None:
    port = closed_port()
    with FaultProxy(broker_address(cluster), port=port) as p:
        assert p.port == port and p.address == f"127.0.0.1:{port}"
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass


def test_a_forgotten_proxy_warns_and_closes_itself(cluster: MockCluster) -> None:
    proxy = FaultProxy(broker_address(cluster))
    with pytest.warns(ResourceWarning, match="unclosed <FaultProxy"):
        del proxy
        gc.collect()
    assert proxy_threads() == []
