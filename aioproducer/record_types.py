"""The record tuples the native data plane makes: ``Record`` (an appended record, given back for a
split) and ``RecordMetadata`` (where a record landed, what ``await future`` returns).

At the bottom of the package, beside ``lifecycle.py``, because the native module
(``native/src/batch_builder.rs``, ``native/src/batch.rs``) makes them and imports nothing
from above it: a data plane that reached up into ``protocol/`` or ``internals/`` would tie
itself to what stands on it. ``aioproducer.protocol.records``, ``aioproducer.internals.batch``
and ``aioproducer`` hand them on.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Record", "RecordMetadata", "TopicPartition"]


class Record(NamedTuple):
    """One appended record, as ``RecordBatchBuilder.records()`` gives it back (the split path)."""

    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class TopicPartition(NamedTuple):
    """A topic and a partition: what aiokafka's and kafka-python's ``TopicPartition`` hold, equal to theirs."""

    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """Where a record landed: what ``await future`` returns.

    ``offset`` is -1 when the broker did not say (``acks=0``, or a duplicate
    the broker had already written). ``timestamp`` is the broker's log-append
    time when it reports one, else the record's create time (as in Java).
    A named tuple because one is made per acknowledged record: it is the
    cheapest immutable object with named fields.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int
    #: 1 (LogAppendTime) when ``timestamp`` is the broker's append time (the topic's
    #: ``message.timestamp.type``), else 0 (CreateTime): aiokafka's field, the record batch's
    #: timestamp type as a consumer reads it.
    timestamp_type: int = 0

    @property
    def topic_partition(self) -> TopicPartition:
        """``(topic, partition)`` as aiokafka's ``RecordMetadata.topic_partition`` gives it."""
        return TopicPartition(self.topic, self.partition)

    @property
    def log_start_offset(self) -> int:
        """aiokafka's field: always -1 here, as the partition's log start offset the broker reports is not kept."""
        return -1
