"""The pytest plugin: fixtures for testing a service that produces with aioproducer.

Registered through the ``pytest11`` entry point, so installing ``aioproducer[testing]`` is
all it takes; without that extra (no ``confluent-kafka``, which carries librdkafka's mock
cluster) the plugin defines nothing and a project's own fixtures of the same names stand.
A project's ``conftest.py`` fixture of the same name overrides these, as pytest always does.

Fixtures:

``fake_producer``
    A started :class:`~aioproducer.testing.FakeProducer` (no broker), closed after the test;
    topics from ``@pytest.mark.kafka_topics(orders=6)``. Needs pytest-asyncio.
``mock_cluster``
    A fresh 3-broker :class:`~aioproducer.testing.MockCluster` per test (librdkafka's mock,
    in-process, milliseconds to start), with the marker's topics.
``kafka_cluster``
    One real Kafka node for the whole session (:class:`~aioproducer.testing.KafkaCluster`,
    about ten seconds to start), its client listener behind a ``FaultProxy``. Skipped, with
    the reason, where Java or the Kafka jars cannot be had, unless ``--kafka-required`` (or
    the ini option ``kafka_required = true``, or ``AIOPRODUCER_REQUIRE_KAFKA=1``) turns the
    skip into a failure, as a CI job that must test against Kafka wants.
``fault_proxy``
    The :class:`~aioproducer.testing.FaultProxy` in front of ``kafka_cluster``'s broker;
    healed (:meth:`~aioproducer.testing.FaultProxy.heal`) after each test.
``kafka_producer``
    A factory: ``kafka_producer(cluster=None, **config)`` makes a :class:`~aioproducer.Producer`
    for ``cluster`` (a ``MockCluster``, a ``KafkaCluster``, or bootstrap servers; default: this
    test's ``mock_cluster``), to be started by the test (``async with``). For a
    ``KafkaCluster(sasl_mechanism="GSSAPI")`` it signs in over GSSAPI with the cluster's client
    keytab, ``KRB5_CONFIG`` set to the cluster's realm for the test. A producer the test
    started and never closed fails the test at teardown: its records may never have been sent.

Event loops. The clusters and the proxy run on threads of their own and belong to no event
loop, so they can have any scope. Producers belong to the loop that started them. The
factory leaves the start to the test, so a producer always lives in the test's own loop,
whatever loop scope the test runs in; ``fake_producer`` is started in a function-scoped
loop, which is pytest-asyncio's default for tests: a test running in a wider loop scope
makes its ``FakeProducer`` itself (``async with FakeProducer() as producer``).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

try:
    import confluent_kafka  # noqa: F401  (librdkafka, what MockCluster runs on: the testing extra)
except ImportError:  # pragma: no cover - exercised where the extra is not installed
    ACTIVE = False
else:
    ACTIVE = True

if TYPE_CHECKING:
    from aioproducer import Producer
    from aioproducer.testing import FakeProducer, FaultProxy, KafkaCluster, MockCluster
    from aioproducer.testing.producer_factory import ProducerFactory

__all__ = ["ACTIVE"]

#: Brokers of the ``mock_cluster`` fixture: enough for leader moves and a broker down.
MOCK_BROKERS = 3
REQUIRE_ENV = "AIOPRODUCER_REQUIRE_KAFKA"


def marked_topics(node: pytest.Item | pytest.FixtureRequest) -> dict[str, int]:
    """The topics of ``@pytest.mark.kafka_topics(name=partitions, ...)`` (closest marker), checked."""
    item = node.node if isinstance(node, pytest.FixtureRequest) else node
    marker = item.get_closest_marker("kafka_topics")
    if marker is None:
        return {}
    if marker.args:
        raise pytest.UsageError(f"@pytest.mark.kafka_topics takes name=partitions keywords, not {marker.args!r}")
    for name, partitions in marker.kwargs.items():
        if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
            raise pytest.UsageError(
                f"@pytest.mark.kafka_topics({name}={partitions!r}): partitions must be an int >= 1"
            )
    return dict(marker.kwargs)


def kafka_required(config: pytest.Config) -> bool:
    """Whether a missing Kafka fails (``--kafka-required``, ini ``kafka_required``, or the env var) instead of skipping."""
    return bool(config.getoption("kafka_required")) or bool(config.getini("kafka_required")) or (
        os.environ.get(REQUIRE_ENV) == "1"
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    if not ACTIVE:
        return
    group = parser.getgroup("aioproducer")
    group.addoption(
        "--kafka-required", action="store_true", default=False,
        help="aioproducer: fail (not skip) tests using kafka_cluster when real Kafka cannot run here",
    )
    parser.addini("kafka_required", type="bool", default=False, help="aioproducer: as --kafka-required")


def pytest_configure(config: pytest.Config) -> None:
    if not ACTIVE:
        return
    config.addinivalue_line(
        "markers", "kafka_topics(**partitions): topics for the mock_cluster and fake_producer fixtures, e.g. orders=6"
    )


if ACTIVE:

    @pytest.fixture
    def mock_cluster(request: pytest.FixtureRequest) -> Iterator[MockCluster]:
        """A fresh 3-broker mock cluster with the ``kafka_topics`` marker's topics (function scope)."""
        from aioproducer.testing import MockCluster

        with MockCluster(brokers=MOCK_BROKERS, topics=marked_topics(request)) as cluster:
            yield cluster

    @pytest.fixture(scope="session")
    def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
        """One real Kafka node for the session, its client listener behind a FaultProxy."""
        from aioproducer.testing import KafkaCluster, KafkaUnavailableError

        try:
            cluster = KafkaCluster(brokers=1, proxy=True)
        except KafkaUnavailableError as exc:
            if kafka_required(request.config):
                pytest.fail(f"real Kafka is required here (--kafka-required or {REQUIRE_ENV}=1) but cannot run: {exc}")
            pytest.skip(f"no real Kafka broker here: {exc}")
        with cluster:
            yield cluster

    @pytest.fixture
    def fault_proxy(kafka_cluster: KafkaCluster) -> Iterator[FaultProxy]:
        """The proxy in front of the session broker, healed after the test."""
        proxy = kafka_cluster.proxy(kafka_cluster.broker_ids[0])
        try:
            yield proxy
        finally:
            proxy.heal()

    @pytest.fixture
    def kafka_producer(request: pytest.FixtureRequest) -> Iterator[ProducerFactory]:
        """``kafka_producer(cluster=None, **config)``: a Producer the test starts; one left running fails the test."""
        made: list[Producer] = []

        def make(cluster: MockCluster | KafkaCluster | str | None = None, /, **config: Any) -> Producer:
            from aioproducer import Producer

            if cluster is None:
                cluster = request.getfixturevalue("mock_cluster")
            bootstrap = cluster if isinstance(cluster, str) else getattr(cluster, "bootstrap_servers", None)
            if not isinstance(bootstrap, str):
                raise TypeError(
                    f"kafka_producer(cluster): a MockCluster, a KafkaCluster or bootstrap servers, not {cluster!r}"
                )
            from aioproducer.testing.kafka import KafkaCluster

            if isinstance(cluster, KafkaCluster) and cluster.kdc is not None:
                # A Kerberized cluster: its GSSAPI listener and client keytab; the realm's krb5.conf for this test.
                request.getfixturevalue("monkeypatch").setenv("KRB5_CONFIG", cluster.krb5_conf)
                producer = Producer(cluster.gssapi_config(), **config)
            else:
                producer = Producer(bootstrap_servers=bootstrap, **config)
            made.append(producer)
            return producer

        yield make
        left_open = [p for p in made if _started_not_closed(p)]
        if left_open:
            pytest.fail(
                f"kafka_producer: {len(left_open)} producer(s) started and never closed: their records may never have "
                "been sent; use 'async with kafka_producer(...) as producer:'",
                pytrace=False,
            )

    try:
        import pytest_asyncio
    except ImportError:  # pragma: no cover - exercised where pytest-asyncio is not installed

        @pytest.fixture(name="fake_producer")
        def _fake_producer_needs_pytest_asyncio() -> FakeProducer:
            pytest.fail(
                "the fake_producer fixture needs pytest-asyncio (pip install pytest-asyncio); "
                "or make one in the test: 'async with FakeProducer() as producer:'",
                pytrace=False,
            )

    else:

        @pytest_asyncio.fixture(loop_scope="function")
        async def fake_producer(request: pytest.FixtureRequest) -> AsyncIterator[FakeProducer]:
            """A started FakeProducer with the marker's topics, closed after the test."""
            from aioproducer.testing import FakeProducer

            async with FakeProducer(topics=marked_topics(request)) as fake:
                yield fake


def _started_not_closed(producer: Producer) -> bool:
    from aioproducer.lifecycle import State

    return producer._lifecycle.state is State.RUNNING
