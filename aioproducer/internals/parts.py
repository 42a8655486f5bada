"""The engine's parts seam: the parts that touch a cluster, made on a cluster or in memory.

Why a seam. ``ProducerEngine`` composes a producer from its parts in one place (``_start``).
Four of them talk to brokers: the client (metadata, connections), the coordinators
(transaction and group coordinator requests), the accumulator's door to the wire (the real
one, or one that hands each batch to an in-memory broker) and the sender. A ``FakeProducer``
needs other versions of exactly those four and nothing else; everything built from the
configuration alone (the transaction manager, the buffer pool, the transaction calls, their
transaction version, the telemetry) must be the same in both. So the engine takes a
``ProducerParts`` (default: ``ClusterParts``, the real ones) and builds the rest itself, in
the same order, for both: the fake overrides no method of the engine and cannot compose a
part differently (``tests/unit/test_fake_producer.py`` checks the two compositions agree).

Each part is typed by the Protocol of what the engine, the facade and the other parts use of
it (``EngineClient``, ``EngineSender``, ``CoordinatorSender``), never by the concrete class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from aioproducer.clock import Clock
from aioproducer.config import ProducerConfig
from aioproducer.internals.accumulator import AccumulatorConfig, RecordAccumulator
from aioproducer.internals.batch import ProducerBatch
from aioproducer.internals.buffer_pool import BufferPool
from aioproducer.internals.coordinator import CoordinatorSender, Coordinators
from aioproducer.internals.metrics import ByteCounts, ProducerMetrics
from aioproducer.internals.sender import OnAcknowledged, Sender, WakeUp
from aioproducer.internals.transaction_manager import TransactionManager
from aioproducer.lifecycle import LifecycleView
from aioproducer.logs import LogLike, client_logger
from aioproducer.network.client import KafkaClient
from aioproducer.network.metadata import ClusterMetadata
from aioproducer.security.connector import ConnectionSecurity

__all__ = ["ClusterParts", "EngineClient", "EngineSender", "ProducerParts"]


class EngineClient(Protocol):
    """What the engine and the facade use of the cluster client (``network.client.KafkaClient``)."""

    @property
    def metadata(self) -> ClusterMetadata: ...

    @property
    def brokers_reachable(self) -> bool: ...

    @property
    def connection_count(self) -> int: ...

    @property
    def byte_counts(self) -> ByteCounts: ...

    @property
    def bootstrap_failure(self) -> BaseException | None: ...

    async def bootstrap(self, timeout_ms: float = 0.0) -> ClusterMetadata: ...

    def add_topic(self, topic: str) -> None: ...

    async def wait_for_metadata(self, topic: str, timeout_ms: float) -> tuple[int, ...]: ...

    def metadata_age(self) -> float: ...

    def finalized_feature_level(self, name: str) -> int: ...

    async def send_any(self, api_key: int, body: dict[str, Any]) -> dict[str, Any]: ...

    def interrupt_waits(self) -> None: ...

    async def close(self, deadline_ms: float | None = None) -> None: ...

    def abandon(self) -> None: ...


class EngineSender(Protocol):
    """What the engine uses of the sender (``internals.sender.Sender``): its task, its wake-up, its aborts."""

    @property
    def requests_in_flight(self) -> int: ...

    async def run(self) -> None: ...

    def wakeup(self) -> None: ...

    def abort_undrained(self, error: BaseException) -> None: ...

    def abort_incomplete(self, error: BaseException) -> None: ...


_Client = TypeVar("_Client", bound=EngineClient)


class ProducerParts(Protocol[_Client]):
    """Makes the four parts that touch a cluster, for one start (a failed start's are dropped).

    The engine calls them in this order, each with what the engine built before it; what a
    part reports back (a batch completed, an error no retry can fix) is one of the engine's
    bound methods, given here.
    """

    def client(
        self,
        config: ProducerConfig,
        *,
        clock: Clock,
        byte_counts: ByteCounts,
        on_sendable: Callable[[], None],
        on_metadata: Callable[[ClusterMetadata], None],
    ) -> _Client: ...

    def coordinators(self, client: _Client, config: ProducerConfig, *, clock: Clock) -> CoordinatorSender: ...

    def accumulator(
        self,
        config: AccumulatorConfig,
        pool: BufferPool,
        tm: TransactionManager | None,
        on_ready: Callable[[], None],
        *,
        clock: Clock,
        lifecycle: LifecycleView,
        log: LogLike,
    ) -> RecordAccumulator: ...

    def sender(
        self,
        client: _Client,
        accumulator: RecordAccumulator,
        tm: TransactionManager | None,
        config: ProducerConfig,
        *,
        coordinators: CoordinatorSender,
        wake: WakeUp,
        on_complete: Callable[[ProducerBatch], None],
        on_acknowledged: OnAcknowledged | None,
        on_fatal: Callable[[BaseException], None],
        metrics: ProducerMetrics,
        clock: Clock,
        lifecycle: LifecycleView,
    ) -> EngineSender: ...


class ClusterParts:
    """The real parts: a ``KafkaClient`` over the producer's TLS/SASL connections, its coordinators, the sender."""

    def __init__(self, security: ConnectionSecurity) -> None:
        self._security = security

    def client(
        self,
        config: ProducerConfig,
        *,
        clock: Clock,
        byte_counts: ByteCounts,
        on_sendable: Callable[[], None],
        on_metadata: Callable[[ClusterMetadata], None],
    ) -> KafkaClient:
        security = self._security
        return KafkaClient(
            config,
            clock=clock,
            open_streams=security.open_streams(),
            authenticator=security.authenticator(),
            byte_counts=byte_counts,
            on_sendable=on_sendable,
            on_metadata=on_metadata,
        )

    def coordinators(self, client: KafkaClient, config: ProducerConfig, *, clock: Clock) -> Coordinators:
        return Coordinators(client, config.retry_backoff_ms, config.retry_backoff_max_ms, clock=clock)

    def accumulator(
        self,
        config: AccumulatorConfig,
        pool: BufferPool,
        tm: TransactionManager | None,
        on_ready: Callable[[], None],
        *,
        clock: Clock,
        lifecycle: LifecycleView,
        log: LogLike,
    ) -> RecordAccumulator:
        return RecordAccumulator(config, pool, tm, on_ready, clock=clock, lifecycle=lifecycle, log=log)

    def sender(
        self,
        client: KafkaClient,
        accumulator: RecordAccumulator,
        tm: TransactionManager | None,
        config: ProducerConfig,
        *,
        coordinators: CoordinatorSender,
        wake: WakeUp,
        on_complete: Callable[[ProducerBatch], None],
        on_acknowledged: OnAcknowledged | None,
        on_fatal: Callable[[BaseException], None],
        metrics: ProducerMetrics,
        clock: Clock,
        lifecycle: LifecycleView,
    ) -> Sender:
        return Sender(
            client, accumulator, tm, config, on_complete=on_complete, on_acknowledged=on_acknowledged, clock=clock, wake=wake, metrics=metrics,
            log=client_logger("aioproducer.sender", config.client_id), coordinators=coordinators, on_fatal=on_fatal,
        )
