"""Turn the raw runs into ``results*.md`` (tables) and ``results*.png`` (chart).

Every figure is the median over the repeats. The "vs aioproducer" columns are
the median, over repeats, of the ratio to aioproducer *in the same repeat and
layout* (same cluster, same minute), so slow drift of the machine cancels out;
CPU µs/record and its ratio stand beside records/s ("–" where a client reports
no CPU time, as the Java peer).
A file holds one broker kind (the mock, or real Kafka with its 1- and 3-node
layouts, one table each); the real-Kafka report also sets its throughput
beside the mock's, read from ``results.json``.
"""

from __future__ import annotations

import statistics
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["versions", "markdown", "chart"]

LABELS = {
    "aioproducer": "aioproducer",
    "aioproducer-bulk": "aioproducer (bulk)",
    "aioproducer-1mb": "aioproducer (batch.size 1 MB)",
    "aioproducer-counter": "aioproducer (shared on_delivery)",
    "aiokafka": "aiokafka",
    "confluent-aio": "confluent AIOProducer",
    "confluent": "confluent Producer (sync)",
    "confluent-aio-16k": "confluent AIOProducer (batch.size 16 KB)",
    "confluent-16k": "confluent Producer (sync, batch.size 16 KB)",
    "kafka-python": "kafka-python",
    "java": "Java KafkaProducer",
    "java-counter": "Java KafkaProducer (shared callback)",
    "faststream": "faststream KafkaBroker",
}
COLORS = {
    "aioproducer": "#1f77b4",
    "aioproducer-bulk": "#aec7e8",
    "aioproducer-1mb": "#17becf",
    "aioproducer-counter": "#393b79",
    "aiokafka": "#ff7f0e",
    "confluent-aio": "#2ca02c",
    "confluent": "#98df8a",
    "confluent-aio-16k": "#bcbd22",
    "confluent-16k": "#dbdb8d",
    "kafka-python": "#d62728",
    "java": "#9467bd",
    "java-counter": "#c5b0d5",
    "faststream": "#8c564b",
}
#: Runs written before layouts existed were all against the mock.
_DEFAULT_LAYOUT = {"name": "mock", "title": "librdkafka mock cluster, 3 brokers", "kind": "mock", "brokers": 3,
                   "replication_factor": 3}
# What the ratio compares, per mode: (metric, unit label, what is better).
RATIO = {
    "throughput": ("records_per_s", "rec/s", "higher is faster"),
    "latency": ("p99", "p99", "lower is better"),
    "memory": ("rss_peak_mb", "RSS", "lower is better"),
    "waiters": ("records_per_s", "rec/s", "higher is faster"),
}


def versions() -> dict[str, str]:
    out = {}
    for dist in ("aioproducer", "aiokafka", "confluent-kafka", "kafka-python", "lz4", "faststream"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "(source tree)" if dist == "aioproducer" else "?"
    try:  # which aioproducer: the commit, and whether aioproducer/ had uncommitted changes
        import subprocess

        root = Path(__file__).resolve().parent.parent
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "aioproducer"], cwd=root,
                               capture_output=True, text=True)
        if head.returncode == 0:
            out["aioproducer"] = f"git {head.stdout.strip()}" + (" + uncommitted changes" if dirty.stdout.strip() else "")
    except OSError:
        pass
    try:
        import confluent_kafka

        out["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    try:  # the JVM the Java peer and the real brokers run on
        import subprocess

        done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        if done.returncode == 0 and done.stderr:
            out["java"] = done.stderr.splitlines()[0].replace('"', "")
    except OSError:
        pass
    return out


def layouts(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """The layouts of a results file, in run order (``[mock]`` for files from before layouts)."""
    found: list[dict[str, Any]] = raw["meta"].get("layouts") or [_DEFAULT_LAYOUT]
    return found


def _metric(run: dict[str, Any], name: str) -> float:
    if name in ("p50", "p99", "p999"):
        return float(run["latency_ms"][name])
    return float(run[name])


def aggregate(raw: dict[str, Any], layout: str = "mock") -> list[dict[str, Any]]:
    """One row per scenario and client of ``layout``: medians over the good repeats, and the ratio to aioproducer."""
    rows = []
    runs = [r for r in raw["runs"] if r.get("layout", "mock") == layout]
    good = [r for r in runs if "crashed" not in r]
    for scenario in raw["scenarios"]:
        name, mode = scenario["name"], scenario["mode"]
        metric = RATIO[mode][0]
        here = [r for r in good if r["scenario"] == name]
        base = {r["repeat"]: r for r in here if r["client"] == "aioproducer"}
        for client in LABELS:
            mine = [r for r in here if r["client"] == client]
            if not mine:
                continue
            row: dict[str, Any] = {"scenario": name, "mode": mode, "client": client, "n": len(mine)}
            for key in ("records_per_s", "mb_per_s", "rss_peak_mb", "rss_baseline_mb"):
                row[key] = statistics.median(r[key] for r in mine)
            if all("cpu_us_per_record" in r for r in mine):
                row["cpu_us_per_record"] = statistics.median(r["cpu_us_per_record"] for r in mine)
                cpu_ratios = [r["cpu_us_per_record"] / base[r["repeat"]]["cpu_us_per_record"]
                              for r in mine if r["repeat"] in base and "cpu_us_per_record" in base[r["repeat"]]]
                row["cpu_ratio"] = statistics.median(cpu_ratios) if cpu_ratios else None
            if mode == "latency":
                for p in ("p50", "p99", "p999"):
                    row[p] = statistics.median(r["latency_ms"][p] for r in mine)
            ratios = [
                _metric(r, metric) / _metric(base[r["repeat"]], metric) for r in mine if r["repeat"] in base
            ]
            row["ratio"] = statistics.median(ratios) if ratios else None
            row["failed"] = sum(1 for r in runs if r["scenario"] == name and r["client"] == client and r["problems"])
            row["jvm_options"] = mine[0].get("jvm_options")
            rows.append(row)
    return rows


def _fmt(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


_METHOD = (
    "Each client runs in a fresh process, one after the other; `linger.ms=5`, 8-byte keys. "
    "records/s and MB/s (values only) from the first send to the last acknowledgement; latency from each "
    "record's scheduled send time to its acknowledgement; **CPU µs/record**: the client process's CPU time "
    "(user + system, all its threads; not the cluster's) over the same span, per record (– where not measured: "
    "the Java peer); peak RSS is the client process's `VmHWM`. "
    "**vs aioproducer**: the client's figure divided by aioproducer's from the same repeat and layout "
    "(`rec/s`: >1 is faster; `p99`: <1 is lower latency; `RSS`: <1 is less memory); **CPU vs aioproducer** "
    "likewise for CPU µs/record (<1 costs less CPU per record)."
)


def _cpu_cells(row: dict[str, Any]) -> tuple[str, str]:
    """CPU µs/record and its ratio to aioproducer's, "–" where the client reported no CPU time."""
    cpu = row.get("cpu_us_per_record")
    if cpu is None:
        return "–", "–"
    if row["client"] == "aioproducer":
        return _fmt(cpu, 1), "1 (base)"
    ratio = row.get("cpu_ratio")
    return _fmt(cpu, 1), (f"{ratio:.2f}×" if ratio is not None else "–")


def _table(rows: list[dict[str, Any]], titles: dict[str, dict[str, Any]]) -> list[str]:
    out = [
        "| Scenario | Client | records/s | CPU µs/record | CPU vs aioproducer | MB/s | p50 ms | p99 ms | p999 ms "
        "| peak RSS MB | vs aioproducer |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        s = titles[row["scenario"]]
        unit = RATIO[row["mode"]][1]
        ratio = "1 (base)" if row["client"] == "aioproducer" else (
            f"{row['ratio']:.2f}× {unit}" if row["ratio"] is not None else "–")
        mark = " ⚠" if row["failed"] else ""
        if row["mode"] == "latency":
            rate = f"{_fmt(row['records_per_s'])} (offered {s['rate']:,})"
        else:
            rate = _fmt(row["records_per_s"])
        cpu, cpu_ratio = _cpu_cells(row)
        out.append(
            f"| {s['title']} ({s['records']:,}) | {LABELS[row['client']]}{mark} | {rate} | {cpu} | {cpu_ratio} "
            f"| {_fmt(row['mb_per_s'], 1)} "
            f"| {_fmt(row.get('p50'), 1)} | {_fmt(row.get('p99'), 1)} | {_fmt(row.get('p999'), 1)} "
            f"| {_fmt(row['rss_peak_mb'], 0)} | {ratio} |"
        )
    out.append("")
    mem = [r for r in rows if r["mode"] == "memory"]
    if mem:
        out.append(
            "Memory scenario, idle baseline (library imported, before the producer starts) → peak RSS, MB: "
            + "; ".join(f"{LABELS[r['client']]} {r['rss_baseline_mb']:.0f} → {r['rss_peak_mb']:.0f}" for r in mem)
            + "."
        )
        out.append("")
    return out


def _across(raw: dict[str, Any], reference: dict[str, Any] | None) -> list[str]:
    """Throughput and CPU per record, per client in every layout side by side: the mock's (from ``reference``)
    and each real one, one table each."""
    columns: list[tuple[str, list[dict[str, Any]]]] = []
    if reference is not None:
        columns.append((f"mock ({reference['meta']['date']})", aggregate(reference, "mock")))
    for layout in layouts(raw):
        columns.append((layout["name"], aggregate(raw, layout["name"])))
    titles = {s["name"]: s["title"] for s in raw["scenarios"]}
    out: list[str] = []
    for heading, value, ratio, digits in (("records/s", "records_per_s", "ratio", 0),
                                          ("CPU µs/record", "cpu_us_per_record", "cpu_ratio", 1)):
        lines: list[str] = []
        measured = False  # results from before CPU was measured have none: no CPU table
        for scenario in raw["scenarios"]:
            if scenario["mode"] != "throughput":
                continue
            for client in LABELS:
                cells, ran = [], False
                for _, rows in columns:
                    row = next((r for r in rows if r["scenario"] == scenario["name"] and r["client"] == client), None)
                    ran = ran or row is not None
                    if row is None or row.get(value) is None:
                        cells.append("–")
                    elif client == "aioproducer" or row.get(ratio) is None:
                        cells.append(_fmt(row[value], digits))
                        measured = True
                    else:
                        cells.append(f"{_fmt(row[value], digits)} ({row[ratio]:.2f}×)")
                        measured = True
                if ran:  # a client that ran but reported no CPU (the Java peer) shows "–"
                    lines.append(f"| {titles[scenario['name']]} | {LABELS[client]} | " + " | ".join(cells) + " |")
        if measured:
            out += [
                f"## Across brokers: {heading} (× aioproducer in the same layout)",
                "",
                "| Scenario | Client | " + " | ".join(name for name, _ in columns) + " |",
                "|---|---|" + "---:|" * len(columns),
                *lines,
                "",
            ]
    return out


def markdown(raw: dict[str, Any], reference: dict[str, Any] | None = None) -> str:
    """The report; ``reference`` (the mock's raw results) adds the across-brokers table to a real-Kafka one."""
    meta = raw["meta"]
    titles = {s["name"]: s for s in raw["scenarios"]}
    kind = meta.get("broker", "mock")
    out = [
        "# aioproducer vs its peers" + (" on a real Kafka broker" if kind == "kafka" else ""),
        "",
        f"{meta['date']}, `os.cpu_count()` = {meta['cpu_count']}, Python {meta['python']}, {meta['platform']}; "
        f"median of {meta['repeat']} run(s){' (--quick)' if meta['quick'] else ''}; suite took {meta['duration_s']:.0f} s.",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".",
        "",
    ]
    if kind == "kafka":
        config = ", ".join(f"`{k}={v}`" for k, v in meta.get("kafka_broker_config", {}).items())
        out += [
            f"Against Apache Kafka {meta.get('kafka_version', '?')} (KRaft, every node broker+controller, "
            "`aioproducer.testing.kafka`) on the same machine, started once per layout; 6 partitions per topic, "
            "a fresh topic per client, scenario and repeat (created before the scenario, deleted after it); "
            f"`min.insync.replicas=1`; {config}; the rest as `aioproducer.testing.kafka` sets it (broker heap "
            "`-Xms256m -Xmx512m`, 2 network and 2 I/O threads). " + _METHOD,
            "",
        ]
    else:
        out += [
            "Against librdkafka's mock cluster (3 brokers, 6 partitions per topic, a fresh topic per run) in its own "
            "process on the same machine. " + _METHOD,
            "",
        ]
    for layout in layouts(raw):
        rows = aggregate(raw, layout["name"])
        if kind == "kafka":
            out += [f"## {layout['title']} (`{layout['name']}`)", ""]
        out += _table(rows, titles)
    if kind == "kafka":
        out += _across(raw, reference)
    part = raw.get("partitioner")
    if part:
        out += [
            "## Partitioning cost (aioproducer, `benchmarks/bench_partitioner.py`)",
            "",
            f"{part['records']:,} records of 100 B per run, median of {part['repeat']}. `send()` loop alone "
            "(buffer large enough that it never waits, so the sender does not run inside it) and end to end.",
            "",
            "| | send() µs/record | records/s end to end |",
            "|---|---:|---:|",
            f"| keyed (murmur2) | {part['keyed']['send_us_per_record']:.2f} | {_fmt(part['keyed']['records_per_s'])} |",
            f"| keyless (sticky) | {part['keyless']['send_us_per_record']:.2f} | {_fmt(part['keyless']['records_per_s'])} |",
            "",
            f"Keys cost {part['keyed_extra_us_per_record']:+.2f} µs/record on the send path; "
            f"`partition_for_key` alone takes {part['murmur2_us_per_call']:.2f} µs per call.",
            "",
        ]
    out += [
        "## Settings per client",
        "",
        "- **aioproducer**: `Producer(bootstrap_servers, acks, linger_ms=5, compression_type, enable_idempotence, "
        "buffer_memory=32 MB)`; `fut = await producer.send(...)` per record, futures kept, then "
        "`asyncio.gather(*futures)` straight away (the headline rows); the `flush() then gather()` rows call "
        "`await producer.flush()` before the `gather()`; the `callbacks` rows pass `on_delivery` and keep no "
        "futures (aiokafka and AIOProducer: `add_done_callback` on each future, not kept), then `flush()`. "
        "The synchronous clients run the headline rows only.",
        "- **aiokafka**: `AIOKafkaProducer(acks, linger_ms=5, compression_type, enable_idempotence)`, same loop. "
        "It has no byte budget: `send()` waits while a partition's pending batch (`max_batch_size`=16384) is full.",
        "- **confluent AIOProducer** (`confluent_kafka.aio`): `{acks, linger.ms, compression.type, enable.idempotence}`, "
        "its defaults otherwise (buffers 1000 records in Python, then `produce_batch` + `poll(0)` in a thread pool). "
        "Memory scenario: `queue.buffering.max.kbytes=32768`.",
        "- **confluent Producer (sync)**: librdkafka in C, the ceiling: `produce(); poll(0)` per record, "
        "`poll(0.001)` and retry on `BufferError`, delivery counted in `on_delivery`. Memory scenario: "
        "`queue.buffering.max.kbytes=32768`, `queue.buffering.max.messages` lifted so bytes bind.",
        "- **kafka-python 2.2**: `KafkaProducer(acks, linger_ms=5, compression_type, enable_idempotence)`; 2.2 "
        "ignores `buffer_memory` (deprecated): nothing bounds its queue.",
    ]
    if any(r.get("client") == "java" for r in raw["runs"]):
        out.append(
            "- **Java KafkaProducer** (`benchmarks/java/ProducerBench.java`, kafka-clients "
            f"{meta.get('kafka_version', '')}, one JVM per run, `{meta.get('java_jvm_options', '')}`): "
            "`acks, linger.ms=5, compression.type, enable.idempotence` (set explicitly either way), "
            "`buffer.memory=32 MB`, `batch.size` default (16384), byte-array serializers; throughput: "
            "`send()` per record with futures kept, `flush()`, then `get()` on each; latency and memory: a "
            "callback per record. The same key and value pools, written by Python into a file. Its peak RSS "
            "is the JVM's (heap capped as above, plus the JIT, metaspace and thread stacks); the JIT starts "
            "cold, as every client starts in a fresh process."
        )
    out += [
        "- Latency and memory scenarios count acknowledgements in callbacks (`on_delivery`, `add_done_callback`, "
        "`add_callback`/`add_errback`) instead of keeping futures.",
        "",
        "Before the clock starts, every client delivers one record to each partition of a separate warm-up topic "
        "(broker connections, idempotent producer id and metadata in place for all alike).",
        "",
        "Every run is checked: acknowledged = offered, errors = 0, and the sum of the topic's high watermarks "
        "on the cluster = offered (read again for up to 30 s while below: a real broker's high watermark follows "
        "its followers).",
        "",
    ]
    for name, why in meta.get("skipped", {}).items():
        out.append(f"- Skipped **{name}**: {why}.")
    if meta.get("failures"):
        out += ["", "## FAILURES", ""] + [f"- {f}" for f in meta["failures"]]
    out.append("")
    return "\n".join(out)


def _annotate(ax: Any, bars: Any, ys: list[float], fmt: Any) -> None:
    for bar, y in zip(bars, ys):
        ax.annotate(fmt(y), (bar.get_x() + bar.get_width() / 2, y), ha="center", va="bottom", fontsize=7,
                    rotation=90, xytext=(0, 2), textcoords="offset points")


def _throughput_panel(ax: Any, rows: list[dict[str, Any]], raw: dict[str, Any], clients: list[str], title: str) -> None:
    titles = {s["name"]: s["title"] for s in raw["scenarios"]}
    # The headline way of waiting only (gather() straight after the sends): the tables have the others.
    names = [s["name"] for s in raw["scenarios"] if s["mode"] == "throughput" and s.get("wait", "gather") == "gather"]
    width = 0.8 / max(1, len(clients))
    for j, client in enumerate(clients):
        xs, ys = [], []
        for i, name in enumerate(names):
            for r in rows:
                if r["scenario"] == name and r["client"] == client:
                    xs.append(i + (j - (len(clients) - 1) / 2) * width)
                    ys.append(r["records_per_s"])
        bars = ax.bar(xs, ys, width, label=LABELS[client], color=COLORS[client])
        _annotate(ax, bars, ys, lambda y: f"{y / 1000:.0f}k" if y >= 10_000 else f"{y:.0f}")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([titles[n].replace(", ", "\n", 1) for n in names], fontsize=8)
    ax.set_ylabel("records/s (log)")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=10)
    ax.margins(y=0.25)
    ax.grid(axis="y", alpha=0.3)


def _latency_panel(ax: Any, rows: list[dict[str, Any]], clients: list[str], title: str) -> None:
    width = 0.8 / max(1, len(clients))
    for j, client in enumerate(clients):
        row = next((r for r in rows if r["mode"] == "latency" and r["client"] == client), None)
        if row is None:
            continue
        xs = [i + (j - (len(clients) - 1) / 2) * width for i in range(3)]
        ys = [row["p50"], row["p99"], row["p999"]]
        bars = ax.bar(xs, ys, width, label=LABELS[client], color=COLORS[client])
        _annotate(ax, bars, ys, lambda y: f"{y:.1f}")
    ax.set_xticks(range(3))
    ax.set_xticklabels(["p50", "p99", "p99.9"])
    ax.set_yscale("log")
    ax.set_ylabel("send → ack, ms (log)")
    ax.set_title(title, fontsize=10)
    ax.margins(y=0.25)
    ax.grid(axis="y", alpha=0.3)


def _memory_panel(ax: Any, rows: list[dict[str, Any]], title: str) -> None:
    mrows = [r for r in rows if r["mode"] == "memory"]
    names = [LABELS[r["client"]] for r in mrows]
    bars = ax.barh(names, [r["rss_peak_mb"] for r in mrows], color=[COLORS[r["client"]] for r in mrows])
    ax.barh(names, [r["rss_baseline_mb"] for r in mrows], color="#00000033")
    for bar, r in zip(bars, mrows):
        ax.annotate(f"{r['rss_peak_mb']:.0f} MB", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                    va="center", fontsize=8, xytext=(3, 0), textcoords="offset points")
    ax.invert_yaxis()
    ax.set_xlabel("peak RSS, MB (grey: idle baseline)")
    ax.set_title(title, fontsize=10)
    ax.margins(x=0.15)
    ax.grid(axis="x", alpha=0.3)


def _partitioner_panel(ax: Any, part: dict[str, Any]) -> None:
    kinds = ["keyed", "keyless"]
    bars = ax.bar(["keyed (murmur2)", "keyless (sticky)"], [part[k]["send_us_per_record"] for k in kinds],
                  color=[COLORS["aioproducer"], COLORS["aioproducer-bulk"]])
    for bar, k in zip(bars, kinds):
        ax.annotate(f"{part[k]['send_us_per_record']:.2f} µs\n{part[k]['records_per_s'] / 1000:.0f}k rec/s e2e",
                    (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=9)
    ax.set_ylabel("send() µs per record")
    ax.set_title("aioproducer partitioning cost: send() path, keyed vs keyless", fontsize=10)
    ax.margins(y=0.3)
    ax.grid(axis="y", alpha=0.3)


def chart(raw: dict[str, Any], path: Path) -> None:
    """One row of panels per layout: throughput, latency, memory (and, with the mock, partitioning cost)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    meta = raw["meta"]
    titles = {s["name"]: s["title"] for s in raw["scenarios"]}
    part = raw.get("partitioner")
    found = layouts(raw)
    ncols = 4 if part else 3
    fig, axes = plt.subplots(len(found), ncols, figsize=(6.5 * ncols, 5.5 * len(found)), squeeze=False)
    fig.suptitle(
        f"aioproducer vs peers, {meta['date']}, cpu_count={meta['cpu_count']}, "
        f"median of {meta['repeat']}{' (quick)' if meta['quick'] else ''}",
        fontsize=12,
    )
    lat = next((s["name"] for s in raw["scenarios"] if s["mode"] == "latency"), None)
    mem = next((s["name"] for s in raw["scenarios"] if s["mode"] == "memory"), None)
    for row_axes, layout in zip(axes, found):
        rows = aggregate(raw, layout["name"])
        clients = [c for c in LABELS if any(r["client"] == c for r in rows)]
        where = layout["title"]
        _throughput_panel(row_axes[0], rows, raw, clients, f"{where}\nThroughput (higher is better)")
        if lat:
            _latency_panel(row_axes[1], rows, clients, f"{where}\nLatency: {titles[lat]} (lower is better)")
        if mem:
            _memory_panel(row_axes[2], rows, f"{where}\nMemory: {titles[mem]} (lower is better)")
        if part:
            _partitioner_panel(row_axes[3], part)
    handles: dict[str, Any] = {}
    for ax in axes[:, 0]:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    fig.legend(list(handles.values()), list(handles), loc="upper center", ncol=len(handles), fontsize=9,
               bbox_to_anchor=(0.5, 1 - 0.045 / len(found)), frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.08 / len(found)))
    fig.savefig(path, dpi=100)
    plt.close(fig)


def request_ack_markdown(raw: dict[str, Any]) -> str:
    """The request/acknowledge report (``run --request-ack``): one table per layout, ratios to aioproducer.

    Each ratio is the median over repeats of the client's figure divided by
    aioproducer's in the same repeat (same cluster, same minute); the load
    averages say how busy the shared machine was while the runs went.
    """
    meta = raw["meta"]
    titles = {s["name"]: s for s in raw["scenarios"]}
    out = [
        "# Request/acknowledge: concurrent waiters, each awaiting its own record",
        "",
        f"{meta['date']}, {meta['cpu_count']} CPUs, Python {meta['python']}, {meta['repeat']} repeat(s); "
        + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()),
        "",
        "Each client runs in a fresh process; 64 coroutines each send a 100 B keyed record (acks=1) and await "
        "its acknowledgement before the next, until the scenario's records were sent. rec/s from the first "
        "send to the last acknowledgement; CPU is the process's user+system time over the same span, per record. "
        "**vs aioproducer**: median over repeats of the ratio to aioproducer's figure from the same repeat "
        "(rec/s: >1 is faster; CPU: >1 costs more).",
        "",
    ]
    for layout in layouts(raw):
        rows = aggregate(raw, layout["name"])
        out += [f"## {layout['title']}", "",
                "| scenario | client | rec/s | vs aioproducer | CPU µs/record | CPU vs aioproducer | runs |",
                "|---|---|---:|---:|---:|---:|---:|"]
        for row in rows:
            ratio = "1" if row["client"] == "aioproducer" else _fmt(row["ratio"], 2)
            cpu_ratio = "1" if row["client"] == "aioproducer" else _fmt(row.get("cpu_ratio"), 2)
            out.append(f"| {titles[row['scenario']]['title']} | {LABELS[row['client']]} | {_fmt(row['records_per_s'])} | "
                       f"{ratio} | {_fmt(row.get('cpu_us_per_record'))} | {cpu_ratio} | {row['n']}"
                       + (f" ({row['failed']} failed)" if row["failed"] else "") + " |")
        loads = [r["load_average"][0] for r in raw["runs"] if r.get("layout") == layout["name"] and r.get("load_average")]
        if loads:
            out += ["", f"1-minute load average during the runs: {min(loads):.2f} to {max(loads):.2f} "
                        f"(median {statistics.median(loads):.2f}) on {meta['cpu_count']} CPUs."]
        out.append("")
    if meta.get("failures"):
        out += ["## Failures", ""] + [f"- {f}" for f in meta["failures"]] + [""]
    return "\n".join(out)
