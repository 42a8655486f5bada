"""The pytest plugin (``aioproducer.pytest_plugin``), run as a user's pytest session would run it.

Each test writes a small test file and runs pytest on it in-process (``pytester``): the plugin
is found through its ``pytest11`` entry point, as it is in a user's project, and this suite's own
``conftest.py`` fixtures (which share names with the plugin's) are not in those sessions.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

INI = """
[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""


def run(pytester: pytest.Pytester, source: str, *args: str) -> pytest.RunResult:
    pytester.makeini(INI)
    pytester.makepyfile(test_user=source)
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-W", "error::pytest.PytestUnraisableExceptionWarning", *args)


def test_the_plugin_is_registered_as_a_pytest11_entry_point() -> None:
    points = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    assert points.get("aioproducer") == "aioproducer.pytest_plugin"


def test_mock_cluster_has_the_marked_topics_and_kafka_producer_sends_to_it(pytester: pytest.Pytester) -> None:
    result = run(pytester, """
import pytest
from aioproducer.testing import MockCluster

@pytest.mark.kafka_topics(orders=6, audit=1)
async def test_marked(mock_cluster, kafka_producer):
    assert isinstance(mock_cluster, MockCluster)
    async with kafka_producer() as producer:   # the test's mock_cluster by default
        metadata = await producer.send_and_wait("orders", b"v", partition=5)
        assert (metadata.topic, metadata.partition) == ("orders", 5)
        assert await producer.partitions_for("audit") == [0]

seen = []

def test_each_test_has_its_own_cluster(mock_cluster):
    seen.append(mock_cluster.bootstrap_servers)

def test_each_test_has_its_own_cluster_again(mock_cluster):
    assert mock_cluster.bootstrap_servers not in seen
""")
    result.assert_outcomes(passed=3)


def test_a_bad_marker_is_a_usage_error_naming_it(pytester: pytest.Pytester) -> None:
    result = run(pytester, """
import pytest

@pytest.mark.kafka_topics(orders=0)
def test_bad(mock_cluster):
    pass
""")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*kafka_topics(orders=0): partitions must be an int >= 1*"])


def test_fake_producer_is_started_with_the_marked_topics_and_closed_after(pytester: pytest.Pytester) -> None:
    result = run(pytester, """
import pytest
from aioproducer import Producer
from aioproducer.errors import ProducerClosedError

kept = []

@pytest.mark.kafka_topics(orders=3)
async def test_sends(fake_producer):
    assert isinstance(fake_producer, Producer)
    await fake_producer.send_and_wait("orders", b"v", key=b"k")
    assert await fake_producer.partitions_for("orders") == [0, 1, 2]
    assert [r.value for r in fake_producer.history()] == [b"v"]
    kept.append(fake_producer)

async def test_closed_after_the_test():
    with pytest.raises(ProducerClosedError):
        await kept[0].send("orders", b"late")
""")
    result.assert_outcomes(passed=2)


def test_a_producer_left_running_fails_the_test_at_teardown(pytester: pytest.Pytester) -> None:
    result = run(pytester, """
async def test_leaks(kafka_producer):
    producer = kafka_producer()
    await producer.start()

async def test_closes(kafka_producer):
    async with kafka_producer() as producer:
        await producer.send_and_wait("t", b"v")
""")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*kafka_producer: 1 producer(s) started and never closed*"])


def test_kafka_producer_refuses_what_is_not_a_cluster(pytester: pytest.Pytester) -> None:
    result = run(pytester, """
import pytest

def test_bad(kafka_producer):
    with pytest.raises(TypeError, match=r"kafka_producer\\(cluster\\): a MockCluster, a KafkaCluster or bootstrap servers, not 42"):
        kafka_producer(42)
""")
    result.assert_outcomes(passed=1)


KAFKA_TEST = """
def test_needs_kafka(kafka_cluster):
    raise AssertionError("unreachable: no Java here")
"""


@pytest.mark.parametrize(
    ("args", "env", "outcome"),
    [((), None, "skipped"), (("--kafka-required",), None, "errors"), ((), "1", "errors")],
)
def test_kafka_cluster_skips_without_java_unless_required(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    args: tuple[str, ...], env: str | None, outcome: str,
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no java, no mvn
    if env is None:
        monkeypatch.delenv("AIOPRODUCER_REQUIRE_KAFKA", raising=False)
    else:
        monkeypatch.setenv("AIOPRODUCER_REQUIRE_KAFKA", env)
    result = run(pytester, KAFKA_TEST, "-rs", *args)
    result.assert_outcomes(**{outcome: 1})
    if outcome == "skipped":
        result.stdout.fnmatch_lines(["*no real Kafka broker here:*java*"])
    else:
        result.stdout.fnmatch_lines(["*real Kafka is required here*"])


def test_without_the_testing_extra_the_plugin_defines_nothing() -> None:
    """confluent-kafka missing: no fixture, no option, no marker (a project's own fixtures stand)."""
    code = (
        "import sys; sys.modules['confluent_kafka'] = None\n"
        "import aioproducer.pytest_plugin as p\n"
        "names = [n for n in ('mock_cluster', 'kafka_cluster', 'fault_proxy', 'kafka_producer', 'fake_producer', '_fake_producer_needs_pytest_asyncio') if hasattr(p, n)]\n"
        "assert not p.ACTIVE and names == [], names\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_fake_producer_without_pytest_asyncio_says_what_to_install(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user="def test_uses(fake_producer):\n    pass\n")
    runner = pytester.makepyfile(
        run_without_asyncio=(
            "import sys\n"
            "sys.modules['pytest_asyncio'] = None  # as if not installed\n"
            "import pytest\n"
            "sys.exit(pytest.main(['-p', 'no:cacheprovider', '-p', 'aioproducer.pytest_plugin', 'test_user.py']))\n"
        )
    )
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # pytest-asyncio's entry point not loaded either
    done = subprocess.run([sys.executable, str(runner)], cwd=pytester.path, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the fake_producer fixture needs pytest-asyncio (pip install pytest-asyncio)" in done.stdout, done.stdout


def test_kafka_producer_lives_in_the_tests_own_loop_whatever_its_loop_scope(pytester: pytest.Pytester) -> None:
    """Tests sharing a module-scoped loop: each producer starts (and is closed) in that loop; clusters fit any loop."""
    result = run(pytester, """
import asyncio
import pytest

loops = []

@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.kafka_topics(t=1)
async def test_first(mock_cluster, kafka_producer):
    loops.append(asyncio.get_running_loop())
    async with kafka_producer() as producer:
        await producer.send_and_wait("t", b"1")

@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.kafka_topics(t=1)
async def test_second(mock_cluster, kafka_producer):
    assert asyncio.get_running_loop() is loops[0]
    async with kafka_producer(mock_cluster.bootstrap_servers) as producer:
        await producer.send_and_wait("t", b"2")
    assert [r.value for r in await mock_cluster.read("t")] == [b"2"]  # a fresh cluster per test
""")
    result.assert_outcomes(passed=2)


def test_a_fault_left_on_by_one_test_is_healed_before_the_next(pytester: pytest.Pytester) -> None:
    """The first test leaves the proxy refusing, delaying and paused; the second still sends through it."""
    result = run(pytester, """
def test_leaves_faults_on(kafka_cluster, fault_proxy):
    assert fault_proxy is kafka_cluster.proxy(1)
    fault_proxy.refuse()
    fault_proxy.set_delay(60_000)
    fault_proxy.pause()

async def test_sends_through_the_proxy(kafka_cluster, fault_proxy, kafka_producer):
    kafka_cluster.create_topic("healed", partitions=1)
    async with kafka_producer(kafka_cluster, request_timeout_ms=5000, delivery_timeout_ms=10000) as producer:
        await producer.send_and_wait("healed", b"v")
    assert [r.value for r in await kafka_cluster.read("healed")] == [b"v"]
""")
    result.assert_outcomes(passed=2)
