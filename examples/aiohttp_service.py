"""An aiohttp service publishing each ``POST /events`` JSON body to Kafka, answering with where it landed.

    BOOTSTRAP_SERVERS=127.0.0.1:9092 TOPIC=events python examples/aiohttp_service.py

    curl -X POST localhost:8080/events -H 'request-id: r-1' -d '{"user_id": "u1", "action": "login"}'
    -> {"topic": "events", "partition": 3, "offset": 41, "request_id": "r-1"}

The record: value = the body as received, key = its ``user_id`` (one user's events stay in
order, on one partition), header ``request-id`` = the request's (or a new uuid).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from aioproducer import KafkaTimeoutError
from aioproducer.integrations.aiohttp import PRODUCER_KEY, setup_producer

TOPIC_KEY = web.AppKey("topic", str)


def create_app(
    bootstrap_servers: str | None = None,
    topic: str | None = None,
    *,
    producer_config: Mapping[str, Any] | None = None,
    close_timeout: float = 10.0,
) -> web.Application:
    """The service; arguments left out come from ``BOOTSTRAP_SERVERS`` and ``TOPIC`` (tests pass them)."""
    app = web.Application()
    app[TOPIC_KEY] = topic or os.environ.get("TOPIC", "events")
    config = {
        "bootstrap.servers": bootstrap_servers or os.environ.get("BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
        "linger.ms": 5,  # concurrent requests share batches
        **(producer_config or {}),
    }
    # Starts the producer with the app, flushes and closes it within close_timeout on cleanup.
    setup_producer(app, config, close_timeout=close_timeout)
    app.router.add_post("/events", publish)
    return app


async def publish(request: web.Request) -> web.Response:
    body = await request.read()
    try:
        event = json.loads(body)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        raise web.HTTPUnprocessableEntity(text="the body must be a JSON object")
    request_id = request.headers.get("request-id") or str(uuid.uuid4())
    user_id = event.get("user_id")
    try:
        metadata = await request.app[PRODUCER_KEY].send_and_wait(
            request.app[TOPIC_KEY],
            value=body,
            key=None if user_id is None else str(user_id),
            headers=[("request-id", request_id.encode())],
        )
    except KafkaTimeoutError as exc:  # buffer full or cluster silent: tell the client to come back
        raise web.HTTPServiceUnavailable(text=str(exc), headers={"Retry-After": "1"}) from None
    return web.json_response(
        {"topic": metadata.topic, "partition": metadata.partition, "offset": metadata.offset, "request_id": request_id}
    )


if __name__ == "__main__":
    # shutdown_timeout bounds how long stopping waits for requests in flight; close_timeout follows.
    web.run_app(create_app(), port=int(os.environ.get("PORT", "8080")), shutdown_timeout=5)
