"""One closed RecordBatch, as given bytes, to a partition's leader: how tests hand exact bytes to a broker.

The producer never sends a batch this way (its ``Sender`` drains, retries and numbers
batches); the readback tests use it to put batches built byte for byte (every codec, a
re-stamped timestamp, a batch of our own against a decoder of someone else's) on
librdkafka's mock cluster and on real Kafka, and read them back with independent clients.
"""

from __future__ import annotations

from aioproducer.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    ProtocolError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from aioproducer.network.client import KafkaClient
from aioproducer.protocol.produce import AnyProduceResponse, PartitionResponse

__all__ = ["produce_batch"]


async def produce_batch(
    client: KafkaClient,
    topic: str,
    partition: int,
    batch_bytes: bytes,
    *,
    acks: int = -1,
    timeout_ms: int = 30000,
) -> int:
    """Send ``batch_bytes`` to the partition's leader in one Produce request; return its base offset.

    No retry. A partition without a known leader gets one metadata refresh before the
    topic's (or partition's) error is raised; a broker error code raises its
    :mod:`aioproducer.errors` class. ``acks=0`` returns -1 once written: no answer comes.
    """
    leader = client.metadata.leader_for(topic, partition)
    if leader is None:
        await client.refresh_metadata([topic])
        metadata = client.metadata
        leader = metadata.leader_for(topic, partition)
        if leader is None:
            code = metadata.topic_error(topic) or (
                UnknownTopicOrPartitionError.errno
                if metadata.partition(topic, partition) is None
                else LeaderNotAvailableError.errno
            )
            raise error_for_code(code)(f"no leader for {topic}-{partition}")
    try:
        conn = await client.connection(leader)
        response = await conn.produce([(topic, [(partition, batch_bytes)])], acks=acks, timeout_ms=timeout_ms)
    except (KafkaConnectionError, KafkaTimeoutError):  # either way the connection is gone
        client.request_update()
        raise
    if response is None:
        return -1
    result = _partition_response(response, topic, partition)
    if result.error_code:
        error = error_for_code(result.error_code)
        if error.invalid_metadata:
            client.request_update()
        raise error(result.error_message or f"producing to {topic}-{partition}")
    return result.base_offset


def _partition_response(response: AnyProduceResponse, topic: str, partition: int) -> PartitionResponse:
    """The Produce response entry for ``topic``/``partition``; its absence is a protocol error."""
    for part in response.partitions:
        if part.topic == topic and part.partition == partition:
            return part
    raise ProtocolError(f"Produce response has no entry for {topic}-{partition}")
