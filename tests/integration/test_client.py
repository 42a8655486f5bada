"""KafkaClient against librdkafka's mock cluster: bootstrap, metadata, connections, Produce."""

from __future__ import annotations

import asyncio
import logging
import gc
import random
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from aioproducer import errors
from aioproducer.config import ProducerConfig
from aioproducer.errors import KafkaConnectionError, KafkaTimeoutError
from aioproducer.network.client import ClientConfig, KafkaClient
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import messages
from aioproducer.protocol.records import RecordBatchBuilder
from aioproducer.testing import MockCluster
from aioproducer.testing.raw_produce import produce_batch
from helpers import closed_port, eventually, other_tasks

pytestmark = pytest.mark.integration

NOT_LEADER_OR_FOLLOWER = 6


@dataclass
class Config:
    """The settings KafkaClient reads, with test-friendly backoffs."""

    bootstrap_servers: list[tuple[str, int]]
    client_id: str = "test-client"
    max_in_flight_requests_per_connection: int = 5
    request_timeout_ms: int = 30000
    reconnect_backoff_ms: int = 50
    reconnect_backoff_max_ms: int = 1000
    metadata_max_age_ms: int = 300000
    metadata_max_idle_ms: int = 300000
    socket_connection_setup_timeout_ms: int = 10000
    send_buffer_bytes: int = -1
    receive_buffer_bytes: int = -1
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    metadata_recovery_strategy: str = "rebootstrap"
    metadata_recovery_rebootstrap_trigger_ms: int = 300000
    client_dns_lookup: str = "use_all_dns_ips"
    extra: dict[str, Any] = field(default_factory=dict)


def servers(mc: MockCluster) -> list[tuple[str, int]]:
    return [(h, int(p)) for h, p in (s.rsplit(":", 1) for s in mc.bootstrap_servers.split(","))]


class FakeClock:
    """Milliseconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def client(mock_cluster: MockCluster) -> AsyncIterator[KafkaClient]:
    # The mock auto-creates every topic a Metadata request allowing it names; these tests need
    # unknown topics to stay unknown. The producer's default (on, as Java) is tested on real Kafka.
    c = KafkaClient(Config(servers(mock_cluster)), allow_auto_topic_creation=False)
    await c.bootstrap()
    yield c
    await c.close()


def batch(*values: bytes) -> bytes:
    builder = RecordBatchBuilder()
    for value in values:
        builder.append(int(time.time() * 1000), None, value)
    return builder.build()





def metadata_requests(mc: MockCluster) -> int:
    return sum(1 for r in mc.requests() if r.api_key == messages.METADATA)


# ----------------------------------------------------------------- config


def test_producer_config_satisfies_client_config() -> None:
    config: ClientConfig = ProducerConfig(bootstrap_servers="127.0.0.1:9092")
    assert list(config.bootstrap_servers) == [("127.0.0.1", 9092)]


def test_empty_bootstrap_servers_is_a_config_error() -> None:
    with pytest.raises(errors.ConfigError):
        KafkaClient(Config([]))


# --------------------------------------------------------------- metadata


async def test_bootstrap_lists_brokers_partitions_and_leaders(mock_cluster: MockCluster) -> None:
    client = KafkaClient(Config(servers(mock_cluster)))
    try:
        await client.bootstrap()
        await client.refresh_metadata(["orders"])
        md = client.metadata
        assert sorted(md.nodes) == [1, 2, 3]
        assert {(n.host, n.port) for n in md.nodes.values()} == set(servers(mock_cluster))
        assert md.cluster_id
        assert md.controller_id >= 0  # the mock names node 0, which it does not list
        assert md.partitions_for("orders") == (0, 1, 2, 3, 4, 5)
        for p in range(6):
            assert md.leader_for("orders", p) in (1, 2, 3)
        assert md.topic_error("orders") == 0
        assert not client.update_requested
    finally:
        await client.close()


async def test_metadata_follows_a_leader_move(client: KafkaClient, mock_cluster: MockCluster) -> None:
    await client.refresh_metadata(["orders"])
    new_leader = 1 if client.metadata.leader_for("orders", 0) != 1 else 2
    mock_cluster.set_partition_leader("orders", 0, new_leader)
    await client.refresh_metadata()
    assert client.metadata.leader_for("orders", 0) == new_leader


async def test_bootstrap_failure_lists_every_server() -> None:
    ports = [closed_port(), closed_port()]
    client = KafkaClient(Config([("127.0.0.1", p) for p in ports]))
    with pytest.raises(KafkaTimeoutError) as info:
        await client.bootstrap()  # timeout_ms=0: one round
    for port in ports:
        assert f"127.0.0.1:{port}" in str(info.value)
    assert "(1 rounds)" in str(info.value)
    assert client.bootstrap_failure is not None and f"127.0.0.1:{ports[0]}" in str(client.bootstrap_failure)
    await client.close()
    assert not other_tasks()


async def test_bootstrap_retries_refusing_servers_with_reconnect_backoff_until_its_timeout() -> None:
    """Rounds over every server, waits doubling from reconnect.backoff.ms, jittered, capped; timed by the fake clock."""
    clock = FakeClock()
    waits: list[float] = []

    async def sleep(ms: float) -> None:
        waits.append(ms)
        clock.now += ms  # no real waiting: the bound is the fake clock's

    ports = [closed_port(), closed_port()]
    config = Config([("127.0.0.1", p) for p in ports], reconnect_backoff_ms=100, reconnect_backoff_max_ms=500)
    client = KafkaClient(config, clock=clock, rng=random.Random(3), sleep=sleep)
    with pytest.raises(KafkaTimeoutError, match="no bootstrap server answered within 2000 ms") as info:
        await client.bootstrap(2000)
    for attempt, wait in enumerate(waits[:-1]):  # the last wait is what was left of the 2000 ms
        term = 100 * 2**attempt
        assert min(term * 0.8, 500) <= wait <= min(term * 1.2, 500), waits
    assert waits[3:-1] and all(w == 500 for w in waits[3:-1]), waits  # capped
    assert sum(waits) == pytest.approx(2000)
    assert f"({len(waits) + 1} rounds)" in str(info.value)
    for port in ports:  # every server tried in the last round, each named with its failure
        assert f"127.0.0.1:{port}: could not connect" in str(info.value)
    await client.close()


async def test_bootstrap_raises_a_non_network_failure_at_once() -> None:
    """A port that does not speak Kafka answers the same way on every try: no retry until the timeout."""

    async def http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 400 Bad Request\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(http, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    clock = FakeClock()
    waits: list[float] = []

    async def sleep(ms: float) -> None:
        waits.append(ms)
        clock.now += ms

    client = KafkaClient(Config([("127.0.0.1", port)]), clock=clock, sleep=sleep)
    try:
        with pytest.raises(KafkaConnectionError, match="speaks HTTP"):
            await client.bootstrap(60_000)
        assert waits == []
    finally:
        await client.close()
        server.close()
        await server.wait_closed()


async def test_bootstrap_skips_a_dead_server(mock_cluster: MockCluster) -> None:
    client = KafkaClient(Config([("127.0.0.1", closed_port()), *servers(mock_cluster)]))
    try:
        md = await client.bootstrap()
        assert sorted(md.nodes) == [1, 2, 3]
    finally:
        await client.close()


async def test_concurrent_refreshes_share_one_request(
    client: KafkaClient, mock_cluster: MockCluster
) -> None:
    client.add_topic("orders")
    mock_cluster.start_request_tracking()
    results = await asyncio.gather(*(client.refresh_metadata() for _ in range(5)))
    assert metadata_requests(mock_cluster) == 1
    assert all(r is results[0] for r in results)
    assert client.metadata is results[0]


async def test_a_refresh_for_a_new_topic_is_not_answered_by_an_older_request(
    client: KafkaClient, mock_cluster: MockCluster
) -> None:
    mock_cluster.create_topic("second", 2)
    for broker in mock_cluster.broker_ids:
        mock_cluster.set_rtt(broker, 200)
    mock_cluster.start_request_tracking()
    first = asyncio.ensure_future(client.refresh_metadata(["orders"]))
    await eventually(lambda: metadata_requests(mock_cluster) == 1)  # first is in flight
    second = await client.refresh_metadata(["second"])
    assert (await first).partitions_for("second") is None  # it was asked before "second"
    assert second.partitions_for("second") == (0, 1)
    assert second.partitions_for("orders") is not None  # tracked topics are always asked for
    assert metadata_requests(mock_cluster) == 2


async def test_refresh_without_auto_creation_does_not_create_topics(client: KafkaClient, mock_cluster: MockCluster) -> None:
    md = await client.refresh_metadata(["never-created"])
    assert md.partitions_for("never-created") is None
    assert md.topic_error("never-created") == 3  # UNKNOWN_TOPIC_OR_PARTITION
    md = await client.refresh_metadata()
    assert md.partitions_for("never-created") is None  # still not auto-created


async def test_wait_for_metadata_times_out_on_unknown_topic(
    client: KafkaClient, mock_cluster: MockCluster
) -> None:
    mock_cluster.start_request_tracking()
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="Topic nope not present in metadata after 500 ms"):
        await client.wait_for_metadata("nope", 500)
    elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 2.0
    assert metadata_requests(mock_cluster) >= 2  # it kept asking (retry.backoff.ms = 100)


async def test_wait_for_metadata_returns_once_the_topic_appears(
    client: KafkaClient, mock_cluster: MockCluster
) -> None:
    mock_cluster.start_request_tracking()
    waiter = asyncio.ensure_future(client.wait_for_metadata("late", 5000))
    await eventually(lambda: metadata_requests(mock_cluster) >= 1)
    assert not waiter.done()
    mock_cluster.create_topic("late", 3)
    assert await waiter == (0, 1, 2)


async def test_wait_for_metadata_raises_non_retriable_topic_errors(
    client: KafkaClient, mock_cluster: MockCluster
) -> None:
    topic_authorization_failed = 29
    mock_cluster.set_topic_error("orders", topic_authorization_failed)
    started = time.monotonic()
    with pytest.raises(errors.error_for_code(topic_authorization_failed)):
        await client.wait_for_metadata("orders", 5000)
    assert time.monotonic() - started < 1.0


async def test_a_cached_topic_error_is_asked_again(client: KafkaClient, mock_cluster: MockCluster) -> None:
    """An ACL fixed on the broker is noticed at the next send, not after metadata.max.age.ms."""
    topic_authorization_failed = 29
    mock_cluster.create_topic("guarded", 2)
    mock_cluster.set_topic_error("guarded", topic_authorization_failed)
    with pytest.raises(errors.error_for_code(topic_authorization_failed)):
        await client.wait_for_metadata("guarded", 5000)
    mock_cluster.set_topic_error("guarded", 0)
    assert await client.wait_for_metadata("guarded", 5000) == (0, 1)


async def test_topics_idle_for_metadata_max_idle_ms_leave_the_requests(mock_cluster: MockCluster) -> None:
    clock = FakeClock()
    client = KafkaClient(Config(servers(mock_cluster), metadata_max_idle_ms=60_000), clock=clock)
    try:
        await client.refresh_metadata(["old", "busy"])
        clock.now += 50_000
        client.add_topic("busy")  # sent to again
        clock.now += 20_000
        await client.refresh_metadata()
        assert client.topics == {"busy"}
        assert "old" not in client.metadata.topics
    finally:
        await client.close()


async def test_a_lost_connection_marks_metadata_for_update(client: KafkaClient, mock_cluster: MockCluster) -> None:
    await client.refresh_metadata(["orders"])
    leader = client.metadata.leader_for("orders", 0)
    assert leader is not None
    await client.connection(leader)
    assert not client.update_requested
    mock_cluster.broker_down(leader)
    await eventually(lambda: not client.is_connected(leader))
    assert client.update_requested
    mock_cluster.broker_up(leader)


async def refresh_if_due(client: KafkaClient) -> bool:
    """What the sender does on each pass (``Sender._maybe_refresh_metadata``): refresh when the client says it is due."""
    if client.time_to_next_update() > 0:
        return False
    await client.refresh_metadata()
    return True


async def test_staleness_with_a_fake_clock(mock_cluster: MockCluster) -> None:
    clock = FakeClock()
    client = KafkaClient(Config(servers(mock_cluster), metadata_max_age_ms=1000), clock=clock)
    try:
        assert client.update_requested and client.time_to_next_update() == 0
        assert await refresh_if_due(client)
        assert not await refresh_if_due(client)  # fresh
        assert client.time_to_next_update() == 1000
        clock.now += 999
        assert client.metadata_age() == 999
        assert not await refresh_if_due(client)
        clock.now += 1
        assert await refresh_if_due(client)  # reached metadata.max.age.ms
        client.request_update()
        assert client.time_to_next_update() == 100  # retry.backoff.ms since the last attempt
        clock.now += 100
        assert await refresh_if_due(client)
        assert not client.update_requested
    finally:
        await client.close()


async def test_failed_refreshes_in_a_row_back_off_exponentially_up_to_retry_backoff_max_ms(
    mock_cluster: MockCluster,
) -> None:
    """KIP-580, as Java's ``Metadata``: retry.backoff.ms doubling per failed refresh, jittered, capped; a success resets it.

    With a fixed retry.backoff.ms a cluster that closes every connection was asked ten times a
    second, each time on new connections, for as long as it lasted.
    """
    clock = FakeClock()
    client = KafkaClient(Config(servers(mock_cluster), retry_backoff_ms=100, retry_backoff_max_ms=700), clock=clock,
                         rng=random.Random(3))
    try:
        await client.refresh_metadata()
        for node in (1, 2, 3):
            mock_cluster.broker_down(node)
        seen = []
        for _ in range(5):
            client.request_update()
            clock.now += client.time_to_next_update()  # due now: no real waiting
            assert client.time_to_next_update() == 0
            with pytest.raises(KafkaConnectionError):
                await client.refresh_metadata()
            seen.append(client.time_to_next_update())
        for n, delay in enumerate(seen):
            term = 100 * 2**n
            assert min(term * 0.8, 700) <= delay <= min(term * 1.2, 700), seen
        assert seen[-1] == 700
        for node in (1, 2, 3):
            mock_cluster.broker_up(node)
        clock.now += seen[-1] + 60_000  # past every node's reconnect backoff too
        await client.refresh_metadata()
        client.request_update()
        assert client.time_to_next_update() == 100  # reset by the success
    finally:
        await client.close()


# ---------------------------------------------------------------- produce


async def test_produce_batch_returns_increasing_base_offsets(client: KafkaClient) -> None:
    offsets = [await produce_batch(client, "orders", 0, batch(b"a", b"b"), acks=-1) for _ in range(3)]
    assert offsets == [0, 2, 4]  # two records per batch
    assert await produce_batch(client, "orders", 1, batch(b"x"), acks=1) == 0  # per partition


async def test_produce_batch_finds_the_leader_itself(mock_cluster: MockCluster) -> None:
    client = KafkaClient(Config(servers(mock_cluster)))
    try:
        # No bootstrap, no add_topic: the first call fetches what it needs.
        assert await produce_batch(client, "orders", 3, batch(b"v")) == 0
    finally:
        await client.close()


async def test_produce_batch_acks0_returns_minus_one(
    client: KafkaClient, mock_cluster: MockCluster
) -> None:
    assert await produce_batch(client, "orders", 0, batch(b"a"), acks=0) == -1
    # The record was written all the same: the next batch comes after it.
    assert await produce_batch(client, "orders", 0, batch(b"b")) == 1


async def test_produce_batch_raises_the_broker_error_and_requests_metadata(
    client: KafkaClient, mock_cluster: MockCluster
) -> None:
    await client.refresh_metadata(["orders"])
    assert not client.update_requested
    mock_cluster.push_request_errors(messages.PRODUCE, NOT_LEADER_OR_FOLLOWER)
    with pytest.raises(errors.error_for_code(NOT_LEADER_OR_FOLLOWER)) as info:
        await produce_batch(client, "orders", 0, batch(b"a"))
    assert info.value.retriable and info.value.invalid_metadata
    assert client.update_requested


async def test_produce_batch_to_unknown_partition(client: KafkaClient) -> None:
    with pytest.raises(errors.error_for_code(3)):  # UNKNOWN_TOPIC_OR_PARTITION
        await produce_batch(client, "orders", 99, batch(b"a"))


# ------------------------------------------------------------ connections


async def test_one_connection_per_node_shared_by_concurrent_callers(client: KafkaClient) -> None:
    conns = await asyncio.gather(*(client.connection(2) for _ in range(5)))
    assert all(c is conns[0] for c in conns)
    assert conns[0].node_id == 2 and conns[0].is_connected
    assert client.is_ready(2) and client.connection_delay(2) == 0


async def test_broker_down_fails_in_flight_produce_promptly_then_reconnects(mock_cluster: MockCluster) -> None:
    # A reconnect backoff long enough that a loaded machine cannot use it up between the
    # failed connect and the check below (at 50 ms it did, once, with another suite running).
    client = KafkaClient(Config(servers(mock_cluster), reconnect_backoff_ms=1000, reconnect_backoff_max_ms=1000),
                         allow_auto_topic_creation=False)
    await client.bootstrap()
    try:
        await _broker_down_then_reconnect(client, mock_cluster)
    finally:
        await client.close()


async def _broker_down_then_reconnect(client: KafkaClient, mock_cluster: MockCluster) -> None:
    await client.refresh_metadata(["orders"])
    leader = client.metadata.leader_for("orders", 0)
    assert leader is not None
    conn = await client.connection(leader)
    mock_cluster.set_rtt(leader, 5000)
    sends = [
        asyncio.ensure_future(produce_batch(client, "orders", 0, batch(b"x"))) for _ in range(3)
    ]
    await eventually(lambda: conn.in_flight_count == 3)
    started = time.monotonic()
    mock_cluster.broker_down(leader)
    results = await asyncio.gather(*sends, return_exceptions=True)
    assert time.monotonic() - started < 2.0  # request.timeout.ms is 30 s
    assert all(isinstance(r, KafkaConnectionError) and r.retriable for r in results), results
    assert client.update_requested
    assert not client.is_ready(leader)

    # While down: refused, fast, and the node enters reconnect backoff.
    with pytest.raises(KafkaConnectionError):
        await client.connection(leader)
    assert client.connection_delay(leader) > 0
    assert not client.is_ready(leader)

    mock_cluster.set_rtt(leader, 0)
    mock_cluster.broker_up(leader)
    offset = await produce_batch(client, "orders", 0, batch(b"y"))  # waits out the backoff
    assert offset >= 0
    new_conn = await client.connection(leader)
    assert new_conn is not conn and new_conn.is_connected


async def test_reconnect_backoff_doubles_with_jitter_up_to_the_max(
    mock_cluster: MockCluster,
) -> None:
    clock = FakeClock()
    config = Config(servers(mock_cluster), reconnect_backoff_ms=100, reconnect_backoff_max_ms=500)
    fresh = KafkaClient(config, clock=clock, rng=random.Random(7))
    try:
        await fresh.bootstrap()
        mock_cluster.broker_down(3)
        seen = []
        for _ in range(5):
            with pytest.raises(KafkaConnectionError):
                await fresh.connection(3)
            delay = fresh.connection_delay(3)
            seen.append(delay)
            assert not fresh.is_ready(3)
            clock.now += delay  # the next attempt may start now: no real waiting
            assert fresh.connection_delay(3) == 0
        for attempt, delay in enumerate(seen):
            term = 100 * 2**attempt
            assert min(term * 0.8, 500) <= delay <= min(term * 1.2, 500), seen
        assert seen[-1] == 500  # capped
        mock_cluster.broker_up(3)
        conn = await fresh.connection(3)
        assert conn.is_connected
        mock_cluster.broker_down(3)
        await eventually(lambda: not conn.is_connected)
        with pytest.raises(KafkaConnectionError):
            await fresh.connection(3)
        assert fresh.connection_delay(3) <= 120  # a success reset the backoff
    finally:
        await fresh.close()


async def test_a_throttled_node_is_not_ready_until_the_throttle_ends_even_after_a_reconnect(
    mock_cluster: MockCluster,
) -> None:
    clock = FakeClock()
    fresh = KafkaClient(Config(servers(mock_cluster)), clock=clock)
    try:
        await fresh.bootstrap()
        conn = await fresh.connection(1)
        await fresh.connection(2)
        assert fresh.is_ready(1) and fresh.throttle_delay(1) == 0
        assert conn.on_throttle is not None
        conn.on_throttle(conn.node_id, 500)  # what the connection does with a Produce response's throttle_time_ms=500
        fresh.throttle(1, 100)  # a shorter throttle after it does not cut it short
        assert not fresh.is_ready(1) and fresh.throttle_delay(1) == 500
        assert fresh.is_ready(2)  # per node
        clock.now += 499
        mock_cluster.broker_down(1)
        await eventually(lambda: not conn.is_connected)
        mock_cluster.broker_up(1)
        await fresh.connection(1)
        assert not fresh.is_ready(1) and fresh.throttle_delay(1) == 1
        clock.now += 1
        assert fresh.is_ready(1) and fresh.throttle_delay(1) == 0
    finally:
        await fresh.close()


async def test_unknown_node_is_a_connection_error(client: KafkaClient) -> None:
    with pytest.raises(KafkaConnectionError, match="node 42"):
        await client.connection(42)


async def test_send_any_uses_a_live_broker(client: KafkaClient) -> None:
    response = await client.send_any(messages.API_VERSIONS, {})
    assert response["error_code"] == 0


# ------------------------------------------------------------------ close


async def test_close_closes_everything_and_leaks_nothing(mock_cluster: MockCluster) -> None:
    before = other_tasks()
    client = KafkaClient(Config(servers(mock_cluster)))
    await client.bootstrap()
    conns = [await client.connection(n) for n in (1, 2, 3)]
    await produce_batch(client, "orders", 0, batch(b"a"))
    await client.close()
    await client.close()
    assert all(not c.is_connected for c in conns)
    assert other_tasks() == before
    with pytest.raises(KafkaConnectionError):
        await client.refresh_metadata()
    with pytest.raises(KafkaConnectionError):
        await client.connection(1)


async def test_a_connection_adopted_while_a_connect_waits_out_its_backoff_is_not_dropped() -> None:
    """A reconnect in backoff and a bootstrap refresh race for a node: no connection may be lost unclosed.

    The race of a broker restarted under load (issue #25): the sender's reconnect to the
    only node sleeps out its backoff while a metadata refresh, finding every node in
    backoff, reaches the node through its bootstrap address and adopts that connection.
    Before the fix the reconnect then overwrote the adopted connection: nothing closed it
    (its socket stayed open) and, once its request timer had fired, its reader task, held
    only by the dropped connection (asyncio holds tasks weakly), was collected while
    pending: "Task was destroyed but it is pending!".
    """
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    with MockCluster(brokers=1, topics={"t": 1}) as mc:
        # Backoff of 500 ms (at least 400 with jitter): far longer than a refresh on the mock.
        client = KafkaClient(Config(servers(mc), reconnect_backoff_ms=500, reconnect_backoff_max_ms=500))
        made: list[BrokerConnection] = []
        new_connection = client._new_connection

        def tracked(host: str, port: int, node_id: int) -> BrokerConnection:
            made.append(new_connection(host, port, node_id))
            return made[-1]

        client._new_connection = tracked  # type: ignore[method-assign]
        try:
            await client.bootstrap()
            first = await client.connection(1)
            mc.broker_down(1)
            await eventually(lambda: not first.is_connected)
            with pytest.raises(KafkaConnectionError):
                await client.connection(1)  # fails: node 1 is now in reconnect backoff
            mc.broker_up(1)
            reconnect = asyncio.create_task(client.connection(1))
            await eventually(lambda: 1 in client._connecting)  # sleeping out the backoff
            await client.refresh_metadata()  # node 1 in backoff: through the bootstrap address
            conn = await reconnect
            assert conn.is_connected and client._conns[1] is conn
            live = [c for c in made if c.is_connected]
            assert live == [conn], live  # the other one was closed, not dropped
        finally:
            await client.close()
            loop.set_exception_handler(previous)
    assert all(not c.is_connected and (c._reader_task is None or c._reader_task.done()) for c in made), made
    del made
    gc.collect()
    assert reported == []


# ------------------------------------------------------------------ reachability

CLIENT_LOGGER = "aioproducer.network.client"


def client_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == CLIENT_LOGGER and r.levelno >= logging.INFO]


async def test_a_node_outage_is_one_warning_and_one_info_however_many_attempts(
    mock_cluster: MockCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Per outage episode, not per attempt: the first failed attempt warns, the first success tells."""
    caplog.set_level(logging.INFO, CLIENT_LOGGER)
    clock = FakeClock()
    fresh = KafkaClient(Config(servers(mock_cluster), reconnect_backoff_ms=100, reconnect_backoff_max_ms=500), clock=clock)
    try:
        await fresh.bootstrap()
        await fresh.connection(1)
        conn = await fresh.connection(3)
        mock_cluster.broker_down(3)
        await eventually(lambda: not conn.is_connected)
        assert client_lines(caplog) == []  # a lost connection alone says nothing: the next attempt may succeed
        began = clock.now
        for _ in range(4):
            with pytest.raises(KafkaConnectionError):
                await fresh.connection(3)
            clock.now += fresh.connection_delay(3)
        address = f"{conn.host}:{conn.port}"
        [(level, line)] = client_lines(caplog)
        assert level == logging.WARNING
        assert line.startswith(f"[test-client] node 3 ({address}) is unreachable: could not connect to {address} (node 3)")
        assert line.endswith("retrying with backoff up to reconnect.backoff.max.ms=500 ms")
        assert fresh.brokers_reachable  # nodes 1 and 2 answer: no cluster-wide outage
        clock.now += 2_000
        mock_cluster.broker_up(3)
        await fresh.connection(3)
        assert len(client_lines(caplog)) == 2
        level, line = client_lines(caplog)[1]
        assert level == logging.INFO
        assert line == f"[test-client] node 3 ({address}) is reachable again after {(clock.now - began) / 1000:.1f} s and 4 failed connection attempts"
        await fresh.connection(3)
        assert len(client_lines(caplog)) == 2  # an episode ends once
    finally:
        await fresh.close()


async def test_brokers_reachable_follows_a_cluster_wide_outage(caplog: pytest.LogCaptureFixture) -> None:
    """False from a failed attempt with no live connection until a connection succeeds; a lost connection alone keeps it."""
    with MockCluster(brokers=1, topics={"t": 1}) as mc:
        clock = FakeClock()
        fresh = KafkaClient(Config(servers(mc), reconnect_backoff_ms=100, reconnect_backoff_max_ms=100), clock=clock)
        try:
            await fresh.bootstrap()
            conn = await fresh.connection(1)
            assert fresh.brokers_reachable
            mc.broker_down(1)
            await eventually(lambda: not conn.is_connected)
            assert fresh.brokers_reachable  # nothing failed yet: a broker closing an idle connection looks the same
            with pytest.raises(KafkaConnectionError):
                await fresh.connection(1)
            assert not fresh.brokers_reachable
            clock.now += fresh.connection_delay(1)
            with pytest.raises(KafkaConnectionError, match="no broker answered"):
                await fresh.refresh_metadata()  # the bootstrap server refuses too
            assert not fresh.brokers_reachable
            mc.broker_up(1)
            await fresh.connection(1)
            assert fresh.brokers_reachable
        finally:
            await fresh.close()


async def test_a_broker_that_closes_each_connection_before_answering_is_reconnected_to_with_backoff(
    mock_cluster: MockCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Negotiated, then lost before any answer, again and again: each loss is a failed attempt.

    The connect itself succeeds each time, so without this the client reconnected at once, in a
    loop, for as long as the broker (or a proxy in front of it) kept closing. A proxy in front of
    a mock broker closes each connection when the first answer past the handshake comes back.
    One WARNING for the run; a connection that did answer is replaced at once when lost.
    """
    from aioproducer.testing import FaultProxy

    caplog.set_level(logging.INFO, CLIENT_LOGGER)
    clock = FakeClock()
    config = Config(servers(mock_cluster), reconnect_backoff_ms=100, reconnect_backoff_max_ms=500)
    fresh = KafkaClient(config, clock=clock, rng=random.Random(7))
    body = {"topics": [], "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
    with FaultProxy(servers(mock_cluster)[0]) as proxy:
        try:
            await fresh.bootstrap()
            seen = []
            for _ in range(5):
                proxy.swallow_responses(1, api_key=messages.METADATA, then="close")
                assert fresh.connection_delay(99) == 0
                conn = await fresh.connection_to(99, proxy.host, proxy.port)
                with pytest.raises(KafkaConnectionError):
                    await conn.send(messages.METADATA, body)
                await eventually(lambda: not conn.is_connected)
                seen.append(fresh.connection_delay(99))
                clock.now += seen[-1]  # the next attempt may start now: no real waiting
            for n, delay in enumerate(seen):
                term = 100 * 2**n
                assert min(term * 0.8, 500) <= delay <= min(term * 1.2, 500), seen
            warnings = [line for level, line in client_lines(caplog) if level == logging.WARNING]
            [warning] = warnings  # one for the run
            assert warning.startswith(
                f"[test-client] node 99 ({proxy.address}): the connection was lost before the broker answered any request "
                f"(connection to {proxy.address} (node 99) broke: "
            ), warning
            assert warning.endswith("); reconnecting with backoff up to reconnect.backoff.max.ms=500 ms"), warning
            conn = await fresh.connection_to(99, proxy.host, proxy.port)
            assert await conn.send(messages.METADATA, body) is not None  # answered: a healthy connection
            assert proxy.drop_connections() == 1
            await eventually(lambda: not conn.is_connected)
            assert fresh.connection_delay(99) == 0  # replaced at once, and the run of losses is over
            conn = await fresh.connection_to(99, proxy.host, proxy.port)
            proxy.swallow_responses(1, api_key=messages.METADATA, then="close")
            with pytest.raises(KafkaConnectionError):
                await conn.send(messages.METADATA, body)
            await eventually(lambda: not conn.is_connected)
            assert 80 <= fresh.connection_delay(99) <= 120  # a new run starts at reconnect.backoff.ms
        finally:
            await fresh.close()
