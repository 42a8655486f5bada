"""The benchmark suite: ``python -m benchmarks.run [--quick] [--repeat 3]``.

For every repeat and scenario it starts the mock cluster in a process of its
own (with one fresh 6-partition topic per client, created up front), runs each
client in turn in a fresh subprocess (:mod:`benchmarks.worker`; the client
order rotates between repeats), and checks every run twice: the client must
report every record acknowledged and none failed, and the topic's high
watermarks, read back from the cluster, must add up to exactly the records
offered. Before its clock starts, every client delivers one record to each
partition of a separate warm-up topic (connections, producer id, metadata).
Then the partitioner benchmark runs, and the report goes to
``benchmarks/results/`` (``results.md``, ``results.png``, ``results.json``).

Exit status 1, with a banner on stderr, if any record of any run was not
acknowledged, failed, duplicated, or a run crashed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import bench_partitioner
from benchmarks.cluster import ClusterProcess
from benchmarks.scenarios import Scenario, scenarios

__all__ = ["main"]

CLIENT_ORDER = ["aioproducer", "aioproducer-bulk", "aiokafka", "confluent-aio", "confluent", "kafka-python"]
PARTITIONS = 6
RESULTS = Path(__file__).resolve().parent / "results"


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _watermark_total(bootstrap: str, topic: str) -> int:
    """Records the cluster holds for ``topic``: the sum of its partitions' high watermarks."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check", "enable.auto.commit": False})
    try:
        return sum(
            consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(PARTITIONS)
        )
    finally:
        consumer.close()


def _run_worker(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(RESULTS.parent.parent), env.get("PYTHONPATH")]))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.worker", json.dumps(spec)],
            capture_output=True, text=True, timeout=timeout, env=env,
        )
    except subprocess.TimeoutExpired:
        return {"crashed": f"timed out after {timeout:.0f} s"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"crashed": f"exit {proc.returncode}: {proc.stderr.strip()[-2000:]}"}
    return json.loads(lines[-1])


def _check(result: dict[str, Any], offered: int, on_broker: int | None) -> list[str]:
    problems = []
    if "crashed" in result:
        return [f"crashed: {result['crashed']}"]
    if result["acked"] != offered:
        problems.append(f"acknowledged {result['acked']} of {offered}")
    if result["errors"]:
        problems.append(f"{result['errors']} delivery errors, first {result['first_error']}")
    if on_broker is not None and on_broker != offered:
        problems.append(f"the cluster holds {on_broker} records for {offered} offered")
    problems.extend(result.get("notes", []))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description="aioproducer vs its peers")
    parser.add_argument("--quick", action="store_true", help="fewer records and 1 repeat: a smoke test")
    parser.add_argument("--repeat", type=int, default=None, help="runs per client and scenario (default 3; --quick: 1)")
    parser.add_argument("--clients", default=",".join(CLIENT_ORDER), help="comma-separated subset")
    parser.add_argument("--scenarios", default=None, help="comma-separated subset of scenario names")
    parser.add_argument("--out", type=Path, default=RESULTS, help="output directory (default benchmarks/results)")
    args = parser.parse_args(argv)
    repeat = args.repeat or (1 if args.quick else 3)
    wanted = set(args.clients.split(","))
    clients = [c for c in CLIENT_ORDER if c in wanted]
    plan: list[Scenario] = scenarios(args.quick)
    if args.scenarios:
        names = set(args.scenarios.split(","))
        plan = [s for s in plan if s.name in names]

    from aioproducer import Producer

    from benchmarks.clients import bulk_method

    skipped: dict[str, str] = {}
    if "aioproducer-bulk" in clients and bulk_method(Producer) is None:
        clients.remove("aioproducer-bulk")
        skipped["aioproducer (bulk)"] = "aioproducer.Producer has neither send_many nor send_batch: row skipped"

    started = time.time()
    runs: list[dict[str, Any]] = []
    failures: list[str] = []
    for r in range(repeat):
        for scenario in plan:
            here = [c for c in clients if scenario.mode == "throughput" or c != "aioproducer-bulk"]
            shift = r % len(here)
            order = here[shift:] + here[:shift]  # rotate, so no client always runs first
            topic_of = {c: f"bench-{scenario.name}-{c}-r{r}" for c in here}
            warmup_of = {c: f"warmup-{scenario.name}-{c}-r{r}" for c in here}
            with ClusterProcess([*topic_of.values(), *warmup_of.values()], PARTITIONS) as cluster:
                for client in order:
                    spec = scenario.as_dict() | {
                        "client": client, "topic": topic_of[client], "warmup_topic": warmup_of[client],
                        "partitions": PARTITIONS, "bootstrap": cluster.bootstrap_servers,
                    }
                    timeout = 60 + scenario.records / 2_000  # kafka-python manages ~25k/s; 10x margin
                    result = _run_worker(spec, timeout)
                    on_broker = None if "crashed" in result else _watermark_total(cluster.bootstrap_servers, topic_of[client])
                    problems = _check(result, scenario.records, on_broker)
                    result.update(client=client, scenario=scenario.name, repeat=r, on_broker=on_broker, problems=problems)
                    runs.append(result)
                    line = f"[{time.time() - started:6.0f}s] r{r} {scenario.name:9s} {client:17s} "
                    if "crashed" in result:
                        line += "CRASHED"
                    else:
                        line += f"{result['records_per_s']:>10,.0f} rec/s  peak RSS {result['rss_peak_mb']:6.1f} MB"
                        if "latency_ms" in result:
                            lat = result["latency_ms"]
                            line += f"  p50/p99/p999 {lat['p50']:.1f}/{lat['p99']:.1f}/{lat['p999']:.1f} ms"
                    _log(line + ("  FAILED: " + "; ".join(problems) if problems else ""))
                    if problems:
                        failures.append(f"{scenario.name} / {client} / repeat {r}: " + "; ".join(problems))

    # The partitioner benchmark: aioproducer keyed vs keyless, in its own process and cluster.
    part_records = 20_000 if args.quick else 200_000
    with ClusterProcess(bench_partitioner.topics(repeat, "-bench"), PARTITIONS) as cluster:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(RESULTS.parent.parent), env.get("PYTHONPATH")]))
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_partitioner", "--json", "--records", str(part_records),
             "--repeat", str(repeat), "--tag=-bench", "--bootstrap-servers", cluster.bootstrap_servers],
            capture_output=True, text=True, timeout=600, env=env,
        )
    partitioner: dict[str, Any] | None = None
    if proc.stdout.strip():
        partitioner = json.loads(proc.stdout.strip().splitlines()[-1])
        _log(f"[{time.time() - started:6.0f}s] partitioner: keyed {partitioner['keyed']['send_us_per_record']:.2f}"
             f" µs/record, keyless {partitioner['keyless']['send_us_per_record']:.2f} µs/record")
        if partitioner["acked"] != partitioner["offered"] or partitioner["errors"]:
            failures.append(f"partitioner: acknowledged {partitioner['acked']} of {partitioner['offered']}")
    else:
        failures.append(f"partitioner benchmark crashed: {proc.stderr.strip()[-2000:]}")

    from benchmarks import report

    meta = {
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "quick": args.quick,
        "repeat": repeat,
        "duration_s": round(time.time() - started, 1),
        "versions": report.versions(),
        "skipped": skipped,
        "failures": failures,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    raw = {"meta": meta, "scenarios": [s.as_dict() for s in plan], "runs": runs, "partitioner": partitioner}
    (args.out / "results.json").write_text(json.dumps(raw, indent=1) + "\n")
    (args.out / "results.md").write_text(report.markdown(raw))
    report.chart(raw, args.out / "results.png")
    _log(f"wrote {args.out / 'results.md'}, results.png, results.json in {meta['duration_s']:.0f} s")

    if failures:
        banner = "!" * 78
        _log(f"\n{banner}\nBENCHMARK FAILED: not every record was acknowledged exactly once\n")
        for failure in failures:
            _log("  - " + failure)
        _log(banner)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
