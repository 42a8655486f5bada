"""Transactions v2 (KIP-890 part 2) on real Kafka 4.3: what goes over the wire under transaction.version 2 and 1.

One single-broker cluster per transaction version, behind a :class:`FaultProxy` that counts
the requests it forwards by API key. The versions the producer chose are recorded where it
encodes them (Produce's codec, ``BrokerConnection.send``). The behaviour itself (commit,
abort, fencing, timeouts, two-phase commit, offsets) runs on both versions in
``test_real_broker_transactions.py``; read back here by the project's reader and aiokafka.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterator
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.network.connection import BrokerConnection
from aioproducer.protocol import messages, produce
from aioproducer.testing import KafkaCluster
from conftest import kafka_or_skip, new_topic
from readback import read_isolated

pytestmark = pytest.mark.integration

ADD_PARTITIONS, ADD_OFFSETS = messages.ADD_PARTITIONS_TO_TXN, messages.ADD_OFFSETS_TO_TXN


@pytest.fixture(scope="module", params=[2, 1], ids=["transaction.version=2", "transaction.version=1"])
def cluster(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    with kafka_or_skip(brokers=1, proxy=True, transaction_version=request.param) as c:
        yield c


class Versions:
    """The version of every request the producers sent, by API key (recorded where they are encoded)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: dict[int, set[int]] = collections.defaultdict(set)
        encode, send = produce.encode_produce_request, BrokerConnection.send

        def encode_produce_request(version: int, *args: Any) -> Any:
            self.sent[messages.PRODUCE].add(version)
            return encode(version, *args)

        async def connection_send(conn: BrokerConnection, api_key: int, body: dict[str, Any], **kwargs: Any) -> Any:
            version = kwargs.get("version")
            self.sent[api_key].add(conn.api_version(api_key) if version is None else version)
            return await send(conn, api_key, body, **kwargs)

        monkeypatch.setattr(produce, "encode_produce_request", encode_produce_request)
        monkeypatch.setattr(BrokerConnection, "send", connection_send)


async def test_the_finalized_transaction_version_decides_the_protocol_and_the_epoch_moves_at_each_end_txn_under_2(
    cluster: KafkaCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Commits, an abort, offsets, a prepared transaction completed by its producer: read back exactly the committed."""
    v2 = cluster.transaction_version == 2
    topic = new_topic(cluster, partitions=3)
    versions = Versions(monkeypatch)
    before = collections.Counter(cluster.proxy(1).stats.requests_forwarded)
    committed: list[bytes] = []
    config: dict[str, Any] = {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"v{cluster.transaction_version}",
              "linger.ms": 5}
    async with Producer(config) as producer:
        transactions = producer._engine.transactions
        assert transactions is not None
        tm = transactions.tm
        assert tm.transaction_v2 is v2  # from ApiVersions' finalized features, at init
        epochs = [(tm.producer_id, tm.producer_epoch)]
        for round_, outcome in enumerate(("commit", "abort", "commit", "prepare")):
            producer.begin_transaction()
            values = [b"%s-%d-%d" % (outcome.encode(), round_, i) for i in range(9)]
            sent = [await producer.send(topic, value, partition=i % 3) for i, value in enumerate(values)]
            if outcome == "commit":
                await producer.send_offsets_to_transaction({(topic, 0): 3 * round_ + 1}, f"group-{topic}")
                await producer.commit_transaction()
                committed += values
            elif outcome == "abort":
                await asyncio.gather(*sent)  # written, then aborted: read_uncommitted sees them
                await producer.abort_transaction()
            else:
                await producer.complete_transaction(await producer.prepare_transaction(), commit=True)
                committed += values
            epochs.append((tm.producer_id, tm.producer_epoch))
        assert await producer.committed_offsets(f"group-{topic}", [(topic, 0)]) == {(topic, 0): 7}
    forwarded = collections.Counter(cluster.proxy(1).stats.requests_forwarded) - before
    producer_id, first_epoch = epochs[0]
    if v2:
        assert epochs == [(producer_id, first_epoch + n) for n in range(5)]  # +1 at each EndTxn v5
        assert forwarded[ADD_PARTITIONS] == 0 and forwarded[ADD_OFFSETS] == 0
        assert (versions.sent[messages.PRODUCE], versions.sent[messages.END_TXN]) == ({12}, {5})
        assert versions.sent[messages.TXN_OFFSET_COMMIT] == {5}
    else:
        assert epochs == [(producer_id, first_epoch)] * 5  # the epoch stays
        assert forwarded[ADD_PARTITIONS] >= 4 and forwarded[ADD_OFFSETS] >= 2  # retried on CONCURRENT_TRANSACTIONS
        assert max(versions.sent[messages.PRODUCE]) <= 11 and max(versions.sent[messages.END_TXN]) <= 3
        assert max(versions.sent[messages.TXN_OFFSET_COMMIT]) <= 3
    assert forwarded[messages.END_TXN] >= 4
    read = await cluster.read(topic, isolation_level="read_committed", count=len(committed))
    assert sorted(r.value or b"" for r in read) == sorted(committed)
    assert sorted(await read_isolated(cluster.bootstrap_servers, topic, range(3), committed=True)) == sorted(committed)
    everything = await read_isolated(cluster.bootstrap_servers, topic, range(3), committed=False)
    assert len(everything) == 36 and set(everything) - set(committed) == {b"abort-1-%d" % i for i in range(9)}
