"""Python function calls a record, in the peers' layout: the count that says how much Python a record costs.

Why: on the peers' worker at 10 KB the loop's time is spread over dozens of small Python
functions on the request's path, none above 2 % (``benchmarks/README.md``, issue #42), and a
timed run on this shared machine moves more than a step that removes a few of them. How often
each runs does not move with the load. The client of the peers' run (``--client``, by default
the shared ``on_delivery`` of ``aioproducer-counter``) sends ``--small`` and then ``--large``
records to a mock cluster in another process (its leaders spread, as in ``benchmarks/run.py``),
under ``cProfile``; the difference over the difference in records is a record's share in steady
state, start-up and warm-up cancelled out. Printed: the Python functions (``def``) and the
built-in ones called a record and a Produce request (requests counted by the native
``encode_produce_request``), and the functions called most, each with its count a record.

cProfile slows the client about twice, so requests may carry more records than in a timed run:
the counts compare trees, they do not predict a rate. Run each tree from its own directory.

    python -m benchmarks.call_count [--client aioproducer-counter] [--scenario large]
        [--small 2000] [--large 6000] [--top 40]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import os
import pstats
from typing import Any

from benchmarks.instructions import peers_layout
from benchmarks.scenarios import make_keys, make_values

#: (file, line, name) -> calls, as pstats keys its functions.
Counts = dict[tuple[str, int, str], int]


def profile_run(client_name: str, scenario: str, records: int) -> Counts:
    """Calls of each function in one run of ``records`` records (the client's whole run, warm-up included)."""
    from benchmarks.clients import CLIENTS

    client = CLIENTS[client_name]
    fn = client.paced if scenario.endswith("+cb") else client.throughput
    if fn is None or not client.is_async:
        raise SystemExit(f"{client_name} has no asyncio throughput run")
    with peers_layout(client_name, scenario, records, "calls") as spec:
        keys = make_keys() if spec["keyed"] else None
        values = make_values(spec["value_size"])
        profile = cProfile.Profile()
        profile.enable()
        outcome = asyncio.run(fn(spec, keys, values))
        profile.disable()
    if outcome.acked != records:
        raise SystemExit(f"{outcome.acked} of {records} acknowledged ({outcome.first_error})")
    stats: Any = getattr(pstats.Stats(profile), "stats")  # not in typeshed: {key: (cc, nc, tt, ct, callers)}
    return {key: value[1] for key, value in stats.items()}


def _label(key: tuple[str, int, str]) -> str:
    path, line, name = key
    return name if path == "~" else f"{name} ({os.path.basename(path)}:{line})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", default="aioproducer-counter")
    parser.add_argument("--scenario", default="large")
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--large", type=int, default=6000)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    small = profile_run(args.client, args.scenario, args.small)
    large = profile_run(args.client, args.scenario, args.large)
    n = args.large - args.small
    per_record = collections.Counter({key: (large.get(key, 0) - small.get(key, 0)) / n for key in large.keys() | small.keys()})
    python = sum(v for key, v in per_record.items() if key[0] != "~")
    builtin = sum(v for key, v in per_record.items() if key[0] == "~")
    requests = sum(v for key, v in per_record.items() if key[2].endswith("encode_produce_request>"))
    print(f"{python:.1f} Python calls and {builtin:.1f} built-in calls a record "
          f"({args.client}, {args.scenario}, {args.large} minus {args.small} records)")
    if requests:
        print(f"{1 / requests:.2f} records a Produce request: {python / requests:.1f} Python calls and "
              f"{builtin / requests:.1f} built-in calls a request")
    for key, calls in per_record.most_common(args.top):
        print(f"{calls:8.2f}  {_label(key)}")


if __name__ == "__main__":
    main()
