"""Coordinator and transaction deadlines on the producer's one clock: a fake clock reaches them, nothing sleeps.

``Coordinators`` retries "moved", "later" and connection failures until the caller's deadline, a
point on the injected clock (ms); its backoff waits go through the injected ``sleep``, which here
moves the fake clock instead of waiting. So ``max.block.ms`` of ``init_transactions()`` and
``committed_offsets()``, and ``delivery.timeout.ms`` of AddPartitionsToTxn, are checked to the
millisecond in a test that takes no time.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from aioproducer.errors import CoordinatorLoadInProgressError, KafkaTimeoutError
from aioproducer.internals.coordinator import Coordinators
from aioproducer.internals.transaction_manager import TransactionManager, TransactionState
from aioproducer.internals.transactions import RequestFailed, TransactionRequests, Transactions, committed_offsets
from aioproducer.protocol import messages

COORDINATOR_LOAD_IN_PROGRESS = CoordinatorLoadInProgressError.errno
UNSTABLE_OFFSET_COMMIT = 88


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, ms: float) -> None:
        """A backoff: the clock moves on by ``ms``, at once."""
        self.slept.append(ms)
        self.now += ms


class Coordinator:
    """A coordinator that answers every request with ``error_code``, or (None) never answers."""

    def __init__(self, clock: FakeClock, error_code: int | None, request_timeout_ms: float = 30_000) -> None:
        self.clock = clock
        self.error_code = error_code
        self.request_timeout_ms = request_timeout_ms
        self.requests: list[tuple[int, dict[str, Any]]] = []
        self.node_id, self.address = 0, "localhost:9092"

    def api_version(self, api_key: int) -> int:
        return 9

    async def send(self, api_key: int, body: dict[str, Any], version: int | None = None) -> dict[str, Any]:
        self.requests.append((api_key, body))
        if self.error_code is None:  # no answer: the connection's request.timeout.ms passes
            self.clock.now += self.request_timeout_ms
            raise KafkaTimeoutError(f"no answer within request.timeout.ms={self.request_timeout_ms}")
        return {"error_code": self.error_code, "throttle_time_ms": 0}


class Client:
    """FindCoordinator names node 0; its connection is ``coordinator`` (the only broker)."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator

    @property
    def metadata(self) -> Any:
        return SimpleNamespace(nodes={0: None})

    def is_ready(self, node_id: int) -> bool:
        return True

    async def connection(self, node_id: int) -> Coordinator:
        return self.coordinator

    async def send_any(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]:
        assert api_key == messages.FIND_COORDINATOR
        return {"coordinators": [{"error_code": 0, "node_id": 0, "host": "localhost", "port": 9092}]}

    async def connection_to(self, node_id: int, host: str, port: int) -> Coordinator:
        return self.coordinator


async def _never() -> None:
    raise AssertionError("init() must not flush")


def _never_called(error: BaseException) -> None:
    raise AssertionError(f"init() must not report {error!r}")


def coordinators(clock: FakeClock, coordinator: Coordinator) -> Coordinators:
    return Coordinators(Client(coordinator), 100, 1000, clock=clock, sleep=clock.sleep)


async def test_init_transactions_gives_up_at_max_block_ms_on_the_clock_after_backing_off_exponentially() -> None:
    clock = FakeClock()
    coordinator = Coordinator(clock, COORDINATOR_LOAD_IN_PROGRESS)
    tm = TransactionManager("tx-1")
    transactions = Transactions(
        tm, coordinators(clock, coordinator), max_block_ms=5_000, clock=clock,
        flush=_never, abort_undrained=_never_called, on_fatal=_never_called,  # init() uses none of them
    )
    start = clock.now
    with pytest.raises(KafkaTimeoutError, match=r"init_transactions\(\) did not complete in time") as raised:
        await transactions.init()
    assert isinstance(raised.value.__cause__, CoordinatorLoadInProgressError)
    assert clock.slept == [100, 200, 400, 800, 1000, 1000, 1000, 500]  # the last backoff cut short at the deadline
    assert clock.now - start == 5_000
    assert len(coordinator.requests) == 9 and {api for api, _ in coordinator.requests} == {messages.INIT_PRODUCER_ID}
    assert tm.state is TransactionState.INITIALIZING and not tm.has_producer_id


async def test_add_partitions_to_a_coordinator_that_never_answers_fails_at_delivery_timeout_ms() -> None:
    clock = FakeClock()
    coordinator = Coordinator(clock, None, request_timeout_ms=30_000)
    tm = TransactionManager("tx-1")
    tm.transition(TransactionState.INITIALIZING)
    tm.set_producer_id_and_epoch(7, 0)
    tm.transition(TransactionState.READY)
    tm.transition(TransactionState.IN_TRANSACTION)
    tm.maybe_add_partition("t", 0)
    requests = TransactionRequests(
        tm, Client(coordinator), coordinators(clock, coordinator), lambda attempts: 100.0, 120_000, clock=clock
    )
    start = clock.now
    request, delay = requests.next_request(clock.now, requests_in_flight=False)
    assert request is not None and delay == float("inf")
    assert tm.partitions_being_added == {("t", 0)}
    failed = await request
    assert isinstance(failed, RequestFailed) and not failed.fatal
    assert isinstance(failed.error, KafkaTimeoutError) and "AddPartitionsToTxn did not complete in time" in str(failed.error)
    # Four attempts of 30 s each, with 100, 200 and 400 ms of backoff between them: the fifth is past the deadline.
    assert len(coordinator.requests) == 4 and clock.slept == [100, 200, 400]
    assert clock.now - start == 4 * 30_000 + 700
    assert tm.partitions_in_transaction == set() and tm.partitions_being_added == set()


async def test_committed_offsets_waits_out_a_pending_transaction_only_until_max_block_ms() -> None:
    clock = FakeClock()
    coordinator = Coordinator(clock, UNSTABLE_OFFSET_COMMIT)
    start = clock.now
    with pytest.raises(KafkaTimeoutError, match=r"still pending after max.block.ms=2500 ms"):
        await committed_offsets(
            coordinators(clock, coordinator), "g", [("t", 0)], require_stable=True, max_block_ms=2_500
        )
    assert clock.slept == [100, 200, 400, 800, 1000]
    assert clock.now - start == 2_500
