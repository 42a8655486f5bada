"""Faults only a real broker can show: three Kafka brokers, replication 3, ``min.insync.replicas=2``.

Every scenario streams records to six partitions with the producer's defaults
that matter here (``acks=all``, idempotence, five requests in flight per
connection), breaks something while the stream runs, lets it recover, then
reads every partition back through the brokers' own listener (never through
the fault proxy) and counts: sent, delivered, lost, duplicated, out of order.
Only a real broker checks idempotent sequence numbers, so only here can "no
duplicates, in order, with five in flight, after a retry" be shown.

The cluster is one per module (it takes ~20 s to start): three broker-only
nodes and a controller-only node (``dedicated_controller``), so that stopping
two brokers leaves the quorum, and a :class:`~aioproducer.testing.FaultProxy`
in front of every broker's client listener. ``min.insync.replicas=2`` is the
cluster's default (``broker_config``; a test shows that it reaches a topic
created without one) and set on every replicated topic too. Each test takes a
fresh topic and the ``healthy`` fixture puts every broker and proxy back before it.

Faults are timed by the stream's progress (``fault_at`` records sent) and by
the cluster's own waits (a restart returns once the broker serves), never by
guesses; the only fixed waits are the fault's duration where the scenario is
defined by one ("paused for longer than ``request.timeout.ms``").
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import pytest

from aioproducer import KafkaTimeoutError, Producer
from aioproducer.errors import MessageTooLargeError, NotEnoughReplicasError
from aioproducer.protocol.records import decode_batches
from aioproducer.testing import KafkaCluster

from conftest import kafka_or_skip, new_topic
from helpers import eventually
from readback import fetch_raw_records, read_all_values

pytestmark = pytest.mark.integration

PARTITIONS = 6
MIN_INSYNC_REPLICAS = 2
PRODUCER: dict[str, Any] = {
    "acks": "all",
    "enable_idempotence": True,
    "max_in_flight_requests_per_connection": 5,
    "linger_ms": 5,
    "batch_size": 4096,  # several batches per partition in flight at once
    "request_timeout_ms": 4000,
    "delivery_timeout_ms": 120_000,
    "retry_backoff_ms": 50,
    "retry_backoff_max_ms": 500,
    "reconnect_backoff_ms": 50,
    "reconnect_backoff_max_ms": 500,
    "metadata_max_age_ms": 5000,
}


@pytest.fixture(scope="module")
def kafka3() -> Iterator[KafkaCluster]:
    cluster = kafka_or_skip(
        brokers=3, proxy=True, dedicated_controller=True, broker_config={"min.insync.replicas": MIN_INSYNC_REPLICAS}
    )
    with cluster:
        yield cluster


@pytest.fixture
def healthy(kafka3: KafkaCluster) -> Iterator[KafkaCluster]:
    """Every broker running and every proxy passing traffic, before and after the test."""

    def heal() -> None:
        for broker in kafka3.broker_ids:
            proxy = kafka3.proxy(broker)
            proxy.resume()
            proxy.set_delay(0)
            proxy.refuse(False)
            proxy.swallow_responses(0)
        for broker in kafka3.running_brokers():
            kafka3.resume_broker(broker)  # SIGCONT: harmless unless a failed test left it paused
        kafka3.start_all()

    heal()
    yield kafka3
    heal()


def replicated_topic(cluster: KafkaCluster) -> str:
    return new_topic(cluster, PARTITIONS, replication_factor=3, config={"min.insync.replicas": 2})


# ------------------------------------------------------------------ counting


@dataclass
class Tally:
    """What a scenario did to the records; printed as one JSON line per test (``-s`` shows it)."""

    scenario: str
    sent: int
    delivered: int
    lost: int
    duplicated: int
    out_of_order: int
    failed_futures: int

    def report(self) -> None:
        print("\nFAULT-TALLY " + json.dumps(asdict(self)))


def tally(scenario: str, sent: dict[int, list[bytes]], got: dict[int, list[bytes]], results: list[Any]) -> Tally:
    sent_n = sum(len(v) for v in sent.values())
    delivered = lost = duplicated = out_of_order = 0
    for p in range(PARTITIONS):
        index = {value: i for i, value in enumerate(sent[p])}
        seen: set[bytes] = set()
        last = -1
        for value in got.get(p, []):
            if value in seen:
                duplicated += 1
                continue
            seen.add(value)
            position = index.get(value, -1)
            if position < last:
                out_of_order += 1
            last = max(last, position)
        delivered += len(seen & index.keys())
        lost += len(index.keys() - seen)
    failed = sum(1 for r in results if isinstance(r, BaseException))
    return Tally(scenario, sent_n, delivered, lost, duplicated, out_of_order, failed)


def assert_exactly_once_in_order(t: Tally) -> None:
    t.report()
    assert (t.lost, t.duplicated, t.out_of_order, t.failed_futures) == (0, 0, 0, 0), t
    assert t.delivered == t.sent


async def stream(
    producer: Producer,
    topic: str,
    n: int,
    fault_at: int,
    fault: Callable[[], Awaitable[None]],
) -> tuple[dict[int, list[bytes]], list[Any]]:
    """Send at least ``n`` records round-robin, starting ``fault`` after ``fault_at``; keep sending until it ends.

    The stream yields every 20 records so that it spans the fault and the
    recovery instead of being queued at once.
    """
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    futures = []
    fault_task: asyncio.Task[None] | None = None
    i = 0
    while i < n or (fault_task is not None and not fault_task.done()):
        if i == fault_at:
            fault_task = asyncio.ensure_future(fault())
        p = i % PARTITIONS
        value = b"p%d-%07d" % (p, i)
        futures.append(await producer.send(topic, value=value, partition=p))
        sent[p].append(value)
        i += 1
        if i % 20 == 0:
            await asyncio.sleep(0.005)  # pacing, not a condition: spreads the stream over the fault
    assert fault_task is not None
    await fault_task
    results = await asyncio.gather(*futures, return_exceptions=True)
    return sent, results


async def run_scenario(
    cluster: KafkaCluster, scenario: str, fault: Callable[[str], Awaitable[None]], n: int = 3000, **config: Any
) -> Tally:
    topic = replicated_topic(cluster)
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, **{**PRODUCER, **config}) as producer:
        await producer.partitions_for(topic)
        sent, results = await stream(producer, topic, n, n // 3, lambda: fault(topic))
    got = await read_all_values(cluster.internal_bootstrap_servers, topic, range(PARTITIONS), timeout=60)
    return tally(scenario, sent, got, results)


# ------------------------------------------------------------------ broker faults


async def test_leader_killed_mid_stream_and_restarted(healthy: KafkaCluster) -> None:
    cluster = healthy

    async def fault(topic: str) -> None:
        leader = cluster.partition_leader(topic, 0)
        await asyncio.to_thread(cluster.kill_broker, leader)
        await asyncio.to_thread(cluster.start_broker, leader)

    assert_exactly_once_in_order(await run_scenario(cluster, "leader SIGKILL + restart", fault))


async def test_leader_paused_longer_than_request_timeout(healthy: KafkaCluster) -> None:
    cluster = healthy
    pause_s = 2.5 * PRODUCER["request_timeout_ms"] / 1000

    async def fault(topic: str) -> None:
        leader = cluster.partition_leader(topic, 0)
        cluster.pause_broker(leader)
        try:
            await asyncio.sleep(pause_s)  # the scenario is defined by its length
        finally:
            cluster.resume_broker(leader)
        await asyncio.to_thread(cluster.wait_for_brokers, set(cluster.broker_ids))

    assert_exactly_once_in_order(await run_scenario(cluster, f"leader SIGSTOP {pause_s:.0f} s + SIGCONT", fault))


async def test_rolling_restart_moves_every_leader(healthy: KafkaCluster) -> None:
    """Each broker in turn: SIGTERM (controlled shutdown hands its leaders over), restart, wait until it serves.

    Every partition's leader is stopped once, so every partition changes leader at least once.
    """
    cluster = healthy

    async def fault(topic: str) -> None:
        for broker in cluster.broker_ids:
            await asyncio.to_thread(cluster.stop_broker, broker)
            await asyncio.to_thread(cluster.start_broker, broker)

    t = await run_scenario(cluster, "rolling restart (SIGTERM, start) of all 3 brokers", fault, n=4000)
    assert_exactly_once_in_order(t)


# ------------------------------------------------------------------ network faults


async def test_produce_responses_lost_after_the_write(healthy: KafkaCluster) -> None:
    """The broker wrote the batch, the response never arrived, the connection died: the retry must not duplicate."""
    cluster = healthy
    rounds = 3

    async def fault(topic: str) -> None:
        for broker in cluster.broker_ids:
            proxy = cluster.proxy(broker)
            proxy.swallow_responses(rounds, api_key=0, then="close")
        for broker in cluster.broker_ids:
            await cluster.proxy(broker).wait_swallowed_async(rounds, timeout=60)

    t = await run_scenario(cluster, f"{rounds} Produce responses lost per broker (connection closed)", fault)
    assert sum(cluster.proxy(b).stats.responses_swallowed for b in cluster.broker_ids) == 3 * rounds
    assert_exactly_once_in_order(t)


async def test_produce_response_never_comes(healthy: KafkaCluster) -> None:
    """The write happened, the connection stays open and silent: request.timeout.ms, then a retry elsewhere."""
    cluster = healthy

    async def fault(topic: str) -> None:
        leader = cluster.partition_leader(topic, 0)
        cluster.proxy(leader).swallow_responses(1, api_key=0, then="hang")
        await cluster.proxy(leader).wait_swallowed_async(1, timeout=60)

    assert_exactly_once_in_order(await run_scenario(cluster, "Produce response swallowed, connection hangs", fault))


async def test_connections_dropped_repeatedly(healthy: KafkaCluster) -> None:
    cluster = healthy

    async def fault(topic: str) -> None:
        for _ in range(3):
            dropped = sum(cluster.proxy(b).drop_connections() for b in cluster.broker_ids)
            assert dropped > 0
            # Let the producer reconnect and write again before the next drop.
            await asyncio.to_thread(_wait_requests, cluster, 6)

    assert_exactly_once_in_order(await run_scenario(cluster, "all connections reset 3 times", fault))


def _wait_requests(cluster: KafkaCluster, more: int, timeout: float = 30.0) -> None:
    """Until ``more`` further Produce requests went through the proxies (the producer is writing again)."""
    import time

    def produced() -> int:
        return sum(cluster.proxy(b).stats.requests_forwarded.get(0, 0) for b in cluster.broker_ids)

    target = produced() + more
    deadline = time.monotonic() + timeout
    while produced() < target:
        if time.monotonic() > deadline:
            raise AssertionError(f"no {more} Produce requests within {timeout} s after a fault")
        time.sleep(0.01)


async def test_slow_network_to_one_leader(healthy: KafkaCluster) -> None:
    cluster = healthy

    async def fault(topic: str) -> None:
        leader = cluster.partition_leader(topic, 0)
        cluster.proxy(leader).set_delay(300)
        await asyncio.to_thread(_wait_requests, cluster, 20)
        cluster.proxy(leader).set_delay(0)

    assert_exactly_once_in_order(await run_scenario(cluster, "300 ms delay to one leader", fault))


# ------------------------------------------------------------------ replicas missing


async def test_two_of_three_down_retries_not_enough_replicas_until_they_return(
    healthy: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = healthy
    caplog.set_level(logging.DEBUG, logger="aioproducer.sender")

    async def fault(topic: str) -> None:
        await asyncio.to_thread(cluster.stop_broker, 2)
        await asyncio.to_thread(cluster.stop_broker, 3)
        await asyncio.to_thread(_wait_for_log, caplog, "NotEnoughReplicas")
        await asyncio.to_thread(cluster.start_broker, 2)
        await asyncio.to_thread(cluster.start_broker, 3)

    t = await run_scenario(cluster, "brokers 2 and 3 down (NOT_ENOUGH_REPLICAS), then back", fault)
    assert any("NotEnoughReplicas" in r.getMessage() for r in caplog.records)
    assert_exactly_once_in_order(t)


def _wait_for_log(caplog: pytest.LogCaptureFixture, text: str, timeout: float = 60.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not any(text in r.getMessage() for r in list(caplog.records)):
        if time.monotonic() > deadline:
            raise AssertionError(f"the producer never logged {text!r} within {timeout} s")
        time.sleep(0.05)


async def test_two_of_three_down_fails_at_delivery_timeout_naming_not_enough_replicas(healthy: KafkaCluster) -> None:
    cluster = healthy
    topic = replicated_topic(cluster)
    config = {**PRODUCER, "request_timeout_ms": 3000, "delivery_timeout_ms": 15_000}
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, **config) as producer:
        await producer.partitions_for(topic)
        await asyncio.to_thread(cluster.stop_broker, 2)
        await asyncio.to_thread(cluster.stop_broker, 3)
        futures = [await producer.send(topic, value=b"v%d" % i, partition=i % PARTITIONS) for i in range(60)]
        results = await asyncio.gather(*futures, return_exceptions=True)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert len(errors) == len(results), "no record can reach min.insync.replicas=2 with one broker"
    for error in errors:
        assert isinstance(error, (KafkaTimeoutError, NotEnoughReplicasError)), repr(error)
        cause = error if isinstance(error, NotEnoughReplicasError) else error.__cause__
        # The partitions the survivor leads fail with NOT_ENOUGH_REPLICAS; those whose leader is
        # gone until the controller moves them may last have failed on the connection instead.
        assert cause is not None, f"{error!r} does not say what failed"
    assert any(
        isinstance(e, NotEnoughReplicasError) or isinstance(e.__cause__, NotEnoughReplicasError) for e in errors
    ), [repr(e) for e in errors[:6]]
    Tally("brokers 2 and 3 down past delivery.timeout.ms", 60, 0, 60, 0, 0, len(errors)).report()


async def test_min_insync_replicas_from_broker_config_refuses_acks_all_below_it(healthy: KafkaCluster) -> None:
    """Issue 40 item 8: ``broker_config`` reaches the dedicated controller, whose default a new topic takes.

    The topic sets no ``min.insync.replicas`` of its own. Its two followers are SIGKILLed; once
    the ISR is the leader alone, every ``acks=all`` record is refused with NOT_ENOUGH_REPLICAS
    (retried until ``delivery.timeout.ms``, then a ``KafkaTimeoutError`` caused by it) and none
    is acknowledged. With the setting on the brokers only, the topic ran at 1 and all were.
    """
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]

    cluster = healthy
    topic = new_topic(cluster, 1, replication_factor=3)  # no topic-level min.insync.replicas
    admin = AdminClient({"bootstrap.servers": cluster.internal_bootstrap_servers, "log_level": 2})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(timeout=30)
    assert described["min.insync.replicas"].value == str(MIN_INSYNC_REPLICAS)

    config = {**PRODUCER, "request_timeout_ms": 2000, "delivery_timeout_ms": 5000}
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, **config) as producer:
        assert (await producer.send_and_wait(topic, b"all in sync", partition=0)).offset == 0
        leader = cluster.partition_leader(topic, 0)
        for follower in set(cluster.broker_ids) - {leader}:
            await asyncio.to_thread(cluster.kill_broker, follower)
        await asyncio.to_thread(_wait_for_isr, admin, topic, [leader])
        futures = [await producer.send(topic, b"v%d" % i, partition=0) for i in range(10)]
        results = await asyncio.gather(*futures, return_exceptions=True)
    acknowledged = [r for r in results if not isinstance(r, BaseException)]
    assert acknowledged == [], f"acknowledged with an ISR of 1 < min.insync.replicas=2: {acknowledged}"
    for error in results:
        assert isinstance(error, (NotEnoughReplicasError, KafkaTimeoutError)), repr(error)
        cause = error if isinstance(error, NotEnoughReplicasError) else error.__cause__
        assert isinstance(cause, NotEnoughReplicasError), f"{error!r} caused by {cause!r}"
    assert cluster.high_watermarks(topic) == {0: 1}, "nothing written past the first record"


def _wait_for_isr(admin: Any, topic: str, isr: list[int], timeout: float = 60.0) -> None:
    """Until Metadata says partition 0 of ``topic`` has exactly ``isr`` in sync (the leader shrinks it)."""
    import time

    deadline = time.monotonic() + timeout
    seen: list[int] = []
    while sorted(seen) != sorted(isr):
        if time.monotonic() > deadline:
            raise AssertionError(f"{topic}-0: ISR {seen}, not {isr}, after {timeout} s")
        time.sleep(0.1)
        seen = list(admin.list_topics(topic, timeout=10).topics[topic].partitions[0].isrs)


# ------------------------------------------------------------------ backpressure and the in-flight limit
# The mock makes a broker slow with an RTT setting; here the proxy does (its delay and pause).


async def test_a_blocked_send_waits_for_memory_while_the_leader_hangs_and_resumes_after(healthy: KafkaCluster) -> None:
    cluster = healthy
    topic = new_topic(cluster, PARTITIONS, replication_factor=3, config={"min.insync.replicas": 2})
    config = {**PRODUCER, "buffer_memory": 64 * 1024, "batch_size": 16 * 1024, "linger_ms": 0}
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, **config) as producer:
        await producer.partitions_for(topic)
        leaders = {cluster.partition_leader(topic, p) for p in range(PARTITIONS)}
        for broker in leaders:
            cluster.proxy(broker).pause()  # requests reach no broker, no answer comes back
        try:
            first = [await producer.send(topic, value=b"first-%d" % p, partition=p) for p in range(4)]
            assert producer.metrics()["buffer_available_bytes"] == 0  # 4 open 16 KiB batches
            blocked = asyncio.create_task(producer.send(topic, value=b"fifth", partition=4))
            await eventually(lambda: producer.metrics()["waiting_for_buffer"] == 1, what="the fifth send waiting")
            assert not blocked.done() and not any(f.done() for f in first)
        finally:
            for broker in leaders:
                cluster.proxy(broker).resume()
        fifth = await blocked
        assert (await fifth).partition == 4
        await asyncio.gather(*first)
    got = await read_all_values(cluster.internal_bootstrap_servers, topic, range(5))
    assert got == {0: [b"first-0"], 1: [b"first-1"], 2: [b"first-2"], 3: [b"first-3"], 4: [b"fifth"]}


@pytest.mark.parametrize("max_in_flight", [1, 5])
async def test_no_more_than_max_in_flight_requests_per_connection(healthy: KafkaCluster, max_in_flight: int) -> None:
    cluster = healthy
    topic = new_topic(cluster, 1, replication_factor=3)
    config = {**PRODUCER, "max_in_flight_requests_per_connection": max_in_flight, "batch_size": 200, "linger_ms": 0}
    if max_in_flight == 1:
        config["enable_idempotence"] = False
    leader = cluster.partition_leader(topic, 0)
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, **config) as producer:
        await (await producer.send(topic, value=b"first", partition=0))  # connected; the broker knows our sequence
        cluster.proxy(leader).set_delay(100)  # each answer 100 ms late: requests queue behind the limit
        try:
            futures = [await producer.send(topic, value=b"%04d" % i + b"." * 60, partition=0) for i in range(60)]
            results = await asyncio.gather(*futures)
        finally:
            cluster.proxy(leader).set_delay(0)
        conns = list(producer._engine.client._conns.values())  # type: ignore[union-attr]
        observed = max(c.max_in_flight_observed for c in conns)
    assert observed == max_in_flight  # reached (the test can fail) and never exceeded
    assert [md.offset for md in results] == list(range(1, 61))  # in order, once each


# ------------------------------------------------------------------ idempotence with unknown outcomes (#11 items 1, 2, 7)


def _leaders(cluster: KafkaCluster, topic: str) -> dict[int, int]:
    return {p: cluster.partition_leader(topic, p) for p in range(PARTITIONS)}


def _epochs(raw: bytes) -> list[tuple[int, int, list[bytes | None]]]:
    """(producer epoch, base sequence, values) of each batch the broker stored."""
    return [(b.producer_epoch, b.base_sequence, [r.value for r in b.records]) for b in decode_batches(raw)]


async def test_a_batch_written_but_unanswered_then_expired_does_not_swallow_the_next(healthy: KafkaCluster) -> None:
    """Item 1: the broker wrote ``a``, its answer was lost, its leader stayed unreachable until ``a`` expired.

    The next record must be written, not acknowledged as a duplicate of ``a``
    (which it would be if ``a``'s sequence number were handed out again).
    """
    cluster = healthy
    topic = replicated_topic(cluster)
    config = {**PRODUCER, "linger_ms": 0, "request_timeout_ms": 2000, "delivery_timeout_ms": 6000}
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, **config) as producer:
        await (await producer.send(topic, value=b"first", partition=0))
        proxy = cluster.proxy(cluster.partition_leader(topic, 0))
        proxy.swallow_responses(1, api_key=0, then="hang")
        a = await producer.send(topic, value=b"a", partition=0)
        await proxy.wait_swallowed_async(1, timeout=30)  # the broker has written a
        proxy.refuse(True)
        proxy.drop_connections()
        with pytest.raises(KafkaTimeoutError):
            await a
        proxy.refuse(False)
        b = await (await producer.send(topic, value=b"b", partition=0))
    got = await read_all_values(cluster.internal_bootstrap_servers, topic, [0], timeout=60)
    assert got[0] == [b"first", b"a", b"b"]
    assert b.offset == 2


async def test_an_epoch_bump_for_one_partition_leaves_another_partitions_unanswered_retry_alone(
    healthy: KafkaCluster,
) -> None:
    """Item 2: ``a`` (partition X) was written, its answer lost, and it waits for a retry while
    partition Y fails a batch for good, which bumps Y's epoch. ``a`` must be retried under its
    own epoch and sequence, so the broker recognises it: written once."""
    cluster = healthy
    topic = new_topic(cluster, PARTITIONS, replication_factor=3,
                      config={"min.insync.replicas": 2, "max.message.bytes": 4000})
    leaders = _leaders(cluster, topic)
    x = 0
    y = next(p for p, leader in leaders.items() if leader != leaders[x])
    config = {**PRODUCER, "linger_ms": 0, "request_timeout_ms": 2000}
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, **config) as producer:
        await asyncio.gather(*[await producer.send(topic, value=b"first-%d" % p, partition=p) for p in (x, y)])
        proxy = cluster.proxy(leaders[x])
        proxy.swallow_responses(1, api_key=0, then="hang")
        a = await producer.send(topic, value=b"a", partition=x)
        await proxy.wait_swallowed_async(1, timeout=30)
        proxy.refuse(True)
        proxy.drop_connections()  # a waits to be retried; its leader cannot be reached for now
        with pytest.raises(MessageTooLargeError):
            await (await producer.send(topic, value=b"z" * 6000, partition=y))
        after = await (await producer.send(topic, value=b"after", partition=y))
        proxy.refuse(False)
        await a
    got = await read_all_values(cluster.internal_bootstrap_servers, topic, [x, y], timeout=60)
    assert got[x] == [b"first-%d" % x, b"a"]
    assert got[y] == [b"first-%d" % y, b"after"]
    raw_x = _epochs(await fetch_raw_records(cluster.internal_bootstrap_servers, topic, x))
    raw_y = _epochs(await fetch_raw_records(cluster.internal_bootstrap_servers, topic, y))
    assert raw_x[1][:2] == (raw_x[0][0], 1)  # a kept its epoch and sequence
    assert raw_y[1][:2] == (raw_y[0][0] + 1, 0)  # y started a new epoch at 0
    assert after.offset == 1


async def test_leader_killed_while_idle_is_found_before_the_next_record_expires(healthy: KafkaCluster) -> None:
    """Item 7: nothing is in flight when partition 0's leader dies; the next records find the new leader.

    ``metadata.max.age.ms`` is five minutes here, so only the lost connection
    (or the failed reconnect) can make the producer ask for metadata again.
    """
    cluster = healthy
    topic = replicated_topic(cluster)
    config = {**PRODUCER, "metadata_max_age_ms": 300_000, "delivery_timeout_ms": 30_000}
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    results: list[Any] = []
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, **config) as producer:

        async def round_(name: bytes) -> None:
            futures = []
            for p in range(PARTITIONS):
                value = b"%s-%d" % (name, p)
                futures.append(await producer.send(topic, value=value, partition=p))
                sent[p].append(value)
            results.extend(await asyncio.gather(*futures, return_exceptions=True))

        await round_(b"before")
        leader = cluster.partition_leader(topic, 0)
        await asyncio.to_thread(cluster.kill_broker, leader)
        await eventually(lambda: cluster.partition_leader(topic, 0) not in (leader, -1), timeout=60)
        await round_(b"after")
    got = await read_all_values(cluster.internal_bootstrap_servers, topic, range(PARTITIONS), timeout=60)
    assert_exactly_once_in_order(tally("leader SIGKILL while idle", sent, got, results))
