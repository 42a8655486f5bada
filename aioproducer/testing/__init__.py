"""Test support for aioproducer and its users: a Kafka mock cluster, real Kafka brokers, a fault proxy.

``MockCluster`` runs librdkafka's mock brokers in-process, on localhost
sockets, so producer tests need neither a JVM nor Docker::

    from aioproducer.testing import MockCluster

    with MockCluster(brokers=3, topics={"orders": 6}) as mc:
        producer = Producer(bootstrap_servers=mc.bootstrap_servers)
        mc.push_request_errors(0, 6)      # next Produce: NOT_LEADER_OR_FOLLOWER

librdkafka comes from the ``confluent-kafka`` wheel, an optional dependency,
loaded when the first ``MockCluster`` is made: without it, that raises
``ConfluentKafkaMissingError`` (an ``ImportError``) naming the extra to install
(``pip install 'aioproducer[testing]'``). Everything else here (``FakeProducer``,
``KafkaCluster``, the proxy, the assertions) imports and works without it.

``KafkaCluster`` (``aioproducer.testing.kafka``) runs real Apache Kafka
brokers, fetched from Maven Central, for what the mock cannot show (sequence
checks, TLS, SASL, transactions, real failover); with ``sasl_mechanism="GSSAPI"`` it starts
a Kerberos realm first (MIT's KDC, ``aioproducer/testing/kdc.py``).

``FaultProxy`` sits between a client and one broker listener and breaks the
network on command (drop connections, swallow responses, delay, pause,
refuse); see ``aioproducer/testing/proxy.py``. It needs only the standard
library: without confluent-kafka, import it from ``aioproducer.testing.proxy``.

``SchemaRegistry`` is an in-memory Confluent-compatible Schema Registry on
aiohttp (the ``schema-registry`` extra), with faults on command and a log of
the requests served; see ``aioproducer/testing/schema_registry.py``.

``OidcProvider`` is a fake OIDC provider (client credentials token endpoint and JWKS, an
RSA key per run) for OAUTHBEARER sign-in tests; see ``aioproducer/testing/oidc_provider.py``.

``FakeProducer`` (``aioproducer/testing/fake.py``) is a ``Producer`` with no broker at all:
records go through the real send path and land in memory (``history()``), for unit tests
of a service; delivery is immediate, or held until ``complete_next()``/``fail_next()``.

``MockCluster.read()`` and ``KafkaCluster.read()`` read a topic back as :class:`ConsumerRecord`
objects through aioproducer's own protocol layer (``aioproducer/testing/readback.py``): no
second Kafka client in a service's tests.

``assert_delivered_exactly_once`` and ``assert_ordered_per_key`` (``aioproducer/testing/assertions.py``)
check what a test read back against what its service sent: the guarantees the project's own
fault tests check. The pytest plugin (``aioproducer/pytest_plugin.py``, loaded by pytest
through its entry point) gives the fixtures ``fake_producer``, ``mock_cluster``,
``kafka_cluster``, ``fault_proxy`` and ``kafka_producer`` (a ``ProducerFactory``).

``run_in_virtual_time`` and ``VirtualTimeLoop`` (``aioproducer/testing/virtual_time.py``) run
a test on an event loop whose clock jumps to its next timer: the producer's ``max.block.ms``,
``flush(timeout)`` and ``close(timeout)`` reach their deadlines in no real time.

``python -m aioproducer.testing`` runs a cluster as a process (for benchmarks
and manual tests); see ``aioproducer/testing/__main__.py``.
"""

import importlib
from typing import TYPE_CHECKING, Any

from aioproducer.testing._librdkafka import ConfluentKafkaMissingError, LibrdkafkaError
from aioproducer.testing.mock_cluster import MockCluster, MockClusterClosedError, MockRequest

if TYPE_CHECKING:
    from aioproducer.testing.assertions import assert_delivered_exactly_once, assert_ordered_per_key
    from aioproducer.testing.fake import FakeProducer, FakeRecord
    from aioproducer.testing.producer_factory import ProducerFactory
    from aioproducer.testing.kafka import KafkaCluster, KafkaStartError, KafkaUnavailableError
    from aioproducer.testing.proxy import FaultProxy, ProxyClosedError, ProxyStats
    from aioproducer.testing.readback import ConsumerRecord
    from aioproducer.testing.schema_registry import RegistryClosedError, SchemaRegistry
    from aioproducer.testing.oidc_provider import OidcProvider, OidcProviderClosedError
    from aioproducer.testing.virtual_time import VirtualTimeLoop, run_in_virtual_time

#: Names imported on first use, so that ``python -m aioproducer.testing.kafka``
#: does not find its own module already imported by this package.
_LAZY = {
    "ConsumerRecord": "aioproducer.testing.readback",
    "assert_delivered_exactly_once": "aioproducer.testing.assertions",
    "assert_ordered_per_key": "aioproducer.testing.assertions",
    "ProducerFactory": "aioproducer.testing.producer_factory",
    "FakeProducer": "aioproducer.testing.fake",
    "FakeRecord": "aioproducer.testing.fake",
    "KafkaCluster": "aioproducer.testing.kafka",
    "KafkaStartError": "aioproducer.testing.kafka",
    "KafkaUnavailableError": "aioproducer.testing.kafka",
    "FaultProxy": "aioproducer.testing.proxy",
    "ProxyClosedError": "aioproducer.testing.proxy",
    "ProxyStats": "aioproducer.testing.proxy",
    "SchemaRegistry": "aioproducer.testing.schema_registry",
    "RegistryClosedError": "aioproducer.testing.schema_registry",
    "OidcProvider": "aioproducer.testing.oidc_provider",
    "OidcProviderClosedError": "aioproducer.testing.oidc_provider",
    "VirtualTimeLoop": "aioproducer.testing.virtual_time",
    "run_in_virtual_time": "aioproducer.testing.virtual_time",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'aioproducer.testing' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "assert_delivered_exactly_once",
    "assert_ordered_per_key",
    "ConfluentKafkaMissingError",
    "ConsumerRecord",
    "FakeProducer",
    "FakeRecord",
    "FaultProxy",
    "KafkaCluster",
    "KafkaStartError",
    "KafkaUnavailableError",
    "LibrdkafkaError",
    "MockCluster",
    "MockClusterClosedError",
    "MockRequest",
    "OidcProvider",
    "OidcProviderClosedError",
    "ProducerFactory",
    "ProxyClosedError",
    "ProxyStats",
    "RegistryClosedError",
    "run_in_virtual_time",
    "SchemaRegistry",
    "VirtualTimeLoop",
]
