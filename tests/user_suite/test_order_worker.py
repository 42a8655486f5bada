"""examples/order_worker.py tested as its authors would: the aioproducer plugin's fixtures and public helpers only.

A ``FakeProducer`` with a ``transactional.id`` shows what the worker commits and what it aborts;
real Kafka behind a ``FaultProxy`` shows that a ``read_committed`` reader sees every order whole,
once, in order, across a broker restart.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import Callable

import order_worker
import pytest
from order_worker import Order, work, write_order

from aioproducer.testing import (
    FakeProducer,
    FaultProxy,
    KafkaCluster,
    MockCluster,
    ProducerFactory,
    assert_delivered_exactly_once,
    assert_ordered_per_key,
)

TOPIC = "order-lines"


async def until(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait until ``condition()`` holds, checking at every turn of the loop."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.001)


def queue_of(*orders: Order) -> asyncio.Queue[Order | None]:
    queue: asyncio.Queue[Order | None] = asyncio.Queue()
    for order in (*orders, None):
        queue.put_nowait(order)
    return queue


def lines(order_id: str, *qty: int) -> Order:
    return Order(order_id, [{"sku": f"sku-{i}", "qty": q} for i, q in enumerate(qty)])


async def test_each_order_is_committed_whole_and_a_bad_one_aborted() -> None:
    async with FakeProducer(transactional_id="order-worker", topics={TOPIC: 3}) as fake:
        tally = await work(fake, TOPIC, queue_of(lines("o-1", 1, 2), lines("o-2", 5, 0, 1), lines("o-3", 3)))
    assert (tally.written, tally.refused) == (["o-1", "o-3"], ["o-2"])
    assert [(r.key, json.loads(r.value or b"")["line"]) for r in fake.history()] == [
        (b"o-1", 0), (b"o-1", 1), (b"o-3", 0)
    ]
    assert [(r.key, json.loads(r.value or b"")["line"]) for r in fake.aborted_history()] == [(b"o-2", 0)]


async def test_orders_are_read_committed_whole_once_and_in_order_across_a_broker_restart(
    kafka_cluster: KafkaCluster, fault_proxy: FaultProxy, kafka_producer: ProducerFactory
) -> None:
    topic = f"{TOPIC}-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(topic, partitions=3)
    before = [lines(f"o-{n}", 1, 2, 3) for n in range(5)]
    after = [lines(f"o-{n}", 1, 2) for n in range(5, 12)]
    refused = lines("o-bad", 4, 0)
    config = {"transactional_id": f"worker-{uuid.uuid4().hex[:8]}", "request_timeout_ms": 5000}
    async with kafka_producer(kafka_cluster, **config) as producer:
        for order in before:
            await write_order(producer, topic, order)
        fault_proxy.refuse()  # the broker goes away: connections reset, new ones refused ...
        fault_proxy.drop_connections()
        worker = asyncio.create_task(work(producer, topic, queue_of(*after[:3], refused, *after[3:])))
        await until(lambda: fault_proxy.stats.connections_refused > 0)
        fault_proxy.refuse(False)  # ... and comes back
        tally = await worker
    assert tally.refused == ["o-bad"] and len(tally.written) == len(after)
    sent = [(o.order_id, json.dumps({"order_id": o.order_id, "line": i, **line}, sort_keys=True))
            for o in before + after for i, line in enumerate(o.lines)]
    committed = await kafka_cluster.read(topic, count=len(sent), isolation_level="read_committed")
    assert_delivered_exactly_once(committed, sent)
    assert_ordered_per_key(committed, sent)
    # read_uncommitted: the refused order's first line was sent before its second one failed; the abort
    # dropped it if it had not left the producer yet, else it is in the log, aborted: once or not at all.
    everything = await kafka_cluster.read(topic, count=len(sent), isolation_level="read_uncommitted")
    bad_line = json.dumps({"order_id": "o-bad", "line": 0, **refused.lines[0]}, sort_keys=True)
    assert_delivered_exactly_once(everything, sent, unacknowledged=[("o-bad", bad_line)])


@pytest.mark.kafka_topics(**{TOPIC: 3})
async def test_the_program_writes_the_orders_it_reads_and_says_how_many(mock_cluster: MockCluster) -> None:
    """``python examples/order_worker.py < orders.jsonl`` on librdkafka's mock."""
    orders = [{"order_id": "o-1", "lines": [{"sku": "A", "qty": 2}]}, {"order_id": "o-2", "lines": [{"sku": "B", "qty": 0}]},
              {"order_id": "o-3", "lines": [{"sku": "C", "qty": 1}, {"sku": "D", "qty": 4}]}]
    program = await asyncio.create_subprocess_exec(
        sys.executable, order_worker.__file__, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "BOOTSTRAP_SERVERS": mock_cluster.bootstrap_servers, "TOPIC": TOPIC},
    )
    out, _ = await asyncio.wait_for(program.communicate("".join(json.dumps(o) + "\n" for o in orders).encode()), 60)
    assert program.returncode == 0 and out.decode().splitlines()[-1] == "written 2 refused 1"
    records = await mock_cluster.read(TOPIC, count=3)
    assert_delivered_exactly_once(
        records, [("o-1", json.dumps({"line": 0, "order_id": "o-1", "qty": 2, "sku": "A"}, sort_keys=True)),
                  ("o-3", json.dumps({"line": 0, "order_id": "o-3", "qty": 1, "sku": "C"}, sort_keys=True)),
                  ("o-3", json.dumps({"line": 1, "order_id": "o-3", "qty": 4, "sku": "D"}, sort_keys=True))],
    )
