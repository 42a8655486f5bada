"""How long the producer keeps the event loop from running anything else: ``python -m benchmarks.loop_stall``.

Why: everything aioproducer does runs on the application's event loop, so a
step that takes 40 ms (gzip of a 1 MB batch) is 40 ms during which no other
coroutine of the application runs. Throughput alone does not show it.

How: the "large" scenario (10 KB keyed records, acks=1, linger.ms=5) against
a librdkafka mock cluster in a process of its own, once per codec. A ticker
task sleeps 1 ms in a loop and records how late each wake-up is: its largest
lateness is the longest stall. The driver yields to the loop after every
``--yield-every`` sends, as an application whose records come from I/O does
(in bursts), so the stalls measured are mostly the producer's; a burst of
sends itself costs well under a millisecond.

Two measures of each gap: wall-clock lateness (what an application sees,
including time the OS gave the CPU to other processes: noisy on a shared
machine) and the event-loop thread's CPU time between the two wake-ups
(``time.thread_time``: the work the loop did meanwhile, whatever else runs on
the machine; compression in another thread does not count, as it does not
hold the loop). Reported per codec: records/s,
the longest stall, the 99th percentile of lateness, and how many wake-ups
were more than 10 ms late.

A measurement, not a test: the numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import asdict, dataclass
from typing import Any

from benchmarks.cluster import ClusterProcess
from benchmarks.scenarios import make_keys, make_values

__all__ = ["StallResult", "measure", "main"]

TOPIC = "stall"
TICK_S = 0.001


@dataclass(frozen=True)
class StallResult:
    codec: str
    batch_size: int
    yield_every: int
    records: int
    records_per_s: float
    max_stall_ms: float
    p99_stall_ms: float
    stalls_over_10ms: int
    max_busy_cpu_ms: float
    p99_busy_cpu_ms: float


class Ticker:
    """Sleeps ``TICK_S`` in a loop; each wake-up's lateness is how long the loop was busy elsewhere."""

    def __init__(self) -> None:
        self.lateness: list[float] = []
        self.busy_cpu: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            asked, cpu = loop.time(), time.thread_time()
            await asyncio.sleep(TICK_S)
            self.lateness.append(loop.time() - asked - TICK_S)
            self.busy_cpu.append(time.thread_time() - cpu)


async def _drive(bootstrap: str, codec: str, batch_size: int, records: int, yield_every: int) -> StallResult:
    """One run: send ``records`` 10 KB records with ``codec`` while the ticker watches the loop."""
    from aioproducer import Producer

    values, keys = make_values(10_240), make_keys()
    ticker = Ticker()
    async with Producer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=5, compression_type=codec, batch_size=batch_size
    ) as producer:
        await asyncio.gather(*[await producer.send(TOPIC, b"warm-up", partition=p) for p in range(6)])
        ticker.start()
        t0 = time.perf_counter()
        futures = []
        for i in range(records):
            futures.append(await producer.send(TOPIC, values[i & 255], key=keys[i & 4095]))
            if i % yield_every == 0:
                await asyncio.sleep(0)  # an application's records come from I/O: it yields between bursts
        await producer.flush()
        await asyncio.gather(*futures)
        elapsed = time.perf_counter() - t0
        await ticker.stop()
    late, busy = sorted(ticker.lateness), sorted(ticker.busy_cpu)
    return StallResult(
        codec=codec,
        batch_size=batch_size,
        yield_every=yield_every,
        records=records,
        records_per_s=records / elapsed,
        max_stall_ms=late[-1] * 1000,
        p99_stall_ms=late[int(len(late) * 0.99)] * 1000,
        stalls_over_10ms=sum(1 for x in late if x > 0.010),
        max_busy_cpu_ms=busy[-1] * 1000,
        p99_busy_cpu_ms=busy[int(len(busy) * 0.99)] * 1000,
    )


def measure(codecs: list[str], batch_size: int, records: int, repeat: int, yield_every: int) -> list[StallResult]:
    """Each codec ``repeat`` times, each run on a fresh mock cluster (so no run inherits another's logs)."""
    results: list[StallResult] = []
    for _ in range(repeat):
        for codec in codecs:
            with ClusterProcess([TOPIC], partitions=6, brokers=3, kind="mock") as cluster:
                result = asyncio.run(_drive(cluster.bootstrap_servers, codec, batch_size, records, yield_every))
            print(_row(result), flush=True)
            results.append(result)
    return results


def _row(r: StallResult) -> str:
    return (
        f"{r.codec:>5} batch.size={r.batch_size:>8} yield/{r.yield_every:<3} {r.records_per_s:>8,.0f} rec/s  "
        f"max stall {r.max_stall_ms:6.1f} ms  p99 {r.p99_stall_ms:5.1f} ms  >10 ms: {r.stalls_over_10ms:<3}  "
        f"loop CPU between ticks: max {r.max_busy_cpu_ms:5.1f} ms  p99 {r.p99_busy_cpu_ms:4.1f} ms"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--codecs", default="none,gzip,lz4,zstd", help="comma-separated (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=16_384, help="batch.size (default: %(default)s)")
    parser.add_argument("--records", type=int, default=4_000, help="10 KB records per run (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per codec (default: %(default)s)")
    parser.add_argument("--yield-every", type=int, default=32, help="sends between yields (default: %(default)s)")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    results = measure(args.codecs.split(","), args.batch_size, args.records, args.repeat, args.yield_every)
    if args.json:
        payload: list[dict[str, Any]] = [asdict(r) for r in results]
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=2)


if __name__ == "__main__":
    main()
