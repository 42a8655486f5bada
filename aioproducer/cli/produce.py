"""``aioproducer produce``: records from stdin, one per line, as ``kafka-console-producer``.

Why stream with ``send()`` per line: input may be endless (``tail -f | ...``)
or larger than memory; ``send()`` returns once a record is queued and suspends
only when ``buffer.memory`` is full, so reading advances at the speed the
brokers take records and memory stays bounded. Outcomes are counted in
``on_delivery`` rather than by keeping a future per record. ``--sync`` waits
for each record's acknowledgement before reading the next line, as Kafka's
``--sync`` does (``send().get()``).

A line longer than ``max.request.size`` (or ``buffer.memory``) could never be
sent, so it is not even kept in memory: it fails on its own, with its line
number and length, and the run goes on (Kafka's tool has no line limit; its
send fails for such a record anyway, after holding all of it).

Exit status: 0 if every line was delivered; 1 if any line failed (a malformed
line, a ``send()`` error or a delivery error: each is counted, the run goes
on, and the summary names the first error); 2 for bad arguments or
configuration; 130 after Ctrl-C (SIGINT). The first Ctrl-C stops reading and
waits for the records already sent (as Kafka's tool, whose shutdown hook closes
its producer), then writes the summary; a second one gives up on them at once
(they count as failed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from dataclasses import dataclass

from aioproducer import Producer, RecordMetadata
from aioproducer.cli.common import (
    COMPRESSIONS,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    add_partitions_option,
    OneLineParser,
    UsageError,
    add_connection_options,
    check_config,
    config_secrets,
    configured_producer,
    embedded_cluster,
    integer,
    producer_config,
    redact,
    topic_name,
)
from aioproducer.cli.lines import LineError, LineFormat
from aioproducer.cli.progress import progress
from aioproducer.cli.properties import PropertiesError, load_properties, parse_assignment
from aioproducer.cli.stdin import Line, OversizedLine, read_lines
from aioproducer.errors import KafkaError

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Read records from stdin, one per line, and produce them to a topic, as
kafka-console-producer does (same option and --reader-property names). Without
--bootstrap-servers (or bootstrap.servers in the configuration), an embedded
mock cluster is started and the topic created there, for trying things out.
At end of input every record is flushed and a summary is written to stderr:
"delivered N, failed M". A line longer than max.request.size fails alone.
Exit status: 0 all delivered, 1 some failed, 2 bad arguments or configuration,
130 after Ctrl-C (the first waits for what was sent, then writes the summary)."""

EPILOG = """\
line format (--property NAME=VALUE):
  parse.key=true            split off a key at key.separator (default: tab)
  parse.headers=true        split off headers first, at headers.delimiter (default: tab);
                            headers are separated by headers.separator (default: ,) and
                            their keys by headers.key.separator (default: :)
  null.marker=TEXT          a key, value or header value equal to TEXT is null
  ignore.error=true         a line missing a separator is not an error

examples:
  printf 'k1:v1\\nk2:v2\\n' | aioproducer produce --bootstrap-servers localhost:9092 \\
      --topic orders --property parse.key=true --property key.separator=:
  printf 'trace:abc,src:web\\tk1\\tvalue\\n' | aioproducer produce --topic orders \\
      --property parse.headers=true --property parse.key=true
  aioproducer produce --bootstrap-server broker:9093 --topic orders \\
      --producer.config client.properties --producer-property acks=1 \\
      --compression-codec zstd < records.txt

configuration precedence: built-in defaults (linger.ms=5) < --command-config <
--command-property < the dedicated options (--bootstrap-servers, --compression-codec,
--timeout, --request-required-acks, --batch-size, --max-block-ms, ...), each used only
when given. Kafka's older names are accepted: --producer.config, --producer-property,
--property (not together with their new names).
line format: --reader-config FILE < --reader-property (or --property)."""

#: What the command sets unless configured otherwise: a little lingering batches piped input.
#: (Kafka's console producer lingers 1000 ms, its --timeout default: an interactive line would
#: wait a second; we keep the Java producer's other defaults too, e.g. request.timeout.ms 30000
#: rather than the tool's 1500, and retries unbounded within delivery.timeout.ms rather than 3.)
DEFAULTS = {"linger.ms": "5"}

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

#: kafka-console-producer's options that set one producer key: (option, key, metavar, minimum, maximum).
#: As in Kafka, a given option overrides the key from --command-config/--command-property.
KEY_OPTIONS = [
    ("--timeout", "linger.ms", "MS", 0, LONG_MAX),
    ("--batch-size", "batch.size", "BYTES", 0, INT_MAX),
    ("--max-partition-memory-bytes", "batch.size", "BYTES", 0, INT_MAX),
    ("--max-block-ms", "max.block.ms", "MS", 0, LONG_MAX),
    ("--max-memory-bytes", "buffer.memory", "BYTES", 1, LONG_MAX),
    ("--message-send-max-retries", "retries", "N", 0, INT_MAX),
    ("--retry-backoff-ms", "retry.backoff.ms", "MS", 0, LONG_MAX),
    ("--request-timeout-ms", "request.timeout.ms", "MS", 1, INT_MAX),
    ("--metadata-expiry-ms", "metadata.max.age.ms", "MS", 0, LONG_MAX),
    ("--socket-buffer-size", "send.buffer.bytes", "BYTES", -1, INT_MAX),
]


def add_parser(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    """Register ``produce`` and its options."""
    parser = commands.add_parser(
        "produce",
        help="produce lines of stdin as records (like kafka-console-producer)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--topic", required=True, type=topic_name, help="the topic to produce to")
    add_connection_options(parser, "--producer-property", several=False)
    reader = parser.add_mutually_exclusive_group()
    reader.add_argument(
        "--reader-property",
        dest="reader_properties",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="line format setting (see below); repeatable; overrides --reader-config",
    )
    reader.add_argument(
        "--property",
        dest="properties",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="the older name of --reader-property",
    )
    parser.add_argument("--reader-config", metavar="FILE", help="a Java properties file of line format settings")
    parser.add_argument(
        "--sync", action="store_true", help="wait for each record's acknowledgement before reading the next line"
    )
    parser.add_argument(
        "--request-required-acks",
        dest="acks",
        choices=["all", "-1", "0", "1"],
        help="acks (default: all, as -1)",
    )
    for option, key, metavar, low, high in KEY_OPTIONS:
        parser.add_argument(option, type=integer(option, low, high), metavar=metavar, help=f"sets {key}")
    parser.add_argument(
        "--compression-codec",
        "--compression",
        dest="compression",
        nargs="?",
        const="gzip",
        choices=COMPRESSIONS,
        help="compression.type (given without a value: gzip, as Kafka's tool)",
    )
    add_partitions_option(parser, default=6)
    parser.add_argument("--no-progress", action="store_true", help="no progress display on stderr")
    parser.set_defaults(run=run)


@dataclass
class Tally:
    """Counts of one run; ``on_delivery`` is the producer callback that feeds it."""

    read: int = 0
    delivered: int = 0
    failed: int = 0
    first_error: str | None = None
    interrupted: bool = False

    def fail(self, error: str) -> None:
        self.failed += 1
        if self.first_error is None:
            self.first_error = error

    def on_delivery(self, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        if error is None:
            self.delivered += 1
        else:
            self.fail(f"{type(error).__name__}: {error}")

    def describe(self) -> str:
        return f"read {self.read}, delivered {self.delivered}, failed {self.failed}"

    def summary(self) -> str:
        text = f"delivered {self.delivered}, failed {self.failed}"
        if self.interrupted:
            text += f"; interrupted after {self.read} lines read"
        return text if self.first_error is None else f"{text}; first error: {self.first_error}"


def _line_format(args: argparse.Namespace) -> LineFormat:
    """The line format: --reader-config, then --reader-property (or --property) over it."""
    option = "--reader-property" if args.reader_properties else "--property"
    try:
        properties = load_properties(args.reader_config) if args.reader_config else {}
        properties.update(parse_assignment(p, option) for p in args.reader_properties or args.properties)
        return LineFormat.from_properties(properties)
    except (PropertiesError, ValueError) as exc:
        raise UsageError(str(exc)) from exc


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    """The producer keys the dedicated options set (only those given)."""
    overrides = {} if args.compression is None else {"compression.type": args.compression}
    if args.bootstrap_servers:
        overrides["bootstrap.servers"] = args.bootstrap_servers
    if args.acks is not None:
        overrides["acks"] = args.acks
    for option, key, *_ in KEY_OPTIONS:
        value = getattr(args, option[2:].replace("-", "_"))
        if value is not None:
            overrides[key] = str(value)
    return overrides


class _Run:
    """One run of the command in the event loop: read, send, and Ctrl-C handling."""

    def __init__(self, config: dict[str, str], args: argparse.Namespace, fmt: LineFormat, tally: Tally, max_line: int) -> None:
        self.config, self.args, self.fmt, self.tally, self.max_line = config, args, fmt, tally, max_line
        self.reading: asyncio.Task[None] | None = None
        self.producer: Producer | None = None
        self.abandoning: asyncio.Task[None] | None = None  # held: the loop keeps only weak references

    async def main(self) -> None:
        """Send every line of stdin, then flush; every outcome lands in ``tally``."""
        loop = asyncio.get_running_loop()
        async with Producer(self.config) as producer:
            self.producer = producer
            loop.add_signal_handler(signal.SIGINT, self.interrupt)
            try:
                async with progress(sys.stderr, self.tally.describe, enabled=not self.args.no_progress):
                    self.reading = reading = asyncio.create_task(self.read(producer))
                    await asyncio.wait([reading])  # not `await reading`: only its own cancellation is Ctrl-C's
                    if not reading.cancelled():
                        reading.result()  # an error reading stdin
                    await producer.flush()
            finally:
                loop.remove_signal_handler(signal.SIGINT)

    def interrupt(self) -> None:
        """Ctrl-C: the first stops reading (what was sent is still delivered), a second abandons it."""
        tally = self.tally
        if not tally.interrupted:
            tally.interrupted = True
            if self.reading is not None:
                self.reading.cancel()
            return
        if self.producer is not None and self.abandoning is None:
            self.abandoning = asyncio.get_running_loop().create_task(self.producer.close(timeout=0))

    async def read(self, producer: Producer) -> None:
        async for lines in read_lines(sys.stdin.fileno(), self.max_line):
            for line in lines:
                self.tally.read += 1
                await self.send_line(producer, line)

    async def send_line(self, producer: Producer, line: Line) -> None:
        tally, number = self.tally, self.tally.read
        if isinstance(line, OversizedLine):
            tally.fail(
                f"line {number} is {line.length} bytes, more than a record may be "
                f"(max.request.size and buffer.memory allow {self.max_line}): not sent"
            )
            return
        try:
            key, value, headers = self.fmt.parse(line, number)
        except LineError as exc:
            tally.fail(str(exc))
            return

        def done(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            if error is None:
                tally.delivered += 1
            else:
                tally.fail(f"line {number}: {type(error).__name__}: {error}")

        try:
            future = await producer.send(self.args.topic, value=value, key=key, headers=headers, on_delivery=done)
        except KafkaError as exc:
            tally.fail(f"line {number}: {type(exc).__name__}: {exc}")
            return
        if self.args.sync:
            with contextlib.suppress(KafkaError):  # counted by done()
                await future


def run(args: argparse.Namespace) -> int:
    """Run the command; :class:`UsageError` for bad input (exit 2)."""
    fmt = _line_format(args)
    config_file, assignments, option = configured_producer(args, "--producer-property")
    config = producer_config(config_file, assignments, option, _overrides(args), DEFAULTS)
    settings = check_config(config)
    max_line = min(settings.max_request_size, settings.buffer_memory)
    tally = Tally()
    try:
        with embedded_cluster(config.get("bootstrap.servers"), args.topic, args.partitions, sys.stderr) as bootstrap:
            config["bootstrap.servers"] = bootstrap
            try:
                asyncio.run(_Run(config, args, fmt, tally, max_line).main())
            except KafkaError as exc:  # start() or close() failed: nothing more can be delivered
                tally.fail(f"{type(exc).__name__}: {exc}")
            except OSError as exc:  # reading stdin failed (not a closed stdout/stderr: main() handles that)
                if isinstance(exc, BrokenPipeError):
                    raise
                tally.fail(f"reading standard input: {exc}")
    except KeyboardInterrupt:  # before the handler was installed, or in the embedded cluster's start
        tally.interrupted = True
    print(redact(tally.summary(), config_secrets(config)), file=sys.stderr)
    if tally.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if tally.failed else EXIT_OK
