"""``aioproducer produce``: records from stdin (or files), one per line, as ``kafka-console-producer`` and kcat's ``-P``.

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
import os
import signal
import sys
from dataclasses import dataclass

from aioproducer import Producer, RecordMetadata
from aioproducer.cli.common import (
    COMPRESSIONS,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Interrupts,
    add_partitions_option,
    OneLineParser,
    UsageError,
    add_connection_options,
    add_logging_options,
    check_config,
    config_secrets,
    configured_producer,
    embedded_cluster,
    integer,
    mock_wanted,
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
Read records from stdin (or the FILEs, in turn), one per line, and produce them to
a topic, as kafka-console-producer and kcat -P do (the same option and
--reader-property names; kcat's short options). Brokers are required: -b, or
bootstrap.servers in the configuration; --mock starts an embedded mock cluster
instead, for trying things out. At end of input every record is flushed and a
summary is written to stderr: "delivered N, failed M". A line longer than
max.request.size fails alone. Connection failures are reported on stderr as they
happen (at most one line a second of each kind); -v and --debug show more.
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
  printf 'k1:v1\\nk2:v2\\n' | aioproducer produce -b localhost:9092 \\
      -t orders --property parse.key=true --property key.separator=:
  aioproducer produce -b localhost:9092 -t orders -k customer-7 -H source=batch -H v=2 orders.txt
  printf 'a;b;c' | aioproducer produce -b localhost:9092 -t letters -D ';' -p 0
  printf 'trace:abc,src:web\\tk1\\tvalue\\n' | aioproducer produce --mock -t orders \\
      --property parse.headers=true --property parse.key=true
  aioproducer produce -b broker:9093 -t orders -F client.properties -X acks=1 \\
      --compression-codec zstd < records.txt

configuration precedence: the producer's defaults (linger.ms=5) < --command-config (-F) <
--command-property (-X) < the dedicated options (--bootstrap-servers, --compression-codec,
--timeout, --request-required-acks, --batch-size, --max-block-ms, ...), each used only
when given. Kafka's older names are accepted: --producer.config, --producer-property,
--property (not together with their new names).
line format: --reader-config FILE < --reader-property (or --property)."""

#: What the command sets unless configured otherwise: nothing beyond the producer's defaults
#: (linger.ms 5, Kafka 4.x's). Kafka's console producer lingers 1000 ms, its --timeout default: an
#: interactive line would wait a second; we keep the Java producer's other defaults too, e.g.
#: request.timeout.ms 30000 rather than the tool's 1500, and retries unbounded within
#: delivery.timeout.ms rather than 3.
DEFAULTS: dict[str, str] = {}

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
    parser.add_argument("-t", "--topic", required=True, type=topic_name, help="the topic to produce to")
    parser.add_argument("files", nargs="*", metavar="FILE", help="read records from these files in turn (- is stdin); default: stdin")
    add_connection_options(parser, "--producer-property", several=False)
    parser.add_argument("-k", "--key", help="the key of every record (not with parse.key=true)")
    parser.add_argument("-H", "--header", dest="headers", action="append", default=[], type=header, metavar="NAME=VALUE",
                        help="a header on every record, after any parse.headers gives; repeatable")
    parser.add_argument("-p", "--partition", type=integer("--partition", 0, INT_MAX),
                        help="the partition of every record (default: the partitioner chooses)")
    parser.add_argument("-D", "--delimiter", type=delimiter, default=b"\n", metavar="BYTE",
                        help="what ends a record (default: newline, \\r\\n too); one byte, escapes \\n \\t \\r \\0 \\xHH")
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
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress line (shown only when stderr is a terminal and the input is not)")
    add_logging_options(parser)
    parser.set_defaults(run=run, catches_interrupts=True)


def header(text: str) -> tuple[str, bytes]:
    """An argparse ``type`` for ``-H NAME=VALUE`` (kcat's form): the name, and the value's UTF-8 bytes."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"must be NAME=VALUE, got {text!r}")
    return name, value.encode()


_ESCAPES = {"\\n": b"\n", "\\t": b"\t", "\\r": b"\r", "\\0": b"\0", "\\\\": b"\\"}


def delimiter(text: str) -> bytes:
    """An argparse ``type`` for ``-D``: one byte, written as itself or as an escape (``\\n``, ``\\0``, ``\\x1e``)."""
    if text in _ESCAPES:
        return _ESCAPES[text]
    if text.startswith("\\x") and len(text) == 4:
        try:
            return bytes([int(text[2:], 16)])
        except ValueError:
            pass
    raw = text.encode()
    if len(raw) != 1:
        raise argparse.ArgumentTypeError(f"must be one byte (or \\n, \\t, \\r, \\0, \\xHH), got {text!r}")
    return raw


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


@dataclass(frozen=True)
class Fixed:
    """What every record gets from the options: ``-k``, ``-H`` (after the line's own headers), ``-p``."""

    key: bytes | None
    headers: list[tuple[str, bytes]]
    partition: int | None


class _Run:
    """One run of the command in the event loop: start, read, send, flush, and Ctrl-C handling."""

    def __init__(self, config: dict[str, str], args: argparse.Namespace, fmt: LineFormat, tally: Tally,
                 max_line: int, inputs: list[int]) -> None:
        self.config, self.args, self.fmt, self.tally, self.max_line = config, args, fmt, tally, max_line
        self.inputs = inputs
        self.fixed = Fixed(None if args.key is None else args.key.encode(), list(args.headers), args.partition)
        self.starting: asyncio.Task[None] | None = None
        self.reading: asyncio.Task[None] | None = None
        self.producer: Producer | None = None
        self.abandoning: asyncio.Task[None] | None = None  # held: the loop keeps only weak references

    async def main(self) -> None:
        """Start, send every line of the input, then flush; every outcome lands in ``tally``.

        The Ctrl-C handler is installed before the producer starts and replaced, once the producer
        is closed, by :class:`Interrupts`' deferral: no window of the run or of the loop's shutdown is
        left to Python's handler, whose ``KeyboardInterrupt`` could land anywhere in a close.
        """
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, self.interrupt)
        try:
            self.producer = producer = Producer(self.config)
            self.starting = asyncio.create_task(producer.start())
            # Retrieved in any case: when Ctrl-C cancels this task before it awaits, the close below
            # ends start() with ProducerClosedError, which is no error of the run.
            self.starting.add_done_callback(lambda task: task.cancelled() or task.exception())
            try:
                await asyncio.wait([self.starting])  # not awaited directly: only its own cancellation is Ctrl-C's
                if self.starting.cancelled():
                    return
                self.starting.result()  # start() failed: its KafkaError is the run's
                await self.send_all(producer)
            finally:
                await producer.close()
        finally:
            loop.remove_signal_handler(signal.SIGINT)  # (which puts back Python's handler)
            Interrupts.defer()  # through the loop's shutdown and the summary: a late Ctrl-C is only noted

    async def send_all(self, producer: Producer) -> None:
        typed = any(fd == sys.stdin.fileno() for fd in self.inputs) and sys.stdin.isatty()
        shown = not self.args.no_progress and sys.stderr.isatty() and not typed  # never onto what the user types
        async with progress(sys.stderr, self.tally.describe, enabled=shown):
            self.reading = reading = asyncio.create_task(self.read(producer))
            await asyncio.wait([reading])
            if not reading.cancelled():
                reading.result()  # an error reading the input
            await producer.flush()

    def interrupt(self) -> None:
        """Ctrl-C: the first stops starting or reading (what was sent is still delivered), a second abandons it."""
        tally = self.tally
        if not tally.interrupted:
            tally.interrupted = True
            for task in (self.starting, self.reading):
                if task is not None and not task.done():
                    task.cancel()
            return
        if self.producer is not None and self.abandoning is None:
            self.abandoning = asyncio.get_running_loop().create_task(self.producer.close(timeout=0))

    async def read(self, producer: Producer) -> None:
        for fd in self.inputs:
            async with contextlib.aclosing(read_lines(fd, self.max_line, self.args.delimiter)) as chunks:
                async for lines in chunks:
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
        fixed = self.fixed
        if fixed.key is not None:
            key = fixed.key
        if fixed.headers:
            headers = [*(headers or ()), *fixed.headers]

        def done(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            if error is None:
                tally.delivered += 1
            else:
                tally.fail(f"line {number}: {type(error).__name__}: {error}")

        try:
            future = await producer.send(self.args.topic, value=value, key=key, headers=headers,
                                         partition=fixed.partition, on_delivery=done)
        except KafkaError as exc:
            tally.fail(f"line {number}: {type(exc).__name__}: {exc}")
            return
        if self.args.sync:
            with contextlib.suppress(KafkaError):  # counted by done()
                await future


def _open_inputs(paths: list[str]) -> list[int]:
    """The file descriptors to read, in order (stdin for ``-`` or no path); an unreadable file is a usage error."""
    fds: list[int] = []
    try:
        for path in paths or ["-"]:
            fds.append(sys.stdin.fileno() if path == "-" else os.open(path, os.O_RDONLY))
    except OSError as exc:
        _close_inputs(fds)
        raise UsageError(f"cannot read {exc.filename!r}: {exc.strerror}") from None
    return fds


def _close_inputs(fds: list[int]) -> None:
    for fd in fds:
        if fd != sys.stdin.fileno():
            os.close(fd)


def run(args: argparse.Namespace) -> int:
    """Run the command; :class:`UsageError` for bad input (exit 2)."""
    tally = Tally()
    config: dict[str, str] = {}
    try:
        Interrupts.deliver()  # a Ctrl-C that came while the arguments were read ends the run here
        fmt = _line_format(args)
        if args.key is not None and fmt.parse_key:
            raise UsageError("--key (-k) gives every record its key: not with parse.key=true")
        config_file, assignments, option = configured_producer(args, "--producer-property")
        config = producer_config(config_file, assignments, option, _overrides(args), DEFAULTS)
        settings = check_config(config)
        mock = mock_wanted(args, config)
        inputs = _open_inputs(args.files)
        try:
            with embedded_cluster(config.get("bootstrap.servers"), args.topic, args.partitions, sys.stderr,
                                  mock=mock) as bootstrap:
                config["bootstrap.servers"] = bootstrap
                max_line = min(settings.max_request_size, settings.buffer_memory)
                _deliver(_Run(config, args, fmt, tally, max_line, inputs))
        finally:
            _close_inputs(inputs)
    except KeyboardInterrupt:  # before the loop's handler was installed, or in the embedded cluster's start
        tally.interrupted = True
    Interrupts.defer()  # the outcome is known: a Ctrl-C now must not cut the summary short
    tally.interrupted |= Interrupts.take()
    print(redact(tally.summary(), config_secrets(config)), file=sys.stderr)
    if tally.interrupted:
        return EXIT_INTERRUPTED
    return EXIT_FAILED if tally.failed else EXIT_OK


def _deliver(run: _Run) -> None:
    """``run`` in a fresh event loop; what ends it early is counted in its tally."""
    tally = run.tally
    try:
        _run_in_new_loop(run)
    except KafkaError as exc:  # start() or close() failed: nothing more can be delivered
        tally.fail(f"{type(exc).__name__}: {exc}")
    except OSError as exc:  # reading the input failed (not a closed stdout/stderr: main() handles that)
        if isinstance(exc, BrokenPipeError):
            raise
        tally.fail(f"reading the input: {exc}")


def _run_in_new_loop(run: _Run) -> None:
    """``asyncio.run(run.main())``, with no moment left to Python's Ctrl-C handler before ``main()`` installs its own.

    The loop is built while a Ctrl-C is only noted (:class:`Interrupts`): one that landed inside
    the loop's constructor left a half-built loop, whose finalizer printed a traceback (an
    ``AttributeError`` for its missing ``_signal_handlers``; the Ctrl-C test met it once in a
    CI run). A Ctrl-C noted meanwhile ends the run before ``main()`` begins, the loop closed. The
    coroutine is closed in any case, so one interrupted before its task began is not reported
    as never awaited.
    """
    Interrupts.defer()
    with asyncio.Runner() as runner:
        runner.get_loop()
        main = run.main()
        try:
            Interrupts.deliver()
            runner.run(main)
        finally:
            main.close()
