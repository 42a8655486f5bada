"""Every line the producer's machinery logs names its producer (issue #26, "every log record carries the client id").

Two producers with different ``client.id`` run in one loop against the mock cluster, through
every path that logs: a config adjusted, TLS suites that cannot be restricted, an interceptor
and an ``on_delivery`` callback that raise, retries, a broker unreachable then back, records
expired past ``delivery.timeout.ms``, an integration's shutdown line, and ``close()`` that
could not end an open transaction. Every record of an ``aioproducer.*`` logger must carry the
``client_id`` attribute of the producer it is about, and say it at the head of its message,
with nothing of the other producer in it (no cross-talk).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, NamedTuple

import pytest

from aioproducer import KafkaTimeoutError, Producer, RecordMetadata
from aioproducer.integrations._common import shutdown_producer
from aioproducer.testing import MockCluster
from helpers import eventually

pytestmark = pytest.mark.integration

IDS = ("orders", "audit")  # each producer sends to the topic of its own name
END_TXN = 26
INVALID_TXN_STATE = 48

FAST: dict[str, Any] = {
    "request_timeout_ms": 1000,
    "delivery_timeout_ms": 1500,
    "retry_backoff_ms": 200,  # above the maximum: config.py says it adjusts (a WARNING at construction)
    "retry_backoff_max_ms": 100,
    "reconnect_backoff_ms": 10,
    "reconnect_backoff_max_ms": 100,
    "linger_ms": 0,
}


class Line(NamedTuple):
    client_id: str
    name: str
    level: int
    message: str


class RaisingInterceptor:
    """Raises in both methods; its repr names its producer, so a line about it under the other's id is cross-talk."""

    def __init__(self, owner: str) -> None:
        self.owner = owner

    def on_send(self, record: Any) -> Any:
        raise RuntimeError(f"on_send of {self.owner}")

    def on_acknowledgement(self, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        raise RuntimeError(f"on_acknowledgement of {self.owner}")

    def __repr__(self) -> str:
        return f"RaisingInterceptor({self.owner})"


class RaisingCallback:
    def __init__(self, owner: str) -> None:
        self.owner = owner

    def __call__(self, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        raise RuntimeError(f"on_delivery of {self.owner}")

    def __repr__(self) -> str:
        return f"RaisingCallback({self.owner})"


def _plain(cluster: MockCluster, owner: str) -> Producer:
    return Producer(
        bootstrap_servers=cluster.bootstrap_servers,
        client_id=owner,
        interceptor_classes=[RaisingInterceptor(owner)],
        **FAST,
    )


def _tls_never_started(owner: str) -> None:
    """Built only (the mock speaks plaintext): Python cannot restrict TLS 1.3 suites, tls.py says so at construction."""
    Producer(
        bootstrap_servers="localhost:9093", client_id=f"{owner}-tls", security_protocol="SSL", ssl_cipher_suites="TLS_AES_128_GCM_SHA256"
    )


async def _traffic_then_outage(cluster: MockCluster, producers: dict[str, Producer]) -> None:
    """Raising callbacks and interceptors, then the only broker down (records expire) and back."""
    for owner, producer in producers.items():
        await (await producer.send(owner, value=b"first", partition=0, on_delivery=RaisingCallback(owner)))
    cluster.broker_down(1)
    lost = [await producer.send(owner, value=b"lost", partition=i % 2) for owner, producer in producers.items() for i in range(4)]
    await eventually(lambda: not any(p.brokers_reachable for p in producers.values()), what="the outage seen by both")
    results = await asyncio.gather(*lost, return_exceptions=True)
    assert all(isinstance(r, KafkaTimeoutError) for r in results), results
    cluster.broker_up(1)
    after = [await p.send(owner, value=b"after", partition=0) for owner, p in producers.items()]
    await asyncio.gather(*after)


async def _close_an_open_transaction(cluster: MockCluster, owner: str) -> None:
    """``close()`` whose abort the coordinator refuses: the transaction is left to transaction.timeout.ms, said at WARNING."""
    producer = Producer(bootstrap_servers=cluster.bootstrap_servers, client_id=f"{owner}-tx", transactional_id=f"tx-{owner}")
    await producer.start()
    producer.begin_transaction()
    await (await producer.send(owner, value=b"in a transaction", partition=1))
    await producer.close()


async def test_every_line_names_its_producer_and_no_other(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, "aioproducer")
    with MockCluster(brokers=1, topics={owner: 2 for owner in IDS}) as cluster:
        producers = {owner: _plain(cluster, owner) for owner in IDS}
        for owner in IDS:
            _tls_never_started(owner)
        await asyncio.gather(*(p.start() for p in producers.values()))
        await _traffic_then_outage(cluster, producers)
        await asyncio.gather(*(shutdown_producer(p, owner, 10.0) for owner, p in producers.items()))
        cluster.push_request_errors(END_TXN, *[INVALID_TXN_STATE] * len(IDS))
        await asyncio.gather(*(_close_an_open_transaction(cluster, owner) for owner in IDS))
    records = [r for r in caplog.records if r.name == "aioproducer" or r.name.startswith("aioproducer.")]
    unnamed = [(r.name, r.getMessage()) for r in records if not isinstance(getattr(r, "client_id", None), str)]
    assert unnamed == [], "lines without client_id"
    ours = [Line(getattr(r, "client_id"), r.name, r.levelno, r.getMessage()) for r in records]
    ids = {*IDS, *(f"{owner}-{what}" for owner in IDS for what in ("tx", "tls"))}
    assert {line.client_id for line in ours} == ids
    for line in ours:
        assert line.message.startswith(f"[{line.client_id}] "), line
        other = next(o for o in IDS if not line.client_id.startswith(o))
        assert other not in line.message, f"a line under {line.client_id} is about {other}: {line}"
    for owner in IDS:
        said = {(line.name, line.level) for line in ours if line.client_id == owner}
        assert {
            ("aioproducer.config", logging.WARNING),  # retry.backoff.ms above its maximum
            ("aioproducer", logging.ERROR),  # the interceptor and the callback that raised
            ("aioproducer.sender", logging.DEBUG),  # connection attempts and retries
            ("aioproducer.network.client", logging.WARNING),  # the node unreachable...
            ("aioproducer.network.client", logging.INFO),  # ...and back
            ("aioproducer.producer", logging.WARNING),  # the records expired
            ("aioproducer.integrations", logging.WARNING),  # the shutdown line counts them
        } <= said, said
        # The outage is one WARNING and one INFO per producer and node, not a line per attempt.
        outage = [line.level for line in ours if line.client_id == owner and line.name == "aioproducer.network.client" and line.level >= logging.INFO]
        assert outage == [logging.WARNING, logging.INFO]
        assert [line.name for line in ours if line.client_id == f"{owner}-tls"] == ["aioproducer.security.tls"]  # TLS 1.3 suites stay enabled
        [tx] = [line.message for line in ours if line.client_id == f"{owner}-tx" and line.level >= logging.WARNING]
        assert tx.startswith(f"[{owner}-tx] close(): the transaction of transactional.id 'tx-{owner}' was not ended")
    raised = [line.message for line in ours if line.level == logging.ERROR and line.client_id == "orders"]
    assert any("RaisingCallback(orders)" in m for m in raised) and any("RaisingInterceptor(orders) raised in on_send" in m for m in raised)
    assert any("RaisingInterceptor(orders) raised in on_acknowledgement" in m for m in raised)


def test_a_client_id_with_percent_signs_and_a_message_without_arguments_print_as_written(caplog: pytest.LogCaptureFixture) -> None:
    """The prefix is an argument, never pasted into the format string: '%' in either survives."""
    from aioproducer.logs import client_logger

    caplog.set_level(logging.INFO, "aioproducer.test")
    log = client_logger("aioproducer.test", "100%s")
    log.info("50% done")
    log.warning("%d%% done", 75, extra={"job": "j"})
    assert [r.getMessage() for r in caplog.records] == ["[100%s] 50% done", "[100%s] 75% done"]
    assert [getattr(r, "client_id") for r in caplog.records] == ["100%s", "100%s"]
    assert getattr(caplog.records[1], "job") == "j"  # the caller's own extra kept beside it
    assert caplog.records[0].funcName == "test_a_client_id_with_percent_signs_and_a_message_without_arguments_print_as_written"
