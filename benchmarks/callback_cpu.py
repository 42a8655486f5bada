"""The event loop thread's CPU per record with one shared ``on_delivery`` (issue #42's per-batch measure).

One producer against librdkafka's mock cluster in this process (``--brokers``, default 1, and 6
partitions), ``--records`` keyed records of ``--value-size`` bytes (default 20,000 × 10 KB: each
record a batch of its own at Java's ``batch.size``, ``--batch-size``), ``acks=1``, ``linger.ms=5``,
each sent with the same counting ``on_delivery``, then ``flush()``. Measured:
``time.thread_time()`` of the loop's thread over the sends and the flush, per record; the median
of ``--repeat`` runs. Every record must be reported delivered with an offset, or the run fails.
``--profile`` runs one more under cProfile.

The CPU of a batch and its request is this run's figure less the record's own: the same records
at ``--batch-size 1048576`` (a hundred 10 KB records a batch) cost the record's own plus a
hundredth of the batch's (``benchmarks/README.md``, stop 67).

    python -m benchmarks.callback_cpu [--records N] [--value-size B] [--batch-size B] [--brokers N]
                                      [--repeat R] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time

from aioproducer import Producer, RecordMetadata
from aioproducer.testing import MockCluster

TOPIC = "bench"


async def one_run(bootstrap: str, records: int, value: bytes, batch_size: int) -> float:
    """CPU seconds of this thread for the sends and the flush; checks every record's report."""
    keys = [b"%08d" % (i & 4095) for i in range(records)]
    delivered = 0

    def on_delivery(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        nonlocal delivered
        if error is None and metadata is not None and metadata.offset >= 0:
            delivered += 1

    async with Producer(bootstrap_servers=bootstrap, acks="1", linger_ms=5, batch_size=batch_size) as producer:
        await (await producer.send(TOPIC, b"warm", b"k"))
        send = producer.send
        started = time.thread_time()
        for key in keys:
            await send(TOPIC, value, key, on_delivery=on_delivery)
        await producer.flush()
        took = time.thread_time() - started
    assert delivered == records, f"{records - delivered} record(s) not reported delivered"
    return took


async def main_async(records: int, value_size: int, batch_size: int, brokers: int, repeat: int,
                     profile: bool) -> None:
    value = b"v" * value_size
    with MockCluster(brokers=brokers, topics={TOPIC: 6}) as cluster:
        runs = [await one_run(cluster.bootstrap_servers, records, value, batch_size) for _ in range(repeat)]
        per_record = [t / records * 1e6 for t in runs]
        print(f"{records:,} keyed {value_size} B records, batch.size {batch_size}, {brokers} broker(s), "
              f"one shared on_delivery, flush(); loop thread CPU "
              f"µs/record: median {statistics.median(per_record):.2f} of {', '.join(f'{p:.2f}' for p in per_record)}")
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            await one_run(cluster.bootstrap_servers, records, value, batch_size)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--value-size", type=int, default=10_000)
    parser.add_argument("--batch-size", type=int, default=16_384)
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    asyncio.run(main_async(args.records, args.value_size, args.batch_size, args.brokers, args.repeat,
                           args.profile))


if __name__ == "__main__":
    main()
