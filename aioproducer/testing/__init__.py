"""Test support for aioproducer and its users: an embedded Kafka mock cluster and a fault proxy.

``MockCluster`` runs librdkafka's mock brokers in-process, on localhost
sockets, so producer tests need neither a JVM nor Docker::

    from aioproducer.testing import MockCluster

    with MockCluster(brokers=3, topics={"orders": 6}) as mc:
        producer = Producer(bootstrap_servers=mc.bootstrap_servers)
        mc.push_request_errors(0, 6)      # next Produce: NOT_LEADER_OR_FOLLOWER

librdkafka comes from the ``confluent-kafka`` wheel, an optional dependency:
importing this package without it raises an ``ImportError`` subclass that names
the extra to install (``pip install 'aioproducer[testing]'``).

``FaultProxy`` sits between a client and one broker listener and breaks the
network on command (drop connections, swallow responses, delay, pause,
refuse); see ``aioproducer/testing/proxy.py``. It needs only the standard
library: without confluent-kafka, import it from ``aioproducer.testing.proxy``.

``python -m aioproducer.testing`` runs a cluster as a process (for benchmarks
and manual tests); see ``aioproducer/testing/__main__.py``.
"""

from aioproducer.testing._librdkafka import ConfluentKafkaMissingError, LibrdkafkaError
from aioproducer.testing.mock_cluster import MockCluster, MockClusterClosedError, MockRequest
from aioproducer.testing.proxy import FaultProxy, ProxyClosedError, ProxyStats

__all__ = [
    "ConfluentKafkaMissingError",
    "FaultProxy",
    "LibrdkafkaError",
    "MockCluster",
    "MockClusterClosedError",
    "MockRequest",
    "ProxyClosedError",
    "ProxyStats",
]
