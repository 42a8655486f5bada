"""``Producer.committed_offsets()`` without a broker: its arguments, refused before any I/O, and reading an answer."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from aioproducer import Producer, ProducerClosedError
from aioproducer.errors import GroupAuthorizationFailedError, ProtocolError, UnknownTopicOrPartitionError
from aioproducer.internals.transactions import _offsets_of


class TopicPartition(NamedTuple):
    """As aiokafka's and kafka-python's: a named pair."""

    topic: str
    partition: int


class AttributeTopicPartition:
    """As confluent-kafka's: attributes, not a tuple."""

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition


@pytest.mark.parametrize(
    ("group_id", "partitions", "error", "match"),
    [
        ("", [("t", 0)], ValueError, "group_id=...\\): the group id is empty"),
        (None, [("t", 0)], TypeError, "group_id=...\\) must be a str, got NoneType"),
        ("g", "t", TypeError, "partitions=...\\) takes an iterable .* got str"),
        ("g", 5, TypeError, "partitions=...\\) takes an iterable .* got int"),
        ("g", [("t", 0, 1)], TypeError, "partitions=...\\): \\('t', 0, 1\\) is neither"),
        ("g", ["t"], TypeError, "partitions=...\\): 't' is neither"),
        ("g", [(0, "t")], TypeError, "partitions=...\\): \\(0, 't'\\) must be a \\(str, int\\) pair"),
        ("g", [("t", True)], TypeError, "must be a \\(str, int\\) pair"),
        ("g", [("t", -1)], ValueError, "partitions=...\\): \\('t', -1\\) has a negative partition"),
        ("g", [("", 0)], ValueError, "partitions=...\\): \\('', 0\\) has an empty topic"),
    ],
)
async def test_bad_arguments_name_the_argument_before_any_io(
    group_id: Any, partitions: Any, error: type[Exception], match: str
) -> None:
    producer = Producer(bootstrap_servers="localhost:1")  # never started: a check after I/O would say so instead
    with pytest.raises(error, match=match):
        await producer.committed_offsets(group_id, partitions)


async def test_require_stable_must_be_a_bool() -> None:
    producer = Producer(bootstrap_servers="localhost:1")
    with pytest.raises(TypeError, match="require_stable=...\\) must be a bool, got str"):
        await producer.committed_offsets("g", [("t", 0)], require_stable="no")  # type: ignore[arg-type]


async def test_good_arguments_on_a_producer_not_started_say_so() -> None:
    producer = Producer(bootstrap_servers="localhost:1")
    partitions = [("t", 0), TopicPartition("t", 1), AttributeTopicPartition("u", 0)]
    with pytest.raises(ProducerClosedError, match="not started"):
        await producer.committed_offsets("g", partitions)
    await producer.close()
    with pytest.raises(ProducerClosedError, match="closed producer"):
        await producer.committed_offsets("g", {("t", 0): 5})  # the dict given to send_offsets_to_transaction


# ------------------------------------------------------------------ reading an answer
def answer(*partitions: dict[str, Any], error_code: int = 0) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "error_code": error_code, "topics": [{"name": "t", "partitions": list(partitions)}]}


def partition(index: int, offset: int, error_code: int = 0) -> dict[str, Any]:
    return {"partition_index": index, "committed_offset": offset, "committed_leader_epoch": -1, "metadata": "",
            "error_code": error_code}


def test_minus_one_is_none_and_the_result_follows_the_request_order() -> None:
    got = _offsets_of(answer(partition(1, -1), partition(0, 42)), "g", [("t", 0), ("t", 1)])
    assert list(got.items()) == [(("t", 0), 42), (("t", 1), None)]


def test_a_partition_error_raises_its_class_naming_group_and_partition() -> None:
    with pytest.raises(UnknownTopicOrPartitionError, match="group 'g', partition t\\[3\\]"):
        _offsets_of(answer(partition(0, 5), partition(3, -1, UnknownTopicOrPartitionError.errno)), "g", [("t", 0), ("t", 3)])


def test_a_top_level_error_raises_its_class_naming_the_group() -> None:
    with pytest.raises(GroupAuthorizationFailedError, match="group 'g'"):
        _offsets_of(answer(error_code=GroupAuthorizationFailedError.errno), "g", [("t", 0)])


def test_a_partition_the_coordinator_left_out_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="did not answer for \\[\\('t', 1\\)\\]"):
        _offsets_of(answer(partition(0, 5)), "g", [("t", 0), ("t", 1)])
