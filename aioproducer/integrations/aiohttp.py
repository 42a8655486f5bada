"""aiohttp integration: a producer that lives from the application's startup to its cleanup.

::

    from aioproducer.integrations.aiohttp import PRODUCER_KEY, setup_producer

    app = web.Application()
    setup_producer(app, {"bootstrap.servers": "kafka:9092"})

    async def publish(request: web.Request) -> web.Response:
        md = await request.app[PRODUCER_KEY].send_and_wait("events", await request.read())
        ...

The producer is made and started in the application's ``cleanup_ctx`` (so in the server's
event loop: one event loop, one producer); an unreachable cluster fails startup with
``KafkaTimeoutError`` naming the bootstrap servers.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from aiohttp import web

from aioproducer.integrations._common import shutdown_producer
from aioproducer.producer import Producer

__all__ = ["PRODUCER_KEY", "setup_producer"]

#: Where :func:`setup_producer` puts the producer by default: ``request.app[PRODUCER_KEY]``.
PRODUCER_KEY: web.AppKey[Producer] = web.AppKey("producer", Producer)


def setup_producer(
    app: web.Application,
    config: Mapping[str, Any],
    *,
    key: web.AppKey[Producer] = PRODUCER_KEY,
    close_timeout: float = 10.0,
    name: str = "default",
) -> None:
    """Register a ``cleanup_ctx`` that starts ``Producer(config)`` as ``app[key]`` and closes it on cleanup.

    Cleanup: ``flush()`` bounded by ``close_timeout`` seconds, then ``close()`` with what is
    left, then a log line counting the records not delivered (logger ``aioproducer.integrations``).
    Another ``key`` gives a second producer; ``name`` is how the log lines call it.
    """
    app.cleanup_ctx.append(_producer_ctx(config, key, close_timeout, name))


def _producer_ctx(
    config: Mapping[str, Any], key: web.AppKey[Producer], close_timeout: float, name: str
) -> Callable[[web.Application], AsyncIterator[None]]:
    async def ctx(app: web.Application) -> AsyncIterator[None]:
        producer = Producer(config)
        try:
            await producer.start()
        except BaseException:
            await producer.close(timeout=0)  # nothing a failed start opened may outlive it
            raise
        app[key] = producer
        try:
            yield
        finally:
            await shutdown_producer(producer, name, close_timeout)

    return ctx
