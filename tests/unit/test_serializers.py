"""Tests for aioproducer.serializers: ready-made serializers, byte-compatible with Java's, and resolution."""

from __future__ import annotations

import math
from typing import Any

import pytest

from aioproducer.errors import ConfigError, SerializationError
from aioproducer.serializers import (
    bytes_serializer,
    default_serializer,
    int_serializer,
    json_serializer,
    long_serializer,
    resolve_serializer,
    str_serializer,
)


def test_default_serializer_passes_bytes_through_without_copy() -> None:
    data = b"abc"
    assert default_serializer(data) is data


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (bytearray(b"ab"), b"ab"),
        (memoryview(b"xyz")[1:], b"yz"),
        ("héllo", "héllo".encode()),
        ("", b""),
        (None, None),
    ],
)
def test_default_serializer(data: Any, expected: bytes | None) -> None:
    result = default_serializer(data)
    assert result == expected
    assert result is None or type(result) is bytes


def test_default_serializer_copies_mutable_buffers() -> None:
    buf = bytearray(b"ab")
    out = default_serializer(buf)
    buf[0] = ord("z")
    assert out == b"ab"


@pytest.mark.parametrize("data", [1, 1.5, {"a": 1}, [1], object()])
def test_default_serializer_refuses_other_types_naming_them(data: Any) -> None:
    with pytest.raises(SerializationError, match=type(data).__name__):
        default_serializer(data)


def test_bytes_serializer() -> None:
    assert bytes_serializer(b"a") == b"a"
    assert bytes_serializer(bytearray(b"a")) == b"a"
    assert bytes_serializer(None) is None
    with pytest.raises(SerializationError, match="str"):
        bytes_serializer("a")


def test_str_serializer() -> None:
    assert str_serializer("añ€😀") == "añ€😀".encode("utf-8")
    assert str_serializer(None) is None
    with pytest.raises(SerializationError, match="bytes"):
        str_serializer(b"a")
    with pytest.raises(SerializationError, match="UTF-8"):
        str_serializer("\ud800")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, b"\x00\x00\x00\x00"),
        (1, b"\x00\x00\x00\x01"),
        (-1, b"\xff\xff\xff\xff"),
        (2**31 - 1, b"\x7f\xff\xff\xff"),
        (-(2**31), b"\x80\x00\x00\x00"),
        (0x01020304, b"\x01\x02\x03\x04"),  # big-endian, as Java's IntegerSerializer
    ],
)
def test_int_serializer_matches_java_integer_serializer(value: int, expected: bytes) -> None:
    assert int_serializer(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, b"\x00" * 7 + b"\x01"),
        (-1, b"\xff" * 8),
        (2**63 - 1, b"\x7f" + b"\xff" * 7),
        (0x0102030405060708, bytes(range(1, 9))),
    ],
)
def test_long_serializer_matches_java_long_serializer(value: int, expected: bytes) -> None:
    assert long_serializer(value) == expected


def test_fixed_int_serializers_reject() -> None:
    assert int_serializer(None) is None and long_serializer(None) is None
    with pytest.raises(SerializationError, match="32-bit"):
        int_serializer(2**31)
    with pytest.raises(SerializationError, match="64-bit"):
        long_serializer(-(2**63) - 1)
    with pytest.raises(SerializationError, match="bool"):
        int_serializer(True)
    with pytest.raises(SerializationError, match="str"):
        long_serializer("1")


def test_json_serializer_is_compact_utf8() -> None:
    assert json_serializer({"a": [1, 2], "b": "é"}) == '{"a":[1,2],"b":"é"}'.encode()
    assert json_serializer(None) is None
    assert json_serializer(0) == b"0"
    assert json_serializer("x") == b'"x"'


@pytest.mark.parametrize("bad", [{1, 2}, object(), math.nan, {"x": math.inf}])
def test_json_serializer_errors(bad: Any) -> None:
    with pytest.raises(SerializationError):
        json_serializer(bad)


class TopicPrefixSerializer:
    """Java-style object serializer."""

    def serialize(self, topic: str, data: Any) -> bytes | None:
        return f"{topic}:{data}".encode()


class NeedsArgs:
    def __init__(self, required: int) -> None:
        self.required = required

    def serialize(self, topic: str, data: Any) -> bytes | None:
        return b""


def test_resolve_plain_callable_gets_the_value_only() -> None:
    fn = resolve_serializer(str_serializer)
    assert fn("topic", "v") == b"v"
    assert fn("topic", None) is None


def test_resolve_object_gets_topic_and_value() -> None:
    obj = TopicPrefixSerializer()
    fn = resolve_serializer(obj)
    assert fn("orders", 7) == b"orders:7"


def test_resolve_class_is_instantiated() -> None:
    assert resolve_serializer(TopicPrefixSerializer)("t", 1) == b"t:1"
    with pytest.raises(ConfigError, match="NeedsArgs"):
        resolve_serializer(NeedsArgs)


def test_resolve_dotted_paths() -> None:
    assert resolve_serializer("aioproducer.serializers.json_serializer")("t", [1]) == b"[1]"
    assert resolve_serializer(f"{__name__}.TopicPrefixSerializer")("t", 2) == b"t:2"


@pytest.mark.parametrize("bad", [42, "json_serializer", "no_such_module_abc.f", "aioproducer.serializers.nope", int])
def test_resolve_rejects_with_key_name(bad: Any) -> None:
    with pytest.raises(ConfigError, match="value.serializer"):
        resolve_serializer(bad, "value.serializer")


def test_resolve_is_idempotent() -> None:
    plain = resolve_serializer(str_serializer)
    assert resolve_serializer(plain) is plain
    assert resolve_serializer(plain)("t", "v") == b"v"
    bound = resolve_serializer(TopicPrefixSerializer())
    assert resolve_serializer(bound)("t", 3) == b"t:3"


class WithHeaders:
    def serialize(self, topic: str, headers: list[tuple[str, bytes | None]], data: Any) -> bytes:
        headers.append(("seen", topic.encode()))
        return b"h"


class OptionalHeaders:
    def serialize(self, topic: str, data: Any, headers: Any = None) -> bytes:
        return b"2"


class AsyncWithHeaders:
    async def serialize(self, topic: str, headers: list[tuple[str, bytes | None]], data: Any) -> bytes:
        return b"a"


class NoArguments:
    def serialize(self) -> bytes:
        return b""


def test_resolve_tells_the_three_shapes_apart() -> None:
    assert resolve_serializer(str_serializer).arity == 1
    assert resolve_serializer(TopicPrefixSerializer()).arity == 2
    assert resolve_serializer(OptionalHeaders()).arity == 2  # Java's order is (topic, headers, data): an extra optional is not it
    with_headers = resolve_serializer(WithHeaders())
    assert with_headers.arity == 3 and with_headers.with_headers
    headers: list[tuple[str, bytes | None]] = [("a", b"1")]
    assert with_headers("orders", 1, headers) == b"h" and headers == [("a", b"1"), ("seen", b"orders")]
    assert resolve_serializer(AsyncWithHeaders).arity == 3  # a class, instantiated; async is found at the call


def test_resolve_refuses_a_serialize_of_another_shape_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"value.serializer: NoArguments.serialize must take \(topic, data\) or \(topic, headers, data\)"):
        resolve_serializer(NoArguments(), "value.serializer")


async def test_an_async_serializer_resolves_to_a_call_returning_an_awaitable() -> None:
    async def upper(data: Any) -> bytes:
        return str(data).upper().encode()

    resolved = resolve_serializer(upper)
    assert await resolved("t", "x") == b"X"
    assert await resolve_serializer(AsyncWithHeaders())("t", "x") == b"a"
