"""``send_arrow`` against confluent-kafka's C ``Producer`` produce loop, over the same keyed rows.

Both clients send the same N × 100 B keyed rows (unique keys, murmur2 vs librdkafka's default
partitioner: each spreads them over the topic's partitions) to one librdkafka mock cluster
(``benchmarks.cluster.ClusterProcess``, a process of its own), each client in a process of its
own, rounds interleaved (A B A B ...). Timed: from the first row handed to the client to the
last acknowledgement (``await`` of the ``ArrowDelivery``; ``flush()`` after the produce loop).
Not timed: making the rows (an Arrow table for ``send_arrow``; Python ``bytes`` lists for the
produce loop, which takes nothing else), starting the client, metadata and a warm-up record.

Same settings for both: ``acks=all``, idempotence on, ``linger.ms=5``; batch sizes are each
client's default (Java's 16 KB for aioproducer, librdkafka's 1 MB), as a user would run them,
unless ``--batch-size`` sets aioproducer's (``--batch-size 1048576``: librdkafka's default).
CPU is the process's user + system time (``time.process_time``: librdkafka's threads too).

    python -m benchmarks.arrow_send [--rows 1000000] [--rounds 3] [--batch-size BYTES]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from time import perf_counter, process_time
from typing import Any

from benchmarks.cluster import ClusterProcess
from benchmarks.process import run_delivering_child

TOPIC = "arrow-bench"
PARTITIONS = 6
VALUE_BYTES = 100


def _keys(rows: int) -> list[bytes]:
    return [b"key-%08d" % i for i in range(rows)]


def _values(rows: int) -> list[bytes]:
    return [b"%08d" % i + b"v" * (VALUE_BYTES - 8) for i in range(rows)]


async def _aioproducer(bootstrap: str, rows: int, batch_size: int | None) -> dict[str, Any]:
    import pyarrow as pa

    from aioproducer import Producer

    table = pa.table({"key": pa.array(_keys(rows), pa.binary()), "value": pa.array(_values(rows), pa.binary())})
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    if batch_size is not None:
        config["batch.size"] = batch_size
    async with Producer(config) as producer:
        await producer.partitions_for(TOPIC)
        await (await producer.send(TOPIC, b"warm-up", b"warm-up"))
        cpu0, t0 = process_time(), perf_counter()
        report = await (await producer.send_arrow(TOPIC, table))
        elapsed, cpu = perf_counter() - t0, process_time() - cpu0
    return {"delivered": report.delivered, "failed": report.failed, "elapsed": elapsed, "cpu": cpu}


def _confluent(bootstrap: str, rows: int) -> dict[str, Any]:
    from confluent_kafka import Producer

    keys, values = _keys(rows), _values(rows)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    producer.list_topics(TOPIC, timeout=10)
    producer.produce(TOPIC, b"warm-up", b"warm-up")
    producer.flush(30)
    counts = [0, 0]

    def on_delivery(err: Any, msg: Any) -> None:
        counts[0 if err is None else 1] += 1

    produce, poll = producer.produce, producer.poll
    cpu0, t0 = process_time(), perf_counter()
    for key, value in zip(keys, values):
        while True:
            try:
                produce(TOPIC, value, key, on_delivery=on_delivery)
                break
            except BufferError:  # its local queue is full: serve deliveries, then retry
                poll(0.001)
        poll(0)
    producer.flush(120)
    elapsed, cpu = perf_counter() - t0, process_time() - cpu0
    return {"delivered": counts[0], "failed": counts[1], "elapsed": elapsed, "cpu": cpu}


CLIENTS = {"aioproducer send_arrow": "aioproducer", "confluent Producer (C)": "confluent"}


def _run_client(client: str, bootstrap: str, rows: int, batch_size: int | None) -> dict[str, Any]:
    """One client run in a fresh process: its result line."""
    command = [sys.executable, "-m", "benchmarks.arrow_send", "--client", client, "--bootstrap", bootstrap, "--rows", str(rows)]
    if batch_size is not None:
        command += ["--batch-size", str(batch_size)]
    return run_delivering_child(command, client, rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=None, help="aioproducer's batch.size (default: its own, 16384)")
    parser.add_argument("--client", choices=sorted(CLIENTS.values()), help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client is not None:  # a child: run one client, print its result as the last line
        if args.client == "aioproducer":
            result = asyncio.run(_aioproducer(args.bootstrap, args.rows, args.batch_size))
        else:
            result = _confluent(args.bootstrap, args.rows)
        print(json.dumps(result))
        return
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in CLIENTS}
    with ClusterProcess([TOPIC], partitions=PARTITIONS) as cluster:
        for _ in range(args.rounds):
            for name, client in CLIENTS.items():
                runs[name].append(_run_client(client, cluster.bootstrap_servers, args.rows, args.batch_size))
    rate = {name: statistics.median(args.rows / r["elapsed"] for r in rs) for name, rs in runs.items()}
    sized = "default batch.size" if args.batch_size is None else f"aioproducer batch.size={args.batch_size}"
    print(f"{args.rows:,} rows x {VALUE_BYTES} B keyed, librdkafka mock, {sized}, median of {args.rounds} interleaved rounds")
    print(f"{'client':<26}{'rows/s':>12}{'CPU us/row':>12}")
    for name, rs in runs.items():
        cpu_us = statistics.median(r["cpu"] / args.rows * 1e6 for r in rs)
        print(f"{name:<26}{rate[name]:>12,.0f}{cpu_us:>12.2f}")
    aio, c = rate["aioproducer send_arrow"], rate["confluent Producer (C)"]
    print(f"ratio send_arrow / confluent Producer: {aio / c:.2f}x")


if __name__ == "__main__":
    main()
