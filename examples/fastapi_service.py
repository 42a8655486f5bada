"""A FastAPI service publishing each ``POST /events`` JSON body to Kafka, answering with where it landed.

    BOOTSTRAP_SERVERS=127.0.0.1:9092 TOPIC=events python examples/fastapi_service.py

    curl -X POST localhost:8000/events -H 'request-id: r-1' -d '{"user_id": "u1", "action": "login"}'
    -> {"topic": "events", "partition": 3, "offset": 41, "request_id": "r-1"}

The record: value = the body as received, key = its ``user_id`` (one user's events stay in
order, on one partition), header ``request-id`` = the request's (or a new uuid), to trace a
record back to its request. ``GET /ready`` is the readiness probe: 503 until the producer
started, 200 from then on (see ``producer_ready``).

``GET /metrics`` is the producer's metrics in Prometheus' text format, for Prometheus to scrape
(``pip install 'aioproducer[prometheus]'``; ``metrics_route=None`` goes without).

Brokers down when it starts: it serves anyway (``wait_ready=False``), ``/ready`` answers 503
and the producer keeps trying in the background; once a broker answers, ``/ready`` turns
200 with no request needed. A publish meanwhile, or while the brokers are down later,
is a 503 with ``Retry-After: 1`` within the bounds below, never a 500 or a hang.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse

from aioproducer import Producer
from aioproducer.integrations.fastapi import ProducerDep, install_exception_handlers, producer_lifespan, producer_ready

#: Timeouts sized for a request that waits for its acknowledgement (the defaults suit batch jobs:
#: a request would hang up to delivery.timeout.ms=120 s while the brokers are down).
SERVICE_CONFIG: dict[str, Any] = {
    "linger.ms": 5,  # concurrent requests share batches: a few ms of latency for far fewer requests
    "max.block.ms": 5_000,  # metadata or buffer memory not there within 5 s: 503 (and each start attempt's bound)
    "request.timeout.ms": 10_000,  # a broker silent for 10 s is given up on and the batch retried elsewhere
    "delivery.timeout.ms": 15_000,  # the longest a request waits for its acknowledgement: then 503
}


def create_app(
    bootstrap_servers: str | None = None,
    topic: str | None = None,
    *,
    producer_config: Mapping[str, Any] | None = None,
    close_timeout: float = 10.0,
    wait_ready: bool = False,
    metrics_route: str | None = "/metrics",
    producer: Producer | None = None,
) -> FastAPI:
    """The service; arguments left out come from ``BOOTSTRAP_SERVERS`` and ``TOPIC`` (tests pass them).

    ``producer``: used in place of one made from the settings (a test's ``FakeProducer``).
    """
    topic_name = topic or os.environ.get("TOPIC", "events")
    config = {
        "bootstrap.servers": bootstrap_servers or os.environ.get("BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
        **SERVICE_CONFIG,
        **(producer_config or {}),
    }
    # The producer starts with the app, in the background (wait_ready=False: a Kafka restart
    # must not crash-loop the service; /ready keeps traffic away until it started), and is
    # flushed and closed, within close_timeout, when it stops.
    # metrics_route: GET /metrics is the producer's metrics for Prometheus to scrape
    # (kafka_producer_record_send_total, ..._delivery_latency_seconds ...; needs prometheus_client).
    app = FastAPI(
        lifespan=producer_lifespan(config if producer is None else producer, close_timeout=close_timeout, wait_ready=wait_ready, metrics_route=metrics_route)
    )
    install_exception_handlers(app)  # brokers down, buffer full -> 503 + Retry-After, too large -> 413

    @app.post("/events")
    async def publish(request: Request, producer: ProducerDep) -> dict[str, Any]:
        body = await request.body()
        event = _json_object(body)
        request_id = request.headers.get("request-id") or str(uuid.uuid4())
        user_id = event.get("user_id")
        # Waits for the broker's acknowledgement: the answer says the event is stored.
        metadata = await producer.send_and_wait(
            topic_name,
            value=body,
            key=None if user_id is None else str(user_id),
            headers=[("request-id", request_id.encode())],
        )
        return {"topic": metadata.topic, "partition": metadata.partition, "offset": metadata.offset, "request_id": request_id}

    @app.get("/ready")
    async def ready(request: Request) -> JSONResponse:
        producer = request.app.state.aioproducer_producers["default"]
        ok = producer_ready(producer)
        return JSONResponse({"ready": ok}, status_code=200 if ok else 503)

    return app


def _json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or a 422: a record that is not an event must not reach the topic."""
    try:
        event = json.loads(body)
    except ValueError:
        raise HTTPException(422, "the body must be JSON") from None
    if not isinstance(event, dict):
        raise HTTPException(422, "the body must be a JSON object")
    return event


if __name__ == "__main__":
    import uvicorn

    # timeout_graceful_shutdown bounds how long stopping waits for requests in flight
    # (a request waits for its acknowledgement); the producer's close_timeout follows it.
    uvicorn.run(create_app(), host="0.0.0.0", port=int(os.environ.get("PORT", "8000")), timeout_graceful_shutdown=5)
