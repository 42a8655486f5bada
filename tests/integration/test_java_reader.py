"""What aioproducer produces, read back by the Java ``KafkaConsumer`` (kafka-clients) and by confluent-kafka.

The Java client is Kafka's reference implementation: its record decoder, CRC
check and decompressors are the ones every broker release is tested with, so
agreeing with it byte for byte is the strongest check of aioproducer's bytes
there is. It cannot talk to librdkafka's mock cluster (see ``readback.py``),
so these tests need a real broker: ``kafka_bootstrap_servers`` comes from
the session's real Kafka node (``kafka_cluster``). Without ``java``/``javac``
or the Kafka jars (``aioproducer.testing.kafka.kafka_libs()`` or
``AIOPRODUCER_KAFKA_LIBS``), the tests skip with the reason; with
``AIOPRODUCER_REQUIRE_KAFKA=1`` they fail instead.

Each read starts a JVM (about 1.5 s), so the tests read whole topics at once
rather than record by record.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import NoReturn

import pytest

from aioproducer import Producer
from aioproducer.testing import KafkaCluster

from conftest import new_topic

from readback import (
    JAVA_CONSUMER,
    JavaError,
    JavaUnavailableError,
    ReadbackError,
    ReadbackTimeoutError,
    ReadRecord,
    java_reader_command,
    kafka_libs_dir,
    read_java_raw,
    read_with,
)

pytestmark = pytest.mark.integration

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

Headers = list[tuple[str, bytes | None]]
#: (timestamp, key, value, headers) as sent; headers None means "no headers".
Sent = tuple[int, bytes | None, bytes | None, Headers | None]


def _unavailable(reason: str) -> NoReturn:
    """Skip, or fail when the run promised Kafka (``AIOPRODUCER_REQUIRE_KAFKA=1``)."""
    if os.environ.get("AIOPRODUCER_REQUIRE_KAFKA") == "1":
        pytest.fail(f"AIOPRODUCER_REQUIRE_KAFKA=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def java_reader() -> list[str]:
    """The ``java ... ReadTopic`` command, compiled once; skips (or fails) when Java or the jars are missing."""
    try:
        return java_reader_command()
    except JavaUnavailableError as exc:
        _unavailable(f"the Java reader cannot run: {exc}")


@pytest.fixture(scope="module")
def kafka_bootstrap_servers(java_reader: list[str], kafka_cluster: KafkaCluster) -> str:
    """The session's real Kafka node (the Java consumer cannot read from librdkafka's mock cluster)."""
    return kafka_cluster.bootstrap_servers


@pytest.fixture
def topic(kafka_cluster: KafkaCluster) -> str:
    """A fresh one-partition topic, so tests never see each other's records."""
    return new_topic(kafka_cluster, 1)


def records_to_send(t0: int) -> list[Sent]:
    """Every field encoding: nulls, empties, duplicate and null headers, JSON-hostile keys, big values.

    Header keys with quotes, backslashes, control characters and non-BMP
    characters check ReadTopic's hand-written JSON as much as our encoder.
    Seeded, so a failure reproduces.
    """
    rng = random.Random(20250101)
    return [
        (t0, b"key-0", b"value-0", [("trace-id", b"0af7651916cd43dd8448eb211c80319c")]),
        (t0 + 1, None, b"null key", None),
        (t0 + 2, b"null value", None, []),
        (t0 + 3, None, None, None),
        (t0 + 4, b"", b"", None),
        (t0 + 5, b"k", b"dup headers", [("dup", b"1"), ("dup", b"2"), ("nul", None), ("dup", b"3"), ("empty", b"")]),
        (t0 + 6, b"k", b"null header values", [("nul", None), ("nul", None)]),
        (
            t0 + 7,
            "ключ".encode(),
            "значение ✓".encode(),
            [('quote"back\\slash', b"q"), ("tab\tnewline\n", b"c"), ("emoji 🎉", b"\x00\xff"), ("", b"empty key")],
        ),
        (t0 + 8, bytes(range(256)), bytes(range(255, -1, -1)), [("bin", bytes(range(256)))]),
        (t0 - 1_000, b"earlier", b"timestamp before the first record's", None),
        (t0 + 9, b"big", rng.randbytes(70_000), [("size", b"70000")]),  # > 64 KiB: several lz4/snappy blocks
        (t0 + 10, b"big", b"abcdefgh" * 9_000, None),
        (t0 + 11, b"last", b"after the big ones", [("h", b"v")] * 3),
    ]


async def produce(bootstrap_servers: str, topic: str, codec: str, records: list[Sent]) -> list[ReadRecord]:
    """Send ``records`` to partition 0 with aioproducer; what a consumer should read, offsets from the acks."""
    async with Producer(bootstrap_servers=bootstrap_servers, compression_type=codec) as producer:
        futures = [
            await producer.send(topic, value=value, key=key, headers=headers, partition=0, timestamp_ms=ts)
            for ts, key, value, headers in records
        ]
        metadata = [await f for f in futures]
    return [
        ReadRecord(md.offset, ts, key, value, list(headers or ()))
        for md, (ts, key, value, headers) in zip(metadata, records)
    ]


def assert_same(got: list[ReadRecord], want: list[ReadRecord], who: str) -> None:
    """Record by record, so a failure names the first differing record rather than printing 200 KB."""
    assert len(got) == len(want), f"{who}: {len(got)} records, expected {len(want)}"
    for g, w in zip(got, want):
        assert g == w, f"{who}: record at offset {w.offset} differs:\n got  {g!r:.400}\n want {w!r:.400}"


def now_ms() -> int:
    """A minute ago: inside the broker's message.timestamp.{before,after}.max.ms window."""
    return int(time.time() * 1000) - 60_000


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("codec", CODECS)
async def test_java_and_confluent_read_back_what_was_sent(
    kafka_bootstrap_servers: str, topic: str, codec: str
) -> None:
    records = records_to_send(now_ms())
    want = await produce(kafka_bootstrap_servers, topic, codec, records)
    assert [r.offset for r in want] == list(range(len(records)))

    java = await read_with(JAVA_CONSUMER, kafka_bootstrap_servers, topic, 0, count=len(records))
    confluent = await read_with("confluent-kafka", kafka_bootstrap_servers, topic, 0, count=len(records))

    assert_same(java, want, f"java ({codec})")
    assert_same(confluent, want, f"confluent-kafka ({codec})")
    assert java == confluent


async def test_java_raw_reports_create_time_and_leader_epoch(kafka_bootstrap_servers: str, topic: str) -> None:
    """The richer view: a CreateTime topic keeps our timestamps, and the broker stamped a leader epoch."""
    # A NUL in a header key: Java keeps it (confluent-kafka would cut the key there: a C string).
    nul_key: Sent = (now_ms(), b"k", b"v", [("nul\x00inside", b"x")])
    records = [*records_to_send(now_ms())[:3], nul_key]
    want = await produce(kafka_bootstrap_servers, topic, "lz4", records)

    raw = read_java_raw(kafka_bootstrap_servers, topic, 0, count=len(records), isolation_level="read_committed")

    assert_same([r.read_record() for r in raw], want, "java raw, read_committed")
    assert {r.timestamp_type for r in raw} == {"CreateTime"}
    assert {r.leader_epoch for r in raw} == {0}


async def test_java_reads_from_the_middle_of_a_compressed_batch(kafka_bootstrap_servers: str, topic: str) -> None:
    """Starting at an offset inside a batch: the consumer skips the batch's earlier records by their deltas."""
    t0 = now_ms()
    records: list[Sent] = [(t0 + i, b"k%d" % i, b"v%d" % i, [("i", b"%d" % i)]) for i in range(6)]
    want = await produce(kafka_bootstrap_servers, topic, "zstd", records)

    got = await read_with(JAVA_CONSUMER, kafka_bootstrap_servers, topic, 0, count=3, start_offset=3)

    assert_same(got, want[3:], "java from offset 3")


async def test_too_short_read_times_out_with_the_partial_records(kafka_bootstrap_servers: str, topic: str) -> None:
    t0 = now_ms()
    records: list[Sent] = [(t0 + i, b"k%d" % i, b"v%d" % i, None) for i in range(3)]
    want = await produce(kafka_bootstrap_servers, topic, "gzip", records)

    # 10 s, not less: on a busy 2-core machine the first fetch alone took over 2 s once, and more
    # under load from other JVMs (the read waits the whole timeout, so this is its cost).
    with pytest.raises(ReadbackTimeoutError, match=r"read 3 of 5 records .* last offset 2") as info:
        await read_with(JAVA_CONSUMER, kafka_bootstrap_servers, topic, 0, count=5, timeout=10.0)

    assert_same(info.value.records, want, "java, partial")


async def test_consumer_error_is_a_readback_error(kafka_bootstrap_servers: str, topic: str) -> None:
    """A start offset past the end: ReadTopic has no reset policy, so the consumer's exception comes through."""
    await produce(kafka_bootstrap_servers, topic, "none", [(now_ms(), b"k", b"v", None)])

    # The error ends the read at its first fetch: the timeout only bounds a reader that never gets one
    # (5 s was reached before the first fetch under a load average of 15).
    with pytest.raises(ReadbackError) as info:
        await read_with(JAVA_CONSUMER, kafka_bootstrap_servers, topic, 0, count=1, start_offset=100, timeout=60.0)

    error = info.value.error
    assert isinstance(error, JavaError)
    assert error.exception == "org.apache.kafka.clients.consumer.OffsetOutOfRangeException"


# ------------------------------------------------- without Java or the jars


def test_missing_jars_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty libs directory is reported as such (tests then skip with that reason)."""
    monkeypatch.setenv("AIOPRODUCER_KAFKA_LIBS", str(tmp_path))
    with pytest.raises(JavaUnavailableError, match="kafka_2.13|kafka-clients"):
        kafka_libs_dir()


def test_missing_java_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(JavaUnavailableError, match="no `javac?` on PATH"):
        java_reader_command(libs=kafka_libs_dir_or_skip())


def kafka_libs_dir_or_skip() -> Path:
    """The libs directory if there is one; the missing-Java check needs jars to get that far."""
    try:
        return kafka_libs_dir()
    except JavaUnavailableError as exc:
        pytest.skip(str(exc))
