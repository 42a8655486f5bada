"""Fixtures shared by the whole test suite.

Keep this file small: fixtures used by one test module live in that module.

Two brokers serve the integration tests. ``mock_cluster`` is librdkafka's mock
(fresh per test, injects faults); ``kafka_cluster`` is one real Apache Kafka
node shared by the whole session (it takes about ten seconds to start), where
each test takes a topic of its own. ``cluster`` runs a test on both, through
one interface (:class:`BrokerUnderTest`): the tests about delivery use it.

Real-broker tests skip, with the reason, when Java or Maven is missing, unless
``AIOPRODUCER_REQUIRE_KAFKA=1`` (set by ``.ci/run``) turns the skip into a failure.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from aioproducer.testing import KafkaCluster, KafkaUnavailableError, MockCluster

#: tests/user_suite is a user's test suite, run as its own pytest session (tests/integration/test_user_suite.py):
#: collected here, this file's fixtures would stand in for the plugin's it is there to test.
collect_ignore = ["user_suite"]

#: pytester runs the pytest plugin's fixtures in pytest sessions of their own (tests/integration/test_pytest_plugin.py).
pytest_plugins = ("pytester",)

#: The files that start first on the two workers (README: "-n 2 --dist loadfile"), each long and of many
#: tests, so a worker given one has it alone for minutes. The rest follow in collection order: the
#: unit files, short and many, come last and even out the two workers' ends. (xdist's own order, the
#: files with the most tests first, left the long files of one or two tests, real clusters and Spark
#: drivers, to the end, where one worker ran them while the other waited: CI 2060 s.)
FIRST_FILES = (
    "tests/integration/test_spark_streaming_restarts.py",  # six Spark drivers: 186 s alone, 239-300 s in the suite
    "tests/unit/test_mutations.py",
    "tests/integration/test_real_broker_faults.py",
    "tests/docs/test_examples.py",
    "tests/unit/test_types.py",  # mypy strict over everything: 76 s
    "tests/unit/test_config_types.py",  # pyright: 62 s
)


def pytest_configure(config: pytest.Config) -> None:
    """Keep the collection order (below) for xdist's files, instead of its most-tests-first order."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``FIRST_FILES`` first; under ``.ci/wheel-check`` (the installed wheel, the tests a copy), skip what reads the source tree."""
    rank = {path: index for index, path in enumerate(FIRST_FILES)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(rank)))  # stable: the rest keep their order
    if os.environ.get("AIOPRODUCER_FROM_WHEEL") != "1":
        return
    skip = pytest.mark.skip(reason="reads the source tree; .ci/wheel-check tests the installed wheel")
    for item in items:
        if item.get_closest_marker("source_tree") is not None:
            item.add_marker(skip)


#: The topic every BrokerUnderTest offers: 6 partitions, as the mock fixture's ``orders``.
PARTITIONS = 6


def kafka_or_skip(**kwargs: Any) -> KafkaCluster:
    """A started :class:`KafkaCluster`, or skip (fail under ``AIOPRODUCER_REQUIRE_KAFKA=1``) if it cannot run here."""
    try:
        return KafkaCluster(**kwargs)
    except KafkaUnavailableError as exc:
        if os.environ.get("AIOPRODUCER_REQUIRE_KAFKA") == "1":
            pytest.fail(f"AIOPRODUCER_REQUIRE_KAFKA=1 but no real Kafka broker can run here: {exc}")
        pytest.skip(f"no real Kafka broker here: {exc}")


@pytest.fixture
def mock_cluster() -> Iterator[MockCluster]:
    """A fresh 3-broker mock cluster with topic ``orders`` (6 partitions, 3 replicas).

    Function-scoped on purpose: error injection, broker state and partition
    logs would otherwise leak from one test into the next. A cluster starts in
    a few milliseconds, so isolation is cheap.
    """
    with MockCluster(brokers=3, topics={"orders": 6}) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_cluster() -> Iterator[KafkaCluster]:
    """One real Kafka node for the session; tests isolate themselves by topic (:func:`new_topic`)."""
    cluster = kafka_or_skip(brokers=1)
    with cluster:
        yield cluster


def new_topic(cluster: KafkaCluster, partitions: int = PARTITIONS, **kwargs: Any) -> str:
    """Create a topic with a fresh name on ``cluster`` and return the name."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    cluster.create_topic(name, partitions, **kwargs)
    return name


#: Timeouts for producers of tests on a real broker (see BrokerUnderTest.timeouts).
REAL_BROKER_TIMEOUTS: dict[str, Any] = {"request_timeout_ms": 15_000, "delivery_timeout_ms": 60_000}


@dataclass(frozen=True)
class BrokerUnderTest:
    """What a delivery test needs of either broker: where it is, and a 6-partition topic of its own."""

    kind: str  # "mock" or "kafka"
    bootstrap_servers: str
    topic: str

    def timeouts(self, fast: dict[str, Any]) -> dict[str, Any]:
        """``fast`` (a module's short timeouts, sized for the in-process mock), relaxed for a real broker.

        A JVM broker on a busy two-core machine can take over a second to create
        a partition's log on its first write, and pauses for GC: timeouts that
        are right for the mock would expire healthy batches there.
        """
        return fast if self.kind == "mock" else {**fast, **REAL_BROKER_TIMEOUTS}


@pytest.fixture(params=["mock", "kafka"])
def cluster(request: pytest.FixtureRequest) -> Iterator[BrokerUnderTest]:
    """The test runs twice: on a fresh mock cluster (topic ``orders``) and on the session's real Kafka node."""
    if request.param == "mock":
        with MockCluster(brokers=3, topics={"orders": PARTITIONS}) as mock:
            yield BrokerUnderTest("mock", mock.bootstrap_servers, "orders")
    else:
        kafka: KafkaCluster = request.getfixturevalue("kafka_cluster")
        yield BrokerUnderTest("kafka", kafka.bootstrap_servers, new_topic(kafka))


class FakeResolver:
    """A ``BootstrapResolver`` for ``client.dns.lookup`` tests: names to addresses, addresses to canonical names; what it was asked."""

    def __init__(self, addresses: dict[str, list[str]], names: dict[str, str]) -> None:
        self._addresses = addresses
        self._names = names
        self.asked: list[str] = []

    async def addresses(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host not in self._addresses:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self._addresses[host]

    async def canonical_name(self, address: str) -> str:
        if address not in self._names:
            raise socket.herror(1, "Unknown host")
        return self._names[address]
