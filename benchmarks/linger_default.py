"""Which ``linger.ms`` default: 0 (Java 3.9) or 5 (Java 4.0, KIP-1030)? Measured, aioproducer alone.

``python -m benchmarks.linger_default [--broker mock|kafka1|both] [--repeat 3]``; the table goes to
stdout and ``benchmarks/results/linger-default/results.md``.

Four shapes of traffic, each run with ``linger.ms`` 0 and 5 in alternating order, every repeat in a
fresh process (:func:`_child`), 100 B keyed records, ``acks=all``, idempotence on (the defaults):

- **one waiter**: one coroutine awaiting each record's acknowledgement before the next
  (``send_and_wait``), the request/response service with light traffic. The rule that an awaited
  batch leaves before its linger when its leader has no request in flight should make 5 cost nothing.
- **64 waiters**: 64 coroutines doing the same at once: records/s and each record's latency.
- **paced 2k/s, callbacks**: records offered at 2,000/s with an ``on_delivery`` callback and nobody
  awaiting: the case where ``linger.ms`` is spent in full (a batch waits for more records).
- **flood**: 200,000 records ``send()`` as fast as they go, then ``flush()``: records/s and records
  per request (what batching buys).

Latency is from just before ``send()`` to the acknowledgement (the future's done time or the
callback), per record; p50 and p99 over every record of the run. The report prints the median of
the repeats. The machine's load is printed beside: on a shared machine the numbers move.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aioproducer import Producer, RecordMetadata

SHAPES = ("one waiter", "64 waiters", "paced 2k/s, callbacks", "flood")
VALUE = b"v" * 100
RESULTS = Path(__file__).resolve().parent / "results" / "linger-default"


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def _one_waiter(producer: Producer, topic: str, n: int) -> dict[str, float]:
    latencies = []
    start = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        await producer.send_and_wait(topic, VALUE, key=b"k%d" % (i % 64))
        latencies.append(time.perf_counter() - t)
    return _summary(latencies, n, time.perf_counter() - start, producer)


async def _waiters(producer: Producer, topic: str, n: int, waiters: int = 64) -> dict[str, float]:
    latencies: list[float] = []
    per = n // waiters

    async def one(w: int) -> None:
        for i in range(per):
            t = time.perf_counter()
            await (await producer.send(topic, VALUE, key=b"k%d" % ((w * per + i) % 64)))
            latencies.append(time.perf_counter() - t)

    start = time.perf_counter()
    await asyncio.gather(*(one(w) for w in range(waiters)))
    return _summary(latencies, per * waiters, time.perf_counter() - start, producer)


async def _paced(producer: Producer, topic: str, n: int, rate: float = 2000.0) -> dict[str, float]:
    latencies: list[float] = []
    start = time.perf_counter()
    for i in range(n):
        due = start + i / rate
        now = time.perf_counter()
        if due > now:
            await asyncio.sleep(due - now)  # the offered rate, not a wait for a condition
        t = time.perf_counter()

        def done(md: RecordMetadata | None, err: BaseException | None, t: float = t) -> None:
            latencies.append(time.perf_counter() - t)

        await producer.send(topic, VALUE, key=b"k%d" % (i % 64), on_delivery=done)
    await producer.flush()
    return _summary(latencies, n, time.perf_counter() - start, producer)


async def _flood(producer: Producer, topic: str, n: int) -> dict[str, float]:
    start = time.perf_counter()
    for i in range(n):
        await producer.send(topic, VALUE, key=b"k%d" % (i % 64))
    await producer.flush()
    return _summary([], n, time.perf_counter() - start, producer)


def _summary(latencies: list[float], n: int, elapsed: float, producer: Producer) -> dict[str, float]:
    metrics = producer.metrics()
    return {
        "records_per_s": n / elapsed,
        "p50_ms": _pct(latencies, 0.50) * 1000,
        "p99_ms": _pct(latencies, 0.99) * 1000,
        "records_per_request": metrics["record-send-total"] / max(1.0, metrics["request-total"]),
    }


RUNNERS = {"one waiter": (_one_waiter, 2000), "64 waiters": (_waiters, 64_000),
           "paced 2k/s, callbacks": (_paced, 6000), "flood": (_flood, 200_000)}


async def _measure(bootstrap: str, shape: str, linger: int, topic: str) -> dict[str, float]:
    runner, n = RUNNERS[shape]
    async with Producer(bootstrap_servers=bootstrap, linger_ms=linger) as producer:
        for p in range(6):  # warm-up: connections, producer id, metadata, every partition's leader
            await producer.send_and_wait(topic, b"warm", partition=p)
        before = producer.metrics()
        result = await runner(producer, topic, n)
        after = producer.metrics()
        sent = after["record-send-total"] - before["record-send-total"]
        requests = after["request-total"] - before["request-total"]
        result["records_per_request"] = sent / max(1.0, requests)
        return result


def _child(bootstrap: str, shape: str, linger: int, topic: str) -> dict[str, float]:
    code = ("import asyncio, json, sys; from benchmarks.linger_default import _measure; "
            "print(json.dumps(asyncio.run(_measure(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))))")
    done = subprocess.run([sys.executable, "-c", code, bootstrap, shape, str(linger), topic], capture_output=True,
                          text=True, check=True, cwd=Path(__file__).resolve().parents[1], timeout=600)
    result: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return result


def _run(broker: str, bootstrap: str, repeat: int, make_topic: Any, shapes: list[str]) -> list[dict[str, Any]]:
    rows = []
    for shape in shapes:
        runs: dict[int, list[dict[str, float]]] = {0: [], 5: []}
        for r in range(repeat):
            for linger in ((0, 5) if r % 2 == 0 else (5, 0)):
                runs[linger].append(_child(bootstrap, shape, linger, make_topic()))
                print(f"{broker} {shape} linger.ms={linger} repeat {r + 1}: {runs[linger][-1]}", file=sys.stderr, flush=True)
        for linger in (0, 5):
            medians = {k: statistics.median(run[k] for run in runs[linger]) for k in runs[linger][0]}
            rows.append({"broker": broker, "shape": shape, "linger_ms": linger, **medians})
    return rows


def _render(rows: list[dict[str, Any]], repeat: int, load: tuple[float, float]) -> str:
    lines = [
        "# linger.ms 0 against 5 (KIP-1030), aioproducer alone",
        "",
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, "
        f"{repeat} repeats (medians), 100 B keyed records, acks=all, idempotence on; 1-minute load average "
        f"{load[0]:.1f} before, {load[1]:.1f} after. `python -m benchmarks.linger_default`.",
        "",
        "| broker | traffic | linger.ms | records/s | p50 ms | p99 ms | records/request |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lat = ("–", "–") if row["shape"] == "flood" else (f"{row['p50_ms']:.2f}", f"{row['p99_ms']:.2f}")
        lines.append(f"| {row['broker']} | {row['shape']} | {row['linger_ms']} | {row['records_per_s']:,.0f} | "
                     f"{lat[0]} | {lat[1]} | {row['records_per_request']:.1f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--broker", choices=["mock", "kafka1", "both"], default="both")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated subset of: " + ", ".join(SHAPES))
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"the report's folder (default {RESULTS})")
    args = parser.parse_args()
    shapes = [shape for shape in args.shapes.split(",") if shape]
    unknown = set(shapes) - set(SHAPES)
    if unknown:
        parser.error(f"unknown shapes: {sorted(unknown)}")
    load_before = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    counter = iter(range(10**6))
    if args.broker in ("mock", "both"):
        from aioproducer.testing import MockCluster

        with MockCluster(brokers=3) as mock:
            mock_topics = [f"linger-{next(counter)}" for _ in range(len(shapes) * 2 * args.repeat)]
            for name in mock_topics:
                mock.create_topic(name, partitions=6)
            topics = iter(mock_topics)
            rows += _run("mock (3 brokers)", mock.bootstrap_servers, args.repeat, lambda: next(topics), shapes)
    if args.broker in ("kafka1", "both"):
        from aioproducer.testing import KafkaCluster
        from aioproducer.testing.kafka import SERVER_JVM_OPTIONS

        with KafkaCluster(brokers=1, jvm_options=SERVER_JVM_OPTIONS) as kafka:
            def topic() -> str:
                name = f"linger-{next(counter)}"
                kafka.create_topic(name, partitions=6)
                return name

            rows += _run("Kafka 1 node", kafka.bootstrap_servers, args.repeat, topic, shapes)
    report = _render(rows, args.repeat, (load_before, os.getloadavg()[0]))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(report)
    (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    print(report)


if __name__ == "__main__":
    main()
