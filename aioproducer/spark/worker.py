"""The event loop and the producers of one Spark Python worker process.

Spark runs a task's Python code synchronously in a worker process and, by default
(``spark.python.worker.reuse``), runs later tasks in the same process. So each worker process
owns one event loop, made on first use, and drives it with ``run_until_complete`` while a task
runs: between tasks the loop is stopped, and nothing is pending on it, because every task flushes
before it ends. The producers made on that loop live as long as the process, one per distinct
configuration, and are reused by the tasks that follow (a new producer costs a connection and a
metadata round trip per broker).

State here is module-level because it is per process; it is owned by this module only, and
reset after a fork (a forked child gets its own loop and producers: sockets cannot be shared).
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Awaitable, Mapping, TypeVar

from aioproducer.producer import Producer

__all__ = ["run", "shared_producer", "input_reader", "MAX_SHARED_PRODUCERS"]

T = TypeVar("T")

#: Producers kept per worker process; past it, the least recently used is closed. Distinct
#: configurations in one application are few; the bound only stops a leak if they are not.
MAX_SHARED_PRODUCERS = 4

_pid = 0
_loop: asyncio.AbstractEventLoop | None = None
_reader: ThreadPoolExecutor | None = None
#: Configuration key (a digest made on the driver) → started producer on ``_loop``.
_producers: OrderedDict[str, Producer] = OrderedDict()


def run(coro: Awaitable[T]) -> T:
    """Run ``coro`` to completion on this process's event loop (from synchronous task code)."""
    return _own_loop().run_until_complete(coro)


def _own_loop() -> asyncio.AbstractEventLoop:
    global _pid, _loop, _reader
    if _loop is None or _pid != os.getpid():
        _producers.clear()  # a fork's copies: their sockets and tasks belong to the parent
        _loop = asyncio.new_event_loop()
        _reader = None
        _pid = os.getpid()
    return _loop


def input_reader() -> ThreadPoolExecutor:
    """The one thread that pulls a task's input batches from Spark.

    Spark's input iterator blocks, reading the rows the JVM computes from a socket. Pulled on
    the event loop, it would stop the producer while Spark computes the next batch; pulled on
    this thread, the loop sends the last batch meanwhile. One thread, because a task's batches
    are read one after another.
    """
    global _reader
    _own_loop()
    if _reader is None:
        _reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="aioproducer-spark-input")
    return _reader


async def shared_producer(config_key: str, config: Mapping[str, Any]) -> Producer:
    """The started producer for ``config`` in this process, made on first use; remade if it is not ready.

    A producer that is not ``ready`` (a fatal error such as an authorization failure, or its
    sender ended) is closed and replaced, so one bad task does not fail every later task in
    this worker.
    """
    producer = _producers.get(config_key)
    if producer is not None:
        if producer.ready:
            _producers.move_to_end(config_key)
            return producer
        del _producers[config_key]
        await producer.close(0)
    producer = Producer(config)
    await producer.start()
    _producers[config_key] = producer
    while len(_producers) > MAX_SHARED_PRODUCERS:
        _, oldest = _producers.popitem(last=False)
        await oldest.close()
    return producer
