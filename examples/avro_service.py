"""A FastAPI service publishing orders as Avro records registered in a Schema Registry.

    BOOTSTRAP_SERVERS=127.0.0.1:9092 SCHEMA_REGISTRY_URL=http://127.0.0.1:8081 TOPIC=orders \\
        python examples/avro_service.py

    curl -X POST localhost:8000/orders -d '{"id": 7, "amount": 9.5, "note": "gift"}'
    -> {"topic": "orders", "partition": 3, "offset": 41}

Each order is written in the Confluent wire format (magic byte, schema id, Avro), its key the
order id as text, so that any Kafka consumer with a registry-aware deserializer (Java's
``KafkaAvroDeserializer``, confluent-kafka's ``AvroDeserializer``) reads it. The schema is
registered under ``<topic>-value`` at the first order; every later order is encoded without
asking the registry again.

An order that does not fit the schema is a 422 naming the field; the registry down or failing is
a 503 with ``Retry-After`` (the order was fine), as the brokers down are.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, HTTPException, Request, Response

from aioproducer import str_serializer
from aioproducer.integrations.fastapi import ProducerDep, install_exception_handlers, producer_lifespan, producer_ready
from aioproducer.schema_registry import SchemaRegistryClient
from aioproducer.schema_registry.avro import AvroSerializer

ORDER_SCHEMA = json.dumps({
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
})

SERVICE_CONFIG: dict[str, Any] = {
    "linger.ms": 5,
    "max.block.ms": 5_000,
    "request.timeout.ms": 10_000,
    "delivery.timeout.ms": 15_000,
}


def create_app(
    bootstrap_servers: str | None = None,
    topic: str | None = None,
    registry_url: str | None = None,
    *,
    producer_config: Mapping[str, Any] | None = None,
    registry_config: Mapping[str, Any] | None = None,
) -> FastAPI:
    """The service; arguments left out come from ``BOOTSTRAP_SERVERS``, ``TOPIC`` and ``SCHEMA_REGISTRY_URL``."""
    topic_name = topic or os.environ.get("TOPIC", "orders")
    registry = SchemaRegistryClient({
        "url": registry_url or os.environ.get("SCHEMA_REGISTRY_URL", "http://127.0.0.1:8081"),
        "timeout": 5,  # a request waits at most this long for each registry call: then 503
        **(registry_config or {}),
    })
    config = {
        "bootstrap.servers": bootstrap_servers or os.environ.get("BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
        **SERVICE_CONFIG,
        "key.serializer": str_serializer,
        # The producer closes it when the app stops (and with it the registry client's connections).
        "value.serializer": AvroSerializer(registry, ORDER_SCHEMA),
        **(producer_config or {}),
    }
    app = FastAPI(lifespan=producer_lifespan(config, wait_ready=False, metrics_route=None))
    install_exception_handlers(app)  # does not fit: 422; registry or brokers down: 503 + Retry-After

    @app.post("/orders")
    async def publish(request: Request, producer: ProducerDep) -> dict[str, Any]:
        order = await request.json()
        if not isinstance(order, dict) or "id" not in order:
            raise HTTPException(422, "the body must be a JSON object with an 'id'")
        metadata = await producer.send_and_wait(topic_name, value=order, key=str(order["id"]))
        return {"topic": metadata.topic, "partition": metadata.partition, "offset": metadata.offset}

    @app.get("/ready")
    async def ready(request: Request) -> Response:
        return Response(status_code=200 if producer_ready(request.app.state.aioproducer_producers["default"]) else 503)

    return app


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(create_app(), host="0.0.0.0", port=int(os.environ.get("PORT", "8000")), timeout_graceful_shutdown=5)
