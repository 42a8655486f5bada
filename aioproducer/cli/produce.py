"""``aioproducer produce``: records from stdin, one per line, as ``kafka-console-producer``.

Why stream with ``send()`` per line: input may be endless (``tail -f | ...``)
or larger than memory; ``send()`` returns once a record is queued and suspends
only when ``buffer.memory`` is full, so reading advances at the speed the
brokers take records and memory stays bounded. Outcomes are counted in
``on_delivery`` rather than by keeping a future per record.

Exit status: 0 if every line was delivered; 1 if any line failed (a malformed
line, a ``send()`` error or a delivery error: each is counted, the run goes
on, and the summary names the first error); 2 for bad arguments or
configuration.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from aioproducer import Producer, RecordMetadata
from aioproducer.cli.common import (
    COMPRESSIONS,
    EXIT_FAILED,
    EXIT_OK,
    OneLineParser,
    UsageError,
    add_connection_options,
    embedded_cluster,
    producer_config,
)
from aioproducer.cli.lines import LineError, LineFormat
from aioproducer.cli.progress import progress
from aioproducer.cli.properties import PropertiesError, parse_assignment
from aioproducer.cli.stdin import read_lines
from aioproducer.errors import KafkaError

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Read records from stdin, one per line, and produce them to a topic, as
kafka-console-producer does (same --property names and defaults). Without
--bootstrap-servers (or bootstrap.servers in the configuration), an embedded
mock cluster is started and the topic created there, for trying things out.
At end of input every record is flushed and a summary is written to stderr:
"delivered N, failed M". Exit status: 0 all delivered, 1 some failed, 2 bad
arguments or configuration."""

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

configuration precedence: built-in defaults (linger.ms=5) < --producer.config <
--producer-property < --bootstrap-servers and --compression-codec."""

#: What the command sets unless configured otherwise: a little lingering batches piped input.
DEFAULTS = {"linger.ms": "5"}


def add_parser(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    """Register ``produce`` and its options."""
    parser = commands.add_parser(
        "produce",
        help="produce lines of stdin as records (like kafka-console-producer)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--topic", required=True, help="the topic to produce to")
    add_connection_options(parser, "--producer-property", several=False)
    parser.add_argument(
        "--property",
        dest="properties",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="line format setting (see below); repeatable",
    )
    parser.add_argument(
        "--compression-codec",
        "--compression",
        dest="compression",
        nargs="?",
        const="gzip",
        choices=COMPRESSIONS,
        help="compression.type (given without a value: gzip, as Kafka's tool)",
    )
    parser.add_argument(
        "--partitions", type=int, default=6, help="partitions of the topic on the embedded cluster (default: 6)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress display on stderr")
    parser.set_defaults(run=run)


@dataclass
class Tally:
    """Counts of one run; ``on_delivery`` is the producer callback that feeds it."""

    read: int = 0
    delivered: int = 0
    failed: int = 0
    first_error: str | None = None

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
        return text if self.first_error is None else f"{text}; first error: {self.first_error}"


def _line_format(properties: list[str]) -> LineFormat:
    try:
        return LineFormat.from_properties(dict(parse_assignment(p, "--property") for p in properties))
    except (PropertiesError, ValueError) as exc:
        raise UsageError(str(exc)) from exc


async def _produce(config: dict[str, str], topic: str, fmt: LineFormat, tally: Tally, show: bool) -> None:
    """Send every line of stdin, then flush; every outcome lands in ``tally``."""
    async with Producer(config) as producer:
        async with progress(sys.stderr, tally.describe, enabled=show):
            async for lines in read_lines(sys.stdin.fileno()):
                for line in lines:
                    tally.read += 1
                    await _send_line(producer, topic, fmt, line, tally)
            await producer.flush()


async def _send_line(producer: Producer, topic: str, fmt: LineFormat, line: bytes, tally: Tally) -> None:
    try:
        key, value, headers = fmt.parse(line, tally.read)
    except LineError as exc:
        tally.fail(str(exc))
        return
    try:
        await producer.send(topic, value=value, key=key, headers=headers, on_delivery=tally.on_delivery)
    except KafkaError as exc:
        tally.fail(f"{type(exc).__name__}: {exc}")


def run(args: argparse.Namespace) -> int:
    """Run the command; :class:`UsageError` for bad input (exit 2)."""
    import asyncio

    fmt = _line_format(args.properties)
    overrides = {} if args.compression is None else {"compression.type": args.compression}
    if args.bootstrap_servers:
        overrides["bootstrap.servers"] = args.bootstrap_servers
    config = producer_config(args.producer_config, args.producer_props, "--producer-property", overrides, DEFAULTS)
    tally = Tally()
    with embedded_cluster(config.get("bootstrap.servers"), args.topic, args.partitions, sys.stderr) as bootstrap:
        config["bootstrap.servers"] = bootstrap
        try:
            asyncio.run(_produce(config, args.topic, fmt, tally, not args.no_progress))
        except KafkaError as exc:  # start() or close() failed: nothing more can be delivered
            tally.fail(f"{type(exc).__name__}: {exc}")
    print(tally.summary(), file=sys.stderr)
    return EXIT_FAILED if tally.failed else EXIT_OK
