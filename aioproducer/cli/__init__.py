"""The ``aioproducer`` command line: ``demo``, ``produce`` and ``perf-test``.

One module per command, each with ``add_parser`` (its options and help) and
``run`` (returns the exit status). :func:`main` turns every bad input into one
line on stderr and exit status 2: argparse's errors (through
:class:`~aioproducer.cli.common.OneLineParser`), malformed ``key=value``
options, unreadable properties files and configuration refused by
``ProducerConfig`` (:class:`~aioproducer.cli.common.UsageError`). No error quotes the
value of a secret-looking ``key=value`` argument (see :func:`~aioproducer.cli.common.redact`).

Two ends that are not errors of the command: SIGINT (Ctrl-C) ends with status 130 (after
the command's own summary, if it has one), and a closed standard output or error (``| head -1``)
ends the command at its next write, quietly, with status 141 (see ``EXIT_BROKEN_PIPE``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from aioproducer.cli import demo, perf, produce
from aioproducer.cli.common import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    OneLineParser,
    UsageError,
    redact,
    secrets_in_arguments,
)

__all__ = ["main"]

EPILOG = """\
commands take --help, e.g.: aioproducer produce --help

examples:
  aioproducer demo
  seq 1000 | aioproducer produce --bootstrap-servers localhost:9092 --topic numbers
  aioproducer perf-test --topic perf --num-records 100000 --record-size 100 --throughput -1"""


def build_parser() -> OneLineParser:
    """The top-level parser with every command registered."""
    parser = OneLineParser(
        prog="aioproducer",
        description="Command-line tools of aioproducer, an asyncio Kafka producer. "
        "Without --bootstrap-servers, each command runs against an embedded mock cluster.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    produce.add_parser(commands)
    perf.add_parser(commands)
    demo.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the command, return its exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    OneLineParser.secrets = secrets_in_arguments(arguments)
    parser = build_parser()
    args = parser.parse_args(arguments)
    try:
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
