"""Declarative Kafka message schemas and the one codec that walks them.

Theory of operation. Kafka describes every request and response once, in JSON
(``clients/src/main/resources/common/message/*.json``): a list of fields, each
with the version range it exists in, the versions in which it may be null, a
default, and, for KIP-482 *tagged* fields, a tag number. A message is
*flexible* from some version on: there, strings/bytes/arrays use the compact
(varint length) encodings and every struct ends with a tagged-field section.

This module mirrors that format in Python data (:class:`Field`,
:class:`ArrayOf`, :class:`StructOf`, :class:`MessageSchema`) instead of one
hand-written class per version. :func:`compile_struct` turns a struct plus one
version into a flat list of per-field encode/decode callables, cached, so the
per-call cost is a loop over prepared closures rather than a walk that
re-checks version ranges on every field of every message.

Bodies are plain dicts keyed by field name. Encoding ignores keys that the
version lacks and fills missing keys with the field default; decoding returns
exactly the fields of that version (tagged fields absent from the wire come
back as their default).

Hot path: a ``records`` field (the already-encoded RecordBatch of a produce
request) is not copied into the frame buffer when large; the :class:`Output`
splices the caller's object in as its own chunk, so building the final frame
copies those bytes exactly once.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field as dc_field
from types import MappingProxyType
from typing import Any, Final, TypeAlias

from aioproducer.errors import ProtocolError
from aioproducer.protocol import primitives as p
from aioproducer.protocol.primitives import Reader

__all__ = [
    "ArrayOf",
    "BOOL",
    "BYTES",
    "Field",
    "FieldType",
    "FLOAT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "MessageSchema",
    "Output",
    "Primitive",
    "RECORDS",
    "STRING",
    "StructCodec",
    "StructOf",
    "UINT16",
    "UUID",
    "VersionRange",
    "array",
    "compile_struct",
    "default_value",
    "field",
    "struct",
]

_MAX_VERSION: Final = 0x7FFF


@dataclass(frozen=True, slots=True)
class VersionRange:
    """An inclusive range of versions, parsed from the JSON forms ``"3+"``, ``"0-8"``, ``"5"``, ``"none"``."""

    low: int
    high: int

    @classmethod
    def parse(cls, spec: str) -> VersionRange:
        """Parse Kafka's version-range notation."""
        spec = spec.strip()
        if spec == "none":
            return cls(1, 0)
        if spec.endswith("+"):
            return cls(int(spec[:-1]), _MAX_VERSION)
        if "-" in spec:
            low, high = spec.split("-", 1)
            return cls(int(low), int(high))
        return cls(int(spec), int(spec))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high


_NONE: Final = VersionRange(1, 0)


@dataclass(frozen=True, slots=True)
class Primitive:
    """A scalar wire type, named as in Kafka's JSON schemas."""

    name: str


INT8: Final = Primitive("int8")
INT16: Final = Primitive("int16")
UINT16: Final = Primitive("uint16")
INT32: Final = Primitive("int32")
INT64: Final = Primitive("int64")
FLOAT64: Final = Primitive("float64")
BOOL: Final = Primitive("bool")
STRING: Final = Primitive("string")
BYTES: Final = Primitive("bytes")
#: Kafka's ``records`` type: bytes on the wire, an already-encoded RecordBatch.
RECORDS: Final = Primitive("records")
UUID: Final = Primitive("uuid")


@dataclass(frozen=True, slots=True)
class ArrayOf:
    """An array of a primitive or of structs."""

    element: FieldType


@dataclass(frozen=True, slots=True, eq=False)
class StructOf:
    """A nested struct (Kafka's ``"type": "SomeStruct"`` or array element).

    Compared and hashed by identity (``eq=False``): schemas are module-level
    singletons, and identity keeps the compile cache lookup O(1).
    """

    fields: tuple[Field, ...]


FieldType: TypeAlias = Primitive | ArrayOf | StructOf

_UNSET: Final[Any] = object()


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message: what Kafka's JSON says about it, in Python.

    ``default`` is the value used when encoding a body that omits the field
    and when decoding a tagged field that is absent from the wire.
    """

    name: str
    type: FieldType
    versions: VersionRange
    nullable: VersionRange = _NONE
    default: Any = _UNSET
    tag: int | None = None
    tagged_versions: VersionRange = _NONE


def field(
    name: str,
    type_: FieldType,
    versions: str = "0+",
    *,
    nullable: str = "none",
    default: Any = _UNSET,
    tag: int | None = None,
    tagged: str | None = None,
) -> Field:
    """Declare a field in the JSON's vocabulary: ``field("rack", STRING, "1+", nullable="1+")``.

    A tagged field's ``tagged`` versions default to its ``versions``, as in the JSON.
    """
    versions_range = VersionRange.parse(versions)
    tagged_range = _NONE
    if tag is not None:
        tagged_range = VersionRange.parse(tagged) if tagged is not None else versions_range
    return Field(
        name=name,
        type=type_,
        versions=versions_range,
        nullable=VersionRange.parse(nullable),
        default=default,
        tag=tag,
        tagged_versions=tagged_range,
    )


def array(*fields: Field) -> ArrayOf:
    """An array of structs with the given fields."""
    return ArrayOf(StructOf(fields))


def struct(*fields: Field) -> StructOf:
    """A single nested struct with the given fields (e.g. a tagged ``CurrentLeader``)."""
    return StructOf(fields)


@dataclass(frozen=True, slots=True)
class MessageSchema:
    """A whole request or response body: fields plus the message's version facts."""

    name: str
    api_key: int
    valid: VersionRange
    flexible: VersionRange
    fields: tuple[Field, ...]
    _struct: StructOf = dc_field(init=False, repr=False, compare=False)
    _codecs: dict[int, StructCodec] = dc_field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_struct", StructOf(self.fields))
        object.__setattr__(self, "_codecs", {})

    @property
    def body(self) -> StructOf:
        """The top-level struct, the unit :func:`compile_struct` works on."""
        return self._struct

    def codec(self, version: int) -> StructCodec:
        """The compiled codec for one version (cached per schema: one dict lookup per call)."""
        codec = self._codecs.get(version)
        if codec is None:
            codec = compile_struct(self._struct, version, version in self.flexible)
            self._codecs[version] = codec
        return codec


# ----------------------------------------------------------------- the output


_SPLICE_THRESHOLD: Final = 4096


class Output:
    """Where encoders write: a growing ``bytearray`` plus spliced-in large chunks.

    Small values are appended to ``buf``. :meth:`splice` ends the current
    buffer and appends a caller-owned bytes-like object as its own part,
    so a large record batch is only copied when the parts are joined.
    """

    __slots__ = ("buf", "parts")

    def __init__(self) -> None:
        self.buf: bytearray = bytearray()
        self.parts: list[bytes | bytearray | memoryview] = []

    def splice(self, data: bytes | bytearray | memoryview) -> None:
        """Append ``data`` by reference (it must not be mutated until the frame is built)."""
        if len(data) < _SPLICE_THRESHOLD:
            self.buf += data
            return
        self.parts.append(self.buf)
        self.parts.append(data)
        self.buf = bytearray()

    def size(self) -> int:
        """Total bytes written so far."""
        return sum(len(part) for part in self.parts) + len(self.buf)

    def chunks(self) -> list[bytes | bytearray | memoryview]:
        """All parts in order (for ``writelines``); the output must not be written to afterwards."""
        if self.buf or not self.parts:
            return [*self.parts, self.buf]
        return list(self.parts)

    def getvalue(self) -> bytes:
        """Everything written, as one ``bytes`` (each part copied once)."""
        if not self.parts:
            return bytes(self.buf)
        return b"".join(self.chunks())


Encoder: TypeAlias = Callable[[Output, Any], None]
Decoder: TypeAlias = Callable[[Reader], Any]


# ------------------------------------------------------------ default values


def default_value(f: Field, version: int, flexible: bool) -> Any:
    """A fresh default for ``f``: the JSON default, else None (nullable), 0, "", b"", [] or a struct of defaults."""
    if f.default is not _UNSET:
        return list(f.default) if isinstance(f.default, (list, tuple)) else f.default
    t = f.type
    if isinstance(t, ArrayOf):
        return []
    if isinstance(t, StructOf):
        return {
            sub.name: default_value(sub, version, flexible) for sub in t.fields if version in sub.versions
        }
    if f.nullable.low <= f.nullable.high:  # nullable in some version
        return None
    return _PRIMITIVE_DEFAULTS[t.name]


_PRIMITIVE_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType(
    {
        "int8": 0,
        "int16": 0,
        "uint16": 0,
        "int32": 0,
        "int64": 0,
        "float64": 0.0,
        "bool": False,
        "string": "",
        "bytes": b"",
        "records": b"",
        "uuid": p.ZERO_UUID,
    }
)


# -------------------------------------------------------------- primitives


def _buf_writer(write: Callable[[bytearray, Any], None]) -> Encoder:
    def encode(out: Output, value: Any) -> None:
        write(out.buf, value)

    return encode


def _encode_records(out: Output, value: Any) -> None:
    if value is None:
        p.write_int32(out.buf, -1)
    else:
        _splice_bytes(out, value, compact=False)


def _encode_compact_records(out: Output, value: Any) -> None:
    if value is None:
        out.buf.append(0)
    else:
        _splice_bytes(out, value, compact=True)


def _splice_bytes(out: Output, value: bytes | bytearray | memoryview, compact: bool) -> None:
    if compact:
        p.write_unsigned_varint(out.buf, len(value) + 1)
    else:
        p.write_int32(out.buf, len(value))
    out.splice(value)


def _decode_records(r: Reader) -> bytes | None:
    return r.nullable_bytes()


def _decode_compact_records(r: Reader) -> bytes | None:
    return r.compact_nullable_bytes()


# (name, flexible, nullable) -> (encoder, decoder)
_PRIMITIVE_CODECS: Final[dict[tuple[str, bool, bool], tuple[Encoder, Decoder]]] = {}


def _register(name: str, write: Callable[[bytearray, Any], None], read: Decoder, *, flexible: bool | None = None, nullable: bool | None = None) -> None:
    for flex in (False, True) if flexible is None else (flexible,):
        for null in (False, True) if nullable is None else (nullable,):
            _PRIMITIVE_CODECS[(name, flex, null)] = (_buf_writer(write), read)


_register("int8", p.write_int8, Reader.int8)
_register("int16", p.write_int16, Reader.int16)
_register("uint16", p.write_uint16, Reader.uint16)
_register("int32", p.write_int32, Reader.int32)
_register("int64", p.write_int64, Reader.int64)
_register("float64", p.write_float64, Reader.float64)
_register("bool", p.write_bool, Reader.boolean)
_register("uuid", p.write_uuid, Reader.uuid)
_register("string", p.write_string, Reader.string, flexible=False, nullable=False)
_register("string", p.write_nullable_string, Reader.nullable_string, flexible=False, nullable=True)
_register("string", p.write_compact_string, Reader.compact_string, flexible=True, nullable=False)
_register("string", p.write_compact_nullable_string, Reader.compact_nullable_string, flexible=True, nullable=True)
_register("bytes", p.write_bytes, Reader.bytes_, flexible=False, nullable=False)
_register("bytes", p.write_nullable_bytes, Reader.nullable_bytes, flexible=False, nullable=True)
_register("bytes", p.write_compact_bytes, Reader.compact_bytes, flexible=True, nullable=False)
_register("bytes", p.write_compact_nullable_bytes, Reader.compact_nullable_bytes, flexible=True, nullable=True)
# Records are always encoded as *nullable* bytes (the JSON says nullableVersions "0+").
for _null in (False, True):
    _PRIMITIVE_CODECS[("records", False, _null)] = (_encode_records, _decode_records)
    _PRIMITIVE_CODECS[("records", True, _null)] = (_encode_compact_records, _decode_compact_records)


# ------------------------------------------------------------------ compiler


def _codec_for(t: FieldType, version: int, flexible: bool, nullable: bool) -> tuple[Encoder, Decoder]:
    if isinstance(t, Primitive):
        return _PRIMITIVE_CODECS[(t.name, flexible, nullable)]
    if isinstance(t, StructOf):
        codec = compile_struct(t, version, flexible)
        return codec.encode, codec.decode
    return _array_codec(t, version, flexible, nullable)


def _array_codec(t: ArrayOf, version: int, flexible: bool, nullable: bool) -> tuple[Encoder, Decoder]:
    elem_encode, elem_decode = _codec_for(t.element, version, flexible, nullable=False)
    write_length = p.write_compact_array_length if flexible else p.write_array_length
    read_length = Reader.compact_array_length if flexible else Reader.array_length

    def encode(out: Output, value: Any) -> None:
        if value is None:
            if not nullable:
                raise ValueError("null for a non-nullable array")
            write_length(out.buf, None)
            return
        write_length(out.buf, len(value))
        for item in value:
            elem_encode(out, item)

    def decode(r: Reader) -> list[Any] | None:
        n = read_length(r)
        if n is None:
            if not nullable:
                raise ProtocolError(f"null for a non-nullable array at offset {r.pos}")
            return None
        return [elem_decode(r) for _ in range(n)]

    return encode, decode


def _default_factory(f: Field, version: int, flexible: bool) -> Callable[[], Any]:
    """A zero-argument callable returning a fresh default, cheap for the decode hot path."""
    default = default_value(f, version, flexible)
    if isinstance(default, list):
        return list
    if isinstance(default, dict):
        assert isinstance(f.type, StructOf)
        subs = [
            (sub.name, _default_factory(sub, version, flexible)) for sub in f.type.fields if version in sub.versions
        ]
        return lambda: {name: make() for name, make in subs}
    return lambda: default


@dataclass(frozen=True, slots=True)
class _Tagged:
    tag: int
    name: str
    encode: Encoder
    decode: Decoder
    make_default: Callable[[], Any]
    default_bytes: bytes


class StructCodec:
    """A struct compiled for one version: prepared encoders/decoders in field order."""

    __slots__ = ("_regular", "_decoders", "_tagged", "_flexible")

    def __init__(self, s: StructOf, version: int, flexible: bool) -> None:
        self._flexible = flexible
        regular: list[tuple[str, Encoder, Any]] = []
        decoders: list[tuple[str, Decoder]] = []
        tagged: list[_Tagged] = []
        for f in s.fields:
            if version not in f.versions:
                continue
            encode, decode = _codec_for(f.type, version, flexible, version in f.nullable)
            if f.tag is not None and version in f.tagged_versions:
                if not flexible:
                    raise ValueError(f"tagged field {f.name} in non-flexible version {version}")
                scratch = Output()
                encode(scratch, default_value(f, version, flexible))
                make_default = _default_factory(f, version, flexible)
                tagged.append(_Tagged(f.tag, f.name, encode, decode, make_default, scratch.getvalue()))
                continue
            default = default_value(f, version, flexible)
            if isinstance(default, list):
                default = ()  # immutable stand-in: encoders only iterate it
            elif isinstance(default, dict):
                default = MappingProxyType(default)
            regular.append((f.name, encode, default))
            decoders.append((f.name, decode))
        tagged.sort(key=lambda t: t.tag)
        self._regular: tuple[tuple[str, Encoder, Any], ...] = tuple(regular)
        self._decoders: tuple[tuple[str, Decoder], ...] = tuple(decoders)
        self._tagged: tuple[_Tagged, ...] = tuple(tagged)

    def encode(self, out: Output, value: Mapping[str, Any]) -> None:
        """Append ``value`` (missing keys take their defaults)."""
        get = value.get
        for name, encode, default in self._regular:
            encode(out, get(name, default))
        if self._flexible:
            self._encode_tagged(out, value)

    def _encode_tagged(self, out: Output, value: Mapping[str, Any]) -> None:
        if not self._tagged:
            out.buf.append(0)
            return
        payloads: dict[int, bytes] = {}
        for t in self._tagged:
            if t.name not in value:
                continue
            scratch = Output()
            t.encode(scratch, value[t.name])
            data = scratch.getvalue()
            if data != t.default_bytes:  # Java omits tagged fields equal to their default
                payloads[t.tag] = data
        p.write_tagged_fields(out.buf, payloads)

    def decode(self, r: Reader) -> dict[str, Any]:
        """Read one struct of this version."""
        result = {name: decode(r) for name, decode in self._decoders}
        if self._flexible:
            raw = r.tagged_fields()
            for t in self._tagged:
                payload = raw.get(t.tag)
                if payload is None:
                    result[t.name] = t.make_default()
                    continue
                sub = Reader(payload)
                result[t.name] = t.decode(sub)
                if sub.remaining:
                    raise ProtocolError(f"tagged field {t.name} has {sub.remaining} trailing bytes")
        return result


@functools.lru_cache(maxsize=None)
def compile_struct(s: StructOf, version: int, flexible: bool) -> StructCodec:
    """Compile ``s`` for one version; cached, since schemas are immutable module data."""
    return StructCodec(s, version, flexible)
