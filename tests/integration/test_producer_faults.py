"""Faults mid-stream: brokers going down, injected Produce errors, leaders moving.

The mock does not check idempotent sequences for a non-transactional producer,
so "exactly once, in order" is verified the only way that cannot be fooled:
reading every partition back and comparing with what was sent, in send order,
with nothing missing and nothing twice.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from aioproducer import KafkaTimeoutError, MessageTooLargeError, Producer
from aioproducer.integrations.fastapi import producer_ready
from aioproducer.testing import MockCluster
from helpers import FAST_RETRIES, eventually
from readback import read_all_values

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 6
PRODUCE = 0
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
NETWORK_EXCEPTION = 13

# The fast retries, but no request timeout a loaded machine could reach: a timed-out request is
# resent, and the mock, which does not check sequences here, appends the batch a second time if it
# had written it, so the read-back would count a duplicate the producer did not make (seen once
# under a load average of 15). The tests that time requests out on purpose set their own.
FAST = {**FAST_RETRIES, "request_timeout_ms": 20_000, "delivery_timeout_ms": 40_000}

# With several requests in flight per partition, order under faults is the broker's job: a real
# broker refuses batch N+1 with OUT_OF_ORDER_SEQUENCE_NUMBER while batch N is being retried, and
# the producer retries N+1 after it. The mock does not check sequences for a non-transactional
# producer and appends N+1 first, so with 5 in flight only "exactly once" can be verified here;
# with 1 in flight, order is the producer's alone and is verified too. Order with 5 in flight is
# verified against real Kafka in test_real_broker_faults.py.
IDEMPOTENT = {"max_in_flight_requests_per_connection": 1}
IDEMPOTENT_PIPELINED: dict[str, Any] = {}
ORDERED_NOT_IDEMPOTENT: dict[str, Any] = {"enable_idempotence": False, "max_in_flight_requests_per_connection": 1}


async def read_values(bootstrap: str, topic: str = TOPIC, partitions: range = range(PARTITIONS)) -> dict[int, list[bytes]]:
    return await read_all_values(bootstrap, topic, partitions)


def _lead_round_robin(mc: MockCluster) -> None:
    """Partition p led by broker 1 + p % 3, set before any client reads metadata."""
    for p in range(PARTITIONS):
        mc.set_partition_leader(TOPIC, p, 1 + p % 3)


async def _stream(
    producer: Producer, n: int, fault_at: int, fault: Callable[[], Awaitable[None] | None]
) -> tuple[dict[int, list[bytes]], list[Any]]:
    """Send ``n`` records round-robin over the partitions, running ``fault`` after ``fault_at`` of them.

    Between sends the loop yields (``await`` on a finished round trip every few
    records) so the stream really spans the fault instead of being queued at once.
    """
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    futures = []
    background = None
    for i in range(n):
        if i == fault_at:
            result = fault()
            if result is not None:
                background = asyncio.ensure_future(result)
        p = i % PARTITIONS
        value = b"p%d-%05d" % (p, i)
        futures.append(await producer.send(TOPIC, value=value, partition=p))
        sent[p].append(value)
        if i % 25 == 24:
            await asyncio.sleep(0.01)  # pacing: spread the stream over the fault window
    results = await asyncio.gather(*futures, return_exceptions=True)
    if background is not None:
        await background
    return sent, results


def _assert_exactly_once_in_order(sent: dict[int, list[bytes]], got: dict[int, list[bytes]]) -> None:
    for p in range(PARTITIONS):
        assert len(got[p]) == len(set(got[p])), f"partition {p}: duplicates"
        assert got[p] == sent[p], f"partition {p}: not what was sent, in order"


def _assert_in_order(sent: dict[int, list[bytes]], got: dict[int, list[bytes]]) -> None:
    """Without idempotence a retried batch may land twice; first occurrences must still be send order."""
    for p in range(PARTITIONS):
        first: list[bytes] = []
        seen: set[bytes] = set()
        for v in got[p]:
            if v not in seen:
                seen.add(v)
                first.append(v)
        assert first == sent[p], f"partition {p}: records missing or out of order"


def _assert_exactly_once(sent: dict[int, list[bytes]], got: dict[int, list[bytes]]) -> None:
    for p in range(PARTITIONS):
        assert len(got[p]) == len(set(got[p])), f"partition {p}: duplicates"
        assert sorted(got[p]) == sorted(sent[p]), f"partition {p}: records missing or unexpected"


def _check(mode: dict[str, Any], sent: dict[int, list[bytes]], got: dict[int, list[bytes]]) -> None:
    if mode is IDEMPOTENT:
        _assert_exactly_once_in_order(sent, got)
    elif mode is IDEMPOTENT_PIPELINED:
        _assert_exactly_once(sent, got)
    else:
        _assert_in_order(sent, got)


MODES = [
    pytest.param(IDEMPOTENT, id="idempotent-inflight1"),
    pytest.param(IDEMPOTENT_PIPELINED, id="idempotent-inflight5"),
    pytest.param(ORDERED_NOT_IDEMPOTENT, id="inflight1-not-idempotent"),
]


@pytest.mark.parametrize("mode", MODES)
async def test_broker_down_for_two_seconds(mock_cluster: MockCluster, mode: dict[str, Any]) -> None:
    _lead_round_robin(mock_cluster)

    async def outage() -> None:
        mock_cluster.broker_down(1)
        await asyncio.sleep(2)  # the fault's duration, not a wait for a condition
        mock_cluster.broker_up(1)

    config = {**FAST, **mode}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        sent, results = await _stream(producer, 600, 150, outage)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors[:3]
    _check(mode, sent, await read_values(mock_cluster.bootstrap_servers))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "codes",
    [
        pytest.param((NOT_LEADER_OR_FOLLOWER,) * 3, id="not-leader"),
        pytest.param((REQUEST_TIMED_OUT,) * 3, id="request-timed-out"),
        pytest.param((NETWORK_EXCEPTION,) * 3, id="network-exception"),
        pytest.param((NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, 0, NETWORK_EXCEPTION, 0, NOT_LEADER_OR_FOLLOWER), id="mixed"),
    ],
)
async def test_injected_produce_errors(mock_cluster: MockCluster, mode: dict[str, Any], codes: tuple[int, ...]) -> None:
    _lead_round_robin(mock_cluster)
    mock_cluster.start_request_tracking()

    def inject() -> None:
        mock_cluster.push_request_errors(PRODUCE, *codes)

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **{**FAST, **mode}) as producer:
        sent, results = await _stream(producer, 300, 60, inject)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors[:3]
    produce_requests = [r for r in mock_cluster.requests() if r.api_key == PRODUCE]
    assert len(produce_requests) > len(codes)  # the errors were consumed by our requests
    _check(mode, sent, await read_values(mock_cluster.bootstrap_servers))


@pytest.mark.parametrize("mode", MODES)
async def test_partition_leaders_move_mid_stream(mock_cluster: MockCluster, mode: dict[str, Any]) -> None:
    _lead_round_robin(mock_cluster)

    def move() -> None:
        for p in range(PARTITIONS):
            mock_cluster.set_partition_leader(TOPIC, p, 1 + (p + 1) % 3)

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **{**FAST, **mode}) as producer:
        sent, results = await _stream(producer, 300, 100, move)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors[:3]
    _check(mode, sent, await read_values(mock_cluster.bootstrap_servers))


async def test_broker_down_past_delivery_timeout_fails_its_records_only(mock_cluster: MockCluster) -> None:
    _lead_round_robin(mock_cluster)  # p0, p3 on broker 1
    config = {**FAST, "delivery_timeout_ms": 1500, "request_timeout_ms": 1000, "linger_ms": 0}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        await (await producer.send(TOPIC, value=b"before", partition=0))  # connected to broker 1
        mock_cluster.broker_down(1)
        lost = [await producer.send(TOPIC, value=b"lost-%d" % i, partition=0) for i in range(10)]
        kept = [await producer.send(TOPIC, value=b"kept-%d" % i, partition=1) for i in range(10)]
        kept_md = await asyncio.gather(*kept)
        assert [md.offset for md in kept_md] == list(range(10))
        lost_results = await asyncio.gather(*lost, return_exceptions=True)
        assert all(isinstance(r, KafkaTimeoutError) for r in lost_results), lost_results
        assert "delivery.timeout.ms" in str(lost_results[0])
        # The producer keeps working: other partitions at once, the failed one once its broker is back.
        after = await (await producer.send(TOPIC, value=b"after", partition=1))
        assert after.offset == 10
        mock_cluster.broker_up(1)
        again = await (await producer.send(TOPIC, value=b"again", partition=0))
        assert again.offset == 1
        metrics = producer.metrics()
        assert metrics["records_failed"] == 10
        assert isinstance(metrics["last_error"], KafkaTimeoutError)  # the failed batch's error, kept
    got = await read_values(mock_cluster.bootstrap_servers)
    assert got[0] == [b"before", b"again"]
    assert got[1] == [b"kept-%d" % i for i in range(10)] + [b"after"]


async def test_an_outage_is_logged_and_followed_by_brokers_reachable_while_ready_stays_true(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue #25: 16,168 accepted records expired without a WARNING. Now, for an outage of the only broker:

    one WARNING when the node becomes unreachable and one INFO when it is back
    (``aioproducer.network.client``), the expired records counted in rate-limited WARNINGs
    with their cause (``aioproducer.producer``), and ``brokers_reachable`` False meanwhile,
    while ``ready`` stays True (records are still taken, and retried until they expire).
    """
    caplog.set_level(logging.INFO, "aioproducer")
    config = {**FAST, "delivery_timeout_ms": 1500, "request_timeout_ms": 1000, "linger_ms": 0, "client_id": "svc"}
    with MockCluster(brokers=1, topics={"t": 2}) as cluster:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, **config) as producer:
            await (await producer.send("t", value=b"before", partition=0))
            assert producer.brokers_reachable and producer_ready(producer, require_brokers=True)
            cluster.broker_down(1)
            lost = [await producer.send("t", value=b"lost", partition=i % 2) for i in range(200)]
            await eventually(lambda: not producer.brokers_reachable, what="the outage seen")
            assert producer.ready and producer_ready(producer) and not producer_ready(producer, require_brokers=True)
            results = await asyncio.gather(*lost, return_exceptions=True)
            assert all(isinstance(r, KafkaTimeoutError) for r in results), results
            cluster.broker_up(1)
            assert (await (await producer.send("t", value=b"after", partition=0))).offset == 1
            assert producer.brokers_reachable and producer_ready(producer, require_brokers=True)
        records = [r for r in caplog.records if r.name == "aioproducer.producer"]
        nodes = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "aioproducer.network.client"]
    assert [level for level, _ in nodes] == [logging.WARNING, logging.INFO], nodes
    assert nodes[0][1].startswith("[svc] node 1 (")  # every line names its producer (logs.py) and " is unreachable: " in nodes[0][1]
    assert " is reachable again after " in nodes[1][1]
    # Every lost record is counted, in a few lines (the first at once, the rest when the producer closed).
    assert all(r.levelno == logging.WARNING for r in records) and 1 <= len(records) <= 3, [r.getMessage() for r in records]
    counted = [re.match(r"\[svc\] (\d+) record\(s\) for topic 't' \(partitions? [0-9, ]+\) not delivered", r.getMessage()) for r in records]
    assert all(counted) and sum(int(m.group(1)) for m in counted if m) == 200
    assert "KafkaTimeoutError: Expiring " in records[0].getMessage()
    assert "(delivery.timeout.ms=1500) while no broker was reachable; the last attempt failed with KafkaConnectionError" in records[0].getMessage()


async def test_an_idle_producer_sees_an_outage_and_its_end_without_traffic(caplog: pytest.LogCaptureFixture) -> None:
    """A probe on an idle service must follow the brokers too: a lost connection wakes the sender, which looks for them.

    Before, the sender slept until its next batch or ``metadata.max.age.ms`` (5 min): nothing
    was tried, so nothing was logged and ``brokers_reachable`` stayed True through the outage.
    """
    caplog.set_level(logging.INFO, "aioproducer.network.client")
    with MockCluster(brokers=1, topics={"t": 1}) as cluster:
        async with Producer(bootstrap_servers=cluster.bootstrap_servers, **FAST) as producer:
            await (await producer.send("t", value=b"before"))
            cluster.broker_down(1)
            await eventually(lambda: not producer.brokers_reachable, what="the outage seen without traffic")
            cluster.broker_up(1)
            await eventually(lambda: producer.brokers_reachable, what="the end of the outage seen without traffic")
            assert producer.ready
        nodes = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "aioproducer.network.client"]
    assert [level for level, _ in nodes] == [logging.WARNING, logging.INFO], nodes


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("times", [1, 2])
async def test_message_too_large_splits_the_batch_and_delivers_everything(
    mock_cluster: MockCluster, mode: dict[str, Any], times: int
) -> None:
    config = {**FAST, "linger_ms": 60_000, "delivery_timeout_ms": 90_000, "batch_size": 16384, **mode}
    mock_cluster.start_request_tracking()
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        futures = [await producer.send(TOPIC, value=b"r%03d" % i + b"." * 150, partition=2) for i in range(40)]
        mock_cluster.push_request_errors(PRODUCE, *(MESSAGE_TOO_LARGE,) * times)
        await producer.flush()
        offsets = [f.result().offset for f in futures]
        m = producer.metrics()
        assert m["producer_epoch"] in (-1, 0)  # a split is no reason to bump the epoch
    assert offsets == list(range(40))
    # each refusal split the batch it hit once (the first piece of the last split, for the second)
    assert m["batch-split-total"] == times and m["batch-split-rate"] > 0
    assert m["record-retry-total"] == 0 and m["record-send-total"] == 40
    # The refused batch (within batch.size) is halved at each refusal: each split makes progress.
    requests = len([r for r in mock_cluster.requests() if r.api_key == PRODUCE])
    assert times + 1 < requests <= 4 ** times + times  # halving gives 2-3 pieces (size estimates are conservative)
    got = await read_values(mock_cluster.bootstrap_servers, partitions=range(2, 3))
    assert got[2] == [b"r%03d" % i + b"." * 150 for i in range(40)]


async def test_message_too_large_while_a_later_batch_is_in_flight(mock_cluster: MockCluster) -> None:
    """The split batch keeps its sequences: the later in-flight batch stays valid, no epoch bump, nothing fails.

    The mock appends the later batch without checking its sequence (a real broker
    answers OUT_OF_ORDER_SEQUENCE_NUMBER until the pieces are written, and the
    producer retries it), so the log order is not checked here, only exactly once.
    """
    mock_cluster.set_partition_leader(TOPIC, 2, 1)
    config = {**FAST, "linger_ms": 60_000, "delivery_timeout_ms": 90_000, "batch_size": 4096}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        await producer.send(TOPIC, value=b"warm-up", partition=2)
        await producer.flush()  # connected, producer id known
        mock_cluster.set_rtt(1, 200)  # both batches of the partition are in flight before the first answer
        values = [b"r%03d" % i + b"." * 150 for i in range(40)]
        futures = [await producer.send(TOPIC, value=v, partition=2) for v in values]
        mock_cluster.push_request_errors(PRODUCE, MESSAGE_TOO_LARGE, MESSAGE_TOO_LARGE)
        await producer.flush()
        offsets = [f.result().offset for f in futures]
        assert producer.metrics()["producer_epoch"] == 0
    assert sorted(offsets) == list(range(1, 41))
    got = (await read_values(mock_cluster.bootstrap_servers, partitions=range(2, 3)))[2]
    assert got[0] == b"warm-up" and sorted(got[1:]) == values


async def test_message_too_large_on_a_single_record_fails_it_and_nothing_else(mock_cluster: MockCluster) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **{**FAST, "linger_ms": 0}) as producer:
        mock_cluster.push_request_errors(PRODUCE, MESSAGE_TOO_LARGE)
        future = await producer.send(TOPIC, value=b"alone", partition=0)
        with pytest.raises(MessageTooLargeError):
            await future
        md = await (await producer.send(TOPIC, value=b"next", partition=0))
        assert md.offset == 0
    assert (await read_values(mock_cluster.bootstrap_servers, partitions=range(1)))[0] == [b"next"]
