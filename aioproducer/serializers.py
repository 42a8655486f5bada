"""Turning keys and values into bytes.

Three shapes are accepted for ``key.serializer`` / ``value.serializer``, so that both Python and
Java habits work:

* a **plain callable** ``f(data) -> bytes | None``: the common Python case (``str.encode`` would
  do, and so do the ready-made serializers below); it is given the value only;
* an **object with** ``serialize(topic, data) -> bytes | None``: Java's ``Serializer`` shape,
  for serializers that depend on the topic (schema registries: subject = topic name);
* an **object with** ``serialize(topic, headers, data)``: Java's ``Serializer`` with headers. It
  is given the record's headers as a list of ``(str, bytes | None)`` pairs and may append to it
  (a schema id in a header, a content type); the record is sent with what the list holds after.

Any of them may be **async** (``async def``, or any callable returning an awaitable): ``send()``
awaits it before the record is queued, the key's before the value's. A synchronous serializer
costs what it did: the producer awaits only a result that is neither ``bytes`` nor ``None``.

:func:`resolve_serializer` normalizes any of them (or a class, or a dotted import path naming one)
to a :class:`ResolvedSerializer`, which says how the producer calls it. Returning ``None`` means
"no key" / "null value" (a tombstone for compacted topics), as in Java, so every ready-made
serializer maps ``None`` to ``None``.

Failures are :class:`~aioproducer.errors.SerializationError` naming the offending type, raised
from ``send()`` before anything is queued.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from aioproducer.errors import ConfigError, SerializationError

__all__ = [
    "HeadersObjectSerializer",
    "ObjectSerializer",
    "ResolvedSerializer",
    "SerializeFn",
    "bytes_serializer",
    "default_serializer",
    "int_serializer",
    "json_serializer",
    "long_serializer",
    "resolve_serializer",
    "str_serializer",
]

#: The headers a header-aware serializer is given (and may append to).
HeaderList = list[tuple[str, "bytes | None"]]


@runtime_checkable
class ObjectSerializer(Protocol):
    """Java-style serializer object: ``serialize(topic, data)`` (may be ``async``)."""

    def serialize(self, topic: str, data: Any) -> Any: ...


@runtime_checkable
class HeadersObjectSerializer(Protocol):
    """Java-style serializer object that sees the record's headers: ``serialize(topic, headers, data)`` (may be ``async``)."""

    def serialize(self, topic: str, headers: HeaderList, data: Any) -> Any: ...


class ResolvedSerializer:
    """A configured serializer and how the producer calls it.

    ``arity`` is 1 for ``fn(data)``, 2 for ``fn(topic, data)``, 3 for ``fn(topic, headers, data)``:
    the producer calls ``fn`` directly with that many arguments (no wrapper frame per record).
    ``source`` is what was configured (an object, a function), for error messages and ``repr``.
    Calling the resolved serializer itself, ``s(topic, data, headers=None)``, does what the producer
    does, without the checks: the result may be awaitable for an async serializer.
    """

    __slots__ = ("fn", "arity", "source")

    def __init__(self, fn: Callable[..., Any], arity: int, source: object) -> None:
        if arity not in (1, 2, 3):
            raise ValueError(f"arity must be 1, 2 or 3, got {arity!r}")
        self.fn: Callable[..., Any] = fn
        self.arity = arity
        self.source: object = source

    def __call__(self, topic: str, data: Any, headers: HeaderList | None = None) -> Any:
        if self.arity == 1:
            return self.fn(data)
        if self.arity == 2:
            return self.fn(topic, data)
        return self.fn(topic, [] if headers is None else headers, data)

    @property
    def with_headers(self) -> bool:
        """Whether it is given the record's headers (``serialize(topic, headers, data)``)."""
        return self.arity == 3

    def __repr__(self) -> str:
        return f"ResolvedSerializer({self.source!r}, arity={self.arity})"


#: The normalized serializer the producer calls (the name of earlier releases).
SerializeFn = ResolvedSerializer


def _type_name(data: object) -> str:
    cls = type(data)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def default_serializer(data: Any) -> bytes | None:
    """What the producer uses when no serializer is configured.

    ``bytes`` pass through untouched (no copy), ``bytearray``/``memoryview`` are copied to
    ``bytes`` (the record must not change after ``send()`` returns), ``str`` is UTF-8, ``None``
    stays ``None``. Anything else is refused rather than guessed (``str(obj)``? ``repr``? JSON?):
    configure a serializer for it.
    """
    if data is None:
        return None
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    raise SerializationError(
        f"cannot serialize {_type_name(data)} without a serializer: pass bytes or str, "
        "or configure key.serializer / value.serializer"
    )


def bytes_serializer(data: Any) -> bytes | None:
    """Bytes-like in, ``bytes`` out (Java's ``ByteArraySerializer``); ``str`` is refused."""
    if data is None:
        return None
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise SerializationError(f"bytes_serializer expects bytes, bytearray or memoryview, got {_type_name(data)}")


def str_serializer(data: Any) -> bytes | None:
    """``str`` as UTF-8 (Java's ``StringSerializer`` default encoding)."""
    if data is None:
        return None
    if isinstance(data, str):
        try:
            return data.encode("utf-8")
        except UnicodeEncodeError as exc:  # lone surrogates
            raise SerializationError(f"str_serializer: string is not encodable as UTF-8: {exc}") from exc
    raise SerializationError(f"str_serializer expects str, got {_type_name(data)}")


def _fixed_int(data: Any, size: int, name: str) -> bytes | None:
    if data is None:
        return None
    # bool is an int subclass; True -> b"\x00\x00\x00\x01" is more likely a bug than intended.
    if isinstance(data, bool) or not isinstance(data, int):
        raise SerializationError(f"{name} expects int, got {_type_name(data)}")
    try:
        return data.to_bytes(size, "big", signed=True)
    except OverflowError as exc:
        bits = size * 8
        raise SerializationError(
            f"{name}: {data} does not fit in a signed {bits}-bit integer "
            f"[{-(1 << (bits - 1))}, {(1 << (bits - 1)) - 1}]"
        ) from exc


def int_serializer(data: Any) -> bytes | None:
    """Signed 32-bit big-endian, byte-compatible with Java's ``IntegerSerializer``."""
    return _fixed_int(data, 4, "int_serializer")


def long_serializer(data: Any) -> bytes | None:
    """Signed 64-bit big-endian, byte-compatible with Java's ``LongSerializer``."""
    return _fixed_int(data, 8, "long_serializer")


_json_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def json_serializer(data: Any) -> bytes | None:
    """Compact JSON in UTF-8 (no spaces, non-ASCII kept as is, NaN/Infinity refused as not JSON).

    ``None`` maps to ``None`` (a null record value), not to the JSON text ``null``, consistently
    with the other serializers: a ``None`` value is a tombstone in Kafka.
    """
    if data is None:
        return None
    try:
        return _json_encoder.encode(data).encode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError) as exc:
        raise SerializationError(f"json_serializer cannot encode {_type_name(data)}: {exc}") from exc


def import_dotted(path: str, what: str) -> Any:
    """Import ``package.module.name`` for config key ``what``; ConfigError (naming the key) on failure."""
    module_name, _, attr = path.rpartition(".")
    if not module_name:
        raise ConfigError(f"{what} must be a dotted import path like 'package.module.name', got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{what}: cannot import module {module_name!r} ({exc})") from exc
    try:
        return getattr(module, attr)
    except AttributeError as exc:
        raise ConfigError(f"{what}: module {module_name!r} has no attribute {attr!r}") from exc


def _method_arity(method: Callable[..., Any], what: str, owner: str) -> int:
    """2 for ``serialize(topic, data)``, 3 for ``serialize(topic, headers, data)``; else ConfigError naming ``what``."""
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: the Java shape is assumed
        return 2
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    positional = [p for p in params if p.kind in kinds]
    required = [p for p in positional if p.default is inspect.Parameter.empty]
    if len(required) == 3:
        return 3
    if len(required) <= 2 and (len(positional) >= 2 or any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)):
        return 2
    raise ConfigError(
        f"{what}: {owner}.serialize must take (topic, data) or (topic, headers, data), "
        f"it takes {len(required)} required argument(s)"
    )


def resolve_serializer(obj: Any, what: str = "serializer") -> ResolvedSerializer:
    """Normalize a configured serializer to a :class:`ResolvedSerializer`.

    ``obj`` may be: an object with a ``serialize(topic, data)`` or ``serialize(topic, headers, data)``
    method (its bound method is called, no wrapper); a class with such a method (instantiated
    without arguments, as Java instantiates ``key.serializer`` class names); a plain callable
    ``f(data)``; or a dotted import path string naming any of these, e.g.
    ``"aioproducer.serializers.str_serializer"``. Any of them may be async. ``what`` names the
    config key in errors.
    """
    if isinstance(obj, ResolvedSerializer):  # idempotent: ProducerConfig(cfg.as_dict()) must not wrap twice
        return obj
    source = obj
    if isinstance(obj, str):
        obj = import_dotted(obj, what)
    if isinstance(obj, type):
        if not callable(getattr(obj, "serialize", None)):
            raise ConfigError(f"{what}: class {obj.__qualname__} has no serialize(topic, data) method")
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001 - any constructor failure is a configuration error
            raise ConfigError(f"{what}: {obj.__qualname__}() failed: {exc!r}") from exc
        source = obj
    method = getattr(obj, "serialize", None)
    if callable(method):
        return ResolvedSerializer(method, _method_arity(method, what, type(obj).__qualname__), source)
    if callable(obj):
        return ResolvedSerializer(obj, 1, source)
    raise ConfigError(
        f"{what} must be a callable f(data), an object with serialize(topic, data) or "
        f"serialize(topic, headers, data), or a dotted import path, got {_type_name(obj)}"
    )
