"""Avro schema resolution as a compatibility check, and a normal form, for the test Schema Registry.

Why a checker of our own: the registry for tests must refuse what a real
Confluent registry refuses (an evolution that breaks readers), and fastavro
parses schemas but does not compare them. The rules are the Avro
specification's "Schema Resolution" ones, seen from the reader's side:
``incompatibilities(reader, writer)`` lists why data written with ``writer``
could not be read with ``reader`` (empty: it can). Compatibility levels are
built on it (``check_level``): BACKWARD means the new schema reads the old
ones' data (new = reader), FORWARD the old ones read the new one's data,
FULL both; ``_TRANSITIVE`` against every live version instead of the latest.

What is checked: records field by field (matched by name or the reader
field's aliases; a reader field the writer lacks needs a default); the
promotions int->long/float/double, long->float/double, float->double,
string<->bytes; enums (writer symbols the reader lacks are an error unless the
reader enum has a default); arrays by items, maps by values; unions (every
writer branch must resolve into the reader; a non-union writer must match one
reader branch); fixed by name and size; named types by unqualified name or
the reader's aliases. Logical types are ignored (they annotate the same
encoding), as Avro's own checker does. Recursive types are handled by
assuming a (reader, writer) pair of named types compatible while it is being
checked.

Messages start with Avro's ``SchemaCompatibility`` error type names
(READER_FIELD_MISSING_DEFAULT_VALUE, TYPE_MISMATCH, NAME_MISMATCH,
FIXED_SIZE_MISMATCH, MISSING_ENUM_SYMBOLS, MISSING_UNION_BRANCH) and a path,
so a test can match on either.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

__all__ = [
    "LEVELS",
    "AvroSchema",
    "InvalidAvroSchema",
    "check_level",
    "incompatibilities",
    "normal_form",
    "parse_avro",
]

#: Compatibility levels a registry accepts, in the spelling it answers with.
LEVELS: Final = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)

_PRIMITIVES: Final = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED: Final = frozenset({"record", "error", "enum", "fixed"})
_COMPLEX: Final = _NAMED | {"array", "map"}
#: (writer, reader) pairs a reader resolves by promotion (Avro specification, "Schema Resolution").
_PROMOTIONS: Final = frozenset(
    {
        ("int", "long"),
        ("int", "float"),
        ("int", "double"),
        ("long", "float"),
        ("long", "double"),
        ("float", "double"),
        ("string", "bytes"),
        ("bytes", "string"),
    }
)
#: Attributes kept by :func:`normal_form`, in its order: the Parsing Canonical Form's, plus
#: what PCF strips but a reader depends on (defaults, logical types and their parameters).
_NORMAL_KEYS: Final = (
    "name",
    "type",
    "fields",
    "symbols",
    "items",
    "values",
    "size",
    "default",
    "logicalType",
    "precision",
    "scale",
)


class InvalidAvroSchema(ValueError):
    """The text is not JSON, or not an Avro schema fastavro can parse."""


@dataclass(frozen=True, slots=True)
class AvroSchema:
    """A parsed schema and the named types it defines or references (full name -> definition)."""

    root: Any
    named: dict[str, Any]


def parse_avro(text: str, named: dict[str, Any] | None = None) -> AvroSchema:
    """Parse ``text``; ``named`` holds the named types of referenced schemas (it is not modified).

    Raises :class:`InvalidAvroSchema` with fastavro's reason, as a registry answers 42201.
    """
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise InvalidAvroSchema(f"not JSON: {exc}") from None
    known = dict(named or {})
    try:
        _strict(obj)
        root = fastavro.parse_schema(obj, named_schemas=known)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidAvroSchema(f"{type(exc).__name__}: {exc}") from None
    return AvroSchema(root, known)


_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _strict(s: Any) -> None:
    """What Java's Avro parser (so the real registry) refuses and fastavro lets through.

    A record without ``fields``, a name that is not an Avro name, a union
    directly inside a union or with two branches of one type (or name).
    """
    if isinstance(s, list):
        seen = []
        for branch in s:
            if isinstance(branch, list):
                raise SchemaParseException(f"Unions may not immediately contain other unions: {s}")
            _strict(branch)
            kind = branch if isinstance(branch, str) else branch.get("name") or branch.get("type")
            if kind in seen:
                raise SchemaParseException(f"Duplicate in union: {kind}")
            seen.append(kind)
        return
    if not isinstance(s, dict):
        return
    if s.get("type") in _NAMED and not _NAME.fullmatch(str(s.get("name", ""))):
        raise SchemaParseException(f"Illegal name: {s.get('name')!r}")
    if s.get("type") in ("record", "error"):
        if not isinstance(s.get("fields"), list):
            raise SchemaParseException(f"Record has no fields: {s.get('name')!r}")
        for f in s["fields"]:
            _strict(f.get("type") if isinstance(f, dict) else None)
    for key in ("items", "values"):
        if key in s:
            _strict(s[key])
    if not isinstance(s.get("type"), str):
        _strict(s.get("type"))


# ------------------------------------------------------------ normal form


def normal_form(schema: AvroSchema) -> str:
    """A compact JSON spelling that is the same for schemas that differ only in layout, docs or attribute order.

    Like Avro's Parsing Canonical Form (full names, fixed attribute order,
    primitives as plain strings, no docs, aliases or unknown attributes) but
    keeping ``default`` and logical types, which PCF drops: a registry that
    stored PCF would hand readers schemas without their defaults.
    """
    return json.dumps(_normal(schema.root, set()), separators=(",", ":"))


def _normal(s: Any, seen: set[str]) -> Any:
    """The normal form of one (sub)schema; a named type already written is referred to by name."""
    if isinstance(s, str):
        return s
    if isinstance(s, list):
        return [_normal(branch, seen) for branch in s]
    kind = s["type"]
    if kind in _PRIMITIVES and not any(k in s for k in ("logicalType", "precision", "scale")):
        return kind
    if kind in _NAMED:
        if s["name"] in seen:
            return s["name"]
        seen.add(s["name"])
    out: dict[str, Any] = {}
    for key in _NORMAL_KEYS:
        if key not in s:
            continue
        value = s[key]
        if key == "fields":
            value = [_normal_field(f, seen) for f in value]
        elif key in ("items", "values") or (key == "type" and not isinstance(value, str)):
            value = _normal(value, seen)
        out[key] = value
    return out


def _normal_field(f: dict[str, Any], seen: set[str]) -> dict[str, Any]:
    out = {"name": f["name"], "type": _normal(f["type"], seen)}
    if "default" in f:
        out["default"] = f["default"]
    return out


# ------------------------------------------------------------ resolution


def incompatibilities(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer``; empty when it can."""
    return _Resolver(reader.named, writer.named).check(reader.root, writer.root, "")


def check_level(level: str, new: AvroSchema, olds: list[tuple[int, AvroSchema]]) -> list[str]:
    """The problems that make ``new`` incompatible, at ``level``, with ``olds`` ((version, schema), oldest first)."""
    if level == "NONE" or not olds:
        return []
    against = olds if level.endswith("_TRANSITIVE") else olds[-1:]
    base = level.removesuffix("_TRANSITIVE")
    problems: list[str] = []
    for version, old in against:
        if base in ("BACKWARD", "FULL"):
            problems += [f"new schema cannot read version {version}: {p}" for p in incompatibilities(new, old)]
        if base in ("FORWARD", "FULL"):
            problems += [f"version {version} cannot read the new schema: {p}" for p in incompatibilities(old, new)]
    return problems


def _kind(s: Any) -> str:
    if isinstance(s, list):
        return "union"
    if isinstance(s, str):
        return s
    return str(s["type"])


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


class _Resolver:
    """One reader/writer comparison: both schemas' named types, and the named pairs being checked."""

    def __init__(self, reader_named: dict[str, Any], writer_named: dict[str, Any]) -> None:
        self.reader_named = reader_named
        self.writer_named = writer_named
        self.in_progress: set[tuple[str, str]] = set()

    def _deref(self, s: Any, named: dict[str, Any]) -> Any:
        """A named-type reference replaced by its definition; ``{"type": "long", ...}`` by ``"long"``."""
        if isinstance(s, str) and s not in _PRIMITIVES:
            return named[s]
        if isinstance(s, dict) and s["type"] in _PRIMITIVES:
            return s["type"]
        if isinstance(s, dict) and isinstance(s["type"], str) and s["type"] not in _COMPLEX:
            return named[s["type"]]  # {"type": "some.Named"}
        if isinstance(s, dict) and not isinstance(s["type"], str):
            return self._deref(s["type"], named)  # {"type": {...}} or {"type": [...]}
        return s

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        r = self._deref(reader, self.reader_named)
        w = self._deref(writer, self.writer_named)
        rk, wk = _kind(r), _kind(w)
        if wk == "union":
            return [p for i, branch in enumerate(w) for p in self.check(r, branch, f"{path}/{i}")]
        if rk == "union":
            return self._into_union(r, w, wk, path)
        if rk == wk:
            return self._same_kind(r, w, rk, path or "/")
        if (wk, rk) in _PROMOTIONS:
            return []
        return [f"TYPE_MISMATCH at {path or '/'}: reader type {rk} cannot read writer type {wk}"]

    def _into_union(self, r: list[Any], w: Any, wk: str, path: str) -> list[str]:
        """A non-union writer needs one reader branch that reads it."""
        for branch in r:
            if not self.check(branch, w, path):
                return []
        return [f"MISSING_UNION_BRANCH at {path or '/'}: reader union has no branch that reads writer type {wk}"]

    def _same_kind(self, r: Any, w: Any, kind: str, path: str) -> list[str]:
        if kind in _PRIMITIVES:
            return []
        if kind == "array":
            return self.check(r["items"], w["items"], f"{path.rstrip('/')}/items")
        if kind == "map":
            return self.check(r["values"], w["values"], f"{path.rstrip('/')}/values")
        if not self._names_match(r, w):
            return [f"NAME_MISMATCH at {path}: reader {kind} {r['name']!r} does not match writer {w['name']!r}"]
        if kind == "fixed":
            if r["size"] != w["size"]:
                return [f"FIXED_SIZE_MISMATCH at {path}: reader fixed {r['name']!r} size {r['size']}, writer {w['size']}"]
            return []
        if kind == "enum":
            return self._enum(r, w, path)
        return self._record(r, w, path)

    @staticmethod
    def _names_match(r: dict[str, Any], w: dict[str, Any]) -> bool:
        aliases = r.get("aliases") or []
        return _short(r["name"]) == _short(w["name"]) or w["name"] in aliases or _short(w["name"]) in aliases

    @staticmethod
    def _enum(r: dict[str, Any], w: dict[str, Any], path: str) -> list[str]:
        missing = [s for s in w["symbols"] if s not in r["symbols"]]
        if not missing or "default" in r:
            return []
        return [
            f"MISSING_ENUM_SYMBOLS at {path}: reader enum {r['name']!r} lacks writer symbols {missing} and has no default"
        ]

    def _record(self, r: dict[str, Any], w: dict[str, Any], path: str) -> list[str]:
        pair = (r["name"], w["name"])
        if pair in self.in_progress:
            return []  # a recursive reference: assumed compatible while the outer check decides
        self.in_progress.add(pair)
        try:
            writer_fields = {f["name"]: f for f in w["fields"]}
            problems: list[str] = []
            for field in r["fields"]:
                problems += self._field(field, writer_fields, f"{path.rstrip('/')}/{field['name']}")
            return problems
        finally:
            self.in_progress.discard(pair)

    def _field(self, field: dict[str, Any], writer_fields: dict[str, Any], path: str) -> list[str]:
        for name in (field["name"], *(field.get("aliases") or [])):
            if name in writer_fields:
                return self.check(field["type"], writer_fields[name]["type"], path)
        if "default" in field:
            return []
        return [
            f"READER_FIELD_MISSING_DEFAULT_VALUE at {path}: reader field {field['name']!r} has no default "
            "and the writer has no such field"
        ]
