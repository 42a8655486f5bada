"""What transactions cost: idempotent produce against one transaction per N records (N = 100, 10,000), one run.

One real Kafka node (``aioproducer.testing.KafkaCluster``). Each round sends ``--records``
keyed 100-byte records (``acks=all``, ``linger.ms=5``, futures kept, then ``gather()``) to a
fresh topic: plainly idempotent, then in transactions of N records each
(``begin_transaction()``, N ``send()``, ``commit_transaction()``, which waits for the N
acknowledgements and the coordinator's commit). Rounds alternate the order of the modes;
the report is the median per mode and its ratio to the idempotent run. Every record is
checked as acknowledged, and the topic's committed records are counted afterwards.

    python -m benchmarks.transactions_cost [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
from typing import Any

from aioproducer import Producer
from aioproducer.testing import KafkaCluster
from aioproducer.testing.kafka import SERVER_JVM_OPTIONS

VALUE = b"v" * 100
MODES = ("idempotent", "txn per 10,000", "txn per 100")
_topics = itertools.count()
_ids = itertools.count()


async def run(cluster: KafkaCluster, mode: str, topic: str, records: int) -> float:
    per = {"txn per 100": 100, "txn per 10,000": 10_000}.get(mode)
    config: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5}
    if per is not None:
        config["transactional.id"] = f"bench-{next(_ids)}"
    async with Producer(config) as producer:
        started = time.perf_counter()
        futures = []
        if per is None:
            futures = [await producer.send(topic, VALUE, key=b"k%d" % (i % 1000)) for i in range(records)]
        else:
            for first in range(0, records, per):
                producer.begin_transaction()
                futures += [await producer.send(topic, VALUE, key=b"k%d" % (i % 1000)) for i in range(first, min(records, first + per))]
                await producer.commit_transaction()
        done = await asyncio.gather(*futures)
        elapsed = time.perf_counter() - started
    if len(done) != records:
        raise SystemExit(f"{mode}: {len(done)} of {records} acknowledged")
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rates: dict[str, list[float]] = {}
    with KafkaCluster(brokers=1, topics={}, jvm_options=SERVER_JVM_OPTIONS) as cluster:
        for round_ in range(args.rounds):
            for mode in MODES if round_ % 2 == 0 else tuple(reversed(MODES)):
                topic = f"txn-bench-{next(_topics)}"
                cluster.create_topic(topic, partitions=6)
                rate = asyncio.run(run(cluster, mode, topic, args.records))
                written = sum(cluster.high_watermarks(topic).values())
                if written < args.records:
                    raise SystemExit(f"{mode}: the topic holds {written} records, {args.records} were sent")
                rates.setdefault(mode, []).append(rate)
                print(f"round {round_} {mode:<16} {rate:>10,.0f} records/s", flush=True)
    base = statistics.median(rates["idempotent"])
    print(f"\n{args.records:,} records of 100 B, acks=all, linger.ms=5, 1 broker; median of {args.rounds}\n")
    print("| Mode | records/s | vs idempotent |")
    print("|---|---:|---:|")
    for mode in MODES:
        median = statistics.median(rates[mode])
        print(f"| {mode} | {median:,.0f} | {median / base:.2f}× |")


if __name__ == "__main__":
    main()
