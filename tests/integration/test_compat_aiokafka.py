"""aioproducer.compat.aiokafka: aiokafka programs, written as aiokafka's users write them, with the import changed.

Each program below is the shape of aiokafka's README and docs examples (send_and_wait, a
serializer, create_batch/send_batch, transactions, a custom partitioner, SASL and SSL keywords,
a FastAPI service); it runs on librdkafka's mock cluster and its records are read back by
aiokafka's own consumer and by confluent-kafka's. Keyed placement is compared with a real
aiokafka producer writing the same keys to the same cluster.
"""

from __future__ import annotations

import inspect
import json
import logging
import random
import ssl
from typing import Any

import aiokafka
import aiokafka.errors
import aiokafka.structs
import pytest
from readback import read_aiokafka, read_confluent

from aioproducer import (
    ConfigError,
    IllegalStateError,
    KafkaTimeoutError,
    ProducerFencedError,
)
from aioproducer.compat.aiokafka import (
    AIOKAFKA_KEYWORDS,
    AIOKafkaProducer,
    RecordMetadata,
    TopicPartition,
    errors,
)
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.integration


async def test_readme_program_send_and_wait(mock_cluster: MockCluster) -> None:
    """aiokafka's README producer, import changed: start, send_and_wait, stop; read back by both consumers."""
    producer = AIOKafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers)
    await producer.start()
    try:
        metadata = await producer.send_and_wait("orders", b"Super message", partition=2)
    finally:
        await producer.stop()
    assert isinstance(metadata, RecordMetadata)
    assert metadata._fields == aiokafka.structs.RecordMetadata._fields  # aiokafka's fields, in aiokafka's order
    assert (metadata.topic, metadata.partition, metadata.offset) == ("orders", 2, 0)
    assert metadata.topic_partition == aiokafka.structs.TopicPartition("orders", 2)
    assert metadata.log_start_offset == -1
    for records in (
        await read_aiokafka(mock_cluster.bootstrap_servers, "orders", 2, count=1),
        read_confluent(mock_cluster.bootstrap_servers, "orders", 2, count=1),
    ):
        assert [(r.key, r.value) for r in records] == [(None, b"Super message")]


async def test_send_takes_aiokafkas_argument_order(mock_cluster: MockCluster) -> None:
    """aiokafka's 4th positional argument is the partition, its 6th the headers; the future is awaited as there."""
    async with AIOKafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        future = await producer.send("orders", b"v", b"k", 4, 1_700_000_000_000, [("h", b"1")])
        metadata = await future
    assert metadata.partition == 4
    assert metadata.topic_partition == TopicPartition("orders", 4) and metadata.log_start_offset == -1
    [record] = await read_aiokafka(mock_cluster.bootstrap_servers, "orders", 4, count=1)
    assert (record.key, record.value, record.headers, record.timestamp) == (b"k", b"v", [("h", b"1")], 1_700_000_000_000)


async def test_keyed_records_land_where_aiokafka_puts_them(mock_cluster: MockCluster) -> None:
    """The same keys from aiokafka's producer and from the facade go to the same partitions."""
    keys = [f"user-{i}".encode() for i in range(40)]
    theirs = aiokafka.AIOKafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers)
    await theirs.start()
    try:
        expected = [await theirs.send_and_wait("orders", b"x", key=key) for key in keys]
    finally:
        await theirs.stop()
    async with AIOKafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        got = [await producer.send_and_wait("orders", b"x", key=key) for key in keys]
    assert [md.partition for md in got] == [md.partition for md in expected]
    assert len({md.partition for md in got}) > 3  # the keys spread: a constant answer would not pass by luck
    # The mock stamps records with its own (log-append) time; both clients say so alike.
    assert {(md.timestamp_type, md.timestamp) for md in got} == {(md.timestamp_type, md.timestamp) for md in expected}


async def test_json_serializer_program_and_null_value(mock_cluster: MockCluster) -> None:
    """aiokafka's docs serializer example; a None value goes through the serializer (b'null'), as aiokafka and Java do."""

    def serializer(value: Any) -> bytes:
        return json.dumps(value).encode()

    async with AIOKafkaProducer(
        bootstrap_servers=mock_cluster.bootstrap_servers,
        value_serializer=serializer,
        key_serializer=str.encode,
    ) as producer:
        await producer.send_and_wait("orders", {"foo": "bar"}, key="a", partition=0)
        await producer.send_and_wait("orders", None, key="a", partition=0)
    records = read_confluent(mock_cluster.bootstrap_servers, "orders", 0, count=2)
    assert [(r.key, r.value) for r in records] == [(b"a", b'{"foo": "bar"}'), (b"a", b"null")]


async def test_batch_program(mock_cluster: MockCluster) -> None:
    """aiokafka's batch example: create_batch, append until None or done, partitions_for as a set, send_batch."""
    async with AIOKafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers, max_batch_size=1000) as producer:
        batch = producer.create_batch()
        appended = 0
        while batch.append(key=None, value=b"msg %d" % appended, timestamp=None, headers=[("n", b"%d" % appended)]) is not None:
            appended += 1
        assert 10 < appended < 200 and batch.record_count() == appended and 0 < batch.size() <= 1000
        partitions = await producer.partitions_for("orders")
        assert partitions == {0, 1, 2, 3, 4, 5}
        partition = random.choice(tuple(partitions))
        future = await producer.send_batch(batch, "orders", partition=partition)
        metadata = await future
    assert (metadata.partition, metadata.offset) == (partition, 0)
    records = await read_aiokafka(mock_cluster.bootstrap_servers, "orders", partition, count=appended)
    assert [r.value for r in records] == [b"msg %d" % i for i in range(appended)]
    assert records[-1].headers == [("n", b"%d" % (appended - 1))]


async def test_custom_partitioner_in_aiokafkas_signature(mock_cluster: MockCluster) -> None:
    """aiokafka calls partitioner(key_bytes, all_partitions, available_partitions); so does the facade."""
    seen: list[tuple[bytes | None, list[int]]] = []

    def last_partition(key_bytes: bytes | None, all_partitions: list[int], available: list[int]) -> int:
        seen.append((key_bytes, all_partitions))
        return all_partitions[-1]

    async with AIOKafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers, partitioner=last_partition) as producer:
        metadata = await producer.send_and_wait("orders", b"v", key=b"k")
    assert metadata.partition == 5 and seen == [(b"k", [0, 1, 2, 3, 4, 5])]


def test_aiokafkas_default_partitioner_object_is_the_built_in_one() -> None:
    from aiokafka.partitioner import DefaultPartitioner

    producer = AIOKafkaProducer(bootstrap_servers="b:1", partitioner=DefaultPartitioner())
    assert producer.producer.config.partitioner_class is None  # murmur2 built in: the fast path stays


async def test_transaction_program_on_the_mock(mock_cluster: MockCluster) -> None:
    """aiokafka's transaction example: async with producer.transaction(); begin/commit/abort as coroutines."""
    async with AIOKafkaProducer(
        bootstrap_servers=mock_cluster.bootstrap_servers, transactional_id="tx-compat", linger_ms=5
    ) as producer:
        async with producer.transaction():
            await producer.send("orders", b"committed", partition=1)
        await producer.begin_transaction()
        await producer.send("orders", b"aborted", partition=1)
        await producer.abort_transaction()
        with pytest.raises(errors.IllegalOperation):  # aiokafka's name for a call out of order
            await producer.send("orders", b"outside", partition=1)
    records = read_confluent(mock_cluster.bootstrap_servers, "orders", 1, count=1)
    assert [r.value for r in records] == [b"committed"]


async def test_fastapi_service(mock_cluster: MockCluster) -> None:
    """A FastAPI service as aiokafka users write one: producer started in the lifespan, send_and_wait per request."""
    from collections.abc import AsyncIterator
    from contextlib import asynccontextmanager

    import httpx
    from fastapi import FastAPI

    state: dict[str, AIOKafkaProducer] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        producer = AIOKafkaProducer(
            bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=lambda v: json.dumps(v).encode()
        )
        await producer.start()
        state["producer"] = producer
        try:
            yield
        finally:
            await producer.stop()

    app = FastAPI(lifespan=lifespan)

    @app.post("/orders/{order_id}")
    async def create(order_id: str, body: dict[str, Any]) -> dict[str, int]:
        metadata = await state["producer"].send_and_wait("orders", body, key=order_id.encode(), partition=3)
        return {"offset": metadata.offset}

    async with lifespan(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://svc") as client:
            answers = [(await client.post(f"/orders/{i}", json={"n": i})).json() for i in range(3)]
    assert answers == [{"offset": 0}, {"offset": 1}, {"offset": 2}]
    records = await read_aiokafka(mock_cluster.bootstrap_servers, "orders", 3, count=3)
    assert [(r.key, r.value) for r in records] == [(b"%d" % i, b'{"n": %d}' % i) for i in range(3)]


# ---------------------------------------------------------------------- keywords and defaults


def test_every_aiokafka_keyword_has_a_meaning_here() -> None:
    """The facade knows each keyword of aiokafka's constructor: accepted, translated or ignored with a reason."""
    theirs = set(inspect.signature(aiokafka.AIOKafkaProducer.__init__).parameters) - {"self"}
    assert theirs == AIOKAFKA_KEYWORDS


def test_defaults_are_this_librarys_unless_given() -> None:
    safe = AIOKafkaProducer(bootstrap_servers="broker").producer.config
    assert (safe.enable_idempotence, safe.acks, safe.bootstrap_servers) == (True, -1, [("broker", 9092)])
    assert safe.compression_type == 0
    theirs = AIOKafkaProducer(bootstrap_servers=["a:1", "b"], acks=1, enable_idempotence=False).producer.config
    assert (theirs.enable_idempotence, theirs.acks, theirs.bootstrap_servers) == (False, 1, [("a", 1), ("b", 9092)])


def test_ignored_keywords_say_why_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="aioproducer.compat.aiokafka")
    AIOKafkaProducer(bootstrap_servers="b:1", api_version="2.0.0", loop=object(), sasl_kerberos_domain_name="x")
    lines = [r.getMessage() for r in caplog.records if r.name == "aioproducer.compat.aiokafka"]
    assert len(lines) == 3
    assert any("api_version" in line and "negotiated" in line for line in lines)
    caplog.clear()
    AIOKafkaProducer(bootstrap_servers="b:1", api_version="auto")  # aiokafka's default: nothing to say
    assert not [r for r in caplog.records if r.name == "aioproducer.compat.aiokafka"]


def test_sasl_and_ssl_keywords() -> None:
    context = ssl.create_default_context()
    config = AIOKafkaProducer(
        bootstrap_servers="b:9093", security_protocol="SASL_SSL", ssl_context=context,
        sasl_plain_username="alice", sasl_plain_password="s3cret-Pw",
    ).producer.config
    assert (config.security_protocol, config.sasl_mechanism, config.sasl_username) == ("SASL_SSL", "PLAIN", "alice")
    assert config.ssl_context is context and config.sasl_password is not None and config.sasl_password.value == "s3cret-Pw"
    assert "s3cret-Pw" not in repr(config)
    scram = AIOKafkaProducer(
        bootstrap_servers="b:9093", security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="u", sasl_plain_password="p",
    ).producer.config
    assert scram.sasl_mechanism == "SCRAM-SHA-512"


async def test_aiokafka_token_provider_is_used_as_it_is() -> None:
    from aiokafka.abc import AbstractTokenProvider

    class Provider(AbstractTokenProvider):  # type: ignore[misc]
        async def token(self) -> str:
            return "the-token"

        def extensions(self) -> dict[str, str]:
            return {"traceId": "7"}

    config = AIOKafkaProducer(
        bootstrap_servers="b:1", security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider()
    ).producer.config
    assert await config.sasl_oauth_token_provider() == "the-token"
    assert config.sasl_oauthbearer_extensions == {"traceId": "7"}


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"max_batch_sise": 10}, r"unknown keyword argument 'max_batch_sise'; did you mean 'max_batch_size'|did you mean"),
        ({"max_batch_size": 10, "batch_size": 20}, r"max_batch_size= and batch_size= are the same setting"),
        ({"sasl_plain_username": "a", "sasl_username": "b"}, r"sasl_plain_username= and sasl_username= are the same setting"),
        ({"partitioner": "murmur2"}, r"partitioner must be a callable partitioner\(key_bytes, all_partitions, available_partitions\)"),
        ({"bootstrap_servers": 9092}, r"bootstrap_servers must be a 'host\[:port\]' string"),
        ({"compression_type": "brotli"}, r"compression.type must be one of none, gzip, snappy, lz4, zstd"),
        ({"acks": 2}, r"acks must be one of all, -1, 0, 1"),
        ({"linger_ms": "soon"}, r"linger.ms must be an integer"),
    ],
)
def test_bad_keywords_name_the_keyword(keywords: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        AIOKafkaProducer(**{"bootstrap_servers": "b:1", **keywords})


def test_a_wrongly_typed_password_is_not_echoed() -> None:
    with pytest.raises(ConfigError) as caught:
        AIOKafkaProducer(bootstrap_servers="b:1", sasl_plain_password=["hunter2-secret"])
    assert "sasl.password" in str(caught.value) and "hunter2-secret" not in str(caught.value)


async def test_bad_calls_name_the_argument(mock_cluster: MockCluster) -> None:
    async with AIOKafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        with pytest.raises(TypeError, match="send_batch: batch must come from create_batch"):
            await producer.send_batch([b"x"], "orders", partition=0)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"send_offsets_to_transaction\(offsets=...\) must be a mapping"):
            await producer.send_offsets_to_transaction([("orders", 0)], "group")  # type: ignore[arg-type]
        with pytest.raises(Exception, match="partition"):
            await producer.send("orders", b"v", None, 99)


# ---------------------------------------------------------------------- errors module


def test_errors_module_has_every_aiokafka_name() -> None:
    names = [n for n in dir(aiokafka.errors) if isinstance(getattr(aiokafka.errors, n), type)
             and issubclass(getattr(aiokafka.errors, n), BaseException)]
    assert len(names) > 100
    missing = [n for n in names if not isinstance(getattr(errors, n, None), type)]
    assert missing == []
    for name in names:
        theirs, ours = getattr(aiokafka.errors, name), getattr(errors, name)
        code = getattr(theirs, "errno", None)
        if isinstance(code, int) and code > 0 and issubclass(ours, errors.BrokerResponseError):
            assert ours.errno == code, name


def test_errors_are_the_classes_the_producer_raises() -> None:
    assert errors.KafkaTimeoutError is KafkaTimeoutError
    assert errors.IllegalOperation is IllegalStateError
    assert errors.ProducerFenced is ProducerFencedError
    assert errors.KafkaError is errors.KafkaError and issubclass(errors.ProducerClosed, errors.KafkaError)

