"""The idempotent producer against a model broker, through a network the test controls.

The real ``Sender``, ``RecordAccumulator`` and ``TransactionManager`` run pass by
pass (``Sender._loop_once`` with a fake clock and no sleeping); ``broker_model``
applies Kafka's idempotence rules and lets each test decide what happens to
every request: processed and answered, processed with the answer lost,
dropped, or held in flight. Each test ends by checking the partition logs:
every record acknowledged is in its log exactly once, at the offset it was
given, and the log keeps send order.

These are the cases that lose or duplicate records when the sequence
bookkeeping is wrong; ``scripts/mutation_check.py`` plants known bugs in it and
checks that this file fails for each.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest

from aioproducer.errors import InvalidRecordBrokerError, KafkaTimeoutError
from aioproducer.internals.accumulator import AccumulatorConfig, RecordAccumulator
from aioproducer.internals.buffer_pool import BufferPool
from aioproducer.internals.sender import Sender
from aioproducer.internals.transaction_manager import MAX_SEQUENCE, TransactionManager, increment_sequence
from aioproducer.lifecycle import Lifecycle, State
from broker_model import (
    INVALID_PRODUCER_EPOCH,
    MESSAGE_TOO_LARGE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    UNKNOWN_PRODUCER_ID,
    BrokerModel,
    Network,
)

INVALID_RECORD = 87
NOT_LEADER_OR_FOLLOWER = 6


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Config:
    acks: int = -1
    retries: int = 2**31 - 1
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    max_request_size: int = 1 << 20
    metadata_max_age_ms: int = 300_000
    retry_backoff_ms: int = 100


class Harness:
    def __init__(
        self,
        broker: BrokerModel | None = None,
        *,
        nodes: int = 1,
        max_in_flight: int = 5,
        delivery_timeout_ms: int = 120_000,
        batch_size: int = 16384,
        idempotent: bool = True,
    ) -> None:
        self.clock = FakeClock()
        self.broker = broker or BrokerModel()
        self.net = Network(self.broker, nodes, max_in_flight)
        self.tm = TransactionManager() if idempotent else None
        config = AccumulatorConfig(
            batch_size=batch_size,
            linger_ms=0,
            retry_backoff_ms=100,
            delivery_timeout_ms=delivery_timeout_ms,
            guarantee_message_order=max_in_flight == 1,
        )
        #: The test plays the engine: it alone moves the lifecycle, and refuses records on a fatal error.
        self.lifecycle = Lifecycle(State.RUNNING)
        self.pool = BufferPool(1 << 22, batch_size, self.lifecycle)
        self.acc = RecordAccumulator(config, self.pool, self.tm, lambda: None, clock=self.clock, lifecycle=self.lifecycle)
        self.sender = Sender(
            self.net, self.acc, self.tm, Config(delivery_timeout_ms=delivery_timeout_ms), clock=self.clock,
            on_fatal=self.lifecycle.refuse,
        )
        self.delay = 0.0
        self.sender._sleep = self._record_delay  # type: ignore[method-assign]
        self.sent: dict[tuple[str, int], list[tuple[bytes, Any]]] = defaultdict(list)

    async def _record_delay(self, delay_ms: float) -> None:
        self.delay = delay_ms

    def send(self, partition: int, count: int = 1, topic: str = "t", size: int = 20) -> list[Any]:
        """Append ``count`` records (one batch unless it fills); values are unique and ordered."""
        futures = []
        for _ in range(count):
            sent = self.sent[(topic, partition)]
            value = f"{topic}-{partition}-{len(sent)}".encode().ljust(size, b".")
            future = self.acc.try_append(topic, partition, 1_700_000_000_000 + len(sent), None, value, None, None)
            assert future is not None
            sent.append((value, future))
            futures.append(future)
        return futures

    def futures(self) -> list[Any]:
        return [f for sent in self.sent.values() for _, f in sent]

    async def step(self) -> None:
        """One sender pass (producer id, epoch bump, ready, drain, expire, send), and its InitProducerId."""
        await self.sender._loop_once()
        init = self.sender._txn_task
        if init is not None:
            await init
        if self.sender._wake.is_set():  # woken (by the InitProducerId's end): the real loop would not sleep
            self.sender._wake.clear()
            self.delay = 0.0

    async def settle(self, limit: int = 3000) -> None:
        """Run passes, the network acting on every request, until every record is done."""
        for _ in range(limit):
            await self.step()
            if self.net.act():
                continue
            if all(f.done() for f in self.futures()):
                return
            assert not self.net.held, "held requests never finish by themselves"
            assert self.delay != float("inf"), "stuck: records pending and nothing due"
            self.clock.now += max(self.delay, 1.0)
        raise AssertionError("the sender did not finish within the pass limit")

    async def baseline(self, *partitions: int) -> None:
        """A first acknowledged batch per partition: the broker holds the producer's state."""
        for partition in partitions:
            self.send(partition)
        await self.settle()

    def check_logs(self) -> None:
        """Acknowledged records are in the log once, at their offset; the log keeps send order."""
        for (topic, partition), sent in self.sent.items():
            log = self.broker.values(topic, partition)
            assert len(log) == len(set(log)), f"{topic}-{partition}: a record was written twice: {log}"
            order = [value for value, _ in sent]
            positions = [order.index(v) for v in log if v is not None]
            assert positions == sorted(positions), f"{topic}-{partition}: log out of send order: {log}"
            for value, future in sent:
                assert future.done()
                if future.exception() is None:
                    offset = future.result().offset
                    assert 0 <= offset < len(log) and log[offset] == value, (
                        f"{value!r} acknowledged at offset {offset}, which holds "
                        f"{log[offset] if 0 <= offset < len(log) else 'nothing'}"
                    )


def written_headers(h: Harness, partition: int) -> list[tuple[int, int]]:
    """(epoch, sequence) of every record written to t-``partition``."""
    return [(epoch, seq) for _, _, epoch, seq, _ in h.broker.log("t", partition).records]


# ---------------------------------------------------------------- A.1 unknown outcome, then expiry
async def test_a_batch_written_but_unanswered_that_expires_never_lends_its_sequence_to_the_next() -> None:
    h = Harness(delivery_timeout_ms=2_000)
    await h.baseline(0)
    [a] = h.send(0)
    h.net.plan(0, "lose")  # written, answer lost
    await h.step()
    assert h.net.act()
    h.net.down.add(0)  # then the broker stays unreachable until the batch expires
    await h.settle()
    assert isinstance(a.exception(), KafkaTimeoutError)
    h.net.down.clear()
    [b] = h.send(0)
    await h.settle()
    assert b.exception() is None
    assert h.broker.values("t", 0)[1:] == [h.sent[("t", 0)][1][0], h.sent[("t", 0)][2][0]]
    h.check_logs()


async def test_an_expired_batch_whose_successor_was_acknowledged_needs_no_new_epoch() -> None:
    """The successor's acknowledgement proves the broker wrote the expired batch: sequences go on."""
    h = Harness(delivery_timeout_ms=2_000)
    await h.baseline(0)
    [a] = h.send(0)
    h.net.plan(0, "lose")
    await h.step()
    h.net.act()  # a: written, answer lost; retried after the backoff
    [b] = h.send(0)
    h.net.plan(0, "lose", "deliver")  # a's retry is lost too, b goes through
    await h.settle()
    assert a.exception() is None or isinstance(a.exception(), KafkaTimeoutError)
    assert b.exception() is None
    assert h.tm is not None and h.tm.producer_epoch == 0
    h.check_logs()


# ---------------------------------------------------------------- A.2 a bump renumbers only its partition
async def test_an_epoch_bump_for_one_partition_never_renumbers_another_partitions_retry() -> None:
    h = Harness(BrokerModel(unknown_producer_id_errors=True), nodes=2)
    await h.baseline(0, 1)
    h.broker.forget_producers("t", 1)  # retention removed partition 1's batches
    [a] = h.send(0)
    [c] = h.send(1)
    h.net.plan(0, "lose")  # partition 0's batch is written, its answer lost: it will be retried
    await h.step()
    assert h.net.act()
    assert ("t", 1, UNKNOWN_PRODUCER_ID) in h.broker.errors
    await h.settle()
    assert a.exception() is None and c.exception() is None
    assert [e for e, _ in written_headers(h, 0)] == [0, 0]  # partition 0 stayed on its epoch
    assert written_headers(h, 1)[-1] == (1, 0)  # partition 1 started epoch 1 at sequence 0
    h.check_logs()


# ---------------------------------------------------------------- A.3 split pieces are closed
async def test_pieces_of_a_split_batch_take_no_new_records_and_keep_memory_counted() -> None:
    h = Harness(BrokerModel(max_message_bytes=400))
    await h.baseline(0)
    before = h.pool.available_memory
    h.send(0, count=10, size=40)  # one batch of ~560 bytes: too large for the broker
    await h.step()
    h.net.plan(0, "deliver", "hold")  # the refusal, then the first piece is held in flight
    h.net.act()
    assert ("t", 0, MESSAGE_TOO_LARGE) in h.broker.errors
    h.send(0, count=10, size=40)  # while the pieces wait: new batches, numbered after them
    pieces = [b for b in h.acc.incomplete_batches() if b.has_sequence]
    assert sum(b.record_count for b in pieces) == 10, "a record sent after the split went into a piece"
    for _ in range(3):
        await h.step()
        h.net.act()
    assert h.net.held
    in_use = before - h.pool.available_memory
    queued = sum(b.estimated_size() for b in h.acc.incomplete_batches())
    assert in_use >= queued > 0, "the pieces' records must stay counted against buffer.memory"
    h.net.release()
    await h.settle()
    assert all(f.exception() is None for f in h.futures())
    assert {code for _, _, code in h.broker.errors} == {MESSAGE_TOO_LARGE}
    assert h.pool.available_memory == h.pool.total
    timestamps = [f.result().timestamp for _, f in h.sent[("t", 0)]]
    assert timestamps == sorted(timestamps) and len(set(timestamps)) == len(timestamps)
    h.check_logs()


# ---------------------------------------------------------------- A.4 OUT_OF_ORDER / UNKNOWN_PRODUCER_ID
async def test_out_of_order_on_the_next_batch_in_line_is_retried_under_a_new_epoch() -> None:
    h = Harness()
    await h.baseline(0)
    h.broker.inject("t", 0, OUT_OF_ORDER_SEQUENCE_NUMBER)  # a real gap: the broker lost a batch
    [a] = h.send(0)
    await h.settle()
    assert a.exception() is None
    assert written_headers(h, 0)[-1] == (1, 0)
    h.check_logs()


async def test_unknown_producer_id_without_a_log_start_offset_is_retried_without_a_bump() -> None:
    h = Harness()
    await h.baseline(0)
    h.broker.inject("t", 0, UNKNOWN_PRODUCER_ID, log_start_offset=-1)  # the partition is moving
    [a] = h.send(0)
    await h.settle()
    assert a.exception() is None
    assert written_headers(h, 0)[-1] == (0, 1)
    h.check_logs()


async def test_unknown_producer_id_after_retention_is_retried_under_a_new_epoch() -> None:
    h = Harness(BrokerModel(unknown_producer_id_errors=True))
    await h.baseline(0)
    h.broker.forget_producers("t", 0)
    h.send(0, count=2)
    await h.settle()
    assert all(f.exception() is None for f in h.futures())
    assert written_headers(h, 0)[-2:] == [(1, 0), (1, 1)]
    h.check_logs()


async def test_a_batch_refused_for_good_makes_its_partition_start_a_new_epoch_for_the_next() -> None:
    h = Harness()
    await h.baseline(0)
    h.broker.inject("t", 0, INVALID_RECORD)
    [a] = h.send(0)
    await h.step()  # a in flight
    [b] = h.send(0)
    await h.step()  # b in flight behind it, numbered after it
    await h.settle()
    assert isinstance(a.exception(), InvalidRecordBrokerError)
    assert b.exception() is None
    assert written_headers(h, 0)[-1] == (1, 0)
    h.check_logs()


async def test_invalid_producer_epoch_fails_the_batch_and_the_next_starts_a_new_epoch() -> None:
    h = Harness()
    await h.baseline(0)
    h.broker.inject("t", 0, INVALID_PRODUCER_EPOCH)
    [a] = h.send(0)
    await h.settle()
    [b] = h.send(0)
    await h.settle()
    assert a.exception() is not None and b.exception() is None
    assert written_headers(h, 0)[-1] == (1, 0)
    h.check_logs()


# ---------------------------------------------------------------- A.5 a bump pauses only its partition
async def test_an_epoch_bump_does_not_wait_for_other_partitions_requests() -> None:
    h = Harness(BrokerModel(unknown_producer_id_errors=True), nodes=2)
    await h.baseline(0, 1)
    h.broker.forget_producers("t", 1)
    [a] = h.send(0)
    [c] = h.send(1)
    h.net.plan(0, "hold")  # partition 0's request stays in flight throughout
    for _ in range(50):
        await h.step()
        h.net.act()
        if c.done():
            break
        h.clock.now += min(max(h.delay, 1.0), 100.0)
    assert c.done() and c.exception() is None, "partition 1 waited for partition 0's request"
    assert not a.done()
    h.net.release()
    await h.settle()
    h.check_logs()


# ---------------------------------------------------------------- A.6 ordering with one request in flight
async def test_an_expiring_queued_batch_does_not_let_a_later_one_overtake_the_one_in_flight() -> None:
    h = Harness(nodes=2, max_in_flight=1, delivery_timeout_ms=1_000, idempotent=False)
    [b1] = h.send(0)
    h.net.plan(0, "hold")
    await h.step()
    h.net.act()
    assert h.net.held  # b1 in flight; the partition is muted
    h.clock.now += 10
    [b2] = h.send(0)  # queued behind it
    h.net.leaders.moved[("t", 0)] = 1  # the leader moves; node 1 has room
    h.clock.now += 1_000
    await h.step()
    assert isinstance(b2.exception(), KafkaTimeoutError)  # b2 expired in the queue
    [b3] = h.send(0)
    for _ in range(5):
        await h.step()
        assert not any(("t", 0) in r.partitions() for r in h.net.requests), "b3 overtook b1"
        h.clock.now += min(max(h.delay, 1.0), 100.0)
    assert not b3.done()
    h.broker.inject("t", 0, NOT_LEADER_OR_FOLLOWER)
    h.net.release()  # b1: not the leader any more; it is retried on the new leader before b3
    await h.settle()
    h.check_logs()


# ---------------------------------------------------------------- sequence wrap-around
def test_sequences_wrap_to_zero_after_int32_max() -> None:
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(MAX_SEQUENCE - 1, 1) == MAX_SEQUENCE
    assert increment_sequence(MAX_SEQUENCE - 1, 3) == 1
    assert increment_sequence(5, 3) == 8


async def test_batches_across_the_sequence_wrap_are_taken_in_order_without_a_bump() -> None:
    h = Harness()
    await h.step()  # producer id
    assert h.tm is not None
    h.tm._entry("t", 0).next_sequence = MAX_SEQUENCE - 2
    for _ in range(4):
        h.send(0, count=2)
        await h.settle()
    assert h.broker.errors == []
    assert [seq for _, seq in written_headers(h, 0)] == [MAX_SEQUENCE - 2, MAX_SEQUENCE - 1, MAX_SEQUENCE, 0, 1, 2, 3, 4]
    h.check_logs()


@pytest.mark.parametrize("losses", [1, 3])
async def test_pipelined_batches_with_lost_answers_are_written_once_in_order(losses: int) -> None:
    """Five requests in flight, answers lost mid-way: retries go out in sequence order, duplicates are acked."""
    h = Harness()
    await h.baseline(0)
    for _ in range(6):
        h.send(0, count=3)
        await h.step()
    for _ in range(losses):
        h.net.plan(0, "deliver", "lose")
    await h.settle()
    assert all(f.exception() is None for f in h.futures())
    assert h.tm is not None and h.tm.producer_epoch == 0
    h.check_logs()


# ---------------------------------------------------------------- item 14: InitProducerId that keeps failing
COORDINATOR_NOT_AVAILABLE = 15


async def test_records_expire_on_time_while_init_producer_id_keeps_failing_and_each_broker_is_asked() -> None:
    h = Harness(nodes=3, delivery_timeout_ms=2_000)
    h.broker.init_errors.extend([COORDINATOR_NOT_AVAILABLE] * 1000)
    [a] = h.send(0)
    created = h.clock.now
    await h.settle()
    assert isinstance(a.exception(), KafkaTimeoutError)
    assert "COORDINATOR_NOT_AVAILABLE" in str(a.exception())  # the cause is named
    assert h.clock.now - created < 2_000 + 1_000  # within a backoff of the deadline
    assert set(h.net.init_nodes) == {0, 1, 2}
    h.broker.init_errors.clear()
    [b] = h.send(0)
    await h.settle()
    assert b.exception() is None
    h.check_logs()


async def test_a_graceful_close_ends_while_init_producer_id_keeps_failing() -> None:
    h = Harness(delivery_timeout_ms=2_000)
    h.broker.init_errors.extend([COORDINATOR_NOT_AVAILABLE] * 1000)
    [a] = h.send(0)

    async def advance(delay_ms: float) -> None:
        init = h.sender._txn_task
        if init is not None and not init.done():
            await init
        h.clock.now += min(max(delay_ms, 1.0), 500.0)

    h.sender._sleep = advance  # type: ignore[method-assign]
    h.lifecycle.close()  # as the engine's close() does
    h.sender.wakeup()
    await asyncio.wait_for(h.sender.run(), timeout=10)
    assert isinstance(a.exception(), KafkaTimeoutError)


# ---------------------------------------------------------------- item 17: a batch in flight fails at its deadline
async def test_a_batch_in_flight_fails_at_its_delivery_deadline_and_its_late_answer_still_counts() -> None:
    h = Harness(delivery_timeout_ms=2_000)
    await h.baseline(0)
    [a] = h.send(0)
    deadline = h.clock.now + 2_000
    h.net.plan(0, "hold")
    await h.step()
    h.net.act()
    assert h.net.held
    await h.step()
    assert h.delay <= 2_000  # the sender wakes for the deadline, not for request.timeout.ms
    h.clock.now = deadline
    await h.step()
    error = a.exception()
    assert isinstance(error, KafkaTimeoutError) and "still in flight" in str(error)
    [b] = h.send(0)
    await h.step()
    h.net.act()  # b goes out behind it, numbered after it
    h.net.release()  # the broker did write a: its acknowledgement still counts
    await h.settle()
    assert b.exception() is None
    assert written_headers(h, 0) == [(0, 0), (0, 1), (0, 2)]  # no new epoch was needed
    h.check_logs()


async def test_with_one_request_in_flight_an_expired_batch_keeps_its_partition_muted_until_its_answer() -> None:
    h = Harness(nodes=2, max_in_flight=1, delivery_timeout_ms=1_000, idempotent=False)
    [b1] = h.send(0)
    h.net.plan(0, "hold")
    await h.step()
    h.net.act()
    h.net.leaders.moved[("t", 0)] = 1
    h.clock.now += 1_000
    await h.step()
    assert isinstance(b1.exception(), KafkaTimeoutError)
    [b2] = h.send(0)
    await h.step()
    assert not h.net.requests, "b2 went out while b1's request was still in flight"
    h.net.release()
    await h.settle()
    assert b2.exception() is None
    h.check_logs()
