"""Turning keys and values into bytes.

Two shapes are accepted for ``key.serializer`` / ``value.serializer``, so that both Python and
Java habits work:

* a **plain callable** ``f(data) -> bytes | None`` — the common Python case (``str.encode`` would
  do, and so do the ready-made serializers below); it is given the value only;
* an **object with** ``serialize(topic, data) -> bytes | None`` — Java's ``Serializer`` shape,
  for serializers that depend on the topic (schema registries: subject = topic name).

:func:`resolve_serializer` normalizes either (or a class, or a dotted import path naming one) to a
:data:`SerializeFn` ``fn(topic, data)``, which is what the producer calls once per record. Returning
``None`` means "no key" / "null value" (a tombstone for compacted topics), as in Java, so every
ready-made serializer maps ``None`` to ``None``.

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
    "ObjectSerializer",
    "SerializeFn",
    "bytes_serializer",
    "default_serializer",
    "int_serializer",
    "json_serializer",
    "long_serializer",
    "resolve_serializer",
    "str_serializer",
]

#: The normalized serializer the producer calls: ``fn(topic, data) -> bytes | None``.
SerializeFn = Callable[[str, Any], "bytes | None"]


@runtime_checkable
class ObjectSerializer(Protocol):
    """Java-style serializer object: ``serialize(topic, data)``."""

    def serialize(self, topic: str, data: Any) -> bytes | None: ...


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


_RESOLVED_MARK = "__aioproducer_resolved_serializer__"


def _is_resolved(obj: Any) -> bool:
    """Already a :data:`SerializeFn`: our wrapper, or the bound ``serialize`` of an object."""
    if getattr(obj, _RESOLVED_MARK, False):
        return True
    return inspect.ismethod(obj) and obj.__name__ == "serialize"


def resolve_serializer(obj: Any, what: str = "serializer") -> SerializeFn:
    """Normalize a configured serializer to ``fn(topic, data) -> bytes | None``.

    ``obj`` may be: an object with a ``serialize(topic, data)`` method (its bound method is
    returned, no wrapper); a class with such a method (instantiated without arguments, as Java
    instantiates ``key.serializer`` class names); a plain callable ``f(data)`` (wrapped to ignore
    the topic); or a dotted import path string naming any of these, e.g.
    ``"aioproducer.serializers.str_serializer"``. ``what`` names the config key in errors.
    """
    if _is_resolved(obj):  # idempotent: ProducerConfig(cfg.as_dict()) must not wrap twice
        return obj  # type: ignore[no-any-return]
    if isinstance(obj, str):
        obj = import_dotted(obj, what)
    if isinstance(obj, type):
        if not callable(getattr(obj, "serialize", None)):
            raise ConfigError(f"{what}: class {obj.__qualname__} has no serialize(topic, data) method")
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001 - any constructor failure is a configuration error
            raise ConfigError(f"{what}: {obj.__qualname__}() failed: {exc!r}") from exc
    method = getattr(obj, "serialize", None)
    if callable(method):
        return method  # type: ignore[no-any-return]
    if callable(obj):
        plain: Callable[[Any], bytes | None] = obj

        def serialize(topic: str, data: Any) -> bytes | None:
            return plain(data)

        serialize.__qualname__ = f"resolved({getattr(plain, '__qualname__', type(plain).__name__)})"
        serialize.__wrapped__ = plain  # type: ignore[attr-defined]
        setattr(serialize, _RESOLVED_MARK, True)
        return serialize
    raise ConfigError(
        f"{what} must be a callable f(data), an object with serialize(topic, data), "
        f"or a dotted import path, got {_type_name(obj)}"
    )
