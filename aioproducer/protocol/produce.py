"""The Produce request encoder and response decoder: the producer's hot path, in Rust.

Why not the declarative codec of :mod:`~aioproducer.protocol.messages`? It is
general (any API, any version, bodies as dicts) and pays for it on every
message: a dict built or read per struct and a closure call per field. A Produce
request is sent per node and per drain pass, and with large records (one record
per batch) there is one request for every two or three records, so that
generality was paid every few records: 20-35 µs per request and response (timeit,
three 10 KB batches, v8/v10). The codec is the native crate's
(``native/src/produce/``: pure functions over bytes, with PyO3 wrappers, so that
a native drain and completion can call them too); this module names it and holds
the types it returns:

* :func:`encode_produce_request` returns the whole frame as chunks, like
  :func:`~aioproducer.protocol.messages.encode_request_chunks`: sized first,
  then written once; record batches of :data:`SPLICE_THRESHOLD` bytes or more
  are included by reference, never copied into the frame (a large request then
  goes to the connection's writer thread, which reads the chunks in place,
  without a copy on the event loop's thread); a frame without such batches is
  one ``bytes``.
* :func:`decode_produce_response` returns named tuples, one
  :class:`PartitionResponse` per partition in the order the broker wrote them.
* :func:`read_produce_response` decodes the same bytes into a :class:`ProduceAnswer`: the
  connection's form of a Produce response. It keeps the bytes and the five fields per partition
  the completion reads (``RecordQueues.complete``, which reads them natively), so an answer the
  producer completes never becomes Python objects; its ``partitions`` and ``node_endpoints`` are
  the named tuples, made when asked (a decision on an error, the test kit).

The wire layout is the one declared in ``messages._PRODUCE_REQUEST`` /
``_PRODUCE_RESPONSE`` (Kafka's ``ProduceRequest.json`` / ``ProduceResponse.json``)
for every version aioproducer speaks, v3 to v12: v3 adds the transactional id,
v5 ``log_start_offset``, v8 ``record_errors`` and ``error_message``, v9 the
flexible (compact, tagged) encoding with request header v2 and response header
v1, v10 the KIP-951 leader hints as tagged fields (``current_leader``, tag 0 of
a partition; ``node_endpoints``, tag 0 of the body); v11 only adds an error
code, v12 none (it changes only what a broker does with a transactional request).
``tests/unit/test_produce_codec.py`` holds both directions to byte-for-byte
and value-for-value equality with the generic codec, for every version.

Errors follow the generic codec's contract: decoding raises only
:class:`~aioproducer.errors.ProtocolError` for truncated or malformed input,
never a panic (bytes after a complete body are ignored, as for every response);
encoding a value that does not fit raises ``ValueError`` naming it; a version
outside v3-v12 raises :class:`~aioproducer.errors.UnsupportedVersionError`.

Pure functions over bytes: no sockets, no asyncio.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple, TypeAlias

from aioproducer import _native

__all__ = [
    "FIRST_FLEXIBLE_VERSION",
    "MAX_VERSION",
    "MIN_VERSION",
    "NodeEndpoint",
    "PartitionResponse",
    "ProduceAnswer",
    "ProduceResponse",
    "AnyProduceResponse",
    "Records",
    "SPLICE_THRESHOLD",
    "TopicData",
    "decode_produce_response",
    "encode_produce_request",
    "read_produce_answers",
    "read_produce_response",
]

PRODUCE_API_KEY: Final = 0
#: The Produce versions this codec speaks (the same range as ``messages.SUPPORTED_VERSIONS``).
MIN_VERSION: Final = 3
MAX_VERSION: Final = 12
#: Produce v12 adds a transaction's partition to it (transactions v2, KIP-890 part 2): sent only
#: by a transactional producer when the cluster's ``transaction.version`` is 2. Any other
#: producer speaks at most v11, as before (``ClientConnection.produce_version``).
TRANSACTION_V2_VERSION: Final = 12
#: From this version on, Produce uses compact strings/arrays/bytes and tagged fields (KIP-482).
FIRST_FLEXIBLE_VERSION: Final = 9
#: Record batches at least this large become chunks of their own instead of being copied
#: into the frame (smaller ones are cheaper to copy than to carry as a list element).
SPLICE_THRESHOLD: Final = _native.PRODUCE_SPLICE_THRESHOLD

#: One partition's record batch: what ``RecordBatchBuilder.build()`` returns (``bytes``), or any
#: other bytes-like object, or a batch sent in place as two pieces, ``(header, section)``: its
#: 61-byte header and a read-only view of its records section where they were appended (the
#: sender's requests carry uncompressed batches of ``SPLICE_THRESHOLD`` bytes or more so;
#: ``native/src/batch_builder.rs``, ``build_in_place``, says why).
Records: TypeAlias = bytes | bytearray | memoryview | tuple[bytes, memoryview]
#: ``[(topic, [(partition, records), ...]), ...]``: the request's ``topic_data`` without dicts.
TopicData: TypeAlias = Sequence[tuple[str, Sequence[tuple[int, Records | None]]]]

# ================================================================== decoding


class PartitionResponse(NamedTuple):
    """One partition's answer. Fields a version lacks hold their schema default."""

    topic: str
    partition: int
    error_code: int
    base_offset: int
    #: The broker's append time when the topic uses LogAppendTime, else -1.
    log_append_time_ms: int
    #: v5+; -1 before.
    log_start_offset: int
    #: v8+: ``(batch_index, batch_index_error_message)`` of the records that made the batch fail.
    record_errors: tuple[tuple[int, str | None], ...]
    #: v8+; None before.
    error_message: str | None
    #: v10+ (KIP-951) ``current_leader``: the new leader's id and epoch on NOT_LEADER_OR_FOLLOWER, else -1.
    leader_id: int
    leader_epoch: int


class NodeEndpoint(NamedTuple):
    """v10+ (KIP-951): where a leader named in ``PartitionResponse.leader_id`` can be reached."""

    node_id: int
    host: str
    port: int
    rack: str | None


class ProduceResponse(NamedTuple):
    """A decoded Produce response, flattened: every partition of every topic, in wire order."""

    correlation_id: int
    partitions: list[PartitionResponse]
    throttle_time_ms: int
    node_endpoints: list[NodeEndpoint]


#: A Produce response as the connection reads it (``read_produce_response``): ``correlation_id``,
#: ``throttle_time_ms``, ``partitions`` and ``node_endpoints`` as :class:`ProduceResponse` has them.
ProduceAnswer = _native.ProduceAnswer
#: What a Produce request's callback gets: the connection's :class:`ProduceAnswer`, or a
#: :class:`ProduceResponse` a test or a fake connection made.
AnyProduceResponse: TypeAlias = ProduceAnswer | ProduceResponse

#: ``encode_produce_request(version, correlation_id, client_id, transactional_id, acks, timeout_ms,
#: topic_data)``: the frame's chunks (``native/src/produce/python.rs`` documents it and its cost).
encode_produce_request = _native.encode_produce_request
#: ``decode_produce_response(version, payload)``: a :class:`ProduceResponse` (payload: the frame
#: without its size prefix), or :class:`~aioproducer.errors.ProtocolError`.
decode_produce_response = _native.decode_produce_response
#: ``read_produce_response(version, payload)``: a :class:`ProduceAnswer` (the whole payload decoded
#: and checked, with :func:`decode_produce_response`'s errors), its bytes kept.
read_produce_response = _native.read_produce_response
#: ``read_produce_answers(in_flight, data, pos, max_response_size, events, produce_answered)``: the
#: connection's hot path, the Produce answers at the front of ``data[pos:]`` in one call
#: (``native/src/produce/answer.rs`` says what it takes and where it stops); ``(pos, taken)``.
read_produce_answers = _native.read_produce_answers
