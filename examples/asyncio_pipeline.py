"""Plain asyncio: produce a stream with ``send_many`` and delivery callbacks, and stop cleanly on SIGTERM.

A generator stands in for the source (a socket, a file, a queue). Records go out in
chunks with ``send_many`` (one call per chunk, no coroutine per record); the delivery
callback prints ``acked <partition> <offset>`` for each record once the broker has it,
which is the only moment the source may forget it. On SIGTERM (or Ctrl-C) the loop stops taking new
records and ``close(timeout)`` delivers what is queued: everything printed as acked is in
Kafka, and whatever was not acknowledged is reported, never silently dropped.

    BOOTSTRAP_SERVERS=127.0.0.1:9092 TOPIC=events python examples/asyncio_pipeline.py [--records N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Iterator

from aioproducer import Producer, RecordMetadata

CHUNK = 500


def source(records: int | None) -> Iterator[bytes]:
    """The records to send: ``event-0``, ``event-1``, ... (forever when ``records`` is None)."""
    n = 0
    while records is None or n < records:
        yield b"event-%d" % n
        n += 1


def on_delivery(metadata: RecordMetadata | None, error: BaseException | None) -> None:
    """Called once per record, in send order per partition."""
    if metadata is not None and error is None:
        print("acked", metadata.partition, metadata.offset, flush=True)
    else:
        print("failed", repr(error), file=sys.stderr, flush=True)


async def run(bootstrap: str, topic: str, records: int | None, stop: asyncio.Event) -> None:
    producer = Producer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        chunk: list[bytes] = []
        for value in source(records):
            chunk.append(value)
            if len(chunk) == CHUNK:
                await producer.send_many(topic, chunk, keys=[v[-1:] for v in chunk], on_delivery=on_delivery)
                chunk = []
                await asyncio.sleep(0)  # a turn for the sender and the signal handler between chunks
                if stop.is_set():
                    return
        if chunk:
            await producer.send_many(topic, chunk, keys=[v[-1:] for v in chunk], on_delivery=on_delivery)
    finally:
        # Delivers what is queued, within 30 s; what cannot be delivered fails (and is printed), never vanishes.
        await producer.close(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=None, help="stop after N records (default: run until SIGTERM)")
    args = parser.parse_args()
    bootstrap = os.environ.get("BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    topic = os.environ.get("TOPIC", "events")

    async def until_stopped() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)  # stop taking records; what is queued is still delivered
        await run(bootstrap, topic, args.records, stop)
        print("stopped", flush=True)

    asyncio.run(until_stopped())


if __name__ == "__main__":
    main()
