"""A producer works in the event loop and process it was started in, and says so elsewhere (#11 item 22).

Also: a producer dropped without close() warns (ResourceWarning) and its tasks stop with it.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from aioproducer import Producer, ProducerClosedError, WrongEventLoopError
from aioproducer.testing import MockCluster
from helpers import eventually, other_tasks

pytestmark = pytest.mark.integration

TOPIC = "orders"
FAST: dict[str, Any] = {"request_timeout_ms": 1000, "delivery_timeout_ms": 3000, "linger_ms": 1}

Use = Callable[[Producer], Awaitable[Any]]

def collect_earlier_garbage() -> None:
    """Collect what earlier tests left (their closed loops' transports warn too) before a test expects its own warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gc.collect()


FAST_PATH: list[Any] = [
    pytest.param(lambda p: p.send(TOPIC, value=b"v"), id="send-fast-path-keyless"),
    pytest.param(lambda p: p.send(TOPIC, value=b"v", key=b"k"), id="send-fast-path-keyed"),
]
OTHER_USES: list[Any] = [
    pytest.param(lambda p: p.send(TOPIC, value=b"v", headers=[("h", b"v")]), id="send-general-path"),
    pytest.param(lambda p: p.send_many(TOPIC, [b"a", b"b"]), id="send-many"),
    pytest.param(lambda p: p.flush(), id="flush"),
    pytest.param(lambda p: p.partitions_for(TOPIC), id="partitions-for"),
    pytest.param(lambda p: p.start(), id="start"),
    pytest.param(lambda p: p.close(), id="close"),
]
WRONG_LOOP = "started on event loop .*being used from event loop .*one producer per event loop"


@pytest.mark.parametrize("use", FAST_PATH + OTHER_USES)
def test_a_producer_started_under_one_asyncio_run_and_used_under_another_says_so(mock_cluster: MockCluster, use: Use) -> None:
    """The issue's case: the first loop is gone, its sender task cancelled by asyncio.run(); nothing may be accepted."""
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST)

    async def first() -> None:
        await producer.start()
        await producer.partitions_for(TOPIC)  # metadata cached: send() can take its fast path

    async def second() -> None:
        with pytest.raises(WrongEventLoopError, match=WRONG_LOOP):
            await use(producer)

    asyncio.run(first())
    asyncio.run(second())
    assert producer.metrics()["incomplete_batches"] == 0  # nothing was queued for a sender that is gone
    collect_earlier_garbage()
    with pytest.warns(ResourceWarning, match="unclosed"):  # it cannot be closed any more: its loop is closed
        del producer
        gc.collect()


@pytest.fixture
def loop_a() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.mark.parametrize("use", OTHER_USES)
def test_a_producer_used_from_a_second_loop_while_its_own_lives_says_so(
    mock_cluster: MockCluster, loop_a: asyncio.AbstractEventLoop, use: Use
) -> None:
    """Every path but send()'s fast path checks the running loop (see Producer.send for why not that one)."""
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST)
    loop_a.run_until_complete(producer.start())
    loop_a.run_until_complete(producer.partitions_for(TOPIC))

    async def from_loop_b() -> None:
        with pytest.raises(WrongEventLoopError, match=WRONG_LOOP):
            await use(producer)

    asyncio.run(from_loop_b())
    assert producer.metrics()["incomplete_batches"] == 0

    async def on_loop_a() -> int:
        md = await (await producer.send(TOPIC, value=b"still works here", partition=0))
        await producer.close()
        return md.offset

    assert loop_a.run_until_complete(on_loop_a()) == 0


async def test_a_producer_used_in_a_forked_child_says_so(mock_cluster: MockCluster) -> None:
    """Forked from inside a coroutine, the child even runs (a copy of) the producer's loop: the pid tells."""
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST)
    await producer.start()
    await producer.partitions_for(TOPIC)  # metadata cached: send() could take its fast path
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what send() raised, touch nothing else, leave without cleanup
        try:
            message = b"no error: the record was accepted"
            try:
                await producer.send(TOPIC, value=b"v")  # does not suspend: it raises, or queues on the fast path
            except BaseException as exc:  # noqa: BLE001 - whatever it is, the parent asserts on it
                message = f"{type(exc).__name__}: {exc}".encode()
            os.write(write_end, message)
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            reported = (await asyncio.to_thread(pipe.read)).decode()
        assert os.waitpid(pid, 0)[1] == 0
        assert reported.startswith("WrongEventLoopError: this producer was started in process"), reported
        assert "a fork" in reported and "Create a new producer in the child" in reported
    finally:
        await producer.close()


async def test_a_dropped_unclosed_producer_warns_and_stops_its_tasks(mock_cluster: MockCluster) -> None:
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **{**FAST, "linger_ms": 60_000, "delivery_timeout_ms": 70_000})
    await producer.start()
    futures = [await producer.send(TOPIC, value=b"%d" % i, partition=0) for i in range(3)]
    sender_task = producer._engine.sender_task
    assert sender_task is not None
    collect_earlier_garbage()
    with pytest.warns(ResourceWarning, match="unclosed .* with 3 records not yet delivered"):
        del producer
        gc.collect()
    async with asyncio.timeout(5):
        await asyncio.wait([sender_task])
        await asyncio.gather(*futures, return_exceptions=True)
    assert sender_task.cancelled()
    for future in futures:
        assert isinstance(future.exception(), ProducerClosedError)
        assert "garbage-collected without close()" in str(future.exception())
    await eventually(lambda: not other_tasks(), what="every task of the dropped producer ended")


async def test_a_closed_producer_is_dropped_silently(mock_cluster: MockCluster) -> None:
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST)
    await producer.start()
    await producer.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        del producer
        gc.collect()


def test_a_producer_dropped_after_its_loop_closed_warns_without_touching_the_loop(mock_cluster: MockCluster) -> None:
    loop = asyncio.new_event_loop()
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST)
    loop.run_until_complete(producer.start())
    loop.close()
    collect_earlier_garbage()
    with pytest.warns(ResourceWarning, match="unclosed .* with 0 records"):
        del producer
        gc.collect()


async def test_a_sender_collected_after_its_loop_closed_touches_nothing_while_another_loop_runs(
    mock_cluster: MockCluster,
) -> None:
    """The garbage collector closes the abandoned sender coroutine while this test's loop runs:
    its cleanup must not reach for its own, closed loop ("Event loop is closed", seen in CI)."""
    unraisable: list[Any] = []

    def start_and_abandon() -> None:
        loop = asyncio.new_event_loop()
        producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST)
        loop.run_until_complete(producer.start())
        loop.close()  # without cancelling the sender task: its coroutine stays suspended

    collect_earlier_garbage()
    previous, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)
            await asyncio.to_thread(start_and_abandon)
            gc.collect()
    finally:
        sys.unraisablehook = previous
    assert [repr(u.exc_value) for u in unraisable if "Sender.run" in repr(u.object)] == []
