"""What the framework integrations share: starting in the background, the HTTP answers to producer errors, the bounded shutdown."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from aioproducer.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    RecordTooLargeError,
    SerializationError,
    WrongEventLoopError,
)
from aioproducer.logs import client_logger
from aioproducer.producer import Producer
from aioproducer.schema_registry.client import SchemaRegistryError  # needs no optional package

if TYPE_CHECKING:
    from aioproducer.metrics.prometheus import ProducerCollector

__all__ = [
    "check_producer_config",
    "producer_for",
    "ERROR_STATUS",
    "RETRY_AFTER",
    "MetricsEndpoint",
    "check_metrics_route",
    "error_status",
    "shutdown_producer",
    "start_for_request",
    "start_in_background",
    "stop_background",
]

_LOGGER = "aioproducer.integrations"

#: How often a background start that keeps failing says so again (seconds): one WARNING per
#: outage at first, then one a minute, each with the count of attempts and the last error.
RETRY_LOG_INTERVAL_S = 60.0

#: The header every 503 carries: the service is fine, the cluster is not (yet); come back.
RETRY_AFTER = {"Retry-After": "1"}

#: Producer errors a request can meet, and the HTTP answer each gets (the first class that matches).
#: Brokers down: a record expires after ``delivery.timeout.ms`` or metadata does not come within
#: ``max.block.ms`` (``KafkaTimeoutError``), a connection breaks under a record
#: (``KafkaConnectionError``), the buffer stays full (``KafkaTimeoutError``); shutting down or not
#: started yet: ``ProducerClosedError``. All of these are 503 + ``Retry-After``: the request was
#: fine and may succeed later or on another instance. The request's own fault: 413, 422.
#: ``WrongEventLoopError`` stays a 500 but with its message, which says how to fix the app.
ERROR_STATUS: tuple[tuple[type[KafkaError], int, dict[str, str] | None], ...] = (
    (KafkaTimeoutError, 503, RETRY_AFTER),
    (KafkaConnectionError, 503, RETRY_AFTER),
    (ProducerClosedError, 503, RETRY_AFTER),
    (RecordTooLargeError, 413, None),
    (SerializationError, 422, None),
    (WrongEventLoopError, 500, None),
)


def error_status(exc: BaseException) -> tuple[int, dict[str, str] | None] | None:
    """The HTTP status and headers for a producer error (see :data:`ERROR_STATUS`); None: not ours to answer.

    A ``SerializationError`` whose cause is a schema registry that did not answer, or answered with
    a server error, is a 503 + ``Retry-After`` like a broker outage: the request was fine.
    """
    if isinstance(exc, SerializationError) and _registry_unavailable(exc.__cause__):
        return 503, RETRY_AFTER
    for cls, status, headers in ERROR_STATUS:
        if isinstance(exc, cls):
            return status, headers
    return None


def _registry_unavailable(cause: BaseException | None) -> bool:
    return isinstance(cause, SchemaRegistryError) and (cause.http_status_code == -1 or cause.http_status_code >= 500)


def start_in_background(
    producer: Producer,
    name: str,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> asyncio.Task[None]:
    """``producer.start()`` as a task that retries until the producer started or was closed.

    For serving before the cluster answered (``wait_ready=False``): a readiness probe on
    ``producer.ready`` must turn true when the cluster comes back, with no request needed.
    Each attempt is bounded by ``max.block.ms`` (and keeps trying the bootstrap servers
    within it); between attempts the task waits ``reconnect.backoff.max.ms``, where the
    attempt's own backoff had got to. Failures are logged, not raised (nobody awaits this
    task): a WARNING at the first and then at most every :data:`RETRY_LOG_INTERVAL_S`
    seconds, and an INFO once it started. A request may start the producer meanwhile
    (``start()`` is shared); this task then sees it started. ``clock`` (seconds) and
    ``sleep`` are for tests.
    """
    pause_s = producer.config.reconnect_backoff_max_ms / 1000
    log = client_logger(_LOGGER, producer.config.client_id)

    async def start() -> None:
        failures = 0
        began = last_logged = clock()
        while True:
            try:
                error = await _attempt(producer)
            except Exception:  # a bug, not the cluster: retrying would repeat it; nobody awaits this task
                log.exception("aioproducer producer %r: the background start failed unexpectedly", name)
                return
            if error is None:
                break
            if isinstance(error, ProducerClosedError):
                return  # the application shut down before the cluster answered: nothing to report
            failures += 1
            now = clock()
            if failures == 1:
                last_logged = now
                log.warning(
                    "aioproducer producer %r did not start, retrying in the background (attempts of up to max.block.ms=%d ms): %s",
                    name, producer.config.max_block_ms, error,
                )
            elif now - last_logged >= RETRY_LOG_INTERVAL_S:
                last_logged = now
                log.warning(
                    "aioproducer producer %r still not started after %d attempts over %.0f s: %s",
                    name, failures, now - began, error,
                )
            await sleep(pause_s)
        if failures:
            log.info(
                "aioproducer producer %r started in the background after %d failed attempts over %.0f s",
                name, failures, clock() - began,
            )

    return asyncio.get_running_loop().create_task(start(), name=f"aioproducer-start-{name}")


async def _attempt(producer: Producer) -> KafkaError | None:
    """One ``start()``: its error, or None once started.

    ``start()`` is shared by every caller, so a caller that cancels its own call (a request
    under a timeout) cancels the attempt for all: for this loop that is a failed attempt,
    not the end of the retries. Only this task's own cancellation (:func:`stop_background`)
    ends it.
    """
    try:
        await producer.start()
    except KafkaError as exc:
        return exc
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        return KafkaError("the start attempt was cancelled by another caller of start()")
    return None


async def start_for_request(producer: Producer) -> None:
    """``producer.start()`` for a request: a request cancelled meanwhile (its client left, its timeout) leaves the start running.

    Without the shield its cancellation would reach the start that the background task and
    the other requests share. The detached call's outcome is always retrieved, so a start
    that fails after its request is gone is not reported as an exception nobody retrieved.
    """
    if producer.ready:
        return  # the common case, on every request: no task
    call = asyncio.ensure_future(producer.start())
    call.add_done_callback(_retrieve)
    await asyncio.shield(call)


def _retrieve(task: asyncio.Future[None]) -> None:
    if not task.cancelled():
        task.exception()


async def stop_background(task: asyncio.Task[None] | None) -> None:
    """End a :func:`start_in_background` task once the producer is closed (it may be waiting between attempts)."""
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def shutdown_producer(producer: Producer, name: str, close_timeout: float) -> int:
    """Flush, then close, within ``close_timeout`` seconds in all; log and return the records not delivered.

    ``flush()`` first so that what is queued gets the whole timeout to be delivered
    (``close()`` would deliver it too, but then nothing tells a flush that timed out from
    one that finished). The count is ``metrics()["records_failed"]``: every record the
    producer accepted over its life and that failed, the ones that expired while the
    brokers were down and the ones ``close()`` gave up on alike; the log line says how
    many of them failed during the close. Counting only the close would say "every record
    delivered" after an outage that lost thousands.
    """
    log = client_logger(_LOGGER, producer.config.client_id)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + close_timeout
    failed_before = int(producer.metrics()["records_failed"])
    if producer.ready:
        try:
            await producer.flush(close_timeout)
        except KafkaTimeoutError:
            log.warning("aioproducer producer %r: flush did not finish within close_timeout=%s s", name, close_timeout)
        except KafkaError as exc:  # e.g. the producer failed fatally meanwhile: close() still must run
            log.warning("aioproducer producer %r: flush failed: %s", name, exc)
    await producer.close(timeout=max(0.0, deadline - loop.time()))
    undelivered = int(producer.metrics()["records_failed"])
    if undelivered:
        log.warning(
            "aioproducer producer %r closed: %d records not delivered over its life (%d during close, close_timeout=%s s)",
            name, undelivered, undelivered - failed_before, close_timeout,
        )
    else:
        log.info("aioproducer producer %r closed: every record delivered", name)
    return undelivered


def check_producer_config(config: Any) -> Mapping[str, Any] | Producer:
    """``config`` if it is producer settings or a ``Producer``; else a ``TypeError``, at the helper's call.

    A ``Producer`` is used as it is: made by the application (its own subclass, its own
    serializers) or by a test (a ``FakeProducer``). The app's startup starts it (a no-op if it
    already runs) and its shutdown flushes and closes it, as one made from settings.
    """
    if isinstance(config, (Mapping, Producer)):
        return config
    raise TypeError(f"config must be a mapping of producer settings or a Producer, got {type(config).__name__}")


def producer_for(config: Mapping[str, Any] | Producer) -> Producer:
    """The producer an app's startup starts: the one given, or one made from the settings."""
    return config if isinstance(config, Producer) else Producer(config)


def check_metrics_route(metrics_route: Any) -> str:
    """``metrics_route`` if it is a path and ``prometheus_client`` is installed; else the error, at the helper's call.

    Checked where the application is put together, not at its first scrape: a route that
    cannot work must stop the deployment, not answer 500s to Prometheus.
    """
    if not isinstance(metrics_route, str) or not metrics_route.startswith("/"):
        raise ValueError(f"metrics_route must be a URL path starting with '/', got {metrics_route!r}")
    try:
        import prometheus_client  # noqa: F401

        import aioproducer.metrics.prometheus  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"metrics_route={metrics_route!r} needs the prometheus_client library: pip install 'aioproducer[prometheus]'"
        ) from exc
    return metrics_route


class MetricsEndpoint:
    """What one ``/metrics`` route serves: its own registry with one ``ProducerCollector`` of the producers that asked for it.

    Its own registry, not ``prometheus_client.REGISTRY``: the application's other metrics (and a
    second app in the same process, as in tests) stay apart; the producers of one route are
    told apart by their ``client_id`` label (two with the same ``client.id`` are refused).
    """

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry()
        self._collector: ProducerCollector | None = None

    def add(self, producer: Producer) -> None:
        """Export ``producer`` on this route (ValueError if its ``client.id`` is already exported here)."""
        from aioproducer.metrics.prometheus import ProducerCollector

        if self._collector is None:
            self._collector = ProducerCollector(producer)
            self.registry.register(self._collector)
        else:
            self._collector.add(producer)

    def remove(self, producer: Producer) -> None:
        """Stop exporting ``producer`` (it closed)."""
        if self._collector is not None:
            self._collector.remove(producer)

    def render(self) -> tuple[bytes, str]:
        """The exposition and its content type (``prometheus_client``'s text format)."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
