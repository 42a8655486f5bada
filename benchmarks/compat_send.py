"""What the facades cost per record: ``AIOKafkaProducer.send()`` and ``AIOProducer.produce()`` against ``Producer.send()``.

The same loop as ``benchmarks/micro_send.py`` (records queued against librdkafka's mock cluster in
a loop that never suspends, then flushed and every future checked), for three callers of one
producer configuration: the plain ``Producer.send()``, aiokafka's facade ``send()`` (which hands
back ``Producer.send()``'s coroutine: the budget is 0.3 µs a record over the plain call), and
confluent-kafka's facade ``produce()`` (a future of a delivered ``Message`` per record, made when
the broker answered). Rounds are interleaved, plain first in each, and each figure is the best of
``--repeat`` rounds of thread CPU time (the machine is shared: wall time would count the other
processes too), so that the machine's other load touches every caller alike. On a loaded machine
the loops' figures still move by a few tenths of a µs from run to run; the last line isolates what
the aiokafka facade adds, one call that makes ``Producer.send()``'s coroutine, by making (and
closing, unstarted) a million coroutines each way.

    python -m benchmarks.compat_send [--records N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any

from aioproducer import Producer
from aioproducer.compat.aiokafka import AIOKafkaProducer
from aioproducer.compat.confluent import AIOProducer
from aioproducer.testing import MockCluster

TOPIC = "bench"
VALUE = b"v" * 100
SETTINGS: dict[str, Any] = {"linger_ms": 1000, "buffer_memory": 256 << 20}


async def _plain(bootstrap: str, keys: list[bytes | None]) -> float:
    async with Producer(bootstrap_servers=bootstrap, **SETTINGS) as producer:
        await producer.send(TOPIC, VALUE, b"warm-up")
        send = producer.send
        started = time.thread_time()
        futures = [await send(TOPIC, VALUE, key) for key in keys]
        elapsed = time.thread_time() - started
        await producer.flush()
        _check(await asyncio.gather(*futures), keys)
    return elapsed


async def _aiokafka(bootstrap: str, keys: list[bytes | None]) -> float:
    async with AIOKafkaProducer(bootstrap_servers=bootstrap, **SETTINGS) as producer:
        await producer.send(TOPIC, VALUE, b"warm-up")
        send = producer.send
        started = time.thread_time()
        futures = [await send(TOPIC, VALUE, key) for key in keys]
        elapsed = time.thread_time() - started
        await producer.flush()
        _check(await asyncio.gather(*futures), keys)
    return elapsed


async def _confluent(bootstrap: str, keys: list[bytes | None]) -> float:
    async with AIOProducer({"bootstrap.servers": bootstrap, "linger.ms": 1000, "buffer.memory": 256 << 20}) as producer:
        await producer.produce(TOPIC, VALUE, b"warm-up")
        produce = producer.produce
        started = time.thread_time()
        futures = [await produce(TOPIC, VALUE, key) for key in keys]
        elapsed = time.thread_time() - started
        await producer.flush()
        _check(await asyncio.gather(*futures), keys)
    return elapsed


def _check(done: list[Any], keys: list[bytes | None]) -> None:
    if len(done) != len(keys):
        raise SystemExit(f"{len(done)} of {len(keys)} records acknowledged")


CALLERS: dict[str, Callable[[str, list[bytes | None]], Coroutine[Any, Any, float]]] = {
    "Producer.send": _plain,
    "AIOKafkaProducer.send": _aiokafka,
    "AIOProducer.produce": _confluent,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with MockCluster(brokers=3, topics={TOPIC: 6}) as cluster:
        for case, make in (("keyed", lambda i: b"key-%d" % i), ("keyless", lambda i: None)):
            keys: list[bytes | None] = [make(i) for i in range(args.records)]
            best = {name: float("inf") for name in CALLERS}
            for _ in range(args.repeat):
                for name, caller in CALLERS.items():
                    best[name] = min(best[name], asyncio.run(caller(cluster.bootstrap_servers, keys)) / len(keys) * 1e6)
            plain = best["Producer.send"]
            for name, us in best.items():
                extra = "" if name == "Producer.send" else f"  (+{us - plain:.3f} µs over Producer.send)"
                print(f"{case:<8} {name:<22} {us:6.3f} µs/record{extra}")
        facade, direct = _call_overhead(args.repeat)
        print(f"call     AIOKafkaProducer.send() makes Producer.send()'s coroutine: +{facade - direct:.3f} µs "
              f"({facade:.3f} against {direct:.3f} µs a call)")


def _call_overhead(repeat: int, calls: int = 1_000_000) -> tuple[float, float]:
    """µs per call of making the send coroutine through the facade and directly (best of ``repeat``)."""
    facade = AIOKafkaProducer(bootstrap_servers="localhost:9092")
    plain, send = facade.producer.send, facade.send
    best_facade = best_direct = float("inf")
    for _ in range(repeat):
        for which in ("direct", "facade"):
            started = time.thread_time()
            if which == "direct":
                for _ in range(calls):
                    plain(TOPIC, VALUE, None, None, None, None).close()
            else:
                for _ in range(calls):
                    send(TOPIC, VALUE, None, None, None, None).close()
            took = (time.thread_time() - started) / calls * 1e6
            if which == "direct":
                best_direct = min(best_direct, took)
            else:
                best_facade = min(best_facade, took)
    return best_facade, best_direct


if __name__ == "__main__":
    main()
