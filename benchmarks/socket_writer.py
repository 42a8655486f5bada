"""What writing requests on the connection's writer thread saves the event loop's thread, by request size.

One ``BrokerConnection`` to one broker of librdkafka's mock cluster (in this process), requests
of one record batch each sent with ``send_produce`` (the sender's path), ``max_in_flight`` 5,
``acks=-1``: the loop thread's CPU time per request (``time.thread_time``) and the wall time,
with every frame written through the transport (``WRITER_THREAD_MIN_BYTES`` out of reach) and
with the writer thread taking frames from the size given. Sizes and modes interleaved, the
median of ``--repeat`` runs each. Then the same at the producer's level: ``--records`` keyed
records of ``--value-size`` bytes with one shared ``on_delivery`` and ``flush()``, for each of
``--thresholds`` (``never``: transport only) interleaved: the loop thread's CPU per record, the
process's CPU per record (the writer thread's counts there, and the mock broker's: compare the
columns), and records per second. ``--requests 0`` skips the request-level part.

    python -m benchmarks.socket_writer [--requests N] [--repeat R] [--records N] [--value-size B]
        [--thresholds never,65536,32768]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager

from aioproducer import Producer
from aioproducer.errors import KafkaError
from aioproducer.network import connection as connection_module
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol.produce import AnyProduceResponse
from aioproducer.protocol.records import RecordBatchBuilder
from aioproducer.testing import MockCluster

SIZES = (4096, 16384, 65536, 262144)
NEVER = 1 << 62


@contextmanager
def threshold(size: int) -> Iterator[None]:
    previous = connection_module.WRITER_THREAD_MIN_BYTES
    connection_module.WRITER_THREAD_MIN_BYTES = size
    try:
        yield
    finally:
        connection_module.WRITER_THREAD_MIN_BYTES = previous


async def requests_run(bootstrap: str, size: int, count: int) -> tuple[float, float]:
    """(loop CPU µs per request, wall µs per request) for ``count`` requests of about ``size`` bytes."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    conn = BrokerConnection(host, int(port), 1, client_id="bench", max_in_flight=5)
    await conn.connect()
    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), b"k", b"x" * size)
    batch = builder.build()
    done = asyncio.Event()
    answered = sent = 0

    def on_response(response: AnyProduceResponse | None, error: KafkaError | None) -> None:
        nonlocal answered
        assert error is None, error
        answered += 1
        if answered == count:
            done.set()
        elif sent < count and conn.can_send_more():
            send()

    def send() -> None:
        nonlocal sent
        sent += 1
        conn.send_produce([("bench", [(0, batch)])], acks=-1, timeout_ms=30000, on_response=on_response)

    cpu, wall = time.thread_time(), time.perf_counter()
    while sent < 5:
        send()
    await done.wait()
    cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
    await conn.close()
    return cpu / count * 1e6, wall / count * 1e6


async def records_run(bootstrap: str, records: int, value_size: int) -> tuple[float, float, float]:
    """(loop CPU µs, process CPU µs per record, records/s): keyed records, one shared on_delivery, flush()."""
    value = b"x" * value_size
    delivered = 0

    def on_delivery(metadata: object, error: BaseException | None) -> None:
        nonlocal delivered
        delivered += error is None

    async with Producer(bootstrap_servers=bootstrap, acks="1", linger_ms=5) as producer:
        await producer.send_and_wait("bench", b"warm", b"k")
        cpu, process, wall = time.thread_time(), time.process_time(), time.perf_counter()
        for i in range(records):
            await producer.send("bench", value, b"%08d" % (i & 4095), on_delivery=on_delivery)
        await producer.flush()
        cpu, process = time.thread_time() - cpu, time.process_time() - process
        wall = time.perf_counter() - wall
    assert delivered == records
    return cpu / records * 1e6, process / records * 1e6, records / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--value-size", type=int, default=10000)
    parser.add_argument("--thresholds", default="never,65536,32768", help="comma-separated sizes, or never")
    args = parser.parse_args()
    limits = [NEVER if t == "never" else int(t) for t in args.thresholds.split(",")]
    with MockCluster(brokers=1, topics={"bench": 6}) as mc:
        print(f"requests of one batch, {args.requests} per run, median of {args.repeat}: loop CPU µs / wall µs per request")
        for size in SIZES if args.requests else ():
            runs: dict[str, list[tuple[float, float]]] = {"transport": [], "thread": []}
            for _ in range(args.repeat):
                for mode, limit in (("transport", NEVER), ("thread", 0)):
                    with threshold(limit):
                        runs[mode].append(asyncio.run(requests_run(mc.bootstrap_servers, size, args.requests)))
            cells = "  ".join(
                f"{mode} {statistics.median(c for c, _ in r):6.1f} / {statistics.median(w for _, w in r):6.1f}"
                for mode, r in runs.items()
            )
            print(f"{size:>7} B  {cells}")
        print(f"{args.records} keyed records of {args.value_size} B, callbacks, flush(), thresholds interleaved, "
              f"median of {args.repeat}: loop CPU µs/record, process CPU µs/record, records/s")
        per_limit: dict[int, list[tuple[float, float, float]]] = {limit: [] for limit in limits}
        for _ in range(args.repeat):
            for limit in limits:
                with threshold(limit):
                    per_limit[limit].append(asyncio.run(records_run(mc.bootstrap_servers, args.records, args.value_size)))
        for limit, values in per_limit.items():
            name = "never" if limit == NEVER else str(limit)
            loop_cpu, process_cpu, rate = (statistics.median(v[i] for v in values) for i in range(3))
            print(f"  {name:>7}  loop {loop_cpu:6.1f}  process {process_cpu:6.1f}  {rate:8.0f} rec/s  "
                  f"(loop {', '.join(f'{v[0]:.1f}' for v in values)})")

if __name__ == "__main__":
    main()
