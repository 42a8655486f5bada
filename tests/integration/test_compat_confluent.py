"""aioproducer.compat.confluent: confluent-kafka programs, as its users write them, with the import changed.

The programs keep librdkafka's configuration keys; they run on librdkafka's mock cluster, and
their records are read back by confluent-kafka's consumer and by aiokafka's. Keyed placement under
each of librdkafka's partitioners is compared with confluent-kafka's own producer on the same cluster.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import confluent_kafka
import pytest
from readback import read_aiokafka, read_confluent

from aioproducer import KafkaError as AioproducerError
from aioproducer import ProducerFencedError, RecordTooLargeError
from aioproducer.compat.confluent import (
    AIOProducer,
    KafkaError,
    KafkaException,
    Message,
    kafka_error_of,
)
from aioproducer.errors import (
    ERRORS_BY_CODE,
    MessageTooLargeError,
    NotEnoughReplicasError,
)
from aioproducer.protocol.messages import PRODUCE
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.integration


async def test_docs_program_produce_and_await(mock_cluster: MockCluster) -> None:
    """confluent-kafka's AIOProducer example: await produce() for a future, await it for the message."""
    producer = AIOProducer({"bootstrap.servers": mock_cluster.bootstrap_servers})
    try:
        delivery = await producer.produce("orders", value="hello ✓", key="k1", partition=2, headers={"trace": "t-1"})
        msg = await delivery
    finally:
        await producer.close()
    assert isinstance(msg, Message) and msg.error() is None
    assert (msg.topic(), msg.partition(), msg.offset()) == ("orders", 2, 0)
    assert (msg.key(), msg.value(), msg.headers()) == (b"k1", "hello ✓".encode(), [("trace", b"t-1")])
    latency = msg.latency()
    assert latency is not None and latency >= 0 and msg.timestamp()[0] in (1, 2)
    for records in (
        read_confluent(mock_cluster.bootstrap_servers, "orders", 2, count=1),
        await read_aiokafka(mock_cluster.bootstrap_servers, "orders", 2, count=1),
    ):
        assert [(r.key, r.value, r.headers) for r in records] == [(b"k1", "hello ✓".encode(), [("trace", b"t-1")])]


async def test_a_librdkafka_configuration_moves_as_it_is(mock_cluster: MockCluster, caplog: pytest.LogCaptureFixture) -> None:
    """A service's real librdkafka dict: translated keys take effect, the others warn once each, callbacks run."""
    delivered: list[tuple[KafkaError | None, Message]] = []
    conf: dict[str, Any] = {
        "bootstrap.servers": mock_cluster.bootstrap_servers,
        "client.id": "billing",
        "message.timeout.ms": 45000,
        "queue.buffering.max.ms": 20,
        "queue.buffering.max.kbytes": 2048,
        "queue.buffering.max.messages": 100000,
        "batch.num.messages": 1000,
        "compression.codec": "lz4",
        "message.max.bytes": 2_000_000,
        "socket.keepalive.enable": True,
        "statistics.interval.ms": 5000,
        "stats_cb": lambda stats: None,
        "error_cb": lambda err: None,
        "debug": "broker,topic",
        "on_delivery": lambda err, msg: delivered.append((err, msg)),
    }
    caplog.set_level(logging.WARNING, logger="aioproducer")
    async with AIOProducer(conf) as producer:
        config = producer.producer.config
        assert (config.delivery_timeout_ms, config.linger_ms, config.buffer_memory) == (45000, 20, 2048 * 1024)
        assert (config.compression_type, config.max_request_size, config.client_id) == (3, 2_000_000, "billing")
        futures = [await producer.produce("orders", value=b"v%d" % i, partition=0) for i in range(5)]
        await producer.flush()
        assert [(await f).offset() for f in futures] == [0, 1, 2, 3, 4]
        assert await producer.poll(0) == 0
    warned = sorted(r.getMessage().split("librdkafka's ")[1].split()[0] for r in caplog.records if r.levelno == logging.WARNING and "librdkafka's" in r.getMessage())
    assert warned == sorted(["queue.buffering.max.messages", "batch.num.messages", "socket.keepalive.enable",
                             "statistics.interval.ms", "stats_cb", "error_cb", "debug"])
    assert [(err, msg.offset()) for err, msg in delivered] == [(None, i) for i in range(5)]
    assert [r.value for r in read_confluent(mock_cluster.bootstrap_servers, "orders", 0, count=5)] == [b"v%d" % i for i in range(5)]


@pytest.mark.parametrize("partitioner", ["consistent_random", "consistent", "murmur2", "murmur2_random", "fnv1a", "fnv1a_random"])
async def test_keys_land_where_librdkafka_puts_them(mock_cluster: MockCluster, partitioner: str) -> None:
    """Each librdkafka partitioner named in the configuration places keys as confluent-kafka's own producer does."""
    keys = [f"account-{i}".encode() for i in range(30)]
    theirs = confluent_kafka.Producer({"bootstrap.servers": mock_cluster.bootstrap_servers, "partitioner": partitioner})
    expected: dict[bytes | None, int | None] = {}
    for key in keys:
        theirs.produce("orders", b"x", key, on_delivery=lambda err, msg: expected.__setitem__(msg.key(), msg.partition()))
    assert await asyncio.to_thread(theirs.flush, 10) == 0
    async with AIOProducer({"bootstrap.servers": mock_cluster.bootstrap_servers, "partitioner": partitioner}) as producer:
        futures = [await producer.produce("orders", b"x", key) for key in keys]
        got = {(await f).key(): (await f).partition() for f in futures}
    assert got == expected and len(set(got.values())) > 3


async def test_delivery_failure_is_a_kafka_exception(mock_cluster: MockCluster) -> None:
    """A refused record: the callback gets the error, the future raises KafkaException; code and flags as confluent-kafka's."""
    seen: list[KafkaError | None] = []
    async with AIOProducer({"bootstrap.servers": mock_cluster.bootstrap_servers, "retries": 0, "enable.idempotence": False}) as producer:
        mock_cluster.push_request_errors(PRODUCE, NotEnoughReplicasError.errno)
        future = await producer.produce("orders", b"v", partition=1, on_delivery=lambda err, msg: seen.append(err))
        with pytest.raises(KafkaException) as caught:
            await future
    error = caught.value.args[0]
    assert isinstance(error, KafkaError) and seen == [error]
    assert (error.code(), error.name()) == (19, "NOT_ENOUGH_REPLICAS")
    assert error.retriable() and not error.fatal() and not error.txn_requires_abort()
    assert isinstance(caught.value, AioproducerError) and isinstance(caught.value.__cause__, NotEnoughReplicasError)


async def test_transaction_program(mock_cluster: MockCluster) -> None:
    """confluent-kafka's transactional loop: init, begin, produce, commit; abort leaves nothing visible."""
    producer = AIOProducer({"bootstrap.servers": mock_cluster.bootstrap_servers, "transactional.id": "tx-confluent"})
    try:
        await producer.init_transactions()
        await producer.begin_transaction()
        await producer.produce("orders", b"kept", partition=3)
        await producer.commit_transaction()
        await producer.begin_transaction()
        await producer.produce("orders", b"dropped", partition=3)
        await producer.abort_transaction()
        with pytest.raises(KafkaException) as caught:
            await producer.commit_transaction()  # no transaction: a state error, as librdkafka's _STATE
        assert caught.value.args[0].code() == KafkaError._STATE
    finally:
        await producer.close()
    assert [r.value for r in read_confluent(mock_cluster.bootstrap_servers, "orders", 3, count=1)] == [b"kept"]


def test_error_flags() -> None:
    fenced = kafka_error_of(ProducerFencedError("fenced"), transactional=True)
    assert (fenced.code(), fenced.fatal(), fenced.retriable(), fenced.txn_requires_abort()) == (90, True, False, False)
    failed = kafka_error_of(MessageTooLargeError(), transactional=True)
    assert (failed.code(), failed.fatal(), failed.txn_requires_abort()) == (10, False, True)
    local = kafka_error_of(RecordTooLargeError("too big"))
    assert (local.code(), local.name(), str(local)) == (KafkaError.MSG_SIZE_TOO_LARGE, "MSG_SIZE_TOO_LARGE", "too big")
    assert KafkaError(KafkaError._MSG_TIMED_OUT) == KafkaError._MSG_TIMED_OUT


def test_codes_and_names_are_librdkafkas() -> None:
    names = [n for n in vars(KafkaError) if n.lstrip("_").isupper() and isinstance(getattr(KafkaError, n), int)]
    assert len(names) > 20
    assert {n: getattr(KafkaError, n) for n in names} == {n: getattr(confluent_kafka.KafkaError, n) for n in names}
    for code in [*ERRORS_BY_CODE, *(getattr(KafkaError, n) for n in names)]:
        theirs = confluent_kafka.KafkaError(code).name()
        if not theirs.endswith("?"):  # librdkafka names every code it knows; newer ones it shows as ERR_n?
            assert KafkaError(code).name() == theirs, code


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        # linger.ms 5 (the default, as Kafka 4.x) + request.timeout.ms 30000
        ({"message.timeout.ms": 10000}, r"message.timeout.ms \(10000\) \(Java's delivery.timeout.ms here\) must be >= .*raise message.timeout.ms to at least 30005"),
        ({"message.timeout.ms": 60000, "delivery.timeout.ms": 60000}, r"message.timeout.ms and delivery.timeout.ms both set delivery.timeout.ms"),
        ({"enable.ssl.certificate.verification": False}, r"pass ssl_context="),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.kerberos.principal": "app@EXAMPLE.COM", "sasl.kerberos.keytab": "/nonexistent.keytab"}, r"sasl.kerberos.keytab '/nonexistent.keytab' is not a readable file"),
        ({"queue.buffering.max.kbytes": "lots"}, r"queue.buffering.max.kbytes \(Java's buffer.memory here\) must be a number"),
        ({"partitioner": "crc64"}, r"partitioner='crc64': not one of librdkafka's partitioners"),
        ({"on_delivery": 3}, r"on_delivery must be a callable cb\(err, msg\)"),
        ({"linger.msx": 5}, r"unknown config key 'linger.msx'; did you mean 'linger.ms'"),
    ],
)
def test_bad_configuration_names_the_key(conf: dict[str, Any], message: str) -> None:
    with pytest.raises((KafkaException, TypeError), match=message):
        AIOProducer({"bootstrap.servers": "b:1", **conf})


def test_unknown_constructor_argument() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'workers'"):
        AIOProducer({"bootstrap.servers": "b:1"}, workers=4)


def test_a_secret_is_not_in_the_error() -> None:
    with pytest.raises(KafkaException) as caught:
        AIOProducer({"bootstrap.servers": "b:1", "sasl.password": ["pa55-word-x"]})
    assert "sasl.password" in str(caught.value) and "pa55-word-x" not in str(caught.value)


def test_sasl_and_ssl_keys_of_a_confluent_configuration() -> None:
    """A Confluent Cloud style dict: SASL/SCRAM over TLS in librdkafka's keys, taken as they are."""
    producer = AIOProducer({
        "bootstrap.servers": "pkc-1.cloud:9092", "security.protocol": "sasl_ssl", "sasl.mechanisms": "SCRAM-SHA-256",
        "sasl.username": "svc", "sasl.password": "pa55-w0rd-y", "enable.ssl.certificate.verification": True,
        "ssl.endpoint.identification.algorithm": "https", "socket.keepalive.enable": True,
    })
    config = producer.producer.config
    assert (config.security_protocol, config.sasl_mechanisms, config.sasl_username) == ("SASL_SSL", "SCRAM-SHA-256", "svc")
    assert config.sasl_password is not None and config.sasl_password.value == "pa55-w0rd-y"
    assert "pa55-w0rd-y" not in repr(config)
