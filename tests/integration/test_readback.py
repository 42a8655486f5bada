"""aioproducer's RecordBatch bytes, read back by three independent consumers.

Batches are built with :class:`RecordBatchBuilder`, sent with the low-level
:func:`aioproducer.testing.raw_produce.produce_batch` to librdkafka's mock cluster and to a real
Kafka broker (the ``cluster`` fixture), and read back with aiokafka,
kafka-python and confluent-kafka (:mod:`readback`). The mock stores a batch
without looking inside it (it does not even verify the CRC); real Kafka
validates every batch (CRC, record framing, decompression) before it writes
it. The consumers' decoders, CRC checks included, are the oracle: every key,
value and header must come back byte for byte, with its create timestamp, in
order, at the offset the produce response's base offset implies. The CRC
tests need a broker that stores a corrupt batch, so they run on the mock; on
real Kafka the corrupt batch is refused at once.
"""

from __future__ import annotations

from typing import Any

import random
from collections.abc import AsyncIterator, Sequence

import pytest

from aioproducer.config import ProducerConfig
from aioproducer.errors import CorruptMessageError, ProtocolError
from aioproducer.network.client import KafkaClient
from aioproducer.protocol import compression
from aioproducer.protocol.records import TIMESTAMP_CREATE_TIME, RecordBatchBuilder, decode_batches
from aioproducer.testing import KafkaCluster, MockCluster
from aioproducer.testing.raw_produce import produce_batch

from conftest import BrokerUnderTest, new_topic

from readback import (
    CONSUMERS,
    ReadbackError,
    ReadRecord,
    fetch_raw_records,
    read_with,
)

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_123  # an explicit create timestamp, in ms

Headers = list[tuple[str, bytes | None]]
#: (timestamp, key, value, headers) as appended; headers None means "no headers".
Rec = tuple[int, bytes | None, bytes | None, Headers | None]


def _kafka_python_has_snappy() -> bool:
    from kafka.codec import has_snappy

    return bool(has_snappy())


#: Every codec, by the name pytest ids use.
CODECS: dict[str, int] = {
    "none": compression.NONE,
    "gzip": compression.GZIP,
    "snappy": compression.SNAPPY,
    "lz4": compression.LZ4,
    "zstd": compression.ZSTD,
}

SNAPPY_SKIP_REASON = (
    "kafka-python 2.2 decodes snappy only with python-snappy, which is not installed "
    "(pip install -e '.[test]'); aiokafka and confluent-kafka cover snappy"
)


def _consumers_for(codec: int) -> list[str]:
    """The readers that can decode ``codec`` here (kafka-python needs python-snappy for snappy)."""
    if codec == compression.SNAPPY and not _kafka_python_has_snappy():
        return ["aiokafka", "confluent-kafka"]
    return list(CONSUMERS)


def _codecs_readable_by(consumer: str) -> list[int]:
    return [codec for codec in CODECS.values() if consumer in _consumers_for(codec)]


def _codec_consumer_params() -> list[object]:
    """(codec, consumer) for every pair; pairs a reader cannot decode here are skipped with the reason."""
    return [
        pytest.param(
            codec,
            consumer,
            id=f"{name}-{consumer}",
            marks=[] if consumer in _consumers_for(codec) else [pytest.mark.skip(reason=SNAPPY_SKIP_REASON)],
        )
        for name, codec in CODECS.items()
        for consumer in CONSUMERS
    ]


async def _client(bootstrap_servers: str) -> AsyncIterator[KafkaClient]:
    c = KafkaClient(ProducerConfig(bootstrap_servers=bootstrap_servers))
    await c.bootstrap()
    yield c
    await c.close()


@pytest.fixture
async def client(cluster: BrokerUnderTest) -> AsyncIterator[KafkaClient]:
    """A client of the broker under test (the mock, then real Kafka)."""
    async for c in _client(cluster.bootstrap_servers):
        yield c


@pytest.fixture
async def mock_client(mock_cluster: MockCluster) -> AsyncIterator[KafkaClient]:
    """A client of the mock: the CRC tests need a broker that stores a corrupt batch (Kafka refuses it)."""
    async for c in _client(mock_cluster.bootstrap_servers):
        yield c


def build(codec: int, records: Sequence[Rec], **producer_state: Any) -> bytes:
    """One batch of ``records``, appended unconditionally (``append`` ignores batch_size)."""
    builder = RecordBatchBuilder(codec, 16384)
    for ts, key, value, headers in records:
        builder.append(ts, key, value, headers)
    return builder.build(**producer_state)


def expected(base_offset: int, records: Sequence[Rec]) -> list[ReadRecord]:
    return [
        ReadRecord(base_offset + i, ts, key, value, list(headers or ()))
        for i, (ts, key, value, headers) in enumerate(records)
    ]


def assert_same(got: list[ReadRecord], want: list[ReadRecord], who: str) -> None:
    """Compare record by record, so a failure names the first differing record, not a 200 KB diff."""
    assert len(got) == len(want), f"{who}: {len(got)} records, expected {len(want)}"
    for g, w in zip(got, want):
        assert g == w, f"{who}: record at offset {w.offset} differs:\n got  {g!r:.400}\n want {w!r:.400}"


def rich_records() -> list[Rec]:
    """Records that exercise every field encoding: nulls, empties, duplicates, unicode, big and odd values.

    Deterministic (seeded) so a failure reproduces.
    """
    rng = random.Random(20240917)
    incompressible = rng.randbytes(70_000)  # > 64 KiB: several lz4 blocks, three xerial snappy blocks
    compressible = b"abcdefgh" * 9_000
    return [
        (T0, b"key-0", b"value-0", [("trace-id", b"0af7651916cd43dd8448eb211c80319c")]),
        (T0 + 1, None, b"null key", None),
        (T0 + 2, b"null value", None, []),
        (T0 + 3, None, None, None),
        (T0 + 4, b"", b"", None),  # empty, not null
        (T0 + 5, b"k", b"dup headers", [("dup", b"1"), ("dup", b"2"), ("other", b"x"), ("dup", b"3")]),
        (T0 + 6, b"k", b"null and empty header values", [("nul", None), ("empty", b""), ("nul", None)]),
        (
            T0 + 7,
            "ключ".encode(),
            "значение ✓".encode(),
            [
                ("ключ", "значение".encode()),
                ("日本語", b"\x00\xff"),
                ("emoji 🎉", b"party"),
                ("", b"empty key"),
            ],
        ),
        (T0 + 8, bytes(range(256)), bytes(range(255, -1, -1)), [("bin", bytes(range(256)))]),
        (T0 - 1_000, b"earlier", b"timestamp before the first record's", None),  # negative delta
        (T0 + 3_600_000, b"later", b"an hour later: delta off the varint table", None),
        (T0 + 9, b"x" * 20_000, b"key longer than 16 KiB", None),
        (T0 + 10, b"big", incompressible, [("size", b"70000")]),
        (T0 + 11, b"big", compressible, None),
        (T0 + 12, b"last", b"after the big ones", [("h", b"v")] * 3),
    ]


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize(("codec", "consumer"), _codec_consumer_params())
async def test_every_field_reads_back_byte_exact(
    cluster: BrokerUnderTest, client: KafkaClient, codec: int, consumer: str
) -> None:
    records = rich_records()
    base = await produce_batch(client, cluster.topic, 0, build(codec, records), acks=-1)
    assert base == 0

    got = await read_with(consumer, cluster.bootstrap_servers, cluster.topic, 0, count=len(records))

    assert_same(got, expected(base, records), consumer)


@pytest.mark.parametrize("codec", list(CODECS.values()), ids=list(CODECS))
async def test_own_decoder_reads_the_brokers_copy(
    cluster: BrokerUnderTest, client: KafkaClient, codec: int
) -> None:
    """The batch as the broker serves it on Fetch decodes (CRC checked) to what was appended.

    The broker rewrites base offset and partition leader epoch, which lie
    outside the CRC; everything from the attributes on must be ours, unchanged.
    """
    records = rich_records()
    sent = build(codec, records, producer_id=4242, producer_epoch=7, base_sequence=0)
    base = await produce_batch(client, cluster.topic, 1, sent, acks=-1)

    raw = await fetch_raw_records(cluster.bootstrap_servers, cluster.topic, 1)

    assert raw[21:] == sent[21:]  # attributes onwards: header fields, records section, byte for byte
    (batch,) = decode_batches(raw)
    assert batch.compression_type == codec
    assert batch.timestamp_type == TIMESTAMP_CREATE_TIME
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (4242, 7, 0)
    got = [ReadRecord(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records]
    assert_same(got, expected(base, records), "decode_batches")


@pytest.mark.parametrize("consumer", list(CONSUMERS))
async def test_many_records_in_one_batch(
    cluster: BrokerUnderTest, client: KafkaClient, consumer: str
) -> None:
    """17,000 small records: offset deltas of one, two and three varint bytes, past the builder's 16 Ki table."""
    records: list[Rec] = [
        (
            T0 + i // 7,
            None if i % 5 == 0 else b"k%d" % i,
            b"v%d" % i,
            [("i", b"%d" % i)] if i % 3 == 0 else None,
        )
        for i in range(17_000)
    ]
    base = await produce_batch(client, cluster.topic, 2, build(compression.ZSTD, records), acks=-1)

    got = await read_with(consumer, cluster.bootstrap_servers, cluster.topic, 2, count=len(records))

    assert_same(got, expected(base, records), consumer)


@pytest.mark.parametrize("consumer", list(CONSUMERS))
async def test_several_batches_to_one_partition(
    cluster: BrokerUnderTest, client: KafkaClient, consumer: str
) -> None:
    """Batches of every codec, one after another: contiguous base offsets, read across batch boundaries.

    Also starts a read in the middle of a compressed batch: the consumer must
    skip that batch's earlier records by their offsets, which only works if
    the offset deltas we wrote are right.
    """
    batches: list[tuple[int, list[Rec]]] = []
    for n, codec in enumerate(_codecs_readable_by(consumer)):
        batches.append(
            (
                codec,
                [
                    (T0 + 100 * n + i, b"b%d-k%d" % (n, i), b"b%d-v%d" % (n, i), [("batch", b"%d" % n)])
                    for i in range(n + 2)
                ],
            )
        )
    want: list[ReadRecord] = []
    next_offset = 0
    for codec, records in batches:
        base = await produce_batch(client, cluster.topic, 3, build(codec, records), acks=-1)
        assert base == next_offset
        want += expected(base, records)
        next_offset = base + len(records)

    got = await read_with(consumer, cluster.bootstrap_servers, cluster.topic, 3, count=len(want))
    assert_same(got, want, consumer)

    start = len(batches[0][1]) + len(batches[1][1]) + 1  # second record of the third (compressed) batch
    got_tail = await read_with(
        consumer, cluster.bootstrap_servers, cluster.topic, 3, count=len(want) - start, start_offset=want[start].offset
    )
    assert_same(got_tail, want[start:], f"{consumer} from offset {want[start].offset}")


async def test_batches_to_several_partitions(cluster: BrokerUnderTest, client: KafkaClient) -> None:
    """One batch per partition of ``orders``, leaders spread over the brokers: no cross-talk, all at offset 0."""
    partitions = (await client.refresh_metadata([cluster.topic])).partitions_for(cluster.topic)
    assert partitions is not None and len(partitions) == 6
    sent: dict[int, list[Rec]] = {}
    for p in partitions:
        codec = p % 5
        records: list[Rec] = [
            (T0 + p * 10 + i, b"p%d" % p, b"p%d-v%d" % (p, i), [("partition", b"%d" % p)])
            for i in range(p + 1)
        ]
        sent[p] = records
        assert await produce_batch(client, cluster.topic, p, build(codec, records), acks=-1) == 0

    for p, records in sent.items():
        for consumer in _consumers_for(p % 5):
            got = await read_with(consumer, cluster.bootstrap_servers, cluster.topic, p, count=len(records))
            assert_same(got, expected(0, records), f"{consumer} partition {p}")


@pytest.mark.parametrize("consumer", list(CONSUMERS))
async def test_idempotent_producer_state_reads_back(
    cluster: BrokerUnderTest, client: KafkaClient, consumer: str
) -> None:
    """Batches stamped with producer id, epoch and sequences, including one re-stamped after an epoch bump.

    ``build`` a second time only rewrites the header and the CRC over the
    cached records section; the consumers check that CRC, so a stale or
    wrongly-ranged CRC after re-stamping fails here.
    """
    first: list[Rec] = [(T0 + i, b"k%d" % i, b"first-%d" % i, [("seq", b"%d" % i)]) for i in range(4)]
    second: list[Rec] = [(T0 + 10 + i, b"k%d" % i, b"second-%d" % i, None) for i in range(3)]
    b1 = build(compression.LZ4, first, producer_id=1_000_001, producer_epoch=0, base_sequence=0)
    builder = RecordBatchBuilder(compression.GZIP, 16384)
    for ts, key, value, headers in second:
        builder.append(ts, key, value, headers)
    stale = builder.build(producer_id=1_000_001, producer_epoch=0, base_sequence=4)
    restamped = builder.build(producer_id=1_000_001, producer_epoch=1, base_sequence=0)
    assert stale[21:61] != restamped[21:61] and stale[61:] == restamped[61:]

    base1 = await produce_batch(client, cluster.topic, 4, b1, acks=-1)
    base2 = await produce_batch(client, cluster.topic, 4, restamped, acks=-1)
    assert base2 == base1 + len(first)

    got = await read_with(consumer, cluster.bootstrap_servers, cluster.topic, 4, count=len(first) + len(second))

    assert_same(got, expected(base1, first) + expected(base2, second), consumer)
    raw = await fetch_raw_records(cluster.bootstrap_servers, cluster.topic, 4)
    states = [(b.producer_id, b.producer_epoch, b.base_sequence) for b in decode_batches(raw)]
    assert states == [(1_000_001, 0, 0), (1_000_001, 1, 0)]


# ------------------------------------------------------------------- CRC


CRC_OFFSET = 17  # baseOffset 8 + batchLength 4 + partitionLeaderEpoch 4 + magic 1


async def _produce_good_bad_good(client: KafkaClient, partition: int) -> list[list[Rec]]:
    """Offsets 0 (intact), 1 (CRC with one byte flipped), 2 (intact); the mock accepts all three."""
    batches: list[list[Rec]] = [[(T0 + i, b"k%d" % i, b"v%d" % i, [("n", b"%d" % i)])] for i in range(3)]
    for i, records in enumerate(batches):
        data = bytearray(build(compression.NONE, records))
        if i == 1:
            data[CRC_OFFSET] ^= 0x01
        assert await produce_batch(client, "orders", partition, bytes(data), acks=-1) == i
    return batches


async def test_crc_is_checked_by_confluent_consumer(mock_cluster: MockCluster, mock_client: KafkaClient) -> None:
    """The CRC matters, although the mock broker does not check it.

    librdkafka's mock accepts a batch whose CRC-32C is wrong and serves it as
    it came (measured: no error on Produce, base offset assigned), so the
    broker cannot tell us whether aioproducer's CRCs are right. confluent-kafka's
    consumer with ``check.crcs=true`` is the CRC oracle instead: it must reject
    the batch with one CRC byte flipped (``_BAD_MSG``) and read the intact
    batches on either side of it. With ``check.crcs=false`` it reads the
    corrupt batch too, which shows the mock stored and served it unchanged and
    that the CRC check alone made the difference.
    """
    from confluent_kafka import KafkaError

    batches = await _produce_good_bad_good(mock_client, 5)
    bs = mock_cluster.bootstrap_servers

    before = await read_with("confluent-kafka", bs, "orders", 5, count=1, start_offset=0)
    assert_same(before, expected(0, batches[0]), "confluent-kafka before the corrupt batch")
    with pytest.raises(ReadbackError) as info:
        await read_with("confluent-kafka", bs, "orders", 5, count=1, start_offset=1)
    error: Any = info.value.error  # confluent-kafka's KafkaError
    assert error.code() == KafkaError._BAD_MSG
    assert "CRC" in error.str()
    after = await read_with("confluent-kafka", bs, "orders", 5, count=1, start_offset=2)
    assert_same(after, expected(2, batches[2]), "confluent-kafka after the corrupt batch")

    unchecked = await read_with("confluent-kafka", bs, "orders", 5, count=3, check_crcs=False)
    assert_same(
        unchecked, expected(0, batches[0]) + expected(1, batches[1]) + expected(2, batches[2]), "unchecked"
    )


@pytest.mark.parametrize("consumer", ["aiokafka", "kafka-python"])
async def test_crc_is_checked_by_python_consumers(
    mock_cluster: MockCluster, mock_client: KafkaClient, consumer: str
) -> None:
    """aiokafka and kafka-python (CRC checks on by default) refuse the corrupt batch as well."""
    batches = await _produce_good_bad_good(mock_client, 5)
    bs = mock_cluster.bootstrap_servers

    with pytest.raises(ReadbackError, match="(?i)crc") as info:
        await read_with(consumer, bs, "orders", 5, count=1, start_offset=1)
    assert type(info.value.error).__name__ in {"CorruptRecordException", "CorruptRecordError"}
    after = await read_with(consumer, bs, "orders", 5, count=1, start_offset=2)
    assert_same(after, expected(2, batches[2]), f"{consumer} after the corrupt batch")


async def test_crc_is_checked_by_decode_batches(mock_cluster: MockCluster, mock_client: KafkaClient) -> None:
    """aioproducer's own decoder raises ProtocolError on the corrupt batch as fetched from the broker."""
    await _produce_good_bad_good(mock_client, 5)
    bs = mock_cluster.bootstrap_servers

    raw = await fetch_raw_records(bs, "orders", 5)
    assert [b.base_offset for b in decode_batches(raw[: _batch_end(raw, 0)])] == [0]
    with pytest.raises(ProtocolError, match="CRC"):
        decode_batches(raw)
    intact_tail = await fetch_raw_records(bs, "orders", 5, offset=2)
    assert [b.base_offset for b in decode_batches(intact_tail)] == [2]


def _batch_end(raw: bytes, pos: int) -> int:
    return pos + 12 + int.from_bytes(raw[pos + 8 : pos + 12], "big", signed=True)


async def test_real_kafka_refuses_a_batch_with_a_wrong_crc(kafka_cluster: KafkaCluster) -> None:
    """Real Kafka checks the CRC the mock ignores: the same flipped byte is CORRUPT_MESSAGE, nothing written."""
    topic = new_topic(kafka_cluster, 1)
    async for client in _client(kafka_cluster.bootstrap_servers):
        data = bytearray(build(compression.NONE, [(T0, b"k", b"v", None)]))
        data[CRC_OFFSET] ^= 0x01
        with pytest.raises(CorruptMessageError):
            await produce_batch(client, topic, 0, bytes(data), acks=-1)
        assert await produce_batch(client, topic, 0, build(compression.NONE, [(T0, b"k", b"v", None)]), acks=-1) == 0

