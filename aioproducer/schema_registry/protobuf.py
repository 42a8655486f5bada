"""Protobuf messages in the Confluent wire format.

``ProtobufSerializer(msg_type, schema_registry_client, conf=None)`` has the shape of
confluent-kafka's: ``msg_type`` is the generated message class, and every value must be an
instance of it. The schema registered is the message's .proto file as a serialized
``FileDescriptorProto``, base64-encoded (what confluent-kafka registers; the registry accepts it
for ``PROTOBUF``); the record is the magic byte and id, the message's index path in its file
(zigzag varints, ``[0]`` as the single byte 0), then ``SerializeToString()``. The subject
strategies' record name is the message's full name. ``conf`` as the other serializers'.

Not supported (a clear error): a .proto file that imports others (they would be schema
references registered under subjects of their own).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from aioproducer.errors import ConfigError, SerializationError
from aioproducer.schema_registry.client import RegisteredSchema, Schema, SchemaRegistryClient
from aioproducer.schema_registry.serde import Known, RegistrySerializer, SerializationContext

__all__ = ["ProtobufSerializer", "message_indexes"]


def message_indexes(descriptor: Any) -> list[int]:
    """Where a message is in its .proto file: its top-level position, then each nested position."""
    path: list[int] = []
    current = descriptor
    while current.containing_type is not None:
        parent = current.containing_type
        path.append(list(parent.nested_types).index(current))
        current = parent
    path.append(list(current.file.message_types_by_name).index(current.name))
    return path[::-1]


def encode_indexes(indexes: list[int]) -> bytes:
    """The index path as the wire format writes it: ``[0]`` as one 0 byte, else a count and the indexes, zigzag varints."""
    if indexes == [0]:
        return b"\x00"
    out = bytearray()
    for value in (len(indexes), *indexes):
        zigzag = (value << 1) ^ (value >> 63)
        while zigzag > 0x7F:
            out.append((zigzag & 0x7F) | 0x80)
            zigzag >>= 7
        out.append(zigzag)
    return bytes(out)


class ProtobufSerializer(RegistrySerializer):
    """Serializes generated Protobuf messages, registry-framed (see the module docstring)."""

    def __init__(self, msg_type: type, schema_registry_client: SchemaRegistryClient, conf: Mapping[str, Any] | None = None) -> None:
        super().__init__(schema_registry_client, conf, {})
        descriptor = getattr(msg_type, "DESCRIPTOR", None)
        if not isinstance(msg_type, type) or descriptor is None or not hasattr(descriptor, "file"):
            raise ConfigError(f"msg_type must be a generated Protobuf message class, got {msg_type!r}")
        if descriptor.file.dependencies:
            deps = ", ".join(d.name for d in descriptor.file.dependencies)
            raise ConfigError(f"ProtobufSerializer: {descriptor.file.name} imports {deps}; schema references are not supported")
        self._msg_type = msg_type
        self._full_name: str = descriptor.full_name
        self._index_bytes = encode_indexes(message_indexes(descriptor))
        self._given = Schema(base64.standard_b64encode(descriptor.file.serialized_pb).decode("ascii"), "PROTOBUF")

    def _schema(self) -> Schema:
        return self._given

    def _record_name(self, data: Any) -> str | None:
        return self._full_name

    def _check(self, data: Any) -> None:
        if not isinstance(data, self._msg_type):
            raise SerializationError(f"ProtobufSerializer for {self._full_name} got {type(data).__name__}, not a {self._msg_type.__name__}")

    def _indexes(self) -> bytes:
        return self._index_bytes

    def _payload(self, known: Known, data: Any, ctx: SerializationContext | None) -> bytes:
        self._check(data)
        try:
            payload: bytes = data.SerializeToString()
        except Exception as exc:  # a required field missing (proto2)
            raise SerializationError(f"cannot serialize {self._full_name}: {exc}") from exc
        return payload
