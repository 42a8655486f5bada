"""``python -m aioproducer.testing``: run a mock Kafka cluster as a process.

For benchmarks and manual experiments that want a broker in another process (so
the client under test does not share the GIL with the broker's bookkeeping, and
so non-Python clients can use it too)::

    python -m aioproducer.testing --brokers 3 --topic orders:6 --until-stdin-eof

The first line of stdout is ``bootstrap.servers=127.0.0.1:PORT,...`` (flushed
at once, so a parent can read it and go). The cluster then runs until SIGTERM or
SIGINT, or, with ``--until-stdin-eof``, until stdin is closed: a parent that
dies or simply closes the pipe takes the cluster down with it, with no signal
handling of its own. Exit status 0 on any of these.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from aioproducer.testing._cli import topic_spec, wait_for_stop


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m aioproducer.testing",
        description="Run a librdkafka mock Kafka cluster and print its bootstrap servers.",
    )
    parser.add_argument("--brokers", type=int, default=3, help="number of brokers (ids 1..N)")
    parser.add_argument(
        "--topic",
        type=topic_spec,
        action="append",
        default=[],
        metavar="NAME:PARTITIONS",
        help="create a topic up front (repeatable)",
    )
    parser.add_argument(
        "--replication-factor",
        type=int,
        default=None,
        help="replicas per partition (default: min(3, brokers))",
    )
    parser.add_argument(
        "--until-stdin-eof",
        action="store_true",
        help="also stop when stdin reaches end of file (the parent closed the pipe)",
    )
    parser.add_argument(
        "--spread-leaders",
        action="store_true",
        help="lead partition P of each topic created up front from broker (P mod brokers) + 1, in every run "
        "(librdkafka's mock picks each topic's leaders at random: 2-2-2 in one run, 1-5 in the next)",
    )
    parser.add_argument("--debug", default=None, help="librdkafka debug contexts, e.g. 'mock,protocol'")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Import late so that --help works without confluent-kafka installed.
    from aioproducer.testing import MockCluster

    try:
        cluster = MockCluster(
            brokers=args.brokers,
            topics=dict(args.topic),
            replication_factor=args.replication_factor,
            debug=args.debug,
        )
    except (ValueError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    if args.spread_leaders:
        for topic, partitions in args.topic:
            for partition in range(partitions):
                cluster.set_partition_leader(topic, partition, partition % args.brokers + 1)
    try:
        wait_for_stop(args.until_stdin_eof, [f"bootstrap.servers={cluster.bootstrap_servers}"])
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
