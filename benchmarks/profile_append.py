"""Time RecordBatchBuilder.append / try_append / build, in µs per record.

Appending runs once per ``send()``, so its per-record cost bounds the
producer's throughput in pure Python. This script measures it in isolation:
200k records of 8-byte keys and 100-byte values, appended the way the
accumulator does (new builder when ``try_append`` says the batch is full,
``batch.size`` 16 KiB), plus a variant with two headers, a variant with one
unbounded builder (``append`` only), and ``build()`` per codec.

Each figure is the best of ``--repeat`` runs (the minimum is the least noisy
estimate of the code's own cost on a shared machine).

    PYTHONPATH=. python benchmarks/profile_append.py [--records N] [--repeat R] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from collections.abc import Callable, Sequence

from aioproducer.protocol import compression
from aioproducer.protocol.records import RecordBatchBuilder

KEY = b"k" * 8
VALUE = b"v" * 100
HEADERS: Sequence[tuple[str, bytes | None]] = [("trace-id", b"0123456789abcdef"), ("source", b"bench")]
BASE_TS = 1_700_000_000_000


def bench_append_unbounded(n: int, headers: Sequence[tuple[str, bytes | None]] | None) -> float:
    """One builder, ``append`` n times: the raw encoding cost."""
    builder = RecordBatchBuilder(compression.NONE, batch_size=1 << 40)
    append = builder.append
    key, value, ts = KEY, VALUE, BASE_TS
    start = time.perf_counter()
    for i in range(n):
        append(ts + (i >> 10), key, value, headers)
    return time.perf_counter() - start


def bench_try_append_batches(n: int, headers: Sequence[tuple[str, bytes | None]] | None) -> float:
    """``try_append`` into 16 KiB builders, opening a new one when full (the accumulator's loop)."""
    key, value, ts = KEY, VALUE, BASE_TS
    builder = RecordBatchBuilder(compression.NONE, batch_size=16384)
    batches = [builder]
    start = time.perf_counter()
    for i in range(n):
        if builder.try_append(ts + (i >> 10), key, value, headers) < 0:
            builder = RecordBatchBuilder(compression.NONE, batch_size=16384)
            builder.append(ts + (i >> 10), key, value, headers)
            batches.append(builder)
    return time.perf_counter() - start


def bench_has_room_then_append(n: int, headers: Sequence[tuple[str, bytes | None]] | None) -> float:
    """``has_room_for`` + ``append`` (Java's two-step shape), for comparison with ``try_append``."""
    key, value, ts = KEY, VALUE, BASE_TS
    builder = RecordBatchBuilder(compression.NONE, batch_size=16384)
    start = time.perf_counter()
    for i in range(n):
        t = ts + (i >> 10)
        if not builder.has_room_for(t, key, value, headers):
            builder = RecordBatchBuilder(compression.NONE, batch_size=16384)
        builder.append(t, key, value, headers)
    return time.perf_counter() - start


def bench_build(n: int, codec: int) -> float:
    """Fill 16 KiB batches with n records, then time build() of all of them."""
    builders = []
    builder = RecordBatchBuilder(codec, batch_size=16384)
    for i in range(n):
        if builder.try_append(BASE_TS + i, KEY, VALUE + i.to_bytes(4, "big"), None) < 0:
            builders.append(builder)
            builder = RecordBatchBuilder(codec, batch_size=16384)
            builder.append(BASE_TS + i, KEY, VALUE, None)
    builders.append(builder)
    start = time.perf_counter()
    for b in builders:
        b.build(1000, 0, 0)
    return time.perf_counter() - start


def best_of(repeat: int, fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--profile", action="store_true", help="cProfile one try_append run")
    args = parser.parse_args()
    n, r = args.records, args.repeat

    def us(seconds: float) -> str:
        return f"{seconds / n * 1e6:7.3f} µs/record"

    print(f"{n} records, key {len(KEY)} B, value {len(VALUE)} B, best of {r}")
    for label, hdrs in (("no headers", None), ("2 headers ", HEADERS)):
        print(f"append (one builder)        {label}: {us(best_of(r, lambda: bench_append_unbounded(n, hdrs)))}")
        print(f"try_append (16 KiB batches) {label}: {us(best_of(r, lambda: bench_try_append_batches(n, hdrs)))}")
        print(f"has_room_for + append       {label}: {us(best_of(r, lambda: bench_has_room_then_append(n, hdrs)))}")
    for codec, name in compression.CODEC_NAMES.items():
        try:
            compression.check_available(codec)
        except Exception as exc:  # noqa: BLE001 - report and skip a missing optional codec
            print(f"build {name:6}: skipped ({exc})")
            continue
        print(f"build {name:6} (16 KiB batches): {us(best_of(r, lambda: bench_build(n, codec)))}")

    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(bench_try_append_batches, n, None)
        pstats.Stats(profiler).sort_stats("tottime").print_stats(8)


if __name__ == "__main__":
    main()
