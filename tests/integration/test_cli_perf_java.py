"""``aioproducer perf-test`` beside Kafka's own ``ProducerPerformance``, on one real broker: the same output lines.

Users compare the two tools' outputs side by side, so every progress and final line must
have Kafka's format. Both tools run the same workload against one KafkaCluster node; every
line either prints that says "records sent" must match the same three patterns (the ones
``test_cli`` checks aioproducer's output with: windows, the total, the steady-state total
after ``--warmup-records``), both must report every record, and both print the warmup notice
and, with ``--print-metrics``, a "Metric Name" header and "name : value" lines.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from aioproducer.testing import KafkaCluster
from aioproducer.testing.kafka import classpath, kafka_libs
from conftest import kafka_or_skip
from test_cli import STEADY, TOTAL, WINDOW

pytestmark = pytest.mark.integration

ARGS = ["--num-records", "3000", "--record-size", "100", "--throughput", "3000", "--warmup-records", "1000", "--print-metrics"]
WARMUP = "Warmup first 1000 records. Steady state results will print after the complete test summary."


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with kafka_or_skip(brokers=1, topics={"perf-java": 3, "perf-ours": 3}) as c:
        yield c


def report_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if "records sent" in line]


def check(stdout: str, records: int, steady_records: int) -> None:
    lines = stdout.splitlines()
    assert lines[0] == WARMUP
    *windows, total, steady = report_lines(stdout)
    for line in windows:
        assert WINDOW.fullmatch(line), line
    match = TOTAL.fullmatch(total)
    assert match, total
    assert int(match.group(1)) == records
    match = STEADY.fullmatch(steady)
    assert match, steady
    assert int(match.group(1)) == steady_records
    header = lines.index(steady) + 2
    assert lines[header - 1] == "" and re.fullmatch(r"Metric Name +Value", lines[header]), lines[header - 1 : header + 1]
    metrics = lines[header + 1 :]
    assert metrics and all(re.fullmatch(r"\S.* : .*", line) for line in metrics), metrics[:5]


def test_perf_test_prints_what_kafkas_producer_performance_prints(cluster: KafkaCluster) -> None:
    java = subprocess.run(
        ["java", "-cp", classpath(kafka_libs()), "org.apache.kafka.tools.ProducerPerformance", "--topic", "perf-java",
         *ARGS, "--command-property", f"bootstrap.servers={cluster.bootstrap_servers}"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert java.returncode == 0, java.stderr[-3000:]
    ours = subprocess.run(
        [sys.executable, "-m", "aioproducer", "perf-test", "--topic", "perf-ours", *ARGS,
         "--bootstrap-servers", cluster.bootstrap_servers],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert ours.returncode == 0, ours.stderr[-3000:]
    check(java.stdout, 3000, 2000)  # the patterns are Kafka's own format...
    check(ours.stdout, 3000, 2000)  # ...and ours prints it
