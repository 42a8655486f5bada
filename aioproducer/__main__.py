"""Command line: ``aioproducer demo`` (or ``python -m aioproducer demo``).

Produces a few records and prints where each landed. Without
``--bootstrap-servers`` it starts an embedded mock cluster (librdkafka's, from
the ``confluent-kafka`` wheel) so the demo needs no broker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Iterator, Sequence

from aioproducer import Producer


@contextlib.contextmanager
def _cluster(bootstrap: str | None, topic: str, partitions: int) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from aioproducer.testing import MockCluster

    with MockCluster(brokers=3, topics={topic: partitions}) as cluster:
        print(f"started an embedded mock cluster at {cluster.bootstrap_servers}")
        yield cluster.bootstrap_servers


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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="aioproducer", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="produce a few records and print what was delivered")
    demo.add_argument("--bootstrap-servers", help="host:port,...; default: an embedded mock cluster")
    demo.add_argument("--topic", default="demo")
    demo.add_argument("--partitions", type=int, default=3, help="for the embedded cluster's topic")
    demo.add_argument("--count", type=int, default=10)
    demo.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    args = parser.parse_args(argv)
    with _cluster(args.bootstrap_servers, args.topic, args.partitions) as bootstrap:
        return asyncio.run(_demo(bootstrap, args.topic, args.count, args.compression))


if __name__ == "__main__":
    sys.exit(main())
