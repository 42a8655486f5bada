"""What the framework integrations share: starting in the background and the bounded shutdown."""

from __future__ import annotations

import asyncio
import logging

from aioproducer.errors import KafkaError, KafkaTimeoutError, ProducerClosedError
from aioproducer.producer import Producer

__all__ = ["shutdown_producer", "start_in_background"]

log = logging.getLogger("aioproducer.integrations")


def start_in_background(producer: Producer, name: str) -> asyncio.Task[None]:
    """``producer.start()`` as a task, for serving before the cluster answered.

    A failure is logged, not raised: nobody awaits this task. ``start()`` retries a failed
    start on the next call, so the request path (the dependency) gets its own chance, and its
    own error, within ``max.block.ms``.
    """

    async def start() -> None:
        try:
            await producer.start()
        except ProducerClosedError:
            pass  # the application shut down before the cluster answered: nothing to report
        except KafkaError as exc:
            log.error("aioproducer producer %r did not start in the background: %s", name, exc)

    return asyncio.get_running_loop().create_task(start(), name=f"aioproducer-start-{name}")


async def shutdown_producer(producer: Producer, name: str, close_timeout: float) -> int:
    """Flush, then close, within ``close_timeout`` seconds in all; log and return the records not delivered.

    ``flush()`` first so that what is queued gets the whole timeout to be delivered
    (``close()`` would deliver it too, but then nothing tells a flush that timed out from
    one that finished). The count comes from ``metrics()["records_failed"]``: every record
    the producer had accepted and that failed meanwhile, the ones ``close()`` gave up on included.
    """
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
    undelivered = int(producer.metrics()["records_failed"]) - failed_before
    if undelivered:
        log.warning(
            "aioproducer producer %r closed: %d records not delivered within close_timeout=%s s",
            name, undelivered, close_timeout,
        )
    else:
        log.info("aioproducer producer %r closed: every record delivered", name)
    return undelivered
