"""aiohttp integration: a producer that lives from the application's startup to its cleanup.

::

    from aioproducer.integrations.aiohttp import PRODUCER_KEY, install_exception_handlers, setup_producer

    app = web.Application()
    setup_producer(app, {"bootstrap.servers": "kafka:9092"})
    install_exception_handlers(app)        # producer errors -> 503 + Retry-After, 413, 422

    async def publish(request: web.Request) -> web.Response:
        md = await request.app[PRODUCER_KEY].send_and_wait("events", await request.read())
        ...

    async def ready(request: web.Request) -> web.Response:   # the readiness probe
        return web.json_response({}, status=200 if request.app[PRODUCER_KEY].ready else 503)

The producer is made and started in the application's ``cleanup_ctx`` (so in the server's
event loop: one event loop, one producer). ``wait_ready=True``: startup keeps trying the
bootstrap servers for up to ``max.block.ms``, and a cluster unreachable all that time fails
it with ``KafkaTimeoutError`` naming them and their last failures. ``wait_ready=False``:
the application serves at once while the producer starts in the background, retrying
until it started (``Producer.ready`` turns true: the readiness probe) or the application
stops; handlers then take the producer with :func:`started_producer`, which waits for the
start or answers 503. ``setup_producer(app, config, metrics_route="/metrics")`` also serves the
producer's metrics in Prometheus' text format on that path (``aioproducer[prometheus]``).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from aioproducer.errors import AuthenticationError, KafkaConnectionError, KafkaTimeoutError, ProducerClosedError
from aioproducer.integrations._common import (
    RETRY_AFTER,
    MetricsEndpoint,
    check_metrics_route,
    check_producer_config,
    error_status,
    producer_for,
    shutdown_producer,
    start_for_request,
    start_in_background,
    stop_background,
)
from aioproducer.producer import Producer

__all__ = [
    "METRICS_KEY",
    "PRODUCER_KEY",
    "install_exception_handlers",
    "kafka_error_middleware",
    "setup_producer",
    "started_producer",
]

PRODUCER_KEY: web.AppKey[Producer] = web.AppKey("producer", Producer)
"""Where `setup_producer` puts the producer by default: `request.app[PRODUCER_KEY]`."""

METRICS_KEY: web.AppKey[dict[str, MetricsEndpoint]] = web.AppKey("aioproducer_metrics", dict)
"""`{path: MetricsEndpoint}` of the `metrics_route`s of `setup_producer`."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def setup_producer(
    app: web.Application,
    config: Mapping[str, Any] | Producer,
    *,
    key: web.AppKey[Producer] = PRODUCER_KEY,
    close_timeout: float = 10.0,
    name: str = "default",
    wait_ready: bool = True,
    metrics_route: str | None = None,
) -> None:
    """Register a ``cleanup_ctx`` that starts ``Producer(config)`` as ``app[key]`` and closes it on cleanup.

    ``config`` may be a ``Producer`` instead (a test's ``FakeProducer``): that one is started
    and closed the same way.

    ``wait_ready``: as ``producer_lifespan``'s in the FastAPI integration (see the module
    docstring): ``False`` puts the producer in ``app[key]`` before it started, so that
    handlers should take it with :func:`started_producer`.
    Cleanup: ``flush()`` bounded by ``close_timeout`` seconds, then ``close()`` with what is
    left, then a log line counting the records not delivered (logger ``aioproducer.integrations``).
    Another ``key`` gives a second producer; ``name`` is how the log lines call it.

    ``metrics_route``: a path (``"/metrics"``) where a GET answers with the producer's metrics
    in Prometheus' text format (``ProducerCollector`` in a registry of the route's own, read at
    each scrape). Producers given the same path share it, under their ``client_id`` labels.
    ``ImportError`` here, at the call, without ``prometheus_client``; ``ValueError`` for a path
    not starting with ``/``.
    """
    config = check_producer_config(config)
    endpoint = _metrics_endpoint(app, check_metrics_route(metrics_route)) if metrics_route is not None else None
    app.cleanup_ctx.append(_producer_ctx(config, key, close_timeout, name, wait_ready, endpoint))


def _metrics_endpoint(app: web.Application, path: str) -> MetricsEndpoint:
    """The app's endpoint at ``path``, its GET route added the first time (the router freezes when the app starts)."""
    endpoints = app.get(METRICS_KEY)
    if endpoints is None:
        endpoints = app[METRICS_KEY] = {}
    endpoint = endpoints.get(path)
    if endpoint is None:
        endpoint = endpoints[path] = MetricsEndpoint()

        async def metrics(request: web.Request) -> web.Response:
            body, content_type = endpoint.render()
            return web.Response(body=body, headers={"Content-Type": content_type})

        app.router.add_get(path, metrics)
    return endpoint


def _producer_ctx(
    config: Mapping[str, Any] | Producer,
    key: web.AppKey[Producer],
    close_timeout: float,
    name: str,
    wait_ready: bool,
    endpoint: MetricsEndpoint | None,
) -> Callable[[web.Application], AsyncIterator[None]]:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        producer = producer_for(config)
        if endpoint is not None:
            endpoint.add(producer)  # before start(): its first batches' latency counts too
        background: asyncio.Task[None] | None = None
        if wait_ready:
            try:
                await producer.start()
            except BaseException:
                await producer.close(timeout=0)  # nothing a failed start opened may outlive it
                if endpoint is not None:
                    endpoint.remove(producer)
                raise
        else:
            background = start_in_background(producer, name)
        app[key] = producer
        try:
            yield
        finally:
            await shutdown_producer(producer, name, close_timeout)
            await stop_background(background)  # close() ended its attempt; it may be waiting for the next
            if endpoint is not None:
                endpoint.remove(producer)

    return ctx


async def started_producer(request: web.Request, key: web.AppKey[Producer] = PRODUCER_KEY) -> Producer:
    """``request.app[key]`` once started: waits for a start in progress (``wait_ready=False``), at most ``max.block.ms``.

    A producer that could not start (cluster unreachable, wrong credentials) or is shutting
    down is ``HTTPServiceUnavailable`` (503) with ``Retry-After: 1``: the request was fine,
    the service is not ready. On a started producer it returns at once.
    """
    producer = request.app[key]
    try:
        await start_for_request(producer)
    except (KafkaTimeoutError, KafkaConnectionError, AuthenticationError, ProducerClosedError) as exc:
        raise web.HTTPServiceUnavailable(
            text=f"the Kafka producer is not started: {type(exc).__name__}: {exc}", headers=RETRY_AFTER
        ) from exc
    return producer


@web.middleware
async def kafka_error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer the producer errors a handler lets through as FastAPI's ``install_exception_handlers`` does.

    503 with ``Retry-After: 1`` for ``KafkaTimeoutError``, ``KafkaConnectionError`` and
    ``ProducerClosedError`` (brokers down, buffer full, shutting down: come back), 413 for
    ``RecordTooLargeError``, 422 for ``SerializationError``, 500 naming the cause for
    ``WrongEventLoopError``; body ``{"error": "<class name>", "detail": "<message>"}``.
    Anything else passes through untouched.
    """
    try:
        return await handler(request)
    except Exception as exc:
        answer = error_status(exc)
        if answer is None:
            raise
        status, headers = answer
        return web.json_response({"error": type(exc).__name__, "detail": str(exc)}, status=status, headers=headers)


def install_exception_handlers(app: web.Application) -> None:
    """Add :func:`kafka_error_middleware` to ``app`` (before the application starts, as every middleware)."""
    app.middlewares.append(kafka_error_middleware)
