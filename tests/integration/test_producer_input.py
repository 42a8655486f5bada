"""Bad input is refused promptly, with a clear error, and costs nothing to the records around it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from aioproducer import (
    InvalidRecordError,
    KafkaTimeoutError,
    Producer,
    ProducerClosedError,
    RecordTooLargeError,
    SerializationError,
)
from aioproducer.errors import InvalidTopicError
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.integration

TOPIC = "orders"
UNKNOWN_TOPIC_OR_PARTITION = 3
FAST: dict[str, Any] = {"request_timeout_ms": 1000, "delivery_timeout_ms": 3000, "linger_ms": 1}


async def read_values(bootstrap: str, partition: int) -> list[bytes]:
    """Every value of one partition, through aiokafka (assign + seek, no group)."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(TOPIC, partition)
        consumer.assign([tp])
        end = (await consumer.end_offsets([tp]))[tp]
        consumer.seek(tp, 0)
        out: list[tuple[int, bytes]] = []
        async with asyncio.timeout(10):
            while end > 0 and (not out or out[-1][0] < end - 1):
                out += [(m.offset, m.value) for m in (await consumer.getmany(tp, timeout_ms=500)).get(tp, [])]
        return [v for _, v in out]
    finally:
        await consumer.stop()


BadSend = Callable[[Producer], Awaitable[Any]]

CASES: list[Any] = [
    pytest.param(
        lambda p: p.send(TOPIC, value=b"x" * 3000, partition=0), RecordTooLargeError, "max.request.size", id="over-max-request-size"
    ),
    pytest.param(
        lambda p: p.send(TOPIC, value=b"x" * 1500, partition=0, headers=[("h", b"y" * 1000)]),
        RecordTooLargeError,
        "max.request.size",
        id="headers-count-toward-the-size",
    ),
    pytest.param(lambda p: p.send(TOPIC, value=b"v", partition=0, timestamp_ms=-1), InvalidRecordError, "timestamp", id="negative-timestamp"),
    pytest.param(lambda p: p.send(TOPIC, value=b"v", partition=0, timestamp_ms=1.5), InvalidRecordError, "timestamp", id="float-timestamp"),
    pytest.param(lambda p: p.send(TOPIC, value=b"v", partition=0, headers=[("h", 42)]), InvalidRecordError, "int", id="header-int-value"),
    pytest.param(lambda p: p.send(TOPIC, value=b"v", partition=0, headers=[(b"h", b"v")]), InvalidRecordError, "key", id="header-bytes-key"),
    pytest.param(lambda p: p.send(TOPIC, value=b"v", partition=0, headers=[("h",)]), InvalidRecordError, "pair", id="header-not-a-pair"),
    pytest.param(lambda p: p.send(TOPIC, value=b"v", partition=0, headers="h=v"), InvalidRecordError, "str", id="headers-a-string"),
    pytest.param(
        lambda p: p.send(TOPIC, value=b"v", partition=0, headers=[("\udc80", b"v")]), InvalidRecordError, "header key",
        id="header-key-lone-surrogate",
    ),
    pytest.param(
        lambda p: p.send(TOPIC, value=b"v", partition=0, headers=[("h", "\udc80")]), InvalidRecordError, "UTF-8",
        id="header-value-lone-surrogate",
    ),
    pytest.param(lambda p: p.send(TOPIC, value=object(), partition=0), SerializationError, "object", id="unserializable-value"),
    pytest.param(lambda p: p.send(TOPIC, value=b"v", key=3.5, partition=0), SerializationError, "float", id="unserializable-key"),
    pytest.param(lambda p: p.send(TOPIC, value={"a": 1}, partition=0), SerializationError, "dict", id="dict-value"),
    pytest.param(lambda p: p.send(TOPIC, value=b"v", partition=6), Exception, "partition", id="partition-out-of-range"),
    pytest.param(
        lambda p: p.send(TOPIC, value=b"v", partition=0, timestamp_ms=2**63), InvalidRecordError, "2\\*\\*63-1",
        id="timestamp-beyond-int64",
    ),
    pytest.param(lambda p: p.send(None, value=b"v"), InvalidTopicError, "NoneType", id="topic-none"),
    pytest.param(lambda p: p.send(123, value=b"v"), InvalidTopicError, "int", id="topic-int"),
    pytest.param(lambda p: p.send(b"t", value=b"v"), InvalidTopicError, "bytes", id="topic-bytes"),
    pytest.param(lambda p: p.send(["t"], value=b"v"), InvalidTopicError, "list", id="topic-unhashable"),
    pytest.param(lambda p: p.send("\ud800", value=b"v"), InvalidTopicError, "only ASCII", id="topic-lone-surrogate"),
    pytest.param(lambda p: p.send("a b", value=b"v"), InvalidTopicError, "' '", id="topic-space"),
    pytest.param(lambda p: p.send("", value=b"v"), InvalidTopicError, "empty", id="topic-empty"),
    pytest.param(lambda p: p.send("..", value=b"v"), InvalidTopicError, "cannot be", id="topic-dotdot"),
    pytest.param(lambda p: p.send("t" * 250, value=b"v"), InvalidTopicError, "249", id="topic-too-long"),
    pytest.param(lambda p: p.partitions_for("a/b"), InvalidTopicError, "'/'", id="partitions-for-bad-topic"),
    pytest.param(lambda p: p.send_many(TOPIC, "hello"), TypeError, "one str", id="send-many-a-string"),
    pytest.param(lambda p: p.send_many(TOPIC, [b"a", b"b"], [b"k"]), ValueError, "1 keys for 2 values", id="send-many-fewer-keys"),
]


@pytest.mark.parametrize(("bad", "error", "mentions"), CASES)
async def test_bad_record_is_refused_promptly_and_nothing_else_is_lost(
    mock_cluster: MockCluster, bad: BadSend, error: type[BaseException], mentions: str
) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, max_request_size=2048, **FAST) as producer:
        before = await producer.send(TOPIC, value=b"before", partition=0)
        started = time.monotonic()
        with pytest.raises(error, match=mentions):
            await bad(producer)
        assert time.monotonic() - started < 0.5
        after = await producer.send(TOPIC, value=b"after", partition=0)
        assert [(await before).offset, (await after).offset] == [0, 1]
        assert producer.metrics()["records_failed"] == 0
        assert producer.metrics()["last_error"] is None
    assert await read_values(mock_cluster.bootstrap_servers, 0) == [b"before", b"after"]


async def test_a_bad_topic_does_not_poison_metadata_for_the_next_new_topic(mock_cluster: MockCluster) -> None:
    """The bad name is refused before it is tracked: later Metadata requests (for a new topic) still work."""
    mock_cluster.create_topic("later", 2)
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, max_block_ms=5000, **FAST) as producer:
        for bad in (None, 123, "\ud800", "a b"):
            with pytest.raises(InvalidTopicError):
                await producer.send(bad, value=b"x")  # type: ignore[arg-type]
        assert (await (await producer.send("later", value=b"ok", partition=1))).offset == 0


async def test_record_larger_than_buffer_memory(mock_cluster: MockCluster) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, buffer_memory=8192, batch_size=1024, **FAST) as producer:
        before = await producer.send(TOPIC, value=b"before", partition=1)
        with pytest.raises(RecordTooLargeError, match="buffer.memory"):
            await producer.send(TOPIC, value=b"x" * 9000, partition=1)
        after = await producer.send(TOPIC, value=b"after", partition=1)
        await asyncio.gather(before, after)
        assert producer.metrics()["buffer_available_bytes"] == 8192
    assert await read_values(mock_cluster.bootstrap_servers, 1) == [b"before", b"after"]


async def test_unknown_topic_times_out_after_max_block_ms(mock_cluster: MockCluster) -> None:
    mock_cluster.set_topic_error("nowhere", UNKNOWN_TOPIC_OR_PARTITION)
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, max_block_ms=300, **FAST) as producer:
        before = await producer.send(TOPIC, value=b"before", partition=2)
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="nowhere"):
            await producer.send("nowhere", value=b"lost")
        elapsed = time.monotonic() - started
        assert 0.29 <= elapsed < 2.0
        after = await producer.send(TOPIC, value=b"after", partition=2)
        await asyncio.gather(before, after)
    assert await read_values(mock_cluster.bootstrap_servers, 2) == [b"before", b"after"]


async def test_send_on_a_closed_producer(mock_cluster: MockCluster) -> None:
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST)
    with pytest.raises(ProducerClosedError):
        await producer.send(TOPIC, value=b"not started")
    await producer.start()
    delivered = await producer.send(TOPIC, value=b"delivered", partition=3)
    await producer.close()
    assert (await delivered).offset == 0
    with pytest.raises(ProducerClosedError):
        await producer.send(TOPIC, value=b"too late", partition=3)
    for key in (None, b"k"):  # the shapes send()'s fast path takes, keyless and keyed
        with pytest.raises(ProducerClosedError):
            await producer.send(TOPIC, value=b"too late", key=key)
    with pytest.raises(ProducerClosedError):
        await producer.send_many(TOPIC, [b"too late"])
    with pytest.raises(ProducerClosedError):
        await producer.start()
    assert await read_values(mock_cluster.bootstrap_servers, 3) == [b"delivered"]


async def test_bytes_subclasses_pass_as_bytes(mock_cluster: MockCluster) -> None:
    """bytes-like values are documented to pass: a bytes subclass (numpy.bytes_ is one) included."""

    class Blob(bytes):
        pass

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST) as producer:
        md = await (await producer.send(TOPIC, value=Blob(b"value"), key=Blob(b"key"), partition=3,
                                        headers=[("h", Blob(b"header"))]))
        assert (md.serialized_value_size, md.serialized_key_size) == (5, 3)
    assert await read_values(mock_cluster.bootstrap_servers, 3) == [b"value"]


@pytest.mark.parametrize("path", ["fast", "general"])
async def test_an_on_delivery_that_is_not_callable_is_refused_and_nothing_is_queued(mock_cluster: MockCluster, path: str) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST) as producer:
        before = await producer.send(TOPIC, value=b"before", partition=4)
        await before
        headers = None if path == "fast" else [("h", b"v")]
        with pytest.raises(TypeError, match="on_delivery must be callable"):
            await producer.send(TOPIC, value=b"never", key=b"k", headers=headers, on_delivery=5)  # type: ignore[arg-type]
        after = await producer.send(TOPIC, value=b"after", key=b"k", headers=headers)
        await after
    got = await read_values(mock_cluster.bootstrap_servers, (await after).partition)
    assert b"never" not in got and b"after" in got


@pytest.mark.parametrize("path", ["fast", "general"])
async def test_an_on_delivery_of_the_wrong_arity_is_refused_at_send_and_nothing_is_queued(mock_cluster: MockCluster, path: str) -> None:
    """Not only late, when the record completes, as a line in the log (#11 item 20).

    A good callback opens the key's batch first: the keyed lane that appends to it must not let
    another callable through unchecked.
    """
    reports: list[object] = []
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST) as producer:
        headers = None if path == "fast" else [("h", b"v")]
        first = await producer.send(TOPIC, value=b"first", key=b"k", headers=headers, on_delivery=lambda md, err: reports.append(err))
        for i in range(3):  # the same wrong callable again: the cache must not let it through
            with pytest.raises(TypeError, match=r"on_delivery must be callable as on_delivery\(metadata, error\)"):
                await producer.send(TOPIC, value=b"never", key=b"k", headers=headers, on_delivery=lambda md: reports.append(md))  # type: ignore[arg-type,misc]
        after = await producer.send(TOPIC, value=b"after", key=b"k", headers=headers, on_delivery=lambda md, err: reports.append(err))
        await first
        await after
    assert reports == [None, None]
    got = await read_values(mock_cluster.bootstrap_servers, (await after).partition)
    assert b"never" not in got and b"after" in got


async def test_with_every_broker_down_the_metadata_timeout_names_the_connection_failures(mock_cluster: MockCluster) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, max_block_ms=1500, **FAST) as producer:
        await producer.partitions_for(TOPIC)
        for broker in mock_cluster.broker_ids:
            mock_cluster.broker_down(broker)
        with pytest.raises(KafkaTimeoutError, match="not present in metadata after 1500 ms: no broker answered") as info:
            await producer.send("elsewhere", value=b"v")
        assert info.value.__cause__ is not None
        for broker in mock_cluster.broker_ids:
            mock_cluster.broker_up(broker)


async def _async_callback(metadata: Any, error: Any) -> None:
    pass


#: Every argument of send() and send_many(), each bad way: (call, error class, the argument the message names).
#: A bad argument is refused at the call, naming it as send() does, before anything is queued.
ARGUMENT_CASES: list[Any] = [
    pytest.param(lambda p: p.send(["t"], b"v"), InvalidTopicError, "topic", id="send-topic-list"),
    pytest.param(lambda p: p.send(None, b"v"), InvalidTopicError, "topic", id="send-topic-none"),
    pytest.param(lambda p: p.send(TOPIC, object()), SerializationError, "value", id="send-value-object"),
    pytest.param(lambda p: p.send(TOPIC, b"v", 3.5), SerializationError, "key", id="send-key-float"),
    pytest.param(lambda p: p.send(TOPIC, b"v", headers=5), InvalidRecordError, "headers", id="send-headers-int"),
    pytest.param(lambda p: p.send(TOPIC, b"v", headers=0), InvalidRecordError, "headers", id="send-headers-zero"),
    pytest.param(lambda p: p.send(TOPIC, b"v", headers=""), InvalidRecordError, "headers", id="send-headers-empty-str"),
    pytest.param(lambda p: p.send(TOPIC, b"v", headers=[("h", 1)]), InvalidRecordError, "header", id="send-header-value-int"),
    pytest.param(lambda p: p.send(TOPIC, b"v", partition="1"), InvalidRecordError, "partition", id="send-partition-str"),
    pytest.param(lambda p: p.send(TOPIC, b"v", partition=True), InvalidRecordError, "partition", id="send-partition-bool"),
    pytest.param(lambda p: p.send(TOPIC, b"v", partition=-1), InvalidRecordError, "partition", id="send-partition-negative"),
    pytest.param(lambda p: p.send(TOPIC, b"v", partition=99), Exception, "partition", id="send-partition-out-of-range"),
    pytest.param(lambda p: p.send(TOPIC, b"v", timestamp_ms=1.5), InvalidRecordError, "timestamp_ms", id="send-timestamp-float"),
    pytest.param(lambda p: p.send(TOPIC, b"v", timestamp_ms=True), InvalidRecordError, "timestamp_ms", id="send-timestamp-bool"),
    pytest.param(lambda p: p.send(TOPIC, b"v", timestamp_ms=-1), InvalidRecordError, "timestamp_ms", id="send-timestamp-negative"),
    pytest.param(lambda p: p.send(TOPIC, b"v", timestamp_ms=2**63), InvalidRecordError, "timestamp_ms", id="send-timestamp-too-big"),
    pytest.param(lambda p: p.send(TOPIC, b"v", on_delivery=5), TypeError, "on_delivery", id="send-on-delivery-int"),
    pytest.param(lambda p: p.send(TOPIC, b"v", on_delivery=_async_callback), TypeError, "on_delivery", id="send-on-delivery-async"),
    pytest.param(lambda p: p.send(TOPIC, b"v", on_delivery=lambda: None), TypeError, "on_delivery", id="send-on-delivery-arity"),
    # A record that would wait for metadata first: the callback is refused at once, not as a timeout.
    pytest.param(lambda p: p.send("nowhere", b"v", on_delivery=5), TypeError, "on_delivery", id="send-on-delivery-before-metadata"),
    pytest.param(lambda p: p.send_many(["t"], [b"v"]), InvalidTopicError, "topic", id="many-topic-list"),
    pytest.param(lambda p: p.send_many(None, [b"v"]), InvalidTopicError, "topic", id="many-topic-none"),
    pytest.param(lambda p: p.send_many("a b", []), InvalidTopicError, "topic", id="many-topic-bad-no-values"),
    pytest.param(lambda p: p.send_many(TOPIC, None), TypeError, "values", id="many-values-none"),
    pytest.param(lambda p: p.send_many(TOPIC, 5), TypeError, "values", id="many-values-int"),
    pytest.param(lambda p: p.send_many(TOPIC, b"ab"), TypeError, "values", id="many-values-bytes"),
    pytest.param(lambda p: p.send_many(TOPIC, {b"k": b"v"}), TypeError, "values", id="many-values-mapping"),
    pytest.param(lambda p: p.send_many(TOPIC, [object()]), SerializationError, "value", id="many-value-object"),
    pytest.param(lambda p: p.send_many(TOPIC, [b"v"], keys=5), TypeError, "keys", id="many-keys-int"),
    pytest.param(lambda p: p.send_many(TOPIC, [b"v"], keys="k"), TypeError, "keys", id="many-keys-str"),
    pytest.param(lambda p: p.send_many(TOPIC, [b"v", b"w"], keys=[b"k"]), ValueError, "keys", id="many-keys-too-few"),
    pytest.param(lambda p: p.send_many(TOPIC, [b"v"], keys=[3.5]), SerializationError, "key", id="many-key-float"),
    pytest.param(lambda p: p.send_many(TOPIC, [], on_delivery=5), TypeError, "on_delivery", id="many-on-delivery-no-values"),
    pytest.param(lambda p: p.send_many(TOPIC, [b"v"], on_delivery=lambda: None), TypeError, "on_delivery", id="many-on-delivery-arity"),
]


@pytest.mark.parametrize(("bad", "error", "argument"), ARGUMENT_CASES)
async def test_a_bad_argument_is_refused_at_the_call_naming_it(
    mock_cluster: MockCluster, bad: BadSend, error: type[BaseException], argument: str
) -> None:
    mock_cluster.set_topic_error("nowhere", UNKNOWN_TOPIC_OR_PARTITION)
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, max_block_ms=5000, **FAST) as producer:
        before = await producer.send(TOPIC, b"before", partition=5)
        with pytest.raises(error, match=rf"\b{argument}\b"):
            await bad(producer)
        after = await producer.send(TOPIC, b"after", partition=5)
        assert (await after).offset == (await before).offset + 1  # nothing queued in between, the producer fine


async def test_a_str_enum_topic_is_its_text_on_every_path(mock_cluster: MockCluster) -> None:
    """send()'s fast path finds a StrEnum member by equality: every other path takes it too, from the first call."""
    import enum

    class Topics(str, enum.Enum):
        ORDERS = TOPIC

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST) as producer:
        assert await producer.partitions_for(Topics.ORDERS) == list(range(6))
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST) as producer:
        first = await (await producer.send(Topics.ORDERS, b"a", partition=5))
        many = await asyncio.gather(*await producer.send_many(Topics.ORDERS, [b"b"], [b"k"]))
        assert first.topic == many[0].topic == TOPIC and type(first.topic) is str


@pytest.mark.parametrize("pending", [True, False], ids=["records-pending", "nothing-pending"])
@pytest.mark.parametrize("timeout", ["x", -1, float("nan"), True, [1]], ids=["str", "negative", "nan", "bool", "list"])
@pytest.mark.parametrize("call", ["flush", "close"])
@pytest.mark.parametrize("fake", [False, True], ids=["producer", "fake"])
async def test_a_bad_timeout_is_refused_at_the_call_naming_it_pending_records_or_not(
    mock_cluster: MockCluster, recwarn: pytest.WarningsRecorder, call: str, timeout: Any, pending: bool, fake: bool
) -> None:
    """flush("x") with records pending raised a TypeError from inside asyncio and left a coroutine never awaited (issue #40)."""
    from aioproducer.testing import FakeProducer

    config = {**FAST, "linger_ms": 60_000, "delivery_timeout_ms": 70_000}
    producer = (
        FakeProducer(topics={TOPIC: 6}, autocomplete=False)
        if fake
        else Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config)
    )
    async with producer:
        queued = await producer.send(TOPIC, b"v", partition=0) if pending else None
        with pytest.raises(ValueError, match=rf"^{call}\(\): timeout must be a number of seconds >= 0 or None, got "):
            await getattr(producer, call)(timeout)
        assert queued is None or not queued.done()  # nothing flushed, failed or closed by the refused call
        if isinstance(producer, FakeProducer) and pending:
            producer.complete_next()
        await producer.flush(5)  # the producer is fine: the record is delivered
        assert queued is None or (await queued).partition == 0
    import gc

    gc.collect()
    assert [str(w.message) for w in recwarn if issubclass(w.category, RuntimeWarning)] == []
