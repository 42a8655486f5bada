"""What one Produce request costs the sender, the socket aside: its bytes, bookkeeping and answer.

Each round makes ``--partitions`` batches of one ``--value-size`` record each (one shared
``on_delivery``) and drains them into one request; timed is ``Sender._send_produce_request``
(the batches built, the request's statistics, the in-flight tracking, the Produce request's
encoding by the protocol's codec) into a connection that keeps the frame and writes nothing,
then the request's answer, read from its bytes as the connection reads it (``read_produce_response``;
``decode_produce_response`` in a tree from before it), through the sender's callback (offsets for
every partition: the native completion). With ``--idempotent`` the batches are numbered and acknowledged to the
bookkeeping. Printed: process time per batch, the best of ``--repeat`` runs of ``--requests``.
It runs against whatever tree is imported, so a tree before a change and after run it alike.

    python -m benchmarks.request_cost [--partitions N] [--value-size B] [--requests N] [--repeat R] [--idempotent]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from aioproducer.internals.accumulator import AccumulatorConfig, RecordAccumulator
from aioproducer.internals.batch import RecordMetadata
from aioproducer.internals.buffer_pool import BufferPool
from aioproducer.internals.metrics import ProducerMetrics
from aioproducer.internals.sender import Sender
from aioproducer.internals.transaction_manager import TransactionManager
from aioproducer.lifecycle import Lifecycle, State
from aioproducer.protocol import messages, produce
from aioproducer.protocol.produce import encode_produce_request

from benchmarks.completion_cost import TOPIC, _Config, _Engine, _Leaders, batch_cost_parser


#: The Produce version of the requests and answers (the flexible encoding, as brokers from Kafka 3 speak).
VERSION = 9


class _Connection:
    """Takes a request's frame as a connection's ``send_produce`` would, encoding it, and writes nothing."""

    def __init__(self) -> None:
        self.on_response: Any = None
        self.frame_bytes = 0

    def try_send_produce(self, topic_data: Any, on_response: Any, acks: int, timeout_ms: int,
                         transactional_id: str | None, transaction_v2: bool) -> bool:
        frame = encode_produce_request(VERSION, 1, "bench", transactional_id, acks, timeout_ms, topic_data)
        self.frame_bytes = sum(map(len, frame))
        self.on_response = on_response
        return True


class _Client:
    def __init__(self, connection: _Connection) -> None:
        self.connection = connection

    def connection_for(self, node: int) -> _Connection:
        return self.connection


def one_run(partitions: int, value: bytes, requests: int, idempotent: bool) -> float:
    """Process seconds spent sending ``requests`` requests and handling their answers."""
    now = [1_000.0]

    def clock() -> float:
        return now[0]

    lifecycle = Lifecycle(State.RUNNING)
    tm = None
    if idempotent:
        tm = TransactionManager(None, 60_000)
        tm.set_producer_id_and_epoch(1, 0)
    acc = RecordAccumulator(
        AccumulatorConfig(batch_size=16384, linger_ms=0, retry_backoff_ms=100, delivery_timeout_ms=120_000),
        BufferPool(64 << 20, 16384), tm, lambda: None, clock=clock, lifecycle=lifecycle,
    )
    engine = _Engine(clock)
    connection = _Connection()
    sender = Sender(
        client=_Client(connection),  # type: ignore[arg-type]  # only connection_for() is asked
        accumulator=acc, transaction_manager=tm, config=_Config(), clock=clock, on_fatal=lifecycle.refuse,
        on_complete=engine.on_complete, on_acknowledged=engine.on_acknowledged, metrics=engine.metrics,
    )
    delivered = 0

    def on_delivery(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        nonlocal delivered
        delivered += metadata is not None and error is None

    leaders = _Leaders()
    # The answers' bytes, made before the clock starts (the generic codec; the offsets differ per round).
    read = getattr(produce, "read_produce_response", produce.decode_produce_response)
    answers = [
        messages.encode_response(messages.PRODUCE, VERSION, r, {"responses": [{"name": TOPIC, "partition_responses": [
            {"index": p, "error_code": 0, "base_offset": 10 * r} for p in range(partitions)
        ]}]})[4:]
        for r in range(requests)
    ]
    spent = 0.0
    for r in range(requests):
        for p in range(partitions):
            acc.try_append(TOPIC, p, 1, b"key", value, None, on_delivery)
        now[0] += 1.0
        (batches,) = acc.drain(leaders, {0}, 1 << 20, now[0]).values()
        started = time.process_time()
        sender._send_produce_request(0, batches)
        now[0] += 1.0
        connection.on_response(read(VERSION, answers[r]), None)
        spent += time.process_time() - started
    expected = requests * partitions
    assert delivered == expected and engine.records_sent == expected, (delivered, engine.records_sent)
    assert acc.pool.available_memory == acc.pool.total and not sender.requests_in_flight
    return spent


async def measure(args: argparse.Namespace) -> float:
    """The best run (in a running loop: the batches are made on it)."""
    value = b"v" * args.value_size
    best = float("inf")
    for _ in range(args.repeat):
        best = min(best, one_run(args.partitions, value, args.requests, args.idempotent))
        await asyncio.sleep(0)
    return best


def main() -> None:
    args = batch_cost_parser(__doc__, "requests", "idempotence on: numbered batches").parse_args()
    best = asyncio.run(measure(args))
    print(f"{args.partitions} batches of one {args.value_size} B record a request"
          f"{', idempotent' if args.idempotent else ''}; best of {args.repeat} × {args.requests}: "
          f"{best / (args.requests * args.partitions) * 1e6:.2f} µs per batch")


if __name__ == "__main__":
    main()
