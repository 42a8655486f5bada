"""examples/exactly_once_pipeline.py, killed with SIGKILL part-way and restarted: each result exactly once.

The pipeline runs as its own process, as a user runs it. Input records go in two halves; the
process is killed (no cleanup of any kind) as soon as its first results are committed, the
second half is added, a new process takes over (its transactional id fences the dead one's
open transaction), and the test waits until a read_committed reader sees as many results as
inputs. Then the results must be exactly the inputs' results: none lost, none twice.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from aioproducer import Producer
from aioproducer.testing import KafkaCluster
from conftest import kafka_or_skip
from readback import read_isolated

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "exactly_once_pipeline.py"
RECORDS = 1000


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    with kafka_or_skip(brokers=1, topics={"eos-in": 3, "eos-out": 3}) as c:
        yield c


def start(cluster: KafkaCluster) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), cluster.bootstrap_servers, "eos-in", "eos-out", "eos-group"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


async def produce(cluster: KafkaCluster, values: list[bytes]) -> None:
    async with Producer(bootstrap_servers=cluster.bootstrap_servers, linger_ms=5) as producer:
        futures = [await producer.send("eos-in", value, key=value) for value in values]
        await asyncio.gather(*futures)


async def committed_results(cluster: KafkaCluster) -> list[bytes]:
    return await read_isolated(cluster.bootstrap_servers, "eos-out", [0, 1, 2], committed=True)


async def wait_for(cluster: KafkaCluster, done: int, process: subprocess.Popen[bytes], timeout: float) -> list[bytes]:
    """Poll until at least ``done`` results are committed (the process must stay alive meanwhile)."""
    async with asyncio.timeout(timeout):
        while True:
            results = await committed_results(cluster)
            if len(results) >= done:
                return results
            if process.poll() is not None:
                stderr = process.stderr.read().decode() if process.stderr else ""
                raise AssertionError(f"the pipeline exited with {process.returncode}:\n{stderr[-3000:]}")
            await asyncio.sleep(0.2)  # between polls of a condition that has its own deadline


async def test_a_pipeline_killed_part_way_and_restarted_writes_each_result_exactly_once(cluster: KafkaCluster) -> None:
    inputs = [b"record-%04d" % i for i in range(RECORDS)]
    await produce(cluster, inputs[: RECORDS // 2])
    first = start(cluster)
    try:
        await wait_for(cluster, 1, first, timeout=60)
    finally:
        first.send_signal(signal.SIGKILL)  # mid-stream: a transaction may be open, nothing is cleaned up
        first.wait(timeout=30)
    partial = await committed_results(cluster)
    assert 0 < len(partial) <= RECORDS // 2
    await produce(cluster, inputs[RECORDS // 2 :])
    second = start(cluster)
    try:
        results = await wait_for(cluster, RECORDS, second, timeout=120)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
    assert sorted(results) == sorted(value.upper() for value in inputs)  # each exactly once
