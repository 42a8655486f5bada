"""The benchmark suite: ``python -m benchmarks.run [--broker mock|kafka] [--quick] [--repeat 3]``.

``--broker`` picks the layouts (comma-separated): ``mock`` (the default) is
librdkafka's mock cluster, started afresh for every repeat and scenario with
one fresh 6-partition topic per client created up front; ``kafka`` means both
real-Kafka layouts, ``kafka1`` (1 node, replication factor 1) and ``kafka3``
(3 nodes, replication factor 3), each started once per invocation (a start
costs 11-18 s), with each scenario's topics created through the admin API
before it and deleted after it.

Each client runs in turn in a fresh subprocess (:mod:`benchmarks.worker`, or a
JVM for ``java``: :mod:`benchmarks.java_peer`; the client order rotates
between repeats), and every run is checked twice: the client must report every
record acknowledged and none failed, and the topic's high watermarks, read back
from the cluster, must add up to exactly the records offered. Before its clock
starts, every client delivers one record to each partition of a separate
warm-up topic (connections, producer id, metadata). With the mock, the
partitioner benchmark runs too. The report goes to ``benchmarks/results/``:
``results.{md,png,json}`` for the mock, ``results-kafka.{md,png,json}`` for
the real layouts, so a run of one never overwrites the other.

``--request-ack`` runs the request/acknowledge scenarios instead (64
coroutines each awaiting its own record, ``linger.ms`` 5 and 0; aioproducer,
aiokafka and faststream's ``KafkaBroker``), with the same checks, into
``benchmarks/results/request-ack/`` (``results.md`` for the mock,
``results-kafka.md`` for real Kafka; no chart).

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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks import bench_partitioner
from benchmarks.clients import CLIENTS
from benchmarks.cluster import ClusterProcess, create_topics, delete_topics
from benchmarks.java_peer import run_java
from benchmarks.process import run_json_process
from benchmarks.scenarios import Scenario, request_ack_scenarios, scenarios

__all__ = ["main"]

CLIENT_ORDER = ["aioproducer", "aioproducer-bulk", "aioproducer-counter", "aioproducer-1mb", "aiokafka", "confluent-aio", "confluent", "confluent-aio-16k", "confluent-16k", "kafka-python", "java", "java-counter"]
#: ``--request-ack``: the clients with a request/acknowledge driver (``Client.waiters``), and where the results go.
REQUEST_ACK_CLIENTS = ["aioproducer", "aiokafka", "faststream"]
PARTITIONS = 6
RESULTS = Path(__file__).resolve().parent / "results"


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _watermark_total(bootstrap: str, topic: str, expected: int, settle_s: float = 30.0) -> int:
    """Records the cluster holds for ``topic``: the sum of its partitions' high watermarks.

    A real broker moves a partition's high watermark only once every in-sync
    replica has the records, which with ``acks=1`` can be after the producer's
    last acknowledgement; so below ``expected`` this reads again until it is
    reached or ``settle_s`` passes. Above ``expected`` (duplicates) it returns at once.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-check", "enable.auto.commit": False})
    deadline = time.monotonic() + settle_s
    try:
        while True:
            total = sum(
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                for p in range(PARTITIONS)
            )
            if total >= expected or time.monotonic() > deadline:
                return total
            time.sleep(0.2)
    finally:
        consumer.close()


@dataclass(frozen=True, slots=True)
class Layout:
    """A broker setup the scenarios run against; ``kind`` is ``mock`` or ``kafka``."""

    name: str
    title: str
    kind: str
    brokers: int
    replication_factor: int


LAYOUTS = {
    "mock": Layout("mock", "librdkafka mock cluster, 3 brokers", "mock", 3, 3),
    "kafka1": Layout("kafka1", "Apache Kafka, 1 node, replication factor 1", "kafka", 1, 1),
    "kafka3": Layout("kafka3", "Apache Kafka, 3 nodes, replication factor 3", "kafka", 3, 3),
}
BROKER_ALIASES = {"kafka": ["kafka1", "kafka3"]}
#: Real brokers: Kafka's own defaults where the test harness (tuned for fast
#: failover tests) sets other values, so the broker does what a production one would.
KAFKA_BROKER_CONFIG = {
    "log.segment.bytes": 1 << 30,
    "replica.lag.time.max.ms": 30_000,
}
#: Kafka's Java client 4.3.1 never gets past ApiVersions with librdkafka's mock (see README).
_JAVA_ON_MOCK = ("Kafka's Java client 4.3.1 cannot use librdkafka's mock cluster: after ApiVersions it "
                 "finds no usable broker and rebootstraps until its 60 s metadata timeout")
MOCK_INCAPABLE = {"java": _JAVA_ON_MOCK, "java-counter": _JAVA_ON_MOCK}


def _layouts(spec: str) -> list[Layout]:
    names: list[str] = []
    for part in spec.split(","):
        for name in BROKER_ALIASES.get(part, [part]):
            if name not in LAYOUTS:
                raise SystemExit(f"--broker: unknown {name!r}; choose among mock, kafka, kafka1, kafka3")
            if name not in names:
                names.append(name)
    return [LAYOUTS[n] for n in names]


def _run_worker(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(RESULTS.parent.parent), env.get("PYTHONPATH")]))
    return run_json_process([sys.executable, "-m", "benchmarks.worker", json.dumps(spec)], timeout, env)


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


@contextmanager
def _layout_cluster(layout: Layout) -> Iterator[ClusterProcess | None]:
    """The real cluster of a ``kafka`` layout, up for the whole invocation; ``None`` for the mock."""
    if layout.kind == "mock":
        yield None
        return
    with ClusterProcess([], PARTITIONS, layout.brokers, kind="kafka",
                        replication_factor=layout.replication_factor, broker_config=KAFKA_BROKER_CONFIG) as cluster:
        yield cluster


@contextmanager
def _scenario_cluster(layout: Layout, shared: ClusterProcess | None, topics: list[str]) -> Iterator[str]:
    """Bootstrap servers for one scenario and repeat, with ``topics`` fresh on them.

    The mock is started for this scenario alone; on a real cluster the topics
    are created now and deleted afterwards.
    """
    if shared is None:
        with ClusterProcess(topics, PARTITIONS, layout.brokers) as cluster:
            yield cluster.bootstrap_servers
        return
    create_topics(shared.bootstrap_servers, topics, PARTITIONS, layout.replication_factor)
    try:
        yield shared.bootstrap_servers
    finally:
        delete_topics(shared.bootstrap_servers, topics)


def _run_client(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    if spec["client"] in ("java", "java-counter"):
        return run_java(spec, timeout)
    return _run_worker(spec, timeout)


def _run_layout(layout: Layout, plan: list[Scenario], clients: list[str], repeat: int,
                started: float) -> tuple[list[dict[str, Any]], list[str]]:
    """Every repeat and scenario against ``layout``; the runs, and what failed the checks."""
    runs: list[dict[str, Any]] = []
    failures: list[str] = []
    with _layout_cluster(layout) as shared:
        if shared is not None:
            _log(f"[{time.time() - started:6.0f}s] {layout.name}: {layout.title} up at {shared.bootstrap_servers}")
        for r in range(repeat):
            for scenario in plan:
                here = [c for c in clients if _runs(c, scenario)]
                shift = r % len(here)
                order = here[shift:] + here[:shift]  # rotate, so no client always runs first
                slug = scenario.name.replace("+", ".")  # '+' is not allowed in topic names
                topic_of = {c: f"bench-{layout.name}-{slug}-{c}-r{r}" for c in here}
                warmup_of = {c: f"warmup-{layout.name}-{slug}-{c}-r{r}" for c in here}
                with _scenario_cluster(layout, shared, [*topic_of.values(), *warmup_of.values()]) as bootstrap:
                    for client in order:
                        spec = scenario.as_dict() | {
                            "client": client, "topic": topic_of[client], "warmup_topic": warmup_of[client],
                            "partitions": PARTITIONS, "bootstrap": bootstrap,
                        }
                        timeout = 60 + scenario.records / 2_000  # kafka-python manages ~25k/s; 10x margin
                        result = _run_client(spec, timeout)
                        on_broker = (None if "crashed" in result
                                     else _watermark_total(bootstrap, topic_of[client], scenario.records))
                        problems = _check(result, scenario.records, on_broker)
                        result.update(client=client, scenario=scenario.name, repeat=r, layout=layout.name,
                                      on_broker=on_broker, problems=problems, load_average=_load_average())
                        runs.append(result)
                        _log(_progress(started, layout, r, scenario, client, result, problems))
                        if problems:
                            failures.append(f"{layout.name} / {scenario.name} / {client} / repeat {r}: "
                                            + "; ".join(problems))
    return runs, failures


def _runs(client: str, scenario: Scenario) -> bool:
    """Whether ``client`` takes part in ``scenario``: the bulk row is throughput with futures only, the
    1 MB batch row and the ``-16k`` rows throughput of records of 1 KB or more; the ``+flush`` and ``+cb`` variants are for
    the asyncio clients (the others have one way to wait)."""
    if scenario.mode == "waiters" or client == "faststream":
        known = CLIENTS.get(client)
        return scenario.mode == "waiters" and known is not None and known.waiters is not None
    if client == "aioproducer-bulk":
        return scenario.mode == "throughput" and scenario.wait != "callbacks"
    if client in ("aioproducer-counter", "java-counter"):  # one row per scenario (each waits one way)
        return scenario.mode == "throughput" and scenario.wait == "gather"
    if client == "aioproducer-1mb":
        return scenario.mode == "throughput" and scenario.value_size >= 1024
    if client.endswith("-16k"):  # librdkafka at Java's batch.size: the headline row of records of 1 KB or more
        return scenario.mode == "throughput" and scenario.wait == "gather" and scenario.value_size >= 1024
    if scenario.mode == "throughput" and scenario.wait != "gather":
        known = CLIENTS.get(client)  # the Java peer is not among them: synchronous
        return known is not None and known.is_async
    return True


def _progress(started: float, layout: Layout, r: int, scenario: Scenario, client: str, result: dict[str, Any],
              problems: list[str]) -> str:
    line = f"[{time.time() - started:6.0f}s] {layout.name:6s} r{r} {scenario.name:9s} {client:17s} "
    if "crashed" in result:
        line += "CRASHED"
    else:
        line += f"{result['records_per_s']:>10,.0f} rec/s  peak RSS {result['rss_peak_mb']:6.1f} MB"
        if "cpu_us_per_record" in result:
            line += f"  CPU {result['cpu_us_per_record']:.1f} µs/record"
        if "latency_ms" in result:
            lat = result["latency_ms"]
            line += f"  p50/p99/p999 {lat['p50']:.1f}/{lat['p99']:.1f}/{lat['p999']:.1f} ms"
    return line + ("  FAILED: " + "; ".join(problems) if problems else "")


def _partitioner(quick: bool, repeat: int, started: float, failures: list[str]) -> dict[str, Any] | None:
    """aioproducer keyed vs keyless (``bench_partitioner``), in its own process and mock cluster."""
    part_records = 20_000 if quick else 200_000
    with ClusterProcess(bench_partitioner.topics(repeat, "-bench"), PARTITIONS) as cluster:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(RESULTS.parent.parent), env.get("PYTHONPATH")]))
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks.bench_partitioner", "--json", "--records", str(part_records),
             "--repeat", str(repeat), "--tag=-bench", "--bootstrap-servers", cluster.bootstrap_servers],
            capture_output=True, text=True, timeout=600, env=env,
        )
    if not proc.stdout.strip():
        failures.append(f"partitioner benchmark crashed: {proc.stderr.strip()[-2000:]}")
        return None
    partitioner: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    _log(f"[{time.time() - started:6.0f}s] partitioner: keyed {partitioner['keyed']['send_us_per_record']:.2f}"
         f" µs/record, keyless {partitioner['keyless']['send_us_per_record']:.2f} µs/record")
    if partitioner["acked"] != partitioner["offered"] or partitioner["errors"]:
        failures.append(f"partitioner: acknowledged {partitioner['acked']} of {partitioner['offered']}")
    return partitioner


def _load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages at the end of a run (the machine may be shared)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run", description="aioproducer vs its peers")
    parser.add_argument("--broker", default="mock",
                        help="comma-separated layouts: mock (default), kafka (= kafka1,kafka3), kafka1, kafka3")
    parser.add_argument("--quick", action="store_true", help="fewer records and 1 repeat: a smoke test")
    parser.add_argument("--repeat", type=int, default=None, help="runs per client and scenario (default 3; --quick: 1)")
    parser.add_argument("--clients", default=None, help="comma-separated subset")
    parser.add_argument("--scenarios", default=None, help="comma-separated subset of scenario names")
    parser.add_argument("--request-ack", action="store_true",
                        help="the request/acknowledge scenarios (64 waiters, linger.ms 5 and 0) instead, "
                             f"{', '.join(REQUEST_ACK_CLIENTS)}; results in benchmarks/results/request-ack")
    parser.add_argument("--out", type=Path, default=None, help="output directory (default benchmarks/results)")
    args = parser.parse_args(argv)
    layouts = _layouts(args.broker)
    repeat = args.repeat or (1 if args.quick else 3)
    order = REQUEST_ACK_CLIENTS if args.request_ack else CLIENT_ORDER
    wanted = set((args.clients or ",".join(order)).split(","))
    clients = [c for c in order if c in wanted]
    plan: list[Scenario] = request_ack_scenarios(args.quick) if args.request_ack else scenarios(args.quick)
    if args.out is None:
        args.out = RESULTS / "request-ack" if args.request_ack else RESULTS
    if args.scenarios:
        names = set(args.scenarios.split(","))
        plan = [s for s in plan if s.name in names]

    from aioproducer import Producer

    from benchmarks.clients import bulk_method

    skipped: dict[str, str] = {}
    if "aioproducer-bulk" in clients and bulk_method(Producer) is None:
        clients.remove("aioproducer-bulk")
        skipped["aioproducer (bulk)"] = "aioproducer.Producer has neither send_many nor send_batch: row skipped"

    from benchmarks import report

    started = time.time()
    failures: list[str] = []
    args.out.mkdir(parents=True, exist_ok=True)
    for kind, stem in (("mock", "results"), ("kafka", "results-kafka")):
        mine = [layout for layout in layouts if layout.kind == kind]
        if not mine:
            continue
        kind_started = time.time()
        kind_skipped = dict(skipped)
        here = list(clients)
        if kind == "mock":
            for client, why in MOCK_INCAPABLE.items():
                if client in here:
                    here.remove(client)
                    kind_skipped[report.LABELS[client]] = why
        runs: list[dict[str, Any]] = []
        kind_failures: list[str] = []
        for layout in mine:
            layout_runs, layout_failures = _run_layout(layout, plan, here, repeat, started)
            runs += layout_runs
            kind_failures += layout_failures
        partitioner = (_partitioner(args.quick, repeat, started, kind_failures)
                       if kind == "mock" and not args.request_ack else None)
        failures += kind_failures
        meta = {
            "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "quick": args.quick,
            "repeat": repeat,
            "duration_s": round(time.time() - kind_started, 1),
            "load_average": _load_average(),
            "versions": report.versions(),
            "broker": kind,
            "layouts": [asdict(layout) for layout in mine],
            "skipped": kind_skipped,
            "failures": kind_failures,
        }
        if kind == "kafka":
            from aioproducer.testing.kafka import DEFAULT_KAFKA_VERSION

            from benchmarks.java_peer import JVM_OPTIONS

            meta["kafka_version"] = DEFAULT_KAFKA_VERSION
            meta["kafka_broker_config"] = {k: str(v) for k, v in KAFKA_BROKER_CONFIG.items()}
            meta["java_jvm_options"] = " ".join(JVM_OPTIONS)
        raw = {"meta": meta, "scenarios": [s.as_dict() for s in plan], "runs": runs, "partitioner": partitioner}
        reference = None
        if kind == "kafka" and (args.out / "results.json").exists():
            reference = json.loads((args.out / "results.json").read_text())  # the mock's, for comparison
        (args.out / f"{stem}.json").write_text(json.dumps(raw, indent=1) + "\n")
        if args.request_ack:
            (args.out / f"{stem}.md").write_text(report.request_ack_markdown(raw))
        else:
            (args.out / f"{stem}.md").write_text(report.markdown(raw, reference))
            report.chart(raw, args.out / f"{stem}.png")
        _log(f"wrote {args.out / stem}.md{'' if args.request_ack else ', .png'}, .json ({meta['duration_s']:.0f} s)")

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
