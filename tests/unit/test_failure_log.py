"""DeliveryFailureLog: records not delivered are said at WARNING, once per (topic, error class) per interval."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from aioproducer.errors import KafkaConnectionError, KafkaTimeoutError, ProducerClosedError, TransactionAbortedError
from aioproducer.internals.failure_log import DeliveryFailureLog

LOGGER = "aioproducer.producer"


class FakeClock:
    def __init__(self) -> None:
        self.now = 5_000_000.0

    def __call__(self) -> float:
        return self.now


def lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]


def expired(partition: int) -> KafkaTimeoutError:
    return KafkaTimeoutError(
        f"Expiring 3 record(s) for orders-{partition}: 120004 ms has passed since batch creation "
        "(delivery.timeout.ms=120000); the last attempt failed with KafkaConnectionError: could not connect"
    )


def test_the_first_failure_is_said_at_once_then_counted_until_the_interval_is_over(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    clock = FakeClock()
    failures = DeliveryFailureLog(interval_ms=10_000, clock=clock)
    failures.record("orders", 3, 3, expired(3))
    assert lines(caplog) == [
        "3 record(s) for topic 'orders' (partition 3) not delivered: KafkaTimeoutError: " + str(expired(3))
    ]
    for i in range(10_000):  # an outage expiring batch after batch: no line per batch
        clock.now += 0.5
        failures.record("orders", i % 6, 2, expired(i % 6))
    assert len(lines(caplog)) == 1
    clock.now += 5_000  # 10 s since the first line: the next failure says them all
    failures.record("orders", 1, 2, expired(1))
    assert len(lines(caplog)) == 2
    assert lines(caplog)[1].startswith(
        "20002 record(s) for topic 'orders' (partitions 0, 1, 2, 3, 4, 5) not delivered in the last 10.0 s: KafkaTimeoutError: "
    )
    assert "delivery.timeout.ms=120000" in lines(caplog)[1]


def test_counted_failures_are_said_when_their_interval_is_over_without_a_new_failure(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    clock = FakeClock()
    failures = DeliveryFailureLog(interval_ms=10_000, clock=clock)
    failures.record("orders", 0, 1, expired(0))
    clock.now += 1_000
    failures.record("orders", 0, 4, expired(0))
    clock.now += 8_999
    failures.flush_due()  # what the timer calls: not due yet
    assert len(lines(caplog)) == 1
    clock.now += 1
    failures.flush_due()
    assert len(lines(caplog)) == 2 and lines(caplog)[1].startswith("4 record(s) for topic 'orders' (partition 0) not delivered in the last 10.0 s")
    failures.flush_due()
    failures.flush()
    assert len(lines(caplog)) == 2  # nothing counted any more: nothing said twice


def test_topics_and_error_classes_are_limited_apart_and_aborted_transactions_are_not_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    failures = DeliveryFailureLog(interval_ms=10_000, clock=FakeClock())
    failures.record("orders", 0, 1, expired(0))
    failures.record("orders", 0, 1, KafkaConnectionError("connection to 127.0.0.1:9092 (node 1) broke"))
    failures.record("payments", 0, 1, expired(0))
    failures.record("orders", 0, 7, TransactionAbortedError("the transaction was aborted before this record was sent"))
    assert [line.split(" not delivered")[0] for line in lines(caplog)] == [
        "1 record(s) for topic 'orders' (partition 0)",
        "1 record(s) for topic 'orders' (partition 0)",
        "1 record(s) for topic 'payments' (partition 0)",
    ]
    assert "KafkaConnectionError" in lines(caplog)[1]


def test_flush_says_what_is_counted_whatever_the_interval(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    clock = FakeClock()
    failures = DeliveryFailureLog(interval_ms=10_000, clock=clock)
    failures.record("orders", 0, 1, expired(0))
    for partition in range(20):
        failures.record("orders", partition, 1, ProducerClosedError("the producer was closed before this record was delivered"))
    clock.now += 100
    failures.flush()
    said = lines(caplog)
    assert len(said) == 3
    assert said[2].startswith(
        "19 record(s) for topic 'orders' (partitions 1, 2, 3, 4, 5, 6, 7, 8 and 11 more) not delivered in the last 0.1 s: ProducerClosedError"
    )


async def test_the_timer_says_counted_failures_when_no_failure_follows(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, LOGGER)
    failures = DeliveryFailureLog(interval_ms=30)  # the real clock and the loop's timer
    failures.record("orders", 0, 1, expired(0))
    failures.record("orders", 0, 2, expired(0))
    assert len(lines(caplog)) == 1
    deadline = time.monotonic() + 5
    while len(lines(caplog)) < 2:
        assert time.monotonic() < deadline, "the counted failures were never said"
        await asyncio.sleep(0.005)
    assert lines(caplog)[1].startswith("2 record(s) for topic 'orders' (partition 0) not delivered in the last")
    failures.flush()


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval_ms"):
        DeliveryFailureLog(interval_ms=0)
