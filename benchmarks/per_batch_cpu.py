"""Issue #42's CPU per batch and request, measured as the bar says: 10 KB records, each its own batch, less the record's own cost.

Each round runs the peers' worker (``benchmarks/worker.py``, a fresh process) against a mock
cluster in the peers' layout (3 brokers, 6 partitions, in a process of its own), ``--records``
keyed records of ``--value-size`` bytes sent as each client's users send them (the shared
``on_delivery`` for aioproducer, ``produce(); poll(0)`` for the C ``Producer``), twice:

- at ``batch.size`` 16384 (Java's, aioproducer's default): a 10 KB record fills its batch, so a
  record costs its own work (the copy, the CRC, ``send()``, its report) plus one batch and that
  batch's share of a request;
- at ``batch.size`` 1 MB (``--large-batch``): about a hundred records share a batch, so a record
  costs its own work plus a hundredth of a batch.

The difference, scaled by ``k / (k - 1)`` for ``k`` records a large batch, is the CPU of one batch
and its share of a request. Counted two ways, each in its own runs: the event loop's thread
(``"cpu": "thread"``, asyncio clients only: the thread the issue's 45-55 µs were measured on)
and the whole process (every thread: the socket writer's, librdkafka's). Each round's own
difference, then the median over the rounds; every record must be acknowledged.

``--tree DIR`` runs the worker with ``DIR`` first on its path (a tree before a change; the mock
cluster is the working directory's); its ``benchmarks`` must have the ``"cpu"`` key (checked).

    python -m benchmarks.per_batch_cpu [--rounds 7] [--records 40000] [--clients aioproducer-counter,confluent]
                                       [--tree DIR] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.instructions import peers_layout
from benchmarks.process import run_json_process

#: Java's ``batch.size``, and one large enough for about a hundred 10 KB records.
SMALL_BATCH = 16_384
LARGE_BATCH = 1_048_576
#: A keyed record's bytes in a batch beyond its value, about (attributes, varints, the key).
RECORD_OVERHEAD = 30


def run_worker(tree: Path, client: str, records: int, batch_size: int, cpu: str, value_size: int) -> float:
    """CPU µs a record of one worker run of ``tree`` (``cpu``: ``"thread"`` or ``"process"``)."""
    with peers_layout(client, "large", records, f"pb-{batch_size}-{cpu}") as spec:
        spec = spec | {"batch_size": batch_size, "cpu": cpu, "value_size": value_size}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree.resolve()), str(Path.cwd())]))
        result = run_json_process([sys.executable, "-P", "-m", "benchmarks.worker", json.dumps(spec)], 600, env)
    if "crashed" in result:
        raise SystemExit(f"{client}: the worker failed: {result['crashed']}")
    if result.get("cpu_clock", "process") != cpu:
        raise SystemExit(f"{tree}: its worker counted the {result.get('cpu_clock', 'process')}'s CPU, not the {cpu}'s")
    if result["acked"] != records:
        raise SystemExit(f"{client}: {result['acked']} of {records} acknowledged ({result['first_error']})")
    return float(result["cpu_us_per_record"])


def per_batch(small: float, large: float, value_size: int) -> float:
    """One batch's CPU and its share of a request, from a record's at the two batch sizes."""
    k = LARGE_BATCH // (value_size + RECORD_OVERHEAD)
    return (small - large) * k / (k - 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--records", type=int, default=40_000)
    parser.add_argument("--value-size", type=int, default=10_240)
    parser.add_argument("--clients", default="aioproducer-counter,confluent")
    parser.add_argument("--tree", type=Path, default=Path.cwd())
    parser.add_argument("--out", type=Path, help="a directory for results.json")
    args = parser.parse_args()
    clients = args.clients.split(",")
    clocks = {client: ["thread", "process"] if client.startswith("aioproducer") else ["process"] for client in clients}
    runs: dict[str, list[dict[str, float]]] = {f"{c} {clock}": [] for c in clients for clock in clocks[c]}
    for round_no in range(1, args.rounds + 1):
        for client in clients:
            for clock in clocks[client]:
                small = run_worker(args.tree, client, args.records, SMALL_BATCH, clock, args.value_size)
                large = run_worker(args.tree, client, args.records, LARGE_BATCH, clock, args.value_size)
                batch = per_batch(small, large, args.value_size)
                runs[f"{client} {clock}"].append({"small": small, "large": large, "batch": batch})
                print(f"round {round_no} {client:22} {clock:7}: {small:6.2f} µs a record at {SMALL_BATCH}, "
                      f"{large:6.2f} at {LARGE_BATCH}: {batch:6.2f} µs a batch and its request", flush=True)
    print(f"\n{args.records:,} keyed records of {args.value_size} B, the peers' layout, {args.rounds} rounds "
          "(each round's own difference; medians):")
    for name, rows in runs.items():
        medians = {key: statistics.median(row[key] for row in rows) for key in ("small", "large", "batch")}
        each = ", ".join(f"{row['batch']:.1f}" for row in rows)
        print(f"  {name:30} a record {medians['small']:6.2f} µs at 16 KB, {medians['large']:6.2f} at 1 MB; "
              f"a batch and its request {medians['batch']:6.2f} µs ({each})")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        summary: dict[str, Any] = {"records": args.records, "value_size": args.value_size, "runs": runs}
        (args.out / "results.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    main()
