"""aiokafka's record structures: ``TopicPartition``, ``RecordMetadata``, ``OffsetAndMetadata``.

Named tuples with aiokafka's fields in aiokafka's order, so that a moved program reads, compares
and unpacks them as before (a ``TopicPartition`` here equals aiokafka's: both are tuples).
"""

from __future__ import annotations

from typing import NamedTuple

from aioproducer.record_types import TopicPartition

__all__ = ["TIMESTAMP_CREATE_TIME", "TIMESTAMP_LOG_APPEND_TIME", "OffsetAndMetadata", "RecordMetadata", "TopicPartition"]

#: ``RecordMetadata.timestamp_type``: the producer's create time, or the broker's append time.
TIMESTAMP_CREATE_TIME = 0
TIMESTAMP_LOG_APPEND_TIME = 1


class RecordMetadata(NamedTuple):
    """Where a record (or the first record of a batch) landed, with aiokafka's fields.

    ``timestamp_type`` is 1 (LogAppendTime) when the broker stamped the record itself,
    else 0 (CreateTime). ``log_start_offset`` is -1: aioproducer does not keep the
    partition's log start offset that the broker reports.
    """

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int | None
    timestamp_type: int
    log_start_offset: int | None


class OffsetAndMetadata(NamedTuple):
    """An offset to commit and its metadata string, as aiokafka's ``send_offsets_to_transaction`` takes them."""

    offset: int
    metadata: str
