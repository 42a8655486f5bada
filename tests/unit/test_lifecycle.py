"""The one lifecycle state: forward-only moves and what a refused record gets (the layers sharing it: test_producer_lifecycle)."""

from __future__ import annotations

import pytest

from aioproducer.errors import KafkaError, ProducerClosedError
from aioproducer.lifecycle import Lifecycle, State


def state(lifecycle: Lifecycle) -> State:
    """The state, read afresh (mypy would narrow ``lifecycle.state`` across the calls that move it)."""
    return lifecycle.state


def test_moves_only_forward_whatever_the_order_of_calls() -> None:
    lifecycle = Lifecycle()
    assert state(lifecycle) is State.NEW and not lifecycle.accepting and not lifecycle.closing
    lifecycle.start()
    assert state(lifecycle) is State.RUNNING and lifecycle.accepting
    lifecycle.force()
    lifecycle.close()  # a graceful close after a forced one must not reopen the drain
    lifecycle.start()
    assert state(lifecycle) is State.FORCED and lifecycle.closing and not lifecycle.accepting
    lifecycle.finish()
    lifecycle.close()
    assert state(lifecycle) is State.CLOSED


def test_a_refusal_stops_accepting_while_running_and_the_first_reason_stays() -> None:
    lifecycle = Lifecycle(State.RUNNING)
    first, second = KafkaError("fatal: first"), KafkaError("fatal: second")
    lifecycle.refuse(first)
    lifecycle.refuse(second)
    assert state(lifecycle) is State.RUNNING and not lifecycle.accepting and not lifecycle.closing
    assert lifecycle.refused() is first
    lifecycle.close()
    assert lifecycle.refused() is first  # closing later does not hide why records were refused


def test_a_closed_lifecycle_without_refusal_refuses_with_producer_closed() -> None:
    lifecycle = Lifecycle(State.RUNNING)
    lifecycle.close()
    error = lifecycle.refused()
    assert isinstance(error, ProducerClosedError) and "closed" in str(error)
