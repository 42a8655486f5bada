"""The connection's writer thread (``SocketWriter``): large Produce requests written off the loop, in order.

``BrokerConnection._write_frame`` hands a ``send_produce`` frame of ``WRITER_THREAD_MIN_BYTES``
or more to a thread that writes it without the GIL, and keeps the stream's order: while the
thread holds frames every frame goes to it, and a frame starts it only when the transport's
buffer is empty. Against librdkafka's mock broker, whose answers carry the correlation ids the
state machine matches (a frame out of order would be a protocol error or a garbled batch), and
with every record read back by an independent consumer (confluent-kafka's).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

import pytest

from aioproducer.errors import KafkaError, KafkaTimeoutError
from aioproducer.network import connection as connection_module
from aioproducer.network.connection import WRITER_THREAD_MIN_BYTES, BrokerConnection
from aioproducer.protocol import messages
from aioproducer.protocol.produce import AnyProduceResponse
from aioproducer.protocol.records import RecordBatchBuilder
from aioproducer.testing import MockCluster
from helpers import eventually
from readback import read_with
from test_connection import peer_that_stops_reading

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform == "win32", reason="the writer thread is Unix only"),
]

Outcome = tuple[AnyProduceResponse | None, KafkaError | None]


def _batch(index: int, size: int) -> bytes:
    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), b"%06d" % index, bytes([index % 251]) * size)
    return builder.build()


def _send_produce(conn: BrokerConnection, index: int, size: int, timeout_ms: int = 5000) -> asyncio.Future[Outcome]:
    outcome: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
    conn.send_produce(
        [("orders", [(0, _batch(index, size))])], acks=-1, timeout_ms=timeout_ms,
        on_response=lambda response, error: outcome.set_result((response, error)),
    )
    return outcome


async def _connect(mc: MockCluster, max_in_flight: int = 5) -> BrokerConnection:
    host, port = mc.bootstrap_servers.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(host, int(port), 1, client_id="writer-thread", max_in_flight=max_in_flight)
    await conn.connect()
    return conn


async def test_large_and_small_requests_interleave_in_order_and_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large frames (the thread), small ones and Metadata requests (the transport), mixed on one connection."""
    threshold = 64 * 1024  # records a consumer reads back at its defaults; the order is what is tested
    monkeypatch.setattr(connection_module, "WRITER_THREAD_MIN_BYTES", threshold)
    with MockCluster(brokers=1, topics={"orders": 1}) as mc:
        conn = await _connect(mc, max_in_flight=5)
        sizes = [threshold + 1000 if i % 3 else 300 for i in range(60)]  # 40 large, 20 small, alternating
        try:
            outcomes: list[asyncio.Future[Outcome]] = []
            metadata: list[asyncio.Future[Any]] = []
            for index, size in enumerate(sizes):
                while not conn.can_send_more():  # a slot is freed by an answer: to a produce or a Metadata
                    assert conn.is_connected, f"the stream broke: {conn.close_reason}"
                    pending: list[asyncio.Future[Any]] = [f for f in (*outcomes, *metadata) if not f.done()]
                    await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                outcomes.append(_send_produce(conn, index, size))
                if index % 10 == 0:  # an awaitable request on the same stream
                    metadata.append(asyncio.ensure_future(conn.send(messages.METADATA, {"topics": None})))
            assert conn._socket_writer is not None  # the large frames went to the thread
            results = await asyncio.gather(*outcomes)
            await asyncio.gather(*metadata)
            assert [error for _, error in results] == [None] * len(sizes)
            offsets = [response.partitions[0].base_offset for response, _ in results if response is not None]
            assert offsets == list(range(len(sizes)))  # each answered, in the order written
        finally:
            await conn.close()
        records = await read_with("confluent-kafka", mc.bootstrap_servers, "orders", 0, count=len(sizes))
        assert [(r.key, len(r.value or b"")) for r in records] == [(b"%06d" % i, s) for i, s in enumerate(sizes)]
        assert all(r.value == bytes([i % 251]) * s for i, (r, s) in enumerate(zip(records, sizes)))


async def test_frames_the_socket_takes_in_part_go_out_whole_and_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the thread's threshold the frames of one callback are one ``os.writev`` of their chunks on
    the loop's thread (``_write_direct``); a small send buffer takes only part of it, the transport the
    rest. Here each frame is written in a callback of its own (its write waited for)."""
    monkeypatch.setattr(connection_module, "WRITER_THREAD_MIN_BYTES", 1 << 40)  # the thread out of reach
    written: list[tuple[int, int]] = []
    writev = connection_module._writev
    assert writev is not None

    def spy(fd: int, chunks: Any) -> int:
        sent: int = writev(fd, chunks)
        written.append((sent, sum(map(len, chunks))))
        return sent

    monkeypatch.setattr(connection_module, "_writev", spy)
    sizes = [200_000 if i % 2 else 3_000 for i in range(24)]
    with MockCluster(brokers=1, topics={"orders": 1}) as mc:
        host, port = mc.bootstrap_servers.split(",")[0].rsplit(":", 1)
        conn = BrokerConnection(host, int(port), 1, client_id="writev", max_in_flight=5, send_buffer_bytes=16_384)
        await conn.connect()
        try:
            outcomes: list[asyncio.Future[Outcome]] = []
            for index, size in enumerate(sizes):
                while not conn.can_send_more():
                    assert conn.is_connected, f"the stream broke: {conn.close_reason}"
                    await asyncio.wait([f for f in outcomes if not f.done()], return_when=asyncio.FIRST_COMPLETED)
                outcomes.append(_send_produce(conn, index, size))
                await eventually(lambda: not conn._held, what="the frame written")
            results = await asyncio.gather(*outcomes)
            assert [error for _, error in results] == [None] * len(sizes)
            assert conn._socket_writer is None
        finally:
            await conn.close()
        assert any(sent < total for sent, total in written), written  # the remainder path ran
        assert any(sent == total for sent, total in written), written
        records = await read_with("confluent-kafka", mc.bootstrap_servers, "orders", 0, count=len(sizes))
        assert [(r.key, len(r.value or b"")) for r in records] == [(b"%06d" % i, s) for i, s in enumerate(sizes)]
        assert all(r.value == bytes([i % 251]) * s for i, (r, s) in enumerate(zip(records, sizes)))


@pytest.mark.parametrize("together", [False, True], ids=["apart", "one-callback"])
async def test_small_writes_stay_on_the_loop_and_frames_written_together_count_together(together: bool) -> None:
    """A write under the threshold stays on the loop's thread; the threshold is the size of one write,
    which holds every frame of a callback: five frames of a third of it each start the thread together."""
    with MockCluster(brokers=1, topics={"orders": 1}) as mc:
        conn = await _connect(mc)
        try:
            size = WRITER_THREAD_MIN_BYTES // 3
            outcomes = []
            for i in range(5):
                outcomes.append(_send_produce(conn, i, size))
                if not together:
                    await eventually(lambda: not conn._held, what="the frame written")
            results = await asyncio.gather(*outcomes)
            assert [error for _, error in results] == [None] * 5
            assert (conn._socket_writer is not None) is together
        finally:
            await conn.close()


async def test_a_peer_that_stops_reading_times_the_request_out_and_stops_the_thread() -> None:
    """The request deadline still ends a write the thread cannot finish: the connection and its thread end."""
    async with peer_that_stops_reading() as port:
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t", request_timeout_ms=300, send_buffer_bytes=65_536)
        await conn.connect()
        outcome = _send_produce(conn, 1, 8 << 20, timeout_ms=300)  # far more than the socket buffers hold
        await eventually(lambda: conn._socket_writer is not None, what="the frame handed to the thread")
        thread = conn._socket_writer
        assert thread is not None
        response, error = await asyncio.wait_for(outcome, 5)
        assert response is None and isinstance(error, KafkaTimeoutError)
        assert not conn.is_connected
        await asyncio.wait_for(conn.close(), 5)
        await eventually(lambda: thread.stopped, what="the writer thread ended")


def test_without_the_native_writer_every_frame_goes_through_the_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    """A platform without ``SocketWriter`` (Windows) writes everything through the transport."""
    monkeypatch.setattr(connection_module, "SocketWriter", None)

    async def scenario() -> None:
        with MockCluster(brokers=1, topics={"orders": 1}) as mc:
            conn = await _connect(mc)
            try:
                response, error = await _send_produce(conn, 1, 4 * WRITER_THREAD_MIN_BYTES)
                assert error is None and response is not None and conn._socket_writer is None
            finally:
                await conn.close()

    asyncio.run(scenario())


def test_a_writer_thread_that_cannot_start_leaves_the_transport_writing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No thread (no descriptor left, or the OS refuses one): a warning, and the frame goes out through the transport."""

    class Refused:
        def __init__(self, fd: int) -> None:
            import os

            os.close(fd)  # as the native writer does when its thread cannot start
            raise OSError("SocketWriter: cannot start its thread: Resource temporarily unavailable")

    monkeypatch.setattr(connection_module, "SocketWriter", Refused)

    async def scenario() -> None:
        with MockCluster(brokers=1, topics={"orders": 1}) as mc:
            conn = await _connect(mc)
            try:
                for index in range(2):  # the second does not try again
                    response, error = await _send_produce(conn, index, 2 * WRITER_THREAD_MIN_BYTES)
                    assert error is None and response is not None and conn._socket_writer is None
            finally:
                await conn.close()
            records = await read_with("confluent-kafka", mc.bootstrap_servers, "orders", 0, count=2)
            assert [r.key for r in records] == [b"000000", b"000001"]

    asyncio.run(scenario())
    warnings = [r for r in caplog.records if "large requests are written on the event loop's thread" in r.getMessage()]
    assert [r.levelname for r in warnings] == ["WARNING"], [r.getMessage() for r in caplog.records]
