"""The ``aioproducer`` command line: ``produce``, ``perf-test``, ``metadata`` (``-L``) and ``demo``.

One module per command, each with ``add_parser`` (its options and help) and
``run`` (returns the exit status). :func:`main` turns every bad input into one
line on stderr and exit status 2: argparse's errors (through
:class:`~aioproducer.cli.common.OneLineParser`), malformed ``key=value``
options, unreadable properties files and configuration refused by
``ProducerConfig`` (:class:`~aioproducer.cli.common.UsageError`). No error quotes the
value of a secret-looking ``key=value`` argument (see :func:`~aioproducer.cli.common.redact`).

Two ends that are not errors of the command: SIGINT (Ctrl-C) ends with status 130 (after
the command's own summary, if it has one), and a closed standard output or error (``| head -1``)
ends the command at its next write, quietly, with status 141 (see ``EXIT_BROKEN_PIPE``). Once the
command has returned, SIGINT is ignored: the outcome is decided and written, and a late Ctrl-C
must not turn the interpreter's exit into a traceback.

The library's log lines go to stderr from WARNING up (a failed connection attempt is one),
rate-limited to one of each kind a second; ``-v`` shows INFO, ``--debug`` DEBUG.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Sequence

from aioproducer._version import __version__
from aioproducer.cli import demo, metadata, perf, produce
from aioproducer.cli.common import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Interrupts,
    OneLineParser,
    UsageError,
    configure_logging,
    redact,
    secrets_in_arguments,
)

__all__ = ["Interrupts", "main"]

EPILOG = """\
commands take --help, e.g.: aioproducer produce --help

examples:
  aioproducer demo
  seq 1000 | aioproducer produce -b localhost:9092 -t numbers
  aioproducer metadata -b localhost:9092        (or: aioproducer -L -b localhost:9092)
  aioproducer perf-test -b localhost:9092 -t perf --num-records 100000 --record-size 100 --throughput -1"""


def build_parser() -> OneLineParser:
    """The top-level parser with every command registered."""
    parser = OneLineParser(
        prog="aioproducer",
        description="Command-line tools of aioproducer, an asyncio Kafka producer. "
        "produce, perf-test and metadata need brokers (-b), or --mock for an embedded mock cluster; "
        "demo starts one when given no brokers.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"aioproducer {__version__}")
    parser.set_defaults(catches_interrupts=False)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    produce.add_parser(commands)
    perf.add_parser(commands)
    metadata.add_parser(commands)
    demo.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the command, return its exit status."""
    Interrupts.defer()  # until a command can catch it: a Ctrl-C while parsing is no traceback
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["-L"]:  # kcat's metadata mode
        arguments[0] = "metadata"
    OneLineParser.secrets = secrets_in_arguments(arguments)
    parser = build_parser()
    args = parser.parse_args(arguments)
    handler = configure_logging(args.log_level)
    try:
        return _run(args)
    finally:
        _ignore_sigint()
        logging.getLogger("aioproducer").removeHandler(handler)


def _run(args: argparse.Namespace) -> int:
    try:
        if not args.catches_interrupts:  # produce takes them itself, to write its summary
            Interrupts.deliver()
        status: int = args.run(args)
        sys.stdout.flush()
    except UsageError as exc:
        print(f"aioproducer {args.command}: error: {redact(str(exc), OneLineParser.secrets)}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_closed_streams()
        return EXIT_BROKEN_PIPE
    return status


def _ignore_sigint() -> None:
    """After the command: a Ctrl-C changes nothing any more, so it must not raise in the interpreter's exit."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread (main() called from a test's thread): nothing to protect
        pass


def _silence_closed_streams() -> None:
    """Point stdout and stderr at /dev/null, so that the flush at interpreter exit finds no closed pipe.

    Python's documented handling of a reader that went away (``SIGPIPE`` is ignored by Python, so
    the write raises ``BrokenPipeError``): without it, exit prints one more traceback-like warning.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):  # no descriptor to redirect (a replaced stream): nothing to silence
            pass
    os.close(devnull)
