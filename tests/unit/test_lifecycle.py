"""The one lifecycle state: forward-only moves, what a refused record gets, and its one writer (the layers sharing it: test_producer_lifecycle)."""

from __future__ import annotations

import ast
from pathlib import Path

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


#: The methods that move a lifecycle; only ``ProducerEngine`` may call them (see lifecycle.py).
MOVES = frozenset({"start", "close", "force", "finish", "refuse"})
PACKAGE = Path(__file__).resolve().parents[2] / "aioproducer"


def lifecycle_moves(source: str) -> list[int]:
    """Lines of ``source`` calling a move on something named ``lifecycle`` (``lifecycle.close()``, ``self.lifecycle.force()`` ...)."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MOVES:
            receiver = node.func.value
            name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
            if "lifecycle" in name.lower():
                lines.append(node.lineno)
    return lines


@pytest.mark.source_tree
def test_only_the_engine_moves_the_lifecycle() -> None:
    """One writer: the parts read the lifecycle (typed ``LifecycleView``) and report; a move anywhere else fails here."""
    movers = {
        str(path.relative_to(PACKAGE.parent)): moves
        for path in sorted(PACKAGE.rglob("*.py"))
        if (moves := lifecycle_moves(path.read_text()))
    }
    assert list(movers) == ["aioproducer/internals/engine.py"]


def test_a_move_outside_the_engine_is_seen() -> None:
    assert lifecycle_moves("def close(self):\n    self.lifecycle.close()\n    self.lifecycle.state\n") == [2]
    assert lifecycle_moves("lifecycle = Lifecycle()\nlifecycle.refuse(error)\npool.close()\n") == [2]
