"""The null-value decision, at the plain API: a configured serializer is called for None, as Java's KafkaProducer does.

Why: a JSON serializer's ``b"null"`` is a value, not a tombstone; skipping the serializer for
None silently turned it into one. The ready-made serializers map None to None, so a producer
using them still writes a tombstone for a None value; a serializer of the user's decides itself.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from aioproducer import (
    bytes_serializer,
    int_serializer,
    json_serializer,
    long_serializer,
    str_serializer,
)
from aioproducer.testing import FakeProducer


def json_text(value: Any) -> bytes:
    return json.dumps(value).encode()


class TopicJson:
    """Java's Serializer shape: serialize(topic, data)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def serialize(self, topic: str, data: Any) -> bytes:
        self.seen.append((topic, data))
        return json_text(data)


async def test_a_users_serializer_sees_none_key_and_value() -> None:
    shaped = TopicJson()
    async with FakeProducer(topics={"t": 1}, key_serializer=json_text, value_serializer=shaped) as producer:
        await (await producer.send("t", None))  # the general route (the topic's metadata is not known yet)
        await (await producer.send("t", None))  # the serializing route (known now, serializers the only hook)
        await (await producer.send("t", None, None, headers=[("h", b"1")]))  # the general route
        await producer.send_and_wait("t", {"a": 1}, "k")
    nulls = (b"null", b"null")
    assert [(r.key, r.value) for r in producer.history("t")] == [nulls, nulls, nulls, (b'"k"', b'{"a": 1}')]
    assert shaped.seen == [("t", None), ("t", None), ("t", None), ("t", {"a": 1})]


async def test_an_async_serializer_sees_none_too() -> None:
    async def tagged(value: Any) -> bytes:
        return b"tag:" + repr(value).encode()

    async with FakeProducer(topics={"t": 1}, value_serializer=tagged) as producer:
        await producer.send_and_wait("t", None)
    assert [r.value for r in producer.history("t")] == [b"tag:None"]


@pytest.mark.parametrize("serializer", [bytes_serializer, str_serializer, int_serializer, long_serializer, json_serializer])
async def test_ready_made_serializers_keep_none_a_tombstone(serializer: Any) -> None:
    assert serializer(None) is None
    async with FakeProducer(topics={"t": 1}, value_serializer=serializer, key_serializer=serializer) as producer:
        await producer.send_and_wait("t", None)
    assert [(r.key, r.value) for r in producer.history("t")] == [(None, None)]


async def test_without_a_serializer_none_is_null() -> None:
    async with FakeProducer(topics={"t": 1}) as producer:
        await producer.send_and_wait("t", None, b"k")
    assert [(r.key, r.value) for r in producer.history("t")] == [(b"k", None)]
