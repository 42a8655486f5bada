"""The accumulator's send_arrow door (``try_append_arrow``) and a batch's per-run reports, without a broker."""

from __future__ import annotations

import asyncio
from typing import Any

import pyarrow as pa

from aioproducer._native import ArrowRecords
from aioproducer.arrow import ArrowDelivery
from aioproducer.internals.accumulator import UNKNOWN_PARTITION, AccumulatorConfig, RecordAccumulator
from aioproducer.internals.batch import ARROW_ROW_BYTES, ProducerBatch
from aioproducer.internals.buffer_pool import BufferPool
from aioproducer.partitioner import TopicPartitions

PARTITIONS = TopicPartitions(4, (0, 1, 2, 3))


def make(batch_size: int = 1024, memory: int = 1 << 20) -> RecordAccumulator:
    return RecordAccumulator(AccumulatorConfig(batch_size=batch_size, linger_ms=10), BufferPool(memory, batch_size), None, lambda: None)


def planned(rows: int, **columns: Any) -> tuple[ArrowRecords, list[tuple[int, int, int]]]:
    records = ArrowRecords(pa.table({"value": [b"v" * 100] * rows, **columns}), now_ms=1)
    return records, records.plan(4, 1 << 20, "t")


async def test_rows_fill_batches_and_each_full_batch_is_charged_what_it_holds() -> None:
    acc = make()
    records, [(partition, start, stop)] = planned(50, partition=[0] * 50)
    delivery = ArrowDelivery(records, asyncio.get_running_loop())
    assert acc.try_append_arrow("t", partition, records, start, stop, delivery, PARTITIONS) == stop
    batches = list(acc.topic_info("t").batches[0])
    assert len(batches) > 1 and sum(b.record_count for b in batches) == 50
    for batch in batches[:-1]:  # settled when the next one opened: its bytes and its rows' positions
        assert batch.settled
        assert batch.reserved_bytes == max(1024, batch.builder.uncompressed_size_in_bytes + batch.record_count * ARROW_ROW_BYTES)
    assert acc.pool.available_memory == acc.pool.total - sum(b.reserved_bytes for b in batches)


async def test_no_memory_now_appends_nothing_and_says_where_it_stopped() -> None:
    acc = make(batch_size=1024, memory=2048)
    records, [(partition, start, stop)] = planned(50, partition=[1] * 50)
    delivery = ArrowDelivery(records, asyncio.get_running_loop())
    at = acc.try_append_arrow("t", partition, records, start, stop, delivery, PARTITIONS)
    assert 0 < at < stop  # two batches' worth went in
    assert acc.try_append_arrow("t", partition, records, at, stop, delivery, PARTITIONS) == at
    assert sum(b.record_count for b in acc.topic_info("t").batches[1]) == at


async def test_keyless_rows_go_to_the_sticky_partition_and_are_counted_there() -> None:
    acc = make()
    records, [(partition, start, stop)] = planned(400)
    assert partition == UNKNOWN_PARTITION
    delivery = ArrowDelivery(records, asyncio.get_running_loop())
    assert acc.try_append_arrow("t", partition, records, start, stop, delivery, PARTITIONS) == stop
    used = {p for p, dq in acc.topic_info("t").batches.items() if dq}
    assert len(used) > 1  # about 44 KB: past the sticky batch size, the partition switched


async def test_a_batch_reports_each_run_once_and_the_delivery_completes() -> None:
    acc = make()
    records, [(partition, start, stop)] = planned(20, partition=[2] * 20)
    delivery = ArrowDelivery(records, asyncio.get_running_loop())
    acc.try_append_arrow("t", partition, records, start, stop, delivery, PARTITIONS)
    records.release_data()
    batches: list[ProducerBatch] = list(acc.topic_info("t").batches[2])
    assert all(b.arrow_runs is not None and len(b.arrow_runs) == 4 for b in batches)  # one run each
    base = 100
    for batch in batches:
        batch.complete(base, -1, None)
        base += batch.record_count
        assert batch.arrow_runs is None
    report = await delivery
    assert (report.rows, report.delivered, report.failed) == (20, 20, 0)
    assert not batches[0].complete(0, -1, None)  # once only


async def test_a_failed_batch_reports_its_rows_failed_with_their_indices() -> None:
    acc = make(batch_size=1 << 16)
    records = ArrowRecords(pa.table({"value": [b"a", b"b", b"c"], "partition": [3, 0, 3]}), row_outcomes=True)
    delivery = ArrowDelivery(records, asyncio.get_running_loop())
    for partition, start, stop in records.plan(4, 1 << 20, "t"):
        acc.try_append_arrow("t", partition, records, start, stop, delivery, PARTITIONS)
    acc.topic_info("t").batches[0][0].complete(7, -1, None)
    error = RuntimeError("refused")
    acc.topic_info("t").batches[3][0].complete(-1, -1, error)
    report = await delivery
    assert (report.delivered, report.failed) == (1, 2)
    assert report.errors == ((0, error), (2, error))
    assert report.offsets is not None and list(report.offsets) == [-1, 7, -1]


async def test_records_the_broker_named_fail_with_their_own_error_the_others_with_the_batchs() -> None:
    from aioproducer.internals.batch import RecordErrors

    acc = make(batch_size=1 << 16)
    records = ArrowRecords(pa.table({"value": [b"a", b"b", b"c"], "partition": [0, 0, 0]}))
    delivery = ArrowDelivery(records, asyncio.get_running_loop())
    [(partition, start, stop)] = records.plan(4, 1 << 20, "t")
    acc.try_append_arrow("t", partition, records, start, stop, delivery, PARTITIONS)
    batch = acc.topic_info("t").batches[0][0]
    bad, others = ValueError("row 1 is bad"), RuntimeError("not written with the bad one")
    batch.fail_per_record(RecordErrors({1: bad}, others))
    batch.complete(-1, -1, bad)
    report = await delivery
    assert report.failed == 3 and report.errors == ((0, others), (1, bad), (2, others))
