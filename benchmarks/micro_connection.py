"""Micro-benchmark of the connection's Produce hot path, without a broker or a socket.

Three measurements, best of ``--repeat`` runs each (the minimum is the least
disturbed by other processes on the machine):

* ``codec``: the hand-written Produce encoder and decoder alone, the floor;
* ``state machine``: :class:`ClientConnection` alone, no event loop:
  ``send_produce`` then ``receive_data`` of its answer, five requests in flight;
* ``adapter``: :meth:`BrokerConnection.send_produce` and the reader task feeding
  the answers to the state machine and calling back, on a real event loop; the
  streams come from a scripted peer (``open_streams=``) that answers ApiVersions
  and takes the Produce answers the benchmark feeds it: the connection's work, not the kernel's.

Both use Produce v9 with one 100-byte batch; most of the time is the codec
(encode and decode), the rest is the connection's bookkeeping.

    python -m benchmarks.micro_connection [--requests N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Iterable
from typing import Any, cast

from aioproducer.errors import KafkaError
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import messages
from aioproducer.protocol.connection_state import ClientConnection
from aioproducer.protocol.produce import AnyProduceResponse, decode_produce_response, encode_produce_request

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


class _ScriptedPeer:
    """The broker's side of the streams: answers the ApiVersions request, drops every other frame.

    Stands in for the socket so that the measurement is the connection's own work, not the
    kernel's; the Produce answers are fed to ``reader`` by the benchmark, a round at a time.
    """

    def __init__(self) -> None:
        self.reader = asyncio.StreamReader()
        self._negotiated = False

    async def open(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return self.reader, cast(asyncio.StreamWriter, self)

    def writelines(self, chunks: Iterable[bytes]) -> None:
        if self._negotiated:
            return
        self._negotiated = True
        frame = b"".join(chunks)
        version = int.from_bytes(frame[6:8], "big")
        correlation_id = int.from_bytes(frame[8:12], "big")
        self.reader.feed_data(messages.encode_response(messages.API_VERSIONS, version, correlation_id, _API_VERSIONS))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default  # no socket: buffer sizes are left alone

    def get_protocol(self) -> None:
        return None  # not asyncio's streams: the connection keeps its reader task, which reads ``reader``

    @property
    def transport(self) -> _ScriptedPeer:
        return self

    def abort(self) -> None:
        pass

    def close(self) -> None:
        self.reader.feed_eof()

    async def drain(self) -> None:
        pass

    async def wait_closed(self) -> None:
        pass


async def _bench_adapter(requests: int) -> float:
    loop = asyncio.get_running_loop()
    peer = _ScriptedPeer()
    conn = BrokerConnection("bench", 1, 1, client_id="bench", max_in_flight=IN_FLIGHT, open_streams=peer.open)
    await conn.connect()  # ApiVersions (correlation id 0) answered by the peer
    reader = peer.reader
    answers = _answers(1, requests)
    rounds = requests // IN_FLIGHT
    answered = 0
    waiter: asyncio.Future[None] = loop.create_future()

    def on_response(response: AnyProduceResponse | None, error: KafkaError | None) -> None:
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
