"""Transactions on librdkafka's mock cluster: what a real broker cannot easily be made to do.

The mock implements the transaction APIs; here it answers with the coordinator errors a
producer must ride out (the coordinator moved, is loading, the previous transaction is
still completing) and with the ones it must not (fenced), pushed on command.
"""

from __future__ import annotations

import pytest

from aioproducer import IllegalStateError, Producer, ProducerFencedError
from aioproducer.errors import (
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    NotCoordinatorError,
)
from aioproducer.protocol import messages
from aioproducer.testing import MockCluster


def config(cluster: MockCluster, transactional_id: str) -> dict[str, object]:
    return {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": transactional_id, "linger.ms": 5,
            "retry.backoff.ms": 10}


@pytest.mark.parametrize(
    "code", [NotCoordinatorError.errno, CoordinatorLoadInProgressError.errno, ConcurrentTransactionsError.errno]
)
async def test_coordinator_errors_on_every_transaction_request_are_ridden_out(mock_cluster: MockCluster, code: int) -> None:
    async with Producer(config(mock_cluster, f"tx-{code}")) as producer:
        for api in (messages.ADD_PARTITIONS_TO_TXN, messages.END_TXN):
            mock_cluster.push_request_errors(api, code, code)
        mock_cluster.start_request_tracking()
        async with producer.transaction():
            future = await producer.send("orders", b"v", key=b"k")
        assert future.done() and future.exception() is None
        apis = [r.api_key for r in mock_cluster.requests()]
        assert apis.count(messages.END_TXN) == 3  # two refused, the third committed
        assert apis.count(messages.ADD_PARTITIONS_TO_TXN) == 3


async def test_a_fenced_end_txn_is_fatal_and_every_later_call_says_so(mock_cluster: MockCluster) -> None:
    async with Producer(config(mock_cluster, "tx-fenced")) as producer:
        mock_cluster.push_request_errors(messages.END_TXN, ProducerFencedError.errno)
        producer.begin_transaction()
        await (await producer.send("orders", b"v", key=b"k"))
        with pytest.raises(ProducerFencedError, match="tx-fenced"):
            await producer.commit_transaction()
        with pytest.raises(IllegalStateError, match="can only be closed"):
            producer.begin_transaction()
        with pytest.raises(ProducerFencedError):
            await producer.send("orders", b"w", key=b"k")
