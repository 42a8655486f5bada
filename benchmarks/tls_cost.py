"""What TLS (and SASL on top) costs: the same workload over PLAINTEXT, SSL and SASL_SSL, one real broker, one run.

One Kafka node (``aioproducer.testing.KafkaCluster``) with PLAINTEXT, SSL and SASL_SSL
listeners. Each round sends ``--records`` keyed 100-byte records (``acks=all``,
``linger.ms=5``, idempotent, futures kept, then ``gather()``: what users write) to a fresh
topic over each listener in turn, with aioproducer and with aiokafka (which speaks TLS and
SASL too), and checks that every record was acknowledged. Rounds alternate the order of the
listeners so that drift on a shared machine falls on both; the report is the median per
listener and its ratio to PLAINTEXT from the same client.

    python -m benchmarks.tls_cost [--records N] [--rounds R]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import ssl
import statistics
import time
from collections.abc import Callable, Coroutine
from typing import Any

from aioproducer import Producer
from aioproducer.testing import KafkaCluster
from aioproducer.testing.kafka import SERVER_JVM_OPTIONS

USER, PASSWORD = "bench", "bench-secret"
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")
VALUE = b"v" * 100
_topics = itertools.count()


async def run_aioproducer(cluster: KafkaCluster, listener: str, topic: str, records: int) -> float:
    config: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap_servers_for(listener), "linger.ms": 5}
    if listener != "PLAINTEXT":
        config.update({"security.protocol": listener, "ssl.truststore.location": cluster.ca_file})
    if listener == "SASL_SSL":
        config.update({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": USER, "sasl.password": PASSWORD})
    async with Producer(config) as producer:
        await producer.send_and_wait(topic, b"warm-up", key=b"w")
        started = time.perf_counter()
        futures = [await producer.send(topic, VALUE, key=b"k%d" % (i % 1000)) for i in range(records)]
        done = await asyncio.gather(*futures)
        elapsed = time.perf_counter() - started
    if len(done) != records:
        raise SystemExit(f"aioproducer over {listener}: {len(done)} of {records} acknowledged")
    return records / elapsed


async def run_aiokafka(cluster: KafkaCluster, listener: str, topic: str, records: int) -> float:
    from aiokafka import AIOKafkaProducer

    kwargs: dict[str, object] = {"bootstrap_servers": cluster.bootstrap_servers_for(listener), "linger_ms": 5,
                                 "acks": "all", "enable_idempotence": True}
    if listener != "PLAINTEXT":
        kwargs.update({"security_protocol": listener, "ssl_context": ssl.create_default_context(cafile=cluster.ca_file)})
    if listener == "SASL_SSL":
        kwargs.update({"sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": USER, "sasl_plain_password": PASSWORD})
    producer = AIOKafkaProducer(**kwargs)
    await producer.start()
    try:
        await producer.send_and_wait(topic, b"warm-up", key=b"w")
        started = time.perf_counter()
        futures = [await producer.send(topic, VALUE, key=b"k%d" % (i % 1000)) for i in range(records)]
        done = await asyncio.gather(*futures)
        elapsed = time.perf_counter() - started
    finally:
        await producer.stop()
    if len(done) != records:
        raise SystemExit(f"aiokafka over {listener}: {len(done)} of {records} acknowledged")
    return records / elapsed


CLIENTS: dict[str, Callable[[KafkaCluster, str, str, int], Coroutine[Any, Any, float]]] = {
    "aioproducer": run_aioproducer,
    "aiokafka": run_aiokafka,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rates: dict[tuple[str, str], list[float]] = {}
    with KafkaCluster(brokers=1, topics={}, listeners=LISTENERS, scram_users={USER: PASSWORD}, jvm_options=SERVER_JVM_OPTIONS) as cluster:
        for round_ in range(args.rounds):
            order = LISTENERS if round_ % 2 == 0 else tuple(reversed(LISTENERS))
            for client, run in CLIENTS.items():
                for listener in order:
                    topic = f"tls-{next(_topics)}"
                    cluster.create_topic(topic, partitions=6)
                    rate = asyncio.run(run(cluster, listener, topic, args.records))
                    rates.setdefault((client, listener), []).append(rate)
                    print(f"round {round_} {client:<12} {listener:<10} {rate:>10,.0f} records/s", flush=True)
    print(f"\n{args.records:,} records of 100 B, acks=all, idempotent, linger.ms=5, 1 broker; median of {args.rounds}\n")
    print("| Client | PLAINTEXT | SSL | SASL_SSL (SCRAM-SHA-256) |")
    print("|---|---:|---:|---:|")
    for client in CLIENTS:
        base = statistics.median(rates[(client, "PLAINTEXT")])
        cells = [f"{base:,.0f} rec/s"]
        for listener in LISTENERS[1:]:
            median = statistics.median(rates[(client, listener)])
            cells.append(f"{median:,.0f} rec/s ({median / base:.2f}×)")
        print(f"| {client} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
