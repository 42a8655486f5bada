"""RecordAccumulator with a fake clock: batching, ready(), drain(), expiry, retries, splits."""

from __future__ import annotations

import asyncio
import gc
import itertools
import random
import types
from collections.abc import Sequence
from typing import Any

import pytest

from aioproducer.errors import KafkaError
from aioproducer.internals.batch import ProducerBatch, RecordMetadata
from aioproducer.partitioner import TopicPartitions
from aioproducer.internals.accumulator import UNKNOWN_PARTITION, AccumulatorConfig, RecordAccumulator
from aioproducer.internals.buffer_pool import BufferPool
from aioproducer.internals.transaction_manager import TransactionManager
from aioproducer.protocol.records import decode_batches


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class Leaders:
    """Partition p of every topic is led by node p % nodes."""

    def __init__(self, nodes: int = 2, unknown: set[int] | None = None) -> None:
        self.nodes = nodes
        self.unknown = unknown or set()

    def leader_for(self, topic: str, partition: int) -> int | None:
        return None if partition in self.unknown else partition % self.nodes

    def partitions_snapshot(self, topic: str) -> TopicPartitions | None:
        return None  # no partition counts: adaptive partitioning has no statistics to update


def make(
    clock: FakeClock,
    *,
    batch_size: int = 1024,
    linger_ms: float = 10,
    memory: int = 1 << 20,
    tm: TransactionManager | None = None,
    order: bool = False,
    backoff: tuple[int, int] = (100, 1000),
    rng: random.Random | None = None,
) -> tuple[RecordAccumulator, list[int]]:
    wakeups: list[int] = []
    acc = RecordAccumulator(
        AccumulatorConfig(
            batch_size=batch_size,
            linger_ms=linger_ms,
            delivery_timeout_ms=5_000,
            retry_backoff_ms=backoff[0],
            retry_backoff_max_ms=backoff[1],
            guarantee_message_order=order,
        ),
        BufferPool(memory, batch_size),
        tm,
        lambda: wakeups.append(1),
        clock=clock,
        rng=rng,
    )
    return acc, wakeups


class StubRng(random.Random):
    """``uniform(a, b)`` returns, call after call, the given fractions of the way from a to b; the last one for good."""

    def __init__(self, *fractions: float) -> None:
        super().__init__(0)
        self.fractions = itertools.chain(fractions, itertools.repeat(fractions[-1]))

    def uniform(self, a: float, b: float) -> float:
        return a + (b - a) * next(self.fractions)


#: A jitter factor of exactly 1: for tests about the exponential growth itself.
NO_JITTER = StubRng(0.5)


VALUE = b"x" * 100


def _keyed(
    acc: RecordAccumulator, topic: str, num_partitions: int, key: bytes, value: bytes, on_delivery: Any
) -> Any:
    """The keyed lane as ``send()`` calls it: nothing but a key, a value and maybe a callback given."""
    snapshots = {topic: TopicPartitions(num_partitions, tuple(range(num_partitions)))}
    return acc.try_append_keyed(snapshots, topic, value, key, None, None, None, on_delivery)


async def test_the_keyed_lane_opens_the_next_batch_as_the_door_does_and_leaves_the_rest_to_the_door() -> None:
    """A record its open batch refuses opens the next batch in the lane (``RecordQueues.set_lane``).

    As ``_open_batch``: ``batch.size`` of memory taken, the refusing batch settled, the new one
    queued, tracked as incomplete (``flush()`` waits for it) and the sender woken. None, with no
    memory taken, for what only the door does: a wait for memory, a record over ``batch.size``,
    a producer that no longer accepts records.
    """
    from aioproducer.lifecycle import Lifecycle, State
    from aioproducer.partitioner import partition_for_key

    wakeups: list[int] = []
    lifecycle = Lifecycle(State.RUNNING)
    memory = 3 * 1024 + 512  # three batches, and less than a fourth
    acc = RecordAccumulator(
        AccumulatorConfig(batch_size=1024, linger_ms=10, delivery_timeout_ms=5_000),
        BufferPool(memory, 1024), None, lambda: wakeups.append(1), clock=FakeClock(), lifecycle=lifecycle,
    )
    key = b"key-7"
    partition = partition_for_key(key, 6)
    first = acc.try_append("orders", partition, 1, key, VALUE, None, None)  # the door opens the first batch
    assert first is not None and acc.pool.available_memory == memory - 1024
    assert _keyed(acc, "orders", 6, key, b"x" * 2000, None) is None  # over batch.size: the door's
    woken = len(wakeups)
    future = _keyed(acc, "orders", 6, key, VALUE, None)
    while future is not None and future._batch is first._batch:
        future = _keyed(acc, "orders", 6, key, VALUE, None)
    assert future is not None
    second = future._batch
    assert second is not first._batch and second.record_count == 1
    assert acc.topic_info("orders").batches[partition] == [first._batch, second]
    assert second in acc.incomplete_batches()
    assert len(wakeups) == woken + 1
    assert acc.pool.available_memory <= memory - 2 * 1024  # the second batch's reservation (and the first's charge)
    while (future := _keyed(acc, "orders", 6, key, VALUE, None)) is not None:
        pass  # more batches while memory lasts, then none
    opened = len(acc.topic_info("orders").batches[partition])
    left = acc.pool.available_memory
    assert left < 1024  # why the lane refused: less than batch.size is free
    acc.pool.deallocate(2 * 1024)  # a batch's worth free again (what the last settle overdrew repaid first)...
    free = acc.pool.available_memory
    assert free >= 1024
    lifecycle.close()  # ...but the producer no longer accepts records
    assert _keyed(acc, "orders", 6, key, VALUE, None) is None
    assert acc.pool.available_memory == free and len(acc.topic_info("orders").batches[partition]) == opened


async def test_records_share_a_batch_until_it_is_full() -> None:
    clock = FakeClock()
    acc, wakeups = make(clock, batch_size=1024)
    futures = [acc.try_append("t", 0, 1, None, VALUE, None, None) for _ in range(20)]
    assert all(f is not None for f in futures)
    batches = list(acc.topic_info("t").batches[0])
    assert len(batches) > 1  # 20 x ~110 bytes do not fit in 1024
    assert all(b.estimated_size() <= 1024 for b in batches)
    assert sum(b.record_count for b in batches) == 20
    assert wakeups, "opening and filling batches must wake the sender"


async def test_the_keyed_lane_appends_where_the_door_would_and_refuses_what_only_the_door_does() -> None:
    """``try_append_keyed``: the record in its key's partition's open batch, as ``try_append`` puts it; None otherwise."""
    import time

    from aioproducer.partitioner import partition_for_key

    acc, _ = make(FakeClock(), batch_size=1024)
    key = b"key-7"
    partition = partition_for_key(key, 6)
    assert partition_for_key(b"another", 6) != partition
    reports: list[Any] = []

    def on_delivery(metadata: Any, error: BaseException | None) -> None:
        reports.append((metadata, error))

    assert _keyed(acc, "orders", 6, key, VALUE, None) is None  # a topic the door has not seen
    opened = acc.try_append("orders", partition, 1, key, VALUE, None, on_delivery)
    assert opened is not None
    assert _keyed(acc, "orders", 6, b"another", VALUE, None) is None  # a partition the door has not seen
    assert _keyed(acc, "orders", 6, key, VALUE, lambda m, e: None) is None  # a callback the door has not checked
    assert _keyed(acc, "orders", 0, key, VALUE, None) is None  # no partitions to choose from
    name, same_name = "orders", "".join(["ord", "ers"])
    assert same_name == name and same_name is not name  # the point: another object of the same name
    lane = _keyed(acc, same_name, 6, key, VALUE, on_delivery)
    assert lane is not None and lane._batch is opened._batch
    assert lane._batch.partition == partition
    now_ms = time.time_ns() // 1_000_000
    batch = opened._batch
    while (next_record := _keyed(acc, "orders", 6, key, b"v" * 10, None)) is not None and next_record._batch is batch:
        pass
    assert batch.estimated_size() <= 1024 and batch.record_count > 3  # filled to batch.size, then refused
    records = decode_batches(batch.builder.build())[0].records
    assert len(records) == batch.record_count and {r.key for r in records} == {key}
    assert [r.value for r in records[:2]] == [VALUE, VALUE]
    assert abs(records[1].timestamp - now_ms) < 60_000  # the wall clock's now, as send() stamps it


@pytest.mark.parametrize(
    "given",
    [
        {"headers": [("h", b"1")]},
        {"headers": []},  # given, even empty: the door keeps what it says about headers
        {"partition": 0},
        {"timestamp_ms": 1},
        {"key": bytearray(b"key-7")},
        {"key": type("Key", (bytes,), {})(b"key-7")},  # a bytes subclass: the door decides
        {"key": None},
        {"value": memoryview(VALUE)},
        {"value": None},
        {"topic": type("Topic", (str,), {})("orders")},  # a str subclass: the door decides
        {"topic": ["orders"]},  # unhashable: the door says what is wrong with it
        {"snapshots": {}},  # no metadata snapshot of the topic (yet)
    ],
    ids=lambda given: next(iter(given)) + ":" + type(next(iter(given.values()))).__name__,
)
async def test_the_keyed_lane_refuses_any_argument_the_door_must_see(given: dict[str, Any]) -> None:
    """``send()`` hands the lane every argument as given: anything but a ``bytes`` key and value with
    nothing else given, of a topic with a snapshot, is refused (None) and left to the door, untouched."""
    from aioproducer.partitioner import partition_for_key

    acc, _ = make(FakeClock(), batch_size=1024)
    key = b"key-7"
    opened = acc.try_append("orders", partition_for_key(key, 6), 1, key, VALUE, None, None)
    assert opened is not None
    args: dict[str, Any] = {
        "snapshots": {"orders": TopicPartitions(6, tuple(range(6)))}, "topic": "orders", "value": VALUE, "key": key,
        "headers": None, "partition": None, "timestamp_ms": None,
    }


    def lane() -> Any:
        return acc.try_append_keyed(
            args["snapshots"], args["topic"], args["value"], args["key"], args["headers"], args["partition"],
            args["timestamp_ms"], None,
        )

    assert lane() is not None  # the lane takes the record as it is
    count = opened._batch.record_count
    args.update(given)
    assert lane() is None
    assert opened._batch.record_count == count


async def test_ready_waits_for_linger_then_reports_the_leader() -> None:
    clock = FakeClock()
    acc, _ = make(clock, linger_ms=10)
    acc.try_append("t", 1, 1, None, VALUE, None, None)
    result = acc.ready(Leaders(), clock.now + 4)
    assert result.ready_nodes == set()
    assert result.next_ready_check_delay_ms == pytest.approx(6)
    result = acc.ready(Leaders(), clock.now + 10)
    assert result.ready_nodes == {1}


async def test_full_batch_is_ready_before_linger() -> None:
    clock = FakeClock()
    acc, _ = make(clock, batch_size=512, linger_ms=10_000)
    for _ in range(10):
        acc.try_append("t", 0, 1, None, VALUE, None, None)
    assert acc.ready(Leaders(), clock.now).ready_nodes == {0}


async def test_flush_makes_lingering_batches_ready() -> None:
    clock = FakeClock()
    acc, _ = make(clock, linger_ms=10_000)
    acc.try_append("t", 0, 1, None, VALUE, None, None)
    assert acc.ready(Leaders(), clock.now).ready_nodes == set()
    acc.begin_flush()
    assert acc.ready(Leaders(), clock.now).ready_nodes == {0}
    acc.end_flush()


async def test_an_awaited_batch_goes_before_its_linger_only_to_an_idle_leader() -> None:
    """Someone awaits a record and its leader's connection is idle: ready now (issue #25, item 7).

    Not awaited, or its leader busy: it lingers as in Java. Never inside a retry backoff.
    """
    clock = FakeClock()
    acc, _ = make(clock, linger_ms=10, rng=NO_JITTER)
    idle = {0: True, 1: False}
    awaited = acc.try_append("t", 0, 1, None, VALUE, None, None)
    quiet = acc.try_append("t", 2, 1, None, VALUE, None, None)  # node 0 too, nobody awaits it
    busy = acc.try_append("t", 1, 1, None, VALUE, None, None)
    assert awaited is not None and quiet is not None and busy is not None
    assert acc.ready(Leaders(), clock.now, idle.__getitem__).ready_nodes == set()  # nobody awaits anything yet
    awaited.add_done_callback(lambda f: None)  # as asyncio.gather() does
    busy.add_done_callback(lambda f: None)
    result = acc.ready(Leaders(), clock.now, idle.__getitem__)
    assert result.ready_nodes == {0}  # node 1 is busy: its batch waits for the ack or its linger
    assert result.next_ready_check_delay_ms == pytest.approx(10)
    assert acc.ready(Leaders(), clock.now).ready_nodes == set()  # without the sender's view: Java's rule
    drained = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    assert {b.partition for b in drained} == {0, 2}  # a ready node takes every partition's batch, as in Java
    retried = next(b for b in drained if b.partition == 0)
    acc.reenqueue(retried, clock.now)
    assert 0 not in acc.ready(Leaders(), clock.now + 99, idle.__getitem__).ready_nodes  # backing off: idle or not
    assert 0 in acc.ready(Leaders(), clock.now + 100, idle.__getitem__).ready_nodes


async def test_unknown_leader_is_reported() -> None:
    clock = FakeClock()
    acc, _ = make(clock)
    acc.try_append("t", 3, 1, None, VALUE, None, None)
    result = acc.ready(Leaders(unknown={3}), clock.now + 100)
    assert result.unknown_leader_topics == {"t"}
    assert result.ready_nodes == set()


async def test_drain_respects_max_request_size_and_rotates() -> None:
    clock = FakeClock()
    acc, _ = make(clock, batch_size=300, linger_ms=0)
    for partition in (0, 2, 4):  # all led by node 0
        acc.try_append("t", partition, 1, None, VALUE, None, None)
    one_batch = acc.topic_info("t").batches[0][0].estimated_size()
    first = acc.drain(Leaders(), [0], one_batch * 2, clock.now)[0]
    assert len(first) == 2
    drained = {b.partition for b in first}
    second = acc.drain(Leaders(), [0], one_batch * 2, clock.now)[0]
    assert {b.partition for b in second} == {0, 2, 4} - drained


async def test_drain_start_rotates_so_no_partition_starves() -> None:
    clock = FakeClock()
    acc, _ = make(clock, batch_size=300, linger_ms=0)
    firsts = []
    for _ in range(3):
        for partition in (0, 2, 4):
            acc.try_append("t", partition, 1, None, VALUE, None, None)
        size = acc.topic_info("t").batches[0][0].estimated_size()
        batches = acc.drain(Leaders(), [0], size, clock.now)[0]  # room for one batch only
        firsts.append(batches[0].partition)
        acc.drain(Leaders(), [0], 10**9, clock.now)  # empty the rest
    assert sorted(firsts) == [0, 2, 4]


async def test_expired_batches_are_popped_after_delivery_timeout() -> None:
    clock = FakeClock()
    acc, _ = make(clock)
    acc.try_append("t", 0, 1, None, VALUE, None, None)
    assert acc.expired_batches(clock.now + 4_999) == []
    expired = acc.expired_batches(clock.now + 5_000)
    assert len(expired) == 1 and expired[0].record_count == 1
    assert not acc.has_undrained()


async def test_a_batch_carries_its_delivery_deadline_and_a_split_piece_keeps_its_parents() -> None:
    """One rule (Java's hasReachedDeliveryTimeout): stamped at creation, read by the queue's expiry and the pieces."""
    clock = FakeClock()
    acc, _ = make(clock, batch_size=4096, linger_ms=0)
    created = clock.now
    for i in range(20):
        acc.try_append("t", 0, 1 + i, None, bytes([i]) * 100, None, None)
    [batch] = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    assert batch.delivery_deadline_ms == created + 5_000
    assert not batch.has_reached_delivery_timeout(created + 4_999)
    assert batch.has_reached_delivery_timeout(created + 5_000)
    clock.now += 3_000  # the split comes later: its pieces are not given a deadline of their own
    acc.config.batch_size = 600
    assert acc.split_and_reenqueue(batch, clock.now) > 1
    pieces = list(acc.topic_info("t").batches[0])
    assert {p.delivery_deadline_ms for p in pieces} == {created + 5_000}
    assert acc.next_expiry_delay(clock.now) == 2_000
    assert acc.expired_batches(created + 4_999) == []
    assert acc.expired_batches(created + 5_000) == pieces


async def test_reenqueued_batch_backs_off_exponentially() -> None:
    clock = FakeClock()
    acc, _ = make(clock, linger_ms=0, rng=NO_JITTER)
    acc.try_append("t", 0, 1, None, VALUE, None, None)
    [batch] = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    acc.reenqueue(batch, clock.now)
    assert acc.ready(Leaders(), clock.now + 99).ready_nodes == set()
    assert acc.ready(Leaders(), clock.now + 100).ready_nodes == {0}
    [batch] = acc.drain(Leaders(), [0], 10**6, clock.now + 100)[0]
    acc.reenqueue(batch, clock.now + 100)
    assert acc.ready(Leaders(), clock.now + 299).ready_nodes == set()  # 2nd retry: 200 ms
    assert acc.ready(Leaders(), clock.now + 300).ready_nodes == {0}


async def test_guaranteed_order_mutes_partition_while_in_flight() -> None:
    clock = FakeClock()
    acc, _ = make(clock, linger_ms=0, order=True)
    acc.try_append("t", 0, 1, None, VALUE, None, None)
    acc.drain(Leaders(), [0], 10**6, clock.now)
    acc.try_append("t", 0, 1, None, VALUE, None, None)
    assert acc.ready(Leaders(), clock.now).ready_nodes == set()
    acc.unmute("t", 0)
    assert acc.ready(Leaders(), clock.now).ready_nodes == {0}


async def test_idempotent_drain_assigns_sequences_and_retries_in_order() -> None:
    clock = FakeClock()
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(7, 0)
    acc, _ = make(clock, batch_size=300, linger_ms=0, tm=tm)
    for _ in range(8):
        acc.try_append("t", 0, 1, None, VALUE, None, None)
    [opening] = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    tm.on_acknowledged(opening, 0)  # from now on the broker holds our sequence: more may be in flight
    first = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    second = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    n = opening.record_count
    assert [b.base_sequence for b in first + second] == [n, n + first[0].record_count]
    # Both fail; the later one comes back first, but the earlier must be resent first.
    for batch in (second[0], first[0]):
        tm.on_retry(batch)
        acc.reenqueue(batch, clock.now)
    later = clock.now + 1000
    resent = acc.drain(Leaders(), [0], 10**6, later)[0]
    assert resent == first
    assert acc.drain(Leaders(), [0], 10**6, later)[0] == []  # waits for the first to complete
    tm.on_acknowledged(first[0], 0)
    assert acc.drain(Leaders(), [0], 10**6, later)[0] == second


async def test_one_batch_in_flight_per_partition_until_the_broker_acknowledged_one() -> None:
    """A broker with no state for the producer takes any first sequence: a second batch must not overtake."""
    clock = FakeClock()
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(7, 0)
    acc, _ = make(clock, batch_size=300, linger_ms=0, tm=tm)
    for partition in (0, 2):
        for _ in range(6):
            acc.try_append("t", partition, 1, None, VALUE, None, None)
    [first, other] = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    assert (first.partition, other.partition) == (0, 2)
    assert acc.drain(Leaders(), [0], 10**6, clock.now)[0] == []  # both partitions wait for their first ack
    # The first attempt is refused (NOT_LEADER_OR_FOLLOWER) and retried: still nothing overtakes it.
    tm.on_retry(first)
    acc.reenqueue(first, clock.now)
    later = clock.now + 1000
    assert acc.drain(Leaders(), [0], 10**6, later)[0] == [first]
    assert acc.drain(Leaders(), [0], 10**6, later)[0] == []
    tm.on_acknowledged(first, 0)
    tm.on_acknowledged(other, 0)
    second = acc.drain(Leaders(), [0], 10**6, later)[0]
    third = acc.drain(Leaders(), [0], 10**6, later)[0]
    assert [sorted(b.partition for b in r) for r in (second, third)] == [[0, 2], [0, 2]]  # pipelined now
    assert sorted(b.base_sequence for b in second + third if b.partition == 0)[0] == first.record_count


async def test_epoch_bump_renumbers_the_asking_partition_once_its_batches_are_out_of_requests() -> None:
    clock = FakeClock()
    tm = TransactionManager()
    tm.set_producer_id_and_epoch(7, 0)
    acc, _ = make(clock, batch_size=300, linger_ms=0, tm=tm)
    for _ in range(4):
        acc.try_append("t", 0, 1, None, VALUE, None, None)
    a = acc.drain(Leaders(), [0], 10**6, clock.now)[0][0]
    tm.on_acknowledged(a, 0)
    b = acc.drain(Leaders(), [0], 10**6, clock.now)[0][0]
    tm.request_epoch_bump("t", 0)
    assert not tm.ready_to_bump()  # b is in a request: renumbering it now would not change what was sent
    tm.on_retry(b)
    acc.reenqueue(b, clock.now)
    assert tm.ready_to_bump()
    tm.bump_epoch()
    assert (b.producer_epoch, b.base_sequence) == (1, 0)
    header = decode_batches(b.records())[0]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 0)


async def test_split_moves_futures_to_the_new_batches() -> None:
    clock = FakeClock()
    acc, _ = make(clock, batch_size=4096, linger_ms=0)
    futures = [acc.try_append("t", 0, 1 + i, None, bytes([i]) * 100, None, None) for i in range(20)]
    [batch] = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    acc.config.batch_size = 600
    pieces = acc.split_and_reenqueue(batch, clock.now)
    assert pieces > 1
    queued = list(acc.topic_info("t").batches[0])
    assert sum(b.record_count for b in queued) == 20
    base = 100
    for piece in queued:
        piece.complete(base, -1, None)
        base += piece.record_count
    offsets = [f.result().offset for f in futures]  # type: ignore[union-attr]
    assert offsets == list(range(100, 120))
    assert [f.result().timestamp for f in futures] == list(range(1, 21))  # type: ignore[union-attr]


@pytest.mark.parametrize("fail_piece", [None, 1])
async def test_a_split_batch_answers_for_futures_it_does_not_hold(fail_piece: int | None) -> None:
    """Records sent with on_delivery: the batch keeps the callback, not the future, so split() cannot move a
    future its caller kept. Each such future still gets its own record's offset, time and error, from the
    piece that holds the record (split again, too), once the last piece is done; on_delivery reports the same."""
    clock = FakeClock()
    acc, _ = make(clock, batch_size=4096, linger_ms=0)
    reports: list[tuple[int, Any, BaseException | None]] = []

    def reporter(i: int) -> Any:
        return lambda md, err: reports.append((i, md, err))

    appended = [
        acc.try_append("t", 0, 1 + i, None, bytes([i]) * 100, None, reporter(i) if i % 2 else None) for i in range(20)
    ]
    futures = [f for f in appended if f is not None]
    assert len(futures) == 20
    [batch] = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    acc.config.batch_size = 600
    assert acc.split_and_reenqueue(batch, clock.now) > 2
    first, second, *rest = list(acc.topic_info("t").batches[0])
    acc.abort_undrained()  # the pieces leave the queue: the test completes them itself
    acc.config.batch_size = 200
    assert second.record_count > 1 and acc.split_and_reenqueue(second, clock.now) > 1  # a piece split again
    pieces = [first, *acc.topic_info("t").batches[0], *rest]
    gathered = asyncio.gather(*futures, return_exceptions=True)
    failure = KafkaError("this piece failed")
    expected: list[int] = []  # each record's offset: piece k is written at 1000 * (k + 1), apart from the others
    failed: set[int] = set()
    for index, piece in enumerate(pieces):
        assert not futures[19].done()  # a future the batch did not move waits for the last piece
        base = 1000 * (index + 1)
        if index == fail_piece:
            failed.update(range(len(expected), len(expected) + piece.record_count))
        expected += [base + k for k in range(piece.record_count)]
        piece.complete(-1 if index == fail_piece else base, -1, failure if index == fail_piece else None)
    assert len(expected) == 20 and len(failed) == (0 if fail_piece is None else pieces[1].record_count)
    outcomes = await gathered
    for i, outcome in enumerate(outcomes):
        if i in failed:
            assert outcome is failure and futures[i].exception() is failure, i
        else:
            assert isinstance(outcome, RecordMetadata)
            assert (outcome.offset, outcome.timestamp, outcome.serialized_value_size) == (expected[i], 1 + i, 100), i
    assert [i for i, _, _ in reports] == [i for i in range(20) if i % 2]
    for i, metadata, error in reports:
        assert (error is failure) if i in failed else (metadata.offset == expected[i] and error is None), i


async def test_the_batch_does_not_keep_the_future_of_a_record_sent_with_on_delivery() -> None:
    """A caller that reports through on_delivery drops the future: while the record waits in the buffer, nothing
    of the producer's holds it (held, it would reach the collector's oldest generation with every queued record)."""
    clock = FakeClock()
    acc, _ = make(clock, batch_size=4096, linger_ms=10_000)
    reported: list[Any] = []
    kept = acc.try_append("t", 0, 1, None, b"kept", None, None)
    reporting = acc.try_append("t", 0, 2, None, b"cb", None, lambda md, err: reported.append(md))
    assert kept is not None and reporting is not None
    # Who refers to each future besides this test's frame: the batch holds the one without a callback only.
    [batch] = acc.topic_info("t").batches[0]
    assert [r for r in gc.get_referrers(kept) if not isinstance(r, types.FrameType)] == [batch.futures]
    assert [r for r in gc.get_referrers(reporting) if not isinstance(r, types.FrameType)] == []
    batch.complete(40, -1, None)
    assert [md.offset for md in reported] == [41] and kept.result().offset == 40


# ---------------------------------------------------------------- buffer.memory counts Python objects


async def test_a_full_batch_is_charged_its_futures_and_bytes_once() -> None:
    from aioproducer.internals.batch import RECORD_OBJECT_BYTES

    clock = FakeClock()
    acc, _ = make(clock, batch_size=1024, memory=1 << 20)
    pool = acc.pool
    while len(acc.topic_info("t").batches.get(0, ())) < 2:
        assert acc.try_append("t", 0, 1, None, VALUE, None, None) is not None
    full, open_ = acc.topic_info("t").batches[0]
    expected_full = full.builder.uncompressed_size_in_bytes + full.record_count * RECORD_OBJECT_BYTES
    assert full.settled and full.reserved_bytes == expected_full > 1024
    assert not open_.settled and open_.reserved_bytes == 1024
    assert pool.available_memory == pool.total - expected_full - 1024
    # Settling again (a drain, a second roll-over) must not charge twice.
    acc.settle(full)
    assert pool.available_memory == pool.total - expected_full - 1024


async def test_drained_open_batch_is_settled_and_everything_is_returned() -> None:
    clock = FakeClock()
    acc, _ = make(clock, batch_size=1024, memory=1 << 20)
    for _ in range(3):
        acc.try_append("t", 0, 1, None, VALUE, None, None)
    clock.now += 20  # past linger
    (batch,) = acc.drain(Leaders(), [0], 1 << 20, clock.now)[0]
    assert batch.settled and batch.reserved_bytes > 1024 - 1  # 3 records + 3 futures charged
    acc.deallocate(batch)
    assert acc.pool.available_memory == acc.pool.total


async def test_delivery_callbacks_are_charged_too() -> None:
    """A callback costs its size; a plain function also its defaults, closure tuple and cells (not their values)."""
    import sys

    clock = FakeClock()
    acc, _ = make(clock, batch_size=1 << 16, memory=1 << 20)
    acks: list[int] = []
    with_defaults = [lambda md, err, i=i: None for i in range(3)]

    def closing_over(i: int) -> Any:
        return lambda md, err: acks.append(i)  # two cells: acks and i

    with_closure = [closing_over(i) for i in range(3)]
    class Tracker:
        def ack(self, md: Any, err: Any) -> None:
            acks.append(0)

    tracker = Tracker()
    bound = [tracker.ack, tracker.ack]  # not plain functions: their own size only
    callbacks: list[Any] = [*with_defaults, *with_closure, *bound]
    for cb in callbacks:
        acc.try_append("a", 0, 1, None, VALUE, None, None)
        acc.try_append("b", 0, 1, None, VALUE, None, cb)
    plain, with_callbacks = acc.topic_info("a").batches, acc.topic_info("b").batches  # copies: taken after
    extra = with_callbacks[0][0].object_bytes() - plain[0][0].object_bytes()
    expected = sum(sys.getsizeof(cb) + 8 + sys.getsizeof(cb.__defaults__) for cb in with_defaults)
    expected += sum(
        sys.getsizeof(cb) + 8 + sys.getsizeof(cb.__closure__) + sum(map(sys.getsizeof, cb.__closure__))
        for cb in with_closure
    )
    expected += sum(sys.getsizeof(cb) + 8 for cb in bound)
    assert extra == expected
    assert all(len(cb.__closure__) == 2 for cb in with_closure)


async def test_each_new_batch_is_charged_its_own_on_delivery_when_callables_alternate_across_batches() -> None:
    """Every record here opens a batch (a record larger than batch.size): the charge cached from one
    batch to the next (``RecordQueues.open_batch``) is only reused for the same callable."""
    from aioproducer.internals.batch import _callback_bytes

    clock = FakeClock()
    acc, _ = make(clock, batch_size=64, memory=1 << 20)

    def large(md: Any, err: Any, _defaults: tuple[int, ...] = tuple(range(100))) -> None:
        pass

    small = print
    callbacks: list[Any] = [small, small, large, large, small, None, large, None, None, small]
    for partition, cb in enumerate(callbacks):
        acc.try_append("t", partition % 2, 1, None, VALUE, None, cb)
    info = acc.topic_info("t")
    batches = [b for partition in (0, 1) for b in info.batches[partition]]
    assert len(batches) == len(callbacks)  # one batch per record
    assert _callback_bytes(large) > _callback_bytes(small) > 0
    by_batch = [b.callback_bytes for b in info.batches[0]] + [b.callback_bytes for b in info.batches[1]]
    expected = [_callback_bytes(cb) if cb is not None else 0 for cb in callbacks[0::2] + callbacks[1::2]]
    assert by_batch == expected


async def test_a_record_larger_than_batch_size_reserves_its_upper_bound_and_a_refused_one_gives_it_back() -> None:
    """A new batch reserves ``max(batch.size, the record's upper bound)``; once the producer stops
    accepting, the new batch is refused and what it reserved is given back at once."""
    from aioproducer._native import estimate_size_in_bytes_upper_bound
    from aioproducer.lifecycle import Lifecycle, State

    clock = FakeClock()
    acc, _ = make(clock, batch_size=64, memory=1 << 20)
    total = acc.pool.total
    assert acc.try_append("t", 0, 1, b"k", VALUE, None, None) is not None
    assert total - acc.pool.available_memory == estimate_size_in_bytes_upper_bound(b"k", VALUE, None) > 64
    taken = total - acc.pool.available_memory
    acc.lifecycle = Lifecycle(State.CLOSING)
    with pytest.raises(BaseException) as refused:
        acc.try_append("t", 1, 1, b"k", VALUE, None, None)
    assert type(refused.value) is type(acc.lifecycle.refused())
    assert total - acc.pool.available_memory == taken  # the refused batch's reservation given back


async def test_a_record_that_waited_for_memory_opens_its_batch_with_the_memory_it_waited_for() -> None:
    """``append()`` waits for the new batch's memory, then ``try_append`` opens the batch with it
    (not a second reservation, which a full pool would refuse)."""
    from aioproducer._native import estimate_size_in_bytes_upper_bound

    clock = FakeClock()
    upper = estimate_size_in_bytes_upper_bound(b"k", VALUE, None)
    acc, _ = make(clock, batch_size=64, memory=upper)  # room for one batch
    assert acc.try_append("t", 0, 1, b"k", VALUE, None, None) is not None
    assert acc.try_append("t", 1, 1, b"k", VALUE, None, None) is None  # must wait
    waiting = asyncio.ensure_future(acc.append("t", 1, 1, b"k", VALUE, None, None, 1000))
    await asyncio.sleep(0)  # let it reach its wait: the pool has a waiter now
    assert not waiting.done()
    acc.deallocate(acc.topic_info("t").batches[0][0])
    future = await waiting
    assert future._batch.partition == 1
    assert acc.pool.available_memory == 0  # the one batch's worth, taken once


async def test_memory_counts_bound_how_many_small_records_are_accepted() -> None:
    """With objects counted, buffer.memory holds far fewer tiny records than wire bytes alone would allow."""
    from aioproducer.internals.batch import RECORD_OBJECT_BYTES

    clock = FakeClock()
    memory = 64 * 1024
    acc, _ = make(clock, batch_size=4096, memory=memory)
    accepted = 0
    while acc.try_append("t", 0, 1, None, b"v", None, None) is not None:
        accepted += 1
    wire = 10  # a record with a 1-byte value is about 10 bytes on the wire
    # The bound: the budget, plus what the one open batch holds before it is settled.
    open_batch = 4096 + 4096 // wire * RECORD_OBJECT_BYTES
    assert accepted * (wire + RECORD_OBJECT_BYTES) <= memory + open_batch
    assert accepted < memory // wire // 4  # counting wire bytes alone, ~6,000 would fit


@pytest.mark.parametrize(("memory", "size", "limit"), [(1 << 20, 9000, "max.request.size"), (4096, 5000, "buffer.memory")])
async def test_a_record_too_large_to_send_is_refused_before_it_takes_memory(memory: int, size: int, limit: str) -> None:
    """The accumulator is where records that open a batch are size-checked (Java's ensureValidRecordSize)."""
    from aioproducer.errors import RecordTooLargeError

    clock = FakeClock()
    acc, _ = make(clock, batch_size=1024, memory=memory)
    acc.config.max_request_size = 8192
    assert acc.try_append("t", 0, 1, None, VALUE, None, None) is not None
    (open_batch,) = acc.topic_info("t").batches[0]
    available = acc.pool.available_memory
    with pytest.raises(RecordTooLargeError, match=limit):
        acc.try_append("t", 0, 1, None, b"x" * size, None, None)
    with pytest.raises(RecordTooLargeError, match=limit):
        await acc.append("t", 0, 1, None, b"x" * size, None, None, 1000)
    assert acc.pool.available_memory == available and not open_batch.settled
    assert acc.try_append("t", 0, 1, None, VALUE, None, None) is not None  # the open batch still takes records
    assert len(acc.topic_info("t").batches[0]) == 1


async def test_keyless_records_stick_to_a_partition_for_a_batch_worth_of_bytes() -> None:
    """try_append(UNKNOWN_PARTITION) counts key + value + 8 bytes per record against the sticky partition (KIP-794).

    With 1024-byte batches, 100-byte values fill a batch at 8 records and the 9th opens a new one,
    which is never full when the count passes batch.size (10 records, 1080 bytes): the switch then
    waits for twice batch.size, 2048 bytes, reached at the 19th record (19 * 108 = 2052).
    """
    import random

    from aioproducer.partitioner import TopicPartitions

    clock = FakeClock()
    acc, _ = make(clock, batch_size=1024, memory=1 << 20)
    acc._rng = random.Random(7)
    partitions = TopicPartitions(6, (0, 1, 2, 3, 4, 5))
    chosen = [acc.try_append("t", UNKNOWN_PARTITION, 1, None, VALUE, None, None, partitions) for _ in range(60)]
    runs: list[list[int]] = []  # partition of each record, grouped by consecutive partition
    for f in chosen:
        assert f is not None
        if runs and runs[-1][0] == f._batch.partition:
            runs[-1].append(f._batch.partition)
        else:
            runs.append([f._batch.partition])
    assert [len(r) for r in runs[:-1]] == [19, 19] and len(runs[-1]) == 60 - 38


def sticky_runs(partitions: list[int]) -> list[int]:
    """Lengths of the runs of consecutive equal partitions."""
    return [len(list(run)) for _, run in itertools.groupby(partitions)]


async def test_keyed_records_on_the_sticky_partition_count_their_key_bytes_too() -> None:
    """``partitioner.ignore.keys``: a keyed record with UNKNOWN_PARTITION counts key + value + 8 bytes.

    A 40-byte key with a 60-byte value is counted, and encoded, as the 100-byte value above:
    the same 19 records per partition.
    """
    clock = FakeClock()
    acc, _ = make(clock, batch_size=1024, rng=random.Random(7))
    partitions = TopicPartitions(6, (0, 1, 2, 3, 4, 5))
    chosen = [acc.try_append("t", UNKNOWN_PARTITION, 1, b"k" * 40, b"x" * 60, None, None, partitions) for _ in range(60)]
    runs = sticky_runs([f._batch.partition for f in chosen if f is not None])
    assert len(chosen) == 60 and runs[:2] == [19, 19]


async def test_a_keyless_record_that_waited_for_memory_is_counted_and_switches_as_any_other() -> None:
    """``append()`` after its wait: the sticky partition peeked again, the record counted, the switch on time.

    16 records fill two 1024-byte batches; the 17th needs a third and no memory is free, so it
    waits in ``append()``. Once memory is given back it lands on the sticky partition and is
    counted (17 x 108 bytes), and the 19th record switches, as without the wait.
    """
    clock = FakeClock()
    acc, _ = make(clock, batch_size=1024, rng=random.Random(7))
    snapshot = TopicPartitions(6, (0, 1, 2, 3, 4, 5))
    partitioner = acc.topic_info("t").partitioner
    first = [acc.try_append("t", UNKNOWN_PARTITION, 1, None, VALUE, None, None, snapshot) for _ in range(16)]
    sticky = partitioner.peek_current_partition(snapshot)
    assert [f._batch.partition for f in first if f is not None] == [sticky.partition] * 16
    held = acc.pool.available_memory
    assert acc.pool.try_allocate(held)  # nothing free: the next batch must wait
    assert acc.try_append("t", UNKNOWN_PARTITION, 1, None, VALUE, None, None, snapshot) is None
    assert sticky.produced_bytes == 16 * 108  # a record that must wait is not counted
    waiting = asyncio.ensure_future(acc.append("t", UNKNOWN_PARTITION, 1, None, VALUE, None, None, 10_000, snapshot))
    await asyncio.sleep(0)
    assert acc.pool.queued == 1 and not waiting.done()
    acc.pool.deallocate(held)
    seventeenth = await waiting
    assert seventeenth._batch.partition == sticky.partition
    assert partitioner.peek_current_partition(snapshot) is sticky and sticky.produced_bytes == 17 * 108
    for _ in range(2):
        future = acc.try_append("t", UNKNOWN_PARTITION, 1, None, VALUE, None, None, snapshot)
        assert future is not None and future._batch.partition == sticky.partition
    assert partitioner.peek_current_partition(snapshot) is not sticky  # 19 x 108 = 2052 >= 2 x 1024


async def test_a_record_that_waited_for_memory_goes_to_the_sticky_partition_as_it_is_after_the_wait() -> None:
    """Another append may switch the sticky partition while one waits: the waiter goes where it now points.

    18 records of 100 bytes bring the sticky partition to 1944 counted bytes; a 900-byte record
    does not fit its open batch and waits for memory. Meanwhile a 100-byte record fits that
    batch and reaches 2052, twice batch.size: the switch. The waiter, once memory is free, is
    appended to and counted on the new partition (Java's loop re-peeks after its wait).
    """
    clock = FakeClock()
    acc, _ = make(clock, batch_size=1024, rng=random.Random(7))
    snapshot = TopicPartitions(6, (0, 1, 2, 3, 4, 5))
    partitioner = acc.topic_info("t").partitioner
    for _ in range(18):
        assert acc.try_append("t", UNKNOWN_PARTITION, 1, None, VALUE, None, None, snapshot) is not None
    before = partitioner.peek_current_partition(snapshot)
    assert before.produced_bytes == 18 * 108
    held = acc.pool.available_memory
    assert acc.pool.try_allocate(held)
    big = b"w" * 900
    waiting = asyncio.ensure_future(acc.append("t", UNKNOWN_PARTITION, 1, None, big, None, None, 10_000, snapshot))
    await asyncio.sleep(0)
    assert acc.pool.queued == 1 and not waiting.done()
    small = acc.try_append("t", UNKNOWN_PARTITION, 1, None, VALUE, None, None, snapshot)  # fits the open batch
    assert small is not None and small._batch.partition == before.partition
    after = partitioner.peek_current_partition(snapshot)
    assert after is not before and after.partition != before.partition
    acc.pool.deallocate(held)
    waited = await waiting
    assert waited._batch.partition == after.partition
    assert partitioner.peek_current_partition(snapshot) is after and after.produced_bytes == 900 + 8


async def test_send_many_runs_count_their_records_by_the_same_rule() -> None:
    """``try_append_run``: a run fills the sticky batch and is counted as its records would be one by one.

    The run is counted at its end: 8 records fill a batch (864 bytes, no switch), the next run's
    8 reach 1728, past batch.size but their batch is not full (no switch), and the third run
    passes twice batch.size: the switch, after 24 records on the partition.
    """
    clock = FakeClock()
    acc, _ = make(clock, batch_size=1024, rng=random.Random(7))
    snapshot = TopicPartitions(6, (0, 1, 2, 3, 4, 5))
    partitioner = acc.topic_info("t").partitioner
    values: list[Any] = [VALUE] * 60
    out: list[Any] = []
    stops = [0]
    while stops[-1] < len(values):
        stops.append(acc.try_append_run("t", snapshot, 1, values, stops[-1], None, out))
    assert stops[:5] == [0, 8, 16, 24, 32] and len(out) == 60
    runs = sticky_runs([f._batch.partition for f in out])
    assert runs[:2] == [24, 24]
    assert partitioner.peek_current_partition(snapshot).produced_bytes == (60 - 48) * 108
    assert acc.try_append_run("t", snapshot, 1, [b"v", "not bytes"], 1, None, out) == 1  # sent the general way


class SnapshotLeaders(Leaders):
    """Leaders, and the partition snapshot that cluster metadata would give."""

    def __init__(self, snapshot: TopicPartitions) -> None:
        super().__init__()
        self.snapshot = snapshot

    def partitions_snapshot(self, topic: str) -> TopicPartitions | None:
        return self.snapshot


async def test_ready_weights_keyless_records_by_queue_length_from_the_metadata_snapshot() -> None:
    """KIP-794: ready() reads the partition count from metadata; a longer queue gets a smaller weight.

    Without a snapshot (the topic not in metadata) it cannot tell whether every partition has
    a queue, and the draw stays uniform.
    """
    clock = FakeClock()
    acc, _ = make(clock, batch_size=1024)
    snapshot = TopicPartitions(3, (0, 1, 2))
    assert acc.try_append("t", UNKNOWN_PARTITION, 1, None, VALUE, None, None, snapshot) is not None  # keyless: stats matter
    big = b"y" * 1000  # one record per 1 KiB batch
    for partition, batches in ((0, 4), (1, 1), (2, 1)):
        for _ in range(batches):
            assert acc.try_append("t", partition, 1, None, big, None, None) is not None
    partitioner = acc.topic_info("t").partitioner
    acc.ready(Leaders(), clock.now)
    assert partitioner.load_stats() is None
    acc.ready(SnapshotLeaders(snapshot), clock.now)
    weights = partitioner.load_stats()
    assert weights is not None and set(weights) == {0, 1, 2}
    assert weights[0] < weights[1] and weights[0] < weights[2]


async def test_a_node_the_sender_could_not_drain_past_the_availability_timeout_leaves_the_keyless_draw() -> None:
    """``partitioner.availability.timeout.ms``: the sender reports each ready node; one not drainable for
    longer than the timeout has its partitions left out of the adaptive weights (Leaders: p % 2)."""
    clock = FakeClock()
    acc = RecordAccumulator(
        AccumulatorConfig(batch_size=1024, linger_ms=10, availability_timeout_ms=100),
        BufferPool(1 << 20, 1024),
        None,
        lambda: None,
        clock=clock,
    )
    snapshot = TopicPartitions(4, (0, 1, 2, 3))
    assert acc.try_append("t", UNKNOWN_PARTITION, 1, None, VALUE, None, None, snapshot) is not None
    for partition in range(4):
        assert acc.try_append("t", partition, 1, None, b"y" * 1000, None, None) is not None
    partitioner = acc.topic_info("t").partitioner
    leaders = SnapshotLeaders(snapshot)
    acc.update_node_latency(0, clock.now, True)
    acc.update_node_latency(1, clock.now, True)
    acc.update_node_latency(1, clock.now + 100, False)  # node 1: ready, not drainable, for 100 ms: still in
    acc.ready(leaders, clock.now + 100)
    assert set(partitioner.load_stats() or {}) == {0, 1, 2, 3}
    acc.update_node_latency(1, clock.now + 101, False)  # past the timeout
    acc.ready(leaders, clock.now + 101)
    assert set(partitioner.load_stats() or {}) == {0, 2}


async def test_retry_backoff_is_capped_without_overflowing_at_any_attempt() -> None:
    clock = FakeClock()
    acc, _ = make(clock)
    assert [acc.retry_backoff(n) for n in (1, 2, 3, 4, 5)] == [100, 200, 400, 800, 1000]
    assert acc.retry_backoff(1025) == 1000  # 2.0 ** 1024 would overflow
    assert acc.retry_backoff(10**9) == 1000


# ---------------------------------------------------------------- a pass costs per topic with data (#11 item 9)
class CountingLeaders(Leaders):
    def __init__(self) -> None:
        super().__init__()
        self.asked: set[str] = set()

    def leader_for(self, topic: str, partition: int) -> int | None:
        self.asked.add(topic)
        return super().leader_for(topic, partition)


async def test_ready_and_drain_walk_only_topics_with_queued_batches() -> None:
    clock = FakeClock()
    acc, _ = make(clock, linger_ms=0)
    for i in range(200):  # topics sent to once, long done
        acc.try_append(f"old-{i}", 0, 1, None, VALUE, None, None)
    for batches in acc.drain(Leaders(), [0, 1], 10**6, clock.now).values():
        for batch in batches:
            batch.complete(0, -1, None)
            acc.deallocate(batch)
    acc.ready(Leaders(), clock.now)  # notices they are empty
    acc.try_append("busy", 1, 1, None, VALUE, None, None)
    leaders = CountingLeaders()
    assert acc.ready(leaders, clock.now).ready_nodes == {1}
    acc.drain(leaders, [1], 10**6, clock.now)
    assert leaders.asked == {"busy"}
    assert not acc.has_undrained()

async def test_retry_backoff_is_jittered_by_20_percent_and_never_above_the_max() -> None:
    acc, _ = make(FakeClock(), rng=random.Random(7))
    first = [acc.jittered_retry_backoff(1) for _ in range(2000)]
    assert 80 <= min(first) < 82 and 118 < max(first) <= 120  # the whole ±20 % range is used
    assert len(set(first)) > 1900  # spread, not a few fixed values
    capped = [acc.jittered_retry_backoff(5) for _ in range(2000)]  # 100 * 2**4 = 1600, capped at 1000
    assert 800 <= min(capped) < 802 and max(capped) == 1000


async def test_a_static_backoff_above_the_max_is_the_max_without_jitter() -> None:
    """retry.backoff.ms > retry.backoff.max.ms: the config warns "a static backoff of <max> ms applies"."""
    acc, _ = make(FakeClock(), backoff=(500, 200), rng=random.Random(7))
    assert [acc.retry_backoff(n) for n in (1, 2, 3)] == [200, 200, 200]
    assert {acc.jittered_retry_backoff(n) for n in (1, 2, 3) for _ in range(10)} == {200}


async def test_ready_and_drain_agree_on_a_retry_s_jittered_backoff() -> None:
    """One draw per attempt: any other draw (1.2 after the first 0.8 here) would make ready() or drain() disagree."""
    clock = FakeClock()
    acc, _ = make(clock, linger_ms=0, rng=StubRng(0.0, 1.0))
    acc.try_append("t", 0, 1, None, VALUE, None, None)
    [batch] = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    acc.reenqueue(batch, clock.now)  # backoff 100 * 0.8 = 80 ms
    assert acc.ready(Leaders(), clock.now + 50).next_ready_check_delay_ms == pytest.approx(30)
    assert acc.ready(Leaders(), clock.now + 79).ready_nodes == set()
    assert acc.drain(Leaders(), [0], 10**6, clock.now + 79) == {0: []}
    assert acc.ready(Leaders(), clock.now + 80).ready_nodes == {0}
    assert acc.drain(Leaders(), [0], 10**6, clock.now + 80) == {0: [batch]}
    acc.reenqueue(batch, clock.now + 80)  # 2nd retry: 200 * 1.2 = 240 ms
    assert acc.ready(Leaders(), clock.now + 80 + 239).ready_nodes == set()
    assert acc.ready(Leaders(), clock.now + 80 + 240).ready_nodes == {0}
    assert acc.drain(Leaders(), [0], 10**6, clock.now + 80 + 240) == {0: [batch]}


async def test_the_pieces_of_a_split_retry_back_off_like_the_batch() -> None:
    clock = FakeClock()
    acc, _ = make(clock, batch_size=4096, linger_ms=0, rng=StubRng(1.0))
    for i in range(20):
        acc.try_append("t", 0, 1 + i, None, bytes([i]) * 100, None, None)
    [batch] = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    acc.reenqueue(batch, clock.now)
    [batch] = acc.drain(Leaders(), [0], 10**6, clock.now + 120)[0]
    acc.config.batch_size = 600
    assert acc.split_and_reenqueue(batch, clock.now + 120) > 1  # a retry split: attempts stays 1
    assert acc.ready(Leaders(), clock.now + 120 + 119).ready_nodes == set()
    assert acc.ready(Leaders(), clock.now + 120 + 120).ready_nodes == {0}


# ---------------------------------------------------------------- the native queues' leaders (#42 slice 3)
class Snapshot(Leaders):
    """A metadata snapshot as ``ClusterMetadata`` is one: its leaders never change in place."""

    LEADERS_FIXED = True

    def __init__(self, nodes: int) -> None:
        super().__init__(nodes)
        self.asked: list[tuple[str, int]] = []

    def leader_for(self, topic: str, partition: int) -> int | None:
        self.asked.append((topic, partition))
        return super().leader_for(topic, partition)


async def test_the_queues_ask_a_snapshot_for_each_leader_once_and_a_new_snapshot_again() -> None:
    """The scans are native and never call back: a snapshot's leaders are told once, a new snapshot's again."""
    clock = FakeClock()
    acc, _ = make(clock, linger_ms=0)
    for partition in range(4):
        acc.try_append("t", partition, 1, None, VALUE, None, None)
    two = Snapshot(2)
    assert acc.ready(two, clock.now).ready_nodes == {0, 1}
    assert sorted(two.asked) == [("t", p) for p in range(4)]
    assert acc.ready(two, clock.now).ready_nodes == {0, 1}
    assert len(two.asked) == 4  # the same snapshot: nothing asked again
    acc.try_append("t", 5, 1, None, VALUE, None, None)  # a partition new under the same snapshot
    drained = acc.drain(two, [1], 10**6, clock.now)
    assert two.asked[4:] == [("t", 5)]
    assert sorted(b.partition for b in drained[1]) == [1, 3, 5]  # node 1's partitions, none of node 0's
    one = Snapshot(1)  # the leaders moved: node 0 leads everything now
    assert acc.ready(one, clock.now).ready_nodes == {0}
    assert sorted(b.partition for b in acc.drain(one, [0], 10**6, clock.now)[0]) == [0, 2]
    assert acc.drain(one, [1], 10**6, clock.now) == {}  # node 1 leads nothing under it
    assert not acc.has_undrained()


class CountingTransactionManager(TransactionManager):
    """Counts the native drain's calls into the transaction manager."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def drainable(self, heads: Sequence[ProducerBatch]) -> list[bool]:
        self.calls.append(f"drainable({len(heads)})")
        return super().drainable(heads)

    def assign_sequences(self, batches: Sequence[ProducerBatch]) -> None:
        self.calls.append(f"assign_sequences({len(batches)})")
        super().assign_sequences(batches)


async def test_an_idempotent_drain_asks_the_transaction_manager_once_per_request_not_per_batch() -> None:
    """Idempotence's decisions stay Python, in two calls per request: which first batches may go, then their numbers."""
    clock = FakeClock()
    tm = CountingTransactionManager()
    tm.set_producer_id_and_epoch(7, 0)
    acc, _ = make(clock, linger_ms=0, tm=tm)
    for partition in (0, 2, 4, 6):
        acc.try_append("t", partition, 1, None, VALUE, None, None)
    drained = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    assert sorted(b.partition for b in drained) == [0, 2, 4, 6]
    assert all(b.base_sequence == 0 and b.producer_id == 7 and b.in_flight for b in drained)
    assert tm.calls == ["drainable(4)", "assign_sequences(4)"]
    acc.try_append("t", 0, 1, None, VALUE, None, None)  # partition 0's next batch: its first is unacknowledged
    assert acc.drain(Leaders(), [0], 10**6, clock.now)[0] == []
    assert tm.calls[2:] == ["drainable(1)"]  # refused: nothing to number


async def test_a_batch_sent_in_place_is_the_built_batch_byte_for_byte_and_its_crc_holds_for_every_state() -> None:
    """An uncompressed batch of ``SPLICE_THRESHOLD`` bytes or more goes into a request in place.

    Two pieces (its header made per producer state, its section where the records were
    appended) whose CRC-32C was kept at each append: the pieces together must be the batch
    ``build()`` makes for the same state, their CRC right by the ``crc32c`` package, for every
    state a retry may give it (none, idempotent, a later epoch and sequence, transactional).
    """
    import crc32c

    from aioproducer._native import produce_topic_data
    from aioproducer.protocol.produce import SPLICE_THRESHOLD

    clock = FakeClock()
    acc, _ = make(clock, batch_size=65536)
    rng = random.Random(7)
    appended: list[tuple[bytes | None, bytes, list[tuple[str, bytes]] | None]] = []
    while sum(len(v) for _, v, _ in appended) < SPLICE_THRESHOLD * 5:  # the CRC kept over several strides
        key = rng.randbytes(8) if len(appended) % 3 else None
        value = rng.randbytes(rng.randrange(1, 1500))
        headers = [("h", rng.randbytes(3))] if len(appended) % 2 else None
        assert acc.try_append("t", 0, 1_700_000_000_000 + len(appended), key, value, headers, None) is not None
        appended.append((key, value, headers))
    [batch] = acc.drain(Leaders(), [0], 10**6, clock.now)[0]
    states = [(-1, -1, -1, False), (7, 0, 0, False), (7, 3, 2_147_483_000, False), (9, 1, 5, True)]
    sent = b""
    for state in states:
        batch.set_producer_state(*state)
        _, topic_data, _, _ = produce_topic_data([batch], clock.now, None)
        [(_, [(_, records)])] = topic_data
        assert isinstance(records, tuple), "not sent in place"
        sent = b"".join(records)
        assert len(records[0]) == 61 and crc32c.crc32c(sent[21:]) == int.from_bytes(sent[17:21], "big"), state
        [decoded] = decode_batches(sent)
        assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence, decoded.is_transactional) == state
        assert [(r.key, r.value, r.headers or None) for r in decoded.records] == appended
        del topic_data, records  # the request written: its view of the section is released, the section stays
    pieces = batch.builder.split(4096)  # MESSAGE_TOO_LARGE: split from the section sent in place
    assert len(pieces) > 1
    resent = [(r.key, r.value, r.headers or None) for p in pieces for b in decode_batches(p.build()) for r in b.records]
    assert resent == appended
    assert sent == batch.builder.build(*states[-1])  # built from the same section, its CRC over all of it


@pytest.mark.parametrize("version", [3, 9, 12])
async def test_a_request_s_topic_data_encodes_as_its_list_form_byte_for_byte(version: int) -> None:
    """``produce_topic_data`` gives the request's topic data as a native object the encoder reads
    as it is (each in-place section's length from its batch, not from a view); read as a sequence
    it is the list form. Both encode to the same frame: batches in place and built, two topics."""
    from aioproducer._native import produce_topic_data
    from aioproducer.protocol.produce import SPLICE_THRESHOLD, encode_produce_request

    clock = FakeClock()
    acc, _ = make(clock, batch_size=65536)
    sizes = {("t", 0): SPLICE_THRESHOLD * 2, ("u", 0): 100, ("t", 2): SPLICE_THRESHOLD + 7}  # node 0's partitions
    for (topic, partition), size in sizes.items():
        for i in range(3):
            assert acc.try_append(topic, partition, 1_700_000_000_000 + i, b"k", bytes([i]) * (size // 3), None, None) is not None
    clock.now += 20
    [batches] = acc.drain(Leaders(), [0], 10**6, clock.now).values()
    ordered, native, _, _ = produce_topic_data(batches, clock.now, None)
    listed = [(topic, list(partitions)) for topic, partitions in native]
    assert [(topic, [p for p, _ in parts]) for topic, parts in listed] == [("t", [0, 2]), ("u", [0])]
    assert [isinstance(records, tuple) for _, parts in listed for _, records in parts] == [True, True, False]
    assert len(native) == 2 and native[-1] == native[1] == listed[1] and native[0:5] == listed
    with pytest.raises(IndexError):
        native[2]
    frame = b"".join(encode_produce_request(version, 7, "c", None, 1, 5000, native))
    assert frame == b"".join(encode_produce_request(version, 7, "c", None, 1, 5000, listed))
    assert len(frame) == 4 + int.from_bytes(frame[:4], "big")
