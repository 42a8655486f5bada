"""``aioproducer perf-test``: a throughput and latency test, as ``kafka-producer-perf-test``.

Output, in the format of Kafka 3.9's ``ProducerPerformance`` so that existing
scripts and habits carry over (facts of that tool, not its code):

* every reporting interval (5,000 ms), counting records acknowledged in the window::

    "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency."

* once at the end, over the whole run::

    "%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency,
     %.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th."

  (one line; ``%f`` is six decimals). Records/sec is ``1000 * count / elapsed_ms``;
  MB/sec is ``1000 * bytes / elapsed_ms / 2**20`` with ``bytes`` the value bytes;
  latency is whole milliseconds from just before ``send()`` to the acknowledgement
  (here: ``on_delivery``); avg is the mean, max the maximum. Percentile ``p``
  is element ``int(n * p)`` of the sorted latencies, where one record in
  ``N // min(N, 500000)`` is kept (every record up to 500,000).

As Kafka's tool, every record carries the same value, ``--record-size`` random
uppercase ASCII letters, and no key. ``--throughput T`` paces sends to about T
records/s (``-1``: as fast as possible). Records that fail are not counted as
sent; the first error goes to stderr and the exit status is 1.
``--reporting-interval`` (milliseconds) is this tool's addition, for short runs.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import string
import sys
import time
from dataclasses import dataclass, field

from aioproducer import Producer, RecordMetadata
from aioproducer.cli.common import EXIT_FAILED, EXIT_OK, OneLineParser, UsageError, add_connection_options, embedded_cluster, producer_config
from aioproducer.errors import KafkaError

__all__ = ["Stats", "add_parser", "run"]

DESCRIPTION = """\
Send N records of S bytes to a topic at a target rate and report throughput and
latency, as kafka-producer-perf-test does (same options and output format).
Without --bootstrap-servers (or bootstrap.servers in the configuration) an
embedded mock cluster is started: useful to try the tool, not to measure a
broker."""

EPILOG = """\
examples:
  aioproducer perf-test --topic perf --num-records 1000000 --record-size 100 \\
      --throughput -1 --producer-props bootstrap.servers=localhost:9092 acks=all linger.ms=5
  aioproducer perf-test --topic perf --num-records 50000 --record-size 1024 \\
      --throughput 10000 --producer.config client.properties --compression zstd

output: a line every reporting interval, then the totals with percentiles:
  50000 records sent, 9998.000400 records/sec (9.76 MB/sec), 1.52 ms avg latency,
  12.00 ms max latency, 1 ms 50th, 3 ms 95th, 6 ms 99th, 11 ms 99.9th."""

#: Most latencies kept for percentiles (as Kafka's tool: it samples beyond this).
MAX_SAMPLES = 500_000


def add_parser(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    """Register ``perf-test`` and its options."""
    parser = commands.add_parser(
        "perf-test",
        help="measure producer throughput and latency (like kafka-producer-perf-test)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--topic", required=True, help="the topic to produce to")
    parser.add_argument("--num-records", type=_count, required=True, metavar="N", help="records to send")
    parser.add_argument("--record-size", type=_count, required=True, metavar="S", help="bytes per record value")
    parser.add_argument(
        "--throughput", type=float, required=True, metavar="T", help="target records/s; -1: no limit"
    )
    add_connection_options(parser, "--producer-props", several=True)
    parser.add_argument(
        "--compression", "--compression-codec", dest="compression", choices=["gzip", "lz4", "none", "snappy", "zstd"]
    )
    parser.add_argument(
        "--reporting-interval", type=_count, default=5000, metavar="MS", help="progress line period (default: 5000)"
    )
    parser.add_argument(
        "--partitions", type=int, default=6, help="partitions of the topic on the embedded cluster (default: 6)"
    )
    parser.set_defaults(run=run)


def _count(text: str) -> int:
    """A positive integer option (argparse turns the ValueError into a usage error)."""
    value = int(text)
    if value <= 0:
        raise ValueError(text)
    return value


@dataclass
class Stats:
    """Acknowledged records, windowed and overall, as Kafka's tool accounts for them."""

    num_records: int
    interval_ms: int
    start: float = field(default_factory=time.monotonic)
    count: int = 0
    bytes: int = 0
    total_latency: int = 0
    max_latency: int = 0
    latencies: list[int] = field(default_factory=list)
    failed: int = 0
    first_error: str | None = None
    window_start: float = 0.0
    window_count: int = 0
    window_bytes: int = 0
    window_total: int = 0
    window_max: int = 0

    def __post_init__(self) -> None:
        self.window_start = self.start
        self.sampling = self.num_records // min(self.num_records, MAX_SAMPLES)

    def record(self, iteration: int, latency: int, size: int, now: float) -> None:
        """One acknowledged record; prints the window's line when the interval has passed."""
        self.count += 1
        self.bytes += size
        self.total_latency += latency
        self.max_latency = max(self.max_latency, latency)
        if iteration % self.sampling == 0:
            self.latencies.append(latency)
        self.window_count += 1
        self.window_bytes += size
        self.window_total += latency
        self.window_max = max(self.window_max, latency)
        if (now - self.window_start) * 1000 >= self.interval_ms:
            print(self.window_line(now), flush=True)
            self.window_start, self.window_count, self.window_bytes = now, 0, 0
            self.window_total, self.window_max = 0, 0

    def window_line(self, now: float) -> str:
        elapsed_ms = max((now - self.window_start) * 1000, 1e-3)
        return "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency." % (
            self.window_count,
            1000.0 * self.window_count / elapsed_ms,
            1000.0 * self.window_bytes / elapsed_ms / (1024 * 1024),
            self.window_total / max(self.window_count, 1),
            float(self.window_max),
        )

    def total_line(self, now: float) -> str:
        elapsed_ms = max((now - self.start) * 1000, 1e-3)
        ordered = sorted(self.latencies) or [0]
        p50, p95, p99, p999 = (ordered[int(len(ordered) * p)] for p in (0.5, 0.95, 0.99, 0.999))
        return (
            "%d records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, "
            "%d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th."
        ) % (
            self.count,
            1000.0 * self.count / elapsed_ms,
            1000.0 * self.bytes / elapsed_ms / (1024 * 1024),
            self.total_latency / max(self.count, 1),
            float(self.max_latency),
            p50,
            p95,
            p99,
            p999,
        )

    def fail(self, error: BaseException) -> None:
        self.failed += 1
        if self.first_error is None:
            self.first_error = f"{type(error).__name__}: {error}"


def _payload(size: int) -> bytes:
    """``size`` random uppercase letters: the value of every record, as Kafka's tool."""
    return "".join(random.choices(string.ascii_uppercase, k=size)).encode()


async def _pace(start: float, sent: int, throughput: float) -> None:
    """Wait until record ``sent`` is due at ``throughput`` records/s (no wait when unlimited)."""
    if throughput <= 0:
        return
    delay = start + sent / throughput - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)  # pacing to the target rate: the delay is the point


async def _perf(config: dict[str, str], args: argparse.Namespace, stats: Stats) -> None:
    payload = _payload(args.record_size)
    size = len(payload)
    async with Producer(config) as producer:
        stats.start = stats.window_start = time.monotonic()
        for i in range(args.num_records):
            await _pace(stats.start, i, args.throughput)
            sent_at = time.monotonic()

            def done(metadata: RecordMetadata | None, error: BaseException | None, i: int = i, sent_at: float = sent_at) -> None:
                if error is not None:
                    stats.fail(error)
                    return
                now = time.monotonic()
                stats.record(i, int((now - sent_at) * 1000), size, now)

            try:
                await producer.send(args.topic, value=payload, on_delivery=done)
            except KafkaError as exc:
                stats.fail(exc)
        await producer.flush()
        print(stats.total_line(time.monotonic()), flush=True)


def run(args: argparse.Namespace) -> int:
    """Run the command; :class:`UsageError` for bad input (exit 2)."""
    if args.throughput == 0:
        raise UsageError("--throughput must be positive, or -1 for no limit")
    overrides = {} if args.compression is None else {"compression.type": args.compression}
    if args.bootstrap_servers:
        overrides["bootstrap.servers"] = args.bootstrap_servers
    config = producer_config(args.producer_config, args.producer_props, "--producer-props", overrides)
    stats = Stats(args.num_records, args.reporting_interval)
    with embedded_cluster(config.get("bootstrap.servers"), args.topic, args.partitions, sys.stderr) as bootstrap:
        config["bootstrap.servers"] = bootstrap
        try:
            asyncio.run(_perf(config, args, stats))
        except KafkaError as exc:
            stats.fail(exc)
    if stats.failed:
        print(f"{stats.failed} records failed; first error: {stats.first_error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
