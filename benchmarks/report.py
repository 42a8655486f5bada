"""Turn the raw runs into ``results.md`` (tables) and ``results.png`` (chart).

Every figure is the median over the repeats. The "vs aioproducer" column is
the median, over repeats, of the ratio to aioproducer *in the same repeat*
(same cluster process, same minute), so slow drift of the machine cancels out.
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
    "aiokafka": "aiokafka",
    "confluent-aio": "confluent AIOProducer",
    "confluent": "confluent Producer (sync)",
    "kafka-python": "kafka-python",
}
COLORS = {
    "aioproducer": "#1f77b4",
    "aioproducer-bulk": "#aec7e8",
    "aiokafka": "#ff7f0e",
    "confluent-aio": "#2ca02c",
    "confluent": "#98df8a",
    "kafka-python": "#d62728",
}
# What the ratio compares, per mode: (metric, unit label, what is better).
RATIO = {
    "throughput": ("records_per_s", "rec/s", "higher is faster"),
    "latency": ("p99", "p99", "lower is better"),
    "memory": ("rss_peak_mb", "RSS", "lower is better"),
}


def versions() -> dict[str, str]:
    out = {}
    for dist in ("aioproducer", "aiokafka", "confluent-kafka", "kafka-python", "lz4"):
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
    return out


def _metric(run: dict[str, Any], name: str) -> float:
    if name in ("p50", "p99", "p999"):
        return float(run["latency_ms"][name])
    return float(run[name])


def aggregate(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per scenario and client: medians over the good repeats, and the ratio to aioproducer."""
    rows = []
    good = [r for r in raw["runs"] if "crashed" not in r]
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
            if mode == "latency":
                for p in ("p50", "p99", "p999"):
                    row[p] = statistics.median(r["latency_ms"][p] for r in mine)
            ratios = [
                _metric(r, metric) / _metric(base[r["repeat"]], metric) for r in mine if r["repeat"] in base
            ]
            row["ratio"] = statistics.median(ratios) if ratios else None
            row["failed"] = sum(1 for r in raw["runs"] if r["scenario"] == name and r["client"] == client and r["problems"])
            rows.append(row)
    return rows


def _fmt(x: float | None, digits: int = 0) -> str:
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def markdown(raw: dict[str, Any]) -> str:
    meta = raw["meta"]
    rows = aggregate(raw)
    titles = {s["name"]: s for s in raw["scenarios"]}
    out = [
        "# aioproducer vs its peers",
        "",
        f"{meta['date']}, `os.cpu_count()` = {meta['cpu_count']}, Python {meta['python']}, {meta['platform']}; "
        f"median of {meta['repeat']} run(s){' (--quick)' if meta['quick'] else ''}; suite took {meta['duration_s']:.0f} s.",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()) + ".",
        "",
        "Against librdkafka's mock cluster (3 brokers, 6 partitions per topic, a fresh topic per run) in its own "
        "process on the same machine; each client in a fresh process. `linger.ms=5`, 8-byte keys. "
        "records/s and MB/s (values only) from the first send to the last acknowledgement; latency from each "
        "record's scheduled send time to its acknowledgement; peak RSS is the client process's `VmHWM`. "
        "**vs aioproducer**: the client's figure divided by aioproducer's from the same repeat "
        "(`rec/s`: >1 is faster; `p99`: <1 is lower latency; `RSS`: <1 is less memory).",
        "",
        "| Scenario | Client | records/s | MB/s | p50 ms | p99 ms | p999 ms | peak RSS MB | vs aioproducer |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
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
        out.append(
            f"| {s['title']} ({s['records']:,}) | {LABELS[row['client']]}{mark} | {rate} | {_fmt(row['mb_per_s'], 1)} "
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
        "buffer_memory=32 MB)`; `fut = await producer.send(...)` per record, futures kept, `flush()`, "
        "`asyncio.gather(*futures)`.",
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
        "- Latency and memory scenarios count acknowledgements in callbacks (`on_delivery`, `add_done_callback`, "
        "`add_callback`/`add_errback`) instead of keeping futures.",
        "",
        "Before the clock starts, every client delivers one record to each partition of a separate warm-up topic "
        "(broker connections, idempotent producer id and metadata in place for all alike).",
        "",
        "Every run is checked: acknowledged = offered, errors = 0, and the sum of the topic's high watermarks "
        "on the cluster = offered.",
        "",
    ]
    for name, why in meta.get("skipped", {}).items():
        out.append(f"- Skipped **{name}**: {why}.")
    if meta.get("failures"):
        out += ["", "## FAILURES", ""] + [f"- {f}" for f in meta["failures"]]
    out.append("")
    return "\n".join(out)


def chart(raw: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = aggregate(raw)
    meta = raw["meta"]
    titles = {s["name"]: s["title"] for s in raw["scenarios"]}
    fig, axes = plt.subplots(2, 2, figsize=(15, 10))
    fig.suptitle(
        f"aioproducer vs peers — librdkafka mock cluster, {meta['date']}, cpu_count={meta['cpu_count']}, "
        f"median of {meta['repeat']}{' (quick)' if meta['quick'] else ''}",
        fontsize=12,
    )
    clients = [c for c in LABELS if any(r["client"] == c for r in rows)]

    def grouped(ax: Any, scenario_names: list[str], key: str, ylabel: str, title: str, log: bool) -> None:
        width = 0.8 / max(1, len(clients))
        for j, client in enumerate(clients):
            xs, ys = [], []
            for i, name in enumerate(scenario_names):
                for r in rows:
                    if r["scenario"] == name and r["client"] == client and r.get(key) is not None:
                        xs.append(i + (j - (len(clients) - 1) / 2) * width)
                        ys.append(r[key])
            bars = ax.bar(xs, ys, width, label=LABELS[client], color=COLORS[client])
            for bar, y in zip(bars, ys):
                text = f"{y / 1000:.0f}k" if y >= 10_000 else (f"{y:.0f}" if y >= 10 else f"{y:.1f}")
                ax.annotate(text, (bar.get_x() + bar.get_width() / 2, y), ha="center", va="bottom", fontsize=7,
                            rotation=90, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(range(len(scenario_names)))
        ax.set_xticklabels([titles[n].replace(", ", "\n", 1) for n in scenario_names], fontsize=8)
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=10)
        if log:
            ax.set_yscale("log")
        ax.margins(y=0.25)
        ax.grid(axis="y", alpha=0.3)

    tput = [s["name"] for s in raw["scenarios"] if s["mode"] == "throughput"]
    if tput:
        grouped(axes[0][0], tput, "records_per_s", "records/s (log)", "Throughput (higher is better)", True)
        handles, labels = axes[0][0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper center", ncol=len(labels), fontsize=9, bbox_to_anchor=(0.5, 0.955),
                   frameon=False)
    lat = next((s["name"] for s in raw["scenarios"] if s["mode"] == "latency"), None)
    ax = axes[0][1]
    if lat:
        width = 0.8 / max(1, len(clients))
        for j, client in enumerate(clients):
            row = next((r for r in rows if r["scenario"] == lat and r["client"] == client), None)
            if row is None:
                continue
            xs = [i + (j - (len(clients) - 1) / 2) * width for i in range(3)]
            ys = [row["p50"], row["p99"], row["p999"]]
            bars = ax.bar(xs, ys, width, label=LABELS[client], color=COLORS[client])
            for bar, y in zip(bars, ys):
                ax.annotate(f"{y:.1f}", (bar.get_x() + bar.get_width() / 2, y), ha="center", va="bottom",
                            fontsize=7, rotation=90, xytext=(0, 2), textcoords="offset points")
        ax.set_xticks(range(3))
        ax.set_xticklabels(["p50", "p99", "p99.9"])
        ax.set_yscale("log")
        ax.set_ylabel("send → ack, ms (log)")
        ax.set_title(f"Latency: {titles[lat]} (lower is better)", fontsize=10)
        ax.margins(y=0.25)
        ax.grid(axis="y", alpha=0.3)
    mem = next((s["name"] for s in raw["scenarios"] if s["mode"] == "memory"), None)
    ax = axes[1][0]
    if mem:
        mrows = [r for r in rows if r["scenario"] == mem]
        names = [LABELS[r["client"]] for r in mrows]
        bars = ax.barh(names, [r["rss_peak_mb"] for r in mrows], color=[COLORS[r["client"]] for r in mrows],
                       label="peak")
        ax.barh(names, [r["rss_baseline_mb"] for r in mrows], color="#00000033", label="idle baseline")
        for bar, r in zip(bars, mrows):
            ax.annotate(f"{r['rss_peak_mb']:.0f} MB", (bar.get_width(), bar.get_y() + bar.get_height() / 2),
                        va="center", fontsize=8, xytext=(3, 0), textcoords="offset points")
        ax.invert_yaxis()
        ax.set_xlabel("peak RSS, MB (grey: idle baseline)")
        ax.set_title(f"Memory: {titles[mem]} (lower is better)", fontsize=10)
        ax.margins(x=0.15)
        ax.grid(axis="x", alpha=0.3)
    ax = axes[1][1]
    part = raw.get("partitioner")
    if part:
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
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(path, dpi=110)
    plt.close(fig)
