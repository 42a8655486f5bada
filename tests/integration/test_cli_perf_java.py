"""``aioproducer perf-test`` beside Kafka's own ``ProducerPerformance``, on one real broker: the same output lines.

Users compare the two tools' outputs side by side, so every progress and final line must
have Kafka's format. Both tools run the same workload against one KafkaCluster node; every
line either prints that says "records sent" must match the same two patterns (the ones
``test_cli`` checks aioproducer's output with), and both must report every record.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from aioproducer.testing import KafkaCluster
from aioproducer.testing.kafka import classpath, kafka_libs
from conftest import kafka_or_skip
from test_cli import TOTAL, WINDOW

pytestmark = pytest.mark.integration

ARGS = ["--num-records", "3000", "--record-size", "100", "--throughput", "3000"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with kafka_or_skip(brokers=1, topics={"perf-java": 3, "perf-ours": 3}) as c:
        yield c


def report_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if "records sent" in line]


def check(lines: list[str], records: int) -> None:
    *windows, total = lines
    for line in windows:
        assert WINDOW.fullmatch(line), line
    match = TOTAL.fullmatch(total)
    assert match, total
    assert int(match.group(1)) == records


def test_perf_test_prints_what_kafkas_producer_performance_prints(cluster: KafkaCluster) -> None:
    java = subprocess.run(
        ["java", "-cp", classpath(kafka_libs()), "org.apache.kafka.tools.ProducerPerformance", "--topic", "perf-java",
         *ARGS, "--producer-props", f"bootstrap.servers={cluster.bootstrap_servers}"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert java.returncode == 0, java.stderr[-3000:]
    ours = subprocess.run(
        [sys.executable, "-m", "aioproducer", "perf-test", "--topic", "perf-ours", *ARGS,
         "--bootstrap-servers", cluster.bootstrap_servers],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert ours.returncode == 0, ours.stderr[-3000:]
    java_lines, our_lines = report_lines(java.stdout), report_lines(ours.stdout)
    assert java_lines and our_lines
    check(java_lines, 3000)  # the patterns are Kafka's own format...
    check(our_lines, 3000)  # ...and ours prints it
