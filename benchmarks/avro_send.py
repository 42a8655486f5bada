"""Avro records through a Schema Registry: aioproducer's ``AvroSerializer`` against confluent-kafka's.

The same N records (dicts of a long, a double and a 60-character string: about 75 B of Avro),
keyed, written to one librdkafka mock cluster (``benchmarks.cluster.ClusterProcess``) by

- **aioproducer**: ``Producer(value_serializer=AvroSerializer(client, schema))`` and ``await
  send(topic, record, key, on_delivery=counter)`` per record, then ``flush()``;
- **confluent**: its C ``Producer`` with its ``AvroSerializer`` called per record, as its users
  write it: ``produce(topic, serializer(record, ctx), key, on_delivery=counter); poll(0)``, then
  ``flush()``.

Both use the same in-memory registry (``aioproducer.testing.SchemaRegistry``, in this process),
``acks=all``, idempotence, ``linger.ms=5``, each client in a process of its own, rounds
interleaved. Reported per client: records/s and CPU µs per record end to end (the process's user +
system time: librdkafka's threads included), and the serializer alone (µs per record over the same
records, after the schema id is known). The registry must see one registration per client run.

    python -m benchmarks.avro_send [--records 200000] [--rounds 3]
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

TOPIC = "avro-bench"
PARTITIONS = 6
SCHEMA = json.dumps({
    "type": "record", "name": "Order", "namespace": "bench",
    "fields": [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}, {"name": "note", "type": "string"}],
})


def _records(count: int) -> list[dict[str, Any]]:
    return [{"id": i, "amount": i * 0.25, "note": "n" * 52 + "%08d" % i} for i in range(count)]


def _keys(count: int) -> list[bytes]:
    return [b"key-%08d" % i for i in range(count)]


async def _aioproducer(bootstrap: str, registry: str, count: int) -> dict[str, Any]:
    from aioproducer import Producer
    from aioproducer.schema_registry import SchemaRegistryClient
    from aioproducer.schema_registry.avro import AvroSerializer

    records, keys = _records(count), _keys(count)
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry}), SCHEMA)
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
    counts = [0, 0]

    def on_delivery(metadata: Any, error: BaseException | None) -> None:
        counts[0 if error is None else 1] += 1

    async with Producer(config, value_serializer=serializer) as producer:
        await (await producer.send(TOPIC, records[0], b"warm-up"))  # metadata and the schema id
        serialize = serializer.serialize
        t0 = perf_counter()
        for record in records:
            serialize(TOPIC, [], record)
        serialize_s = perf_counter() - t0
        send = producer.send
        cpu0, t0 = process_time(), perf_counter()
        for record, key in zip(records, keys):
            await send(TOPIC, record, key, on_delivery=on_delivery)
        await producer.flush()
        elapsed, cpu = perf_counter() - t0, process_time() - cpu0
    return {"delivered": counts[0], "failed": counts[1], "elapsed": elapsed, "cpu": cpu, "serialize": serialize_s}


def _confluent(bootstrap: str, registry: str, count: int) -> dict[str, Any]:
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    records, keys = _records(count), _keys(count)
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry}), SCHEMA)
    ctx = SerializationContext(TOPIC, MessageField.VALUE)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    producer.list_topics(TOPIC, timeout=10)
    producer.produce(TOPIC, serializer(records[0], ctx), b"warm-up")
    producer.flush(30)
    t0 = perf_counter()
    for record in records:
        serializer(record, ctx)
    serialize_s = perf_counter() - t0
    counts = [0, 0]

    def on_delivery(err: Any, msg: Any) -> None:
        counts[0 if err is None else 1] += 1

    produce, poll = producer.produce, producer.poll
    cpu0, t0 = process_time(), perf_counter()
    for record, key in zip(records, keys):
        value = serializer(record, ctx)
        while True:
            try:
                produce(TOPIC, value, key, on_delivery=on_delivery)
                break
            except BufferError:  # its local queue is full: serve deliveries, then retry
                poll(0.001)
        poll(0)
    producer.flush(120)
    elapsed, cpu = perf_counter() - t0, process_time() - cpu0
    return {"delivered": counts[0], "failed": counts[1], "elapsed": elapsed, "cpu": cpu, "serialize": serialize_s}


CLIENTS = {"aioproducer AvroSerializer": "aioproducer", "confluent Producer + AvroSerializer": "confluent"}


def _run_client(client: str, bootstrap: str, registry: str, count: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.avro_send", "--client", client, "--bootstrap", bootstrap,
               "--registry", registry, "--records", str(count)]
    return run_delivering_child(command, client, count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--client", choices=sorted(CLIENTS.values()), help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--registry", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client is not None:  # a child: one client's run, its result as the last line
        if args.client == "aioproducer":
            result = asyncio.run(_aioproducer(args.bootstrap, args.registry, args.records))
        else:
            result = _confluent(args.bootstrap, args.registry, args.records)
        print(json.dumps(result))
        return
    from aioproducer.testing import SchemaRegistry

    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in CLIENTS}
    with ClusterProcess([TOPIC], partitions=PARTITIONS) as cluster, SchemaRegistry() as registry:
        for _ in range(args.rounds):
            for name, client in CLIENTS.items():
                registry.clear_requests()
                runs[name].append(_run_client(client, cluster.bootstrap_servers, registry.url, args.records))
                registrations = [r for r in registry.requests if r[0] == "POST"]
                if len(registrations) != 1:
                    raise SystemExit(f"{name}: {len(registrations)} registrations in one run, not 1: {registry.requests}")
    n = args.records
    print(f"{n:,} Avro records (~75 B), keyed, librdkafka mock, acks=all + idempotence, median of {args.rounds} interleaved rounds")
    print(f"{'client':<38}{'records/s':>12}{'CPU us/rec':>12}{'serialize us/rec':>18}")
    rate = {name: statistics.median(n / r["elapsed"] for r in rs) for name, rs in runs.items()}
    serialize = {name: statistics.median(r["serialize"] / n * 1e6 for r in rs) for name, rs in runs.items()}
    for name, rs in runs.items():
        cpu_us = statistics.median(r["cpu"] / n * 1e6 for r in rs)
        print(f"{name:<38}{rate[name]:>12,.0f}{cpu_us:>12.2f}{serialize[name]:>18.2f}")
    a, c = "aioproducer AvroSerializer", "confluent Producer + AvroSerializer"
    print(f"ratio aioproducer / confluent: {rate[a] / rate[c]:.2f}x records/s; serializer alone {serialize[c] / serialize[a]:.2f}x faster")


if __name__ == "__main__":
    main()
