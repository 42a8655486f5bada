"""An event loop on a daemon thread of its own, driven synchronously from any other thread.

What ``FaultProxy`` and ``SchemaRegistry`` share: a test calls them from plain functions, from
any event loop and while its own loop is blocked, so their servers live on a loop of their own.
Every call is handed to that loop and waited for (``_run``); ``close()`` shuts the service down on
its loop, stops the loop and joins the thread, once; a service dropped without ``close()`` is
closed by the collector, with a ``ResourceWarning``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import warnings
from collections.abc import Coroutine
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

__all__ = ["LoopThreadService", "run_loop"]

T = TypeVar("T")


def run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """The service thread: run ``loop`` until stopped, then cancel what is left and close it."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        # Transports close their sockets in callbacks scheduled with call_soon (one accepted
        # just before the listener closed, say): let those run, or the sockets leak.
        for _ in range(3):
            loop.run_until_complete(asyncio.sleep(0))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


class LoopThreadService:
    """The loop, the thread and the lifecycle of a test service; subclasses serve on the loop.

    A subclass calls ``_start_thread(name)`` first in its ``__init__``, runs its work with
    ``_run``, and gives ``_shutdown()`` (a coroutine run on the loop at ``close()``). ``_lock``
    guards ``_closed`` and the hand-over of work to the loop, so that nothing is submitted after
    ``close()``.
    """

    #: The service's name in messages, and the error its calls raise once it is closed.
    _kind: ClassVar[str] = "service"
    _closed_error: ClassVar[type[Exception]] = RuntimeError
    #: How long ``close()`` waits for ``_shutdown()`` (None: as long as it takes).
    _shutdown_timeout: ClassVar[float | None] = None

    _lock: threading.Lock
    _closed: bool
    _loop: asyncio.AbstractEventLoop
    _thread: threading.Thread

    def _start_thread(self, name: str) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=run_loop, args=(self._loop,), name=name, daemon=True)
        self._thread.start()

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        with self._lock:
            if self._closed:
                coro.close()
                raise self._closed_error(f"{self!r} is closed")
            if threading.get_ident() == self._thread.ident:
                coro.close()
                raise RuntimeError(f"{self._kind} methods must not be called from its own thread")
            return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the service's loop and wait for its result."""
        future = self._submit(coro)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise self._closed_error(f"{self!r} was closed while the call was running") from None

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def _shutdown(self) -> Coroutine[Any, Any, None] | None:
        """What ``close()`` runs on the loop before stopping it (None: nothing)."""
        return None

    def close(self) -> None:
        """Shut the service down, stop its loop and join its thread. Idempotent.

        The loop stops and the thread is joined even if the shutdown failed; its error is then raised.
        """
        with self._lock:
            if self._closed:
                return
            if threading.get_ident() == self._thread.ident:
                raise RuntimeError(f"{self._kind}.close() must not be called from its own thread")
            self._closed = True
        try:
            shutdown = self._shutdown()
            if shutdown is not None:
                asyncio.run_coroutine_threadsafe(shutdown, self._loop).result(self._shutdown_timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __del__(self) -> None:
        # The thread holds the loop, not this object: a forgotten service is collected and
        # closed here rather than leaking its thread and sockets.
        if getattr(self, "_closed", True) is False and getattr(self, "_thread", None) is not None:
            try:
                warnings.warn(f"unclosed {self!r}", ResourceWarning, stacklevel=1)
            finally:
                try:
                    self.close()
                except Exception:  # noqa: BLE001 - nothing sensible to do in a finalizer
                    pass
