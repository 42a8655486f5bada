"""FakeProducer: the real send path with records landing in memory, and its parity with ``Producer``.

The first part checks each behaviour of the fake on its own (no broker). The last part runs
the same calls with the same bad inputs on ``FakeProducer`` and on a real ``Producer`` against
librdkafka's mock cluster, and requires the same exception class from both: the fake cannot
drift from the producer it stands in for.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp.web
import fastapi
import httpx
import pyarrow as pa
import pytest

from aioproducer import (
    IllegalStateError,
    InvalidRecordError,
    KafkaTimeoutError,
    Producer,
    ProducerClosedError,
    ProducerRecord,
    RecordMetadata,
    SerializationError,
    int_serializer,
    json_serializer,
)
from aioproducer.errors import TransactionAbortedError
from aioproducer.partitioner import partition_for_key
from aioproducer.testing import FakeProducer, FakeRecord, MockCluster


class Recorder:
    """An interceptor that tags each record and keeps every acknowledgement."""

    def __init__(self) -> None:
        self.acks: list[tuple[RecordMetadata | None, BaseException | None]] = []

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        return dataclasses.replace(record, headers=(*record.headers, ("seen", b"1")))

    def on_acknowledgement(self, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        self.acks.append((metadata, error))


async def settle() -> None:
    """Let every task that is ready run (a bounded number of loop turns, no clock)."""
    for _ in range(20):
        await asyncio.sleep(0)


def takes_a_producer(producer: Producer) -> Producer:
    """mypy checks this file: a FakeProducer must be accepted where a Producer is expected."""
    return producer


# ------------------------------------------------------------------ the send path
async def test_a_fake_is_a_producer() -> None:
    fake = FakeProducer()
    assert isinstance(takes_a_producer(fake), Producer)


async def test_records_go_through_serializers_and_interceptors_and_are_stored_as_bytes() -> None:
    recorder = Recorder()
    async with FakeProducer(
        topics={"orders": 6}, key_serializer=int_serializer, value_serializer=json_serializer, interceptors=[recorder]
    ) as fake:
        metadata = await (await fake.send("orders", {"id": 1}, key=7, headers={"h": b"x"}, timestamp_ms=1234))
    [record] = fake.history()
    assert record == FakeRecord(
        "orders", partition_for_key(b"\x00\x00\x00\x07", 6), 0, b"\x00\x00\x00\x07", b'{"id":1}',
        (("h", b"x"), ("seen", b"1")), 1234,
    )
    assert recorder.acks == [(metadata, None)]
    assert (metadata.partition, metadata.offset) == (record.partition, 0)


async def test_an_async_serializer_that_adds_headers_is_awaited() -> None:
    class Framing:
        async def serialize(self, topic: str, headers: list[tuple[str, bytes | None]], data: Any) -> bytes:
            headers.append(("schema", b"7"))
            return b"\x00" + str(data).encode()

    async with FakeProducer(value_serializer=Framing()) as fake:
        await fake.send("t", 42)
    assert [(r.value, r.headers) for r in fake.history()] == [(b"\x0042", (("schema", b"7"),))]


async def test_partitions_come_from_the_real_partitioner() -> None:
    def last(topic: str, key: Any, key_bytes: Any, value: Any, value_bytes: Any, metadata: Any) -> int:
        return len(metadata.partitions_for(topic)) - 1

    async with FakeProducer(topics={"orders": 6}) as fake:
        await fake.send("orders", b"v", key=b"k1")
        await fake.send("orders", b"v", partition=4)
    async with FakeProducer(topics={"orders": 6}, partitioner=last) as custom:
        await custom.send("orders", b"v", key=b"k1")
    assert [r.partition for r in fake.history()] == [partition_for_key(b"k1", 6), 4]
    assert [r.partition for r in custom.history()] == [5]


async def test_send_many_goes_through_the_same_path() -> None:
    async with FakeProducer(value_serializer=json_serializer) as fake:
        futures = await fake.send_many("t", [1, 2, 3], keys=[b"a", None, b"c"])
    assert all(f.done() for f in futures)
    assert [(r.key, r.value, r.offset) for r in fake.history()] == [(b"a", b"1", 0), (None, b"2", 1), (b"c", b"3", 2)]


async def test_send_many_without_keys_completes_every_record() -> None:
    async with FakeProducer(autocomplete=False) as fake:
        futures = await fake.send_many("t", [b"1", b"2", b"3"])
        assert fake.held() == 3
        assert fake.complete_next(3) == 3
    assert all(f.done() for f in futures)
    assert [(r.value, r.offset) for r in fake.history()] == [(b"1", 0), (b"2", 1), (b"3", 2)]


# ------------------------------------------------------------------ topics
async def test_a_topic_not_given_is_created_with_default_partitions() -> None:
    async with FakeProducer(topics={"orders": 6}, default_partitions=3) as fake:
        assert await fake.partitions_for("orders") == list(range(6))
        assert await fake.partitions_for("new") == [0, 1, 2]


async def test_strict_topics_refuses_an_unknown_topic_at_once_as_after_max_block_ms() -> None:
    # max.block.ms of an hour: a fake that waited would hit the test's timeout instead of raising.
    async with FakeProducer(topics={"orders": 1}, strict_topics=True, max_block_ms=3_600_000) as fake:
        with pytest.raises(KafkaTimeoutError, match="not present in metadata"):
            await fake.send("unknown", b"v")
        await fake.send("orders", b"v")
    assert [r.topic for r in fake.history()] == ["orders"]


# ------------------------------------------------------------------ history
async def test_autocomplete_completes_each_record_before_send_returns_with_offsets_per_partition() -> None:
    seen: list[tuple[RecordMetadata | None, BaseException | None]] = []
    async with FakeProducer(topics={"a": 2}) as fake:
        assert fake.autocomplete
        futures = [
            await fake.send("a", b"0", partition=0, on_delivery=lambda m, e: seen.append((m, e))),
            await fake.send("a", b"1", partition=1),
            await fake.send("a", b"2", partition=0),
        ]
        assert all(f.done() for f in futures)
    assert [(r.partition, r.offset) for r in fake.history()] == [(0, 0), (1, 0), (0, 1)]
    assert seen == [(futures[0].result(), None)]


async def test_history_per_topic_and_clear() -> None:
    async with FakeProducer() as fake:
        await fake.send("a", b"1")
        await fake.send("b", b"2")
        await fake.send("a", b"3")
        assert [r.value for r in fake.history("a")] == [b"1", b"3"]
        assert [r.value for r in fake.history()] == [b"1", b"2", b"3"]
        fake.clear()
        assert fake.history() == []
        await fake.send("a", b"4")
    assert [(r.value, r.offset) for r in fake.history("a")] == [(b"4", 2)]  # offsets go on: the log was not truncated


# ------------------------------------------------------------------ held delivery
async def test_held_records_wait_for_complete_next_oldest_first() -> None:
    async with FakeProducer(autocomplete=False) as fake:
        first = await fake.send("t", b"1")
        second = await fake.send("t", b"2")
        assert (first.done(), second.done(), fake.held(), fake.history()) == (False, False, 2, [])
        assert fake.complete_next() == 1
        assert first.done() and not second.done()
        assert fake.complete_next(5) == 1  # only one was left
        assert fake.complete_next() == 0
        assert [(await first).offset, (await second).offset] == [0, 1]
    assert [r.value for r in fake.history()] == [b"1", b"2"]


async def test_fail_next_fails_the_oldest_with_the_error_everywhere_the_real_producer_reports_it() -> None:
    recorder = Recorder()
    seen: list[BaseException | None] = []
    error = ConnectionResetError("the broker went away")
    async with FakeProducer(autocomplete=False, interceptors=[recorder]) as fake:
        failed = await fake.send("t", b"1", on_delivery=lambda m, e: seen.append(e))
        kept = await fake.send("t", b"2")
        assert fake.fail_next(error) == 1
        with pytest.raises(ConnectionResetError):
            await failed
        assert fake.complete_next() == 1
        await kept
        metrics = fake.metrics()
    assert seen == [error]
    assert recorder.acks[0] == (None, error)
    assert [(r.value, r.offset) for r in fake.history()] == [(b"2", 0)]  # a failed record takes no offset
    assert (metrics["records_sent"], metrics["records_failed"], metrics["last_error"]) == (1, 1, error)


async def test_flush_waits_for_held_records_and_times_out_as_the_real_one() -> None:
    async with FakeProducer(autocomplete=False) as fake:
        future = await fake.send("t", b"1")
        with pytest.raises(KafkaTimeoutError):
            await fake.flush(timeout=0)
        flushing = asyncio.create_task(fake.flush())
        await settle()
        assert not flushing.done()
        fake.complete_next()
        await flushing
        assert future.done()
        await fake.flush(timeout=0)  # nothing held: done at once


async def test_held_records_hold_buffer_memory_as_records_in_flight_do() -> None:
    # max.block.ms=0: a send that must wait for memory raises at once, as the real one does.
    async with FakeProducer(autocomplete=False, buffer_memory=4096, batch_size=1024, max_block_ms=0) as fake:
        for _ in range(4):  # one batch per record, each reserving batch.size
            await fake.send("t", b"x")
        with pytest.raises(KafkaTimeoutError, match="buffer.memory"):
            await fake.send("t", b"x")
        fake.complete_next()
        await fake.send("t", b"y")
        assert fake.held() == 4
        fake.complete_next(4)


async def test_close_fails_held_records_as_the_real_close_and_refuses_later_sends() -> None:
    fake = FakeProducer(autocomplete=False)
    await fake.start()
    future = await fake.send("t", b"1")
    await fake.close()
    assert future.done()  # failed by close(), not left pending
    with pytest.raises(ProducerClosedError):
        await future
    with pytest.raises(ProducerClosedError):
        await fake.send("t", b"2")
    assert fake.history() == [] and fake.held() == 0


async def test_metrics_have_the_real_producers_keys_and_count_what_was_sent() -> None:
    real_keys = set(Producer(bootstrap_servers="localhost:9092").metrics())
    async with FakeProducer() as fake:
        await fake.send("t", b"1")
        await fake.send("t", b"2")
        metrics = fake.metrics()
    assert real_keys <= set(metrics)
    assert (metrics["records_sent"], metrics["record-send-total"], metrics["topic.t.record-send-total"]) == (2, 2, 2)


# ------------------------------------------------------------------ transactions
async def test_a_committed_transaction_is_in_history_an_aborted_one_in_aborted_history() -> None:
    async with FakeProducer(transactional_id="tx") as fake:
        async with fake.transaction():
            await fake.send("t", b"committed")
            assert fake.history() == []  # read_committed sees nothing before the commit
        fake.begin_transaction()
        await fake.send("t", b"aborted")
        await fake.abort_transaction()
        with pytest.raises(RuntimeError, match="boom"):
            async with fake.transaction():
                await fake.send("t", b"aborted too")
                raise RuntimeError("boom")
    assert [r.value for r in fake.history()] == [b"committed"]
    assert [r.value for r in fake.aborted_history("t")] == [b"aborted", b"aborted too"]


async def test_transaction_state_errors_are_the_real_ones() -> None:
    async with FakeProducer(transactional_id="tx") as fake:
        with pytest.raises(IllegalStateError):
            await fake.send("t", b"outside")
        with pytest.raises(IllegalStateError):
            await fake.commit_transaction()
        fake.begin_transaction()
        with pytest.raises(IllegalStateError):
            fake.begin_transaction()


async def test_offsets_sent_to_a_transaction_are_kept_once_it_commits() -> None:
    async with FakeProducer(transactional_id="tx") as fake:
        async with fake.transaction():
            await fake.send("out", b"1")
            await fake.send_offsets_to_transaction({("in", 0): 42}, "group")
        fake.begin_transaction()
        await fake.send_offsets_to_transaction({("in", 0): 43}, "group")
        await fake.abort_transaction()
        committed = await fake.committed_offsets("group", [("in", 0), ("in", 1)])
    assert fake.consumer_group_offsets_history() == [{"group": {("in", 0): 42}}]
    assert committed == {("in", 0): 42, ("in", 1): None}


async def test_commit_waits_for_held_records_and_abort_fails_them() -> None:
    # max.block.ms bounds an abort that waited for the held record: a failure, not a hang.
    async with FakeProducer(transactional_id="tx", autocomplete=False, max_block_ms=2000) as fake:
        fake.begin_transaction()
        await fake.send("t", b"1")
        committing = asyncio.create_task(fake.commit_transaction())
        await settle()
        assert not committing.done()
        fake.complete_next()
        await committing
        fake.begin_transaction()
        held = await fake.send("t", b"2")
        await fake.abort_transaction()
        assert held.done()
        with pytest.raises(TransactionAbortedError):
            await held
    assert [r.value for r in fake.history()] == [b"1"]
    assert fake.aborted_history() == []  # the aborted record was never acknowledged


async def test_a_record_failed_in_a_transaction_makes_commit_raise_and_abort_recover() -> None:
    async with FakeProducer(transactional_id="tx", autocomplete=False) as fake:
        fake.begin_transaction()
        await fake.send("t", b"1")
        fake.fail_next(ConnectionResetError("lost"))
        with pytest.raises(IllegalStateError, match="must be aborted.*lost"):  # the real state machine's words
            await fake.commit_transaction()
        await fake.abort_transaction()
        async with fake.transaction():
            await fake.send("t", b"2")
            fake.complete_next()
    assert [r.value for r in fake.history()] == [b"2"]


async def test_a_prepared_transaction_is_committed_by_complete_transaction() -> None:
    async with FakeProducer(transactional_id="tx") as fake:
        fake.begin_transaction()
        await fake.send("t", b"1")
        prepared = await fake.prepare_transaction()
        assert fake.history() == []
        await fake.complete_transaction(prepared)
        async with fake.transaction():  # ready for the next one
            await fake.send("t", b"2")
    assert [r.value for r in fake.history()] == [b"1", b"2"]


# ------------------------------------------------------------------ arguments of the fake itself
@pytest.mark.parametrize(
    ("kwargs", "error", "names"),
    [
        ({"topics": ["orders"]}, TypeError, "topics"),
        ({"topics": {"orders": 0}}, ValueError, "topics"),
        ({"topics": {"": 1}}, TypeError, "topic name"),
        ({"default_partitions": 0}, ValueError, "default_partitions"),
        ({"autocomplete": 1}, TypeError, "autocomplete"),
        ({"strict_topics": "yes"}, TypeError, "strict_topics"),
    ],
)
def test_bad_arguments_of_the_fake_are_named(kwargs: dict[str, Any], error: type[Exception], names: str) -> None:
    with pytest.raises(error, match=names):
        FakeProducer(**kwargs)


async def test_bad_arguments_of_complete_next_and_fail_next_are_named() -> None:
    async with FakeProducer(autocomplete=False) as fake:
        with pytest.raises(ValueError, match="complete_next"):
            fake.complete_next(0)
        with pytest.raises(TypeError, match="fail_next"):
            fake.fail_next("not an exception")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="fail_next"):
            fake.fail_next(RuntimeError(), n=-1)


# ------------------------------------------------------------------ web apps
async def test_fastapi_dependency_overrides_in_one_line() -> None:
    app = fastapi.FastAPI()

    def get_producer() -> Producer:
        raise AssertionError("the real producer must not be built in this test")

    @app.post("/orders")
    async def create(order: dict[str, Any], producer: Producer = fastapi.Depends(get_producer)) -> dict[str, int]:
        metadata = await producer.send_and_wait("orders", json.dumps(order).encode())
        return {"offset": metadata.offset}

    async with FakeProducer() as fake:
        app.dependency_overrides[get_producer] = lambda: fake
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            response = await client.post("/orders", json={"id": 1})
    assert response.json() == {"offset": 0}
    assert [r.value for r in fake.history("orders")] == [b'{"id": 1}']


async def test_aiohttp_app_in_one_line() -> None:
    producer_key = aiohttp.web.AppKey("producer", Producer)

    async def create(request: aiohttp.web.Request) -> aiohttp.web.Response:
        metadata = await request.app[producer_key].send_and_wait("orders", await request.read())
        return aiohttp.web.json_response({"offset": metadata.offset})

    app = aiohttp.web.Application()
    app.router.add_post("/orders", create)
    async with FakeProducer() as fake:
        app[producer_key] = fake
        runner = aiohttp.web.AppRunner(app)
        await runner.setup()
        try:
            site = aiohttp.web.SockSite(runner, _listening_socket())
            await site.start()
            async with aiohttp.ClientSession() as session:
                async with session.post(f"http://{site.name.split('//')[1]}/orders", data=b"o1") as response:
                    body = await response.json()
        finally:
            await runner.cleanup()
    assert body == {"offset": 0}
    assert [r.value for r in fake.history("orders")] == [b"o1"]


def _listening_socket() -> Any:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


# ------------------------------------------------------------------ send_arrow


def _arrow_rows(n: int) -> pa.Table:
    return pa.table({
        "key": [b"k%d" % (i % 3) for i in range(n)],
        "value": [None if i == 4 else b"v%d" % i for i in range(n)],
        "headers": pa.array([[{"key": "h", "value": b"%d" % i}] for i in range(n)],
                            pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        "timestamp": pa.array([1_700_000_000_000 + i for i in range(n)], pa.int64()),
    })


async def test_send_arrow_rows_land_in_history_as_sent_with_each_rows_offset() -> None:
    async with FakeProducer(topics={"orders": 6}) as fake:
        delivery = await fake.send_arrow("orders", _arrow_rows(9), row_outcomes=True)
        report = await delivery
    assert (report.rows, report.delivered, report.failed) == (9, 9, 0)
    by_row = sorted(fake.history(), key=lambda r: int(r.timestamp))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in by_row] == [
        (b"k%d" % (i % 3), None if i == 4 else b"v%d" % i, (("h", b"%d" % i),), 1_700_000_000_000 + i) for i in range(9)
    ]
    assert [r.partition for r in by_row] == [partition_for_key(b"k%d" % (i % 3), 6) for i in range(9)]
    assert report.offsets is not None and list(report.offsets) == [r.offset for r in by_row]
    for partition in {r.partition for r in by_row}:  # offsets count up per partition from 0
        assert [r.offset for r in fake.history() if r.partition == partition] == list(range(
            sum(1 for r in by_row if r.partition == partition)))


async def test_send_arrow_rows_are_held_per_batch_and_failed_rows_are_reported() -> None:
    async with FakeProducer(topics={"orders": 1}, autocomplete=False) as fake:
        first = await fake.send_arrow("orders", _arrow_rows(5))
        second = await fake.send_arrow("orders", _arrow_rows(3))
        assert fake.held() == 8
        assert fake.complete_next() == 5  # the first call's batch, whole
        assert fake.fail_next(InvalidRecordError("refused")) == 3
        done, failed = await first, await second
    assert (done.delivered, failed.failed) == (5, 3)
    assert isinstance(failed.errors[0][1], InvalidRecordError)
    assert [r.offset for r in fake.history()] == [0, 1, 2, 3, 4]


async def test_send_arrow_in_an_aborted_transaction_goes_to_the_aborted_history() -> None:
    async with FakeProducer(topics={"orders": 2}, transactional_id="arrow-tx") as fake:
        fake.begin_transaction()
        await (await fake.send_arrow("orders", _arrow_rows(4)))
        await fake.abort_transaction()
    assert fake.history() == [] and len(fake.aborted_history()) == 4


# ------------------------------------------------------------------ parity with the real producer
Action = Callable[[Producer], Awaitable[Any]]


def _raises(exc: Exception) -> Callable[[Any], Any]:
    def serializer(data: Any) -> bytes:
        raise exc

    return serializer


async def _send_after_close(p: Producer) -> Any:
    await p.close()
    return await p.send("orders", b"v")


async def _begin(p: Producer) -> Any:
    p.begin_transaction()


async def _begin_twice(p: Producer) -> Any:
    p.begin_transaction()
    p.begin_transaction()


async def _abort_then_commit(p: Producer) -> Any:
    p.begin_transaction()
    await p.abort_transaction()
    await p.commit_transaction()


async def _warm(p: Producer, call: Callable[[], Awaitable[Any]], first: Any = b"first") -> Any:
    """The topic's metadata known (so ``send()`` takes its fast path), then ``call()``."""
    await p.partitions_for("orders")
    if first is not None:
        await (await p.send("orders", first))
    return await call()


_TX = {"transactional_id": "parity-tx"}

#: (id, configuration, whether to start, the call): each must raise, and the same class from both.
PARITY_CASES: list[tuple[str, dict[str, Any], bool, Action]] = [
    ("empty topic", {}, True, lambda p: p.send("", b"v")),
    ("topic with a bad character", {}, True, lambda p: p.send("bad topic!", b"v")),
    ("topic not a str", {}, True, lambda p: p.send(5, b"v")),  # type: ignore[arg-type]
    ("topic too long", {}, True, lambda p: p.send("t" * 250, b"v")),
    ("headers not a list", {}, True, lambda p: p.send("orders", b"v", headers="h")),  # type: ignore[arg-type]
    ("header value an int", {}, True, lambda p: p.send("orders", b"v", headers=[("k", 5)])),  # type: ignore[list-item]
    ("header key not a str", {}, True, lambda p: p.send("orders", b"v", headers=[(1, b"x")])),  # type: ignore[list-item]
    ("partition out of range", {}, True, lambda p: p.send("orders", b"v", partition=6)),
    ("partition negative", {}, True, lambda p: p.send("orders", b"v", partition=-2)),
    ("partition a str", {}, True, lambda p: p.send("orders", b"v", partition="1")),  # type: ignore[arg-type]
    ("timestamp negative", {}, True, lambda p: p.send("orders", b"v", timestamp_ms=-1)),
    ("timestamp a str", {}, True, lambda p: p.send("orders", b"v", timestamp_ms="now")),  # type: ignore[arg-type]
    ("timestamp past int64", {}, True, lambda p: p.send("orders", b"v", timestamp_ms=2**63)),
    ("value without serializer", {}, True, lambda p: p.send("orders", object())),
    ("key without serializer", {}, True, lambda p: p.send("orders", b"v", key=1.5)),
    ("serializer raises", {"value_serializer": _raises(ValueError("no"))}, True, lambda p: p.send("orders", 1)),
    ("serializer returns an int", {"value_serializer": lambda data: 5}, True, lambda p: p.send("orders", 1)),
    ("on_delivery not callable", {}, True, lambda p: p.send("orders", b"v", on_delivery=5)),  # type: ignore[arg-type]
    ("record too large", {"max_request_size": 2000}, True, lambda p: p.send("orders", b"x" * 5000)),
    ("send after close", {}, True, _send_after_close),
    ("send before start", {}, False, lambda p: p.send("orders", b"v")),
    ("send_many values a str", {}, True, lambda p: p.send_many("orders", "abc")),
    ("send_many keys of another length", {}, True, lambda p: p.send_many("orders", [b"1"], keys=[b"a", b"b"])),
    ("send_and_wait bad partition", {}, True, lambda p: p.send_and_wait("orders", b"v", partition=7)),
    ("begin_transaction without transactional.id", {}, True, _begin),
    ("send outside a transaction", _TX, True, lambda p: p.send("orders", b"v")),
    ("commit without begin", _TX, True, lambda p: p.commit_transaction()),
    ("abort without begin", _TX, True, lambda p: p.abort_transaction()),
    ("begin twice", _TX, True, _begin_twice),
    ("commit after abort", _TX, True, _abort_then_commit),
    ("offsets outside a transaction", _TX, True, lambda p: p.send_offsets_to_transaction({("in", 0): 1}, "g")),
    ("send_arrow without a value column", {}, True, lambda p: p.send_arrow("orders", pa.table({"key": [b"k"]}))),
    ("send_arrow value column of ints", {}, True, lambda p: p.send_arrow("orders", pa.table({"value": [1, 2]}))),
    ("send_arrow partition out of range", {}, True,
     lambda p: p.send_arrow("orders", pa.table({"value": [b"v"], "partition": pa.array([9], pa.int32())}))),
    ("send_arrow with a serializer", {"value_serializer": json_serializer}, True,
     lambda p: p.send_arrow("orders", pa.table({"value": [b"v"]}))),
    ("send_arrow not Arrow data", {}, True, lambda p: p.send_arrow("orders", [b"v"])),
    # The same on the fast paths: the topic's metadata known first, as in a service's steady state.
    ("fast path: on_delivery of the wrong arity", {}, True, lambda p: _warm(p, lambda: p.send("orders", b"v", on_delivery=lambda: None))),  # type: ignore[arg-type,misc]
    ("fast path: record too large", {"max_request_size": 2000}, True, lambda p: _warm(p, lambda: p.send("orders", b"x" * 5000))),
    ("fast path: key of another type", {}, True, lambda p: _warm(p, lambda: p.send("orders", b"v", key=1.5))),
    ("fast path: send_many keyless with an object", {}, True, lambda p: _warm(p, lambda: p.send_many("orders", [b"a", object()]))),
    ("fast path: send_many keyed, too large", {"max_request_size": 2000}, True,
     lambda p: _warm(p, lambda: p.send_many("orders", [b"x" * 5000], keys=[b"k"]))),
    ("serializing fast path: the serializer raises", {"value_serializer": _raises(ValueError("no"))}, True,
     lambda p: _warm(p, lambda: p.send("orders", 1), first=None)),
    ("serializing fast path: a key without serializer", {"value_serializer": json_serializer}, True,
     lambda p: _warm(p, lambda: p.send("orders", {"a": 1}, key=2.5))),
]


async def _outcome(producer: Producer, start: bool, action: Action) -> type[BaseException] | None:
    """The class of what ``action`` raised on ``producer`` (None if it raised nothing); the producer closed after."""
    try:
        if start:
            await producer.start()
        await action(producer)
    except Exception as exc:  # noqa: BLE001 - the class is the result
        return type(exc)
    finally:
        await producer.close()
    return None


@pytest.mark.parametrize(("config", "start", "action"), [c[1:] for c in PARITY_CASES], ids=[c[0] for c in PARITY_CASES])
async def test_the_fake_raises_what_the_real_producer_raises(
    mock_cluster: MockCluster, config: dict[str, Any], start: bool, action: Action
) -> None:
    real = await _outcome(Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config), start, action)
    fake = await _outcome(FakeProducer(topics={"orders": 6}, **config), start, action)
    assert real is not None, "the case must make the real producer raise"
    assert fake is real


_PRODUCER_CONFIGS: list[dict[str, Any]] = [
    {},
    {"enable_idempotence": False, "acks": 1},
    {"value_serializer": json_serializer},
    {"transactional_id": "compose-tx"},
    {"interceptor_classes": [Recorder()]},
    {"enable_metrics_push": False},
]


@pytest.mark.parametrize("config", _PRODUCER_CONFIGS, ids=lambda c: ",".join(c) or "defaults")
async def test_the_fake_is_composed_as_the_real_producer(mock_cluster: MockCluster, config: dict[str, Any]) -> None:
    """One composition (``ProducerEngine._start``): only the parts that touch a cluster differ (internals/parts.py).

    Every part the engine holds is there in both or in neither; those it builds from the
    configuration alone are of the same class with the same settings; the transactions run at the
    same version; and the fast paths open in the fake as in the real producer.
    """

    def shape(producer: Producer) -> dict[str, Any]:
        engine = producer._engine
        accumulator, tm, transactions = engine.accumulator, engine.transaction_manager, engine.transactions
        assert accumulator is not None
        return {
            "parts present": {name: value is not None for name, value in vars(engine).items() if name != "_start_task"},
            "accumulator config": accumulator.config,
            "pool": (type(accumulator.pool), accumulator.pool.total, accumulator.pool.pool_size),
            "transaction manager": None if tm is None else (type(tm), tm.transactional_id, tm.transactional),
            "transactions": None if transactions is None else (type(transactions), transactions.tm.transaction_v2),
            "telemetry": type(engine.telemetry),
            "route": None if producer._intake is None else producer._intake.hooks.route,
            "fast paths": None if producer._intake is None else (producer._intake.plain is not None, producer._intake.serializing is not None),
        }

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as real:
        await real.partitions_for("orders")
        real_shape = shape(real)
    async with FakeProducer(topics={"orders": 6}, **config) as fake:
        await fake.partitions_for("orders")
        fake_shape = shape(fake)
    assert fake_shape == real_shape


async def test_the_fake_partitions_and_sizes_records_as_the_real_producer(mock_cluster: MockCluster) -> None:
    async def send_all(producer: Producer) -> list[tuple[int, int, int]]:
        async with producer:
            sent = [await producer.send_and_wait("orders", {"n": n}, key=f"key-{n}") for n in range(20)]
            sent.append(await producer.send_and_wait("orders", None, key="tombstone", partition=5))
        return [(md.partition, md.serialized_key_size, md.serialized_value_size) for md in sent]

    serializers: dict[str, Any] = {"key_serializer": "aioproducer.str_serializer", "value_serializer": json_serializer}
    real = await send_all(Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **serializers))
    fake = await send_all(FakeProducer(topics={"orders": 6}, **serializers))
    assert fake == real


async def test_the_parity_cases_raise_the_errors_the_producer_documents(mock_cluster: MockCluster) -> None:
    """A guard on the table itself: a few cases raise the classes that name their mistake."""
    cases = {c[0]: c for c in PARITY_CASES}
    expected = {
        "header value an int": InvalidRecordError,
        "serializer raises": SerializationError,
        "send after close": ProducerClosedError,
        "commit without begin": IllegalStateError,
    }
    for name, error in expected.items():
        _, config, start, action = cases[name]
        outcome = await _outcome(FakeProducer(topics={"orders": 6}, **config), start, action)
        assert outcome is not None and issubclass(outcome, error), name
