"""Lifecycle: flush, close with and without a timeout, leaks, cancellation, and the record futures as asyncio sees them."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from aioproducer import KafkaError, Producer, ProducerClosedError, RecordMetadata
from aioproducer.lifecycle import State
from aioproducer.protocol import messages
from aioproducer.testing import MockCluster
from aioproducer.internals.sender import Sender
from aioproducer.network.client import KafkaClient
from helpers import eventually, other_tasks
from readback import read_all_values

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 6
KIB = 1024
FAST: dict[str, Any] = {
    "request_timeout_ms": 1000,
    "delivery_timeout_ms": 3000,
    "retry_backoff_ms": 20,
    "reconnect_backoff_ms": 10,
    "reconnect_backoff_max_ms": 100,
    "linger_ms": 1,
}
LINGER_FOREVER: dict[str, Any] = {**FAST, "linger_ms": 60_000, "delivery_timeout_ms": 70_000}


async def read_values(bootstrap: str, partitions: range = range(PARTITIONS)) -> dict[int, list[bytes]]:
    return await read_all_values(bootstrap, TOPIC, partitions)



async def test_flush_delivers_everything_despite_linger(mock_cluster: MockCluster) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **LINGER_FOREVER) as producer:
        futures = [await producer.send(TOPIC, value=b"%03d" % i, partition=i % PARTITIONS) for i in range(60)]
        assert not any(f.done() for f in futures)
        await producer.flush()
        assert all(f.done() and f.exception() is None for f in futures)
        assert producer.metrics()["incomplete_batches"] == 0
    got = await read_values(mock_cluster.bootstrap_servers)
    assert got == {p: [b"%03d" % i for i in range(p, 60, PARTITIONS)] for p in range(PARTITIONS)}


async def test_close_without_timeout_delivers_what_is_queued(mock_cluster: MockCluster) -> None:
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **LINGER_FOREVER)
    await producer.start()
    futures = [await producer.send(TOPIC, value=b"%d" % i, partition=0) for i in range(20)]
    await producer.close()
    assert [f.result().offset for f in futures] == list(range(20))
    assert (await read_values(mock_cluster.bootstrap_servers, range(1)))[0] == [b"%d" % i for i in range(20)]


async def test_close_with_timeout_stops_sends_drains_then_fails_the_rest(mock_cluster: MockCluster) -> None:
    for p in range(PARTITIONS):
        mock_cluster.set_partition_leader(TOPIC, p, 1 + p % 3)
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **{**FAST, "delivery_timeout_ms": 10_000})
    await producer.start()
    await producer.partitions_for(TOPIC)
    mock_cluster.broker_down(1)  # leads partitions 0 and 3
    stuck = [await producer.send(TOPIC, value=b"stuck-%d" % i, partition=0) for i in range(5)]
    fine = [await producer.send(TOPIC, value=b"fine-%d" % i, partition=1) for i in range(5)]
    started = time.monotonic()
    closing = asyncio.create_task(producer.close(timeout=0.2))
    await asyncio.sleep(0)  # close() has begun
    with pytest.raises(ProducerClosedError):
        await producer.send(TOPIC, value=b"refused", partition=1)
    await closing
    assert time.monotonic() - started < 1.0, "close(timeout=0.2) took too long"
    assert [f.result().offset for f in fine] == list(range(5))  # drained within the timeout
    for f in stuck:
        assert isinstance(f.exception(), ProducerClosedError)
        assert "closed before" in str(f.exception())
    mock_cluster.broker_up(1)
    got = await read_values(mock_cluster.bootstrap_servers, range(2))
    assert got == {0: [], 1: [b"fine-%d" % i for i in range(5)]}


async def test_close_zero_timeout_fails_everything_pending(mock_cluster: MockCluster) -> None:
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **LINGER_FOREVER)
    await producer.start()
    futures = [await producer.send(TOPIC, value=b"%d" % i, partition=0) for i in range(5)]
    await producer.close(timeout=0)
    assert all(isinstance(f.exception(), ProducerClosedError) for f in futures)
    assert producer.metrics()["incomplete_batches"] == 0


async def test_nothing_leaks_after_close(mock_cluster: MockCluster) -> None:
    before = asyncio.all_tasks()
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST)
    await producer.start()
    futures = [await producer.send(TOPIC, value=b"%d" % i, key=b"k%d" % i) for i in range(100)]
    mock_cluster.broker_down(2)  # some requests fail, reconnects are attempted
    await asyncio.sleep(0.05)  # let the failures happen
    mock_cluster.broker_up(2)
    await asyncio.gather(*futures)
    client = producer._engine.client
    assert isinstance(client, KafkaClient)
    connections = list(client._conns.values())
    assert connections
    await producer.close()
    assert asyncio.all_tasks() == before, asyncio.all_tasks() - before
    assert all(not c.is_connected for c in connections)
    assert not client._conns
    assert producer.metrics()["buffer_available_bytes"] == producer.config.buffer_memory


async def test_cancelling_a_send_waiting_for_memory_leaves_the_accumulator_sound(mock_cluster: MockCluster) -> None:
    mock_cluster.set_rtt(1, 300)
    for p in range(PARTITIONS):
        mock_cluster.set_partition_leader(TOPIC, p, 1)
    total = 64 * KIB
    config = {**FAST, "buffer_memory": total, "batch_size": 16 * KIB, "linger_ms": 0}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        first = [await producer.send(TOPIC, value=b"first-%d" % p, partition=p) for p in range(4)]
        waiting = [asyncio.create_task(producer.send(TOPIC, value=b"waiting-%d" % i, partition=4)) for i in range(3)]
        await eventually(lambda: producer.metrics()["waiting_for_buffer"] == 3)
        waiting[1].cancel()  # the middle one: the others keep their place in line
        with pytest.raises(asyncio.CancelledError):
            await waiting[1]
        assert producer.metrics()["waiting_for_buffer"] == 2
        kept = [await waiting[0], await waiting[2]]
        after = await producer.send(TOPIC, value=b"after", partition=5)
        await asyncio.gather(*first, *kept, after)
        assert producer.metrics()["buffer_available_bytes"] == total
        assert producer.metrics()["waiting_for_buffer"] == 0
    mock_cluster.set_rtt(1, 0)
    got = await read_values(mock_cluster.bootstrap_servers)
    assert got[4] == [b"waiting-0", b"waiting-2"]
    assert got[5] == [b"after"]
    assert [got[p] for p in range(4)] == [[b"first-%d" % p] for p in range(4)]


async def test_record_futures_in_asyncio_combinators(mock_cluster: MockCluster) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **FAST) as producer:
        futures = [await producer.send(TOPIC, value=b"%d" % i, partition=0) for i in range(10)]
        assert all(asyncio.isfuture(f) for f in futures)
        gathered = await asyncio.gather(*futures)
        assert [md.offset for md in gathered] == list(range(10))

        md = await asyncio.wait_for(await producer.send(TOPIC, value=b"wait_for", partition=0), timeout=2)
        assert isinstance(md, RecordMetadata) and md.offset == 10

        shielded = await producer.send(TOPIC, value=b"shield", partition=0)
        assert (await asyncio.shield(shielded)).offset == 11

        done_with: list[Any] = []
        called = asyncio.Event()
        cb_future = await producer.send(TOPIC, value=b"callback", partition=0)

        def on_done(f: Any) -> None:
            done_with.append(f)
            called.set()

        cb_future.add_done_callback(on_done)
        await asyncio.wait_for(called.wait(), 2)
        assert done_with == [cb_future] and cb_future.result().offset == 12

        # A wait_for that times out cancels only the waiting, not the record: the brokers answer
        # half a second late (an awaited record no longer lingers to an idle leader, #25 item 7).
        for broker in mock_cluster.broker_ids:
            mock_cluster.set_rtt(broker, 500)
        try:
            slow = await producer.send(TOPIC, value=b"slow", partition=0)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(slow, timeout=0.05)
        finally:
            for broker in mock_cluster.broker_ids:
                mock_cluster.set_rtt(broker, 0)
        assert slow.cancelled()  # the waiting, not the record: it is read back below
        await producer.flush()
        done, pending = await asyncio.wait([await producer.send(TOPIC, value=b"wait", partition=0)], timeout=2)
        assert len(done) == 1 and not pending
    got = (await read_values(mock_cluster.bootstrap_servers, range(1)))[0]
    assert got == [b"%d" % i for i in range(10)] + [b"wait_for", b"shield", b"callback", b"slow", b"wait"]


async def test_on_delivery_is_called_in_send_order_per_partition(mock_cluster: MockCluster) -> None:
    calls: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    errors: list[BaseException] = []

    def make(i: int, p: int) -> Any:
        def on_delivery(md: RecordMetadata | None, error: BaseException | None) -> None:
            if error is not None:
                errors.append(error)
            else:
                assert md is not None
                calls[md.partition].append((i, md.offset))

        return on_delivery

    config = {**FAST, "batch_size": 512, "max_in_flight_requests_per_connection": 1}
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, **config) as producer:
        mock_cluster.push_request_errors(0, 6, 13)  # retries along the way (1 in flight: the mock cannot reorder)
        for i in range(300):
            p = i % PARTITIONS
            await producer.send(TOPIC, value=b"%d" % i + b"." * 40, partition=p, on_delivery=make(i, p))
        await producer.flush()
    assert not errors
    for p in range(PARTITIONS):
        assert [i for i, _ in calls[p]] == list(range(p, 300, PARTITIONS)), f"partition {p}: callbacks out of send order"
        assert [o for _, o in calls[p]] == list(range(50))


async def test_a_sender_that_dies_fails_every_record_and_send_says_why(
    mock_cluster: MockCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in the sender loop must not leave futures and flush() hanging while send() queues more."""
    from aioproducer.internals.sender import Sender

    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, linger_ms=60_000) as producer:
        queued = [await producer.send("orders", value=b"v%d" % i, partition=i % 6) for i in range(10)]
        boom = RuntimeError("planted bug in the sender loop")

        def broken_run_once(self: Sender, now: float) -> float:
            raise boom

        monkeypatch.setattr(Sender, "run_once", broken_run_once)
        await producer.flush(timeout=10)  # returns: the records failed instead of hanging
        for future in queued:
            error = future.exception()
            assert isinstance(error, KafkaError) and error.__cause__ is boom
        assert producer._engine.sender_task is not None and producer._engine.sender_task.done()
        for value, key in ((b"fast path", None), (b"keyed", b"k")):
            with pytest.raises(KafkaError, match="sender task failed"):
                await producer.send("orders", value=value, key=key)


async def test_flush_with_nothing_pending_returns_at_once_even_with_timeout_zero(mock_cluster: MockCluster) -> None:
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers) as producer:
        await producer.flush(timeout=0)
        await (await producer.send("orders", b"v", partition=0))
        await producer.flush(timeout=0)


async def test_partitions_for_after_close_is_refused(mock_cluster: MockCluster) -> None:
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers)
    await producer.start()
    assert await producer.partitions_for("orders") == list(range(6))
    await producer.close()
    with pytest.raises(ProducerClosedError, match="closed"):
        await producer.partitions_for("orders")


async def test_record_futures_work_in_asyncio_combinators_that_time_out(mock_cluster: MockCluster) -> None:
    """gather/wait/wait_for/shield/as_completed/TaskGroup with timeouts: no error inside asyncio, records still sent.

    gather() cancels its children when it is cancelled and then asks each for its cancellation
    error (``_make_cancelled_error``); a future that lacks it breaks asyncio's callback.
    """
    loop_errors: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, context: loop_errors.append(context))
    mock_cluster.set_rtt(1, 1500)
    for p in range(6):
        mock_cluster.set_partition_leader("orders", p, 1)
    delivered: list[Any] = []
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, linger_ms=0) as producer:
        await producer.partitions_for("orders")

        async def some() -> list[Any]:
            return [await producer.send("orders", b"v", partition=0, on_delivery=lambda md, err: delivered.append(err))
                    for _ in range(3)]

        futures = await some()
        timed = asyncio.ensure_future(asyncio.wait_for(asyncio.gather(*futures), 0.1))
        finished, _ = await asyncio.wait([timed], timeout=5)
        assert finished, "wait_for(gather(...)) hung after its timeout"
        with pytest.raises(TimeoutError):
            timed.result()
        assert all(f.cancelled() for f in futures)
        with pytest.raises(asyncio.CancelledError):
            futures[0].result()

        futures = await some()
        done, pending = await asyncio.wait(futures, timeout=0.05)
        assert not done and len(pending) == 3
        with pytest.raises(TimeoutError):
            for next_done in asyncio.as_completed(futures, timeout=0.05):
                await next_done
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(futures[0]), 0.05)
        assert not futures[0].cancelled()  # shield kept it
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                async with asyncio.TaskGroup() as group:
                    for f in futures:
                        group.create_task(_await(f))
        futures[1].cancel("given up")
        with pytest.raises(asyncio.CancelledError, match="given up"):
            await futures[1]
        await producer.flush()
    assert delivered == [None] * 6, "every record is delivered, cancelled futures or not"
    assert loop_errors == [], loop_errors


async def _await(future: Any) -> Any:
    return await future


async def test_concurrent_starts_share_one_client_and_one_sender(mock_cluster: MockCluster) -> None:
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers)
    await asyncio.gather(producer.start(), producer.start(), producer.start())
    try:
        senders = [t for t in asyncio.all_tasks() if t.get_name() == "aioproducer-sender" and not t.done()]
        assert len(senders) == 1
        assert (await (await producer.send("orders", b"v", partition=0))).offset == 0
    finally:
        await producer.close()
    assert not other_tasks()


async def test_close_while_starting_cancels_the_start_and_leaves_nothing_running(mock_cluster: MockCluster) -> None:
    mock_cluster.set_rtt(1, 5000)  # bootstrap (ApiVersions, Metadata) takes seconds
    mock_cluster.set_rtt(2, 5000)
    mock_cluster.set_rtt(3, 5000)
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers)
    starting = asyncio.create_task(producer.start())
    await eventually(lambda: producer._engine._start_task is not None, what="start() under way")
    started = time.monotonic()
    await producer.close()
    assert time.monotonic() - started < 3.0  # close() did not wait for the 5 s bootstrap
    with pytest.raises(ProducerClosedError, match="closed while it was starting"):
        await starting
    assert producer._engine.sender_task is None
    assert not other_tasks()
    with pytest.raises(ProducerClosedError):
        await producer.start()


async def test_a_producer_id_refused_for_good_makes_every_later_send_say_why(
    mock_cluster: MockCluster,
) -> None:
    """InitProducerId answered CLUSTER_AUTHORIZATION_FAILED: nothing can ever be sent; every send() says so."""
    cluster_authorization_failed = 31
    mock_cluster.push_request_errors(messages.INIT_PRODUCER_ID, cluster_authorization_failed)
    async with Producer(bootstrap_servers=mock_cluster.bootstrap_servers, enable_idempotence=True) as producer:
        sender = producer._engine.sender
        assert isinstance(sender, Sender)
        await eventually(lambda: sender.lifecycle.refusal is not None)
        for value, key, headers in ((b"fast path", None, None), (b"keyed", b"k", None), (b"general", None, [("h", b"")])):
            with pytest.raises(KafkaError, match="CLUSTER_AUTHORIZATION_FAILED"):
                await producer.send("orders", value=value, key=key, headers=headers)


# ---------------------------------------------------------------- one lifecycle for every layer (#12)
async def test_every_layer_reads_the_producers_one_lifecycle(mock_cluster: MockCluster) -> None:
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers)
    lifecycle = producer._lifecycle
    states = [lifecycle.state]
    await producer.start()
    accumulator, sender = producer._engine.accumulator, producer._engine.sender
    assert accumulator is not None and isinstance(sender, Sender)
    # The client reads none of it: the engine closes it when it moves the lifecycle to CLOSED.
    assert accumulator.lifecycle is lifecycle
    assert accumulator.pool.lifecycle is lifecycle and sender.lifecycle is lifecycle
    states.append(lifecycle.state)
    await producer.close()
    states.append(lifecycle.state)
    assert states == [State.NEW, State.RUNNING, State.CLOSED]


async def test_close_before_start_ends_closed_and_start_then_refuses(mock_cluster: MockCluster) -> None:
    producer = Producer(bootstrap_servers=mock_cluster.bootstrap_servers)
    await producer.close()
    assert producer._lifecycle.state is State.CLOSED
    with pytest.raises(ProducerClosedError, match="cannot be restarted"):
        await producer.start()
