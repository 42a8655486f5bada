"""The record intake's hooks: one list, from which the route and send_arrow()'s refusal derive.

Adding a per-record hook is one field of ``Hooks`` (``internals/intake.py``) and its stage in
``RecordIntake.send``: this test fails for a field that ``present()`` does not name, so a new hook
cannot be left out of the route (the fast paths would skip it) or out of send_arrow's refusal.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from aioproducer.config import ProducerConfig
from aioproducer.internals.intake import Hooks


class _Interceptor:
    def on_send(self, record: Any) -> Any:
        return record


def _hooks(**config: Any) -> Hooks:
    return Hooks.of(ProducerConfig(bootstrap_servers="localhost:9092", **config), None)


#: Per field of Hooks: a value that turns the hook on, the name present() gives it, and whether send_arrow() refuses it.
_ON: dict[str, tuple[Any, str, bool]] = {
    "interceptors": (_hooks(interceptor_classes=[_Interceptor()]).interceptors, "interceptor.classes", True),
    "key_serializer": (_hooks(key_serializer="aioproducer.str_serializer").key_serializer, "key.serializer", True),
    "value_serializer": (_hooks(value_serializer="aioproducer.json_serializer").value_serializer, "value.serializer", True),
    "partitioner": (_hooks(partitioner_class=lambda *args: 0).partitioner, "partitioner.class", True),
    "ignore_keys": (True, "partitioner.ignore.keys", False),  # send_arrow honours it natively
    "transactional": (True, "transactional.id", False),  # send_arrow checks the transaction once per call
    "tracing": (object(), "tracing", True),
}


def test_a_producer_without_hooks_takes_the_plain_route() -> None:
    hooks = _hooks()
    assert hooks.present() == [] and hooks.route == "plain" and hooks.arrow_refusal() is None


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(Hooks)])
def test_every_hook_is_named_and_decides_the_route_and_send_arrows_refusal(field: str) -> None:
    assert field in _ON, f"Hooks.{field} is new: give it a value, a name and send_arrow's answer here"
    value, name, refused_by_arrow = _ON[field]
    hooks = dataclasses.replace(_hooks(), **{field: value})
    assert hooks.present() == [name]
    assert hooks.route == ("serializing" if field.endswith("_serializer") else "general")
    refusal = hooks.arrow_refusal()
    assert (refusal is not None and name in refusal) if refused_by_arrow else refusal is None


def test_hooks_are_read_from_the_configuration_once() -> None:
    hooks = _hooks(value_serializer="aioproducer.json_serializer", transactional_id="t", partitioner_ignore_keys=True)
    assert hooks.present() == ["value.serializer", "partitioner.ignore.keys", "transactional.id"]
    assert hooks.route == "general"
