"""A client's instructions per record in the peers' layout: the measure the machine's load does not move.

Why: on the shared 2-core machine one tree's rate moves by ±12 % from run to run in the `large`
scenario even with the mock's layout fixed (``benchmarks/README.md``, "Caveats"), more than any
single step of issue #42 is worth. Callgrind counts the instructions a process executes, which
the load does not change. Each run is ``benchmarks.worker`` (the peers' client, warm-up and all)
under ``valgrind --tool=callgrind`` against a mock cluster in another process, its leaders
spread (``--spread-leaders``), once with ``--small`` records and once with ``--large``; the
difference over the difference in records is the cost of a record in steady state, start-up and
warm-up cancelled out. Printed per tree: the event loop's thread (the main one) and the whole
process, per record.

Callgrind runs the client about 50 times slower, so the broker answers at once by comparison
and requests carry fewer records than in a timed run: the counts compare trees, they do not
predict a rate.

    python -m benchmarks.instructions [--client aioproducer-counter] [--scenario large]
        [--small 1000] [--large 3000] TREE [TREE ...]

A ``TREE`` is a directory holding an ``aioproducer`` package (with its built ``_native``), put
first on ``PYTHONPATH``; ``.`` is the working tree.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.cluster import ClusterProcess
from benchmarks.scenarios import scenarios

#: The peers' layout (benchmarks/run.py): three brokers, six partitions.
BROKERS = 3
PARTITIONS = 6


def _instructions(path: Path) -> int:
    """The ``summary:`` (or ``totals:``) line of one callgrind output file."""
    for line in path.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise RuntimeError(f"no summary in {path}")


@contextlib.contextmanager
def peers_layout(client: str, scenario: str, records: int, name: str) -> Iterator[dict[str, Any]]:
    """A mock cluster in the peers' layout, and the worker's spec of one run of ``records`` records on it.

    Its topic and warm-up topic are named after ``name`` and ``records`` (fresh ones per run).
    """
    plan = {s.name: s for s in scenarios(False)}[scenario]
    topic, warmup = f"{name}-{records}", f"{name}-warmup-{records}"
    with ClusterProcess([topic, warmup], PARTITIONS, BROKERS) as cluster:
        yield plan.as_dict() | {
            "client": client, "topic": topic, "warmup_topic": warmup, "partitions": PARTITIONS,
            "bootstrap": cluster.bootstrap_servers, "records": records,
        }


def run_once(tree: str, client: str, scenario: str, records: int, out_dir: Path) -> tuple[int, int]:
    """(main thread's, whole process's) instructions of one worker run of ``records`` records."""
    with peers_layout(client, scenario, records, "instr") as spec:
        prefix = out_dir / f"cg.{records}"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(tree).resolve()), str(Path.cwd())]))
        command = [
            "valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={prefix}",
            # -P: `-m` would put the working directory first on sys.path, ahead of PYTHONPATH, and
            # every tree would import the working directory's aioproducer (until stop 57, A/B runs
            # from the main tree measured that tree twice).
            sys.executable, "-P", "-m", "benchmarks.worker", json.dumps(spec),
        ]
        proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
        if proc.returncode != 0:
            raise SystemExit(f"{tree}: the run of {records} records failed: {proc.stderr[-2000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        if result["acked"] != records:
            raise SystemExit(f"{tree}: {result['acked']} of {records} acknowledged")
    files = sorted(out_dir.glob(f"cg.{records}-*"))
    main = _instructions(files[0])  # -01: the main thread, which runs the event loop
    return main, sum(_instructions(f) for f in files)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--client", default="aioproducer-counter")
    parser.add_argument("--scenario", default="large")
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=3000)
    args = parser.parse_args()
    for tree in args.trees:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            small = run_once(tree, args.client, args.scenario, args.small, out)
            large = run_once(tree, args.client, args.scenario, args.large, out)
        n = args.large - args.small
        print(f"{tree}: {(large[0] - small[0]) / n:,.0f} instructions a record on the loop's thread, "
              f"{(large[1] - small[1]) / n:,.0f} in the process ({args.client}, {args.scenario}, "
              f"{args.large} minus {args.small} records)", flush=True)


if __name__ == "__main__":
    main()
