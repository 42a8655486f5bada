"""The send path before the accumulator, end to end: serializers, headers, interceptors.

``send()`` runs interceptors -> serializers -> header checks -> size check -> partitioner, and
everything it refuses must be refused *before* anything is queued. What reaches the broker is
read back with aiokafka (``readback.read_aiokafka``), a decoder aioproducer does not share, so
the bytes of keys, values and headers are checked as another client sees them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import pytest

from aioproducer import (
    InvalidRecordError,
    Producer,
    ProducerRecord,
    RecordMetadata,
    RecordTooLargeError,
    SerializationError,
    int_serializer,
    json_serializer,
    long_serializer,
    str_serializer,
)
from aioproducer.protocol.records import estimate_size_in_bytes_upper_bound
from aioproducer.testing import MockCluster
from readback import ReadRecord, read_aiokafka

pytestmark = pytest.mark.integration


async def _read(mc: MockCluster, partition: int, count: int) -> list[ReadRecord]:
    records = await read_aiokafka(mc.bootstrap_servers, "orders", partition, count=count, timeout=8.0)
    assert len(records) == count
    return records


# ------------------------------------------------------------------ serializers


class UpperSerializer:
    """Java's ``Serializer`` shape: ``serialize(topic, data)``; records the topics it saw."""

    def __init__(self) -> None:
        self.topics: list[str] = []

    def serialize(self, topic: str, data: Any) -> bytes | None:
        self.topics.append(topic)
        return None if data is None else str(data).upper().encode()


def framing_serializer(data: Any) -> bytes:
    """A serializer that must see bytes too (think schema-registry framing or encryption)."""
    raw = data if isinstance(data, bytes) else str(data).encode()
    return b"\x00" + raw


@pytest.mark.parametrize(
    ("config", "keywords"),
    [
        ({}, {"key_serializer": int_serializer, "value_serializer": json_serializer}),
        ({"key.serializer": int_serializer, "value.serializer": json_serializer}, {}),
        (
            {
                "key.serializer": "aioproducer.serializers.int_serializer",
                "value.serializer": "aioproducer.serializers.json_serializer",
            },
            {},
        ),
        ({}, {"key_serializer": "aioproducer.int_serializer", "value_serializer": "aioproducer.json_serializer"}),
    ],
    ids=["keywords", "config-callables", "config-dotted", "keywords-dotted"],
)
async def test_configured_serializers_are_applied(
    mock_cluster: MockCluster, config: dict[str, Any], keywords: dict[str, Any]
) -> None:
    async with Producer(config, bootstrap_servers=mock_cluster.bootstrap_servers, **keywords) as producer:
        md = await (await producer.send("orders", {"id": 1, "name": "é"}, key=7, partition=3))
        tombstone = await (await producer.send("orders", None, key=-1, partition=3))
    assert (md.serialized_key_size, md.serialized_value_size) == (4, len('{"id":1,"name":"é"}'.encode()))
    assert tombstone.serialized_value_size == -1
    got = await _read(mock_cluster, 3, 2)
    assert [(r.key, r.value) for r in got] == [
        (b"\x00\x00\x00\x07", '{"id":1,"name":"é"}'.encode()),
        (b"\xff\xff\xff\xff", None),
    ]


async def test_ready_made_serializers_read_back_byte_exact(mock_cluster: MockCluster) -> None:
    cases: list[tuple[Any, Any, bytes]] = [
        (str_serializer, "zürich", "zürich".encode()),
        (int_serializer, -2, b"\xff\xff\xff\xfe"),
        (long_serializer, 2**40, (2**40).to_bytes(8, "big")),
        (json_serializer, [1, {"a": None}], b'[1,{"a":null}]'),
    ]
    for serializer, value, _ in cases:
        async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=serializer) as producer:
            await (await producer.send("orders", value, partition=0))
    # Without a serializer: bytes as is, bytearray/memoryview copied, str as UTF-8.
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        for value in (b"raw\x00", bytearray(b"ba"), memoryview(b"mv"), "ok ✓"):
            await (await producer.send("orders", value, key=value, partition=0))
    got = await _read(mock_cluster, 0, len(cases) + 4)
    assert [r.value for r in got] == [c[2] for c in cases] + [b"raw\x00", b"ba", b"mv", "ok ✓".encode()]
    assert [r.key for r in got[len(cases):]] == [b"raw\x00", b"ba", b"mv", "ok ✓".encode()]


async def test_object_serializer_gets_the_topic(mock_cluster: MockCluster) -> None:
    key_ser, value_ser = UpperSerializer(), UpperSerializer()
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers, key_serializer=key_ser, value_serializer=value_ser
    ) as producer:
        await (await producer.send("orders", "hello", key="k", partition=1))
    assert key_ser.topics == value_ser.topics == ["orders"]
    [record] = await _read(mock_cluster, 1, 1)
    assert (record.key, record.value) == (b"K", b"HELLO")


async def test_configured_serializer_also_sees_bytes(mock_cluster: MockCluster) -> None:
    """Java calls the serializer for every record: bytes must not skip a framing serializer."""
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers,
        key_serializer=framing_serializer,
        value_serializer=framing_serializer,
    ) as producer:
        await (await producer.send("orders", b"payload", key=b"key", partition=2))
        # send_many's bytes fast path must not skip the serializer either.
        many = [await f for f in await producer.send_many("orders", [b"a", b"b"], keys=[b"x", None])]
    [record] = await _read(mock_cluster, 2, 1)
    assert (record.key, record.value) == (b"\x00key", b"\x00payload")
    # The None key is given to the serializer too (Java calls it for null): it framed "None".
    assert [(md.serialized_key_size, md.serialized_value_size) for md in many] == [(2, 2), (5, 2)]


class Boom(Exception):
    pass


def failing_on(bad: Any) -> Any:
    def serialize(data: Any) -> bytes:
        if data == bad:
            raise Boom(f"cannot serialize {data!r}")
        return str(data).encode()

    return serialize


@pytest.mark.parametrize("side", ["key", "value"])
async def test_failing_serializer_raises_serialization_error_and_queues_nothing(
    mock_cluster: MockCluster, side: str
) -> None:
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers,
        key_serializer=failing_on("bad") if side == "key" else None,
        value_serializer=failing_on("bad") if side == "value" else None,
    ) as producer:
        before = await producer.send("orders", "v1", key="k1", partition=4)
        bad = {"key": "bad", "value": "v2"} if side == "key" else {"key": "k2", "value": "bad"}
        with pytest.raises(SerializationError) as info:
            await producer.send("orders", bad["value"], key=bad["key"], partition=4)
        assert "'orders'" in str(info.value) and f"the {side} serializer" in str(info.value)
        assert isinstance(info.value.__cause__, Boom)
        after = await producer.send("orders", "v3", key="k3", partition=4)
        assert [(await before).offset, (await after).offset] == [0, 1]
    got = await _read(mock_cluster, 4, 2)
    assert [(r.key, r.value) for r in got] == [(b"k1", b"v1"), (b"k3", b"v3")]


async def test_serializer_returning_non_bytes_and_unserializable_types_are_refused(mock_cluster: MockCluster) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=lambda v: 42) as producer:
        with pytest.raises(SerializationError, match=r"value serializer for topic 'orders' returned int"):
            await producer.send("orders", "x")
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        with pytest.raises(SerializationError, match=r"cannot serialize key of type dict for topic 'orders'"):
            await producer.send("orders", b"v", key={"a": 1})
        with pytest.raises(SerializationError, match=r"value of type int"):
            await producer.send("orders", 5)
        assert producer.metrics()["incomplete_batches"] == 0


# ------------------------------------------------------------------ the contract: headers, async


class SchemaIdHeaderSerializer:
    """Java's ``Serializer`` with headers: adds its id as a header, as a registry serializer may."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.seen: list[list[tuple[str, bytes | None]]] = []

    def serialize(self, topic: str, headers: list[tuple[str, bytes | None]], data: Any) -> bytes:
        self.seen.append(list(headers))
        headers.append((self.name, b"\x00\x00\x00\x07"))
        return str(data).encode()


class AsyncFramer:
    """An async ``serialize(topic, data)``: it suspends first, as a registry lookup would."""

    async def serialize(self, topic: str, data: Any) -> bytes:
        await asyncio.sleep(0)
        return b"\x00" + topic.encode() + b":" + str(data).encode()


async def async_upper(data: Any) -> bytes:
    await asyncio.sleep(0)
    return str(data).upper().encode()


async def test_a_serializer_with_headers_sees_the_callers_and_adds_its_own(mock_cluster: MockCluster) -> None:
    key_ser, value_ser = SchemaIdHeaderSerializer("key-id"), SchemaIdHeaderSerializer("value-id")
    caller = [("trace", b"t1")]
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers, key_serializer=key_ser, value_serializer=value_ser
    ) as producer:
        await (await producer.send("orders", 1, key="k", headers=caller, partition=3))
        await (await producer.send("orders", 2, key="k", partition=3))  # no headers: the serializers still get a list
    assert caller == [("trace", b"t1")]  # the caller's list is not the one they append to
    # Java's order: the key's serializer first, then the value's, on the same headers
    assert key_ser.seen == [[("trace", b"t1")], []]
    assert value_ser.seen == [[("trace", b"t1"), ("key-id", b"\x00\x00\x00\x07")], [("key-id", b"\x00\x00\x00\x07")]]
    got = await _read(mock_cluster, 3, 2)
    assert got[0].headers == [("trace", b"t1"), ("key-id", b"\x00\x00\x00\x07"), ("value-id", b"\x00\x00\x00\x07")]
    assert got[1].headers == [("key-id", b"\x00\x00\x00\x07"), ("value-id", b"\x00\x00\x00\x07")]
    assert [(r.key, r.value) for r in got] == [(b"k", b"1"), (b"k", b"2")]


async def test_the_serializing_fast_path_partitions_and_adds_headers_as_the_general_path(mock_cluster: MockCluster) -> None:
    """No headers, partition or timestamp given: send() takes its serializing fast path; same records as _send()."""
    value_ser = SchemaIdHeaderSerializer("value-id")
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as plain:  # bytes keys: murmur2 of them
        expected = [(await (await plain.send("orders", b"x", key=f"key{i}".encode()))).partition for i in range(24)]
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers, key_serializer=str_serializer, value_serializer=value_ser
    ) as producer:
        got = [await (await producer.send("orders", i, key=f"key{i}")) for i in range(24)]
        keyless = await (await producer.send("orders", 99))
    assert [md.partition for md in got] == expected and len(set(expected)) > 1
    [record] = [r for r in await _read(mock_cluster, keyless.partition, keyless.offset + 1) if r.value == b"99"]
    assert record.headers == [("value-id", b"\x00\x00\x00\x07")]


async def test_a_header_a_serializer_adds_is_checked_as_the_callers(mock_cluster: MockCluster) -> None:
    class BadHeader:
        def serialize(self, topic: str, headers: list[Any], data: Any) -> bytes:
            headers.append(("id", 7))
            return b"v"

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=BadHeader()) as producer:
        with pytest.raises(InvalidRecordError, match="header 'id' has a value of type int"):
            await producer.send("orders", "x")
        assert producer.metrics()["incomplete_batches"] == 0


@pytest.mark.parametrize("form", ["async function", "async method"])
async def test_async_serializers_are_awaited_before_the_record_is_queued(mock_cluster: MockCluster, form: str) -> None:
    ser: Any = async_upper if form == "async function" else AsyncFramer()
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers, key_serializer=ser, value_serializer=ser,
        partitioner_class=lambda *record: 5,
    ) as producer:
        first = await producer.send("orders", "a", key="k1")
        many = await producer.send_many("orders", ["b", "c"], keys=["k2", "k3"])
        assert [(await f).offset for f in [first, *many]] == [0, 1, 2]  # in call order
    got = await _read(mock_cluster, 5, 3)
    if form == "async function":
        assert [(r.key, r.value) for r in got] == [(b"K1", b"A"), (b"K2", b"B"), (b"K3", b"C")]
    else:
        assert [r.value for r in got] == [b"\x00orders:a", b"\x00orders:b", b"\x00orders:c"]


async def test_an_async_serializer_that_fails_queues_nothing_and_the_producer_goes_on(mock_cluster: MockCluster) -> None:
    async def flaky(data: Any) -> Any:
        await asyncio.sleep(0)
        if data == "boom":
            raise Boom("registry unreachable")
        if data == "int":
            return 42
        return str(data).encode()

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=flaky) as producer:
        with pytest.raises(SerializationError, match="the value serializer failed for topic 'orders'") as info:
            await producer.send("orders", "boom", partition=0)
        assert isinstance(info.value.__cause__, Boom)
        with pytest.raises(SerializationError, match="returned int, not bytes"):
            await producer.send("orders", "int", partition=0)
        assert producer.metrics()["incomplete_batches"] == 0
        assert (await (await producer.send("orders", "fine", partition=0))).offset == 0
    [record] = await _read(mock_cluster, 0, 1)
    assert record.value == b"fine"


async def test_a_send_cancelled_in_its_async_serializer_queues_nothing(mock_cluster: MockCluster) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(data: Any) -> bytes:
        entered.set()
        await release.wait()
        return str(data).encode()

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=slow) as producer:
        task = asyncio.create_task(producer.send("orders", "never", partition=2))
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert producer.metrics()["incomplete_batches"] == 0
        release.set()
        assert (await (await producer.send("orders", "after", partition=2))).offset == 0
    [record] = await _read(mock_cluster, 2, 1)
    assert record.value == b"after"


# ------------------------------------------------------------------ headers


HEADERS = [("trace", b"\x00\x01\xff"), ("dup", b"1"), ("empty", b""), ("null", None), ("dup", b"2"), ("ünï", b"x")]


async def test_headers_read_back_byte_exact_in_order_with_duplicates(mock_cluster: MockCluster) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        await (await producer.send("orders", b"list", headers=HEADERS, partition=5))
        await (await producer.send("orders", b"tuple", headers=tuple(HEADERS), partition=5))
        await (await producer.send("orders", b"mapping", headers={"b": b"2", "a": b"1", "n": None}, partition=5))
        await (await producer.send("orders", b"none", headers=None, partition=5))
        await (await producer.send("orders", b"empty", headers=[], partition=5))
        like: Any = [("ba", bytearray(b"ba")), ("mv", memoryview(b"mv"))]  # accepted, copied to bytes
        await (await producer.send("orders", b"like", headers=like, partition=5))
    got = await _read(mock_cluster, 5, 6)
    assert [r.headers for r in got] == [
        HEADERS,
        HEADERS,
        [("b", b"2"), ("a", b"1"), ("n", None)],
        [],
        [],
        [("ba", b"ba"), ("mv", b"mv")],
    ]


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ([(b"k", b"v")], "header key must be str"),
        ([(1, b"v")], "header key must be str"),
        ({1: b"v"}, "header key must be str"),
        ([("k", 1)], "must be bytes or None"),
        ([("k", 1.5)], "must be bytes or None"),
        ([("k", ["v"])], "must be bytes or None"),
        ({"k": object()}, "must be bytes or None"),
        ([("k",)], "pair"),
        ([("k", b"v", b"w")], "pair"),
        (["kv"], "pair"),
        ("k=v", "list of"),
        (b"k", "list of"),
    ],
)
async def test_bad_headers_are_refused(mock_cluster: MockCluster, headers: Any, message: str) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        with pytest.raises(InvalidRecordError, match=message):
            await producer.send("orders", b"v", headers=headers, partition=0)
        assert producer.metrics()["incomplete_batches"] == 0
        assert (await (await producer.send("orders", b"ok", partition=0))).offset == 0


async def test_headers_count_towards_the_size_limit(mock_cluster: MockCluster) -> None:
    limit = 2000
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, max_request_size=limit) as producer:
        value = b"v" * (limit - 200)
        md = await (await producer.send("orders", value, partition=0))  # fits without headers
        assert md.offset == 0
        with pytest.raises(RecordTooLargeError, match="max.request.size=2000"):
            await producer.send("orders", value, headers=[("h", b"x" * 300)], partition=0)
        with pytest.raises(RecordTooLargeError):  # many small headers add up as well
            await producer.send("orders", value, headers=[("h%d" % i, b"xy") for i in range(60)], partition=0)
        with pytest.raises(RecordTooLargeError):  # header *names* count too
            await producer.send("orders", value, headers=[("n" * 300, None)], partition=0)
        assert (await (await producer.send("orders", value, headers=[("h", b"x" * 50)], partition=0))).offset == 1


@pytest.mark.parametrize("batch_size", [1024, 16384, 1 << 20])
@pytest.mark.parametrize("path", ["partition", "key"])
async def test_the_size_limit_is_java_s_whatever_batch_size(mock_cluster: MockCluster, batch_size: int, path: str) -> None:
    """``max.request.size`` against Java's upper bound, exactly, also for a record that would fit the open batch.

    With ``batch.size`` at or above the limit a record could fit a batch already open and so
    never reach the accumulator's check for records that open a batch; batches are kept below
    the limit instead (``effective_batch_size``). ``path``: ``partition=`` takes the general
    path of ``send()``, a ``bytes`` key the fast path.
    """
    limit = 4096
    largest = max(n for n in range(limit) if estimate_size_in_bytes_upper_bound(b"k", b"v" * n, None) <= limit)
    where: dict[str, Any] = {"partition": 0} if path == "partition" else {}
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers, max_request_size=limit, batch_size=batch_size, linger_ms=60_000
    ) as producer:
        opened = await producer.send("orders", b"small", b"k", **where)  # a batch is open on the record's partition
        with pytest.raises(RecordTooLargeError, match="max.request.size=4096"):
            await producer.send("orders", b"v" * (largest + 1), b"k", **where)
        fits = await producer.send("orders", b"v" * largest, b"k", **where)
        await producer.flush()
        assert (await opened).partition == (await fits).partition
        assert (await fits).offset == (await opened).offset + 1  # nothing else was queued


async def test_headers_are_copied_at_send_time(mock_cluster: MockCluster) -> None:
    """Read-only once sent, the Python way: ``send()`` takes a snapshot of the headers.

    Java makes a record's ``Headers`` read-only after ``send()``; Python lists and dicts cannot
    be frozen, so the producer copies the pairs (and bytes-like values) when the record is
    queued: mutating the caller's list, dict or bytearray afterwards changes nothing on the wire.
    """
    headers_list: list[tuple[str, Any]] = [("a", b"1"), ("buf", bytearray(b"before"))]
    headers_dict: dict[str, Any] = {"x": b"1"}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, linger_ms=60_000) as producer:
        f1 = await producer.send("orders", b"list", headers=headers_list, partition=1)
        f2 = await producer.send("orders", b"dict", headers=headers_dict, partition=1)
        headers_list.append(("late", b"!"))
        headers_list[0] = ("a", b"changed")
        headers_list[1][1][:] = b"AFTER!"
        headers_dict["x"] = b"changed"
        headers_dict["y"] = b"late"
        await producer.flush()
        await f1, await f2
    got = await _read(mock_cluster, 1, 2)
    assert got[0].headers == [("a", b"1"), ("buf", b"before")]
    assert got[1].headers == [("x", b"1")]


# ------------------------------------------------------------------ interceptors


class Recorder:
    """An interceptor that tags records and records every call."""

    instances: list[Recorder] = []

    def __init__(self, tag: bytes = b"r") -> None:
        self.tag = tag
        self.sent: list[ProducerRecord] = []
        self.acks: list[tuple[RecordMetadata | None, BaseException | None]] = []
        self.closed = 0
        Recorder.instances.append(self)

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        self.sent.append(record)
        return dataclasses.replace(record, headers=(*record.headers, ("seen-by", self.tag)))

    def on_acknowledgement(self, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        self.acks.append((metadata, error))

    def close(self) -> None:
        self.closed += 1


@pytest.mark.parametrize("form", ["interceptors", "interceptor_classes", "interceptor.classes", "dotted", "class"])
async def test_interceptors_configured_every_way_see_every_record(mock_cluster: MockCluster, form: str) -> None:
    Recorder.instances.clear()
    mine = Recorder()
    config: dict[str, Any] = {}
    keywords: dict[str, Any] = {}
    if form == "interceptors":
        keywords["interceptors"] = [mine]
    elif form == "interceptor_classes":
        keywords["interceptor_classes"] = [mine]
    elif form == "interceptor.classes":
        config["interceptor.classes"] = [mine]
    elif form == "dotted":
        config["interceptor.classes"] = f"{__name__}.Recorder"
    else:
        keywords["interceptors"] = [Recorder]
    async with Producer(config, bootstrap_servers=mock_cluster.bootstrap_servers, **keywords) as producer:
        interceptor = Recorder.instances[-1]
        assert interceptor.closed == 0
        mds = [await (await producer.send("orders", b"v%d" % i, key=b"k", partition=i % 6)) for i in range(6)]
    assert interceptor.closed == 1
    assert [r.value for r in interceptor.sent] == [b"v%d" % i for i in range(6)]
    assert interceptor.acks == [(md, None) for md in mds]
    got = await _read(mock_cluster, 0, 1)
    assert got[0].headers == [("seen-by", b"r")]


class Rewriter:
    """Changes the record before serialization: a dict value becomes enriched, the topic's key set."""

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        value = dict(record.value, enriched=True)
        return dataclasses.replace(record, value=value, key=value["id"], partition=2, headers=(("v", b"2"),))


async def test_on_send_changes_the_record_before_serialization(mock_cluster: MockCluster) -> None:
    recorder = Recorder(b"2nd")
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers,
        interceptors=[Rewriter(), recorder],
        key_serializer=int_serializer,
        value_serializer=json_serializer,
    ) as producer:
        md = await (await producer.send("orders", {"id": 9}, partition=0))
    assert md.partition == 2
    # Interceptors chain in order: the second one sees the first one's record, unserialized.
    assert recorder.sent[0].value == {"id": 9, "enriched": True} and recorder.sent[0].key == 9
    [record] = await _read(mock_cluster, 2, 1)
    assert (record.key, record.value) == (b"\x00\x00\x00\x09", b'{"id":9,"enriched":true}')
    assert record.headers == [("v", b"2"), ("seen-by", b"2nd")]


class Raising:
    def __init__(self) -> None:
        self.calls = 0

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        self.calls += 1
        raise RuntimeError("on_send is broken")

    def on_acknowledgement(self, metadata: Any, error: Any) -> None:
        self.calls += 1
        raise RuntimeError("on_acknowledgement is broken")

    def close(self) -> None:
        self.calls += 1
        raise RuntimeError("close is broken")


async def test_raising_interceptor_is_logged_and_skipped(
    mock_cluster: MockCluster, caplog: pytest.LogCaptureFixture
) -> None:
    raising, after = Raising(), Recorder(b"after")
    delivered: list[Any] = []
    with caplog.at_level(logging.ERROR, logger="aioproducer"):
        async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, interceptors=[raising, after]) as producer:
            future = await producer.send(
                "orders", b"v", partition=3, on_delivery=lambda md, err: delivered.append((md, err))
            )
            md = await future
    # The record went on unchanged past the broken interceptor; the next one still ran.
    assert md.partition == 3 and delivered == [(md, None)]
    assert after.acks == [(md, None)] and after.closed == 1
    assert raising.calls == 3
    messages = "\n".join(r.getMessage() for r in caplog.records)
    for method in ("on_send", "on_acknowledgement", "close"):
        assert method in messages
    [record] = await _read(mock_cluster, 3, 1)
    assert (record.value, record.headers) == (b"v", [("seen-by", b"after")])


async def test_on_acknowledgement_reports_failures(mock_cluster: MockCluster) -> None:
    """Every record that does not make it is acknowledged with its error: refused by ``send()``
    (Java's ``onSendError``), failed by the broker, or aborted by ``close()``."""
    recorder = Recorder()
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers,
        interceptors=[recorder],
        value_serializer=failing_on("bad"),
        retries=0,
        enable_idempotence=False,
    ) as producer:
        with pytest.raises(SerializationError) as refused:
            await producer.send("orders", "bad", partition=0)
        with pytest.raises(InvalidRecordError) as invalid:
            await producer.send("orders", "ok", partition=99)
        mock_cluster.push_request_errors(0, 29)  # Produce -> TOPIC_AUTHORIZATION_FAILED, not retriable
        failed = await producer.send("orders", "x", partition=0)
        with pytest.raises(Exception) as broker_error:
            await failed
    assert recorder.acks[:2] == [(None, refused.value), (None, invalid.value)]
    assert recorder.acks[2] == (None, broker_error.value)
    assert len(recorder.acks) == 3


async def test_on_acknowledgement_reports_records_aborted_by_close(mock_cluster: MockCluster) -> None:
    recorder = Recorder()
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, interceptors=[recorder], linger_ms=60_000)
    await producer.start()
    futures = [await producer.send("orders", b"v", partition=i % 6) for i in range(6)]
    await producer.close(timeout=0)
    errors = [f.exception() for f in futures]
    assert all(e is not None for e in errors)
    assert sorted(map(id, (e for _, e in recorder.acks))) == sorted(map(id, errors))
    assert all(md is None for md, _ in recorder.acks)
    assert recorder.closed == 1
