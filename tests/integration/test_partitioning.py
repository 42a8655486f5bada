"""Partitioning end to end: librdkafka agrees on keys, custom partitioners, sticky and adaptive choice.

Which partition a keyed record lands on is a cross-client contract (Java's murmur2 formula), so
the key table of ``tests/data/murmur2_keys.json`` is produced through librdkafka's
``murmur2_random`` partitioner (confluent-kafka) and through aioproducer's ``Producer`` against
the same mock cluster, and the partitions from both sets of delivery reports must equal the table.

Keyless records are observed through ``RecordMetadata.partition``: in send order they form runs
on one partition (KIP-794 sticky partitioning) and, with one broker slowed down, the adaptive
choice sends that broker fewer of them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer as RdProducer

from aioproducer import InvalidRecordError, Producer, RecordMetadata
from aioproducer.partitioner import partition_for_key
from aioproducer.protocol.records import decode_batches
from aioproducer.testing import MockCluster, assert_delivered_exactly_once, assert_ordered_per_key
from readback import fetch_raw_records

pytestmark = pytest.mark.integration

DATA_FILE = Path(__file__).resolve().parents[1] / "data" / "murmur2_keys.json"
PARTITION_COUNTS = (1, 3, 12, 100)


def _table() -> list[tuple[bytes, dict[int, int]]]:
    rows = json.loads(DATA_FILE.read_text())["rows"]
    return [(bytes.fromhex(r["key"]), {int(n): p for n, p in r["partitions"].items()}) for r in rows]


@pytest.fixture(scope="module")
def key_table() -> list[tuple[bytes, dict[int, int]]]:
    table = _table()
    assert len(table) >= 1000
    assert any(key == b"" for key, _ in table), "the table should include the empty key"
    return table


@pytest.fixture(scope="module")
def keyed_cluster() -> Iterator[MockCluster]:
    """3 brokers, topics ``p1``, ``p3``, ``p12``, ``p100`` (created explicitly: the count matters)."""
    with MockCluster(brokers=3) as mc:
        for n in PARTITION_COUNTS:
            mc.create_topic(f"p{n}", n)
        yield mc


def _librdkafka_partitions(mc: MockCluster, topic: str, keys: list[bytes]) -> list[int]:
    """Produce ``keys`` with librdkafka's ``murmur2_random``; the partitions from its delivery reports."""
    partitions: list[int | None] = [None] * len(keys)
    errors: list[Any] = []

    def report(index: int) -> Any:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                partitions[index] = msg.partition()

        return on_delivery

    producer = RdProducer(
        {
            "bootstrap.servers": mc.bootstrap_servers,
            "partitioner": "murmur2_random",
            "linger.ms": 5,
            "log_level": 3,  # the mock closing its sockets at teardown is not worth a log line
        }
    )
    for i, key in enumerate(keys):
        producer.produce(topic, value=b"v", key=key, on_delivery=report(i))
        producer.poll(0)
    assert producer.flush(10) == 0, "librdkafka did not deliver everything within 10 s"
    assert not errors, errors[:3]
    assert None not in partitions
    return partitions  # type: ignore[return-value]


async def _aioproducer_partitions(mc: MockCluster, topic: str, keys: list[bytes]) -> list[int]:
    async with Producer(bootstrap_servers=mc.bootstrap_servers, linger_ms=5) as producer:
        futures = [await producer.send(topic, value=b"v", key=key) for key in keys]
        return [(await f).partition for f in futures]


@pytest.mark.parametrize("num_partitions", PARTITION_COUNTS)
async def test_keyed_partitions_agree_with_librdkafka_murmur2_random(
    keyed_cluster: MockCluster, key_table: list[tuple[bytes, dict[int, int]]], num_partitions: int
) -> None:
    topic = f"p{num_partitions}"
    keys = [key for key, _ in key_table]
    expected = [parts[num_partitions] for _, parts in key_table]

    ours = [partition_for_key(key, num_partitions) for key in keys]
    assert ours == expected

    theirs = _librdkafka_partitions(keyed_cluster, topic, keys)
    mismatches = [(k.hex(), t, e) for k, t, e in zip(keys, theirs, expected) if t != e]
    assert not mismatches, f"librdkafka disagrees with the table on {len(mismatches)} keys: {mismatches[:5]}"

    assigned = await _aioproducer_partitions(keyed_cluster, topic, keys)
    mismatches = [(k.hex(), a, e) for k, a, e in zip(keys, assigned, expected) if a != e]
    assert not mismatches, f"Producer assigned other partitions for {len(mismatches)} keys: {mismatches[:5]}"


async def test_empty_key_is_hashed_like_any_key(keyed_cluster: MockCluster) -> None:
    """The empty key is a key: librdkafka's ``murmur2_random`` hashes it (only a NULL key pointer
    goes to its random partitioner, ``rd_kafka_msg_partitioner_murmur2_random``) and so does Java
    (``keyBytes != null``): murmur2(b"") -> partition 81 of 100. ``key=b""`` must land there every
    time in both clients. Null keys are not compared: librdkafka spreads them (randomly, and
    sticky for ``sticky.partitioning.linger.ms``), aioproducer uses the KIP-794 sticky partition;
    neither is a function of the key, so there is nothing to agree on.
    """
    assert partition_for_key(b"", 100) == 81
    assert set(_librdkafka_partitions(keyed_cluster, "p100", [b""] * 50)) == {81}
    assert set(await _aioproducer_partitions(keyed_cluster, "p100", [b""] * 50)) == {81}


async def test_str_key_is_hashed_as_its_utf8_bytes(mock_cluster: MockCluster) -> None:
    keys = [f"customer-{i}-é" for i in range(60)]
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        futures = [await producer.send("orders", b"v", key=k) for k in keys]
        got = [(await f).partition for f in futures]
    assert got == [partition_for_key(k.encode(), 6) for k in keys]


# ------------------------------------------------------------------ explicit and custom partitions


async def test_explicit_partition_is_used_as_is_even_with_a_key(mock_cluster: MockCluster) -> None:
    calls: list[str] = []

    def partitioner(*args: Any) -> int:
        calls.append(args[0])
        return 0

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, partitioner_class=partitioner) as producer:
        for partition in range(6):
            key = b"k%d" % partition
            md = await (await producer.send("orders", b"v", key=key, partition=partition))
            assert (md.topic, md.partition) == ("orders", partition)
    assert calls == [], "a record that names its partition must not consult the partitioner"


@pytest.mark.parametrize("partition", [6, 1000, -1, "1", 1.0, True])
async def test_invalid_explicit_partition_is_refused(mock_cluster: MockCluster, partition: Any) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        with pytest.raises(InvalidRecordError, match="orders") as info:
            await producer.send("orders", b"v", partition=partition)
        if isinstance(partition, int) and not isinstance(partition, bool) and partition >= 6:
            assert "6 partition" in str(info.value)
        # Nothing was queued, and the producer keeps working.
        assert producer.metrics()["incomplete_batches"] == 0
        md = await (await producer.send("orders", b"after", partition=2))
        assert md.partition == 2 and md.offset == 0


class RecordingPartitioner:
    """Java's ``Partitioner`` shape: an object with ``partition(...)``; routes by the value's first byte."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def partition(
        self, topic: str, key: Any, key_bytes: bytes | None, value: Any, value_bytes: bytes | None, cluster: Any
    ) -> int:
        self.calls.append((topic, key, key_bytes, value, value_bytes, cluster))
        return value_bytes[0] % 6 if value_bytes else 0


def route_by_value(
    topic: str, key: Any, key_bytes: bytes | None, value: Any, value_bytes: bytes | None, cluster: Any
) -> int:
    """A plain function partitioner, reachable by dotted path."""
    return value_bytes[0] % 6 if value_bytes else 0


@pytest.mark.parametrize("form", ["object", "callable", "class", "dotted"])
async def test_custom_partitioner_decides(mock_cluster: MockCluster, form: str) -> None:
    recorder = RecordingPartitioner()
    configured: Any = {
        "object": recorder,
        "callable": route_by_value,
        "class": RecordingPartitioner,
        "dotted": f"{__name__}.route_by_value",
    }[form]
    async with Producer({"partitioner.class": configured}, bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        futures = [await producer.send("orders", bytes([i]) + b"-payload", key=b"same-key") for i in range(12)]
        got = [(await f).partition for f in futures]
    # Every record has the same key, so the built-in partitioner would use one partition.
    assert got == [i % 6 for i in range(12)]
    if form == "object":
        topic, key, key_bytes, value, value_bytes, cluster = recorder.calls[0]
        assert (topic, key, key_bytes, value, value_bytes) == ("orders", b"same-key", b"same-key", b"\x00-payload", b"\x00-payload")
        assert sorted(cluster.partitions_for("orders")) == list(range(6))


async def test_custom_partitioner_sees_unserialized_key_and_value(mock_cluster: MockCluster) -> None:
    recorder = RecordingPartitioner()
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers,
        partitioner_class=recorder,
        key_serializer="aioproducer.serializers.int_serializer",
        value_serializer="aioproducer.serializers.json_serializer",
    ) as producer:
        await (await producer.send("orders", {"n": 1}, key=7))
    assert recorder.calls[0][1:5] == (7, b"\x00\x00\x00\x07", {"n": 1}, b'{"n":1}')


@pytest.mark.parametrize(
    ("answer", "message"),
    [(-1, "never negative"), (6, r"valid range is \[0, 6\)"), (99, r"valid range is \[0, 6\)"), (None, "must be an int"), ("2", "must be an int")],
)
async def test_custom_partitioner_bad_answer_is_a_clear_error(
    mock_cluster: MockCluster, answer: Any, message: str
) -> None:
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers, partitioner_class=lambda *args: answer
    ) as producer:
        with pytest.raises(InvalidRecordError, match=message):
            await producer.send("orders", b"v", key=b"k")
        assert producer.metrics()["incomplete_batches"] == 0
        # An explicit partition bypasses the broken partitioner, so the producer is still usable.
        assert (await (await producer.send("orders", b"v", partition=1))).offset == 0


async def test_ignore_keys_sends_keyed_records_to_the_sticky_partition(mock_cluster: MockCluster) -> None:
    keys = [b"key-%d" % i for i in range(400)]
    hashed = [partition_for_key(k, 6) for k in keys]
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers,
        partitioner_ignore_keys=True,
        batch_size=2048,
        linger_ms=60_000,
    ) as producer:
        futures = [await producer.send("orders", bytes(100), key=k) for k in keys]
        await producer.flush()
        got = [(await f).partition for f in futures]
    runs = [len(list(group)) for _, group in itertools.groupby(got)]
    # By hash, 400 keys change partition ~330 times; sticky, every ~2 KiB (~17 records) at most.
    assert len(runs) <= 400 // 15, runs
    assert got != hashed
    # Control: the same keys without ignore_keys follow the hash.
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, batch_size=2048) as producer:
        futures = [await producer.send("orders", bytes(100), key=k) for k in keys]
        assert [(await f).partition for f in futures] == hashed


# ------------------------------------------------------------------ sticky and adaptive


def _runs(metadata: list[RecordMetadata]) -> list[tuple[int, int]]:
    """(partition, record count) of the maximal runs of consecutive records on one partition."""
    return [(p, len(list(g))) for p, g in itertools.groupby(m.partition for m in metadata)]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_keyless_records_fill_a_batch_per_partition_before_switching(mock_cluster: MockCluster, seed: int) -> None:
    """KIP-794: the sticky partition changes after ``batch.size`` bytes, on a batch boundary.

    With ``linger.ms`` long enough that nothing is sent before ``flush()``, Java switches once
    ``batch.size`` bytes went to the partition *and* its last batch is full, and at
    ``2 * batch.size`` regardless: "between stickyBatchSize and stickyBatchSize * 2 bytes"
    (``BuiltInPartitioner.updatePartitionInfo``). So in send order the records form runs of at
    least a batch's worth on one partition, and on the wire every batch but each partition's
    last is full: unkeyed records are never spread one per partition.
    """
    batch_size = 16384
    per_record = 100 + 8  # what the sticky partitioner counts: value + key + 8
    n = 3000
    async with Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers, batch_size=batch_size, linger_ms=60_000
    ) as producer:
        await producer.partitions_for("orders")
        # The sticky partition is drawn at random and may be drawn again (two turns then merge into
        # one run): seeded, so that how many runs merge is the same on every run of this test.
        assert producer._engine.accumulator is not None
        producer._engine.accumulator._rng.seed(seed)
        futures = [await producer.send("orders", bytes(100)) for _ in range(n)]
        assert producer.metrics()["records_sent"] == 0, "linger.ms should have held everything back"
        await producer.flush()
        metadata = [await f for f in futures]

    # A new sticky partition may be drawn equal to the old one: then two turns merge into one run.
    runs = _runs(metadata)
    low, high = batch_size // per_record, 2 * batch_size // per_record + 1
    assert all(count >= low for _, count in runs[:-1]), f"switched before batch.size bytes: {runs}"
    assert len(runs) >= 5, runs  # ~10 turns of at most `high` records each
    assert sum(1 for _, count in runs if count <= high) >= len(runs) // 2, runs

    # On the wire: per partition, every batch except the last is full.
    for partition in {m.partition for m in metadata}:
        batches = decode_batches(await fetch_raw_records(mock_cluster.bootstrap_servers, "orders", partition))
        sizes = [b.batch_length + 12 for b in batches]
        assert all(size > batch_size - 2 * per_record for size in sizes[:-1]), (partition, sizes)
        # Offsets are contiguous in send order: each partition's records arrived as sent.
        offsets = [m.offset for m in metadata if m.partition == partition]
        assert offsets == list(range(len(offsets)))


async def test_keyless_records_use_every_partition_over_time(mock_cluster: MockCluster) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, batch_size=1024, linger_ms=60_000) as producer:
        futures = [await producer.send("orders", bytes(100)) for _ in range(1500)]
        await producer.flush()
        counts = Counter([(await f).partition for f in futures])
    # ~170 sticky turns of ~9 records over 6 partitions: P(a partition never drawn) ~ 6 * (5/6)**170.
    assert set(counts) == set(range(6)), counts


async def test_keyless_records_spread_by_the_sticky_partitioner_pass_the_order_check(mock_cluster: MockCluster) -> None:
    """``assert_ordered_per_key`` checks records without a key per partition, the order Kafka keeps.

    The sticky partitioner spreads them over partitions (and the read returns them partition by
    partition), which is no reorder; two records swapped within one partition are.
    """
    sent = [(None, b"%04d" % n + bytes(96)) for n in range(300)]  # ~9 records a sticky turn
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, batch_size=1024, linger_ms=60_000) as producer:
        futures = [await producer.send("orders", value) for _, value in sent]
        await producer.flush()
        await asyncio.gather(*futures)
    records = await mock_cluster.read("orders", count=len(sent))
    by_partition = Counter(r.partition for r in records)
    assert len(by_partition) > 1, by_partition
    assert_delivered_exactly_once(records, sent)
    assert_ordered_per_key(records, sent)

    partition = by_partition.most_common(1)[0][0]
    first, second = [i for i, r in enumerate(records) if r.partition == partition][:2]
    swapped = list(records)
    swapped[first] = dataclasses.replace(records[first], value=records[second].value)
    swapped[second] = dataclasses.replace(records[second], value=records[first].value)
    with pytest.raises(AssertionError, match=f"keyless records of partition {partition} out of order"):
        assert_ordered_per_key(swapped, sent)


def _leaders(mc: MockCluster) -> dict[int, int]:
    """Partition -> leader for ``orders``: broker 1 leads 0-1, broker 2 leads 2-3, broker 3 leads 4-5."""
    leaders = {p: p // 2 + 1 for p in range(6)}
    for partition, broker in leaders.items():
        mc.set_partition_leader("orders", partition, broker)
    return leaders


async def _records_per_broker(mc: MockCluster, adaptive: bool, n: int = 16000) -> dict[int, int]:
    """Send ``n`` keyless records with broker 1 slowed to 300 ms; records acknowledged per broker.

    The loop yields to the event loop every 100 records, as an application producing from
    I/O would: without that, the sender never runs between sends and no queue ever looks
    longer than another. ``batch.size`` is small so that there are many sticky choices (~300).
    """
    leaders = _leaders(mc)
    async with Producer(
        bootstrap_servers=mc.bootstrap_servers,
        batch_size=4096,
        linger_ms=5,
        partitioner_adaptive_partitioning_enable=adaptive,
    ) as producer:
        await producer.partitions_for("orders")
        mc.set_rtt(1, 300)
        futures = []
        for i in range(n):
            futures.append(await producer.send("orders", bytes(100)))
            if i % 100 == 99:
                await asyncio.sleep(0)  # a yield, not a wait: lets the sender run
        # Partitions are chosen at send() time, so the measurement is over: collect the results
        # without waiting for broker 1's backlog at 300 ms per round trip.
        mc.set_rtt(1, 0)
        partitions = [(await f).partition for f in futures]
    counts = Counter(leaders[p] for p in partitions)
    return {broker: counts[broker] for broker in (1, 2, 3)}


async def test_adaptive_partitioning_sends_fewer_records_to_a_slow_broker(mock_cluster: MockCluster) -> None:
    counts = await _records_per_broker(mock_cluster, adaptive=True)
    fast = (counts[2] + counts[3]) / 2
    # Measured (20 runs): the slow broker gets 0.19-0.28x of a fast broker's records; uniform: 0.8-1.3x.
    assert counts[1] < 0.6 * fast, counts


async def test_without_adaptive_partitioning_a_slow_broker_gets_its_share(mock_cluster: MockCluster) -> None:
    """Control for the test above: the same load with the uniform choice does not avoid broker 1."""
    counts = await _records_per_broker(mock_cluster, adaptive=False)
    fast = (counts[2] + counts[3]) / 2
    assert counts[1] > 0.6 * fast, counts
