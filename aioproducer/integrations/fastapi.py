"""FastAPI (and Starlette) integration: a producer per application, from startup to shutdown.

::

    from aioproducer.integrations.fastapi import ProducerDep, install_exception_handlers, producer_lifespan

    app = FastAPI(lifespan=producer_lifespan({"bootstrap.servers": "kafka:9092"}))
    install_exception_handlers(app)

    @app.post("/events")
    async def publish(producer: ProducerDep) -> dict[str, int]:
        md = await producer.send_and_wait("events", b"...")
        return {"partition": md.partition, "offset": md.offset}

The producer is made and started when the application starts (one event loop, one
producer: it must not be made at import time, before the server's loop exists) and
closed when it stops. With ``wait_ready=False`` the application serves before the cluster
answered and a readiness probe follows the start::

    app = FastAPI(lifespan=producer_lifespan(config, wait_ready=False))

    @app.get("/ready")
    async def ready(request: Request) -> Response:
        return Response(status_code=200 if producer_ready(app_producer(request)) else 503)

``metrics_route="/metrics"`` also serves the producer's metrics in Prometheus' text format on
that path (``prometheus_client`` needed: ``pip install 'aioproducer[prometheus]'``)::

    app = FastAPI(lifespan=producer_lifespan(config, metrics_route="/metrics"))

Nested in the application's own lifespan::

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        async with producer_lifespan(config)(app) as state:
            ...                                   # the application's own startup
            yield state
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.responses import JSONResponse

from aioproducer.errors import AuthenticationError, KafkaConnectionError, KafkaTimeoutError, ProducerClosedError
from aioproducer.integrations._common import (
    ERROR_STATUS,
    error_status,
    RETRY_AFTER,
    MetricsEndpoint,
    check_metrics_route,
    check_producer_config,
    producer_for,
    shutdown_producer,
    start_for_request,
    start_in_background,
    stop_background,
)
from aioproducer.producer import Producer

__all__ = [
    "METRICS_STATE_KEY",
    "STATE_KEY",
    "ProducerDep",
    "app_producer",
    "default_producer",
    "get_producer",
    "install_exception_handlers",
    "producer_lifespan",
    "producer_ready",
]

STATE_KEY = "aioproducer_producers"
"""The lifespan-state key (and `app.state` attribute) holding `{name: producer}`."""

METRICS_STATE_KEY = "aioproducer_metrics"
"""The `app.state` attribute holding `{path: MetricsEndpoint}` of the `metrics_route`s."""

Lifespan = Callable[[FastAPI], contextlib.AbstractAsyncContextManager[dict[str, Any]]]


def producer_lifespan(
    config: Mapping[str, Any] | Producer,
    *,
    name: str = "default",
    close_timeout: float = 10.0,
    wait_ready: bool = True,
    metrics_route: str | None = None,
) -> Lifespan:
    """A lifespan (pass it as ``FastAPI(lifespan=...)``) that starts ``Producer(config)`` and closes it.

    ``config`` may be a ``Producer`` instead (a test's ``FakeProducer``): that one is started
    and closed the same way.

    ``wait_ready=True``: startup waits for the cluster's first metadata, trying the
    bootstrap servers again and again for up to ``max.block.ms``; a cluster unreachable
    all that time fails startup with ``KafkaTimeoutError`` naming the bootstrap servers and
    their last failures, so the server exits instead of serving errors (wrong credentials
    or an untrusted certificate fail it at once).
    ``wait_ready=False``: the server serves at once and the producer starts in a
    background task that retries until it started or the app stops (a WARNING at the
    first failure, then at most one a minute; an INFO when it started);
    :func:`producer_ready` says false until then: point the readiness probe at it.
    A request meanwhile waits in :func:`get_producer` for the start, at most
    ``max.block.ms``, then gets a 503 with ``Retry-After``.

    Shutdown: ``flush()`` bounded by ``close_timeout`` seconds, then ``close()`` with what is
    left, then a log line counting the records not delivered (logger ``aioproducer.integrations``).
    Several producers (different ``name``\\ s) share one ``{name: producer}`` dict.

    ``metrics_route``: a path (``"/metrics"``) where a GET answers with the producer's metrics
    in Prometheus' text format (``ProducerCollector`` in a registry of the route's own, read at
    each scrape; the route is added when the app starts, outside the OpenAPI schema). Producers
    given the same path share it, under their ``client_id`` labels. ``ImportError`` here, at the
    call, without ``prometheus_client``; ``ValueError`` for a path not starting with ``/``.
    """
    config = check_producer_config(config)
    route = check_metrics_route(metrics_route) if metrics_route is not None else None

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[dict[str, Any]]:
        producers: dict[str, Producer] | None = getattr(app.state, STATE_KEY, None)
        if producers is None:  # the first producer_lifespan of this app; the others share its dict
            producers = {}
        if name in producers:
            raise RuntimeError(f"an aioproducer producer named {name!r} is already registered on this app")
        producer = producer_for(config)
        endpoint = _metrics_endpoint(app, route) if route is not None else None
        if endpoint is not None:
            endpoint.add(producer)  # before start(): its first batches' latency counts too
        background: asyncio.Task[None] | None = None
        try:
            if wait_ready:
                await _start_or_close(producer)
            else:
                background = start_in_background(producer, name)
        except BaseException:
            if endpoint is not None:
                endpoint.remove(producer)
            raise
        producers[name] = producer
        setattr(app.state, STATE_KEY, producers)
        try:
            yield {STATE_KEY: producers}
        finally:
            producers.pop(name, None)
            await shutdown_producer(producer, name, close_timeout)
            await stop_background(background)  # close() ended its attempt; it may be waiting for the next
            if endpoint is not None:
                endpoint.remove(producer)

    return lifespan


def _metrics_endpoint(app: FastAPI, path: str) -> MetricsEndpoint:
    """The app's endpoint at ``path``, its GET route added the first time (kept across restarts of the app)."""
    endpoints: dict[str, MetricsEndpoint] | None = getattr(app.state, METRICS_STATE_KEY, None)
    if endpoints is None:
        endpoints = {}
        setattr(app.state, METRICS_STATE_KEY, endpoints)
    endpoint = endpoints.get(path)
    if endpoint is None:
        endpoint = endpoints[path] = MetricsEndpoint()

        async def metrics() -> Response:
            body, content_type = endpoint.render()
            return Response(body, headers={"Content-Type": content_type})

        app.add_api_route(path, metrics, methods=["GET"], include_in_schema=False)
    return endpoint


async def _start_or_close(producer: Producer) -> None:
    """``start()``; a failed start is closed too, so that nothing it opened outlives the failed startup."""
    try:
        await producer.start()
    except BaseException:
        await producer.close(timeout=0)
        raise


def app_producer(source: Request | FastAPI, name: str = "default") -> Producer:
    """The producer ``name`` that :func:`producer_lifespan` registered, from a request or the app.

    For a route that takes the producer as it is, started or not: a readiness probe
    (``producer_ready(app_producer(request))``), a status page. A route that sends takes
    :data:`ProducerDep` (or :func:`get_producer`), which waits for a start in progress.
    ``LookupError`` naming ``name`` when no lifespan registered it (the app's lifespan is not
    ``producer_lifespan``, or, in a test under ``httpx.ASGITransport``, no lifespan ran).
    """
    producers: dict[str, Producer] | None = None
    if isinstance(source, Request):
        producers = getattr(source.state, STATE_KEY, None)  # the lifespan's state, per request
        source = source.app
    if producers is None:
        producers = getattr(source.state, STATE_KEY, None)
    producer = producers.get(name) if producers else None
    if producer is None:
        raise LookupError(f"no aioproducer producer named {name!r}: is producer_lifespan(...) the app's lifespan?")
    return producer


def get_producer(name: str = "default") -> Callable[[Request], Coroutine[Any, Any, Producer]]:
    """A dependency giving the producer ``name`` of :func:`producer_lifespan`.

    Waits for a start still in progress (``wait_ready=False``) rather than failing the
    request, at most ``max.block.ms`` (``start()`` returns at once on a started producer).
    A producer that could not start (cluster unreachable, wrong credentials) or is
    shutting down is a 503 with ``Retry-After: 1``, whether or not
    :func:`install_exception_handlers` was called: the request was fine, the service is
    not ready, and the readiness probe says so too. Override it in tests with
    ``app.dependency_overrides[dependency] = ...`` (the dependency is the function
    this returns: keep it, e.g. in ``ProducerDep``'s metadata).
    """

    async def dependency(request: Request) -> Producer:
        try:
            producer = app_producer(request, name)
        except LookupError as exc:  # a wiring mistake, not a request's: a 500
            raise RuntimeError(str(exc)) from None
        try:
            await start_for_request(producer)
        except (KafkaTimeoutError, KafkaConnectionError, AuthenticationError, ProducerClosedError) as exc:
            raise HTTPException(
                503, f"the Kafka producer is not started: {type(exc).__name__}: {exc}", headers=RETRY_AFTER
            ) from exc
        return producer

    return dependency


default_producer: Callable[[Request], Coroutine[Any, Any, Producer]] = get_producer()
"""The `default` producer's dependency, made once so that `app.dependency_overrides[default_producer]` can name it (tests)."""

ProducerDep = Annotated[Producer, Depends(default_producer)]
"""`async def handler(producer: ProducerDep)`: the `default` producer; override with `app.dependency_overrides[default_producer]`."""


def producer_ready(producer: Producer, *, require_brokers: bool = False) -> bool:
    """Whether the producer can queue records now (for a readiness endpoint): see ``Producer.ready``.

    True once ``start()`` finished (the cluster answered once), until ``close()`` or a fatal
    error. It does not follow the brokers afterwards: during an outage the producer still
    queues records (they wait up to ``delivery.timeout.ms``), so it stays true.
    ``require_brokers=True`` also asks ``Producer.brokers_reachable``: false while no broker
    can be reached. Take it when the service should get no traffic during an outage.
    """
    return producer.ready and (not require_brokers or producer.brokers_reachable)


def install_exception_handlers(app: FastAPI) -> None:
    """Turn the producer's client-side errors into HTTP answers instead of 500s.

    * ``KafkaTimeoutError`` -> 503 with ``Retry-After: 1``: the buffer is full, the
      cluster did not answer within ``max.block.ms``, or the record expired after
      ``delivery.timeout.ms`` (brokers down); the client should come back.
    * ``KafkaConnectionError`` -> 503 with ``Retry-After: 1``: a connection broke under
      the record (brokers down or restarting).
    * ``ProducerClosedError`` -> 503 with ``Retry-After: 1``: the service is shutting
      down (or its producer is not started): another instance, or this one later, can take it.
    * ``RecordTooLargeError`` -> 413: the request's record can never fit.
    * ``SerializationError`` -> 422: the request's data cannot be made into a record; but 503
      with ``Retry-After: 1`` when its cause is a schema registry that did not answer or failed.
    * ``WrongEventLoopError`` -> 500 naming the cause: the producer was started on another
      event loop (at import time, under another ``asyncio.run``) or before the server forked
      its workers; a bare 500 would hide the one message that says how to fix it.

    Bodies are JSON: ``{"error": "<class name>", "detail": "<message>"}``. Other errors
    (a broker's refusal such as ``TopicAuthorizationFailedError``, an ``AuthenticationError``)
    stay 500s: retrying would not help.
    """
    for cls, _status, _headers in ERROR_STATUS:  # shared with the aiohttp middleware
        app.add_exception_handler(cls, _handle)


async def _handle(request: Request, exc: Exception) -> JSONResponse:
    """The answer ``error_status`` gives (a registry outage behind a ``SerializationError`` is a 503 too)."""
    status, headers = error_status(exc) or (500, None)
    return JSONResponse({"error": type(exc).__name__, "detail": str(exc)}, status_code=status, headers=headers)
