"""Confluent Schema Registry support: an asyncio client and registry-framed serializers.

Install with ``pip install 'aioproducer[schema-registry]'``. The names follow confluent-kafka's,
so code moves over by changing the import::

    from aioproducer.schema_registry import SchemaRegistryClient
    from aioproducer.schema_registry.avro import AvroSerializer

    client = SchemaRegistryClient({"url": "http://registry:8081"})
    async with Producer(bootstrap_servers=..., value_serializer=AvroSerializer(client, schema_str)) as producer:
        await producer.send("orders", {"id": 1, "amount": 9.5})

The serializers are ``serialize(topic, headers, data)`` objects of the producer's serializer
contract: the first record of a subject awaits the registry, every later one is encoded
without an HTTP request or an ``await``. ``aioproducer.testing.SchemaRegistry`` is a registry
for tests.
"""

from aioproducer.schema_registry.client import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from aioproducer.schema_registry.serde import (
    MessageField,
    SerializationContext,
    header_schema_id_serializer,
    prefix_schema_id_serializer,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)

__all__ = [
    "MessageField",
    "RegisteredSchema",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "SerializationContext",
    "header_schema_id_serializer",
    "prefix_schema_id_serializer",
    "record_subject_name_strategy",
    "topic_record_subject_name_strategy",
    "topic_subject_name_strategy",
]
