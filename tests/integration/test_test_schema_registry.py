"""aioproducer.testing.SchemaRegistry, checked with confluent-kafka's own client and plain HTTP.

The independent side is confluent-kafka's ``SchemaRegistryClient`` (sync) and
its ``AvroSerializer``/``AvroDeserializer``: if they round-trip through this
server, the paths, query parameters and JSON shapes they need are right.
Error answers are checked as confluent's client surfaces them
(``SchemaRegistryError``) and as raw HTTP (status and body). The fault knobs
are driven with ``urllib`` (confluent's client retries 5xx with backoff, which
would only slow these tests down). The Avro resolution rules themselves are
unit-tested in ``tests/unit/test_avro_compat.py``; here each level is shown
end to end once compatible and once not.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any, cast

import aiohttp
import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient, header_schema_id_serializer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from aioproducer.testing import RegistryClosedError, SchemaRegistry
from helpers import closed_port

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"

#: The ``new_client`` fixture: a fresh confluent-kafka client of the registry per call.
NewClient = Callable[[], SchemaRegistryClient]


def registry_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("schema-registry")]


@pytest.fixture
def registry() -> Iterator[SchemaRegistry]:
    with SchemaRegistry() as r:
        yield r
    assert registry_threads() == [], "close() left the registry's thread behind"


@pytest.fixture
def new_client(registry: SchemaRegistry) -> Iterator[Callable[[], SchemaRegistryClient]]:
    """Makes confluent-kafka clients of the registry (a fresh one has an empty cache), closed after the test."""
    made: list[SchemaRegistryClient] = []

    def make() -> SchemaRegistryClient:
        made.append(SchemaRegistryClient({"url": registry.url}))
        return made[-1]

    yield make
    for c in made:
        c.close()


@pytest.fixture
def client(new_client: Callable[[], SchemaRegistryClient]) -> SchemaRegistryClient:
    return new_client()


def http(registry: SchemaRegistry, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One request; the status and the body parsed as JSON (the raw bytes if it is not JSON)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(registry.url + path, data=data, method=method, headers={"Content-Type": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status, raw, ctype = resp.status, resp.read(), resp.headers["Content-Type"]
    except urllib.error.HTTPError as err:
        with err:
            status, raw, ctype = err.code, err.read(), err.headers["Content-Type"]
    assert ctype.startswith(CONTENT_TYPE), ctype
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw


def avro_record(*fields: dict[str, Any], name: str = "Order", **extra: Any) -> Schema:
    return Schema(json.dumps({"type": "record", "name": name, "fields": list(fields), **extra}), "AVRO")


ORDER_V1 = avro_record({"name": "id", "type": "long"})
ORDER_V2 = avro_record({"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""})
ORDER_NO_DEFAULT = avro_record({"name": "id", "type": "long"}, {"name": "qty", "type": "int"})

JSON_SCHEMA = Schema(
    json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}), "JSON"
)
PROTO = Schema(
    'syntax = "proto3";\npackage shop;\n\nmessage Order {\n  int64 id = 1;\n  string note = 2;\n}\n', "PROTOBUF"
)


def comparable(schema: Schema) -> Any:
    """A schema's text as the registry may re-spell it: JSON parsed, Protobuf as is."""
    assert schema.schema_str is not None
    return schema.schema_str if schema.schema_type == "PROTOBUF" else json.loads(schema.schema_str)


# ------------------------------------------------------------------ round trips with confluent's client


@pytest.mark.parametrize("schema", [ORDER_V1, JSON_SCHEMA, PROTO], ids=["avro", "json", "protobuf"])
def test_register_then_read_back_every_way(
    registry: SchemaRegistry, client: SchemaRegistryClient, schema: Schema, new_client: NewClient,
) -> None:
    registered = client.register_schema_full_response("orders-value", schema)
    assert (registered.schema_id, registered.version) == (1, 1)
    fresh = new_client()  # an empty cache: what it reads comes from the registry
    by_id = fresh.get_schema(1)
    assert (by_id.schema_type, comparable(by_id)) == (schema.schema_type, comparable(schema))
    latest = fresh.get_latest_version("orders-value")
    assert (latest.schema_id, latest.version, latest.subject) == (1, 1, "orders-value")
    assert latest.schema.schema_type == schema.schema_type
    assert latest.guid is not None and latest.guid == registered.guid and len(latest.guid) == 36
    assert new_client().get_schema_by_guid(latest.guid).schema_str == by_id.schema_str
    looked_up = new_client().lookup_schema("orders-value", schema)
    assert (looked_up.schema_id, looked_up.version) == (1, 1)
    assert fresh.get_version("orders-value", 1).schema_id == 1
    assert fresh.get_versions("orders-value") == [1]
    assert fresh.get_subjects() == ["orders-value"]
    assert fresh.test_compatibility("orders-value", schema) is True
    assert ("GET", "/schemas/ids/1") in registry.requests
    assert fresh.delete_subject("orders-value") == [1]
    assert fresh.delete_subject("orders-value", permanent=True) == [1]
    assert fresh.get_subjects(deleted=True) == []


def test_schema_types(client: SchemaRegistryClient) -> None:
    assert client.get_schema_types() == ["AVRO", "JSON", "PROTOBUF"]


def test_non_avro_answers_carry_schema_type_and_avro_ones_do_not(
    registry: SchemaRegistry, client: SchemaRegistryClient,
) -> None:
    client.register_schema("a", ORDER_V1)
    client.register_schema("p", PROTO)
    assert "schemaType" not in http(registry, "GET", "/schemas/ids/1")[1]
    assert http(registry, "GET", "/schemas/ids/2")[1]["schemaType"] == "PROTOBUF"


def test_one_schema_under_two_subjects_has_one_id(
    registry: SchemaRegistry, client: SchemaRegistryClient, new_client: NewClient,
) -> None:
    client.register_schema("other", ORDER_V2)  # id 1, so that the ids below are not versions by accident
    a = client.register_schema_full_response("a-value", ORDER_V1)
    b = new_client().register_schema_full_response("b-value", ORDER_V1)
    assert a.schema_id == b.schema_id == 2 and a.guid == b.guid
    assert (a.version, b.version) == (1, 1)
    assert client.get_subjects_by_schema_id(2) == ["a-value", "b-value"]
    assert {(v.subject, v.version) for v in client.get_schema_versions(2)} == {("a-value", 1), ("b-value", 1)}


def test_registering_the_same_schema_again_answers_the_same_version(registry: SchemaRegistry) -> None:
    body = {"schema": ORDER_V1.schema_str}
    first = http(registry, "POST", "/subjects/s/versions", body)
    spaced = {"schema": json.dumps(comparable(ORDER_V1), indent=4)}  # whitespace only
    assert http(registry, "POST", "/subjects/s/versions", spaced) == first
    assert http(registry, "GET", "/subjects/s/versions")[1] == [1]


def test_normalize_gives_two_spellings_one_id_and_keeps_defaults(
    registry: SchemaRegistry, new_client: NewClient,
) -> None:
    one = {"type": "record", "name": "Order", "namespace": "shop", "doc": "an order",
           "fields": [{"name": "id", "type": {"type": "long"}}, {"name": "note", "type": "string", "default": ""}]}
    two = {"fields": [{"type": "long", "name": "id"}, {"default": "", "name": "note", "type": "string"}],
           "name": "shop.Order", "type": "record"}
    c1 = new_client()
    c2 = new_client()
    first = c1.register_schema_full_response("n", Schema(json.dumps(one), "AVRO"), normalize_schemas=True)
    second = c2.register_schema_full_response("n", Schema(json.dumps(two), "AVRO"), normalize_schemas=True)
    assert (first.schema_id, first.version) == (second.schema_id, second.version) == (1, 1)
    stored = comparable(c1.get_schema(1))
    assert stored == {  # the normal form: full name, no doc, fixed order, the default kept
        "name": "shop.Order",
        "type": "record",
        "fields": [{"name": "id", "type": "long"}, {"name": "note", "type": "string", "default": ""}],
    }
    elsewhere = new_client().register_schema_full_response("m", Schema(json.dumps(two), "AVRO"), normalize_schemas=True)
    assert (elsewhere.schema_id, elsewhere.version) == (1, 1)  # the id is global in normal form too
    looked_up = new_client().lookup_schema("n", Schema(json.dumps(one), "AVRO"), normalize_schemas=True)
    assert looked_up.schema_id == 1


def test_without_normalize_two_spellings_are_two_schemas(registry: SchemaRegistry) -> None:
    one = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}
    two = {"name": "Order", "type": "record", "fields": [{"name": "id", "type": "long"}]}
    a = http(registry, "POST", "/subjects/n/versions", {"schema": json.dumps(one)})[1]
    b = http(registry, "POST", "/subjects/n/versions", {"schema": json.dumps(two)})[1]
    assert (a["id"], a["version"], b["id"], b["version"]) == (1, 1, 2, 2)


def test_avro_references_resolve_named_types_of_another_subject(
    registry: SchemaRegistry, client: SchemaRegistryClient, new_client: NewClient,
) -> None:
    money = Schema(json.dumps({"type": "record", "name": "Money", "namespace": "shop",
                               "fields": [{"name": "cents", "type": "long"}]}), "AVRO")
    client.register_schema("shop.Money", money)
    order = Schema(
        json.dumps(
            {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "total", "type": "shop.Money"}]}
        ),
        "AVRO",
        [SchemaReference("shop.Money", "shop.Money", 1)],
    )
    registered = client.register_schema_full_response("orders-value", order)
    assert registered.schema_id is not None
    got = new_client().get_schema(registered.schema_id)
    assert [(r.name, r.subject, r.version) for r in got.references or []] == [("shop.Money", "shop.Money", 1)]
    status, body = http(registry, "POST", "/subjects/x/versions", {"schema": order.schema_str})
    assert (status, body["error_code"]) == (422, 42201)  # without the reference, shop.Money is unknown
    missing = {"schema": order.schema_str, "references": [{"name": "shop.Money", "subject": "nope", "version": 1}]}
    status, body = http(registry, "POST", "/subjects/x/versions", missing)
    assert (status, body["error_code"]) == (422, 42201) and "nope" in body["message"]


# ------------------------------------------------------------------ compatibility


def test_an_incompatible_evolution_is_refused_with_409_naming_subject_and_reason(client: SchemaRegistryClient) -> None:
    client.register_schema("orders-value", ORDER_V1)
    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema("orders-value", ORDER_NO_DEFAULT)
    err = caught.value
    assert (err.http_status_code, err.error_code) == (409, 409)
    assert 'subject "orders-value"' in err.error_message
    assert "reader field 'qty' has no default" in err.error_message
    assert "BACKWARD" in err.error_message
    assert client.register_schema_full_response("orders-value", ORDER_V2).version == 2  # a default makes it fine


def test_compatibility_endpoint_with_and_without_verbose(
    registry: SchemaRegistry, client: SchemaRegistryClient,
) -> None:
    client.register_schema("orders-value", ORDER_V1)
    assert client.test_compatibility("orders-value", ORDER_V2) is True
    assert client.test_compatibility("orders-value", ORDER_NO_DEFAULT, version=1) is False
    assert client.test_compatibility_all_versions("orders-value", ORDER_NO_DEFAULT) is False
    path = "/compatibility/subjects/orders-value/versions/latest"
    status, body = http(registry, "POST", path + "?verbose=true", {"schema": ORDER_NO_DEFAULT.schema_str})
    assert status == 200 and body["is_compatible"] is False
    assert any("reader field 'qty' has no default" in m for m in body["messages"])
    assert http(registry, "POST", path, {"schema": ORDER_NO_DEFAULT.schema_str})[1] == {"is_compatible": False}
    fine = http(registry, "POST", path + "?verbose=true", {"schema": ORDER_V2.schema_str})
    assert fine == (200, {"is_compatible": True, "messages": []})


# Each level: a history, a new schema, and whether the registry takes it.
A_INT = avro_record({"name": "a", "type": "int"})
A_LONG = avro_record({"name": "a", "type": "long"})
A_PLUS_B_NO_DEFAULT = avro_record({"name": "a", "type": "int"}, {"name": "b", "type": "string"})
A_PLUS_B_DEFAULT = avro_record({"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""})
EMPTY = avro_record()
A_STRING_DEFAULT = avro_record({"name": "a", "type": "string", "default": ""})
A_PLUS_C_NO_DEFAULT = avro_record({"name": "a", "type": "int"}, {"name": "c", "type": "int"})
A_PLUS_C_DEFAULT = avro_record({"name": "a", "type": "int"}, {"name": "c", "type": "int", "default": 0})

LEVEL_CASES = [
    ("NONE", [A_INT], avro_record({"name": "z", "type": "boolean"}), True),
    ("BACKWARD", [A_INT], A_LONG, True),
    ("BACKWARD", [A_LONG], A_INT, False),
    ("FORWARD", [A_INT], A_PLUS_B_NO_DEFAULT, True),
    ("FORWARD", [A_INT], A_LONG, False),
    ("FULL", [A_INT], A_PLUS_B_DEFAULT, True),
    ("FULL", [A_INT], A_PLUS_B_NO_DEFAULT, False),
    ("BACKWARD_TRANSITIVE", [A_INT, A_LONG], avro_record({"name": "a", "type": "double"}), True),
    ("BACKWARD_TRANSITIVE", [A_INT, EMPTY], A_STRING_DEFAULT, False),
    ("FORWARD_TRANSITIVE", [A_PLUS_B_NO_DEFAULT, A_INT], A_PLUS_C_NO_DEFAULT, False),
    ("FORWARD_TRANSITIVE", [A_INT, A_INT], A_PLUS_B_NO_DEFAULT, True),
    ("FULL_TRANSITIVE", [A_INT, A_PLUS_B_DEFAULT], A_PLUS_C_DEFAULT, True),
    ("FULL_TRANSITIVE", [A_INT, EMPTY], A_STRING_DEFAULT, False),
]


@pytest.mark.parametrize(
    ("level", "history", "new", "accepted"), LEVEL_CASES, ids=[f"{c[0]}-{c[3]}" for c in LEVEL_CASES]
)
def test_each_level_end_to_end(
    client: SchemaRegistryClient, level: str, history: list[Schema], new: Schema, accepted: bool,
) -> None:
    client.set_compatibility("s", "NONE")
    for schema in history:
        client.register_schema("s", schema)
    client.set_compatibility("s", level)
    if accepted:
        assert client.register_schema_full_response("s", new).version == len({s.schema_str for s in history}) + 1
    else:
        with pytest.raises(SchemaRegistryError) as caught:
            client.register_schema("s", new)
        assert caught.value.http_status_code == 409 and level in caught.value.error_message


def test_the_non_transitive_counterparts_accept_what_the_transitive_levels_refuse(client: SchemaRegistryClient) -> None:
    """The transitive refusals above are about old versions: against the latest alone they pass."""
    for level in ("BACKWARD", "FULL"):
        subject = f"s-{level}"
        client.set_compatibility(subject, "NONE")
        for schema in (A_INT, EMPTY):
            client.register_schema(subject, schema)
        client.set_compatibility(subject, level)
        assert client.register_schema_full_response(subject, A_STRING_DEFAULT).version == 3


def test_json_and_protobuf_are_accepted_without_a_check_but_a_type_change_is_not(client: SchemaRegistryClient) -> None:
    client.register_schema("j", JSON_SCHEMA)
    other = Schema(json.dumps({"type": "string"}), "JSON")
    assert client.test_compatibility("j", other) is True
    assert client.register_schema_full_response("j", other).version == 2
    client.register_schema("p", PROTO)
    renumbered = Schema(str(PROTO.schema_str).replace("id = 1", "id = 3"), "PROTOBUF")  # would break a reader
    assert client.test_compatibility("p", renumbered) is True
    assert client.register_schema_full_response("p", renumbered).version == 2
    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema("j", ORDER_V1)
    assert caught.value.http_status_code == 409 and "schemaType AVRO differs" in caught.value.error_message


# ------------------------------------------------------------------ config and mode


def test_config_global_and_per_subject(registry: SchemaRegistry, client: SchemaRegistryClient) -> None:
    assert client.get_compatibility() == "BACKWARD"
    assert http(registry, "GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    with pytest.raises(SchemaRegistryError) as caught:
        client.get_compatibility("s")
    assert (caught.value.http_status_code, caught.value.error_code) == (404, 40408)
    assert http(registry, "GET", "/config/s?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    # (confluent's client is annotated to return str, it returns the registry's answer)
    assert cast(Any, client.set_compatibility(level="full")) == {"compatibility": "FULL"}
    assert cast(Any, client.set_compatibility("s", "NONE")) == {"compatibility": "NONE"}
    assert (client.get_compatibility(), client.get_compatibility("s")) == ("FULL", "NONE")
    assert http(registry, "PUT", "/config/t", {"compatibilityLevel": "FORWARD"}) == (200, {"compatibility": "FORWARD"})
    assert http(registry, "DELETE", "/config/s") == (200, {"compatibilityLevel": "NONE"})
    assert http(registry, "DELETE", "/config") == (200, {"compatibilityLevel": "FULL"})
    assert client.get_compatibility() == "BACKWARD"
    status, body = http(registry, "PUT", "/config", {"compatibility": "SIDEWAYS"})
    assert (status, body["error_code"]) == (422, 42203)


def test_mode_readonly_refuses_registration(registry: SchemaRegistry) -> None:
    assert http(registry, "GET", "/mode") == (200, {"mode": "READWRITE"})
    assert http(registry, "PUT", "/mode", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, body = http(registry, "POST", "/subjects/s/versions", {"schema": ORDER_V1.schema_str})
    assert (status, body["error_code"]) == (422, 42205)
    assert http(registry, "PUT", "/mode", {"mode": "READWRITE"})[0] == 200
    assert http(registry, "PUT", "/mode/s", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert http(registry, "POST", "/subjects/s/versions", {"schema": ORDER_V1.schema_str})[1]["error_code"] == 42205
    assert http(registry, "POST", "/subjects/t/versions", {"schema": ORDER_V1.schema_str})[0] == 200
    assert http(registry, "GET", "/mode/s") == (200, {"mode": "READONLY"})
    assert http(registry, "GET", "/mode/t")[1]["error_code"] == 40409
    assert http(registry, "DELETE", "/mode/s") == (200, {"mode": "READONLY"})
    status, body = http(registry, "PUT", "/mode", {"mode": "SLEEPY"})
    assert (status, body["error_code"]) == (422, 42204)


# ------------------------------------------------------------------ deletes


def test_soft_then_permanent_subject_delete(
    registry: SchemaRegistry, client: SchemaRegistryClient, new_client: NewClient,
) -> None:
    client.register_schema("s", ORDER_V1)
    client.register_schema("s", ORDER_V2)
    with pytest.raises(SchemaRegistryError) as caught:
        client.delete_subject("s", permanent=True)
    assert caught.value.error_code == 40405
    assert client.delete_subject("s") == [1, 2]
    assert client.get_subjects() == [] and client.get_subjects(deleted=True) == ["s"]
    assert http(registry, "GET", "/subjects/s/versions")[1]["error_code"] == 40401
    assert http(registry, "GET", "/subjects/s/versions?deleted=true") == (200, [1, 2])
    assert http(registry, "GET", "/subjects/s/versions/1?deleted=true")[1]["id"] == 1
    with pytest.raises(SchemaRegistryError) as caught:
        client.delete_subject("s")
    assert caught.value.error_code == 40404
    assert client.delete_subject("s", permanent=True) == [1, 2]
    assert client.get_subjects(deleted=True) == []
    again = new_client().register_schema_full_response("s", ORDER_V2)
    assert (again.schema_id, again.version) == (2, 1)  # ids stay; versions start again after a permanent delete


def test_soft_deleted_versions_count_but_do_not_constrain(
    registry: SchemaRegistry, client: SchemaRegistryClient,
) -> None:
    client.register_schema("s", A_LONG)
    assert client.delete_version("s", 1) == 1
    assert http(registry, "GET", "/subjects/s/versions/1")[1]["error_code"] == 40401  # no live version left
    registered = client.register_schema_full_response("s", A_INT)  # would break BACKWARD against the deleted one
    assert registered.version == 2
    with pytest.raises(SchemaRegistryError) as caught:
        client.delete_version("s", 2, permanent=True)
    assert caught.value.error_code == 40407
    with pytest.raises(SchemaRegistryError) as caught:
        client.delete_version("s", 1)
    assert caught.value.error_code == 40406
    assert client.delete_version("s", 1, permanent=True) == 1
    assert http(registry, "GET", "/subjects/s/versions?deleted=true") == (200, [2])
    assert http(registry, "GET", "/subjects/s/versions?deleted_only=true")[1]["error_code"] == 40401


# ------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/subjects/missing/versions", 404, 40401),
        ("GET", "/subjects/missing/versions/latest", 404, 40401),
        ("GET", "/subjects/s/versions/7", 404, 40402),
        ("GET", "/subjects/s/versions/0", 422, 42202),
        ("GET", "/subjects/s/versions/abc", 422, 42202),
        ("GET", "/schemas/ids/99", 404, 40403),
        ("GET", "/schemas/guids/00000000-0000-0000-0000-000000000000", 404, 40403),
        ("GET", "/schemas/ids/99/subjects", 404, 40403),
        ("DELETE", "/subjects/missing", 404, 40401),
        ("GET", "/no/such/path", 404, 404),
    ],
)
def test_error_answers(registry: SchemaRegistry, method: str, path: str, status: int, code: int) -> None:
    assert http(registry, "POST", "/subjects/s/versions", {"schema": ORDER_V1.schema_str})[0] == 200
    got_status, body = http(registry, method, path)
    assert (got_status, body["error_code"]) == (status, code), body
    assert isinstance(body["message"], str) and body["message"]


def test_lookup_of_an_unknown_schema_or_subject(client: SchemaRegistryClient) -> None:
    with pytest.raises(SchemaRegistryError) as caught:
        client.lookup_schema("s", ORDER_V1)
    assert (caught.value.http_status_code, caught.value.error_code) == (404, 40401)
    client.register_schema("s", ORDER_V1)
    with pytest.raises(SchemaRegistryError) as caught:
        client.lookup_schema("s", ORDER_V2)
    assert (caught.value.http_status_code, caught.value.error_code) == (404, 40403)


@pytest.mark.parametrize(
    "body",
    [
        {"schema": '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]}'},
        {"schema": "{not json"},
        {"schema": "{not json", "schemaType": "JSON"},
        {"schema": "", "schemaType": "PROTOBUF"},
        {"schema": '"string"', "schemaType": "XML"},
        {"schemaType": "AVRO"},
    ],
    ids=["avro-unknown-type", "avro-not-json", "json-not-json", "protobuf-empty", "unknown-schema-type", "no-schema"],
)
def test_invalid_schemas_are_42201(registry: SchemaRegistry, body: dict[str, Any]) -> None:
    status, answer = http(registry, "POST", "/subjects/s/versions", body)
    assert (status, answer["error_code"]) == (422, 42201)
    assert answer["message"].startswith("Invalid schema")


def test_invalid_schema_through_confluents_client(client: SchemaRegistryClient) -> None:
    with pytest.raises(SchemaRegistryError) as caught:
        client.register_schema("s", Schema('{"type": "record", "name": "R"}', "AVRO"))
    assert (caught.value.http_status_code, caught.value.error_code) == (422, 42201)


def test_a_body_that_is_not_json_is_400(registry: SchemaRegistry) -> None:
    req = urllib.request.Request(registry.url + "/subjects/s/versions", data=b"{", method="POST")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(req, timeout=10)
    assert caught.value.code == 400 and json.loads(caught.value.read())["error_code"] == 400


# ------------------------------------------------------------------ confluent's serializers and deserializers


def test_avro_serializer_and_deserializer_round_trip(registry: SchemaRegistry, new_client: NewClient) -> None:
    writer_client = new_client()
    serializer = AvroSerializer(writer_client, ORDER_V2.schema_str)
    ctx = SerializationContext("orders", MessageField.VALUE)
    payload = serializer({"id": 7, "note": "hi"}, ctx)
    assert payload[:5] == b"\x00\x00\x00\x00\x01"  # magic byte, schema id 1
    assert new_client().get_latest_version("orders-value").schema_id == 1
    deserializer = AvroDeserializer(new_client())
    assert deserializer(payload, ctx) == {"id": 7, "note": "hi"}


def test_avro_round_trip_with_the_schema_guid_in_a_header(registry: SchemaRegistry, new_client: NewClient) -> None:
    serializer = AvroSerializer(
        new_client(), ORDER_V2.schema_str, conf={"schema.id.serializer": header_schema_id_serializer}
    )
    headers: list[tuple[str, str | bytes | None]] = []
    # (confluent's deserializer wants more than 5 bytes even when the id is in a header)
    record = {"id": 9, "note": "in a header"}
    payload = serializer(record, SerializationContext("orders", MessageField.VALUE, headers))
    assert len(headers) == 1 and len(headers[0][1] or b"") == 17  # a magic byte and the 16-byte GUID
    registry.clear_requests()
    deserializer = AvroDeserializer(new_client())
    assert deserializer(payload, SerializationContext("orders", MessageField.VALUE, headers)) == record
    assert [p for _, p in registry.requests if p.startswith("/schemas/guids/")], registry.requests


def order_message_class() -> Any:
    """A protobuf message class ``shop.Order`` built from a descriptor (no protoc on these machines).

    protobuf is imported by name: it ships no type stubs, and this keeps mypy's configuration out of it.
    """
    descriptor_pb2 = importlib.import_module("google.protobuf.descriptor_pb2")
    descriptor_pool = importlib.import_module("google.protobuf.descriptor_pool")
    message_factory = importlib.import_module("google.protobuf.message_factory")
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3")
    msg = fdp.message_type.add(name="Order")
    msg.field.add(name="id", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT64, label=1)
    msg.field.add(name="note", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_serializer_and_deserializer_round_trip(registry: SchemaRegistry, new_client: NewClient) -> None:
    order = order_message_class()
    ctx = SerializationContext("orders", MessageField.VALUE)
    conf = {"use.deprecated.format": False}
    payload = ProtobufSerializer(order, new_client(), conf)(order(id=5, note="x"), ctx)
    assert payload[:6] == b"\x00\x00\x00\x00\x01\x00"  # magic byte, id 1, message index [0]
    got = ProtobufDeserializer(order, conf, new_client())(payload, ctx)
    assert (got.id, got.note) == (5, "x")
    assert ("GET", "/schemas/ids/1?subject=orders-value&format=serialized") in registry.requests


def test_json_serializer_and_deserializer_round_trip(new_client: NewClient) -> None:
    ctx = SerializationContext("events", MessageField.VALUE)
    payload = JSONSerializer(str(JSON_SCHEMA.schema_str), new_client())({"id": 3}, ctx)
    assert payload[:5] == b"\x00\x00\x00\x00\x01"
    assert JSONDeserializer(None, schema_registry_client=new_client())(payload, ctx) == {"id": 3}


def test_associations_are_an_empty_list(registry: SchemaRegistry) -> None:
    assert http(registry, "GET", "/associations/resources/-/orders?resourceType=topic&associationType=value") == (200, [])


# ------------------------------------------------------------------ faults and counting


def test_requests_are_logged_in_order_and_cleared(registry: SchemaRegistry) -> None:
    http(registry, "GET", "/subjects?deleted=true")
    http(registry, "POST", "/subjects/s/versions", {"schema": ORDER_V1.schema_str})
    assert registry.requests == [("GET", "/subjects?deleted=true"), ("POST", "/subjects/s/versions")]
    registry.clear_requests()
    assert registry.requests == []
    http(registry, "GET", "/schemas/ids/1")
    assert registry.requests == [("GET", "/schemas/ids/1")]


def test_fail_next_answers_the_status_count_times_then_serves(registry: SchemaRegistry) -> None:
    registry.fail_next(503, count=2)
    assert http(registry, "GET", "/subjects")[0] == 503
    status, body = http(registry, "GET", "/subjects")
    assert status == 503 and body["error_code"] == 503
    assert http(registry, "GET", "/subjects") == (200, [])
    assert len(registry.requests) == 3  # faulted requests are logged too


def test_fail_next_with_a_body(registry: SchemaRegistry) -> None:
    registry.fail_next(500, body={"error_code": 50001, "message": "store down"})
    assert http(registry, "GET", "/subjects") == (500, {"error_code": 50001, "message": "store down"})
    registry.fail_next(502, body="upstream gone")
    assert http(registry, "GET", "/subjects") == (502, b"upstream gone")


def test_fail_next_is_seen_by_confluents_client_as_a_registry_error(
    registry: SchemaRegistry, client: SchemaRegistryClient,
) -> None:
    registry.fail_next(404, body={"error_code": 40401, "message": "Subject 'x' not found."})  # not retried
    with pytest.raises(SchemaRegistryError) as caught:
        client.get_subjects()
    assert (caught.value.http_status_code, caught.value.error_code) == (404, 40401)


def test_garbage_next_answers_200_with_a_body_that_is_not_json(
    registry: SchemaRegistry, client: SchemaRegistryClient,
) -> None:
    registry.garbage_next(count=2)
    status, body = http(registry, "GET", "/subjects")
    assert status == 200 and isinstance(body, bytes) and body.startswith(b"<html>")
    with pytest.raises(ValueError):  # confluent's client cannot parse it either
        client.get_subjects()
    assert client.get_subjects() == []


def test_faults_are_served_in_the_order_they_were_set(registry: SchemaRegistry) -> None:
    registry.fail_next(500)
    registry.garbage_next()
    registry.fail_next(429)
    statuses = [http(registry, "GET", "/subjects")[0] for _ in range(4)]
    assert statuses == [500, 200, 429, 200]
    registry.fail_next(500, count=5)
    registry.clear_faults()
    assert http(registry, "GET", "/subjects")[0] == 200


def test_delay_holds_every_request_until_delay_zero(registry: SchemaRegistry) -> None:
    registry.delay(60)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        pending = [pool.submit(http, registry, "GET", "/subjects") for _ in range(2)]
        deadline = time.monotonic() + 10
        while len(registry.requests) < 2:  # both arrived and wait
            assert time.monotonic() < deadline, "the delayed requests never reached the registry"
            time.sleep(0.005)
        assert not any(f.done() for f in pending)
        registry.delay(0)
        assert [f.result(timeout=10) for f in pending] == [(200, [])] * 2
    assert http(registry, "GET", "/subjects") == (200, [])


def test_stop_then_start_on_the_same_port_keeps_the_contents(registry: SchemaRegistry) -> None:
    http(registry, "POST", "/subjects/s/versions", {"schema": ORDER_V1.schema_str})
    url = registry.url
    registry.stop()
    assert not registry.serving
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/subjects", timeout=10)
    registry.stop()  # idempotent
    registry.start()
    assert registry.serving and registry.url == url
    assert http(registry, "GET", "/subjects") == (200, ["s"])
    registry.start()  # a no-op while serving
    assert http(registry, "GET", "/schemas/ids/1")[0] == 200


def test_stop_releases_delayed_requests(registry: SchemaRegistry) -> None:
    registry.delay(60)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pending = pool.submit(http, registry, "GET", "/subjects")
        deadline = time.monotonic() + 10
        while not registry.requests:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        registry.stop()
        try:
            pending.result(timeout=10)  # answered or cut off: either way not held for 60 s
        except (urllib.error.URLError, ConnectionError):
            pass
    registry.delay(0)
    registry.start()
    assert http(registry, "GET", "/subjects") == (200, [])


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda r: r.fail_next(200), "status"),
        (lambda r: r.fail_next(600), "status"),
        (lambda r: r.fail_next(500, count=0), "count"),
        (lambda r: r.fail_next(500, count=True), "count"),
        (lambda r: r.garbage_next(count=-1), "count"),
        (lambda r: r.delay(-1), "seconds"),
        (lambda r: r.delay(float("nan")), "seconds"),
    ],
)
def test_bad_knob_arguments_are_refused_naming_the_argument(registry: SchemaRegistry, call: Any, argument: str) -> None:
    with pytest.raises(ValueError, match=argument):
        call(registry)


def test_fail_next_body_of_a_wrong_type(registry: SchemaRegistry) -> None:
    with pytest.raises(TypeError, match="body"):
        registry.fail_next(500, body=12)  # type: ignore[arg-type]


# ------------------------------------------------------------------ lifecycle


def test_close_is_idempotent_leaves_no_thread_and_refuses_later_calls() -> None:
    r = SchemaRegistry()
    assert registry_threads() == [f"schema-registry-{r.port}"]
    r.close()
    r.close()
    assert registry_threads() == [] and r.closed
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(r.url + "/subjects", timeout=10)
    for call in (r.start, r.stop, lambda: r.fail_next(), lambda: r.delay(0)):
        with pytest.raises(RegistryClosedError):
            call()


async def test_async_with_serves_an_aiohttp_client_on_the_tests_loop() -> None:
    async with SchemaRegistry() as r:
        async with aiohttp.ClientSession() as session:
            async with session.post(f"{r.url}/subjects/s/versions", json={"schema": ORDER_V1.schema_str}) as resp:
                assert resp.status == 200 and (await resp.json(content_type=None))["id"] == 1
            async with session.get(f"{r.url}/subjects") as resp:
                assert await resp.json(content_type=None) == ["s"]
    assert registry_threads() == []


def test_a_fixed_port_and_bad_ports() -> None:
    port = closed_port()
    with SchemaRegistry(port=port) as r:
        assert r.url == f"http://127.0.0.1:{port}"
        with pytest.raises(OSError):
            SchemaRegistry(port=port)  # taken
        assert http(r, "GET", "/subjects") == (200, [])
    assert registry_threads() == []
    for bad in (-1, 65536, "80", True):
        with pytest.raises(ValueError, match="port"):
            SchemaRegistry(port=bad)  # type: ignore[arg-type]


def test_methods_refuse_to_run_on_the_registrys_own_thread(registry: SchemaRegistry) -> None:
    async def from_inside() -> None:
        registry.stop()

    future = asyncio.run_coroutine_threadsafe(from_inside(), registry._loop)
    with pytest.raises(RuntimeError, match="own thread"):
        future.result(timeout=10)


def test_another_process_reaches_it(registry: SchemaRegistry) -> None:
    """As a Spark worker would: a separate interpreter registers, this one reads the result."""
    code = (
        "import sys\n"
        "from confluent_kafka.schema_registry import Schema, SchemaRegistryClient\n"
        "with SchemaRegistryClient({'url': sys.argv[1]}) as c:\n"
        "    print(c.register_schema('from-worker', Schema(sys.argv[2], 'AVRO')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, registry.url, str(ORDER_V1.schema_str)], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout.strip()) == (0, "1"), done.stderr
    assert http(registry, "GET", "/subjects") == (200, ["from-worker"])
