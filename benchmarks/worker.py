"""One benchmark run in a fresh process: ``python -m benchmarks.worker '<spec as JSON>'``.

The orchestrator (:mod:`benchmarks.run`) starts one of these per client,
scenario and repeat, so no client inherits another's memory, threads or
imports. The last stdout line is the result as JSON; anything the client logs
goes to stderr.
"""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import time
from typing import Any

from benchmarks.clients import CLIENTS, Outcome, use_thread_cpu
from benchmarks.scenarios import make_keys, make_values

__all__ = ["run_spec"]


def _status_mb(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process from /proc, in MB.

    Not ``getrusage().ru_maxrss``: Linux carries it over fork and exec, so a
    worker would report at least its parent's peak.
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError(f"no {field} in /proc/self/status")


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * len(sorted_values)) - 1))
    return sorted_values[index]


def run_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """One run of ``spec``; its ``"cpu": "thread"`` counts the calling thread's CPU, not the process's."""
    client = CLIENTS[spec["client"]]
    if spec.get("cpu") == "thread":
        use_thread_cpu()
    keys = make_keys() if spec["keyed"] else None
    values = make_values(spec["value_size"])
    # Import the client's library before the baseline, so the baseline is "library loaded, idle".
    if spec["client"].startswith("aioproducer"):
        import aioproducer  # noqa: F401
    elif spec["client"] == "aiokafka":
        import aiokafka  # noqa: F401
    elif spec["client"] == "faststream":
        import faststream.kafka  # noqa: F401
    elif spec["client"].startswith("confluent"):
        import confluent_kafka.aio  # noqa: F401
    else:
        import kafka  # noqa: F401
    gc.collect()
    baseline = _status_mb("VmRSS")

    # A throughput run waiting on callbacks is the paced driver at no pace (rate 0).
    if spec["mode"] == "waiters":
        fn = client.waiters
    elif spec["mode"] == "throughput" and spec.get("wait") != "callbacks":
        fn = client.throughput
    else:
        fn = client.paced
    if fn is None:
        raise SystemExit(f"{spec['client']} has no {spec['mode']} mode")
    started = time.perf_counter()
    outcome: Outcome = asyncio.run(fn(spec, keys, values)) if client.is_async else fn(spec, keys, values)
    wall = time.perf_counter() - started

    peak = _status_mb("VmHWM")
    n = spec["records"]
    result: dict[str, Any] = {
        "offered": n,
        "acked": outcome.acked,
        "errors": outcome.errors,
        "first_error": outcome.first_error,
        "elapsed_s": outcome.elapsed_s,
        "wall_s": wall,
        "records_per_s": n / outcome.elapsed_s,
        "mb_per_s": n * spec["value_size"] / outcome.elapsed_s / 1e6,
        "rss_baseline_mb": baseline,
        "rss_peak_mb": peak,
        "notes": outcome.notes,
    }
    if outcome.cpu_s is not None:
        result["cpu_s"] = outcome.cpu_s
        result["cpu_us_per_record"] = outcome.cpu_s / n * 1e6
        result["cpu_clock"] = "thread" if spec.get("cpu") == "thread" else "process"
    if outcome.latencies_s is not None:
        lat = sorted(outcome.latencies_s)
        result["latency_ms"] = {
            "p50": _percentile(lat, 0.50) * 1e3,
            "p99": _percentile(lat, 0.99) * 1e3,
            "p999": _percentile(lat, 0.999) * 1e3,
            "max": lat[-1] * 1e3 if lat else float("nan"),
            "count": len(lat),
        }
    return result


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    result = run_spec(spec)
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
