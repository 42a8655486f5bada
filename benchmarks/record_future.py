"""What a record future costs, step by step, in µs per record: the batch's own calls, no producer, no network.

Made for issue #28 (the native record future): each row times one step over ``--records``
100-byte keyed records appended to 16 KB batches, the best of ``--repeat`` runs, gc on, in CPU
time of this process (the machine is shared: wall time would count the others' turns).

- ``try_append, kept``: ``ProducerBatch.try_append`` (encode + make the future), futures kept;
- ``try_append, on_delivery``: the same with a callback (the future dropped, as callers do);
- ``complete``: ``ProducerBatch.complete`` of every batch (no done-callbacks), per record;
- ``complete + on_delivery``: completion that calls each record's callback;
- ``result``: ``result()`` of a completed record;
- ``done``: ``done()`` of a pending record;
- ``gather``: ``asyncio.gather`` over the futures, completed after it was called, to the results.

Run it with the interpreter of each build to compare (its ``aioproducer`` is the one imported):

    python benchmarks/record_future.py [--records N] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from typing import Any

from aioproducer.internals.batch import FutureRecordMetadata, ProducerBatch
from aioproducer.protocol import compression
from aioproducer.protocol.records import RecordBatchBuilder

VALUE = b"v" * 100
BATCH_SIZE = 16384


def _fill(loop: asyncio.AbstractEventLoop, keys: list[bytes], on_delivery: Any) -> tuple[list[ProducerBatch], list[FutureRecordMetadata]]:
    batches: list[ProducerBatch] = []
    futures: list[FutureRecordMetadata] = []
    batch = ProducerBatch("t", 0, RecordBatchBuilder(compression.NONE, BATCH_SIZE), 0.0, 0, loop)
    batches.append(batch)
    for key in keys:
        future = batch.try_append(1_700_000_000_000, key, VALUE, None, on_delivery)
        if future is None:
            batch = ProducerBatch("t", 0, RecordBatchBuilder(compression.NONE, BATCH_SIZE), 0.0, 0, loop)
            batches.append(batch)
            future = batch.try_append(1_700_000_000_000, key, VALUE, None, on_delivery)
            assert future is not None
        futures.append(future)
    return batches, futures


def _complete(batches: list[ProducerBatch]) -> None:
    """Complete and release each batch, as the sender does: release() breaks the batch <-> futures cycle."""
    offset = 0
    for batch in batches:
        count = batch.record_count
        batch.complete(offset, -1, None)
        batch.release()
        offset += count


def _best(repeat: int, records: int, run: Callable[[], float]) -> float:
    return min(run() for _ in range(repeat)) / records * 1e6


async def measure(records: int, repeat: int) -> dict[str, float]:
    loop = asyncio.get_running_loop()
    keys = [b"key-%d" % i for i in range(records)]
    delivered: list[Any] = []

    def on_delivery(metadata: Any, error: Any) -> None:
        delivered.append(metadata)

    def append_kept() -> float:
        t = time.process_time()
        batches, _ = _fill(loop, keys, None)
        elapsed = time.process_time() - t
        _complete(batches)
        return elapsed

    def append_callback() -> float:
        t = time.process_time()
        batches, _ = _fill(loop, keys, on_delivery)
        elapsed = time.process_time() - t
        _complete(batches)
        return elapsed

    def complete_plain() -> float:
        batches, _ = _fill(loop, keys, None)
        t = time.process_time()
        _complete(batches)
        return time.process_time() - t

    def complete_callback() -> float:
        batches, _ = _fill(loop, keys, on_delivery)
        delivered.clear()
        t = time.process_time()
        _complete(batches)
        elapsed = time.process_time() - t
        assert len(delivered) == records
        return elapsed

    def result() -> float:
        batches, futures = _fill(loop, keys, None)
        _complete(batches)
        t = time.process_time()
        for future in futures:
            future.result()
        return time.process_time() - t

    def done() -> float:
        batches, futures = _fill(loop, keys, None)
        t = time.process_time()
        for future in futures:
            future.done()
        elapsed = time.process_time() - t
        _complete(batches)
        return elapsed

    rows = {
        "try_append, kept": _best(repeat, records, append_kept),
        "try_append, on_delivery": _best(repeat, records, append_callback),
        "complete": _best(repeat, records, complete_plain),
        "complete + on_delivery": _best(repeat, records, complete_callback),
        "result": _best(repeat, records, result),
        "done": _best(repeat, records, done),
    }
    gathers: list[float] = []
    for _ in range(repeat):
        batches, futures = _fill(loop, keys, None)
        t = time.process_time()
        gathered = asyncio.gather(*futures)
        _complete(batches)
        results = await gathered
        gathers.append(time.process_time() - t)
        assert len(results) == records
    rows["gather"] = min(gathers) / records * 1e6
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    for name, cost in asyncio.run(measure(args.records, args.repeat)).items():
        print(f"{name:<26} {cost:6.3f} µs/record")


if __name__ == "__main__":
    main()
