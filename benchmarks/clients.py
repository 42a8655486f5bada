"""One adapter per client: how each is configured and driven, written as its users write it.

Every client gets two entry points, ``throughput(spec, keys, values)`` and
``paced(spec, keys, values)``, returning an :class:`Outcome`: its wall time and
process CPU time, both taken by one :class:`Stopwatch` over the same span. The throughput
loops are written out per client (no shared per-record indirection, which would
tax the fastest clients most); the paced loops (latency and memory modes, where
the offered rate, not the loop, is the limit) share :func:`_drive_async` /
:func:`_drive_sync` and a per-client ``submit(i)``.

Settings per client (``spec`` is :class:`benchmarks.scenarios.Scenario` as a dict):

============================  =====================================================================
aioproducer                   ``Producer(bootstrap_servers, acks, linger_ms, compression_type,
                              enable_idempotence, buffer_memory=32 MB)``
aioproducer-bulk              ``Producer.send_many(topic, values, keys)`` per 1000 records, if the class
                              has it (``send_batch`` is tried too), else the row is skipped
aioproducer-counter           ``await send(..., on_delivery=counter)`` per record with one shared counting
                              callback, then ``flush()``: the C ``Producer``'s own pattern (throughput rows)
aioproducer-1mb               aioproducer with ``batch_size=1_000_000``, librdkafka's ``batch.size``
                              default (Java's is 16384), for records of 1 KB or more only
aiokafka 0.14                 ``AIOKafkaProducer(acks, linger_ms, compression_type, enable_idempotence)``;
                              no byte budget exists: ``send()`` waits while a partition's pending
                              batch (``max_batch_size`` = 16384, the default) is full
confluent-kafka AIOProducer   ``confluent_kafka.aio.AIOProducer({acks, linger.ms, compression.type,
                              enable.idempotence})`` with its defaults (``batch_size=1000`` records
                              buffered in Python, ``max_workers=4``); memory mode adds
                              ``queue.buffering.max.kbytes=32768``
confluent-*-16k               the two above with ``batch.size=16384`` (Java's, aioproducer's default; librdkafka's
                              is 1,000,000): each 10 KB record a batch of its own, as in issue #42's bars
confluent-kafka Producer      the same librdkafka settings; ``produce(); poll(0)`` per record,
                              ``poll`` and retry on ``BufferError``; memory mode adds
                              ``queue.buffering.max.kbytes=32768`` and lifts
                              ``queue.buffering.max.messages`` so bytes are the binding limit
kafka-python 2.2              ``KafkaProducer(acks, linger_ms, compression_type, enable_idempotence)``;
                              2.2 deprecated and ignores ``buffer_memory``: nothing bounds its queue
faststream 0.7 KafkaBroker    ``KafkaBroker(bootstrap, acks, linger_ms, compression_type,
                              enable_idempotence)``, ``publish(value, topic, key=...)`` with its default
                              ``no_confirm=False`` (awaits the ack); aiokafka underneath; request/acknowledge
                              scenarios only
============================  =====================================================================

The request/acknowledge scenarios (``mode="waiters"``) run ``waiters`` coroutines,
each sending one record and awaiting its acknowledgement before the next, as a
web service does per request: :func:`aioproducer_waiters` and its twins.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CLIENTS", "Outcome", "Stopwatch", "Tracker", "bulk_method", "use_thread_cpu"]

perf_counter = time.perf_counter
MB = 1 << 20

#: The CPU clock every :class:`Stopwatch` reads: the whole process's (the default), or the calling
#: thread's once :func:`use_thread_cpu` ran. A worker process runs one spec, so it is that run's.
_cpu_clock: Callable[[], float] = time.process_time


def use_thread_cpu() -> None:
    """Stopwatches read the calling thread's CPU time from now on (an asyncio client's: its event loop's).

    For ``benchmarks.per_batch_cpu``: issue #42's CPU per batch and request is the event loop's
    thread's, which a process figure mixes with the writer thread's and, for the C ``Producer``,
    librdkafka's own threads.
    """
    global _cpu_clock
    _cpu_clock = time.thread_time


@dataclass(slots=True)
class Outcome:
    """What a run observed: how many records were acknowledged, failed, and how long it took."""

    offered: int
    acked: int
    errors: int
    first_error: str | None
    elapsed_s: float
    latencies_s: list[float] | None = None
    notes: list[str] = field(default_factory=list)
    cpu_s: float | None = None  # process CPU time (user + system) over the timed part


class Stopwatch:
    """Wall time and process CPU time over one timed span: ``start()``, then ``stop() -> (elapsed_s, cpu_s)``.

    CPU is :func:`time.process_time`, the whole process's user + system time, so it
    counts the client's work in every thread it runs (librdkafka's, an executor's)
    plus the driver's, which is the same for every client (the calling thread's alone after
    :func:`use_thread_cpu`). ``t0`` is the
    :func:`time.perf_counter` reading ``start()`` took; ``start()`` returns the stopwatch.
    """

    __slots__ = ("t0", "_cpu0")

    def __init__(self) -> None:
        self.t0 = 0.0
        self._cpu0 = 0.0

    def start(self) -> Stopwatch:
        self._cpu0 = _cpu_clock()
        self.t0 = perf_counter()
        return self

    def stop(self) -> tuple[float, float]:
        elapsed = perf_counter() - self.t0
        return elapsed, _cpu_clock() - self._cpu0


class Tracker:
    """Per-record acknowledgement bookkeeping for the paced modes.

    ``ack(i, err)`` may be called from any thread (kafka-python calls it from
    its sender thread): it only does item assignment and ``list.append``, each
    atomic under the GIL. Ack times are kept only when latencies are wanted
    (a float per record); otherwise one byte per record.
    """

    __slots__ = ("n", "times", "flags", "errors")

    def __init__(self, n: int, keep_times: bool) -> None:
        self.n = n
        self.times: list[float] | None = [0.0] * n if keep_times else None
        self.flags = bytearray(n)
        self.errors: list[tuple[int, Any]] = []

    def ack(self, i: int, err: Any) -> None:
        if self.times is not None:
            self.times[i] = perf_counter()
        self.flags[i] = 1
        if err is not None:
            self.errors.append((i, err))

    def outcome(self, t0: float, rate: int, elapsed: float, cpu: float) -> Outcome:
        acked_or_failed = self.n - self.flags.count(0)
        errors = len(self.errors)
        first = repr(self.errors[0][1]) if self.errors else None
        latencies = None
        if self.times is not None and rate:
            bad = {i for i, _ in self.errors}
            latencies = [t - (t0 + i / rate) for i, t in enumerate(self.times) if t and i not in bad]
        return Outcome(self.n, acked_or_failed - errors, errors, first, elapsed, latencies, cpu_s=cpu)


async def _drive_async(submit: Callable[[int], Awaitable[None]], n: int, rate: int) -> Stopwatch:
    """Call ``submit(i)`` for every record, at ``rate`` records/s (0: as fast as accepted).

    Returns the :class:`Stopwatch` started before the first ``submit``; its ``t0`` is the pace's origin.
    """
    clock = Stopwatch().start()
    t0 = clock.t0
    if not rate:
        for i in range(n):
            await submit(i)
        return clock
    i = 0
    while i < n:
        due = min(n, int((perf_counter() - t0) * rate) + 1)
        while i < due:
            await submit(i)
            i += 1
        await asyncio.sleep(0.001)
    return clock


def _drive_sync(submit: Callable[[int], None], idle: Callable[[], Any], n: int, rate: int) -> Stopwatch:
    """The synchronous twin of :func:`_drive_async`; ``idle()`` waits ~1 ms (and serves callbacks)."""
    clock = Stopwatch().start()
    t0 = clock.t0
    if not rate:
        for i in range(n):
            submit(i)
        return clock
    i = 0
    while i < n:
        due = min(n, int((perf_counter() - t0) * rate) + 1)
        while i < due:
            submit(i)
            i += 1
        idle()
    return clock


async def _settle(tracker: Tracker, timeout: float = 10.0) -> None:
    """Give completion callbacks scheduled from other threads a chance to run after ``flush()``."""
    deadline = perf_counter() + timeout
    while tracker.flags.count(0) and perf_counter() < deadline:
        await asyncio.sleep(0.005)


def _count_futures(results: list[Any], ok: type | tuple[type, ...]) -> tuple[int, int, str | None]:
    acked = errors = 0
    first: str | None = None
    for r in results:
        if isinstance(r, ok):
            acked += 1
        else:
            errors += 1
            if first is None:
                first = repr(r)
    return acked, errors, first


def _pools(keys: list[bytes] | None, values: list[bytes]) -> tuple[list[bytes] | None, int, list[bytes], int]:
    return keys, (len(keys) - 1 if keys else 0), values, len(values) - 1


# Warm-up: before the clock starts, every client delivers one record to each partition of
# a separate topic (``spec["warmup_topic"]``), so that connections to every broker, the
# idempotent producer id and the metadata are in place for all of them alike.
WARMUP = b"warm-up"


# --------------------------------------------------------------------------- aioproducer
async def _aioproducer_warmup(producer: Any, spec: dict[str, Any]) -> None:
    await producer.partitions_for(spec["topic"])
    warm = spec["warmup_topic"]
    await asyncio.gather(*[await producer.send(warm, value=WARMUP, partition=p) for p in range(spec["partitions"])])


def _aioproducer(spec: dict[str, Any]) -> Any:
    from aioproducer import Producer

    return Producer(
        bootstrap_servers=spec["bootstrap"],
        acks=spec["acks"],
        linger_ms=spec["linger_ms"],
        compression_type=spec["compression"],
        enable_idempotence=spec["idempotence"],
        buffer_memory=spec["buffer_memory"],
        batch_size=spec.get("batch_size", 16384),
    )


#: librdkafka's ``batch.size`` default, in bytes (Java's, and aioproducer's, is 16384).
LIBRDKAFKA_BATCH_SIZE = 1_000_000


async def aioproducer_1mb_throughput(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    """aioproducer with librdkafka's batch size: what large records gain from batching as librdkafka does."""
    return await aioproducer_throughput({**spec, "batch_size": LIBRDKAFKA_BATCH_SIZE}, keys, values)


async def aioproducer_1mb_paced(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    return await aioproducer_paced({**spec, "batch_size": LIBRDKAFKA_BATCH_SIZE}, keys, values)


async def send_loop(
    send: Callable[..., Awaitable[Any]],
    topic: str,
    n: int,
    keys: list[bytes] | None,
    km: int,
    values: list[bytes],
    vm: int,
) -> list[Any]:
    """``n`` records as users write them: ``fut = await send(topic, value=..., key=...)`` per record, futures kept.

    One loop for every asyncio client, so they are timed doing exactly the same work.
    """
    futures: list[Any] = []
    append = futures.append
    if keys:
        for i in range(n):
            append(await send(topic, value=values[i & vm], key=keys[i & km]))
    else:
        for i in range(n):
            append(await send(topic, value=values[i & vm]))
    return futures


async def collect(flush: Callable[[], Awaitable[Any]], futures: list[Any], wait: str) -> list[Any]:
    """Every record's outcome, waited for as the scenario's ``wait`` says: ``gather()`` alone, or ``flush()`` first."""
    if wait == "flush":
        await flush()
    elif wait != "gather":
        raise ValueError(f"a futures driver cannot wait by {wait!r}")
    return await asyncio.gather(*futures, return_exceptions=True)


async def aioproducer_throughput(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    from aioproducer import RecordMetadata

    topic, n = spec["topic"], spec["records"]
    keys, km, values, vm = _pools(keys, values)
    async with _aioproducer(spec) as producer:
        await _aioproducer_warmup(producer, spec)
        clock = Stopwatch().start()
        futures = await send_loop(producer.send, topic, n, keys, km, values, vm)
        results = await collect(producer.flush, futures, spec["wait"])
        elapsed, cpu = clock.stop()
    acked, errors, first = _count_futures(results, RecordMetadata)
    return Outcome(n, acked, errors, first, elapsed, cpu_s=cpu)


async def aioproducer_callback_throughput(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    """The C ``Producer``'s pattern in asyncio: ``await send(..., on_delivery=counter)`` per record, one shared
    callback that counts, then ``flush()`` (what ``confluent_throughput`` does with ``produce(); poll(0)``).

    The ``+cb`` scenarios run every asyncio client through the paced driver instead (a coroutine and a
    lambda per record, for latency tracking); this row is the like-for-like of the C ``Producer``'s.
    """
    topic, n = spec["topic"], spec["records"]
    keys, km, values, vm = _pools(keys, values)
    counts = [0, 0]
    errors: list[BaseException] = []

    def on_delivery(metadata: Any, error: BaseException | None) -> None:
        if error is None:
            counts[0] += 1
        else:
            counts[1] += 1
            errors.append(error)

    async with _aioproducer(spec) as producer:
        await _aioproducer_warmup(producer, spec)
        send = producer.send
        clock = Stopwatch().start()
        if keys:
            for i in range(n):
                await send(topic, value=values[i & vm], key=keys[i & km], on_delivery=on_delivery)
        else:
            for i in range(n):
                await send(topic, value=values[i & vm], on_delivery=on_delivery)
        await producer.flush()
        elapsed, cpu = clock.stop()
    return Outcome(n, counts[0], counts[1], repr(errors[0]) if errors else None, elapsed, cpu_s=cpu)


def bulk_method(producer_class: type) -> str | None:
    """The name of aioproducer's bulk send method, if ``Producer`` has one."""
    for name in ("send_many", "send_batch"):
        if hasattr(producer_class, name):
            return name
    return None


async def aioproducer_bulk_throughput(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    """The bulk path: ``send_many(topic, values, keys)`` per chunk of 1000 records (a consumed batch, say)."""
    from aioproducer import Producer, RecordMetadata

    name = bulk_method(Producer)
    if name is None:
        raise RuntimeError("aioproducer.Producer has no send_many/send_batch")
    topic, n = spec["topic"], spec["records"]
    keys, km, values, vm = _pools(keys, values)
    chunk = 1000
    # Build the chunks up front: the loop below is the bulk call, not list building.
    value_chunks = [[values[i & vm] for i in range(start, min(n, start + chunk))] for start in range(0, n, chunk)]
    key_chunks = (
        [[keys[i & km] for i in range(start, min(n, start + chunk))] for start in range(0, n, chunk)] if keys else None
    )
    async with _aioproducer(spec) as producer:
        await _aioproducer_warmup(producer, spec)
        bulk = getattr(producer, name)
        futures: list[Any] = []
        extend = futures.extend
        clock = Stopwatch().start()
        if key_chunks:
            for vs, ks in zip(value_chunks, key_chunks):
                extend(await bulk(topic, vs, ks))
        else:
            for vs in value_chunks:
                extend(await bulk(topic, vs))
        results = await collect(producer.flush, futures, spec["wait"])
        elapsed, cpu = clock.stop()
    acked, errors, first = _count_futures(results, RecordMetadata)
    return Outcome(n, acked, errors, first, elapsed, cpu_s=cpu)


async def aioproducer_paced(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    topic, n, rate = spec["topic"], spec["records"], spec["rate"]
    keys, km, values, vm = _pools(keys, values)
    tracker = Tracker(n, keep_times=bool(rate))
    ack = tracker.ack
    async with _aioproducer(spec) as producer:
        await _aioproducer_warmup(producer, spec)
        send = producer.send

        async def submit(i: int) -> None:
            await send(topic, value=values[i & vm], key=keys[i & km] if keys else None,
                       on_delivery=lambda md, err: ack(i, err))

        clock = await _drive_async(submit, n, rate)
        await producer.flush()
        await _settle(tracker)
        elapsed, cpu = clock.stop()
    return tracker.outcome(clock.t0, rate, elapsed, cpu)


async def aioproducer_waiters(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    """Request/acknowledge: ``waiters`` coroutines, each ``await (await producer.send(...))`` per record."""
    topic = spec["topic"]
    keys, km, values, vm = _pools(keys, values)
    async with _aioproducer(spec) as producer:
        await _aioproducer_warmup(producer, spec)
        send = producer.send

        async def acknowledged(i: int) -> None:
            await (await send(topic, value=values[i & vm], key=keys[i & km] if keys else None))

        return await _run_waiters(acknowledged, spec)


@dataclass(slots=True)
class _Tally:
    """The waiters' shared count of acknowledged and failed records."""

    acked: int = 0
    errors: int = 0
    first_error: str | None = None

    def failed(self, exc: BaseException) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = repr(exc)


async def _run_waiters(acknowledged: Callable[[int], Awaitable[None]], spec: dict[str, Any]) -> Outcome:
    """``spec["waiters"]`` coroutines, each calling ``acknowledged(i)`` (send record ``i``, await its
    acknowledgement) for the next index until ``records`` are done; timed to the last ack.

    A shared counter hands out the indices, so the waiters together send exactly
    ``records`` records whatever their speed. CPU time is the process's over the
    same span: the client's work plus the driver's (the same driver for every client).
    """
    n = spec["records"]
    counter = [0]
    tally = _Tally()

    async def waiter() -> None:
        while (i := counter[0]) < n:
            counter[0] = i + 1
            try:
                await acknowledged(i)
                tally.acked += 1
            except Exception as exc:  # noqa: BLE001 - counted, the run goes on
                tally.failed(exc)

    clock = Stopwatch().start()
    await asyncio.gather(*[waiter() for _ in range(spec["waiters"])])
    elapsed, cpu = clock.stop()
    return Outcome(spec["records"], tally.acked, tally.errors, tally.first_error, elapsed, cpu_s=cpu)


# --------------------------------------------------------------------------- aiokafka
def _aiokafka(spec: dict[str, Any]) -> Any:
    from aiokafka import AIOKafkaProducer

    return AIOKafkaProducer(
        bootstrap_servers=spec["bootstrap"],
        acks=1 if spec["acks"] == "1" else "all",
        linger_ms=spec["linger_ms"],
        compression_type=None if spec["compression"] == "none" else spec["compression"],
        enable_idempotence=spec["idempotence"],
    )


async def _aiokafka_warmup(producer: Any, spec: dict[str, Any]) -> None:
    await producer.partitions_for(spec["topic"])
    warm = spec["warmup_topic"]
    await asyncio.gather(*[await producer.send(warm, value=WARMUP, partition=p) for p in range(spec["partitions"])])


async def aiokafka_throughput(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    from aiokafka.structs import RecordMetadata

    topic, n = spec["topic"], spec["records"]
    keys, km, values, vm = _pools(keys, values)
    producer = _aiokafka(spec)
    await producer.start()
    try:
        await _aiokafka_warmup(producer, spec)
        clock = Stopwatch().start()
        futures = await send_loop(producer.send, topic, n, keys, km, values, vm)
        results = await collect(producer.flush, futures, spec["wait"])
        elapsed, cpu = clock.stop()
    finally:
        await producer.stop()
    acked, errors, first = _count_futures(results, RecordMetadata)
    return Outcome(n, acked, errors, first, elapsed, cpu_s=cpu)


async def aiokafka_waiters(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    """Request/acknowledge: ``waiters`` coroutines, each ``await (await producer.send(...))`` per record."""
    topic = spec["topic"]
    keys, km, values, vm = _pools(keys, values)
    producer = _aiokafka(spec)
    await producer.start()
    try:
        await _aiokafka_warmup(producer, spec)
        send = producer.send

        async def acknowledged(i: int) -> None:
            await (await send(topic, value=values[i & vm], key=keys[i & km] if keys else None))

        return await _run_waiters(acknowledged, spec)
    finally:
        await producer.stop()


# --------------------------------------------------------------------------- faststream
async def faststream_waiters(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    """faststream's ``KafkaBroker.publish(value, topic, key=...)`` per record, by ``waiters`` coroutines.

    Its default (``no_confirm=False``) awaits the record's metadata, so each call
    is a request/acknowledge round trip; the producer under it is aiokafka's,
    configured through the broker's keyword arguments.
    """
    from faststream.kafka import KafkaBroker

    topic = spec["topic"]
    keys, km, values, vm = _pools(keys, values)
    broker = KafkaBroker(
        spec["bootstrap"].split(","),
        acks=1 if spec["acks"] == "1" else "all",
        linger_ms=spec["linger_ms"],
        compression_type=None if spec["compression"] == "none" else spec["compression"],
        enable_idempotence=spec["idempotence"],
    )
    await broker.start()
    try:
        warm = spec["warmup_topic"]
        await asyncio.gather(*[broker.publish(WARMUP, warm, partition=p) for p in range(spec["partitions"])])
        publish = broker.publish

        async def acknowledged(i: int) -> None:
            await publish(values[i & vm], topic, key=keys[i & km] if keys else None)

        return await _run_waiters(acknowledged, spec)
    finally:
        await broker.stop()


def _future_error(f: Any) -> Any:
    return f.exception() if not f.cancelled() else "cancelled"


async def aiokafka_paced(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    topic, n, rate = spec["topic"], spec["records"], spec["rate"]
    keys, km, values, vm = _pools(keys, values)
    tracker = Tracker(n, keep_times=bool(rate))
    ack = tracker.ack
    producer = _aiokafka(spec)
    await producer.start()
    try:
        await _aiokafka_warmup(producer, spec)
        send = producer.send

        async def submit(i: int) -> None:
            fut = await send(topic, value=values[i & vm], key=keys[i & km] if keys else None)
            fut.add_done_callback(lambda f: ack(i, _future_error(f)))

        clock = await _drive_async(submit, n, rate)
        await producer.flush()
        await _settle(tracker)
        elapsed, cpu = clock.stop()
    finally:
        await producer.stop()
    return tracker.outcome(clock.t0, rate, elapsed, cpu)


# --------------------------------------------------------------------------- confluent-kafka
def _librdkafka_conf(spec: dict[str, Any], memory_budget: bool) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": spec["bootstrap"],
        "acks": spec["acks"],
        "linger.ms": spec["linger_ms"],
        "compression.type": spec["compression"],
        "enable.idempotence": spec["idempotence"],
    }
    if "batch_size" in spec:  # the -16k clients: Java's batch.size, as aioproducer's default
        conf["batch.size"] = spec["batch_size"]
    if memory_budget:
        conf["queue.buffering.max.kbytes"] = spec["buffer_memory"] // 1024
        conf["queue.buffering.max.messages"] = 2_147_483_647
    return conf


async def _confluent_aio_warmup(producer: Any, spec: dict[str, Any]) -> None:
    await producer.list_topics(spec["topic"], timeout=10)
    warm = spec["warmup_topic"]
    futures = [await producer.produce(warm, value=WARMUP, partition=p) for p in range(spec["partitions"])]
    await producer.flush()
    await asyncio.gather(*futures)


async def confluent_aio_throughput(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    from confluent_kafka import Message
    from confluent_kafka.aio import AIOProducer

    topic, n = spec["topic"], spec["records"]
    keys, km, values, vm = _pools(keys, values)
    producer = AIOProducer(_librdkafka_conf(spec, False))
    try:
        await _confluent_aio_warmup(producer, spec)
        clock = Stopwatch().start()
        futures = await send_loop(producer.produce, topic, n, keys, km, values, vm)
        results = await collect(producer.flush, futures, spec["wait"])
        elapsed, cpu = clock.stop()
    finally:
        await producer.close()
    acked, errors, first = _count_futures(results, Message)
    return Outcome(n, acked, errors, first, elapsed, cpu_s=cpu)


async def confluent_aio_paced(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    from confluent_kafka.aio import AIOProducer

    topic, n, rate = spec["topic"], spec["records"], spec["rate"]
    keys, km, values, vm = _pools(keys, values)
    tracker = Tracker(n, keep_times=bool(rate))
    ack = tracker.ack
    producer = AIOProducer(_librdkafka_conf(spec, spec["mode"] == "memory"))
    try:
        await _confluent_aio_warmup(producer, spec)
        produce = producer.produce

        async def submit(i: int) -> None:
            fut = await produce(topic, value=values[i & vm], key=keys[i & km] if keys else None)
            fut.add_done_callback(lambda f: ack(i, _future_error(f)))

        clock = await _drive_async(submit, n, rate)
        await producer.flush()
        await _settle(tracker)  # futures are completed from the executor thread
        elapsed, cpu = clock.stop()
    finally:
        await producer.close()
    return tracker.outcome(clock.t0, rate, elapsed, cpu)


def _confluent_warmup(producer: Any, spec: dict[str, Any]) -> None:
    producer.list_topics(spec["topic"], timeout=10)
    delivered: list[Any] = []
    for p in range(spec["partitions"]):
        producer.produce(spec["warmup_topic"], WARMUP, partition=p, on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    if len(delivered) != spec["partitions"] or any(delivered):
        raise RuntimeError(f"warm-up failed: {delivered}")


def confluent_throughput(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    from confluent_kafka import Producer

    topic, n = spec["topic"], spec["records"]
    keys, km, values, vm = _pools(keys, values)
    producer = Producer(_librdkafka_conf(spec, False))
    _confluent_warmup(producer, spec)
    counts = [0, 0]
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            counts[0] += 1
        else:
            counts[1] += 1
            errors.append(err)

    produce, poll = producer.produce, producer.poll
    clock = Stopwatch().start()
    for i in range(n):
        while True:
            try:
                produce(topic, values[i & vm], keys[i & km] if keys else None, on_delivery=on_delivery)
                break
            except BufferError:  # the local queue is full: serve deliveries, then retry
                poll(0.001)
        poll(0)
    remaining = producer.flush(60)
    elapsed, cpu = clock.stop()
    outcome = Outcome(n, counts[0], counts[1], repr(errors[0]) if errors else None, elapsed, cpu_s=cpu)
    if remaining:
        outcome.notes.append(f"{remaining} records still queued after flush(60)")
    return outcome


#: Java's ``batch.size`` (aioproducer's default), given to librdkafka by the ``-16k`` clients: with
#: it a 10 KB record is a batch of its own in every client, as issue #42's bars measure them.
JAVA_BATCH_SIZE = 16384


def confluent_16k_throughput(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    return confluent_throughput({**spec, "batch_size": JAVA_BATCH_SIZE}, keys, values)


def confluent_16k_paced(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    return confluent_paced({**spec, "batch_size": JAVA_BATCH_SIZE}, keys, values)


async def confluent_aio_16k_throughput(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    return await confluent_aio_throughput({**spec, "batch_size": JAVA_BATCH_SIZE}, keys, values)


def confluent_paced(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    from confluent_kafka import Producer

    topic, n, rate = spec["topic"], spec["records"], spec["rate"]
    keys, km, values, vm = _pools(keys, values)
    tracker = Tracker(n, keep_times=bool(rate))
    ack = tracker.ack
    producer = Producer(_librdkafka_conf(spec, spec["mode"] == "memory"))
    _confluent_warmup(producer, spec)
    produce, poll = producer.produce, producer.poll

    def submit(i: int) -> None:
        while True:
            try:
                produce(topic, values[i & vm], keys[i & km] if keys else None,
                        on_delivery=lambda err, msg: ack(i, err))
                break
            except BufferError:
                poll(0.001)
        poll(0)

    clock = _drive_sync(submit, lambda: poll(0.001), n, rate)
    producer.flush(60)
    elapsed, cpu = clock.stop()
    return tracker.outcome(clock.t0, rate, elapsed, cpu)


# --------------------------------------------------------------------------- kafka-python
def _kafka_python(spec: dict[str, Any]) -> Any:
    from kafka import KafkaProducer

    return KafkaProducer(
        bootstrap_servers=spec["bootstrap"],
        acks=1 if spec["acks"] == "1" else "all",
        linger_ms=spec["linger_ms"],
        compression_type=None if spec["compression"] == "none" else spec["compression"],
        enable_idempotence=spec["idempotence"],
    )


def _kafka_python_warmup(producer: Any, spec: dict[str, Any]) -> None:
    producer.partitions_for(spec["topic"])
    futures = [producer.send(spec["warmup_topic"], value=WARMUP, partition=p) for p in range(spec["partitions"])]
    producer.flush()
    for f in futures:
        f.get(timeout=30)


def kafka_python_throughput(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    topic, n = spec["topic"], spec["records"]
    keys, km, values, vm = _pools(keys, values)
    producer = _kafka_python(spec)
    try:
        _kafka_python_warmup(producer, spec)
        send = producer.send
        futures: list[Any] = []
        append = futures.append
        clock = Stopwatch().start()
        if keys:
            for i in range(n):
                append(send(topic, value=values[i & vm], key=keys[i & km]))
        else:
            for i in range(n):
                append(send(topic, value=values[i & vm]))
        producer.flush()
        elapsed, cpu = clock.stop()
    finally:
        producer.close()
    acked = sum(1 for f in futures if f.is_done and f.succeeded())
    failed = [f for f in futures if not (f.is_done and f.succeeded())]
    first = None
    if failed:
        first = repr(failed[0].exception) if failed[0].is_done else "not completed"
    return Outcome(n, acked, len(failed), first, elapsed, cpu_s=cpu)


def kafka_python_paced(spec: dict[str, Any], keys: list[bytes] | None, values: list[bytes]) -> Outcome:
    topic, n, rate = spec["topic"], spec["records"], spec["rate"]
    keys, km, values, vm = _pools(keys, values)
    tracker = Tracker(n, keep_times=bool(rate))
    ack = tracker.ack
    producer = _kafka_python(spec)
    try:
        _kafka_python_warmup(producer, spec)
        send = producer.send

        def submit(i: int) -> None:
            f = send(topic, value=values[i & vm], key=keys[i & km] if keys else None)
            f.add_callback(lambda md: ack(i, None))
            f.add_errback(lambda exc: ack(i, exc))

        clock = _drive_sync(submit, lambda: time.sleep(0.001), n, rate)
        producer.flush()
        elapsed, cpu = clock.stop()
    finally:
        producer.close()
    return tracker.outcome(clock.t0, rate, elapsed, cpu)


# --------------------------------------------------------------------------- registry
@dataclass(frozen=True, slots=True)
class Client:
    name: str  # as shown in the table
    is_async: bool
    throughput: Callable[..., Any] | None
    paced: Callable[..., Any] | None
    waiters: Callable[..., Any] | None = None  # the request/acknowledge mode (concurrent waiters)


CLIENTS: dict[str, Client] = {
    "aioproducer": Client("aioproducer", True, aioproducer_throughput, aioproducer_paced, aioproducer_waiters),
    "aioproducer-bulk": Client("aioproducer (bulk)", True, aioproducer_bulk_throughput, None),
    "aioproducer-counter": Client("aioproducer (shared on_delivery)", True, aioproducer_callback_throughput, None),
    "aioproducer-1mb": Client("aioproducer (batch.size 1 MB)", True, aioproducer_1mb_throughput, aioproducer_1mb_paced),
    "aiokafka": Client("aiokafka", True, aiokafka_throughput, aiokafka_paced, aiokafka_waiters),
    "faststream": Client("faststream KafkaBroker", True, None, None, faststream_waiters),
    "confluent-aio": Client("confluent AIOProducer", True, confluent_aio_throughput, confluent_aio_paced),
    "confluent": Client("confluent Producer (sync, C)", False, confluent_throughput, confluent_paced),
    "confluent-16k": Client("confluent Producer (C, batch.size 16 KB)", False, confluent_16k_throughput, confluent_16k_paced),
    "confluent-aio-16k": Client("confluent AIOProducer (batch.size 16 KB)", True, confluent_aio_16k_throughput, None),
    "kafka-python": Client("kafka-python", False, kafka_python_throughput, kafka_python_paced),
}
