"""The ``aioproducer`` command line: ``demo``, ``produce`` and ``perf-test``.

One module per command, each with ``add_parser`` (its options and help) and
``run`` (returns the exit status). :func:`main` turns every bad input into one
line on stderr and exit status 2: argparse's errors (through
:class:`~aioproducer.cli.common.OneLineParser`), malformed ``key=value``
options, unreadable properties files and configuration refused by
``ProducerConfig`` (:class:`~aioproducer.cli.common.UsageError`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from aioproducer.cli import demo, perf, produce
from aioproducer.cli.common import EXIT_USAGE, OneLineParser, UsageError

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
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.run(args)
    except UsageError as exc:
        print(f"aioproducer {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    return status
