"""What completing a Produce response costs per batch: the native completion against the per-batch Python one.

Both paths are in the tree: the sender completes a response's written batches in one native call
(``RecordQueues.complete``) when the engine takes the counters summed (``on_acknowledged``), and
batch by batch in Python when it wants each batch (``on_complete`` alone: a producer with
interceptors). Each round here makes ``--partitions`` batches of one ``--value-size`` record each
(a shared ``on_delivery``, or a future awaited by nobody with ``--futures``), drains them into
one request, builds it, and times only ``Sender._handle_response`` with an answer of offsets for
every partition, with what the engine does with the counters (``ProducerMetrics``, the records
sent). Printed: process time per batch, the best of ``--repeat`` runs of ``--responses``
responses per path, the paths interleaved.

    python -m benchmarks.completion_cost [--partitions N] [--value-size B] [--responses N] [--repeat R] [--futures]
        [--idempotent]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from aioproducer.internals.accumulator import AccumulatorConfig, RecordAccumulator
from aioproducer.internals.batch import ProducerBatch, RecordMetadata
from aioproducer.internals.buffer_pool import BufferPool
from aioproducer.internals.metrics import ProducerMetrics
from aioproducer.internals.sender import Sender
from aioproducer.internals.transaction_manager import TransactionManager
from aioproducer.lifecycle import Lifecycle, State
from aioproducer.partitioner import TopicPartitions
from aioproducer.protocol import messages, produce
from aioproducer.protocol.produce import PartitionResponse, ProduceResponse
from aioproducer._native import produce_topic_data

if TYPE_CHECKING:  # not at run time: the script also runs against trees from before the name
    from aioproducer.protocol.produce import AnyProduceResponse

TOPIC = "bench"


class _Leaders:
    """Every partition led by node 0."""

    def leader_for(self, topic: str, partition: int) -> int | None:
        return 0

    def partitions_snapshot(self, topic: str) -> TopicPartitions | None:
        return None


class _Config:
    acks = 1
    retries = 5
    request_timeout_ms = 30_000
    delivery_timeout_ms = 120_000
    max_request_size = 1 << 20
    metadata_max_age_ms = 300_000
    retry_backoff_ms = 100


class _Engine:
    """What the engine does with a completion: the metrics and the records-sent count, either way."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.metrics = ProducerMetrics()
        self.records_sent = 0
        self.clock = clock

    def on_complete(self, batch: ProducerBatch) -> None:
        builder = batch.builder
        self.metrics.record_completed(
            batch.topic, batch.record_count, batch.error is None, self.clock(), batch.created_ms,
            builder.max_timestamp - builder.base_timestamp,
        )
        if batch.error is None:
            self.records_sent += batch.record_count

    def on_acknowledged(self, records: int) -> None:
        self.records_sent += records


def _as_connection_reads_it(response: ProduceResponse) -> AnyProduceResponse:
    """The answer in the form the connection hands the sender (``read_produce_response`` of the generic
    codec's bytes), made before the clock starts; the named tuples themselves in a tree from before it."""
    read = getattr(produce, "read_produce_response", None)
    if read is None:
        return response
    body = {"responses": [{"name": TOPIC, "partition_responses": [
        {"index": p.partition, "error_code": p.error_code, "base_offset": p.base_offset} for p in response.partitions
    ]}]}
    return read(9, messages.encode_response(messages.PRODUCE, 9, response.correlation_id, body)[4:])  # type: ignore[no-any-return]


def one_run(native: bool, partitions: int, value: bytes, responses: int, futures: bool, idempotent: bool = False) -> float:
    """Process seconds spent in ``_handle_response`` over ``responses`` responses."""
    now = [1_000.0]

    def clock() -> float:
        return now[0]

    lifecycle = Lifecycle(State.RUNNING)
    tm = None
    if idempotent:  # the batches numbered at their drain, acknowledged to the bookkeeping at completion
        tm = TransactionManager(None, 60_000)
        tm.set_producer_id_and_epoch(1, 0)
    acc = RecordAccumulator(
        AccumulatorConfig(batch_size=16384, linger_ms=0, retry_backoff_ms=100, delivery_timeout_ms=120_000),
        BufferPool(64 << 20, 16384), tm, lambda: None, clock=clock, lifecycle=lifecycle,
    )
    engine = _Engine(clock)
    sender = Sender(
        client=None,  # type: ignore[arg-type]  # a written batch's completion never asks the client
        accumulator=acc, transaction_manager=tm, config=_Config(), clock=clock, on_fatal=lifecycle.refuse,
        on_complete=engine.on_complete, on_acknowledged=engine.on_acknowledged if native else None,
        metrics=engine.metrics,
    )
    delivered = 0

    def on_delivery(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        nonlocal delivered
        delivered += 1

    leaders = _Leaders()
    spent = 0.0
    for r in range(responses):
        for p in range(partitions):
            acc.try_append(TOPIC, p, 1, b"key", value, None, None if futures else on_delivery)
        now[0] += 1.0
        (batches,) = acc.drain(leaders, {0}, 1 << 20, now[0]).values()
        batches = produce_topic_data(batches, now[0])[0]
        answer = _as_connection_reads_it(ProduceResponse(
            r, [PartitionResponse(TOPIC, b.partition, 0, 10 * r, -1, -1, (), None, -1, -1) for b in batches], 0, []
        ))
        now[0] += 1.0
        started = time.process_time()
        sender._handle_response(answer, batches, now[0])
        spent += time.process_time() - started
    expected = responses * partitions
    assert engine.records_sent == expected and (futures or delivered == expected), (engine.records_sent, delivered)
    assert acc.pool.available_memory == acc.pool.total
    return spent


async def measure(args: argparse.Namespace) -> dict[str, float]:
    """The best time of each path, interleaved (in a running loop: the batches are made on it)."""
    value = b"v" * args.value_size
    best: dict[str, float] = {"python": float("inf"), "native": float("inf")}
    for r in range(args.repeat):
        for name in (("python", "native") if r % 2 == 0 else ("native", "python")):
            took = one_run(name == "native", args.partitions, value, args.responses, args.futures, args.idempotent)
            best[name] = min(best[name], took)
            await asyncio.sleep(0)  # the scheduled done-callbacks run
    return best


def batch_cost_parser(doc: str, rounds: str, idempotent_help: str) -> argparse.ArgumentParser:
    """The options every per-batch cost benchmark takes (``rounds``: what one round makes, as a flag)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--value-size", type=int, default=10_000)
    parser.add_argument(f"--{rounds}", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--idempotent", action="store_true", help=idempotent_help)
    return parser


def main() -> None:
    parser = batch_cost_parser(__doc__, "responses", "idempotence on: numbered batches, acknowledged to the bookkeeping")
    parser.add_argument("--futures", action="store_true", help="records with a future nobody awaits, no on_delivery")
    args = parser.parse_args()
    best = asyncio.run(measure(args))
    batches = args.responses * args.partitions
    print(f"{args.partitions} batches of one {args.value_size} B record a response, "
          f"{'futures' if args.futures else 'one shared on_delivery'}{', idempotent' if args.idempotent else ''}; best of {args.repeat} × {args.responses} responses")
    for name, took in best.items():
        print(f"{name:7s} {took / batches * 1e6:6.2f} µs per batch")


if __name__ == "__main__":
    main()
