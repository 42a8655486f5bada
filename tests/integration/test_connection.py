"""BrokerConnection against real wire peers.

The peer is librdkafka's mock broker (``mock_cluster`` fixture), except where
the broker has to misbehave in ways no real broker does (garbage frames,
silence): there a tiny asyncio TCP server in this file plays the broker. It
fakes the *broker*, never our network layer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aioproducer.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolError,
    UnsupportedVersionError,
)
from aioproducer.network.connection import BrokerConnection, ProduceToken
from aioproducer.protocol import messages
from aioproducer.protocol.connection_state import ProduceAnswered, ResponseReceived, Throttled
from aioproducer.protocol.produce import AnyProduceResponse
from aioproducer.protocol.records import RecordBatchBuilder
from aioproducer.testing import MockCluster
from helpers import closed_port, eventually, other_tasks

pytestmark = pytest.mark.integration


# ------------------------------------------------------------------ helpers


def broker_address(mc: MockCluster, broker_id: int) -> tuple[str, int]:
    """The listener of mock broker ``broker_id`` (bootstrap servers are listed in id order)."""
    host, port = mc.bootstrap_servers.split(",")[broker_id - 1].rsplit(":", 1)
    return host, int(port)


async def connect(mc: MockCluster, broker_id: int = 1, **kwargs: Any) -> BrokerConnection:
    host, port = broker_address(mc, broker_id)
    conn = BrokerConnection(host, port, broker_id, client_id="test-connection", **kwargs)
    await conn.connect()
    return conn


def produce_body(topic: str = "orders", partition: int = 0, acks: int = -1) -> dict[str, Any]:
    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), b"key", b"value")
    return {
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": builder.build()}]}
        ],
    }





# ----------------------------------------------------------- a fake broker

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def fake_broker(handler: Handler) -> AsyncIterator[tuple[int, list[bytes]]]:
    """Serve ``handler`` on a localhost port; yields (port, what each connection read after the handler)."""
    leftovers: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
            # Whatever the client does next: it should close, so this read ends with EOF.
            leftovers.append(await asyncio.wait_for(reader.read(), 5))
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], leftovers
    finally:
        server.close()
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> tuple[messages.RequestHeader, dict[str, Any]]:
    size = int.from_bytes(await reader.readexactly(4), "big")
    return messages.decode_request(await reader.readexactly(size))


API_VERSIONS_BODY = {
    "error_code": 0,
    "api_keys": [
        {"api_key": messages.PRODUCE, "min_version": 3, "max_version": 9},
        {"api_key": messages.METADATA, "min_version": 1, "max_version": 8},
        {"api_key": messages.API_VERSIONS, "min_version": 0, "max_version": 3},
    ],
}


async def answer_api_versions(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    header, _ = await read_request(reader)
    writer.write(
        messages.encode_response(
            messages.API_VERSIONS, header.api_version, header.correlation_id, API_VERSIONS_BODY
        )
    )


# ------------------------------------------------------------ negotiation


async def test_negotiated_versions_are_within_both_ranges(mock_cluster: MockCluster) -> None:
    conn = await connect(mock_cluster)
    try:
        broker = conn.broker_api_versions
        assert broker, "ApiVersions gave no ranges"
        for api_key, (our_min, our_max) in messages.SUPPORTED_VERSIONS.items():
            if api_key not in broker:
                continue
            their_min, their_max = broker[api_key]
            if max(our_min, their_min) > min(our_max, their_max):
                continue
            version = conn.api_version(api_key)
            assert max(our_min, their_min) <= version <= min(our_max, their_max)
            assert version == min(our_max, their_max)  # the highest common one
    finally:
        await conn.close()


async def test_api_versions_falls_back_when_broker_rejects_our_version(
    mock_cluster: MockCluster,
) -> None:
    """The mock speaks ApiVersions v0-2 and refuses our v3: we must retry lower, not fail."""
    mock_cluster.start_request_tracking()
    conn = await connect(mock_cluster)
    try:
        our_max = messages.SUPPORTED_VERSIONS[messages.API_VERSIONS][1]
        their_max = conn.broker_api_versions[messages.API_VERSIONS][1]
        assert conn.api_version(messages.API_VERSIONS) == min(our_max, their_max)
        api_versions_requests = [
            r for r in mock_cluster.requests() if r.api_key == messages.API_VERSIONS
        ]
        assert len(api_versions_requests) == (2 if their_max < our_max else 1)
    finally:
        await conn.close()


async def test_unknown_api_version_raises_clear_error(
    mock_cluster: MockCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn = await connect(mock_cluster)
    try:
        _, their_max = conn.broker_api_versions[messages.PRODUCE]
        monkeypatch.setitem(
            messages.SUPPORTED_VERSIONS, messages.PRODUCE, (their_max + 1, their_max + 5)
        )
        with pytest.raises(UnsupportedVersionError) as info:
            await conn.send(messages.PRODUCE, produce_body())
        text = str(info.value)
        assert "Produce" in text
        assert f"v{their_max + 1}-v{their_max + 5}" in text  # our range
        assert f"-v{their_max}" in text  # the broker's range
        # Nothing was written: the connection is still usable.
        assert conn.is_connected and conn.in_flight_count == 0
        assert await conn.send(messages.API_VERSIONS, {}) is not None
    finally:
        await conn.close()


# -------------------------------------------------------------- requests


async def test_produce_returns_increasing_offsets(mock_cluster: MockCluster) -> None:
    mock_cluster.set_partition_leader("orders", 0, 1)
    conn = await connect(mock_cluster)
    try:
        offsets = []
        for _ in range(3):
            response = await conn.send(messages.PRODUCE, produce_body(partition=0))
            assert response is not None
            part = response["responses"][0]["partition_responses"][0]
            assert part["error_code"] == 0
            offsets.append(part["base_offset"])
        assert offsets == [0, 1, 2]  # one record per batch
    finally:
        await conn.close()


async def test_acks0_gets_no_response_and_stream_stays_in_step(mock_cluster: MockCluster) -> None:
    conn = await connect(mock_cluster)
    try:
        assert await conn.send(messages.PRODUCE, produce_body(acks=0), expect_response=False) is None
        assert conn.in_flight_count == 0
        # A later request is matched to its own response (correlation ids still line up).
        response = await conn.send(messages.API_VERSIONS, {})
        assert response is not None and response["error_code"] == 0
    finally:
        await conn.close()


async def test_pipelining_reaches_the_limit_and_never_exceeds_it(mock_cluster: MockCluster) -> None:
    conn = await connect(mock_cluster, max_in_flight=3)
    try:
        mock_cluster.set_rtt(1, 300)
        mock_cluster.start_request_tracking()
        results = await asyncio.gather(
            *(conn.send(messages.API_VERSIONS, {}) for _ in range(12))
        )
        assert all(r is not None and r["error_code"] == 0 for r in results)
        assert conn.max_in_flight_observed == 3
        assert conn.in_flight_count == 0 and conn.can_send_more()

        arrived = [r for r in mock_cluster.requests() if r.api_key == messages.API_VERSIONS]
        assert len(arrived) == 12
        start = arrived[0].timestamp_us
        # Pipelined: the first three reached the broker before any answer (RTT 300 ms) came back...
        assert arrived[2].timestamp_us - start < 200_000
        # ...and the fourth only after the first answer freed a slot.
        assert arrived[3].timestamp_us - start >= 250_000
    finally:
        await conn.close()


# ------------------------------------------------------------- failures


async def test_broker_down_fails_every_in_flight_request_promptly(
    mock_cluster: MockCluster,
) -> None:
    conn = await connect(mock_cluster, max_in_flight=5, request_timeout_ms=30000)
    try:
        mock_cluster.set_rtt(1, 5000)
        mock_cluster.start_request_tracking()
        sends = [asyncio.ensure_future(conn.send(messages.API_VERSIONS, {})) for _ in range(4)]
        await eventually(lambda: len(mock_cluster.requests()) == 4)
        started = time.monotonic()
        mock_cluster.broker_down(1)
        results = await asyncio.gather(*sends, return_exceptions=True)
        elapsed = time.monotonic() - started
        assert elapsed < 2.0, f"in-flight requests took {elapsed:.1f} s to fail"
        for result in results:
            assert isinstance(result, KafkaConnectionError), result
            assert result.retriable
            assert "127.0.0.1" in str(result)
        assert not conn.is_connected
        assert conn.in_flight_count == 0
        with pytest.raises(KafkaConnectionError):
            await conn.send(messages.API_VERSIONS, {})
    finally:
        await conn.close()


async def test_connection_refused_is_clear_and_fast() -> None:
    port = closed_port()
    conn = BrokerConnection("127.0.0.1", port, 7, client_id="t")
    started = time.monotonic()
    with pytest.raises(KafkaConnectionError) as info:
        await conn.connect()
    assert time.monotonic() - started < 2.0
    assert f"127.0.0.1:{port}" in str(info.value)
    assert info.value.retriable
    assert not conn.is_connected
    assert not other_tasks()


async def test_request_timeout_fails_and_closes_the_connection(mock_cluster: MockCluster) -> None:
    conn = await connect(mock_cluster, request_timeout_ms=300)
    try:
        mock_cluster.set_rtt(1, 3000)
        started = time.monotonic()
        first = asyncio.ensure_future(conn.send(messages.API_VERSIONS, {}))
        second = asyncio.ensure_future(conn.send(messages.API_VERSIONS, {}))
        results = await asyncio.gather(first, second, return_exceptions=True)
        elapsed = time.monotonic() - started
        assert 0.25 <= elapsed < 2.0
        # Both timed out on their own deadline or were failed by the first one closing the stream.
        assert any(isinstance(r, KafkaTimeoutError) for r in results), results
        assert all(isinstance(r, (KafkaTimeoutError, KafkaConnectionError)) for r in results)
        assert "request.timeout.ms=300" in str(next(r for r in results if isinstance(r, KafkaTimeoutError)))
        assert not conn.is_connected
    finally:
        await conn.close()


async def test_silent_broker_during_connect_times_out() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)  # and never answer

    async with fake_broker(silent) as (port, leftovers):
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t", request_timeout_ms=200)
        with pytest.raises(KafkaTimeoutError):
            await conn.connect()
        assert not conn.is_connected
        await eventually(lambda: leftovers == [b""])  # the client closed its socket
    assert not other_tasks()


GARBAGE = {
    "negative size": b"\xff\xff\xff\xff",
    "absurd size": b"GARBAGE!" * 4,
    "frame shorter than a correlation id": b"\x00\x00\x00\x02\x00\x00",
    "wrong correlation id": b"\x00\x00\x00\x06\x00\x00\x03\xe7\x00\x00",
    # Claims 5 ApiVersions entries, carries one: a truncated body.
    "truncated body": b"\x00\x00\x00\x0d\x00\x00\x00\x00" + b"\x00\x00\x06" + b"\x00\x00\x00\x00\x00\x03",
}


@pytest.mark.parametrize("garbage", GARBAGE.values(), ids=list(GARBAGE))
async def test_malformed_frame_during_connect_is_protocol_error(garbage: bytes) -> None:
    async def garbler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(garbage)

    async with fake_broker(garbler) as (port, leftovers):
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t", request_timeout_ms=5000)
        started = time.monotonic()
        with pytest.raises(ProtocolError):
            await conn.connect()
        assert time.monotonic() - started < 2.0
        assert not conn.is_connected
        await eventually(lambda: leftovers == [b""])
    assert not other_tasks()


async def test_malformed_response_fails_its_request_and_the_rest_with_connection_error() -> None:
    async def garble_second(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer_api_versions(reader, writer)
        await read_request(reader)
        await read_request(reader)
        # Size 5: correlation id 1 (the first send) and one byte, too short for an error code.
        writer.write(b"\x00\x00\x00\x05" + b"\x00\x00\x00\x01" + b"\x07")

    async with fake_broker(garble_second) as (port, leftovers):
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t")
        await conn.connect()
        first = asyncio.ensure_future(conn.send(messages.API_VERSIONS, {}))
        second = asyncio.ensure_future(conn.send(messages.API_VERSIONS, {}))
        results = await asyncio.gather(first, second, return_exceptions=True)
        assert isinstance(results[0], ProtocolError), results
        assert isinstance(results[1], KafkaConnectionError), results
        assert isinstance(results[1].__cause__, ProtocolError)
        assert not conn.is_connected
        await eventually(lambda: leftovers == [b""])
        await conn.close()
    assert not other_tasks()


async def test_eof_mid_frame_is_a_connection_error() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"\x00\x00\x00\x40\x00\x00")  # 64 bytes announced, 2 sent
        await writer.drain()
        writer.close()

    async with fake_broker(hang_up) as (port, _):
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t")
        with pytest.raises(KafkaConnectionError, match="mid-frame"):
            await conn.connect()


# ---------------------------------------------------------------- close


async def test_close_is_idempotent_fails_in_flight_and_leaks_nothing(
    mock_cluster: MockCluster,
) -> None:
    before = other_tasks()
    conn = await connect(mock_cluster)
    mock_cluster.set_rtt(1, 5000)
    pending = asyncio.ensure_future(conn.send(messages.API_VERSIONS, {}))
    await eventually(lambda: conn.in_flight_count == 1)
    await conn.close()
    with pytest.raises(KafkaConnectionError):
        await pending
    await conn.close()
    assert not conn.is_connected
    assert other_tasks() == before
    with pytest.raises(KafkaConnectionError):
        await conn.send(messages.API_VERSIONS, {})


async def test_connect_twice_is_a_bug(mock_cluster: MockCluster) -> None:
    conn = await connect(mock_cluster)
    try:
        with pytest.raises(RuntimeError):
            await conn.connect()
    finally:
        await conn.close()


async def test_unsolicited_response_breaks_the_connection() -> None:
    async def chatty(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer_api_versions(reader, writer)
        await read_request(reader)  # an acks=0 Produce: nothing to answer
        writer.write(messages.encode_response(messages.API_VERSIONS, 0, 77, API_VERSIONS_BODY))

    async with fake_broker(chatty) as (port, leftovers):
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t")
        await conn.connect()
        await conn.send(messages.PRODUCE, produce_body(acks=0), expect_response=False)
        await eventually(lambda: not conn.is_connected)
        assert isinstance(conn.close_reason, KafkaConnectionError)
        assert isinstance(conn.close_reason.__cause__, ProtocolError)
        assert "no request in flight" in str(conn.close_reason)
        await eventually(lambda: leftovers == [b""])
        await conn.close()
    assert not other_tasks()


async def test_stream_breaking_right_after_api_versions_fails_connect() -> None:
    """connect() must not report a connection that broke while it was finishing as connected."""

    async def answer_then_garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        header, _ = await read_request(reader)
        answer = messages.encode_response(
            messages.API_VERSIONS, header.api_version, header.correlation_id, API_VERSIONS_BODY
        )
        writer.write(answer + b"\xff\xff\xff\xff")  # one write: read before connect() resumes

    async with fake_broker(answer_then_garbage) as (port, leftovers):
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t")
        with pytest.raises(KafkaConnectionError, match="impossible size"):
            await conn.connect()
        assert not conn.is_connected
        await eventually(lambda: leftovers == [b""])
    assert not other_tasks()


# ------------------------------------------------- the Produce fast path

ProduceOutcome = tuple[AnyProduceResponse | None, KafkaError | None]


def one_record_batch() -> bytes:
    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), b"key", b"value")
    return builder.build()


def send_produce(
    conn: BrokerConnection, partition: int = 0, acks: int = -1, timeout_ms: int = 5000
) -> asyncio.Future[ProduceOutcome]:
    """``conn.send_produce`` with the callback's one call turned into a future (a second call fails the test)."""
    outcome: asyncio.Future[ProduceOutcome] = asyncio.get_running_loop().create_future()
    calls: list[ProduceOutcome] = []

    def on_response(response: AnyProduceResponse | None, error: KafkaError | None) -> None:
        calls.append((response, error))
        assert len(calls) == 1, f"callback called {len(calls)} times: {calls}"
        outcome.set_result((response, error))

    conn.send_produce([("orders", [(partition, one_record_batch())])], acks=acks, timeout_ms=timeout_ms, on_response=on_response)
    return outcome


async def test_send_produce_answers_through_the_callback_pipelined_without_tasks(mock_cluster: MockCluster) -> None:
    mock_cluster.set_partition_leader("orders", 0, 1)
    conn = await connect(mock_cluster)
    try:
        before = other_tasks()
        outcomes = [send_produce(conn) for _ in range(3)]
        assert not any(o.done() for o in outcomes)  # never called from inside send_produce
        assert conn.in_flight_count == 3
        assert other_tasks() == before  # no task per request
        results = await asyncio.gather(*outcomes)
        assert [error for _, error in results] == [None, None, None]
        parts = [response.partitions for response, _ in results if response is not None]
        assert [[(p.topic, p.partition, p.error_code, p.base_offset) for p in ps] for ps in parts] == [
            [("orders", 0, 0, 0)], [("orders", 0, 0, 1)], [("orders", 0, 0, 2)]
        ]
        assert conn.in_flight_count == 0 and conn.can_send_more()
    finally:
        await conn.close()


class _ForwardingProtocol(asyncio.Protocol):
    """Stands between a transport and asyncio's streams: a stream of another kind than ``open_connection``'s."""

    def __init__(self, streams: asyncio.StreamReaderProtocol) -> None:
        self.streams = streams

    def data_received(self, data: bytes) -> None:
        self.streams.data_received(data)

    def eof_received(self) -> bool | None:
        return self.streams.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.streams.connection_lost(exc)


async def _other_streams(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(host, port)
    streams = writer.transport.get_protocol()
    assert isinstance(streams, asyncio.StreamReaderProtocol)
    writer.transport.set_protocol(_ForwardingProtocol(streams))
    return reader, writer


@pytest.mark.parametrize("streams", ["asyncio's", "another kind"])
async def test_responses_are_handled_as_read_without_a_task_over_asyncio_streams_and_by_the_reader_otherwise(
    mock_cluster: MockCluster, streams: str
) -> None:
    """Over ``open_connection``'s streams a response is handled in the transport's read callback (no task
    step between); over any other stream the reader task reads it. Both answer every request, in order."""
    mock_cluster.set_partition_leader("orders", 0, 1)
    conn = await connect(mock_cluster, open_streams=None if streams == "asyncio's" else _other_streams)
    try:
        tasks: list[str | None] = []
        original = conn._run_callback

        def record_task(callback: Any, response: Any, error: KafkaError | None) -> None:
            task = asyncio.current_task()
            tasks.append(None if task is None else task.get_name())
            original(callback, response, error)

        conn._run_callback = record_task  # type: ignore[method-assign]
        outcomes = [send_produce(conn) for _ in range(3)]
        results = await asyncio.gather(*outcomes)
        assert [(r.partitions[0].base_offset, e) for r, e in results if r is not None] == [(0, None), (1, None), (2, None)]
        if streams == "asyncio's":
            assert tasks == [None, None, None]
        else:
            assert tasks == [f"aioproducer-reader-{conn.address}"] * 3
        # The end of the stream still reaches the connection: the broker goes, the connection breaks.
        mock_cluster.broker_down(1)
        await eventually(lambda: not conn.is_connected)
    finally:
        await asyncio.wait_for(conn.close(), 5)  # its socket's end awaited: the streams were told of it


async def test_send_produce_reports_broker_errors_per_partition(mock_cluster: MockCluster) -> None:
    mock_cluster.set_partition_leader("orders", 0, 1)
    conn = await connect(mock_cluster)
    try:
        mock_cluster.push_request_errors(messages.PRODUCE, 6)  # NOT_LEADER_OR_FOLLOWER
        response, error = await send_produce(conn)
        assert error is None and response is not None
        assert [(p.partition, p.error_code) for p in response.partitions] == [(0, 6)]
        assert conn.is_connected
    finally:
        await conn.close()


async def test_send_produce_needs_a_slot_a_response_and_a_connection(mock_cluster: MockCluster) -> None:
    conn = await connect(mock_cluster, max_in_flight=1)
    mock_cluster.set_rtt(1, 300)
    first = send_produce(conn)
    with pytest.raises(RuntimeError, match="no in-flight slot free"):
        send_produce(conn)
    assert conn.in_flight_count == 1  # the refused one took nothing
    assert not conn.can_send_more()
    await first
    with pytest.raises(ValueError, match="acks=0"):
        send_produce(conn, acks=0)
    assert conn.in_flight_count == 0
    await conn.close()
    with pytest.raises(KafkaConnectionError):
        send_produce(conn)


async def test_produce_waits_for_its_response_and_acks0_for_the_write(mock_cluster: MockCluster) -> None:
    mock_cluster.set_partition_leader("orders", 1, 1)
    conn = await connect(mock_cluster)
    try:
        response = await conn.produce([("orders", [(1, one_record_batch())])], acks=1, timeout_ms=5000)
        assert response is not None and [(p.partition, p.base_offset) for p in response.partitions] == [(1, 0)]
        assert await conn.produce([("orders", [(1, one_record_batch())])], acks=0, timeout_ms=5000) is None
        assert conn.in_flight_count == 0
        response = await conn.produce([("orders", [(1, one_record_batch())])], acks=-1, timeout_ms=5000)
        assert response is not None and response.partitions[0].base_offset == 2  # the acks=0 one was written
    finally:
        await conn.close()


async def test_a_waiting_send_gets_the_slot_a_produce_response_frees(mock_cluster: MockCluster) -> None:
    conn = await connect(mock_cluster, max_in_flight=1)
    try:
        mock_cluster.set_rtt(1, 200)
        order: list[str] = []
        produced = send_produce(conn)
        produced.add_done_callback(lambda _: order.append("produce"))
        waiting = asyncio.ensure_future(conn.send(messages.API_VERSIONS, {}))
        waiting.add_done_callback(lambda _: order.append("api_versions"))
        await eventually(lambda: order == ["produce", "api_versions"])
        assert (await produced)[1] is None and (await waiting) is not None
        assert conn.max_in_flight_observed == 1
        assert conn.in_flight_count == 0
    finally:
        await conn.close()


async def test_send_produce_broker_down_fails_every_callback(mock_cluster: MockCluster) -> None:
    conn = await connect(mock_cluster)
    try:
        mock_cluster.set_rtt(1, 5000)
        outcomes = [send_produce(conn, partition=p) for p in range(3)]
        mock_cluster.broker_down(1)
        for response, error in await asyncio.gather(*outcomes):
            assert response is None
            assert isinstance(error, KafkaConnectionError) and error.retriable
        assert not conn.is_connected and conn.in_flight_count == 0
    finally:
        await conn.close()


async def answer_api_versions_then_read_forever(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await answer_api_versions(reader, writer)
    while True:
        await read_request(reader)


async def test_send_produce_timeout_fails_the_oldest_and_closes_the_connection() -> None:
    async with fake_broker(answer_api_versions_then_read_forever) as (port, _):
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t", request_timeout_ms=300)
        await conn.connect()
        await asyncio.sleep(0.4)  # idle for longer than request.timeout.ms first: a scenario, not a wait
        first, second = send_produce(conn), send_produce(conn)
        (r1, e1), (r2, e2) = await asyncio.gather(first, second)
        assert r1 is None and isinstance(e1, KafkaTimeoutError)
        assert "request.timeout.ms=300" in str(e1) and "Produce" in str(e1)
        assert r2 is None and isinstance(e2, KafkaConnectionError)
        assert not conn.is_connected and conn.in_flight_count == 0
        await conn.close()


@asynccontextmanager
async def peer_that_stops_reading() -> AsyncIterator[int]:
    """A broker that answers ApiVersions and then reads nothing more (the client's socket buffers fill up); yields its port."""
    release = asyncio.Event()

    async def stop_reading(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await answer_api_versions(reader, writer)
            await release.wait()
        finally:
            writer.close()

    server = await asyncio.start_server(stop_reading, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        release.set()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("expect_response", [True, False], ids=["acks-all", "acks0"])
async def test_a_write_to_a_peer_that_stopped_reading_times_out_instead_of_hanging(expect_response: bool) -> None:
    """The request deadline is the only timeout: it must also end a wait for the socket to drain."""
    async with peer_that_stops_reading() as port:
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t", request_timeout_ms=300, send_buffer_bytes=65_536)
        await conn.connect()
        partition = {"index": 0, "records": b"x" * (8 << 20)}  # far more than the socket buffers hold
        body = {"acks": -1 if expect_response else 0, "timeout_ms": 5000,
                "topic_data": [{"name": "orders", "partition_data": [partition]}]}
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="request.timeout.ms=300"):
            await conn.send(messages.PRODUCE, body, expect_response=expect_response)
        assert time.monotonic() - started < 5.0
        assert not conn.is_connected and conn.in_flight_count == 0
        await asyncio.wait_for(conn.close(), 5)  # the unsent bytes were dropped: nothing to wait for
    await eventually(lambda: not other_tasks(), what="the fake broker's handler and the reader end")


async def test_timeout_is_counted_per_request_not_from_the_oldest_deadline() -> None:
    """The timer armed for a request that got its answer must not time out the next one early."""
    arrived: list[int] = []

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer_api_versions(reader, writer)
        first, _ = await read_request(reader)
        arrived.append(first.correlation_id)
        second, _ = await read_request(reader)  # sent 500 ms after the first
        arrived.append(second.correlation_id)
        for header in (first, second):
            body = {"responses": [{"name": "orders", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 5}]}]}
            writer.write(messages.encode_response(messages.PRODUCE, header.api_version, header.correlation_id, body))
            await asyncio.sleep(0.6)  # the second answer comes 1.1 s after the first request, 0.6 s after its own

    async with fake_broker(slow) as (port, _):
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t", request_timeout_ms=1000)
        await conn.connect()
        try:
            first = send_produce(conn)
            await eventually(lambda: len(arrived) == 1)
            await asyncio.sleep(0.5)  # a gap between the two requests, not a wait for a condition
            second = send_produce(conn)
            for response, error in await asyncio.gather(first, second):
                assert error is None and response is not None and response.partitions[0].base_offset == 5
            assert conn.is_connected
        finally:
            await conn.close()


async def test_send_produce_malformed_response_is_protocol_error_for_its_request() -> None:
    async def garble(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer_api_versions(reader, writer)
        header, _ = await read_request(reader)
        await read_request(reader)
        writer.write(b"\x00\x00\x00\x06" + header.correlation_id.to_bytes(4, "big") + b"\x00\x05")  # truncated body

    async with fake_broker(garble) as (port, _):
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t")
        await conn.connect()
        first, second = send_produce(conn), send_produce(conn)
        (_, e1), (_, e2) = await asyncio.gather(first, second)
        assert isinstance(e1, ProtocolError)
        assert isinstance(e2, KafkaConnectionError) and isinstance(e2.__cause__, ProtocolError)
        assert not conn.is_connected
        await conn.close()


async def test_a_failing_callback_is_reported_and_the_stream_goes_on(mock_cluster: MockCluster) -> None:
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    conn = await connect(mock_cluster)
    try:
        def broken(response: AnyProduceResponse | None, error: KafkaError | None) -> None:
            raise ZeroDivisionError("a bug in the caller")

        conn.send_produce([("orders", [(0, one_record_batch())])], acks=1, timeout_ms=5000, on_response=broken)
        await eventually(lambda: len(reported) == 1)
        assert isinstance(reported[0]["exception"], ZeroDivisionError)
        assert conn.is_connected and conn.in_flight_count == 0
        response, error = await send_produce(conn)
        assert error is None and response is not None
    finally:
        loop.set_exception_handler(None)
        await conn.close()


def produce_response_frame(header: messages.RequestHeader, partitions: int = 1) -> bytes:
    body = {"responses": [{"name": "orders", "partition_responses": [
        {"index": i, "error_code": 0, "base_offset": header.correlation_id * 1000 + i} for i in range(partitions)
    ]}]}
    return messages.encode_response(messages.PRODUCE, header.api_version, header.correlation_id, body)


@pytest.mark.parametrize(
    "cut",
    [
        lambda frames: [frames[:1], frames[1:4], frames[4:-1], frames[-1:]],  # header split, last byte alone
        lambda frames: [frames[i : i + 1] for i in range(len(frames))],  # one byte per read
        lambda frames: [frames],  # every frame in one read
    ],
    ids=["split-header", "byte-by-byte", "all-at-once"],
)
async def test_response_frames_split_and_joined_across_reads(cut: Callable[[bytes], list[bytes]]) -> None:
    async def dribble(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer_api_versions(reader, writer)
        headers = [(await read_request(reader))[0] for _ in range(3)]
        frames = b"".join(produce_response_frame(h, partitions=1 + i) for i, h in enumerate(headers))
        for piece in cut(frames):
            writer.write(piece)
            await writer.drain()
            for _ in range(3):  # loop iterations (not time) for the client to read this piece on its own
                await asyncio.sleep(0)

    async with fake_broker(dribble) as (port, _):
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t")
        await conn.connect()
        outcomes = [send_produce(conn) for _ in range(3)]
        results = await asyncio.gather(*outcomes)
        for i, (response, error) in enumerate(results):
            assert error is None and response is not None
            assert [p.base_offset for p in response.partitions] == [
                response.correlation_id * 1000 + j for j in range(1 + i)
            ]
        assert conn.is_connected and conn.in_flight_count == 0
        await conn.close()


async def test_a_large_response_in_many_reads_is_reassembled() -> None:
    async def big(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await answer_api_versions(reader, writer)
        header, _ = await read_request(reader)
        frame = produce_response_frame(header, partitions=4000)  # ~120 KB
        for i in range(0, len(frame), 1000):
            writer.write(frame[i : i + 1000])
            await writer.drain()
            await asyncio.sleep(0)

    async with fake_broker(big) as (port, _):
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t")
        await conn.connect()
        response, error = await send_produce(conn)
        assert error is None and response is not None and len(response.partitions) == 4000
        assert response.partitions[-1].base_offset == response.correlation_id * 1000 + 3999
        await conn.close()


@pytest.mark.parametrize(("send", "receive"), [(65_536, 49_152), (-1, -1)])
async def test_socket_buffer_sizes_are_applied(mock_cluster: MockCluster, send: int, receive: int) -> None:
    """send.buffer.bytes / receive.buffer.bytes reach the socket (Linux reports twice the value set)."""
    import socket
    import sys

    conn = await connect(mock_cluster, send_buffer_bytes=send, receive_buffer_bytes=receive)
    try:
        sock = conn._writer.get_extra_info("socket")  # type: ignore[union-attr]
        got = (sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
    finally:
        await conn.close()
    if send < 0:
        assert got != (2 * 65_536, 2 * 49_152)  # untouched: whatever the OS chose, not the other case's sizes
    elif sys.platform == "linux":
        assert got == (2 * send, 2 * receive)
    else:
        assert got[0] >= send and got[1] >= receive


@pytest.mark.parametrize(
    ("answer", "hint"),
    [
        (b"HTTP/1.1 400 Bad Request\r\n\r\n", "speaks HTTP"),
        (b"\x15\x03\x03\x00\x02\x02\x32", "TLS alert"),
        (b"GARBAGE!" * 4, "does not speak the Kafka protocol"),
    ],
    ids=["http", "tls", "other"],
)
async def test_a_peer_that_is_not_kafka_is_named_as_such(answer: bytes, hint: str) -> None:
    async def not_kafka(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer)

    async with fake_broker(not_kafka) as (port, _leftovers):
        conn = BrokerConnection("127.0.0.1", port, 1, client_id="t", request_timeout_ms=5000)
        with pytest.raises(ProtocolError, match=hint):
            await conn.connect()



@pytest.mark.parametrize(("max_produce_version", "reported"), [(9, [(1, 300)]), (5, [])])
async def test_a_produce_response_s_throttle_time_is_reported_from_v6_on(
    max_produce_version: int, reported: list[tuple[int, int]]
) -> None:
    """KIP-219: from Produce v6 the client waits out ``throttle_time_ms``; before, the broker delayed its answer."""
    versions = {"error_code": 0, "api_keys": [
        {"api_key": messages.PRODUCE, "min_version": 3, "max_version": max_produce_version},
        {"api_key": messages.API_VERSIONS, "min_version": 0, "max_version": 3},
    ]}

    async def throttling(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        header, _ = await read_request(reader)
        writer.write(messages.encode_response(messages.API_VERSIONS, header.api_version, header.correlation_id, versions))
        for throttle_ms in (300, 0):
            header, _ = await read_request(reader)
            body = {"responses": [{"name": "orders", "partition_responses": [{"index": 0, "error_code": 0}]}],
                    "throttle_time_ms": throttle_ms}
            writer.write(messages.encode_response(messages.PRODUCE, header.api_version, header.correlation_id, body))

    throttles: list[tuple[int, int]] = []
    async with fake_broker(throttling) as (port, _):
        conn = BrokerConnection(
            "127.0.0.1", port, 1, client_id="t", on_throttle=lambda node, ms: throttles.append((node, ms))
        )
        await conn.connect()
        assert conn.api_version(messages.PRODUCE) == max_produce_version
        for _ in range(2):
            response, error = await send_produce(conn)
            assert error is None and response is not None
        assert throttles == reported
        assert conn.can_send_more()  # the connection itself never refuses: the client holds the node back
        await conn.close()


async def test_an_answer_callback_that_raises_is_reported_and_the_connection_reads_on(mock_cluster: MockCluster) -> None:
    """A bug in a request's callback goes to the loop's exception handler; the next answers still arrive."""
    mock_cluster.set_partition_leader("orders", 0, 1)
    conn = await connect(mock_cluster)
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        def raises(response: Any, error: KafkaError | None) -> None:
            raise RuntimeError("a bug in the caller")

        conn.send_produce([("orders", [(0, one_record_batch())])], acks=-1, timeout_ms=5000, on_response=raises)
        response, error = await asyncio.wait_for(send_produce(conn), 10)  # a reader the bug stopped answers nothing
        assert error is None and response is not None
        assert [(c["message"].endswith("exception in a Produce response callback"), type(c["exception"])) for c in reported] == [
            (True, RuntimeError)
        ]
    finally:
        loop.set_exception_handler(None)
        await conn.close()


async def test_the_answers_of_a_read_go_to_their_tokens_on_answers_together_and_each_exactly_once(
    mock_cluster: MockCluster,
) -> None:
    """Five requests written in one pass: every answer reaches its token once, in order, whether a
    read held it with others (one ``on_answers`` call for the run) or alone (the token's own call)."""
    mock_cluster.set_partition_leader("orders", 0, 1)
    conn = await connect(mock_cluster)
    told: list[tuple[str, list[int]]] = []
    done = asyncio.get_running_loop().create_future()

    def tell(how: str, tokens: list[ProduceToken]) -> None:
        told.append((how, [t.request for t in tokens]))
        if sum(len(ids) for _, ids in told) == 5:
            done.set_result(None)

    def on_outcome(token: ProduceToken, response: AnyProduceResponse | None, error: KafkaError | None) -> None:
        assert error is None and response is not None
        tell("alone", [token])

    def on_answers(tokens: list[ProduceToken], answers: list[AnyProduceResponse]) -> None:
        assert len(tokens) == len(answers) > 1 and all(a.partitions[0].error_code == 0 for a in answers)
        tell("together", tokens)

    try:
        for request in range(5):
            conn.send_produce(
                [("orders", [(0, one_record_batch())])], acks=-1, timeout_ms=5000,
                on_response=ProduceToken(on_outcome, on_answers, request),
            )
        await asyncio.wait_for(done, 10)
        assert [i for _, ids in told for i in ids] == [0, 1, 2, 3, 4]
    finally:
        await conn.close()


@pytest.mark.parametrize("read_together", [False, True], ids=["one-event-each", "answers-read-together"])
async def test_a_run_of_answers_is_split_where_its_tokens_differ_and_a_raising_on_answers_is_reported(
    mock_cluster: MockCluster, read_together: bool,
) -> None:
    """The connection's grouping rule on the state machine's events (``_handle``): consecutive answers whose
    tokens share ``on_answers``; anything else between them (a throttle, another kind of token, another
    owner's token) ends the run, and a run of one goes to the token itself. The same whether the
    answers come one event each or several in a ``ProduceAnswered`` (the runs cross its edges)."""
    conn = await connect(mock_cluster)
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    calls: list[tuple[str, list[Any]]] = []

    def owner(name: str) -> tuple[Any, Any]:
        def on_outcome(token: ProduceToken, response: Any, error: KafkaError | None) -> None:
            calls.append((f"{name} alone", [token.request, response]))

        def on_answers(tokens: list[ProduceToken], answers: list[Any]) -> None:
            calls.append((f"{name} together", [[t.request for t in tokens], answers]))
            if name == "bug":
                raise RuntimeError("a bug in the owner")

        return on_outcome, on_answers

    a, b, bug = owner("a"), owner("b"), owner("bug")
    throttles: list[int] = []
    conn.on_throttle = lambda node, ms: throttles.append(ms)

    def plain(response: Any, error: KafkaError | None) -> None:
        calls.append(("plain", [response]))

    try:
        events: list[Any] = [
            ResponseReceived(ProduceToken(*a, 1), "r1"), ResponseReceived(ProduceToken(*a, 2), "r2"),
            Throttled(7),
            ResponseReceived(ProduceToken(*a, 3), "r3"),
            ResponseReceived(plain, "p"),
            ResponseReceived(ProduceToken(*a, 4), "r4"), ResponseReceived(ProduceToken(*b, 5), "r5"),
            ResponseReceived(ProduceToken(*b, 6), "r6"),
            ResponseReceived(ProduceToken(*bug, 7), "r7"), ResponseReceived(ProduceToken(*bug, 8), "r8"),
            ResponseReceived(ProduceToken(*a, 9), "r9"), ResponseReceived(ProduceToken(*a, 10), "r10"),
        ]
        if read_together:  # the same answers, in reads of several: 1-2 | throttle | 3, p, 4, 5 | 6 alone | 7-9 | 10 alone
            def run(answered: list[Any]) -> ProduceAnswered[Any]:
                return ProduceAnswered([e.token for e in answered], [e.body for e in answered])

            events = [run(events[0:2]), events[2], run(events[3:7]), events[7], run(events[8:11]), events[11]]
        conn._handle(events)
        assert calls == [
            ("a together", [[1, 2], ["r1", "r2"]]),
            ("a alone", [3, "r3"]),
            ("plain", ["p"]),
            ("a alone", [4, "r4"]),
            ("b together", [[5, 6], ["r5", "r6"]]),
            ("bug together", [[7, 8], ["r7", "r8"]]),
            ("a together", [[9, 10], ["r9", "r10"]]),
        ]
        assert throttles == [7]
        assert [(c["message"].endswith("exception in a Produce response callback"), type(c["exception"])) for c in reported] == [
            (True, RuntimeError)
        ]
    finally:
        loop.set_exception_handler(None)
        await conn.close()
