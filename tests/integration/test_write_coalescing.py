"""The frames of one loop callback go out as one write (``BrokerConnection._write_frame``, ``_flush_held``).

The sender's pass writes a node several requests one after another; held until the callback ends,
they cost one system call instead of one each. What must hold: the stream's order (an awaited
request written in the same callback goes after the held frames), a connection closed meanwhile
writes none of them, and a write that fails fails their requests instead of leaving them waiting.
Against librdkafka's mock broker (a frame out of order is an answer out of step, which breaks the
connection), with the records read back by confluent-kafka.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aioproducer.errors import KafkaConnectionError, KafkaError
from aioproducer.network import connection as connection_module
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import messages
from aioproducer.protocol.produce import AnyProduceResponse
from aioproducer.protocol.records import RecordBatchBuilder
from aioproducer.stats import ByteCounts
from aioproducer.testing import MockCluster
from readback import read_with

pytestmark = pytest.mark.integration

Outcome = tuple[AnyProduceResponse | None, KafkaError | None]


def _send_produce(conn: BrokerConnection, index: int, size: int = 1000) -> asyncio.Future[Outcome]:
    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), b"%06d" % index, bytes([index % 251]) * size)
    outcome: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
    conn.send_produce(
        [("orders", [(0, builder.build())])], acks=-1, timeout_ms=5000,
        on_response=lambda response, error: outcome.set_result((response, error)),
    )
    return outcome


async def _connect(mc: MockCluster) -> BrokerConnection:
    host, port = mc.bootstrap_servers.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(host, int(port), 1, client_id="coalescing", max_in_flight=5, byte_counts=ByteCounts())
    await conn.connect()
    return conn


async def test_the_frames_of_one_callback_go_out_in_one_write(monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[int] = []
    writev = connection_module._writev
    assert writev is not None

    def spy(fd: int, chunks: Any) -> int:
        writes.append(sum(map(len, chunks)))
        result: int = writev(fd, chunks)
        return result

    monkeypatch.setattr(connection_module, "_writev", spy)
    with MockCluster(brokers=1, topics={"orders": 1}) as mc:
        conn = await _connect(mc)
        try:
            counts = conn.byte_counts
            assert counts is not None
            before, requests_before = counts.outgoing, counts.node(conn.node_id).requests
            outcomes = [_send_produce(conn, i) for i in range(5)]
            assert writes == []  # held until this callback ends
            results = await asyncio.gather(*outcomes)
            assert [error for _, error in results] == [None] * 5
            offsets = [response.partitions[0].base_offset for response, _ in results if response is not None]
            assert offsets == [0, 1, 2, 3, 4]
            assert len(writes) == 1, writes  # five requests, one write
            # Counted together at that write: its bytes, and five requests.
            assert writes[0] == counts.outgoing - before
            assert counts.node(conn.node_id).requests - requests_before == 5
        finally:
            await conn.close()
        records = await read_with("confluent-kafka", mc.bootstrap_servers, "orders", 0, count=5)
        assert [r.key for r in records] == [b"%06d" % i for i in range(5)]


async def test_an_awaited_request_writes_the_held_frames_before_itself() -> None:
    """A Metadata request sent in the callback that held two Produce frames goes after them: the broker
    answers in the order written, and an answer out of step would break the connection."""
    with MockCluster(brokers=1, topics={"orders": 1}) as mc:
        conn = await _connect(mc)
        try:
            outcomes = [_send_produce(conn, 0), _send_produce(conn, 1)]
            assert conn._held
            # Awaited here, not in a task: its frame is written in this callback, where the two are held.
            metadata = await conn.send(messages.METADATA, {"topics": None})
            assert metadata is not None
            results = await asyncio.wait_for(asyncio.gather(*outcomes), 5)
            assert [error for _, error in results] == [None] * 2, conn.close_reason
            assert conn.is_connected
        finally:
            await conn.close()
        records = await read_with("confluent-kafka", mc.bootstrap_servers, "orders", 0, count=2)
        assert [r.key for r in records] == [b"000000", b"000001"]


@pytest.mark.parametrize("how", ["close", "abort"])
async def test_frames_held_when_the_connection_closes_fail_and_are_never_written(how: str) -> None:
    with MockCluster(brokers=1, topics={"orders": 1}) as mc:
        conn = await _connect(mc)
        outcomes = [_send_produce(conn, i) for i in range(3)]
        if how == "close":
            await conn.close()
        else:
            conn.abort_socket()
        results = await asyncio.wait_for(asyncio.gather(*outcomes), 5)
        assert all(response is None and isinstance(error, KafkaConnectionError) for response, error in results), results
        # None of the three reached the broker: the next record written is the partition's first.
        other = await _connect(mc)
        try:
            response, error = await asyncio.wait_for(_send_produce(other, 9), 5)
            assert error is None and response is not None
            assert response.partitions[0].base_offset == 0
        finally:
            await other.close()


async def test_a_held_write_that_fails_fails_its_requests_and_closes_the_connection() -> None:
    with MockCluster(brokers=1, topics={"orders": 1}) as mc:
        conn = await _connect(mc)
        try:
            def refuse(writer: Any, frame: Any, size: int, offload: bool) -> None:
                raise OSError("the socket refused the write")

            conn._write_out = refuse  # type: ignore[method-assign]
            outcomes = [_send_produce(conn, i) for i in range(3)]
            results = await asyncio.wait_for(asyncio.gather(*outcomes), 5)
            assert all(isinstance(error, KafkaConnectionError) for _, error in results), results
            assert "the socket refused the write" in str(results[0][1])
            assert not conn.is_connected
        finally:
            await conn.close()
