"""A user's callback that raises costs no other record anything, and SystemExit/KeyboardInterrupt leave the loop.

What asyncio does for its own callbacks (``Handle._run``) is the rule: ``SystemExit`` and
``KeyboardInterrupt`` leave the event loop (``run_until_complete()``/``asyncio.run()``
re-raise them), and a loop run again goes on where it was. So a caller that catches one
keeps a working producer; and a program that does not exits promptly.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.testing import MockCluster

pytestmark = pytest.mark.integration

#: Bound of a wait that ends at once when the producer works (a hang fails the test, not CI).
BOUND_S = 20.0


class _Leaving:
    """An interceptor whose on_acknowledgement raises ``leaving`` once."""

    def __init__(self, leaving: type[BaseException]) -> None:
        self.leaving: type[BaseException] | None = leaving

    def on_send(self, record: Any) -> Any:
        return record

    def on_acknowledgement(self, metadata: Any, error: Any) -> None:
        leaving, self.leaving = self.leaving, None
        if leaving is not None:
            raise leaving()


@pytest.mark.parametrize("leaving", [SystemExit, KeyboardInterrupt])
@pytest.mark.parametrize("where", ["on_delivery", "done_callback", "interceptor"])
def test_the_producer_keeps_delivering_after_a_callback_raised_system_exit(
    mock_cluster: MockCluster, where: str, leaving: type[BaseException]
) -> None:
    """The caller catches what left the loop and runs the loop again: every record is still delivered."""
    loop = asyncio.new_event_loop()
    try:
        interceptor = _Leaving(leaving) if where == "interceptor" else None
        producer = Producer(
            bootstrap_servers=mock_cluster.bootstrap_servers,
            linger_ms=20,
            interceptors=[interceptor] if interceptor is not None else [],
        )
        loop.run_until_complete(producer.start())
        delivered: list[Any] = []
        ran: list[Any] = []

        def leave(*_args: Any) -> None:
            raise leaving()

        def on_delivery(metadata: Any, error: Any) -> None:
            delivered.append(error if metadata is None else metadata.offset)

        async def send_five() -> list[Any]:
            # One key: one partition, one batch (the loop does not turn between the sends).
            futures = []
            for i in range(5):
                callback = leave if (where == "on_delivery" and i == 0) else on_delivery
                futures.append(await producer.send("orders", b"v%d" % i, key=b"k", on_delivery=callback))
            if where == "done_callback":
                futures[0].add_done_callback(leave)
            for future in futures:
                future.add_done_callback(ran.append)
            return futures

        futures = loop.run_until_complete(send_five())
        with pytest.raises(leaving):
            loop.run_until_complete(asyncio.wait_for(asyncio.gather(*futures), BOUND_S))
        # The caller caught it; the loop runs again and everything goes on.
        first = loop.run_until_complete(asyncio.wait_for(asyncio.gather(*futures), BOUND_S))
        assert [md.offset for md in first] == list(range(first[0].offset, first[0].offset + 5))
        assert ran == futures  # every record's done-callback ran, the one after the raise included
        assert len(delivered) == (4 if where == "on_delivery" else 5)
        later = loop.run_until_complete(asyncio.wait_for(producer.send_and_wait("orders", b"later", key=b"k"), BOUND_S))
        assert later.offset == first[-1].offset + 1
        metrics = producer.metrics()
        assert metrics["records_sent"] == 6 and metrics["records_failed"] == 0
        assert metrics["buffer_available_bytes"] == metrics["buffer_total_bytes"]  # the batch gave its memory back
        assert producer.ready
        loop.run_until_complete(asyncio.wait_for(producer.close(), BOUND_S))
    finally:
        loop.close()


_PROGRAM = textwrap.dedent(
    """
    import asyncio, sys
    from aioproducer import Producer
    from aioproducer.testing import MockCluster

    where, leaving = sys.argv[1], {"SystemExit": SystemExit, "KeyboardInterrupt": KeyboardInterrupt}[sys.argv[2]]

    def leave(*_args):
        raise leaving(3) if leaving is SystemExit else leaving()

    async def main(bootstrap):
        async with Producer(bootstrap_servers=bootstrap, linger_ms=20) as producer:
            futures = [await producer.send("orders", b"v", key=b"k") for _ in range(5)]
            if where == "on_delivery":
                futures.append(await producer.send("orders", b"v", key=b"k", on_delivery=leave))
            else:
                futures[1].add_done_callback(leave)
            await asyncio.gather(*futures)  # never returns: what the callback raised leaves the loop first
            await asyncio.Event().wait()

    with MockCluster(brokers=1, topics={"orders": 3}) as cluster:
        try:
            asyncio.run(main(cluster.bootstrap_servers))
        except BaseException as exc:
            print("left asyncio.run with", type(exc).__name__, flush=True)
            raise
    """
)


@pytest.mark.parametrize("leaving", ["SystemExit", "KeyboardInterrupt"])
@pytest.mark.parametrize("where", ["on_delivery", "done_callback"])
def test_a_callback_raising_system_exit_ends_asyncio_run_promptly(where: str, leaving: str) -> None:
    """As asyncio's own futures: it propagates out of asyncio.run(), which then closes the producer and ends."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROGRAM, where, leaving], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the program hung after its callback raised {leaving}: {exc.stdout!r} {exc.stderr!r}")
    assert f"left asyncio.run with {leaving}" in done.stdout, done.stderr
    assert done.returncode == (3 if leaving == "SystemExit" else -2), done.stderr  # -2: Python's exit by SIGINT
