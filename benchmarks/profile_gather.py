"""What waiting on record futures costs: ``gather()`` straight after the sends, ``flush()`` first, or nobody waiting.

One producer against librdkafka's mock cluster (in this process; ``--brokers``, 6 partitions),
200,000 keyed 100-byte records per run (``--records``, ``--value-size``), ``acks=1``,
``linger.ms=5``, ``batch.size`` 16384 unless ``--batch-size``, as users write it:
``futures = [await producer.send(...) ...]`` and then one of

- ``unobserved``: ``await producer.flush()``; nobody waits on the futures (the floor);
- ``flush+gather``: ``await producer.flush()``, then ``await asyncio.gather(*futures)``;
- ``gather``: ``await asyncio.gather(*futures)`` straight away (what most users write).

Every run checks afterwards that every future holds an offset. Printed: records/s and
µs per record for the whole run and for the wait after the sends, the median of
``--repeat`` runs per mode, the modes interleaved. ``--profile MODE`` runs one more of
MODE under cProfile and prints the top functions by own time.

    python -m benchmarks.profile_gather [--records N] [--value-size B] [--batch-size B] [--brokers N]
        [--repeat R] [--profile gather]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import statistics
import time

from aioproducer import FutureRecordMetadata, Producer, RecordMetadata
from aioproducer.testing import MockCluster

TOPIC = "bench"
MODES = ("unobserved", "flush+gather", "gather")


async def one_run(
    bootstrap: str, records: int, mode: str, value: bytes, batch_size: int = 16384
) -> tuple[float, float]:
    """(seconds for the whole run, seconds for the wait after the sends); checks every record."""
    keys = [b"%08d" % (i & 4095) for i in range(records)]
    async with Producer(bootstrap_servers=bootstrap, acks="1", linger_ms=5, batch_size=batch_size) as producer:
        await (await producer.send(TOPIC, b"warm", b"k"))
        send = producer.send
        t0 = time.perf_counter()
        futures: list[FutureRecordMetadata] = [await send(TOPIC, value, key) for key in keys]
        t1 = time.perf_counter()
        if mode != "gather":
            await producer.flush()
        if mode != "unobserved":
            results = await asyncio.gather(*futures)
            assert all(type(r) is RecordMetadata and r.offset >= 0 for r in results)
        t2 = time.perf_counter()
    assert all(f.result().offset >= 0 for f in futures), "a record was not acknowledged"
    return t2 - t0, t2 - t1


async def main_async(
    records: int, repeat: int, profile: str | None, value_size: int, batch_size: int, brokers: int
) -> None:
    value = b"v" * value_size
    with MockCluster(brokers=brokers, topics={TOPIC: 6}) as cluster:
        timings: dict[str, list[tuple[float, float]]] = {m: [] for m in MODES}
        for r in range(repeat):
            for mode in MODES[r % 3:] + MODES[: r % 3]:  # rotate, so no mode always runs first
                timings[mode].append(await one_run(cluster.bootstrap_servers, records, mode, value, batch_size))
        print(f"{records:,} keyed {value_size} B records, acks=1, linger.ms=5, batch.size={batch_size}, "
              f"mock cluster of {brokers}; median of {repeat}")
        print(f"{'mode':14s} {'records/s':>10s} {'µs/rec':>7s} {'wait µs/rec':>12s}")
        for mode in MODES:
            total = statistics.median(t for t, _ in timings[mode])
            wait = statistics.median(w for _, w in timings[mode])
            print(f"{mode:14s} {records / total:10,.0f} {total / records * 1e6:7.2f} {wait / records * 1e6:12.2f}")
        if profile:
            profiler = cProfile.Profile()
            profiler.enable()
            await one_run(cluster.bootstrap_servers, records, profile, value, batch_size)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", choices=MODES, default=None)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--batch-size", type=int, default=16384, help="batch.size (default: Java's, 16384)")
    parser.add_argument("--brokers", type=int, default=1, help="mock brokers (default 1)")
    args = parser.parse_args()
    asyncio.run(main_async(args.records, args.repeat, args.profile, args.value_size, args.batch_size, args.brokers))


if __name__ == "__main__":
    main()
