"""``aioproducer demo``: produce a few records and print where each landed.

Why it exists: the shortest proof that the installation works. Without
``--bootstrap-servers`` it starts an embedded mock cluster (librdkafka's, from
the ``confluent-kafka`` wheel) so the demo needs no broker.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from aioproducer import Producer
from aioproducer.cli.common import (
    COMPRESSIONS,
    OneLineParser,
    add_logging_options,
    add_partitions_option,
    embedded_cluster,
    integer,
    topic_name,
)

__all__ = ["add_parser", "run"]

#: Plain text for --help (the module docstring is reST, for the API reference).
DESCRIPTION = """\
Produce a few records and print where each landed: the shortest proof that the
installation works. Without --bootstrap-servers it starts an embedded mock
cluster (librdkafka's, from the confluent-kafka wheel: aioproducer[testing])."""

EPILOG = """\
examples:
  aioproducer demo
  aioproducer demo --bootstrap-servers localhost:9092 --topic demo --count 100 --compression zstd"""


def add_parser(commands: argparse._SubParsersAction[OneLineParser]) -> None:
    """Register ``demo`` and its options."""
    parser = commands.add_parser(
        "demo",
        help="produce a few records and print what was delivered",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-b", "--bootstrap-servers", "--bootstrap-server", metavar="HOST:PORT,...",
                        help="brokers to connect to; default: an embedded mock cluster")
    parser.add_argument("-t", "--topic", default="demo", type=topic_name)
    add_partitions_option(parser, default=3)
    parser.add_argument("--count", type=integer("--count", 0, 1_000_000), default=10, help="records (default: 10)")
    parser.add_argument("--compression", default="none", choices=COMPRESSIONS)
    add_logging_options(parser)
    parser.set_defaults(run=run)


async def _demo(bootstrap: str, topic: str, count: int, compression: str) -> int:
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5, compression_type=compression) as producer:
        futures = [
            await producer.send(topic, value=f"record {i}".encode(), key=f"key-{i % 4}".encode())
            for i in range(count)
        ]
        results = await asyncio.gather(*futures, return_exceptions=True)
    failed = 0
    for i, result in enumerate(results):
        if isinstance(result, BaseException):
            failed += 1
            print(f"record {i}: FAILED {result!r}")
        else:
            print(f"record {i}: {result.topic}-{result.partition} offset {result.offset}")
    print(f"delivered {count - failed} of {count} records to {topic!r}")
    return 1 if failed else 0


def run(args: argparse.Namespace) -> int:
    """Run the demo; exit status 1 if any record failed."""
    with embedded_cluster(args.bootstrap_servers, args.topic, args.partitions, sys.stdout) as bootstrap:
        return asyncio.run(_demo(bootstrap, args.topic, args.count, args.compression))
