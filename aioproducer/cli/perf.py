"""``aioproducer perf-test``: a throughput and latency test, as ``kafka-producer-perf-test``.

Output, in the format of Kafka's ``ProducerPerformance`` (4.x) so that existing
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

* ``--warmup-records W``: first "Warmup first W records. Steady state results will print
  after the complete test summary."; after record W, the windows count only the steady
  state (the first one is preceded by "In steady state."), and after the total line comes
  a second one, "N steady state records sent, ...", over the records after the warmup.
* ``--print-metrics``: after the totals, an empty line, "Metric Name   Value", then one
  "name : value" line per entry of ``Producer.metrics()``, sorted, names padded to one width
  (numbers with a fractional part as ``%.3f``, as Kafka prints its doubles).
* ``--payload-file F``: "Reading payloads from: <absolute path>" and "Number of messages
  read: N" first; every record then carries one of the payloads, drawn at random.

Values, as Kafka's tool: ``--record-size S`` random uppercase letters, different from record
to record (here drawn from a pool of up to 1,024 such values, 8 MiB at most, made once, so that
making them costs nothing per record and batches still compress as random letters do);
``--payload-monotonic`` the record's index in decimal; ``--payload-file`` one of its
payloads split at ``--payload-delimiter`` (a regular expression, as Java's ``Scanner`` takes
it; default newline; empty payloads are dropped). No key. ``--throughput T`` paces sends to
about T records/s (negative, as Kafka's -1: no limit).

Transactions, as Kafka's tool: on with ``--transactional-id``, ``--transaction-duration-ms``
or ``transactional.id`` in the configuration (the id defaults to ``performance-producer-``
and a random UUID, the duration to 3000 ms); a transaction begins before its first record
and is committed after the record at which the duration has passed, and at the end.

Records that fail are not counted as sent; the first error goes to stderr and the exit
status is 1. ``--reporting-interval`` (milliseconds) changes the window, as in Kafka 4.x.

Why the send loop yields to the event loop every :data:`YIELD_INTERVAL_S`: ``send()``
returns without suspending while ``buffer.memory`` has room, so a loop of sends alone never
lets the producer's sender task run. Unthrottled, it filled the whole buffer (32 MiB, about
300,000 records of 100 bytes) before the first batch left, and every record then waited for
the buffer to drain ahead of it: 0.5-1.3 s of average latency where Java's tool, whose
sender is a thread of its own, measured 0.1-0.2 s. Yielding once a millisecond lets batches
leave as they fill, as Java's do, at the cost of one event-loop turn per millisecond.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import re
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from aioproducer import Producer, RecordMetadata
from aioproducer.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    add_partitions_option,
    OneLineParser,
    UsageError,
    add_connection_options,
    add_logging_options,
    config_secrets,
    configured_producer,
    embedded_cluster,
    mock_wanted,
    integer,
    producer_config,
    redact,
    throughput,
    topic_name,
)
from aioproducer.errors import KafkaError

__all__ = ["Output", "Stats", "add_parser", "run"]

DESCRIPTION = """\
Send N records of S bytes to a topic at a target rate and report throughput and
latency, as kafka-producer-perf-test does (same options and output format).
Brokers are required (-b, or bootstrap.servers in the configuration), as for
Kafka's tool; --mock starts an embedded mock cluster instead: useful to try the
tool, not to measure a broker."""

EPILOG = """\
examples:
  aioproducer perf-test --topic perf --num-records 1000000 --record-size 100 \\
      --throughput -1 --command-property bootstrap.servers=localhost:9092 acks=all linger.ms=5
  aioproducer perf-test --topic perf --num-records 50000 --record-size 1024 \\
      --throughput 10000 --command-config client.properties --compression zstd
  aioproducer perf-test --topic perf --num-records 100000 --payload-file words.txt \\
      --throughput -1 --transaction-duration-ms 1000 --print-metrics

output: a line every reporting interval, then the totals with percentiles:
  50000 records sent, 9998.000400 records/sec (9.76 MB/sec), 1.52 ms avg latency,
  12.00 ms max latency, 1 ms 50th, 3 ms 95th, 6 ms 99th, 11 ms 99.9th.

configuration precedence: --command-config < --command-property < --bootstrap-server,
--compression, --transactional-id. Kafka's older names --producer.config and
--producer-props are accepted (not together with the new ones)."""

#: Most latencies kept for percentiles (as Kafka's tool: it samples beyond this).
MAX_SAMPLES = 500_000
#: Transactions last this long unless --transaction-duration-ms says otherwise (Kafka's default).
DEFAULT_TRANSACTION_DURATION_MS = 3000
#: Prefix of the transactional id made up when none is given (Kafka's).
DEFAULT_TRANSACTION_ID_PREFIX = "performance-producer-"
#: The send loop lets the event loop run at least this often (see the module docstring).
YIELD_INTERVAL_S = 0.001
#: Distinct random values made for --record-size, and the memory they may take.
VALUE_POOL = 1024
VALUE_POOL_BYTES = 8 << 20
LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


def add_parser(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    """Register ``perf-test`` and its options."""
    parser = commands.add_parser(
        "perf-test",
        help="measure producer throughput and latency (like kafka-producer-perf-test)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-t", "--topic", required=True, type=topic_name, help="the topic to produce to")
    parser.add_argument(
        "--num-records", type=integer("--num-records", 1, LONG_MAX), required=True, metavar="N", help="records to send"
    )
    payload = parser.add_mutually_exclusive_group(required=True)
    payload.add_argument(
        "--record-size", type=integer("--record-size", 1, INT_MAX), metavar="S", help="bytes per record value"
    )
    payload.add_argument("--payload-file", metavar="FILE", help="UTF-8 text whose payloads (see --payload-delimiter) are sent at random")
    payload.add_argument("--payload-monotonic", action="store_true", help="each value is the record's index (0, 1, 2, ...)")
    parser.add_argument(
        "--payload-delimiter", default="\n", metavar="REGEX", help="what separates payloads in --payload-file (default: newline)"
    )
    parser.add_argument("--throughput", type=throughput, required=True, metavar="T", help="target records/s; -1: no limit")
    add_connection_options(parser, "--producer-props", several=True)
    parser.add_argument(
        "--compression", "--compression-codec", dest="compression", choices=["gzip", "lz4", "none", "snappy", "zstd"]
    )
    parser.add_argument("--print-metrics", action="store_true", help="print the producer's metrics at the end")
    parser.add_argument("--transactional-id", metavar="ID", help="send in transactions with this transactional.id")
    parser.add_argument(
        "--transaction-duration-ms",
        type=integer("--transaction-duration-ms", 1, LONG_MAX),
        metavar="MS",
        help="commit a transaction once it is this old (default with transactions: 3000)",
    )
    parser.add_argument(
        "--warmup-records",
        type=integer("--warmup-records", 0, LONG_MAX),
        default=0,
        metavar="W",
        help="the first W records are left out of a second, steady-state summary (default: 0)",
    )
    parser.add_argument(
        "--reporting-interval",
        type=integer("--reporting-interval", 1, LONG_MAX),
        default=5000,
        metavar="MS",
        help="progress line period (default: 5000)",
    )
    add_partitions_option(parser, default=6)
    add_logging_options(parser)
    parser.set_defaults(run=run)


class Output:
    """Standard output that notices a reader gone away (``| head -1``) instead of raising in callbacks.

    Why: lines are printed from delivery callbacks; a ``BrokenPipeError`` there is caught by the
    producer, logged, and the run goes on (it once went on, logging a traceback per record).
    ``closed`` tells the send loop to stop; :func:`run` then ends with ``EXIT_BROKEN_PIPE``.
    """

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.closed = False

    def line(self, text: str) -> None:
        if self.closed:
            return
        try:
            self.stream.write(text + "\n")
            self.stream.flush()
        except BrokenPipeError:
            self.closed = True


@dataclass
class Stats:
    """Acknowledged records, windowed and overall, as Kafka's tool accounts for them."""

    num_records: int
    interval_ms: int
    output: Output = field(default_factory=lambda: Output(sys.stdout))
    steady_state: bool = False
    start: float = field(default_factory=time.monotonic)
    count: int = 0
    bytes: int = 0
    total_latency: int = 0
    max_latency: int = 0
    latencies: list[int] = field(default_factory=list)
    iteration: int = 0
    silent: bool = False
    window_start: float = 0.0
    window_count: int = 0
    window_bytes: int = 0
    window_total: int = 0
    window_max: int = 0

    def __post_init__(self) -> None:
        self.window_start = self.start
        self.sampling = self.num_records // min(self.num_records, MAX_SAMPLES)

    def record(self, latency: int, size: int, now: float) -> None:
        """One acknowledged record; prints the window's line when the interval has passed."""
        self.count += 1
        self.bytes += size
        self.total_latency += latency
        self.max_latency = max(self.max_latency, latency)
        if self.iteration % self.sampling == 0:
            self.latencies.append(latency)
        self.iteration += 1
        self.window_count += 1
        self.window_bytes += size
        self.window_total += latency
        self.window_max = max(self.window_max, latency)
        if (now - self.window_start) * 1000 >= self.interval_ms:
            if self.steady_state and self.count == self.window_count:
                self.output.line("In steady state.")
            if not self.silent:
                self.output.line(self.window_line(now))
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
            "%d%s records sent, %f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, "
            "%d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th."
        ) % (
            self.count,
            " steady state" if self.steady_state else "",
            1000.0 * self.count / elapsed_ms,
            1000.0 * self.bytes / elapsed_ms / (1024 * 1024),
            self.total_latency / max(self.count, 1),
            float(self.max_latency),
            p50,
            p95,
            p99,
            p999,
        )


@dataclass
class Failures:
    """Records that failed: counted, the first one's error kept for stderr."""

    count: int = 0
    first: str | None = None

    def add(self, error: BaseException) -> None:
        self.count += 1
        if self.first is None:
            self.first = f"{type(error).__name__}: {error}"


def _random_letters(size: int, rng: random.Random) -> bytes:
    """``size`` random uppercase ASCII letters (uniform: bytes above 233 are redrawn)."""
    table = bytes(65 + i % 26 for i in range(256))
    out = bytearray()
    while len(out) < size:
        raw = rng.randbytes(size - len(out) + 64)
        out += raw.translate(table, bytes(range(234, 256)))  # 234 = 9 * 26: keep each letter equally likely
    return bytes(out[:size])


def value_source(args: argparse.Namespace, output: Output) -> Callable[[int], bytes]:
    """``value(i)`` for record ``i``: per --record-size, --payload-file or --payload-monotonic."""
    rng = random.Random(0)
    if args.payload_monotonic:
        return lambda i: str(i).encode()
    if args.payload_file is not None:
        payloads = _read_payloads(args.payload_file, args.payload_delimiter, output)
        choice = rng.choice
        return lambda i: choice(payloads)
    size = args.record_size
    count = max(1, min(VALUE_POOL, VALUE_POOL_BYTES // size))
    pool = _random_letters(size * count, rng)
    values = [pool[k * size : (k + 1) * size] for k in range(count)]
    return lambda i: values[i % count]


def _read_payloads(path: str, delimiter: str, output: Output) -> list[bytes]:
    """The payloads of --payload-file; :class:`UsageError` if unreadable or empty (as Kafka, which refuses both)."""
    file = Path(path)
    try:
        pattern = re.compile(delimiter)
    except re.error as exc:
        raise UsageError(f"--payload-delimiter is not a valid regular expression: {exc}") from exc
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--payload-file {path!r} cannot be read as UTF-8 text: {exc}") from exc
    payloads = [piece.encode() for piece in pattern.split(text) if piece]
    if not payloads:
        raise UsageError(f"--payload-file {path!r} has no payload (empty, or only delimiters)")
    output.line(f"Reading payloads from: {file.absolute()}")  # after the checks: a usage error prints nothing else
    output.line(f"Number of messages read: {len(payloads)}")
    return payloads


async def _pace(start: float, sent: int, rate: float, clock: Callable[[], float]) -> None:
    """Wait until record ``sent`` is due at ``rate`` records/s (above 0)."""
    delay = start + sent / rate - clock()
    if delay > 0:
        await asyncio.sleep(delay)  # pacing to the target rate: the delay is the point


@dataclass
class Plan:
    """What one run does, from the options (see :func:`run`)."""

    topic: str
    num_records: int
    rate: float
    warmup: int
    transaction_ms: int | None
    print_metrics: bool
    value: Callable[[int], bytes]
    #: Seconds, for latencies, windows, pacing and transactions (a test passes its own).
    clock: Callable[[], float] = time.monotonic
    #: What makes the producer (a test passes a stand-in).
    make_producer: Callable[[dict[str, str]], Producer] = Producer


class _Transactions:
    """Kafka's tool's transactions: begin before a record if none is open, commit once one is old enough."""

    def __init__(self, producer: Producer, duration_ms: int) -> None:
        self.producer, self.duration_s = producer, duration_ms / 1000
        self.started: float | None = None

    def before_send(self, now: float) -> None:
        if self.started is None:
            self.producer.begin_transaction()
            self.started = now

    async def after_send(self, sent_at: float) -> None:
        if self.started is not None and sent_at - self.started >= self.duration_s:
            await self.end()

    async def end(self) -> None:
        if self.started is not None:
            self.started = None
            await self.producer.commit_transaction()


async def _perf(config: dict[str, str], plan: Plan, stats: Stats, failures: Failures) -> Stats | None:
    """Send every record, then print the totals (and metrics); the steady-state stats, if any.

    One loop with everything it needs in locals: its own cost per record is part of what is
    measured, so the rare cases (warmup's end, transactions, pacing) are tested cheaply.
    """
    output, clock, topic, value_of, rate = stats.output, plan.clock, plan.topic, plan.value, plan.rate
    steady: Stats | None = None
    async with plan.make_producer(config) as producer:
        transactions = None if plan.transaction_ms is None else _Transactions(producer, plan.transaction_ms)
        send = producer.send
        stats.start = stats.window_start = last_yield = clock()
        for i in range(plan.num_records):
            if output.closed:
                # Nobody reads the results: end now, and quietly (the records close() gives up on
                # are the reader's choice, not a loss to warn of on stderr).
                logging.getLogger("aioproducer.producer").disabled = True
                await producer.close(timeout=0)
                return steady
            value = value_of(i)
            sent_at = clock()
            if transactions is not None:
                transactions.before_send(sent_at)
            if i == plan.warmup and i:
                steady = Stats(plan.num_records - i, stats.interval_ms, output, steady_state=True, start=sent_at)
                stats.silent = True
            size = len(value)

            # Made here, per record, with its own numbers as defaults: a factory function would also
            # make a cell per captured variable per record (measured: 1 us more per record).
            def done(
                metadata: RecordMetadata | None,
                error: BaseException | None,
                sent_at: float = sent_at,
                size: int = size,
                steady: Stats | None = steady,
            ) -> None:
                """The record's ``on_delivery``: latency from ``sent_at`` (before ``send()``) to now, as Kafka's tool."""
                if error is not None:
                    failures.add(error)
                    return
                now = clock()
                latency = int((now - sent_at) * 1000)
                stats.record(latency, size, now)
                if steady is not None:
                    steady.record(latency, size, now)

            try:
                await send(topic, value=value, on_delivery=done)
            except KafkaError as exc:
                failures.add(exc)
            if transactions is not None:
                await transactions.after_send(sent_at)
            if sent_at - last_yield >= YIELD_INTERVAL_S:
                await asyncio.sleep(0)  # let the sender task run (see the module docstring)
                last_yield = sent_at
            if rate > 0:
                await _pace(stats.start, i, rate, clock)
        if transactions is not None:
            await transactions.end()
        await producer.flush()
        now = clock()
        output.line(stats.total_line(now))
        if steady is not None:
            output.line(steady.total_line(now))
        if plan.print_metrics:
            print_metrics(producer.metrics(), output)
    return steady


def print_metrics(metrics: dict[str, Any], output: Output) -> None:
    """``metrics`` as Kafka's tools print theirs: a header, then sorted ``name : value`` lines."""
    if not metrics:
        return
    width = max(len(name) for name in metrics)
    output.line("")
    output.line(f"{'Metric Name':<{width}}   Value")
    for name in sorted(metrics):
        value = metrics[name]
        shown = f"{value:.3f}" if isinstance(value, float) else str(value)
        output.line(f"{name:<{width}} : {shown}")


def _plan(args: argparse.Namespace, config: dict[str, str], output: Output) -> Plan:
    """Check the options together, settle transactions in ``config``, make the values."""
    if args.warmup_records >= args.num_records:
        raise UsageError("--warmup-records must be fewer than --num-records")
    transactional = (
        args.transactional_id is not None or args.transaction_duration_ms is not None or "transactional.id" in config
    )
    transaction_ms: int | None = None
    if transactional:
        config["transactional.id"] = (
            args.transactional_id or config.get("transactional.id") or f"{DEFAULT_TRANSACTION_ID_PREFIX}{uuid.uuid4()}"
        )
        transaction_ms = args.transaction_duration_ms or DEFAULT_TRANSACTION_DURATION_MS
    return Plan(
        topic=args.topic,
        num_records=args.num_records,
        rate=args.throughput,
        warmup=args.warmup_records,
        transaction_ms=transaction_ms,
        print_metrics=args.print_metrics,
        value=value_source(args, output),
    )


def run(args: argparse.Namespace) -> int:
    """Run the command; :class:`UsageError` for bad input (exit 2)."""
    overrides = {} if args.compression is None else {"compression.type": args.compression}
    if args.bootstrap_servers:
        overrides["bootstrap.servers"] = args.bootstrap_servers
    if args.transactional_id is not None:
        overrides["transactional.id"] = args.transactional_id
    config_file, assignments, option = configured_producer(args, "--producer-props")
    config = producer_config(config_file, assignments, option, overrides)
    output = Output(sys.stdout)
    plan = _plan(args, config, output)
    if plan.warmup:
        output.line(f"Warmup first {plan.warmup} records. Steady state results will print after the complete test summary.")
    stats = Stats(args.num_records, args.reporting_interval, output)
    failures = Failures()
    mock = mock_wanted(args, config)
    with embedded_cluster(config.get("bootstrap.servers"), args.topic, args.partitions, sys.stderr, mock=mock) as bootstrap:
        config["bootstrap.servers"] = bootstrap
        try:
            asyncio.run(_perf(config, plan, stats, failures))
        except KafkaError as exc:
            failures.add(exc)
    if output.closed:
        raise BrokenPipeError("standard output was closed")  # main() ends quietly with EXIT_BROKEN_PIPE
    if failures.count:
        print(redact(f"{failures.count} records failed; first error: {failures.first}", config_secrets(config)), file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
