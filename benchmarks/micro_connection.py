"""Micro-benchmark of the connection's Produce hot path, without a broker or a socket.

Three measurements, best of ``--repeat`` runs each (the minimum is the least
disturbed by other processes on the machine):

* ``codec``: the hand-written Produce encoder and decoder alone, the floor;
* ``state machine``: :class:`ClientConnection` alone, no event loop:
  ``send_produce`` then ``receive_data`` of its answer, five requests in flight;
* ``adapter``: :meth:`BrokerConnection.send_produce` and the reader task feeding
  the answers to the state machine and calling back, on a real event loop; the
  writer is a stub and the answers are fed to the reader's ``StreamReader``
  directly (private attributes: this measures the connection, not the kernel).

Both use Produce v9 with one 100-byte batch; most of the time is the codec
(encode and decode), the rest is the connection's bookkeeping.

    python -m benchmarks.micro_connection [--requests N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from aioproducer.errors import KafkaError
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import messages
from aioproducer.protocol.connection_state import ClientConnection
from aioproducer.protocol.produce import ProduceResponse, decode_produce_response, encode_produce_request

VERSION = 9
IN_FLIGHT = 5
TOPIC_DATA = [("orders", [(0, b"x" * 100)])]
_RESPONSE = {"responses": [{"name": "orders", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 5}]}]}
_API_VERSIONS = {"error_code": 0, "api_keys": [{"api_key": messages.PRODUCE, "min_version": 3, "max_version": VERSION}]}


def _answers(first_correlation_id: int, count: int) -> list[bytes]:
    """Produce answers with consecutive correlation ids (encoded once, then patched)."""
    template = messages.encode_response(messages.PRODUCE, VERSION, 0, _RESPONSE)
    return [template[:4] + cid.to_bytes(4, "big") + template[8:] for cid in range(first_correlation_id, first_correlation_id + count)]


def _negotiate(machine: ClientConnection[Any]) -> None:
    machine.initiate(None, 0.0)
    version = messages.SUPPORTED_VERSIONS[messages.API_VERSIONS][1]
    machine.receive_data(messages.encode_response(messages.API_VERSIONS, version, 0, _API_VERSIONS), 0.0)


def bench_codec(requests: int) -> float:
    """Seconds per request to encode it and decode its answer, nothing else."""
    answers = [answer[4:] for answer in _answers(1, requests)]
    started = time.perf_counter()
    for cid in range(requests):
        encode_produce_request(VERSION, cid, "bench", None, 1, 5000, TOPIC_DATA)
        decode_produce_response(VERSION, answers[cid])
    return (time.perf_counter() - started) / requests


def bench_state_machine(requests: int) -> float:
    """Seconds per request through the state machine alone."""
    machine: ClientConnection[int] = ClientConnection(client_id="bench", max_in_flight=IN_FLIGHT)
    _negotiate(machine)
    answers = _answers(1, requests)
    rounds = requests // IN_FLIGHT
    started = time.perf_counter()
    for r in range(rounds):
        for i in range(IN_FLIGHT):
            machine.send_produce(i, TOPIC_DATA, 0.0, acks=1, timeout_ms=5000)
        machine.receive_data(b"".join(answers[r * IN_FLIGHT : (r + 1) * IN_FLIGHT]), 0.0)
    return (time.perf_counter() - started) / (rounds * IN_FLIGHT)


class _StubWriter:
    """Takes frames and drops them."""

    class transport:  # noqa: N801 - stands in for an attribute
        @staticmethod
        def abort() -> None:
            pass

    def writelines(self, chunks: Any) -> None:
        pass

    def close(self) -> None:
        pass

    async def drain(self) -> None:
        pass

    async def wait_closed(self) -> None:
        pass


async def _bench_adapter(requests: int) -> float:
    loop = asyncio.get_running_loop()
    conn = BrokerConnection("bench", 1, 1, client_id="bench", max_in_flight=IN_FLIGHT)
    conn._loop = loop
    conn._writer = _StubWriter()  # type: ignore[assignment]
    _negotiate(conn._protocol)
    reader = asyncio.StreamReader()
    conn._reader_task = loop.create_task(conn._read_loop(reader))
    answers = _answers(1, requests)
    rounds = requests // IN_FLIGHT
    answered = 0
    waiter: asyncio.Future[None] = loop.create_future()

    def on_response(response: ProduceResponse | None, error: KafkaError | None) -> None:
        nonlocal answered
        assert error is None, error
        answered += 1
        if answered % IN_FLIGHT == 0:
            waiter.set_result(None)

    started = time.perf_counter()
    for r in range(rounds):
        waiter = loop.create_future()
        for _ in range(IN_FLIGHT):
            conn.send_produce(TOPIC_DATA, acks=1, timeout_ms=5000, on_response=on_response)
        reader.feed_data(b"".join(answers[r * IN_FLIGHT : (r + 1) * IN_FLIGHT]))
        await waiter
    elapsed = time.perf_counter() - started
    await conn.close()
    return elapsed / (rounds * IN_FLIGHT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    codec = min(bench_codec(args.requests) for _ in range(args.repeat))
    machine = min(bench_state_machine(args.requests) for _ in range(args.repeat))
    adapter = min(asyncio.run(_bench_adapter(args.requests)) for _ in range(args.repeat))
    print(f"codec:         {codec * 1e6:.2f} µs per Produce request + response (encode, decode)")
    print(f"state machine: {machine * 1e6:.2f} µs per Produce request + response")
    print(f"adapter:       {adapter * 1e6:.2f} µs per Produce request + response (send_produce, reader, callback)")


if __name__ == "__main__":
    main()
