"""Registry-framed records end to end: aioproducer writes, confluent-kafka's deserializers read.

The producer sends through ``aioproducer.schema_registry`` serializers to librdkafka's mock
cluster; the records are read back with aiokafka (``readback``) and decoded with
confluent-kafka's own ``AvroDeserializer``, ``JSONDeserializer`` and ``ProtobufDeserializer``,
which fetch the writer's schema from the same test registry by the id (or GUID) in the record.
The registry's request log counts HTTP calls; its fault knobs make it fail.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField as CField
from confluent_kafka.serialization import SerializationContext as CContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from aioproducer import ConfigError, Producer, SerializationError
from aioproducer.schema_registry import (
    Schema,
    SchemaRegistryClient,
    SchemaRegistryError,
    header_schema_id_serializer,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
)
from aioproducer.schema_registry.avro import AvroSerializer
from aioproducer.schema_registry.json_schema import JSONSchemaSerializer
from aioproducer.schema_registry.protobuf import ProtobufSerializer
from aioproducer.testing import MockCluster, SchemaRegistry
from helpers import tls_files
from readback import ReadRecord, read_aiokafka

pytestmark = pytest.mark.integration

ORDER_V1 = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}],
})
#: v1 plus a field without a default: not BACKWARD compatible (a v2 reader cannot read v1's records).
ORDER_V2_INCOMPATIBLE = json.dumps({
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}, {"name": "currency", "type": "string"}],
})
KEY_SCHEMA = json.dumps({"type": "record", "name": "OrderKey", "namespace": "shop", "fields": [{"name": "id", "type": "long"}]})
ORDER_JSON = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
    "required": ["id"],
})


@dataclasses.dataclass
class Order:
    id: int
    amount: float


def _protobuf_types() -> tuple[type, type]:
    """``shop.Order`` and its nested ``shop.Order.Line``, built at run time (no generated module to ship)."""
    fdp = descriptor_pb2.FileDescriptorProto(name="aioproducer_test_shop.proto", package="aioproducer_test_shop", syntax="proto3")
    other = fdp.message_type.add(name="Other")
    other.field.add(name="x", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32)
    order = fdp.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64)
    order.field.add(name="note", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING)
    line = order.nested_type.add(name="Line")
    line.field.add(name="qty", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return (
        message_factory.GetMessageClass(pool.FindMessageTypeByName("aioproducer_test_shop.Order")),
        message_factory.GetMessageClass(pool.FindMessageTypeByName("aioproducer_test_shop.Order.Line")),
    )


@pytest.fixture()
def registry() -> Iterator[SchemaRegistry]:
    with SchemaRegistry() as r:
        yield r


def _client(registry: SchemaRegistry, **conf: Any) -> SchemaRegistryClient:
    # Fast retries: the fault tests must not wait seconds between attempts.
    return SchemaRegistryClient({"url": registry.url, "retries.wait.ms": 10, "retries.max.wait.ms": 50, **conf})


async def _read(mc: MockCluster, partition: int, count: int, topic: str = "orders") -> list[ReadRecord]:
    records = await read_aiokafka(mc.bootstrap_servers, topic, partition, count=count, timeout=8.0)
    assert len(records) == count
    return records


def _value(record: ReadRecord) -> bytes:
    assert record.value is not None
    return record.value


def _confluent_read(deserializer: Any, record: ReadRecord, topic: str = "orders", field: CField = CField.VALUE) -> Any:
    raw = record.value if field is CField.VALUE else record.key
    headers: Any = record.headers
    return deserializer(raw, CContext(topic, field, headers))


async def test_avro_records_are_read_by_confluents_deserializer(mock_cluster: MockCluster, registry: SchemaRegistry) -> None:
    client = _client(registry)
    values = AvroSerializer(client, ORDER_V1)
    keys = AvroSerializer(client, KEY_SCHEMA)
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, key_serializer=keys, value_serializer=values) as producer:
        for i in range(3):
            await producer.send("orders", {"id": i, "amount": i + 0.5}, key={"id": i}, partition=1)
        await (await producer.send("orders", Order(3, 3.5), key={"id": 3}, partition=1))  # a dataclass: its fields
    got = await _read(mock_cluster, 1, 4)
    reader = ConfluentClient({"url": registry.url})
    value_de, key_de = AvroDeserializer(reader), AvroDeserializer(reader)
    assert [_confluent_read(value_de, r) for r in got] == [{"id": i, "amount": i + 0.5} for i in range(4)]
    assert [_confluent_read(key_de, r, field=CField.KEY) for r in got] == [{"id": i} for i in range(4)]
    # the producer told each serializer its field (configure): keys and values have subjects of their own
    value_id = reader.get_latest_version("orders-value").schema_id
    assert value_id is not None and reader.get_latest_version("orders-key").schema_id != value_id
    assert _value(got[0])[:5] == b"\x00" + value_id.to_bytes(4, "big")  # the wire format: magic byte 0, the id
    await client.close()


async def test_json_schema_and_protobuf_records_are_read_by_confluents_deserializers(
    mock_cluster: MockCluster, registry: SchemaRegistry
) -> None:
    order_type, line_type = _protobuf_types()
    client = _client(registry)
    reader = ConfluentClient({"url": registry.url})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=JSONSchemaSerializer(ORDER_JSON, client)) as producer:
        await (await producer.send("orders", {"id": 1, "tags": ["a", "ü"]}, partition=2))
        with pytest.raises(SerializationError, match=r"does not fit JSON schema id \d+ of subject 'orders-value' at tags/0"):
            await producer.send("orders", {"id": 2, "tags": [3]}, partition=2)
    for message_type, sample, partition in ((order_type, order_type(id=7, note="x"), 3), (line_type, line_type(qty=4), 4)):
        async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=ProtobufSerializer(message_type, client)) as producer:
            await (await producer.send(f"proto-{partition}", sample, partition=0))
    [json_record] = await _read(mock_cluster, 2, 1)
    assert _confluent_read(JSONDeserializer(None, schema_registry_client=reader), json_record) == {"id": 1, "tags": ["a", "ü"]}
    for message_type, sample, partition in ((order_type, order_type(id=7, note="x"), 3), (line_type, line_type(qty=4), 4)):
        [record] = await _read(mock_cluster, 0, 1, topic=f"proto-{partition}")
        deserializer = ProtobufDeserializer(message_type, {"use.deprecated.format": False}, schema_registry_client=reader)
        assert _confluent_read(deserializer, record, topic=f"proto-{partition}") == sample
    # the nested message's index path [1, 0]: count 2, then 1 and 0, zigzag varints, after the id
    [line_record] = await _read(mock_cluster, 0, 1, topic="proto-4")
    assert _value(line_record)[5:8] == b"\x04\x02\x00"
    await client.close()


async def test_the_steady_state_asks_the_registry_nothing(mock_cluster: MockCluster, registry: SchemaRegistry) -> None:
    client = _client(registry)
    serializer = AvroSerializer(client, ORDER_V1)
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=serializer) as producer:
        futures = [await producer.send("orders", {"id": i, "amount": 1.0}) for i in range(100_000)]
        await producer.flush()
        assert all(f.result().offset >= 0 for f in futures)
    assert registry.requests == [("POST", "/subjects/orders-value/versions?normalize=false")]
    # and no await either: once the id is known, serialize() returns the bytes themselves
    assert type(serializer.serialize("orders", [], {"id": 1, "amount": 1.0})) is bytes


async def test_subject_name_strategies(mock_cluster: MockCluster, registry: SchemaRegistry) -> None:
    client = _client(registry)
    for strategy in (record_subject_name_strategy, topic_record_subject_name_strategy):
        serializer = AvroSerializer(client, ORDER_V1, conf={"subject.name.strategy": strategy})
        async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=serializer) as producer:
            await (await producer.send("orders", {"id": 1, "amount": 1.0}))
    assert sorted(await client.get_subjects()) == ["orders-shop.Order", "shop.Order"]
    await client.close()


async def test_use_latest_version_and_use_schema_id(mock_cluster: MockCluster, registry: SchemaRegistry) -> None:
    client = _client(registry)
    schema_id = await client.register_schema("orders-value", Schema(ORDER_V1))
    latest = AvroSerializer(client, None, conf={"auto.register.schemas": False, "use.latest.version": True})
    fixed = AvroSerializer(client, None, conf={"auto.register.schemas": False, "use.schema.id": schema_id})
    for serializer in (latest, fixed):
        async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=serializer) as producer:
            await (await producer.send("orders", {"id": 5, "amount": 2.0}, partition=5))
    got = await _read(mock_cluster, 5, 2)
    assert [_value(r)[1:5] for r in got] == [schema_id.to_bytes(4, "big")] * 2
    with pytest.raises(ConfigError, match="needs auto.register.schemas=False"):
        AvroSerializer(client, ORDER_V1, conf={"use.latest.version": True})
    await client.close()


async def test_an_incompatible_schema_is_refused_at_send_with_the_registrys_message(
    mock_cluster: MockCluster, registry: SchemaRegistry
) -> None:
    client = _client(registry)
    await client.register_schema("orders-value", Schema(ORDER_V1))
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=AvroSerializer(client, ORDER_V2_INCOMPATIBLE)) as producer:
        with pytest.raises(SerializationError, match="topic 'orders'") as info:
            await producer.send("orders", {"id": 1, "amount": 1.0, "currency": "EUR"})
        cause = info.value.__cause__
        assert isinstance(cause, SchemaRegistryError) and cause.http_status_code == 409
        assert "currency" in cause.error_message and registry.url in str(cause)
        assert producer.metrics()["incomplete_batches"] == 0
    # not registered, and not to be: a lookup that finds nothing is 40403
    lookup_only = AvroSerializer(client, ORDER_V2_INCOMPATIBLE, conf={"auto.register.schemas": False})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=lookup_only) as producer:
        with pytest.raises(SerializationError) as info:
            await producer.send("orders", {"id": 1, "amount": 1.0, "currency": "EUR"})
        assert isinstance(info.value.__cause__, SchemaRegistryError) and info.value.__cause__.error_code == 40403
    await client.close()


async def test_the_schema_id_in_a_header(mock_cluster: MockCluster, registry: SchemaRegistry) -> None:
    client = _client(registry)
    serializer = AvroSerializer(client, ORDER_V1, conf={"schema.id.serializer": header_schema_id_serializer})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=serializer) as producer:
        await (await producer.send("orders", {"id": 9, "amount": 9.0}, headers=[("trace", b"t")], partition=0))
    [record] = await _read(mock_cluster, 0, 1)
    names = [name for name, _ in record.headers]
    assert names == ["trace", "__value_schema_id"]
    guid_header = record.headers[1][1]
    assert guid_header is not None and len(guid_header) == 17 and guid_header[0] == 1
    assert _value(record)[0] != 0  # the payload alone: no magic byte 0 and id in front
    assert _confluent_read(AvroDeserializer(ConfluentClient({"url": registry.url})), record) == {"id": 9, "amount": 9.0}
    await client.close()


async def test_registry_faults_raise_at_send_naming_the_registry_and_lose_nothing_queued(
    mock_cluster: MockCluster, registry: SchemaRegistry
) -> None:
    client = _client(registry, **{"max.retries": 2, "timeout": 0.5})
    serializer = AvroSerializer(client, ORDER_V1)
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=serializer) as producer:
        # down at the first record: every attempt fails to connect
        registry.stop()
        with pytest.raises(SerializationError, match="the value serializer failed for topic 'orders'") as info:
            await producer.send("orders", {"id": 0, "amount": 0.0}, partition=3)
        cause = info.value.__cause__
        assert isinstance(cause, SchemaRegistryError) and cause.http_status_code == -1 and registry.url in str(cause)
        assert producer.metrics()["incomplete_batches"] == 0  # nothing queued with no id
        registry.start()
        # 500 twice, then 200: the retries ride it out
        registry.clear_requests()
        registry.fail_next(500, count=2)
        queued = await producer.send("orders", {"id": 1, "amount": 1.0}, partition=3)
        assert len(registry.requests) == 3
        # another topic (a subject of its own) while the registry answers garbage, then slowly:
        # clear errors at send(), and the record already queued stays queued
        for fault, message in (("garbage", "not JSON"), ("slow", "no answer within timeout=0.5 s")):
            if fault == "garbage":
                registry.garbage_next(3)  # every attempt: max.retries=2
            else:
                registry.delay(2.0)
            with pytest.raises(SerializationError, match="topic 'audit'") as info:
                await producer.send("audit", {"id": 1, "amount": 1.0}, partition=0)
            assert isinstance(info.value.__cause__, SchemaRegistryError) and message in str(info.value.__cause__)
            registry.delay(0)
        assert (await queued).offset == 0
        assert (await (await producer.send("orders", {"id": 2, "amount": 2.0}, partition=3))).offset == 1
    got = await _read(mock_cluster, 3, 2)
    reader = AvroDeserializer(ConfluentClient({"url": registry.url}))
    assert [_confluent_read(reader, r)["id"] for r in got] == [1, 2]


async def test_several_urls_fail_over_to_one_that_answers(registry: SchemaRegistry) -> None:
    from helpers import closed_port

    client = SchemaRegistryClient({"url": f"http://127.0.0.1:{closed_port()},{registry.url}", "max.retries": 0})
    assert await client.register_schema("s-value", Schema(ORDER_V1)) >= 0
    assert await client.get_schema(await client.register_schema("s-value", Schema(ORDER_V1))) == Schema(ORDER_V1)
    assert len(registry.requests) == 1  # the second register and the get came from the caches
    await client.close()


async def test_the_producer_closes_its_serializers_and_a_shared_client_reopens(mock_cluster: MockCluster, registry: SchemaRegistry) -> None:
    client = _client(registry)
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=AvroSerializer(client, ORDER_V1)) as producer:
        await (await producer.send("orders", {"id": 1, "amount": 1.0}))
        assert client._session is not None
    assert client._session is None  # closed with the producer (Java closes its serializers)
    assert await client.get_subjects() == ["orders-value"]  # and usable again
    await client.close()


def test_bad_serializer_and_client_configuration_is_refused_naming_it(registry: SchemaRegistry) -> None:
    client = _client(registry)
    with pytest.raises(ConfigError, match="schema_str is not a valid Avro schema"):
        AvroSerializer(client, '{"type": "recrod"}')
    with pytest.raises(ConfigError, match="unknown AvroSerializer configuration: auto.register"):
        AvroSerializer(client, ORDER_V1, conf={"auto.register": True})
    with pytest.raises(ConfigError, match="msg_type must be a generated Protobuf message class"):
        ProtobufSerializer(dict, client)
    shared = AvroSerializer(client, ORDER_V1)
    with pytest.raises(ConfigError, match="already serializes keys: make one for keys and one for values"):
        Producer(bootstrap_servers="localhost:9092", key_serializer=shared, value_serializer=shared)
    for conf, message in (
        ({}, "'url' must be a non-empty string"),
        ({"url": "ftp://x"}, "is not an http"),
        ({"url": "http://x", "colour": 1}, "unknown schema registry configuration: colour"),
        ({"url": "http://x", "timeout": 0}, "'timeout' must be a positive number"),
        ({"url": "http://x", "basic.auth.user.info": "no-colon"}, "must be 'user:password'"),
        ({"url": "http://u:p@x", "basic.auth.user.info": "a:b"}, "both given"),
        ({"url": "http://x", "bearer.auth.credentials.source": "OAUTHBEARER"}, "OAUTHBEARER is not supported"),
        ({"url": "http://x", "bearer.auth.credentials.source": "STATIC_TOKEN"}, "needs bearer.auth.token"),
    ):
        with pytest.raises(ConfigError, match=message):
            SchemaRegistryClient(conf)
    with pytest.raises(ConfigError) as info:
        SchemaRegistryClient({"url": "http://x", "basic.auth.user.info": "s3cret-without-colon"})
    assert "s3cret" not in str(info.value)  # a secret is never echoed


async def test_a_record_that_does_not_fit_its_schema_names_the_schema(mock_cluster: MockCluster, registry: SchemaRegistry) -> None:
    client = _client(registry)
    order_type, line_type = _protobuf_types()
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=AvroSerializer(client, ORDER_V1)) as producer:
        with pytest.raises(SerializationError, match=r"does not fit Avro schema id \d+ of subject 'orders-value'"):
            await producer.send("orders", {"id": "not a long", "amount": 1.0})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=ProtobufSerializer(order_type, client)) as producer:
        registry.clear_requests()
        with pytest.raises(SerializationError, match="got Line, not a Order"):
            await producer.send("orders", line_type(qty=1))
        assert registry.requests == []  # refused before the registry is asked
    await client.close()


def test_the_wire_format_golden_bytes() -> None:
    from aioproducer.schema_registry import MessageField, RegisteredSchema, SerializationContext, prefix_schema_id_serializer
    from aioproducer.schema_registry.protobuf import encode_indexes

    registered = RegisteredSchema(258, Schema(ORDER_V1), "orders-value", 1, "0f8fad5b-d9cb-469f-a165-70867728950e")
    ctx = SerializationContext("orders", MessageField.VALUE, [])
    assert prefix_schema_id_serializer(b"P", ctx, registered, b"") == b"\x00\x00\x00\x01\x02P"
    assert encode_indexes([0]) == b"\x00" and encode_indexes([1]) == b"\x02\x02" and encode_indexes([2, 70]) == b"\x04\x04\x8c\x01"
    assert header_schema_id_serializer(b"P", ctx, registered, b"\x00") == b"P"
    assert ctx.headers == [("__value_schema_id", b"\x01" + bytes.fromhex("0f8fad5bd9cb469fa16570867728950e") + b"\x00")]


async def test_the_client_calls_the_registry_api(registry: SchemaRegistry) -> None:
    async with _client(registry) as client:
        first = await client.register_schema_full_response("c-value", Schema(ORDER_V1))
        assert first.version == 1 and first.guid is not None
        found = await client.lookup_schema("c-value", Schema(ORDER_V1))
        assert (found.schema_id, found.version) == (first.schema_id, 1)
        assert (await client.get_latest_version("c-value")).schema_id == first.schema_id
        assert await client.get_versions("c-value") == [1]
        assert await client.test_compatibility("c-value", Schema(ORDER_V2_INCOMPATIBLE)) is False
        assert await client.set_compatibility("c-value", "none") == "NONE"
        assert await client.get_compatibility("c-value") == "NONE"
        assert await client.test_compatibility("c-value", Schema(ORDER_V2_INCOMPATIBLE)) is True
        assert json.loads((await client.get_version("c-value", 1)).schema.schema_str) == json.loads(ORDER_V1)
        assert await client.delete_subject("c-value") == [1]
        with pytest.raises(SchemaRegistryError) as info:
            await client.get_latest_version("never-value")
        assert info.value.error_code == 40401 and info.value.http_status_code == 404
        with pytest.raises(ValueError, match="subject_name"):
            await client.get_versions("")
        await asyncio.sleep(0)


def test_every_key_the_client_lists_is_one_it_takes() -> None:
    from aioproducer.schema_registry.client import CONFIG_KEYS

    for key in sorted(CONFIG_KEYS - {"url"}):
        with pytest.raises(ConfigError) as info:
            SchemaRegistryClient({"url": "http://x", key: object()})
        assert "unknown schema registry configuration" not in str(info.value), key


async def test_basic_and_bearer_authentication_reach_the_registry() -> None:
    with SchemaRegistry(basic_auth=("alice", "s3cret"), bearer_token="tok-1") as registry:
        for conf in (
            {"basic.auth.user.info": "alice:s3cret"},
            {"url": registry.url.replace("http://", "http://alice:s3cret@")},
            {"bearer.auth.credentials.source": "STATIC_TOKEN", "bearer.auth.token": "tok-1", "bearer.auth.logical.cluster": "lsrc-1"},
            {"bearer.auth.credentials.source": "CUSTOM", "bearer.auth.custom.provider.config": {"token": "tok-1"},
             "bearer.auth.custom.provider.function": _token_provider},
        ):
            async with SchemaRegistryClient({"url": registry.url, **conf}) as client:
                assert await client.register_schema("auth-value", Schema(ORDER_V1)) >= 0
        async with SchemaRegistryClient({"url": registry.url, "basic.auth.user.info": "alice:Pa55word-x"}) as client:
            with pytest.raises(SchemaRegistryError) as info:
                await client.get_subjects()
        assert info.value.http_status_code == 401 and "Pa55word" not in str(info.value)  # the password is not repeated


async def _token_provider(config: Any) -> dict[str, str]:
    await asyncio.sleep(0)
    return {"bearer.auth.token": config["token"]}


async def test_normalize_schemas_is_asked_of_the_registry(mock_cluster: MockCluster, registry: SchemaRegistry) -> None:
    client = _client(registry)
    serializer = AvroSerializer(client, ORDER_V1, conf={"normalize.schemas": True})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=serializer) as producer:
        await (await producer.send("orders", {"id": 1, "amount": 1.0}))
    assert registry.requests == [("POST", "/subjects/orders-value/versions?normalize=true")]
    await client.close()


async def test_tls_and_mutual_tls_settings(tmp_path: Any) -> None:
    import ssl

    files = tls_files(tmp_path)
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(files["server.pem"], files["server.key"])
    server.load_verify_locations(files["ca.pem"])
    server.verify_mode = ssl.CERT_OPTIONAL  # a client certificate is checked when one is given
    with SchemaRegistry(ssl_context=server) as registry:
        assert registry.url.startswith("https://")
        trusted = {"url": registry.url, "ssl.ca.location": files["ca.pem"], "max.retries": 0}
        async with SchemaRegistryClient(trusted) as client:
            assert await client.get_subjects() == []
        mutual = {**trusted, "ssl.certificate.location": files["client.pem"], "ssl.key.location": files["client.key"]}
        async with SchemaRegistryClient(mutual) as client:
            assert await client.get_subjects() == []
        async with SchemaRegistryClient({**trusted, "ssl.ca.location": False}) as client:  # verification off
            assert await client.get_subjects() == []
        async with SchemaRegistryClient({"url": registry.url, "max.retries": 0}) as client:  # the system's CAs: not ours
            with pytest.raises(SchemaRegistryError, match="cannot reach it") as info:
                await client.get_subjects()
            assert info.value.http_status_code == -1 and "certificate" in str(info.value).lower()
    with pytest.raises(ConfigError, match="schema registry TLS settings"):
        SchemaRegistryClient({"url": "https://x", "ssl.ca.location": str(tmp_path / "missing.pem")})


async def test_a_schema_the_registry_finds_invalid_is_its_422_at_send(mock_cluster: MockCluster, registry: SchemaRegistry) -> None:
    """A union with a branch twice: fastavro takes it, the registry (as Java's parser) does not."""
    client = _client(registry)
    empty = json.dumps({"type": "record", "name": "Twice", "fields": [{"name": "a", "type": ["null", "string", "null"]}]})
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, value_serializer=AvroSerializer(client, empty)) as producer:
        with pytest.raises(SerializationError) as info:
            await producer.send("orders", {"a": None})
    cause = info.value.__cause__
    assert isinstance(cause, SchemaRegistryError) and (cause.http_status_code, cause.error_code) == (422, 42201)
    assert "null" in cause.error_message
    await client.close()
