"""Requests to a coordinator: the transaction coordinator of a ``transactional.id``, a group's coordinator.

Theory of operation. Transactions talk to brokers chosen by key, not by partition:
FindCoordinator (key type 1 for a transactional id, 0 for a consumer group) names the
broker, which is remembered until it answers NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE
(the key moved: ask again). The answer names the broker's host and port too, and the
connection goes there even when the cluster metadata does not list that broker yet (it was
down at the last update): as Java's TransactionManager, which connects to the node the answer
names, instead of failing every request until ``metadata.max.age.ms`` refreshes the metadata. COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS (the
previous transaction is still being completed) and UNSTABLE_OFFSET_COMMIT (a group's offsets
wait for a pending transaction, KIP-447) mean "the same broker, a little later". So
:meth:`Coordinators.send` retries those, with the producer's backoff, until the caller's
deadline, and returns every other answer for the caller to judge: only it knows which
errors are fatal or abortable for its request. A connection failure is retried the same way.
A caller that needs a version of the API (a field older versions lack) says so, and a
coordinator too old for it is an :class:`UnsupportedVersionError`, not a silent downgrade.

Every round trip has one shape, a :class:`CoordinatorRequest`: the request (made per attempt)
and the handling of its answer, run by :meth:`Coordinators.send`. Deadlines are points on the
producer's clock in milliseconds (``clock.py``), so tests reach them with a fake clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from aioproducer.clock import Clock, monotonic_ms
from aioproducer.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaConnectionError,
    KafkaTimeoutError,
    NotCoordinatorError,
    UnstableOffsetCommitError,
    UnsupportedVersionError,
    error_for_code,
)
from aioproducer.protocol import messages

__all__ = ["GROUP", "TRANSACTION", "CoordinatorRequest", "CoordinatorSender", "Coordinators", "first_error_code", "raise_for"]

_T = TypeVar("_T")

#: FindCoordinator key types.
GROUP = 0
TRANSACTION = 1

_MOVED = frozenset({NotCoordinatorError.errno, CoordinatorNotAvailableError.errno})
_LATER = frozenset(
    {CoordinatorLoadInProgressError.errno, ConcurrentTransactionsError.errno, UnstableOffsetCommitError.errno}
)
_CONCURRENT_TRANSACTIONS_BACKOFF_MS = 20


class CoordinatorClient(Protocol):
    """What this needs of ``KafkaClient``."""

    async def send_any(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]: ...

    async def connection_to(self, node_id: int, host: str, port: int) -> Any: ...


class CoordinatorSender(Protocol):
    """What the transaction calls use of :class:`Coordinators` (``FakeProducer`` answers in memory)."""

    def deadline(self, timeout_ms: float) -> float: ...

    async def send(self, request: CoordinatorRequest[_T], deadline: float) -> _T: ...


def first_error_code(body: Any) -> int:
    """The first non-zero ``error_code`` (or ``partition_error_code``) anywhere in a response body, else 0."""
    if isinstance(body, dict):
        for key in ("error_code", "partition_error_code"):
            code = body.get(key)
            if isinstance(code, int) and code:
                return code
        for value in body.values():
            code = first_error_code(value)
            if code:
                return code
    elif isinstance(body, list):
        for item in body:
            code = first_error_code(item)
            if code:
                return code
    return 0


class _Coordinator(NamedTuple):
    """A FindCoordinator answer: the broker, and where to reach it (it may be missing from the metadata)."""

    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class CoordinatorRequest(Generic[_T]):
    """One round trip to a coordinator, in the one shape they all have (Java's ``TxnRequestHandler``).

    ``body`` makes the request, per attempt (a body that carries the current producer epoch);
    ``handle`` reads the answer that :meth:`Coordinators.send` gets back (one that is not "moved"
    or "later"): the result, or the error it means, raised. A caller that needs a version of the
    API says so in ``min_version``; one that must not send a later version (a later EndTxn or
    TxnOffsetCommit means transactions v2) in ``max_version``.
    """

    key_type: int
    key: str
    api_key: int
    what: str
    body: Callable[[], dict[str, Any]]
    handle: Callable[[dict[str, Any]], _T]
    min_version: int = 0
    max_version: int | None = None


async def _sleep_ms(ms: float) -> None:
    await asyncio.sleep(ms / 1000.0)


class Coordinators:
    """Finds coordinators and sends them requests, retrying what only needs time (see the module docstring)."""

    def __init__(
        self,
        client: CoordinatorClient,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        *,
        clock: Clock = monotonic_ms,
        sleep: Callable[[float], Awaitable[None]] = _sleep_ms,
    ) -> None:
        self._client = client
        #: The producer's clock (ms): every deadline here is a point on it (see ``deadline``); ``sleep``
        #: waits out a backoff (ms). A test passes a fake pair and reaches any deadline without sleeping.
        self._clock = clock
        self._sleep = sleep
        self._backoff_ms = max(1, retry_backoff_ms)
        self._backoff_max_ms = max(self._backoff_ms, retry_backoff_max_ms)
        #: (key type, key) -> the coordinator, until it says it is not.
        self._known: dict[tuple[int, str], _Coordinator] = {}

    def deadline(self, timeout_ms: float) -> float:
        """The point on the clock ``timeout_ms`` from now: what :meth:`send` takes (``math.inf``: none)."""
        return self._clock() + timeout_ms

    def forget(self, key_type: int, key: str) -> None:
        self._known.pop((key_type, key), None)

    async def send(self, request: CoordinatorRequest[_T], deadline: float) -> _T:
        """One round trip in its one shape: ``request.body`` sent until an answer that is not "moved" or "later", then handled.

        ``deadline`` is a point on the clock in ms (:meth:`deadline`); past it, :class:`KafkaTimeoutError`
        naming ``request.what`` and the last error. ``request.body`` is called per attempt (a body
        that carries the current producer epoch). A coordinator that speaks the API only below
        ``request.min_version`` raises :class:`UnsupportedVersionError` naming ``request.what``.
        """
        return request.handle(await self._answer(request, deadline))

    async def _answer(self, request: CoordinatorRequest[Any], deadline: float) -> dict[str, Any]:
        """The first answer to ``request`` that is not "moved" or "later" (see :meth:`send`)."""
        key_type, key, api_key, what = request.key_type, request.key, request.api_key, request.what
        attempt = 0
        last: BaseException | None = None
        while True:
            try:
                node = await self._find(key_type, key, deadline, what)
                connection = await self._client.connection_to(node.node_id, node.host, node.port)
                _require_version(connection, key, api_key, request.min_version, what)
                answer: dict[str, Any] = await (
                    connection.send(api_key, request.body()) if request.max_version is None
                    else connection.send(api_key, request.body(), version=min(
                        int(connection.api_version(api_key)), request.max_version
                    ))
                )
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                self.forget(key_type, key)
                last = exc
            else:
                code = first_error_code(answer)
                if code in _MOVED:
                    self.forget(key_type, key)
                if code not in _MOVED and code not in _LATER:
                    return answer
                last = error_for_code(code)(f"{what}: {error_for_code(code).message}")
                if code == ConcurrentTransactionsError.errno:
                    # The previous transaction's markers are still being written: a matter of
                    # milliseconds, so a short fixed wait, as Java's 20 ms for AddPartitionsToTxn.
                    await self._wait_ms(_CONCURRENT_TRANSACTIONS_BACKOFF_MS, deadline, what, last)
                    continue
            attempt += 1
            await self._wait(attempt, deadline, what, last)

    def coordinator(self, key_type: int, key: str) -> int | None:
        """The node id of the key's coordinator as last found, None if not known now."""
        known = self._known.get((key_type, key))
        return None if known is None else known.node_id

    async def _find(self, key_type: int, key: str, deadline: float, what: str) -> _Coordinator:
        known = self._known.get((key_type, key))
        if known is not None:
            return known
        attempt = 0
        while True:
            answer = await self._client.send_any(
                messages.FIND_COORDINATOR, {"key": key, "key_type": key_type, "coordinator_keys": [key]}
            )
            entry = (answer.get("coordinators") or [answer])[0]
            code = int(entry.get("error_code") or 0)
            if code == 0:
                node = _Coordinator(int(entry["node_id"]), str(entry["host"]), int(entry["port"]))
                self._known[(key_type, key)] = node
                return node
            error = error_for_code(code)
            if not error.retriable and code not in _MOVED and code not in _LATER:
                raise error(f"{what}: FindCoordinator for {key!r}: {entry.get('error_message') or error.message}")
            attempt += 1
            await self._wait(attempt, deadline, what, error(f"FindCoordinator for {key!r}"))

    async def _wait(self, attempt: int, deadline: float, what: str, last: BaseException | None) -> None:
        await self._wait_ms(min(self._backoff_ms * 2.0 ** min(attempt - 1, 30), self._backoff_max_ms), deadline, what, last)

    async def _wait_ms(self, delay_ms: float, deadline: float, what: str, last: BaseException | None) -> None:
        """Back off ``delay_ms``, cut short at ``deadline``; the clock says when the deadline has passed."""
        left = deadline - self._clock()
        if left <= 0:
            raise KafkaTimeoutError(f"{what} did not complete in time: the last attempt failed with {last}") from last
        await self._sleep(min(delay_ms, left))


def _require_version(connection: Any, key: str, api_key: int, min_version: int, what: str) -> None:
    """Raise unless ``connection`` speaks ``api_key`` at ``min_version`` or later (what it would send)."""
    if not min_version:
        return
    version = int(connection.api_version(api_key))
    if version < min_version:
        raise UnsupportedVersionError(
            f"{what}: the coordinator of {key!r}, broker {connection.address} (node {connection.node_id}), speaks "
            f"{messages.API_NAMES[api_key]} up to v{version}; this call needs v{min_version} or later"
        )


def raise_for(code: int, what: str, message: str | None = None) -> None:
    """Raise the error class of ``code`` (non-zero) with ``what`` and the broker's message."""
    if code:
        error = error_for_code(code)
        raise error(f"{what}: {message or error.message}")

