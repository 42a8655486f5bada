"""A plain asyncio worker: each order taken from a queue is written as its records in one transaction.

An order is an id and its lines; each line becomes one record (key = the order id, so an
order's records stay in order on one partition). The lines are written inside
``producer.transaction()``: a line that cannot be encoded halfway through aborts the
transaction, so a ``read_committed`` reader never sees part of an order, and the worker goes
on with the next one. The queue stands in for the source (an HTTP handler, a database outbox).

    BOOTSTRAP_SERVERS=127.0.0.1:9092 TOPIC=order-lines python examples/order_worker.py < orders.jsonl

reads one JSON order per line (``{"order_id": "o-1", "lines": [{"sku": "A", "qty": 2}]}``)
until end of input, then prints how many orders were written and how many refused.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from aioproducer import Producer

LOG = logging.getLogger("order_worker")


@dataclass(frozen=True)
class Order:
    order_id: str
    lines: list[dict[str, Any]]


@dataclass
class Tally:
    written: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


class BadLine(ValueError):
    """A line that cannot become a record: its order is refused as a whole."""


def encode_line(order: Order, index: int, line: dict[str, Any]) -> bytes:
    """One line as the record's value; a line without a positive ``qty`` is refused."""
    qty = line.get("qty")
    if not isinstance(qty, int) or qty < 1:
        raise BadLine(f"order {order.order_id} line {index}: qty must be a positive int, got {qty!r}")
    return json.dumps({"order_id": order.order_id, "line": index, **line}, sort_keys=True).encode()


async def write_order(producer: Producer, topic: str, order: Order) -> None:
    """The order's lines, all or none: committed together, or aborted (and the error raised)."""
    async with producer.transaction():
        for index, line in enumerate(order.lines):
            await producer.send(topic, value=encode_line(order, index, line), key=order.order_id)


async def work(producer: Producer, topic: str, orders: asyncio.Queue[Order | None]) -> Tally:
    """Until ``None`` is taken from the queue; a refused order is logged and counted, never half-written."""
    tally = Tally()
    while (order := await orders.get()) is not None:
        try:
            await write_order(producer, topic, order)
        except BadLine as exc:
            LOG.warning("order refused: %s", exc)
            tally.refused.append(order.order_id)
        else:
            tally.written.append(order.order_id)
    return tally


async def main() -> None:
    logging.basicConfig(level=logging.INFO)
    orders: asyncio.Queue[Order | None] = asyncio.Queue()
    for text in sys.stdin:
        if text.strip():
            raw = json.loads(text)
            orders.put_nowait(Order(str(raw["order_id"]), list(raw["lines"])))
    orders.put_nowait(None)
    config = {
        "bootstrap.servers": os.environ.get("BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
        "transactional.id": os.environ.get("TRANSACTIONAL_ID", "order-worker"),
    }
    async with Producer(config) as producer:
        tally = await work(producer, os.environ.get("TOPIC", "order-lines"), orders)
    print(f"written {len(tally.written)} refused {len(tally.refused)}")


if __name__ == "__main__":
    asyncio.run(main())
