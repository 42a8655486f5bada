"""Exactly-once read-process-write: consume ``in``, write each record's result to ``out``, commit both together.

Each batch of records read by an aiokafka consumer (``read_committed``, no auto-commit) is
processed and written by a transactional aioproducer, and the consumer's next offsets are
committed *in the same transaction* (``send_offsets_to_transaction``). Either the results
and the offsets are committed together, or neither is: a crash anywhere, then a restart,
reprocesses exactly the records whose results were not committed, so a ``read_committed``
reader of ``out`` sees each input's result exactly once.

The consumer's generation and member id go with the offsets (KIP-447), so if a stale copy of
this process lost its partitions to a new one, its offset commit is refused and its
transaction cannot commit.

    python examples/exactly_once_pipeline.py BOOTSTRAP IN_TOPIC OUT_TOPIC GROUP [--transactional-id ID]

Runs until stopped (Ctrl-C, SIGTERM or SIGKILL: all three are safe).
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from aiokafka import AIOKafkaConsumer

from aioproducer import GroupMetadata, Producer


def process(value: bytes) -> bytes:
    """The work: here, upper-case the value (any pure function of the input will do)."""
    return value.upper()


def group_metadata(consumer: AIOKafkaConsumer, group_id: str) -> GroupMetadata:
    """The consumer's membership. aiokafka has no public call for it; its coordinator holds it."""
    coordinator = getattr(consumer, "_coordinator", None)
    generation = getattr(coordinator, "generation", -1)
    member_id = getattr(coordinator, "member_id", "") or ""
    return GroupMetadata(group_id, generation_id=generation, member_id=member_id)


async def run(bootstrap: str, source: str, sink: str, group: str, transactional_id: str) -> None:
    consumer = AIOKafkaConsumer(
        source,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,  # offsets are committed by the producer's transaction
        isolation_level="read_committed",  # never process another transaction's uncommitted output
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        async with Producer(bootstrap_servers=bootstrap, transactional_id=transactional_id, linger_ms=5) as producer:
            while True:
                batches = await consumer.getmany(timeout_ms=500, max_records=500)
                if not batches:
                    continue
                async with producer.transaction():
                    for records in batches.values():
                        for record in records:
                            await producer.send(sink, process(record.value or b""), key=record.key)
                    offsets = {tp: records[-1].offset + 1 for tp, records in batches.items()}
                    await producer.send_offsets_to_transaction(offsets, group_metadata(consumer, group))
    finally:
        await consumer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bootstrap")
    parser.add_argument("source")
    parser.add_argument("sink")
    parser.add_argument("group")
    parser.add_argument("--transactional-id", default=None, help="default: <group>-<source>")
    args = parser.parse_args()
    transactional_id = args.transactional_id or f"{args.group}-{args.source}"

    async def until_stopped() -> None:
        task = asyncio.ensure_future(run(args.bootstrap, args.source, args.sink, args.group, transactional_id))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, task.cancel)
        try:
            await task
        except asyncio.CancelledError:
            pass

    asyncio.run(until_stopped())


if __name__ == "__main__":
    main()
