"""A panic in the native module, met through the producer: an exception the caller catches, then the producer goes on.

``_panic_for_test(name)`` plants a panic in the next call of a native entry point
(tests/unit/test_native_panics.py covers each one). Here the entry points a caller's own call
reaches: its ``send()``, ``send_many()``, ``send_arrow()`` or ``await`` raises a ``RuntimeError``
(an ``Exception``: PyO3's ``PanicException`` is a ``BaseException``), and the next calls are
delivered. A panic in the sender's own work (building a batch) fails the records it holds with an
error naming it, through the sender's handling of a bug, where a ``PanicException`` went past that
handling and left the records waiting forever.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterator

import pyarrow as pa
import pytest

from aioproducer import KafkaError, Producer, _native
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.integration

TOPIC = "orders"
BUG = r"aioproducer\._native\.{} panicked .*this is a bug in aioproducer"


async def _send(producer: Producer) -> object:
    return await producer.send(TOPIC, b"v", key=b"k")


async def _send_many(producer: Producer) -> object:
    return await producer.send_many(TOPIC, [b"a", b"b"])


async def _send_arrow(producer: Producer) -> object:
    return await producer.send_arrow(TOPIC, pa.table({"value": [b"a", b"b"]}))


#: Entry point -> the caller's call that reaches it.
CALLER_SIDE: dict[str, Callable[[Producer], Awaitable[object]]] = {
    "RecordQueues.try_append": _send,  # send()'s one native call per record
    "ProducerBatch.try_append_many": _send_many,
    "ArrowRecords.__new__": _send_arrow,
    "ArrowRecords.plan": _send_arrow,
    "ArrowRecords.append_rows": _send_arrow,
}


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    yield
    _native._panic_for_test("")


async def _goes_on(producer: Producer) -> None:
    """The next records of every kind are delivered: the producer and its sender task go on."""
    async with asyncio.timeout(30):
        await (await producer.send(TOPIC, b"after", key=b"k"))
        await asyncio.gather(*await producer.send_many(TOPIC, [b"after-1", b"after-2"]))
        assert (await (await producer.send_arrow(TOPIC, pa.table({"value": [b"after-3"]})))).delivered == 1
        await producer.flush()


async def _caught(call: Awaitable[object]) -> Exception:
    """What ``except Exception`` catches from ``call``, as a caller writes it (a PanicException would get through)."""
    try:
        await call
    except Exception as exc:
        return exc
    raise AssertionError("no exception")


@pytest.mark.parametrize("entry_point", list(CALLER_SIDE))
async def test_a_panic_in_a_callers_call_is_an_exception_and_the_producer_goes_on(mock_cluster: MockCluster, entry_point: str) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, linger_ms=5) as producer:
        await producer.partitions_for(TOPIC)
        _native._panic_for_test(entry_point)
        exc = await _caught(CALLER_SIDE[entry_point](producer))
        assert type(exc) is RuntimeError and re.search(BUG.format(re.escape(entry_point)), str(exc))
        await _goes_on(producer)


async def test_a_panic_reading_a_records_outcome_is_an_exception_and_the_producer_goes_on(mock_cluster: MockCluster) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, linger_ms=5) as producer:
        future = await producer.send(TOPIC, b"v")
        await producer.flush()
        _native._panic_for_test("FutureRecordMetadata.result")
        exc = await _caught(future)
        assert type(exc) is RuntimeError and re.search(BUG.format(r"FutureRecordMetadata\.result"), str(exc))
        assert (await future).offset == 0  # the record was delivered; asking again gives its metadata
        await _goes_on(producer)


async def test_a_panic_in_the_sender_fails_its_records_with_an_error_naming_it(mock_cluster: MockCluster) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, linger_ms=5) as producer:
        await producer.partitions_for(TOPIC)
        _native._panic_for_test("produce_topic_data")  # the sender builds each request's batches through it
        future = await producer.send(TOPIC, b"v")
        with pytest.raises(KafkaError, match="sender task failed") as caught:
            async with asyncio.timeout(30):  # the record fails; it does not wait forever
                await future
        assert isinstance(caught.value.__cause__, RuntimeError)
        assert "produce_topic_data panicked" in str(caught.value.__cause__)
        with pytest.raises(KafkaError, match="sender task failed"):  # said at once, as for any bug in the sender
            await producer.send(TOPIC, b"next")
