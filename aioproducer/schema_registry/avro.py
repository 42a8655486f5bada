"""Avro records in the Confluent wire format, written with ``fastavro``.

``AvroSerializer(schema_registry_client, schema_str, to_dict=None, conf=None)`` has the shape of
confluent-kafka's, so moving over is changing the import; it is passed to the producer as
``value_serializer=`` (or ``key_serializer=``). Values are dicts, dataclasses (their fields), or
anything ``to_dict(obj, ctx)`` turns into a dict. ``conf``: ``auto.register.schemas`` (True),
``normalize.schemas`` (False), ``use.schema.id`` (None), ``use.latest.version`` (False: then the
record is written with the subject's latest schema, which it must fit), ``subject.name.strategy``
and ``schema.id.serializer`` (see :mod:`aioproducer.schema_registry.serde`).

Not supported (a clear error when met): schema references (named types registered under
another subject) and confluent's data-quality rules (``rule_conf``, ``rule_registry``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping
from typing import Any

from aioproducer.errors import ConfigError, SerializationError
from aioproducer.schema_registry.client import RegisteredSchema, Schema, SchemaRegistryClient
from aioproducer.schema_registry.serde import Known, RegistrySerializer, SerializationContext, to_plain

__all__ = ["AvroSerializer"]

#: fastavro, once imported (``_fastavro``).
_FASTAVRO: Any = None


def _fastavro() -> Any:
    """The module, imported at first use (not kept on the serializer: it travels pickled to Spark's workers)."""
    global _FASTAVRO
    if _FASTAVRO is None:
        try:
            import fastavro
        except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
            raise ConfigError("AvroSerializer needs fastavro: pip install 'aioproducer[schema-registry]'") from exc
        _FASTAVRO = fastavro
    return _FASTAVRO


class AvroSerializer(RegistrySerializer):
    """Serializes to Avro, registry-framed (see the module docstring)."""

    def __init__(
        self,
        schema_registry_client: SchemaRegistryClient,
        schema_str: str | Schema | None = None,
        to_dict: Callable[[Any, SerializationContext], Any] | None = None,
        conf: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(schema_registry_client, conf, {})
        _fastavro()  # missing: said now, at the call that made the serializer
        #: schema text -> fastavro's parsed schema (the one given, and any the registry handed back).
        self._parsed: dict[str, Any] = {}
        self._given = self._given_schema(schema_str, "AVRO", to_dict)
        self._record_name_of_given: str | None = None
        if self._given is None:
            return
        given = self._given
        parsed = self._parse(given.schema_str, "schema_str")
        self._record_name_of_given = parsed.get("name") if isinstance(parsed, dict) else None

    def _parse(self, text: str, what: str) -> Any:
        parsed = self._parsed.get(text)
        if parsed is None:
            try:
                parsed = _fastavro().parse_schema(json.loads(text))
            except Exception as exc:  # JSON errors and fastavro's SchemaParseException alike
                raise ConfigError(f"{what} is not a valid Avro schema: {exc}") from exc
            self._parsed[text] = parsed
        return parsed

    def _schema(self) -> Schema:
        assert self._given is not None  # checked in __init__: no schema needs latest or an id
        return self._given

    def _record_name(self, data: Any) -> str | None:
        return self._record_name_of_given

    def _codec(self, registered: RegisteredSchema) -> Any:
        if registered.schema.references:
            raise SerializationError(f"schema id {registered.schema_id}: schema references are not supported")
        try:
            return self._parse(registered.schema.schema_str, f"schema id {registered.schema_id}")
        except ConfigError as exc:
            raise SerializationError(str(exc)) from exc

    def _payload(self, known: Known, data: Any, ctx: SerializationContext | None) -> bytes:
        out = io.BytesIO()
        try:
            _fastavro().schemaless_writer(out, known.codec, to_plain(data, self._to_dict, ctx))
        except Exception as exc:  # fastavro raises TypeError, ValueError, KeyError, AttributeError for bad records
            registered = known.registered
            raise SerializationError(
                f"the record does not fit Avro schema id {registered.schema_id} of subject {registered.subject!r}: {exc!r}"
            ) from exc
        return out.getvalue()
