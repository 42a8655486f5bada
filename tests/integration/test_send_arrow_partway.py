"""A send_arrow() call that fails part-way hands back a delivery of exactly the rows it queued.

Two ways a call fails after k rows: ``max.block.ms`` runs out waiting for ``buffer.memory``
(a real one: the brokers answer late, so the one batch of memory stays taken), and a panic in
the native append after k rows of its run (a bug; ``_panic_for_test`` plants one). Either way the
error's ``delivery`` counts the k rows, reports each of them (here: delivered, with its offset),
and the topic holds those k rows and no other: a caller that retries the rest duplicates nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from aioproducer import KafkaTimeoutError, Producer, _native
from aioproducer.arrow import ArrowDelivery
from aioproducer.protocol.records import RecordBatchBuilder
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.integration

TOPIC = "orders"
BATCH = 4096
N = 30
TIMESTAMP = 1_700_000_000_000
#: One batch of memory: a second batch waits until the first is acknowledged.
CONFIG: dict[str, Any] = {"batch_size": BATCH, "buffer_memory": BATCH, "max_block_ms": 300, "linger_ms": 0, "request_timeout_ms": 10_000}


def _value(i: int) -> bytes:
    return b"row-%03d-" % i + b"." * 300


def rows_per_batch() -> int:
    """How many of the test's rows one batch holds: where a call needing a second batch stops."""
    builder = RecordBatchBuilder(batch_size=BATCH)
    count = 0
    while builder.try_append(TIMESTAMP, None, _value(count)) >= 0:
        count += 1
    return count


def table(partitions: list[int]) -> pa.Table:
    n = len(partitions)
    return pa.table({
        "value": [_value(i) for i in range(n)],
        "partition": pa.array(partitions, pa.int32()),
        "timestamp": pa.array([TIMESTAMP] * n, pa.timestamp("ms")),
    })


@pytest.fixture
def disarmed() -> Iterator[None]:
    yield
    _native._panic_for_test("")


@pytest.fixture
def no_error_logged(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """A batch that completes after a part-way failure reports its rows without an error (it logged an AssertionError)."""
    caplog.set_level(logging.ERROR)
    yield
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def _check(mock_cluster: MockCluster, delivery: ArrowDelivery, k: int, n: int) -> None:
    """``delivery`` is of rows 0..k-1 of n; each is delivered and is on the topic; no other row is."""
    assert delivery.rows == k
    async with asyncio.timeout(30):  # a row counted but never reported would wait forever
        report = await delivery
    assert (report.rows, report.delivered, report.failed) == (k, k, 0)
    assert report.offsets is not None and len(report.offsets) == n
    assert all(o >= 0 for o in report.offsets[:k]) and list(report.offsets[k:]) == [-1] * (n - k)
    got = [r for r in await mock_cluster.read(TOPIC) if r.value is not None and r.value.startswith(b"row-")]
    assert sorted(r.value or b"" for r in got) == [_value(i) for i in range(k)]
    assert {r.offset for r in got} == {report.offsets[i] for i in range(k)}


def _partitions(case: str, per_batch: int) -> tuple[list[int], int]:
    """The rows' partitions for ``case``, and k: the rows of partition 0 fill the one batch of memory
    (or all of it, at the boundary), and the first row that needs another batch times out."""
    if case == "0":
        return [1] * N, 0  # the memory is taken before the call
    k = {"1": 1, "mid-batch": per_batch // 2, "batch boundary": per_batch, "last row": per_batch - 1}[case]
    if case == "batch boundary":
        return [0] * N, k
    if case == "last row":
        return [0] * k + [1], k
    return [0] * k + [1] * (N - k), k


@pytest.mark.parametrize("case", ["0", "1", "mid-batch", "batch boundary", "last row"])
async def test_memory_running_out_after_k_rows(mock_cluster: MockCluster, no_error_logged: None, case: str) -> None:
    per_batch = rows_per_batch()
    assert 4 < per_batch < N
    partitions, k = _partitions(case, per_batch)
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **CONFIG) as producer:
        await producer.partitions_for(TOPIC)
        for broker in mock_cluster.broker_ids:
            mock_cluster.set_rtt(broker, 1500)  # a sent batch holds its memory until then
        if k == 0:
            await producer.send(TOPIC, b"first", partition=2)
        with pytest.raises(KafkaTimeoutError) as caught:
            await producer.send_arrow(TOPIC, table(partitions), row_outcomes=True)
        for broker in mock_cluster.broker_ids:
            mock_cluster.set_rtt(broker, 0)  # for the read back (the batch sent keeps its delay)
        await _check(mock_cluster, caught.value.delivery, k, len(partitions))  # type: ignore[attr-defined]


@pytest.mark.parametrize("k", [0, 1, 7, N - 1])
async def test_a_panic_while_appending_after_k_rows(mock_cluster: MockCluster, no_error_logged: None, disarmed: None, k: int) -> None:
    """A panic in the native append (a bug) after k rows of a run: the k rows are in a batch, and counted."""
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, batch_size=1 << 20, linger_ms=0) as producer:
        _native._panic_for_test("ArrowRecords.append_rows", after_rows=k)
        with pytest.raises(RuntimeError, match="ArrowRecords.append_rows panicked.*a bug in aioproducer") as caught:
            await producer.send_arrow(TOPIC, table([0] * N), row_outcomes=True)
        await _check(mock_cluster, caught.value.delivery, k, N)  # type: ignore[attr-defined]
        report = await (await producer.send_arrow(TOPIC, table([3] * 2)))  # the producer goes on
        assert report.delivered == 2
