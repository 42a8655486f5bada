"""``ProducerFactory``: the type of the pytest plugin's ``kafka_producer`` fixture, for users' type hints."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from aioproducer import Producer
    from aioproducer.testing.kafka import KafkaCluster
    from aioproducer.testing.mock_cluster import MockCluster

__all__ = ["ProducerFactory"]


class ProducerFactory(Protocol):
    """``kafka_producer(cluster=None, **config) -> Producer``: a producer for ``cluster``, started by the test."""

    def __call__(self, cluster: MockCluster | KafkaCluster | str | None = None, /, **config: Any) -> Producer: ...
