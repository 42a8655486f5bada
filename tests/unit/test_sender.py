"""Sender's Produce path with a fake clock, a fake client and a fake connection.

The fake connection records what ``send_produce`` was given and lets the test
play the broker by calling the callback with a decoded response (or an error),
so the matching of answers to batches is checked exactly: answers in request
order, out of order, missing, duplicated, for partitions not asked for, with
errors; the request's own shape (one entry per topic); and the fallbacks
(``acks=0`` and a connection gone since ``ready()`` go through ``produce()`` in a task).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from aioproducer.partitioner import TopicPartitions
from aioproducer.errors import (
    InvalidRecordBrokerError,
    InvalidTimestampError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    ProtocolError,
)
from aioproducer.internals.accumulator import AccumulatorConfig, RecordAccumulator
from aioproducer.internals.batch import ProducerBatch
from aioproducer.internals.buffer_pool import BufferPool
from aioproducer.internals.sender import Sender, WakeUp
from aioproducer.internals.compression_offload import INLINE_COMPRESSION_BYTES
from aioproducer.lifecycle import Lifecycle, State
from aioproducer.network.connection import ProduceCallback
from aioproducer.network.metadata import Node
from aioproducer.protocol.compression import GZIP
from aioproducer.protocol.produce import AnyProduceResponse, NodeEndpoint, PartitionResponse, ProduceResponse, TopicData
from aioproducer.protocol.records import decode_batches
from broker_model import as_answer

NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_RECORD = 87
INVALID_TIMESTAMP = 32


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Config:
    acks: int = 1
    retries: int = 5
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    max_request_size: int = 1 << 20
    metadata_max_age_ms: int = 300_000
    retry_backoff_ms: int = 100


@dataclass
class Sent:
    node: int
    topic_data: TopicData
    acks: int
    timeout_ms: int
    on_response: ProduceCallback
    #: What the sender handed over (``on_response`` wraps it to count the slot back).
    token: ProduceCallback


class FakeConnection:
    """One node's connection: counts its requests in flight until the test answers them."""

    def __init__(self, client: FakeClient, node: int) -> None:
        self.client = client
        self.node = node
        self.in_flight = 0

    def can_send_more(self) -> bool:
        return self.in_flight < self.client.max_in_flight

    def try_send_produce(
        self, topic_data: TopicData, on_response: ProduceCallback, acks: int, timeout_ms: int,
        transactional_id: str | None, transaction_v2: bool,
    ) -> bool:
        if self.client.fail_with is not None:
            raise self.client.fail_with
        if not self.can_send_more():
            return False  # as BrokerConnection: busy since ready(), the sender goes through a task
        self.in_flight += 1

        def answered(response: AnyProduceResponse | None, error: KafkaError | None) -> None:
            self.in_flight -= 1
            on_response(response, error)

        self.client.sent.append(Sent(self.node, topic_data, acks, timeout_ms, answered, on_response))
        return True

    async def send(self, api_key: int, body: dict[str, Any]) -> dict[str, Any] | None:
        raise AssertionError("these tests run without idempotence: nothing but Produce is sent")

    async def produce(
        self, topic_data: TopicData, *, acks: int, timeout_ms: int, transactional_id: str | None = None,
        transaction_v2: bool = False,
    ) -> AnyProduceResponse | None:
        self.client.produced.append((topic_data, acks))
        return self.client.produce_result


class Leaders:
    """Partition p of every topic is led by node p % 2."""

    nodes = {0: None, 1: None}

    def leader_for(self, topic: str, partition: int) -> int | None:
        return partition % 2

    def partitions_snapshot(self, topic: str) -> TopicPartitions | None:
        return None  # no partition counts: adaptive partitioning has no statistics to update


class FakeClient:
    def __init__(self) -> None:
        self.max_in_flight = 5
        self.ready = True  # False: connection_for() says the connection went away since ready()
        self.flushes: list[list[int]] = []  # flush_writes()'s nodes, one entry a call
        self.updates = 0
        self.sent: list[Sent] = []
        self.produced: list[tuple[TopicData, int]] = []
        self.fail_with: BaseException | None = None
        self.produce_result: AnyProduceResponse | None = None
        self.conns: dict[int, FakeConnection] = {}
        self.metadata_due = False  # what time_to_next_update() says: due now, or not at all
        self.refreshes = 0
        self.leader_hints: list[tuple[str, int, int, int, Any]] = []
        self.clock: FakeClock | None = None
        #: node -> fake-clock time its throttle ends (KIP-219), as KafkaClient keeps it.
        self.throttled_until: dict[int, float] = {}
        self.brokers_reachable = True  # False: as KafkaClient during a cluster-wide outage

    def conn(self, node_id: int) -> FakeConnection:
        return self.conns.setdefault(node_id, FakeConnection(self, node_id))

    @property
    def metadata(self) -> Any:
        return Leaders()

    def add_topic(self, topic: str) -> None:
        pass

    def request_update(self) -> None:
        self.updates += 1

    async def refresh_metadata(self, topics: Any = None) -> Any:
        self.refreshes += 1
        return None

    def time_to_next_update(self, now: float | None = None) -> float:
        return 0.0 if self.metadata_due else float("inf")

    def update_leader(self, topic: str, partition: int, leader: int, leader_epoch: int, node: Any) -> bool:
        self.leader_hints.append((topic, partition, leader, leader_epoch, node))
        return True

    def is_ready(self, node_id: int) -> bool:
        return self.conn(node_id).can_send_more() and self.throttle_delay(node_id) == 0.0

    def free_slots(self, node_id: int) -> int:
        conn = self.conn(node_id)
        return max(0, self.max_in_flight - conn.in_flight) if self.is_ready(node_id) else 0

    def throttle_delay(self, node_id: int, now: float | None = None) -> float:
        assert self.clock is not None
        now = self.clock.now if now is None else now
        return max(0.0, self.throttled_until.get(node_id, now) - now)

    def is_connected(self, node_id: int) -> bool:
        return True

    def connection_for(self, node_id: int) -> FakeConnection | None:
        return self.conn(node_id) if self.ready else None

    def flush_writes(self, nodes: Iterable[int]) -> None:
        self.flushes.append(sorted(nodes))  # this fake's connections hold nothing: each request is answered as sent

    async def connection(self, node_id: int) -> FakeConnection:
        return self.conn(node_id)

    def connection_error(self, node_id: int) -> KafkaError | None:
        return None


def make(
    acks: int = 1, linger_ms: float = 0, compression_type: int = 0, lifecycle: Lifecycle | None = None
) -> tuple[Sender, RecordAccumulator, FakeClient, FakeClock]:
    """A sender over a fake client; ``lifecycle`` (RUNNING if not given) is the test's to move, as the engine's is."""
    clock = FakeClock()
    lifecycle = lifecycle if lifecycle is not None else Lifecycle(State.RUNNING)
    acc = RecordAccumulator(
        AccumulatorConfig(
            batch_size=1024, linger_ms=linger_ms, retry_backoff_ms=100, delivery_timeout_ms=120_000,
            compression_type=compression_type,
        ),
        BufferPool(1 << 20, 1024),
        None,
        lambda: None,
        clock=clock,
        lifecycle=lifecycle,
    )
    client = FakeClient()
    client.clock = clock
    sender = Sender(client, acc, None, Config(acks=acks), clock=clock, on_fatal=lifecycle.refuse)
    return sender, acc, client, clock


def append(acc: RecordAccumulator, topic: str, partition: int) -> Any:
    future = acc.try_append(topic, partition, 1, None, f"{topic}-{partition}".encode(), None, None)
    assert future is not None
    return future


def ok(topic: str, partition: int, base_offset: int, *, code: int = 0, append_time: int = -1,
       message: str | None = None, record_errors: tuple[tuple[int, str | None], ...] = ()) -> PartitionResponse:
    return PartitionResponse(topic, partition, code, base_offset, append_time, -1, record_errors, message, -1, -1)


def response(*parts: PartitionResponse) -> AnyProduceResponse:
    """The answer as the connection hands it over (``as_answer``: the generic codec's bytes, read natively)."""
    return as_answer(ProduceResponse(1, list(parts), 0, []))


def in_flight(sender: Sender, acc: RecordAccumulator, clock: FakeClock) -> list[Sent]:
    """One pass; every request written so far, oldest first."""
    client = sender.client
    assert isinstance(client, FakeClient)
    sender.run_once(clock.now)
    return client.sent


def requested(sent: Sent) -> list[tuple[str, list[int]]]:
    return [(topic, [p for p, _ in parts]) for topic, parts in sent.topic_data]


async def test_one_request_per_node_grouped_by_topic_without_a_task() -> None:
    sender, acc, client, clock = make()
    futures = [append(acc, t, p) for t, p in [("a", 0), ("b", 2), ("a", 2), ("b", 0), ("a", 1)]]
    before = {t for t in asyncio.all_tasks() if not t.done()}
    sent = in_flight(sender, acc, clock)
    assert {t for t in asyncio.all_tasks() if not t.done()} == before
    assert len(sent) == 2  # node 0 (partitions 0, 2) and node 1 (partition 1)
    node0 = next(s for s in sent if len(s.topic_data) == 2)
    # Each topic once, its partitions together, whatever order drain() produced.
    assert sorted((t, sorted(ps)) for t, ps in requested(node0)) == [("a", [0, 2]), ("b", [0, 2])]
    assert all(s.acks == 1 and s.timeout_ms == 30_000 for s in sent)
    assert sender._has_requests()
    # The broker answers every partition of node 0's request, in the order asked.
    node0.on_response(response(*(ok(t, p, 10 * p) for t, ps in requested(node0) for p in ps)), None)
    done = [f for f in futures if f.done()]
    assert len(done) == 4
    assert sorted((f.result().topic, f.result().partition, f.result().offset) for f in done) == [
        ("a", 0, 0), ("a", 2, 20), ("b", 0, 0), ("b", 2, 20)
    ]
    node1 = next(s for s in sent if s is not node0)
    node1.on_response(response(ok("a", 1, 7, append_time=1234)), None)
    assert futures[4].result().offset == 7 and futures[4].result().timestamp == 1234
    assert not sender._has_requests()


async def test_answers_out_of_order_missing_duplicated_and_unasked() -> None:
    sender, acc, client, clock = make()
    futures = {p: append(acc, "t", p) for p in (0, 2, 4, 6)}
    (sent,) = in_flight(sender, acc, clock)
    order = requested(sent)[0][1]
    assert sorted(order) == [0, 2, 4, 6]
    first, second, third, fourth = order
    sent.on_response(
        response(
            ok("t", first, 100),
            ok("t", third, 300),  # out of place: matching by topic-partition from here on
            ok("t", 99, 5),  # not asked for: ignored
            ok("t", third, 999),  # a second answer: ignored
            ok("u", second, 5),  # another topic: not ours
            ok("t", second, 200),
        ),
        None,
    )
    assert futures[first].result().offset == 100
    assert futures[second].result().offset == 200
    assert futures[third].result().offset == 300
    # ``fourth`` got no answer: an unknown outcome, retried (re-queued), not failed.
    assert not futures[fourth].done()
    clock.now += 1_000
    (*_, retry) = in_flight(sender, acc, clock)
    assert requested(retry) == [("t", [fourth])]
    retry.on_response(response(ok("t", fourth, 400)), None)
    assert futures[fourth].result().offset == 400


async def test_partition_errors_retry_or_fail_with_the_broker_message() -> None:
    sender, acc, client, clock = make()
    retried, failed, duplicate = append(acc, "t", 0), append(acc, "t", 2), append(acc, "t", 4)
    (sent,) = in_flight(sender, acc, clock)
    sent.on_response(
        response(
            ok("t", 0, -1, code=NOT_LEADER_OR_FOLLOWER),
            ok("t", 2, -1, code=INVALID_RECORD, message="bad batch", record_errors=((3, "null key"), (5, None))),
            ok("t", 4, -1, code=DUPLICATE_SEQUENCE_NUMBER, append_time=77),
        ),
        None,
    )
    assert not retried.done()  # retriable: re-queued
    assert client.updates >= 1  # NOT_LEADER_OR_FOLLOWER: metadata is stale
    error = failed.exception()
    assert isinstance(error, KafkaError) and not error.retriable
    assert str(error).endswith("INVALID_RECORD: bad batch (record 3: null key) (record 5: None)")
    assert duplicate.result().offset == -1 and duplicate.result().timestamp == 77
    clock.now += 1_000
    (*_, again) = in_flight(sender, acc, clock)
    assert requested(again) == [("t", [0])]
    again.on_response(response(ok("t", 0, 1)), None)
    assert retried.result().offset == 1


@pytest.mark.parametrize(
    ("error", "retried", "metadata_update"),
    [
        (KafkaConnectionError("broker went away"), True, True),
        (ProtocolError("garbage"), False, False),
    ],
)
async def test_a_failed_request_fails_or_retries_every_batch(
    error: KafkaError, retried: bool, metadata_update: bool
) -> None:
    sender, acc, client, clock = make()
    futures = [append(acc, "t", 0), append(acc, "t", 2)]
    (sent,) = in_flight(sender, acc, clock)
    sent.on_response(None, error)
    assert (client.updates > 0) == metadata_update
    if retried:
        assert not any(f.done() for f in futures)
    else:
        assert all(f.exception() is error for f in futures)
    assert not sender._has_requests()


async def test_a_request_that_does_not_encode_fails_its_batches_without_retry() -> None:
    sender, acc, client, clock = make()
    future = append(acc, "t", 0)
    client.fail_with = ValueError("string too long")
    assert in_flight(sender, acc, clock) == []
    error = future.exception()
    assert isinstance(error, KafkaError) and not error.retriable and "string too long" in str(error)
    assert not sender._has_requests()


async def test_a_partition_left_out_at_the_end_of_an_in_order_answer_is_retried() -> None:
    sender, acc, client, clock = make()
    futures = {p: append(acc, "t", p) for p in (0, 2)}
    (sent,) = in_flight(sender, acc, clock)
    first, last = requested(sent)[0][1]
    sent.on_response(response(ok("t", first, 1)), None)
    assert futures[first].result().offset == 1
    assert not futures[last].done()
    clock.now += 1_000
    (*_, retry) = in_flight(sender, acc, clock)
    assert requested(retry) == [("t", [last])]


async def test_topics_with_the_same_partition_numbers_are_told_apart() -> None:
    sender, acc, client, clock = make()
    a0, b0 = append(acc, "a", 0), append(acc, "b", 0)
    (sent,) = in_flight(sender, acc, clock)
    assert requested(sent) == [("a", [0]), ("b", [0])]
    sent.on_response(response(ok("b", 0, 20), ok("a", 0, 10)), None)  # same partition, other order
    assert (a0.result().offset, b0.result().offset) == (10, 20)


async def test_a_late_answer_after_a_forced_close_is_ignored() -> None:
    lifecycle = Lifecycle(State.RUNNING)
    sender, acc, client, clock = make(lifecycle=lifecycle)
    future = append(acc, "t", 0)
    sent = list(in_flight(sender, acc, clock))
    lifecycle.force()  # as the engine's close does at its timeout
    sender.wakeup()
    await sender.run()  # forced: ends at once
    batch: ProducerBatch = future._batch
    batch.complete(-1, -1, KafkaError("closed"))  # as the producer's abort_incomplete does
    sent[0].on_response(None, KafkaConnectionError("closed by the producer"))
    assert client.updates == 0  # not even a metadata update: the answer is no one's any more
    assert str(future.exception()) == "closed"
    assert not sender._has_requests()


@pytest.mark.parametrize("acks", [0, 1])
async def test_acks0_and_a_lost_connection_go_through_produce_in_a_task(acks: int) -> None:
    sender, acc, client, clock = make(acks=acks)
    client.ready = False  # acks=0 ignores it: it never uses the synchronous path
    client.produce_result = None if acks == 0 else response(ok("t", 0, 42))
    future = append(acc, "t", 0)
    in_flight(sender, acc, clock)
    assert client.sent == []
    assert sender._requests
    await asyncio.gather(*sender._requests)
    [(topic_data, sent_acks)] = client.produced
    assert sent_acks == acks and [(t, [p for p, _ in ps]) for t, ps in topic_data] == [("t", [0])]
    assert future.result().offset == (-1 if acks == 0 else 42)


def test_not_leader_error_class_is_what_retries_see() -> None:
    assert NotLeaderOrFollowerError.retriable and NotLeaderOrFollowerError.invalid_metadata


def fill(acc: RecordAccumulator, partition: int, records: int) -> list[Any]:
    """``records`` 200-byte records: four fill a 1024-byte batch (a fifth would not fit)."""
    futures = [acc.try_append("t", partition, 1, None, b"v" * 200, None, None) for _ in range(records)]
    assert all(f is not None for f in futures)
    return futures


async def test_one_pass_writes_requests_while_the_node_is_ready_and_has_room() -> None:
    sender, acc, client, clock = make()
    client.max_in_flight = 3
    fill(acc, 0, 4 * 4)  # four full batches for node 0
    fill(acc, 1, 4)  # one for node 1
    delay = sender.run_once(clock.now)
    per_node = [s.node for s in client.sent]
    assert sorted(per_node) == [0, 0, 0, 1]  # node 0 up to its 3 slots, node 1 its one batch
    assert client.flushes == [[0, 1]]  # the connections' held requests written once, at the pass's end
    assert [len(acc.topic_info("t").batches[p]) for p in (0, 1)] == [1, 0]
    assert delay > 0  # node 0 is full: the sender waits for a response, it does not spin
    first = next(s for s in client.sent if s.node == 0)
    first.on_response(response(ok("t", 0, 0)), None)
    sender.run_once(clock.now)
    assert [s.node for s in client.sent].count(0) == 4
    assert not acc.topic_info("t").batches[0]
    assert client.flushes == [[0, 1], [0]]
    sender.run_once(clock.now)
    assert client.flushes == [[0, 1], [0]]  # a pass that writes nothing flushes nothing


async def test_one_pass_does_not_take_a_batch_that_is_not_ready_yet() -> None:
    sender, acc, client, clock = make(linger_ms=10)
    fill(acc, 0, 4 + 2)  # a full batch, then an open one with two records lingering
    delay = sender.run_once(clock.now)
    assert [requested(s) for s in client.sent] == [[("t", [0])]]
    assert len(acc.topic_info("t").batches[0]) == 1  # the open batch keeps filling
    assert 0 < delay <= 10
    clock.now += 10
    sender.run_once(clock.now)
    assert len(client.sent) == 2


async def test_a_pass_sends_a_node_more_while_one_of_its_first_batches_may_go_then_waits_their_linger() -> None:
    """The pass's further requests follow ``ready()``'s rule for the node alone (``drain_next``).

    A node is ready while a first batch of one of its partitions may go (here: one with another
    batch behind it); each request then takes every partition's first batch, lingering or
    not (Java's drain). Left with only a lingering batch, the node waits out its linger.
    """
    sender, acc, client, clock = make(linger_ms=10)
    fill(acc, 0, 4 * 3)  # partition 0 (node 0): two full batches, then an open one
    fill(acc, 2, 1)  # partition 2 (node 0 too): one record, lingering
    delay = sender.run_once(clock.now)
    assert [requested(s) for s in client.sent] == [[("t", [0, 2])], [("t", [0])]]
    assert client.flushes == [[0]]
    assert delay == 10  # the open batch's linger, counted although its node was ready at the pass's start
    assert len(acc.topic_info("t").batches[0]) == 1
    clock.now += 10
    sender.run_once(clock.now)
    assert [requested(s) for s in client.sent][2:] == [[("t", [0])]]


async def test_awaited_records_go_in_waves_one_request_per_acknowledgement_without_lingering() -> None:
    """Request/acknowledge (issue #25, item 7): callers each awaiting their own record.

    The first awaited record goes at once (its leader has nothing in flight); the
    records awaited while that request is out batch up, and go together as soon as
    its acknowledgement frees the connection, not ``linger.ms`` after they came.
    """
    sender, acc, client, clock = make(linger_ms=10)
    first = append(acc, "t", 0)
    waiting = asyncio.ensure_future(_await(first))
    await asyncio.sleep(0)  # one step of the task: it is now awaiting the record
    assert first._batch.waiters
    sender.run_once(clock.now)
    assert [requested(s) for s in client.sent] == [[("t", [0])]]  # no linger while the node is idle
    wave = [append(acc, "t", 0) for _ in range(3)]
    for future in wave:
        future.add_done_callback(lambda f: None)
    delay = sender.run_once(clock.now)
    assert len(client.sent) == 1 and delay == 10  # node 0 is busy: the wave batches up, linger still bounds it
    client.sent[0].on_response(response(ok("t", 0, 0)), None)
    assert (await waiting).offset == 0
    sender.run_once(clock.now)  # the same instant: the ack freed the node
    assert len(client.sent) == 2
    assert len(sent_values(client.sent[1])) == 3  # the whole wave in one request


async def test_a_record_nobody_awaits_lingers_even_when_its_leader_is_idle() -> None:
    """Fire-and-forget, callbacks or ``flush()`` later: ``linger.ms`` as in Java."""
    sender, acc, client, clock = make(linger_ms=10)
    append(acc, "t", 0)
    assert sender.run_once(clock.now) == 10 and not client.sent
    clock.now += 10
    sender.run_once(clock.now)
    assert len(client.sent) == 1


async def _await(future: Any) -> Any:
    return await future


async def test_a_batch_that_expires_waiting_for_a_retry_names_the_last_failure() -> None:
    sender, acc, client, clock = make()
    future = append(acc, "t", 0)
    (sent,) = in_flight(sender, acc, clock)
    sent.on_response(response(ok("t", 0, -1, code=NOT_ENOUGH_REPLICAS)), None)
    assert not future.done()  # retriable: waits for its backoff
    client.max_in_flight = 0  # the leader takes nothing more: the batch waits in the queue until it expires
    clock.now += 120_000
    sender.run_once(clock.now)
    error = future.exception()
    assert isinstance(error, KafkaTimeoutError)
    assert isinstance(error.__cause__, KafkaError) and getattr(error.__cause__, "errno", None) == NOT_ENOUGH_REPLICAS
    assert "the last attempt failed with NotEnoughReplicasError" in str(error)


async def test_a_batch_that_expires_in_flight_is_completed_once_whatever_the_late_answer_says() -> None:
    """Its records are reported once, at the expiry; the broker's answer after it changes nothing.

    The answer still ends the request (the partition's in-flight slot), but the records'
    outcome is the one written first: ``on_delivery`` is not called again and the memory is
    not handed back twice.
    """
    sender, acc, client, clock = make()
    reports: list[tuple[Any, BaseException | None]] = []
    future = acc.try_append("t", 0, 1, None, b"v", None, lambda md, err: reports.append((md, err)))
    assert future is not None
    (sent,) = in_flight(sender, acc, clock)
    clock.now += 120_000
    sender.run_once(clock.now)  # its deadline passed while its request was out
    assert len(reports) == 1 and isinstance(reports[0][1], KafkaTimeoutError)
    available = acc.pool.available_memory
    sent.on_response(response(ok("t", 0, 42)), None)  # the broker wrote it after all
    assert len(reports) == 1, reports
    assert isinstance(future.exception(), KafkaTimeoutError)
    assert acc.pool.available_memory == available


async def test_in_flight_batches_expire_at_their_own_deadline_to_the_millisecond_request_by_request() -> None:
    """The in-flight expiry is tracked per request (its earliest deadline, from the native build).

    A request with a batch made at T and one made at T + 1 s: nothing fails a millisecond before
    T's deadline, T's batch fails exactly at it (``>=``, as Java) and the other only at its own,
    which the sender then sleeps until (not the request's spent deadline again); an answered
    request is forgotten, and once nothing in flight can expire the sender has no deadline.
    """
    sender, acc, client, clock = make()
    start = clock.now
    first = append(acc, "t", 0)
    clock.now += 1_000
    later = append(acc, "t", 2)  # same leader (node 0): the same request as ``first``
    (sent,) = in_flight(sender, acc, clock)
    assert requested(sent) == [("t", [0, 2])]
    clock.now += 1_000
    answered = append(acc, "t", 1)  # its deadline, the latest, must not outlive its request
    sent = in_flight(sender, acc, clock)[1]
    assert requested(sent) == [("t", [1])]
    sent.on_response(response(ok("t", 1, 5)), None)
    clock.now = start + 120_000 - 1
    sender.run_once(clock.now)
    assert not first.done() and not later.done()
    clock.now += 1
    delay = sender.run_once(clock.now)
    assert isinstance(first.exception(), KafkaTimeoutError) and not later.done()
    assert delay == 1_000  # until ``later``'s deadline
    clock.now += 999
    sender.run_once(clock.now)
    assert not later.done()
    clock.now += 1
    delay = sender.run_once(clock.now)
    assert isinstance(later.exception(), KafkaTimeoutError)
    assert delay == float("inf")
    assert answered.result().offset == 5


async def test_a_batch_never_sent_expires_naming_why_its_leader_was_unreachable() -> None:
    sender, acc, client, clock = make()
    refused = KafkaConnectionError("could not connect to node 0: refused")
    client.connection_error = lambda node_id: refused if node_id == 0 else None  # type: ignore[method-assign]
    future = append(acc, "t", 0)
    client.max_in_flight = 0  # as if the leader could not be reached: nothing is sent
    clock.now += 120_000
    sender.run_once(clock.now)
    error = future.exception()
    assert isinstance(error, KafkaTimeoutError) and error.__cause__ is refused
    assert " while no broker was reachable" not in str(error)  # only its leader was not


async def test_a_batch_expiring_in_a_cluster_wide_outage_says_no_broker_was_reachable() -> None:
    sender, acc, client, clock = make()
    client.brokers_reachable = False
    future = append(acc, "t", 0)
    client.max_in_flight = 0
    clock.now += 120_000
    sender.run_once(clock.now)
    error = future.exception()
    assert isinstance(error, KafkaTimeoutError)
    assert "has passed since batch creation (delivery.timeout.ms=120000) while no broker was reachable" in str(error)


# ---------------------------------------------------------------- metadata refresh (item 7 of #11)
async def test_the_sender_refreshes_metadata_when_the_client_says_it_is_due() -> None:
    sender, acc, client, clock = make()
    assert sender.run_once(clock.now) == float("inf")
    await asyncio.sleep(0)
    assert client.refreshes == 0
    client.metadata_due = True  # a connection was lost, a request timed out, or max.age passed
    sender.run_once(clock.now)
    task = sender._metadata_task
    assert task is not None
    await task
    assert client.refreshes == 1


async def test_a_not_leader_answer_naming_the_new_leader_is_taken_without_waiting_for_metadata() -> None:
    sender, acc, client, clock = make()
    append(acc, "t", 0)
    [sent] = in_flight(sender, acc, clock)
    hint = ok("t", 0, -1, code=NOT_LEADER_OR_FOLLOWER)._replace(leader_id=3, leader_epoch=12)
    sent.on_response(as_answer(ProduceResponse(1, [hint], 0, [NodeEndpoint(3, "b3", 9093, None)])), None)
    assert client.leader_hints == [("t", 0, 3, 12, Node("b3", 9093, None))]

async def test_a_throttled_node_gets_nothing_until_its_throttle_ends_and_the_sender_wakes_then() -> None:
    """KIP-219: the broker answers at once and counts on the client to hold off for ``throttle_time_ms``."""
    sender, acc, client, clock = make()
    throttled, other = append(acc, "t", 0), append(acc, "t", 1)
    client.throttled_until[0] = clock.now + 300  # node 0's last answer said throttle_time_ms=300
    delay = sender.run_once(clock.now)
    assert [s.node for s in client.sent] == [1]  # the node that is not throttled is served
    assert delay == 300  # no response will come to wake the sender: the throttle's end must
    client.sent[0].on_response(response(ok("t", 1, 5)), None)
    assert other.result().offset == 5
    clock.now += 299
    assert sender.run_once(clock.now) == 1 and len(client.sent) == 1
    clock.now += 1
    sender.run_once(clock.now)
    assert [requested(s) for s in client.sent] == [[("t", [1])], [("t", [0])]]
    client.sent[1].on_response(response(ok("t", 0, 7)), None)
    assert throttled.result().offset == 7


OTHERS_FAILED = "Failed to append record because it was part of a batch which had one more more invalid records"


def records(acc: RecordAccumulator, partition: int, count: int, on_delivery: Any = None) -> list[Any]:
    """``count`` small records in one batch of ``partition``, each with ``on_delivery`` if given."""
    futures: list[Any] = [acc.try_append("t", partition, 1, None, b"r%d" % i, None, on_delivery) for i in range(count)]
    assert all(f is not None for f in futures) and len({f._batch for f in futures}) == 1
    return futures


async def test_record_errors_fail_the_named_records_with_their_own_error_and_the_rest_generically() -> None:
    """KIP-467, as Java: named records get INVALID_RECORD with their message, the others a generic error; no retry."""
    sender, acc, client, clock = make()
    reports: list[tuple[Any, BaseException | None]] = []
    futures = records(acc, 0, 4, on_delivery=lambda md, err: reports.append((md, err)))
    (sent,) = in_flight(sender, acc, clock)
    sent.on_response(response(ok("t", 0, -1, code=INVALID_RECORD, message="bad batch",
                                 record_errors=((1, "null key"), (3, None)))), None)
    errors = [f.exception() for f in futures]
    assert [type(e) for e in errors] == [KafkaError, InvalidRecordBrokerError, KafkaError, InvalidRecordBrokerError]
    assert str(errors[1]) == "[Error 87] INVALID_RECORD: null key"
    assert str(errors[3]) == "[Error 87] INVALID_RECORD: bad batch"  # no message of its own: the partition's
    batch_error = futures[0]._batch.error
    assert isinstance(batch_error, InvalidRecordBrokerError)
    for other in (errors[0], errors[2]):
        assert other is not None and str(other).startswith(OTHERS_FAILED) and other.__cause__ is batch_error
        assert not getattr(other, "retriable")
    assert reports == [(None, e) for e in errors]  # on_delivery: each record its own error, in order
    for future, error in zip(futures, errors):
        with pytest.raises(KafkaError) as raised:
            await future
        assert raised.value is error
    clock.now += 10_000
    assert len(in_flight(sender, acc, clock)) == 1  # not retried


async def test_a_single_record_error_keeps_the_partition_s_error_class_and_describes_itself() -> None:
    """One named record: the partition's code says exactly what is wrong with it (Java uses its exception)."""
    sender, acc, client, clock = make()
    futures = records(acc, 0, 2)
    gathered = asyncio.gather(*futures, return_exceptions=True)  # through done-callbacks and exception()
    (sent,) = in_flight(sender, acc, clock)
    sent.on_response(response(ok("t", 0, -1, code=INVALID_TIMESTAMP, record_errors=((0, None),))), None)
    named, other = futures[0].exception(), futures[1].exception()
    assert isinstance(named, InvalidTimestampError) and str(named) == f"[Error 32] INVALID_TIMESTAMP: {InvalidTimestampError.description}"
    assert type(other) is KafkaError and str(other).startswith(OTHERS_FAILED)
    assert await gathered == [named, other]


async def test_without_record_errors_every_record_shares_the_batch_error() -> None:
    sender, acc, client, clock = make()
    futures = records(acc, 0, 3)
    (sent,) = in_flight(sender, acc, clock)
    sent.on_response(response(ok("t", 0, -1, code=INVALID_RECORD, message="corrupt")), None)
    errors = {id(f.exception()) for f in futures}
    assert len(errors) == 1 and isinstance(futures[0].exception(), InvalidRecordBrokerError)


def with_interceptor() -> tuple[Sender, RecordAccumulator, FakeClock, list[tuple[Any, BaseException | None]]]:
    """A sender whose completions reach a producer's interceptor, as the producer wires them; its acks, in order."""
    from aioproducer import Producer

    acks: list[tuple[Any, BaseException | None]] = []

    class Recorder:
        def on_send(self, record: Any) -> Any:
            return record

        def on_acknowledgement(self, metadata: Any, error: BaseException | None) -> None:
            acks.append((metadata, error))

    producer = Producer(bootstrap_servers="127.0.0.1:1", interceptors=[Recorder()])  # never started
    sender, acc, _, clock = make()
    sender._on_complete = producer._engine._on_batch_complete
    return sender, acc, clock, acks


async def test_interceptors_see_each_record_s_own_error() -> None:
    """``on_acknowledgement`` gets the record's error, as Java's interceptor callbacks do, not the batch's."""
    sender, acc, clock, acks = with_interceptor()
    futures = records(acc, 0, 3)
    (sent,) = in_flight(sender, acc, clock)
    sent.on_response(response(ok("t", 0, -1, code=INVALID_RECORD, record_errors=((1, "bad"),))), None)
    assert acks == [(None, f.exception()) for f in futures]
    assert type(acks[0][1]) is KafkaError and isinstance(acks[1][1], InvalidRecordBrokerError)


async def test_interceptors_see_records_with_and_without_on_delivery_in_order() -> None:
    """The batch keeps on_delivery records apart from the futures it holds; interceptors still get every record once, in order."""
    sender, acc, clock, acks = with_interceptor()
    reported: list[Any] = []
    futures = [acc.try_append("t", 0, 50 + i, None, b"v" * (i + 1), None,
                               (lambda md, err: reported.append(md)) if i % 2 else None)
               for i in range(5)]
    (sent,) = in_flight(sender, acc, clock)
    sent.on_response(response(ok("t", 0, 10)), None)
    assert [(md.offset, md.timestamp, md.serialized_value_size, error) for md, error in acks] == [
        (10 + i, 50 + i, i + 1, None) for i in range(5)
    ]
    assert [f.result() for f in futures if f is not None] == [md for md, _ in acks]


@pytest.mark.parametrize("append_time", [-1, 77_000])
async def test_on_delivery_gets_each_record_s_own_metadata_from_the_native_completion(append_time: int) -> None:
    """The sender's completion (native, no interceptor) reports each ``on_delivery`` record with its own offset,
    time, sizes and time type: the broker's append time when the topic keeps it, else the record's create time."""
    sender, acc, _, clock = make()
    reported: list[Any] = []
    for i in range(4):
        key = None if i == 2 else b"k" * i
        assert acc.try_append("t", 0, 50 + i, key, b"v" * (10 + i), None, lambda md, err: reported.append((md, err))) is not None
    (sent,) = in_flight(sender, acc, clock)
    sent.on_response(response(ok("t", 0, 10, append_time=append_time)), None)
    logged = append_time >= 0
    assert not any(gc.is_tracked(md) for md, _ in reported)  # a str and ints: left out of the collector
    assert [(tuple(md), err) for md, err in reported] == [
        (("t", 0, 10 + i, append_time if logged else 50 + i, -1 if i == 2 else i, 10 + i, int(logged)), None)
        for i in range(4)
    ]


GZIP_SHARE = INLINE_COMPRESSION_BYTES[GZIP]


def big_value(i: int, size: int) -> bytes:
    """``size`` bytes that compress (text), different per ``i``."""
    return (b"record %d " % i * (size // 8 + 1))[:size]


def sent_values(sent: Sent) -> list[bytes | None]:
    """The record values of a request, decoded (and decompressed) from what was written."""
    values: list[bytes | None] = []
    for _, parts in sent.topic_data:
        for _, data in parts:
            assert data is not None
            joined = b"".join(data) if isinstance(data, tuple) else data  # a batch sent in place: two pieces
            values += [record.value for batch in decode_batches(joined) for record in batch.records]
    return values


async def test_a_request_past_the_pass_s_compression_share_is_compressed_in_a_thread_and_nothing_overtakes_it() -> None:
    sender, acc, client, clock = make(compression_type=GZIP)
    big, later = big_value(1, 2 * GZIP_SHARE), big_value(2, 100)
    first = acc.try_append("t", 0, 1, None, big, None, None)
    second = acc.try_append("t", 0, 1, None, later, None, None)  # same partition, the next batch
    assert first is not None and second is not None and first._batch is not second._batch
    assert sender.run_once(clock.now) == 0  # come back once the loop has run
    assert client.sent == [] and sender._requests  # in the thread: not written, not compressed here
    assert sender.run_once(clock.now) > 0 and client.sent == []  # node 0 waits: the next batch must not overtake
    await asyncio.gather(*sender._requests)
    assert [sent_values(s) for s in client.sent] == [[big]]
    sender.run_once(clock.now)
    assert [sent_values(s) for s in client.sent] == [[big], [later]]
    for i, s in enumerate(client.sent):
        s.on_response(response(ok("t", 0, 10 + i)), None)
    assert (first.result().offset, second.result().offset) == (10, 11)


async def test_one_pass_compresses_at_most_its_share_on_the_loop_and_the_rest_in_the_thread() -> None:
    sender, acc, client, clock = make(compression_type=GZIP)
    size = GZIP_SHARE // 6
    values = {p: big_value(p, size) for p in range(8)}  # 8 partitions, 4 per node: a request is 2/3 of a share
    for p, value in values.items():
        assert acc.try_append("t", p, 1, None, value, None, None) is not None
    values[8] = b"small"  # a second batch for partition 0, small enough for what is left of the share
    assert acc.try_append("t", 0, 1, None, values[8], None, None) is not None
    assert sender.run_once(clock.now) == 0
    inline = [v for s in client.sent for v in sent_values(s)]
    assert len(inline) == 4 and sender._requests  # the first node's request here, the second's in the thread
    assert values[8] not in inline  # over its share, the pass wrote no more
    await asyncio.gather(*sender._requests)
    while sender.run_once(clock.now) == 0:  # each pass its share; the thread's requests are written by it
        await asyncio.gather(*sender._requests)
    assert sorted(v for s in client.sent for v in sent_values(s) if v is not None) == sorted(values.values())


async def test_a_batch_failed_while_its_request_compresses_is_not_sent() -> None:
    sender, acc, client, clock = make(compression_type=GZIP)
    future = acc.try_append("t", 0, 1, None, big_value(1, 2 * GZIP_SHARE), None, None)
    assert future is not None
    sender.run_once(clock.now)
    sender.abort_incomplete(KafkaError("closed by force"))
    await asyncio.gather(*sender._requests)
    assert client.sent == [] and str(future.exception()) == "closed by force"


async def test_a_pass_that_used_its_compression_share_stops_and_asks_to_run_again_after_a_loop_turn() -> None:
    sender, acc, client, clock = make(compression_type=GZIP)
    for p in (0, 1):  # one partition per node, two batches each
        for i in range(2):
            assert acc.try_append("t", p, 1, None, big_value(2 * p + i, GZIP_SHARE // 4), None, None) is not None
    firsts = [acc.topic_info("t").batches[p][0] for p in (0, 1)]
    share = sum(b.builder.bytes_to_compress for b in firsts)  # one request per node, exactly
    sender = Sender(client, acc, None, Config(acks=1), clock=clock, inline_compression_bytes=share, on_fatal=sender._on_fatal)
    assert sender.run_once(clock.now) == 0  # the share is spent: no sleep, but no more work in this pass
    assert len(client.sent) == 2 and not sender._requests  # neither more requests here nor in the thread
    assert sender.run_once(clock.now) == 0
    assert len(client.sent) == 4 and not sender._requests


# ---------------------------------------------------------------- #13: authentication errors are fatal
class RefusingClient(FakeClient):
    """No connection to node 0 can be made: the broker refuses our credentials."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__()
        self.error = error
        self.attempts = 0

    def is_ready(self, node_id: int) -> bool:
        return False

    def is_connected(self, node_id: int) -> bool:
        return False

    async def connection(self, node_id: int) -> FakeConnection:
        self.attempts += 1
        raise self.error


async def test_an_authentication_error_fails_the_records_at_once_instead_of_retrying_them() -> None:
    from aioproducer.errors import SaslAuthenticationFailedError

    sender, acc, _, clock = make()
    refused = SaslAuthenticationFailedError("SASL PLAIN authentication failed at broker b:9092 (node 0): bad password")
    client = RefusingClient(refused)
    client.clock = clock
    sender.client = client
    future = append(acc, "t", 0)
    sender.run_once(clock.now)  # leader 0 is not connected: a connect attempt starts
    await asyncio.gather(*sender._connecting.values())
    assert future.done() and future.exception() is refused  # not retried until delivery.timeout.ms
    assert sender.lifecycle.refusal is refused  # later records are refused with the same reason
    sender.run_once(clock.now)
    assert client.attempts == 1


async def test_the_wake_up_wakes_its_waiter_once_set_and_a_set_before_the_wait_is_not_lost() -> None:
    """``WakeUp``: the sender's sleep ends when anything sets it, set before or during the wait, and a
    cancelled wait leaves nothing behind that a later ``set()`` would trip over."""
    loop = asyncio.get_running_loop()
    wake = WakeUp()
    wake.set()
    await asyncio.wait_for(wake.wait(loop), 1)  # set before: at once
    assert wake.is_set()
    wake.clear()
    waiting = asyncio.ensure_future(wake.wait(loop))
    await asyncio.sleep(0)
    assert not waiting.done()
    loop.call_soon(wake.set)
    await asyncio.wait_for(waiting, 1)
    wake.clear()
    cancelled = asyncio.ensure_future(wake.wait(loop))
    await asyncio.sleep(0)
    cancelled.cancel()  # its waiter is cancelled now; the task ends on its next turn
    wake.set()  # before that turn: the cancelled waiter is left alone
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert wake.is_set()


async def test_the_sender_s_timer_is_kept_across_passes_and_replaced_only_by_an_earlier_one() -> None:
    """``Sender._sleep``: a pass woken before its timer leaves the timer armed for the next pass; a
    pass asking for a later wake-up is served by it; an earlier one replaces it; a fired timer
    ends the sleep and is gone."""
    sender, *_ = make()
    loop = asyncio.get_running_loop()
    sleeping = asyncio.ensure_future(sender._sleep(60_000))
    await asyncio.sleep(0)
    first = sender._timer
    assert first is not None and first.when() == pytest.approx(loop.time() + 60, abs=1)
    sender.wakeup()
    await asyncio.wait_for(sleeping, 1)
    assert sender._timer is first and not first.cancelled()  # woken sooner: kept
    sleeping = asyncio.ensure_future(sender._sleep(120_000))  # later than the timer: it serves
    await asyncio.sleep(0)
    assert sender._timer is first
    sender.wakeup()
    await asyncio.wait_for(sleeping, 1)
    sleeping = asyncio.ensure_future(sender._sleep(1))  # earlier: replaced
    await asyncio.sleep(0)
    second = sender._timer
    assert second is not None and second is not first and first.cancelled()
    await asyncio.wait_for(sleeping, 1)  # nothing wakes the sender but its timer
    assert sender._timer is None and not sender._wake.is_set()
