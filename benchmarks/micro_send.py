"""Micro-benchmark of ``send()``'s own cost, in µs per record: the path from the call to the append.

A producer is started against librdkafka's mock cluster, then ``send()`` (and
``send_many()``) queue records in a loop that never suspends: the sender task gets
no turn while the loop runs, so the time measured is the caller's side only
(fast-path checks, partitioning, append to the open batch, a new batch per
``batch.size``), not the network. Afterwards the records are flushed and every
delivery future is checked, so a fast path that lost records would fail here.

Cases: keyed (murmur2), keyless (sticky partition), ``send_many`` keyed and keyless. Each
figure is the best of ``--repeat`` runs (the least disturbed by other processes).

    python -m benchmarks.micro_send [--records N] [--repeat R] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import pstats
import time
from collections.abc import Awaitable, Callable

from aioproducer import FutureRecordMetadata, Producer
from aioproducer.testing import MockCluster

TOPIC = "bench"
VALUE = b"v" * 100


async def _keyed(producer: Producer, keys: list[bytes]) -> list[FutureRecordMetadata]:
    send = producer.send
    return [await send(TOPIC, VALUE, key) for key in keys]


async def _keyless(producer: Producer, keys: list[bytes]) -> list[FutureRecordMetadata]:
    send = producer.send
    return [await send(TOPIC, VALUE) for _ in keys]


async def _many(producer: Producer, keys: list[bytes]) -> list[FutureRecordMetadata]:
    return list(await producer.send_many(TOPIC, [VALUE] * len(keys), keys=keys))


async def _many_keyless(producer: Producer, keys: list[bytes]) -> list[FutureRecordMetadata]:
    return list(await producer.send_many(TOPIC, [VALUE] * len(keys)))


CASES: dict[str, Callable[[Producer, list[bytes]], Awaitable[list[FutureRecordMetadata]]]] = {
    "send keyed": _keyed,
    "send keyless": _keyless,
    "send_many keyed": _many,
    "send_many keyless": _many_keyless,
}


async def _run_once(bootstrap: str, case: str, records: int, profile: cProfile.Profile | None) -> float:
    keys = [b"key-%d" % i for i in range(records)]
    async with Producer(bootstrap_servers=bootstrap, linger_ms=1000, buffer_memory=256 << 20) as producer:
        await producer.partitions_for(TOPIC)  # metadata first: the loop measures the fast path
        await producer.send(TOPIC, VALUE, b"warm-up")
        if profile is not None:
            profile.enable()
        started = time.perf_counter()
        futures = await CASES[case](producer, keys)
        elapsed = time.perf_counter() - started
        if profile is not None:
            profile.disable()
        await producer.flush()
        done = await asyncio.gather(*futures)
        if len(done) != records:
            raise SystemExit(f"{case}: {len(done)} of {records} records acknowledged")
    return elapsed / records * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="cProfile the keyed send() case once")
    args = parser.parse_args()
    with MockCluster(brokers=3, topics={TOPIC: 6}) as cluster:
        if args.profile:
            profile = cProfile.Profile()
            asyncio.run(_run_once(cluster.bootstrap_servers, "send keyed", args.records, profile))
            pstats.Stats(profile).sort_stats("tottime").print_stats(12)
            return
        for case in CASES:
            best = min(asyncio.run(_run_once(cluster.bootstrap_servers, case, args.records, None)) for _ in range(args.repeat))
            print(f"{case:<18} {best:6.3f} µs/record")


if __name__ == "__main__":
    main()
