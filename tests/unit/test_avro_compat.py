"""The test registry's Avro compatibility checker: each resolution rule, one pair that resolves and one that does not.

``incompatibilities(reader, writer)`` is Avro's schema resolution seen from the
reader; the levels (BACKWARD = new reads old, FORWARD = old reads new, FULL =
both, transitive = every version) are built on it. Messages start with Avro's
error type names, which the tests match on.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from aioproducer.testing._avro_compat import (
    LEVELS,
    AvroSchema,
    InvalidAvroSchema,
    check_level,
    incompatibilities,
    normal_form,
    parse_avro,
)


def avro(obj: Any) -> AvroSchema:
    return parse_avro(json.dumps(obj))


def record(*fields: dict[str, Any], name: str = "R", **extra: Any) -> AvroSchema:
    return avro({"type": "record", "name": name, "fields": list(fields), **extra})


def problems(reader: AvroSchema, writer: AvroSchema) -> str:
    return " | ".join(incompatibilities(reader, writer))


# ------------------------------------------------------------------ records


def test_a_reader_field_missing_in_the_writer_needs_a_default() -> None:
    old = record({"name": "a", "type": "int"})
    with_default = record({"name": "a", "type": "int"}, {"name": "x", "type": "string", "default": ""})
    without = record({"name": "a", "type": "int"}, {"name": "x", "type": "string"})
    assert problems(with_default, old) == ""
    assert "READER_FIELD_MISSING_DEFAULT_VALUE at /x: reader field 'x' has no default" in problems(without, old)


def test_a_null_default_counts_as_a_default() -> None:
    old = record({"name": "a", "type": "int"})
    new = record({"name": "a", "type": "int"}, {"name": "x", "type": ["null", "string"], "default": None})
    assert problems(new, old) == ""


def test_writer_fields_the_reader_lacks_are_skipped() -> None:
    writer = record({"name": "a", "type": "int"}, {"name": "b", "type": "int"})
    assert problems(record({"name": "a", "type": "int"}), writer) == ""


def test_a_reader_field_alias_matches_the_writer_field() -> None:
    writer = record({"name": "old_name", "type": "int"})
    assert problems(record({"name": "new_name", "type": "int", "aliases": ["old_name"]}), writer) == ""
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in problems(record({"name": "new_name", "type": "int"}), writer)


def test_field_types_are_resolved_recursively_with_their_path() -> None:
    def inner(v: str) -> dict[str, Any]:
        return {"type": "record", "name": "I", "fields": [{"name": "v", "type": v}]}

    writer = record({"name": "inner", "type": inner("long")})
    reader = record({"name": "inner", "type": inner("int")})
    assert "TYPE_MISMATCH at /inner/v: reader type int cannot read writer type long" in problems(reader, writer)
    assert problems(writer, reader) == ""  # int promotes to long


def test_records_are_matched_by_unqualified_name_or_reader_alias() -> None:
    writer = record({"name": "a", "type": "int"}, name="Old", namespace="x")
    assert "NAME_MISMATCH" in problems(record({"name": "a", "type": "int"}, name="New"), writer)
    assert problems(record({"name": "a", "type": "int"}, name="Old", namespace="y"), writer) == ""
    assert problems(record({"name": "a", "type": "int"}, name="New", aliases=["x.Old"]), writer) == ""


def test_recursive_records_resolve() -> None:
    def linked(extra: list[dict[str, Any]]) -> AvroSchema:
        return record({"name": "next", "type": ["null", "R"], "default": None}, *extra)

    assert problems(linked([{"name": "v", "type": "long"}]), linked([{"name": "v", "type": "int"}])) == ""
    assert "TYPE_MISMATCH" in problems(linked([{"name": "v", "type": "int"}]), linked([{"name": "v", "type": "long"}]))


# ------------------------------------------------------------------ primitives


@pytest.mark.parametrize(
    ("writer", "reader"),
    [("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
     ("float", "double"), ("string", "bytes"), ("bytes", "string")],
)
def test_promotions_resolve(writer: str, reader: str) -> None:
    assert problems(avro(reader), avro(writer)) == ""


@pytest.mark.parametrize(
    ("writer", "reader"),
    [("long", "int"), ("double", "float"), ("float", "long"), ("string", "int"), ("boolean", "int"), ("null", "string")],
)
def test_narrowing_and_unrelated_primitives_do_not(writer: str, reader: str) -> None:
    expected = f"TYPE_MISMATCH at /: reader type {reader} cannot read writer type {writer}"
    assert problems(avro(reader), avro(writer)) == expected


def test_logical_types_are_read_as_their_underlying_type() -> None:
    ts = avro({"type": "long", "logicalType": "timestamp-millis"})
    assert problems(ts, avro("long")) == "" and problems(avro("long"), ts) == ""


# ------------------------------------------------------------------ enums, fixed, arrays, maps


def enum(symbols: list[str], **extra: Any) -> AvroSchema:
    return avro({"type": "enum", "name": "E", "symbols": symbols, **extra})


def test_writer_enum_symbols_must_exist_in_the_reader() -> None:
    assert problems(enum(["A", "B", "C"]), enum(["A", "B"])) == ""
    found = problems(enum(["A", "B"]), enum(["A", "B", "C"]))
    assert "MISSING_ENUM_SYMBOLS at /: reader enum 'E' lacks writer symbols ['C']" in found


def test_a_reader_enum_default_covers_unknown_symbols() -> None:
    assert problems(enum(["A", "B"], default="A"), enum(["A", "B", "C"])) == ""


def test_enums_are_matched_by_name() -> None:
    other = avro({"type": "enum", "name": "F", "symbols": ["A"]})
    assert "NAME_MISMATCH" in problems(other, enum(["A"]))


def test_fixed_needs_the_same_name_and_size() -> None:
    def fixed(name: str, size: int) -> AvroSchema:
        return avro({"type": "fixed", "name": name, "size": size})

    assert problems(fixed("F", 4), fixed("F", 4)) == ""
    assert "FIXED_SIZE_MISMATCH" in problems(fixed("F", 8), fixed("F", 4))
    assert "NAME_MISMATCH" in problems(fixed("G", 4), fixed("F", 4))


def test_arrays_resolve_by_items_and_maps_by_values() -> None:
    assert problems(avro({"type": "array", "items": "long"}), avro({"type": "array", "items": "int"})) == ""
    assert "TYPE_MISMATCH at /items" in problems(
        avro({"type": "array", "items": "int"}), avro({"type": "array", "items": "long"})
    )
    assert problems(avro({"type": "map", "values": "double"}), avro({"type": "map", "values": "float"})) == ""
    assert "TYPE_MISMATCH at /values" in problems(
        avro({"type": "map", "values": "int"}), avro({"type": "map", "values": "string"})
    )
    assert "TYPE_MISMATCH" in problems(avro({"type": "map", "values": "int"}), avro({"type": "array", "items": "int"}))


# ------------------------------------------------------------------ unions


def test_every_writer_union_branch_must_resolve_into_the_reader() -> None:
    assert problems(avro(["null", "string", "long"]), avro(["null", "string"])) == ""
    assert "MISSING_UNION_BRANCH at /2" in problems(avro(["null", "string"]), avro(["null", "string", "long"]))


def test_a_plain_writer_resolves_into_a_reader_union_branch_including_by_promotion() -> None:
    assert problems(avro(["null", "long"]), avro("int")) == ""
    assert "MISSING_UNION_BRANCH" in problems(avro(["null", "int"]), avro("string"))


def test_a_writer_union_into_a_plain_reader_needs_each_branch_readable() -> None:
    assert problems(avro("long"), avro(["int", "long"])) == ""
    assert "TYPE_MISMATCH at /0" in problems(avro("long"), avro(["null", "long"]))


# ------------------------------------------------------------------ levels

V1 = record({"name": "a", "type": "int"})
#: Adds a field with a default: both backward and forward compatible with V1.
V2 = record({"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": ""})
#: Adds a field without a default: forward compatible only (V1 reads it, it cannot read V1).
V3_NO_DEFAULT = record({"name": "a", "type": "int"}, {"name": "c", "type": "string"})
#: Drops a field without a default: backward compatible only.
V_DROP_A = record({"name": "b", "type": "string", "default": ""})


@pytest.mark.parametrize(
    ("level", "new", "compatible"),
    [
        ("NONE", V3_NO_DEFAULT, True),
        ("BACKWARD", V2, True),
        ("BACKWARD", V3_NO_DEFAULT, False),
        ("FORWARD", V3_NO_DEFAULT, True),
        ("FORWARD", V_DROP_A, False),
        ("FULL", V2, True),
        ("FULL", V3_NO_DEFAULT, False),
        ("FULL", V_DROP_A, False),
        ("BACKWARD", V_DROP_A, True),
    ],
)
def test_levels_against_the_latest_version(level: str, new: AvroSchema, compatible: bool) -> None:
    assert (check_level(level, new, [(1, V1)]) == []) is compatible


def test_backward_names_the_direction_and_version() -> None:
    (msg,) = check_level("BACKWARD", V3_NO_DEFAULT, [(1, V1)])
    assert msg.startswith("new schema cannot read version 1: READER_FIELD_MISSING_DEFAULT_VALUE")
    (msg,) = check_level("FORWARD", V_DROP_A, [(3, V1)])
    assert msg.startswith("version 3 cannot read the new schema: READER_FIELD_MISSING_DEFAULT_VALUE")


# A history where each step is fine against its predecessor, not against the first:
# v1 {a: int}; v2 {} (a dropped); v3 {a: string, default ""} (a back, another type).
T1 = record({"name": "a", "type": "int"})
T2 = record()
T3 = record({"name": "a", "type": "string", "default": ""})


@pytest.mark.parametrize(
    ("level", "compatible"),
    [
        ("BACKWARD", True),
        ("BACKWARD_TRANSITIVE", False),
        ("FORWARD", True),
        ("FORWARD_TRANSITIVE", False),
        ("FULL", True),
        ("FULL_TRANSITIVE", False),
    ],
)
def test_transitive_levels_check_every_version(level: str, compatible: bool) -> None:
    problems_found = check_level(level, T3, [(1, T1), (2, T2)])
    assert (problems_found == []) is compatible
    if not compatible:
        assert "version 1" in problems_found[0]


def test_every_level_is_known() -> None:
    for level in LEVELS:
        assert check_level(level, V2, [(1, V1)]) == []


# ------------------------------------------------------------------ parsing and normal form


@pytest.mark.parametrize(
    "text",
    ["{not json", '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "nope"}]}',
     '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]}', '{"type": "unknown"}'],
)
def test_what_does_not_parse_is_invalid(text: str) -> None:
    with pytest.raises(InvalidAvroSchema):
        parse_avro(text)


def test_the_normal_form_ignores_layout_docs_and_attribute_order_but_keeps_defaults() -> None:
    a = parse_avro('{"type":"record","name":"R","namespace":"n","doc":"d","fields":[{"name":"a","type":{"type":"int"},"default":1}]}')
    b = parse_avro('{"fields": [{"default": 1, "type": "int", "name": "a", "doc": "x"}],\n "name": "n.R", "type": "record"}')
    assert normal_form(a) == normal_form(b) == '{"name":"n.R","type":"record","fields":[{"name":"a","type":"int","default":1}]}'
    c = parse_avro('{"type":"record","name":"n.R","fields":[{"name":"a","type":"int","default":2}]}')
    assert normal_form(c) != normal_form(a)


def test_the_normal_form_keeps_logical_types_and_writes_a_named_type_once() -> None:
    s = avro(
        {"type": "record", "name": "R", "fields": [
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "e1", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
            {"name": "e2", "type": "E"},
        ]}
    )
    assert json.loads(normal_form(s))["fields"] == [
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "e1", "type": {"name": "E", "type": "enum", "symbols": ["A"]}},
        {"name": "e2", "type": "E"},
    ]


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "record", "name": "R"},
        {"type": "record", "name": "1bad", "fields": []},
        {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "int"]}]},
        ["null", ["int", "string"]],
        {"type": "array", "items": ["null", "null"]},
    ],
    ids=["record-without-fields", "bad-name", "duplicate-union-branch", "nested-union", "nested-duplicate"],
)
def test_what_javas_parser_refuses_is_invalid_though_fastavro_takes_it(schema: Any) -> None:
    with pytest.raises(InvalidAvroSchema):
        avro(schema)


def test_union_branches_of_different_names_are_fine() -> None:
    a = {"type": "record", "name": "A", "fields": []}
    b = {"type": "record", "name": "B", "fields": []}
    parsed = avro(["null", a, b])
    assert len(parsed.root) == 3 and {"A", "B"} <= parsed.named.keys()
