"""Keyed vs keyless partitioning: what choosing a partition costs per record in aioproducer.

``send()`` picks a partition by murmur2 of the key (keyed) or takes the sticky
partition of KIP-794 (keyless). This measures the send path both ways, 100-byte
values, 8-byte keys, ``acks=1``, ``linger.ms=5``:

- ``send µs/record``: the time of the loop of ``await producer.send(...)``
  alone, divided by the record count. ``buffer.memory`` is raised so that the
  loop never waits for memory, and since a send that does not wait never
  yields, the sender does not run inside the timed loop: this is the pure cost
  of queueing a record;
- ``records/s``: end to end, first send to last acknowledgement;
- ``murmur2 µs/call``: ``partition_for_key`` alone, for scale.

Keyed and keyless runs alternate, each with a fresh producer and topic; the
figures are medians over ``--repeat`` runs.

    PYTHONPATH=. python -m benchmarks.bench_partitioner [--records N] [--repeat R] [--bootstrap-servers BS]

Without ``--bootstrap-servers`` it starts its own mock cluster process. The
suite (``python -m benchmarks.run``) runs it in a subprocess of its own and
reports it with the other results.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import timeit
from typing import Any

from benchmarks.clients import send_loop
from benchmarks.scenarios import make_keys, make_values

__all__ = ["topics", "measure"]

perf_counter = time.perf_counter


def topics(repeat: int, tag: str = "") -> list[str]:
    """The fresh topics the runs produce to (the suite creates them up front)."""
    return [f"part{tag}-{kind}-r{r}" for r in range(repeat) for kind in ("keyed", "keyless")]


async def _one_run(bootstrap: str, topic: str, n: int, keyed: bool) -> dict[str, Any]:
    from aioproducer import Producer, RecordMetadata

    keys, values = make_keys(), make_values(100)
    km, vm = len(keys) - 1, len(values) - 1
    async with Producer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=5, compression_type="none",
        enable_idempotence=False, buffer_memory=1 << 30,
    ) as producer:
        await producer.partitions_for(topic)
        t0 = perf_counter()
        futures = await send_loop(producer.send, topic, n, keys if keyed else None, km, values, vm)
        t_sent = perf_counter()
        await producer.flush()
        results = await asyncio.gather(*futures, return_exceptions=True)
        t_done = perf_counter()
    acked = sum(1 for r in results if isinstance(r, RecordMetadata))
    return {
        "send_us_per_record": (t_sent - t0) / n * 1e6,
        "records_per_s": n / (t_done - t0),
        "acked": acked,
        "errors": n - acked,
    }


def _murmur2_us() -> float:
    from aioproducer.partitioner import partition_for_key

    keys = make_keys()
    number = 200_000
    best = min(timeit.repeat(lambda: [partition_for_key(k, 6) for k in keys], number=number // len(keys), repeat=5))
    return best / (number // len(keys) * len(keys)) * 1e6


def measure(bootstrap: str, records: int, repeat: int, tag: str = "") -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"keyed": [], "keyless": []}
    for r in range(repeat):
        order = ("keyed", "keyless") if r % 2 == 0 else ("keyless", "keyed")
        for kind in order:
            runs[kind].append(asyncio.run(_one_run(bootstrap, f"part{tag}-{kind}-r{r}", records, kind == "keyed")))
    summary: dict[str, Any] = {"records": records, "repeat": repeat, "runs": runs}
    for kind, rs in runs.items():
        summary[kind] = {
            "send_us_per_record": statistics.median(x["send_us_per_record"] for x in rs),
            "records_per_s": statistics.median(x["records_per_s"] for x in rs),
        }
    summary["murmur2_us_per_call"] = _murmur2_us()
    summary["keyed_extra_us_per_record"] = (
        summary["keyed"]["send_us_per_record"] - summary["keyless"]["send_us_per_record"]
    )
    summary["offered"] = records * repeat * 2
    summary["acked"] = sum(x["acked"] for rs in runs.values() for x in rs)
    summary["errors"] = sum(x["errors"] for rs in runs.values() for x in rs)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_partitioner", description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bootstrap-servers", default=None, help="a cluster whose topics exist already")
    parser.add_argument("--tag", default="", help="topic name tag (the suite's topic naming)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args(argv)
    if args.bootstrap_servers:
        result = measure(args.bootstrap_servers, args.records, args.repeat, args.tag)
    else:
        from benchmarks.cluster import ClusterProcess

        with ClusterProcess(topics(args.repeat, args.tag)) as cluster:
            result = measure(cluster.bootstrap_servers, args.records, args.repeat, args.tag)
    if args.json:
        print(json.dumps(result))
    else:
        for kind in ("keyed", "keyless"):
            k = result[kind]
            print(f"{kind:8s} send {k['send_us_per_record']:.2f} µs/record, {k['records_per_s']:,.0f} records/s end to end")
        print(f"keyed costs {result['keyed_extra_us_per_record']:+.2f} µs/record more; "
              f"murmur2 partition_for_key alone {result['murmur2_us_per_call']:.2f} µs/call")
        print(f"acked {result['acked']}/{result['offered']}, errors {result['errors']}")
    return 0 if result["acked"] == result["offered"] and result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
