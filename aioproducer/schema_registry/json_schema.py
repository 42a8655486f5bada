"""JSON values checked against a JSON Schema, in the Confluent wire format.

``JSONSchemaSerializer(schema_str, schema_registry_client, to_dict=None, conf=None)`` has the shape
of confluent-kafka's (the schema first). Values are dicts, lists, dataclasses (their fields), or
what ``to_dict(obj, ctx)`` returns; each is validated with ``jsonschema`` (conf ``validate``,
default True) and written as compact UTF-8 JSON. The subject strategies' record name is the
schema's ``title``. Other ``conf`` keys as :class:`~aioproducer.schema_registry.avro.AvroSerializer`'s.
Schema references are not supported (a clear error).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from aioproducer.errors import ConfigError, SerializationError
from aioproducer.schema_registry.client import RegisteredSchema, Schema, SchemaRegistryClient
from aioproducer.schema_registry.serde import Known, RegistrySerializer, SerializationContext, to_plain

__all__ = ["JSONSchemaSerializer"]

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _jsonschema() -> Any:
    try:
        import jsonschema
    except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
        raise ConfigError("JSONSchemaSerializer needs jsonschema: pip install 'aioproducer[schema-registry]'") from exc
    return jsonschema


class JSONSchemaSerializer(RegistrySerializer):
    """Serializes to JSON validated by a JSON Schema, registry-framed (see the module docstring)."""

    def __init__(
        self,
        schema_str: str | Schema | None,
        schema_registry_client: SchemaRegistryClient,
        to_dict: Callable[[Any, SerializationContext], Any] | None = None,
        conf: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(schema_registry_client, conf, {"validate": True})
        validate = self._conf["validate"]
        if not isinstance(validate, bool):
            raise ConfigError(f"validate must be True or False, got {validate!r}")
        self._validate = validate
        _jsonschema()  # missing: said now, at the call that made the serializer
        #: schema text -> its validator (the schema given, and any the registry handed back).
        self._validators: dict[str, Any] = {}
        self._given = self._given_schema(schema_str, "JSON", to_dict)
        self._title: str | None = None
        if self._given is None:
            return
        given = self._given
        schema = self._validator(given.schema_str, "schema_str").schema
        self._title = schema.get("title") if isinstance(schema, dict) else None

    def _validator(self, text: str, what: str) -> Any:
        validator = self._validators.get(text)
        if validator is None:
            try:
                schema = json.loads(text)
                cls = _jsonschema().validators.validator_for(schema)
                cls.check_schema(schema)
            except Exception as exc:  # not JSON, or not a schema of its draft
                raise ConfigError(f"{what} is not a valid JSON Schema: {exc}") from exc
            validator = self._validators[text] = cls(schema)
        return validator

    def _schema(self) -> Schema:
        assert self._given is not None
        return self._given

    def _record_name(self, data: Any) -> str | None:
        return self._title

    def _codec(self, registered: RegisteredSchema) -> Any:
        if registered.schema.references:
            raise SerializationError(f"schema id {registered.schema_id}: schema references are not supported")
        if not self._validate:
            return None
        try:
            return self._validator(registered.schema.schema_str, f"schema id {registered.schema_id}")
        except ConfigError as exc:
            raise SerializationError(str(exc)) from exc

    def _payload(self, known: Known, data: Any, ctx: SerializationContext | None) -> bytes:
        value = to_plain(data, self._to_dict, ctx)
        validator = known.codec
        if validator is not None:
            error = _jsonschema().exceptions.best_match(validator.iter_errors(value))
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path) or "the value"
                registered = known.registered
                raise SerializationError(
                    f"the record does not fit JSON schema id {registered.schema_id} of subject {registered.subject!r} "
                    f"at {where}: {error.message}"
                )
        try:
            return _encoder.encode(value).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise SerializationError(f"the record is not JSON: {exc}") from exc
