"""The Produce response's native completion (``RecordQueues.complete``, ``native/src/complete.rs``).

A response's written batches complete in one native call; the sender gets back only the
partitions that need a decision, and the producer's counters a sum per response. The oracles:
each record's own report (offset, timestamp, in send order), the buffer pool's free memory, the
accumulator's incomplete set, and ``ProducerMetrics.record_completed`` called batch by batch, as
the sender did before, against the metrics the native call counted into (``RequestCounters``).

The connection's answer (``ProduceAnswer``, read natively from the bytes the generic codec wrote)
and a fake's ``ProduceResponse`` of named tuples go through one matching: a property test holds
them to the same outcome for drawn answers (out of order, missing, repeated, unasked, errors).

Time: about 3 s (no broker; the sender's fake client from ``test_sender.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from broker_model import as_answer
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sender import (
    DUPLICATE_SEQUENCE_NUMBER, INVALID_RECORD, NOT_LEADER_OR_FOLLOWER, Config, FakeClient, FakeClock, in_flight, ok,
    requested, response,
)

from aioproducer.internals.accumulator import AccumulatorConfig, RecordAccumulator
from aioproducer.internals.batch import FutureRecordMetadata
from aioproducer.internals.buffer_pool import BufferPool
from aioproducer.internals.metrics import ProducerMetrics
from aioproducer.internals.sender import Sender
from aioproducer.lifecycle import Lifecycle, State
from aioproducer.network.connection import ProduceToken
from aioproducer.protocol.produce import AnyProduceResponse, ProduceResponse

def make_counting() -> tuple[Sender, RecordAccumulator, FakeClient, FakeClock, list[int]]:
    """A sender as the engine wires it (``on_acknowledged`` and metrics given), recording what it is told."""
    clock = FakeClock()
    lifecycle = Lifecycle(State.RUNNING)
    acc = RecordAccumulator(
        AccumulatorConfig(batch_size=1024, linger_ms=0, retry_backoff_ms=100, delivery_timeout_ms=120_000),
        BufferPool(1 << 20, 1024), None, lambda: None, clock=clock, lifecycle=lifecycle,
    )
    client = FakeClient()
    client.clock = clock
    told: list[int] = []
    sender = Sender(
        client, acc, None, Config(), clock=clock, on_fatal=lifecycle.refuse,
        on_complete=lambda batch: None, on_acknowledged=told.append, metrics=ProducerMetrics(),
    )
    return sender, acc, client, clock, told


def append(acc: RecordAccumulator, topic: str, partition: int, timestamp: int, value: bytes, on_delivery: Any = None) -> FutureRecordMetadata:
    future = acc.try_append(topic, partition, timestamp, None, value, None, on_delivery)
    assert future is not None
    return future


def snapshot(metrics: ProducerMetrics, now: float) -> dict[str, float | int | None]:
    """The metrics' values, an empty statistic's NaN as None (each NaN is its own float: NaN != NaN)."""
    values = metrics.snapshot(
        now, buffer_total=0, buffer_available=0, waiting=0, requests_in_flight=0, metadata_age_ms=0.0,
        connection_count=0, byte_counts=None,
    )
    return {name: None if value != value else value for name, value in values.items()}


async def test_written_batches_complete_natively_the_others_come_back_and_the_counters_add_up() -> None:
    sender, acc, client, clock, told = make_counting()
    reports: list[tuple[Any, BaseException | None]] = []

    def on_delivery(metadata: Any, error: BaseException | None) -> None:
        reports.append((metadata, error))

    # a-0: three records reported through on_delivery (timestamps spread over 5 ms); a-2: two awaited;
    # b-0: one refused with a retriable error; b-2: one written with the broker's append time.
    a0 = [append(acc, "a", 0, ts, b"v%d" % ts, on_delivery) for ts in (10, 12, 15)]
    a2 = [append(acc, "a", 2, 20, b"w"), append(acc, "a", 2, 21, b"w", on_delivery)]
    b0 = append(acc, "b", 0, 30, b"x" * 40)
    b2 = append(acc, "b", 2, 40, b"y", on_delivery)
    batches = {name: futures[0]._batch for name, futures in (("a0", a0), ("a2", a2), ("b0", [b0]), ("b2", [b2]))}
    clock.now += 3
    (sent,) = in_flight(sender, acc, clock)
    clock.now += 4  # the answer comes 4 ms after the request
    answers = {
        ("a", 0): ok("a", 0, 100),
        ("a", 2): ok("a", 2, -1, code=DUPLICATE_SEQUENCE_NUMBER),
        ("b", 0): ok("b", 0, -1, code=NOT_LEADER_OR_FOLLOWER),
        ("b", 2): ok("b", 2, 7, append_time=999),
    }
    order = [(topic, p) for topic, ps in requested(sent) for p in ps]
    # What the sender recorded per batch before this slice: the oracle for the counters.
    oracle = ProducerMetrics()
    oracle.record_request([batches[f"{topic}{p}"] for topic, p in order], clock.now - 4)
    for key in order:
        batch = batches[f"{key[0]}{key[1]}"]
        if key != ("b", 0):
            builder = batch.builder
            oracle.record_completed(key[0], batch.record_count, True, clock.now, batch.created_ms,
                                    builder.max_timestamp - builder.base_timestamp)
    full = acc.pool.total
    retried_holds = batches["b0"].reserved_bytes
    assert retried_holds > 0

    sent.on_response(response(*(answers[key] for key in order)), None)

    # Each record's report: its own offset and timestamp (or the broker's append time), in send order.
    assert sorted((md.topic, md.partition, md.offset, md.timestamp, md.timestamp_type, error) for md, error in reports) == [
        *(("a", 0, 100 + i, ts, 0, None) for i, ts in enumerate((10, 12, 15))),
        ("a", 2, -1, 21, 0, None),  # written before: the offset is unknown
        ("b", 2, 7, 999, 1, None),
    ]
    assert [md.offset for md, _ in reports if md.partition == 0] == [100, 101, 102]
    assert [f.result().offset for f in a2] == [-1, -1]  # written before: the offset is unknown
    assert (b2.result().offset, b2.result().timestamp, b2.result().timestamp_type) == (7, 999, 1)
    assert not b0.done()  # retriable: back in the queue, decided by the sender
    # The counters: one call for the response, the records of the written batches only; the
    # metrics as the request's recording and the per-batch recording made them.
    assert told == [6]
    metrics = sender.metrics
    assert metrics is not None
    snap = snapshot(metrics, clock.now)
    assert (snap["record-send-total"], snap["topic.a.record-send-total"], snap["topic.b.record-send-total"]) == (6, 5, 1)
    latency, expected_sum = metrics.delivery_latency, 0.0
    for key in order:
        if key != ("b", 0):
            batch = batches[f"{key[0]}{key[1]}"]
            first = clock.now - batch.created_ms
            spread = batch.builder.max_timestamp - batch.builder.base_timestamp
            expected_sum += batch.record_count * (first + first - min(spread, first)) / 2
    assert latency.count == 6 and latency.sum_ms == expected_sum
    # the oracle recorded neither the answer's latency nor the retry the sender decided
    decided = ("request-latency", "produce-throttle", "record-retry", "node-")
    assert {k: v for k, v in snapshot(metrics, clock.now).items() if not any(d in k for d in decided)} == {
        k: v for k, v in snapshot(oracle, clock.now).items() if not any(d in k for d in decided)
    }
    # Memory: every written batch's reservation back in the pool, in one deallocation; the retried one still held.
    assert acc.pool.available_memory == full - retried_holds
    assert acc.incomplete_batches() == [batches["b0"]]
    assert all(batches[name].is_done and batches[name].reserved_bytes == 0 for name in ("a0", "a2", "b2"))

    clock.now += 1_000
    (*_, retry) = in_flight(sender, acc, clock)
    assert requested(retry) == [("b", [0])]
    retry.on_response(response(ok("b", 0, 55)), None)
    assert b0.result().offset == 55
    assert acc.pool.available_memory == full and acc.incomplete_batches() == []
    assert told[-1] == 1


async def test_an_on_delivery_that_reads_the_metrics_in_the_middle_of_a_response_sees_them_and_loses_nothing() -> None:
    """The native completion adds each batch to the metrics' counters after its callbacks, and
    holds them only for the add: a callback that takes a snapshot (which folds) mid-response
    sees the batches before its own, and the rest are counted after it."""
    sender, acc, client, clock, told = make_counting()
    metrics = sender.metrics
    assert metrics is not None
    seen: list[float | int | None] = []

    def on_delivery(metadata: Any, error: BaseException | None) -> None:
        seen.append(snapshot(metrics, clock.now)["record-send-total"])

    for topic, partition in (("a", 0), ("a", 2), ("b", 0)):  # one leader: one request
        append(acc, topic, partition, 1, b"v", on_delivery)
    (sent,) = in_flight(sender, acc, clock)
    sent.on_response(response(*(ok(topic, p, 10) for topic, ps in requested(sent) for p in ps)), None)
    assert seen == [0, 1, 2]
    assert snapshot(metrics, clock.now)["record-send-total"] == 3 and told == [3]


def _token(token: Any) -> ProduceToken:
    """What the sender handed the connection for a request: a ``ProduceToken``."""
    assert isinstance(token, ProduceToken)
    return token


class _Unreadable:
    """An answer whose partitions cannot be read: its completion fails, as a bug would make it."""

    throttle_time_ms = 0

    @property
    def partitions(self) -> list[Any]:
        raise RuntimeError("unreadable")


async def test_the_answers_of_a_read_complete_in_one_call_and_a_bug_in_one_leaves_the_next_completed() -> None:
    """The connection hands a read's answers over together (``ProduceToken.on_answers``): each request's
    batches complete as with its own call, the acknowledged records are told once, and an answer whose
    completion fails (a bug: here an answer that is no answer) is reported to the loop while the next
    request's batches still complete and their memory comes back."""
    sender, acc, client, clock, told = make_counting()
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        futures = [append(acc, "a", p, 1, b"v") for p in (0, 1, 2, 3)]  # node 0: 0 and 2; node 1: 1 and 3
        first, second = in_flight(sender, acc, clock)
        tokens = [_token(first.token), _token(second.token)]
        assert tokens[0].on_answers is tokens[1].on_answers
        answers = [response(*(ok(topic, p, 10 * p) for topic, ps in requested(s) for p in ps)) for s in (first, second)]
        tokens[0].on_answers(tokens, answers)
        assert [f.result().offset for f in futures] == [0, 10, 20, 30]
        assert told == [4] and acc.pool.available_memory == acc.pool.total and reported == []

        more = [append(acc, "a", p, 1, b"v") for p in (0, 1)]
        _, _, third, fourth = in_flight(sender, acc, clock)
        tokens = [_token(third.token), _token(fourth.token)]
        held = more[0]._batch.reserved_bytes
        tokens[0].on_answers(tokens, [_Unreadable(), response(ok("a", 1, 40))])  # type: ignore[list-item]
        assert [(type(c["exception"]), str(c["exception"])) for c in reported] == [(RuntimeError, "unreadable")]
        assert not more[0].done() and more[1].result().offset == 40
        assert acc.pool.available_memory == acc.pool.total - held and told == [4, 1]
    finally:
        loop.set_exception_handler(None)


async def test_answers_completed_together_need_one_response_per_request() -> None:
    """A caller's mistake (requests and responses of different lengths) is a ValueError saying so, before anything completes."""
    sender, acc, client, clock, told = make_counting()
    future = append(acc, "a", 0, 1, b"v")
    (sent,) = in_flight(sender, acc, clock)
    with pytest.raises(ValueError, match="one response per request"):
        acc.complete_all([[future._batch]], [], clock.now, DUPLICATE_SEQUENCE_NUMBER)
    assert not future.done() and told == []


async def test_an_answer_for_the_wrong_topic_or_partition_completes_nothing() -> None:
    """Matched by topic and partition: an error for one partition never reaches another's batch."""
    sender, acc, client, clock, told = make_counting()
    a0 = append(acc, "a", 0, 1, b"v")
    b0 = append(acc, "b", 0, 1, b"v")
    (sent,) = in_flight(sender, acc, clock)
    first, second = [(topic, p) for topic, ps in requested(sent) for p in ps]
    # The second partition answered first, with an error; the first one then, written.
    sent.on_response(response(ok(*second, -1, code=NOT_LEADER_OR_FOLLOWER), ok(*first, 10)), None)
    by_key = {("a", 0): a0, ("b", 0): b0}
    assert by_key[first].result().offset == 10
    assert not by_key[second].done()
    assert told == [1]


#: The partitions one request to node 0 may carry (the fake client's leaders: 0 and 2 on node 0).
_NODE0 = [("a", 0), ("a", 2), ("b", 0), ("b", 2)]
_ANSWER = st.tuples(
    st.sampled_from(["a", "b", "c"]), st.integers(0, 2), st.integers(-1, 1_000),
    st.sampled_from([0, 0, 0, NOT_LEADER_OR_FOLLOWER, DUPLICATE_SEQUENCE_NUMBER, INVALID_RECORD]),
)


def _outcome_of(keys: list[tuple[str, int]], answers: list[tuple[str, int, int, int]], native: bool) -> Any:
    """One request for ``keys`` answered with ``answers``: each record's outcome, what the producer was told."""

    async def run() -> Any:
        sender, acc, client, clock, told = make_counting()
        futures = {key: append(acc, *key, 1, b"v") for key in keys}
        (sent,) = in_flight(sender, acc, clock)
        answered = ProduceResponse(7, [ok(t, p, offset, code=code) for t, p, offset, code in answers], 0, [])
        sent.on_response(as_answer(answered) if native else answered, None)
        records = {
            key: None if not f.done() else repr(f.exception()) if f.exception() else tuple(f.result())
            for key, f in futures.items()
        }
        queued = sorted((b.topic, b.partition) for b in acc._incomplete)
        return records, told, acc.pool.available_memory, queued

    return asyncio.run(run())


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.sampled_from(_NODE0), min_size=1, max_size=4, unique=True), answers=st.lists(_ANSWER, max_size=6))
def test_the_connections_answer_and_a_fakes_named_tuples_complete_alike(
    keys: list[tuple[str, int]], answers: list[tuple[str, int, int, int]]
) -> None:
    assert _outcome_of(keys, answers, native=True) == _outcome_of(keys, answers, native=False)


async def test_the_answers_of_a_read_record_their_latencies_and_throttles_as_one_by_one() -> None:
    """A read's answers are recorded in the metrics once per run of one node's answers
    (``ProducerMetrics.record_responses``); the values are those of one ``record_response`` per
    answer: each its own latency and throttle time, overall and for its node."""
    sender, acc, client, clock, told = make_counting()
    append(acc, "a", 0, 1, b"v")  # node 0
    (first,) = in_flight(sender, acc, clock)
    clock.now += 2
    append(acc, "a", 1, 1, b"v")  # node 1
    append(acc, "a", 2, 1, b"v")  # node 0 again
    _, again, other = in_flight(sender, acc, clock)
    clock.now += 3
    sent = [first, again, other]  # handed over in this order: a run of node 0's two, then node 1's
    assert [s.node for s in sent] == [0, 0, 1]
    throttles = [7, 2, 0]
    answers: list[AnyProduceResponse] = [
        as_answer(ProduceResponse(1, [ok(topic, p, 0) for topic, ps in requested(s) for p in ps], throttle, []))
        for s, throttle in zip(sent, throttles)
    ]
    tokens = [_token(s.token) for s in sent]
    tokens[0].on_answers(tokens, answers)
    assert told == [3]
    oracle = ProducerMetrics()
    for latency, node, throttle in zip((5.0, 3.0, 3.0), (0, 0, 1), throttles):
        oracle.record_response(node, latency, throttle, clock.now)
    metrics = sender.metrics
    assert metrics is not None
    keys = ("request-latency", "produce-throttle", "node-")
    ours = {k: v for k, v in snapshot(metrics, clock.now).items() if k.startswith(keys) and ("latency" in k or "throttle" in k)}
    theirs = {k: v for k, v in snapshot(oracle, clock.now).items() if k.startswith(keys) and ("latency" in k or "throttle" in k)}
    assert ours == theirs and ours["node-0.request-latency-max"] == 5.0 and ours["produce-throttle-time-max"] == 7
    assert ours["request-latency-avg"] == pytest.approx(11 / 3) and ours["node-0.request-latency-avg"] == 4.0
    assert ours["produce-throttle-time-avg"] == 3.0


async def test_one_node_s_answers_of_a_read_are_recorded_in_one_call_as_one_by_one() -> None:
    """The common case, a connection's read: one node's answers, summed into one
    ``record_responses``, the same values as one ``record_response`` per answer."""
    sender, acc, client, clock, told = make_counting()
    append(acc, "a", 0, 1, b"v")
    (first,) = in_flight(sender, acc, clock)
    clock.now += 2
    append(acc, "a", 2, 1, b"v")
    _, second = in_flight(sender, acc, clock)
    clock.now += 3
    assert (first.node, second.node) == (0, 0)
    answers: list[AnyProduceResponse] = [
        as_answer(ProduceResponse(1, [ok(topic, p, 0) for topic, ps in requested(s) for p in ps], throttle, []))
        for s, throttle in ((first, 6), (second, 2))
    ]
    tokens = [_token(first.token), _token(second.token)]
    tokens[0].on_answers(tokens, answers)
    oracle = ProducerMetrics()
    oracle.record_response(0, 5.0, 6, clock.now)
    oracle.record_response(0, 3.0, 2, clock.now)
    metrics = sender.metrics
    assert metrics is not None and told == [2]
    wanted = ("request-latency-avg", "request-latency-max", "node-0.request-latency-avg", "node-0.request-latency-max",
              "produce-throttle-time-avg", "produce-throttle-time-max")
    ours, theirs = snapshot(metrics, clock.now), snapshot(oracle, clock.now)
    assert [ours[k] for k in wanted] == [theirs[k] for k in wanted] == [4.0, 5.0, 4.0, 5.0, 4.0, 6]
