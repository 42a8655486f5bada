"""The Kafka APIs aioproducer speaks, declared as data, and the frame-level codec.

Each schema below transcribes one of Kafka's JSON message definitions
(``clients/src/main/resources/common/message/<Name>.json``): field names are
the snake_case of the JSON names, versions/nullable versions/defaults/tags as
there. Only versions in :data:`SUPPORTED_VERSIONS` are declared valid.

Framing (Kafka protocol guide, "Common Request and Response Structure"):

* every frame is ``int32 size`` + header + body;
* request header v1 = ``api_key int16, api_version int16, correlation_id int32,
  client_id NULLABLE_STRING``; v2 (flexible request versions) appends a
  tagged-field section. ``client_id`` stays a classic nullable string even in
  v2 (``RequestHeader.json``: ``"flexibleVersions": "none"`` for that field);
* response header v0 = ``correlation_id int32``; v1 (flexible response
  versions) appends a tagged-field section, **except** for ApiVersions, whose
  response header is always v0 so that a client can parse it before it knows
  which versions the broker speaks (KIP-511);
* a broker that does not support the requested ApiVersions version answers
  with a *v0* body carrying ``UNSUPPORTED_VERSION``; :func:`decode_response`
  recognises that and decodes the body as v0, as the Java client does.

Everything here is pure: bytes in, dicts out. Decoding raises only
:class:`~aioproducer.errors.ProtocolError` for bad input; asking for an API or
version not declared raises :class:`~aioproducer.errors.UnsupportedVersionError`;
encoding a body whose values do not fit the schema raises ``ValueError``.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from aioproducer.errors import ProtocolError, UnsupportedVersionError
from aioproducer.protocol import primitives as p
from aioproducer.protocol.primitives import Reader
from aioproducer.protocol.schema import (
    BOOL,
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    ArrayOf,
    Field,
    MessageSchema,
    Output,
    VersionRange,
    array,
    field,
    struct as struct_of,
)

__all__ = [
    "ADD_OFFSETS_TO_TXN",
    "ADD_PARTITIONS_TO_TXN",
    "API_NAMES",
    "API_VERSIONS",
    "END_TXN",
    "FETCH",
    "FIND_COORDINATOR",
    "GET_TELEMETRY_SUBSCRIPTIONS",
    "INIT_PRODUCER_ID",
    "LIST_OFFSETS",
    "METADATA",
    "OFFSET_FETCH",
    "PRODUCE",
    "PUSH_TELEMETRY",
    "REQUEST_SCHEMAS",
    "RESPONSE_SCHEMAS",
    "RequestHeader",
    "SASL_AUTHENTICATE",
    "SASL_HANDSHAKE",
    "SUPPORTED_VERSIONS",
    "TXN_OFFSET_COMMIT",
    "UNSUPPORTED_VERSION_ERROR_CODE",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_request_chunks",
    "encode_response",
    "is_flexible",
    "peek_correlation_id",
    "request_header_version",
    "response_header_version",
]

# API keys (Kafka's ApiKeys.java).
PRODUCE: Final = 0
FETCH: Final = 1
LIST_OFFSETS: Final = 2
METADATA: Final = 3
OFFSET_FETCH: Final = 9
FIND_COORDINATOR: Final = 10
SASL_HANDSHAKE: Final = 17
API_VERSIONS: Final = 18
INIT_PRODUCER_ID: Final = 22
ADD_PARTITIONS_TO_TXN: Final = 24
ADD_OFFSETS_TO_TXN: Final = 25
END_TXN: Final = 26
TXN_OFFSET_COMMIT: Final = 28
SASL_AUTHENTICATE: Final = 36
GET_TELEMETRY_SUBSCRIPTIONS: Final = 71
PUSH_TELEMETRY: Final = 72

#: Error code 35, used by the ApiVersions v0 fallback.
UNSUPPORTED_VERSION_ERROR_CODE: Final = 35


def _msg(name: str, api_key: int, valid: str, flexible: str, *fields: Field) -> MessageSchema:
    return MessageSchema(name, api_key, VersionRange.parse(valid), VersionRange.parse(flexible), tuple(fields))


_THROTTLE = "throttle_time_ms"

# ------------------------------------------------------------------- Produce
# ProduceRequest.json: v3 adds TransactionalId (RecordBatch v2 only from v3 on),
# v7 zstd, v8 RecordErrors in the response, v9 flexible, v10 KIP-951 leader
# hints in the response, v11 TRANSACTION_ABORTABLE (KIP-890), v12 the same bytes
# as v11 but, inside a transaction, adds the partition to it (transactions v2,
# KIP-890 part 2: sent only when the cluster's transaction.version is 2, see
# ``transaction_manager.py``). v0-2 carry old message sets, which aioproducer never writes.

_PRODUCE_REQUEST = _msg(
    "ProduceRequest", PRODUCE, "3-12", "9+",
    field("transactional_id", STRING, "3+", nullable="3+", default=None),
    field("acks", INT16),
    field("timeout_ms", INT32),
    field("topic_data", array(
        field("name", STRING),
        field("partition_data", array(
            field("index", INT32),
            field("records", RECORDS, nullable="0+", default=None),
        )),
    )),
)

_NODE_ENDPOINT = array(
    field("node_id", INT32),
    field("host", STRING),
    field("port", INT32),
    field("rack", STRING, nullable="0+", default=None),
)

_PRODUCE_RESPONSE = _msg(
    "ProduceResponse", PRODUCE, "3-12", "9+",
    field("responses", array(
        field("name", STRING),
        field("partition_responses", array(
            field("index", INT32),
            field("error_code", INT16),
            field("base_offset", INT64),
            field("log_append_time_ms", INT64, "2+", default=-1),
            field("log_start_offset", INT64, "5+", default=-1),
            field("record_errors", array(
                field("batch_index", INT32, "8+"),
                field("batch_index_error_message", STRING, "8+", nullable="8+", default=None),
            ), "8+"),
            field("error_message", STRING, "8+", nullable="8+", default=None),
            field("current_leader", struct_of(
                field("leader_id", INT32, "10+", default=-1),
                field("leader_epoch", INT32, "10+", default=-1),
            ), "10+", tag=0),
        )),
    )),
    field(_THROTTLE, INT32, "1+"),
    field("node_endpoints", _NODE_ENDPOINT, "10+", tag=0),
)

# ------------------------------------------------------------------ Metadata
# MetadataRequest.json / MetadataResponse.json. v4 AllowAutoTopicCreation,
# v7 leader epochs, v8 authorized operations, v9 flexible, v10 topic ids,
# v11 drops cluster authorized operations, v12 nullable topic names, v13 (Kafka 4.0,
# KIP-1102) the same request whose answer ends with a top-level error code
# (REBOOTSTRAP_REQUIRED, 129: the client must rebootstrap).

_METADATA_REQUEST = _msg(
    "MetadataRequest", METADATA, "1-13", "9+",
    field("topics", array(
        field("topic_id", UUID, "10+"),
        field("name", STRING, nullable="10+"),
    ), nullable="1+"),
    field("allow_auto_topic_creation", BOOL, "4+", default=True),
    field("include_cluster_authorized_operations", BOOL, "8-10"),
    field("include_topic_authorized_operations", BOOL, "8+"),
)

_METADATA_RESPONSE = _msg(
    "MetadataResponse", METADATA, "1-13", "9+",
    field(_THROTTLE, INT32, "3+"),
    field("brokers", array(
        field("node_id", INT32),
        field("host", STRING),
        field("port", INT32),
        field("rack", STRING, "1+", nullable="1+", default=None),
    )),
    field("cluster_id", STRING, "2+", nullable="2+", default=None),
    field("controller_id", INT32, "1+", default=-1),
    field("topics", array(
        field("error_code", INT16),
        field("name", STRING, nullable="12+"),
        field("topic_id", UUID, "10+"),
        field("is_internal", BOOL, "1+", default=False),
        field("partitions", array(
            field("error_code", INT16),
            field("partition_index", INT32),
            field("leader_id", INT32),
            field("leader_epoch", INT32, "7+", default=-1),
            field("replica_nodes", ArrayOf(INT32)),
            field("isr_nodes", ArrayOf(INT32)),
            field("offline_replicas", ArrayOf(INT32), "5+"),
        )),
        field("topic_authorized_operations", INT32, "8+", default=-(2**31)),
    )),
    field("cluster_authorized_operations", INT32, "8-10", default=-(2**31)),
    field("error_code", INT16, "13+", default=0),
)

# --------------------------------------------------------------- ApiVersions
# ApiVersionsRequest.json / ApiVersionsResponse.json. v3 flexible, adds the
# client software name/version (KIP-511) and the feature tags (KIP-584).

_API_VERSIONS_REQUEST = _msg(
    "ApiVersionsRequest", API_VERSIONS, "0-3", "3+",
    field("client_software_name", STRING, "3+"),
    field("client_software_version", STRING, "3+"),
)

_API_VERSIONS_RESPONSE = _msg(
    "ApiVersionsResponse", API_VERSIONS, "0-3", "3+",
    field("error_code", INT16),
    field("api_keys", array(
        field("api_key", INT16),
        field("min_version", INT16),
        field("max_version", INT16),
    )),
    field(_THROTTLE, INT32, "1+"),
    field("supported_features", array(
        field("name", STRING, "3+"),
        field("min_version", INT16, "3+"),
        field("max_version", INT16, "3+"),
    ), "3+", tag=0),
    field("finalized_features_epoch", INT64, "3+", tag=1, default=-1),
    field("finalized_features", array(
        field("name", STRING, "3+"),
        field("max_version_level", INT16, "3+"),
        field("min_version_level", INT16, "3+"),
    ), "3+", tag=2),
    field("zk_migration_ready", BOOL, "3+", tag=3, default=False),
)

# ------------------------------------------------------------ InitProducerId
# InitProducerIdRequest.json / InitProducerIdResponse.json. v2 flexible,
# v3 (KIP-360) lets an idempotent producer bump its epoch, v4 PRODUCER_FENCED.

_INIT_PRODUCER_ID_REQUEST = _msg(
    "InitProducerIdRequest", INIT_PRODUCER_ID, "0-4", "2+",
    field("transactional_id", STRING, nullable="0+", default=None),
    field("transaction_timeout_ms", INT32),
    field("producer_id", INT64, "3+", default=-1),
    field("producer_epoch", INT16, "3+", default=-1),
)

_INIT_PRODUCER_ID_RESPONSE = _msg(
    "InitProducerIdResponse", INIT_PRODUCER_ID, "0-4", "2+",
    field(_THROTTLE, INT32),
    field("error_code", INT16),
    field("producer_id", INT64, default=-1),
    field("producer_epoch", INT16),
)

# --------------------------------------------------------------- OffsetFetch
# OffsetFetchRequest.json / OffsetFetchResponse.json: a group's committed offsets, read
# from its coordinator. v0 (offsets kept in ZooKeeper) is gone from Kafka 4; v2 allows
# null topics (all of them) and adds the top-level error code; v3 throttle time; v5 the
# committed leader epoch; v6 flexible; v7 RequireStable (KIP-447: answer
# UNSTABLE_OFFSET_COMMIT while a transaction with offsets for the group is pending).
# v8+ batch several groups, which aioproducer does not need.

_OFFSET_FETCH_REQUEST = _msg(
    "OffsetFetchRequest", OFFSET_FETCH, "1-7", "6+",
    field("group_id", STRING),
    field("topics", array(
        field("name", STRING),
        field("partition_indexes", ArrayOf(INT32)),
    ), nullable="2+", default=[]),
    field("require_stable", BOOL, "7+", default=False),
)

_OFFSET_FETCH_RESPONSE = _msg(
    "OffsetFetchResponse", OFFSET_FETCH, "1-7", "6+",
    field(_THROTTLE, INT32, "3+"),
    field("topics", array(
        field("name", STRING),
        field("partitions", array(
            field("partition_index", INT32),
            field("committed_offset", INT64),
            field("committed_leader_epoch", INT32, "5+", default=-1),
            field("metadata", STRING, nullable="0+"),
            field("error_code", INT16),
        )),
    )),
    field("error_code", INT16, "2+", default=0),
)

# ----------------------------------------------------- transactions and SASL
# Declared now so the transactional producer and SASL only add logic, not codecs.

_FIND_COORDINATOR_REQUEST = _msg(
    "FindCoordinatorRequest", FIND_COORDINATOR, "0-4", "3+",
    field("key", STRING, "0-3"),
    field("key_type", INT8, "1+", default=0),
    field("coordinator_keys", ArrayOf(STRING), "4+"),
)

_FIND_COORDINATOR_RESPONSE = _msg(
    "FindCoordinatorResponse", FIND_COORDINATOR, "0-4", "3+",
    field(_THROTTLE, INT32, "1+"),
    field("error_code", INT16, "0-3"),
    field("error_message", STRING, "1-3", nullable="1-3", default=None),
    field("node_id", INT32, "0-3"),
    field("host", STRING, "0-3"),
    field("port", INT32, "0-3"),
    field("coordinators", array(
        field("key", STRING, "4+"),
        field("node_id", INT32, "4+"),
        field("host", STRING, "4+"),
        field("port", INT32, "4+"),
        field("error_code", INT16, "4+"),
        field("error_message", STRING, "4+", nullable="4+", default=None),
    ), "4+"),
)

_ADD_PARTITIONS_TO_TXN_REQUEST = _msg(
    "AddPartitionsToTxnRequest", ADD_PARTITIONS_TO_TXN, "0-3", "3+",
    field("v3_and_below_transactional_id", STRING, "0-3"),
    field("v3_and_below_producer_id", INT64, "0-3"),
    field("v3_and_below_producer_epoch", INT16, "0-3"),
    field("v3_and_below_topics", array(
        field("name", STRING),
        field("partitions", ArrayOf(INT32)),
    ), "0-3"),
)

_ADD_PARTITIONS_TO_TXN_RESPONSE = _msg(
    "AddPartitionsToTxnResponse", ADD_PARTITIONS_TO_TXN, "0-3", "3+",
    field(_THROTTLE, INT32),
    field("results_by_topic_v3_and_below", array(
        field("name", STRING),
        field("results_by_partition", array(
            field("partition_index", INT32),
            field("partition_error_code", INT16),
        )),
    ), "0-3"),
)

_ADD_OFFSETS_TO_TXN_REQUEST = _msg(
    "AddOffsetsToTxnRequest", ADD_OFFSETS_TO_TXN, "0-3", "3+",
    field("transactional_id", STRING),
    field("producer_id", INT64),
    field("producer_epoch", INT16),
    field("group_id", STRING),
)

_ADD_OFFSETS_TO_TXN_RESPONSE = _msg(
    "AddOffsetsToTxnResponse", ADD_OFFSETS_TO_TXN, "0-3", "3+",
    field(_THROTTLE, INT32),
    field("error_code", INT16),
)

# EndTxn v4 TRANSACTION_ABORTABLE; v5 (transactions v2, KIP-890 part 2): the
# coordinator bumps the epoch at every commit or abort and answers with the
# producer id and epoch to use next. TxnOffsetCommit v4 TRANSACTION_ABORTABLE;
# v5 the same bytes, but it adds the group to the transaction itself (no
# AddOffsetsToTxn). v4 and v5 are sent only under transaction.version 2.
_END_TXN_REQUEST = _msg(
    "EndTxnRequest", END_TXN, "0-5", "3+",
    field("transactional_id", STRING),
    field("producer_id", INT64),
    field("producer_epoch", INT16),
    field("committed", BOOL),
)

_END_TXN_RESPONSE = _msg(
    "EndTxnResponse", END_TXN, "0-5", "3+",
    field(_THROTTLE, INT32),
    field("error_code", INT16),
    field("producer_id", INT64, "5+", default=-1),
    field("producer_epoch", INT16, "5+", default=-1),
)

_TXN_OFFSET_COMMIT_REQUEST = _msg(
    "TxnOffsetCommitRequest", TXN_OFFSET_COMMIT, "0-5", "3+",
    field("transactional_id", STRING),
    field("group_id", STRING),
    field("producer_id", INT64),
    field("producer_epoch", INT16),
    field("generation_id", INT32, "3+", default=-1),
    field("member_id", STRING, "3+", default=""),
    field("group_instance_id", STRING, "3+", nullable="3+", default=None),
    field("topics", array(
        field("name", STRING),
        field("partitions", array(
            field("partition_index", INT32),
            field("committed_offset", INT64),
            field("committed_leader_epoch", INT32, "2+", default=-1),
            field("committed_metadata", STRING, nullable="0+", default=None),
        )),
    )),
)

_TXN_OFFSET_COMMIT_RESPONSE = _msg(
    "TxnOffsetCommitResponse", TXN_OFFSET_COMMIT, "0-5", "3+",
    field(_THROTTLE, INT32),
    field("topics", array(
        field("name", STRING),
        field("partitions", array(
            field("partition_index", INT32),
            field("error_code", INT16),
        )),
    )),
)

_SASL_HANDSHAKE_REQUEST = _msg(
    "SaslHandshakeRequest", SASL_HANDSHAKE, "0-1", "none",
    field("mechanism", STRING),
)

_SASL_HANDSHAKE_RESPONSE = _msg(
    "SaslHandshakeResponse", SASL_HANDSHAKE, "0-1", "none",
    field("error_code", INT16),
    field("mechanisms", ArrayOf(STRING)),
)

_SASL_AUTHENTICATE_REQUEST = _msg(
    "SaslAuthenticateRequest", SASL_AUTHENTICATE, "0-2", "2+",
    field("auth_bytes", BYTES),
)

_SASL_AUTHENTICATE_RESPONSE = _msg(
    "SaslAuthenticateResponse", SASL_AUTHENTICATE, "0-2", "2+",
    field("error_code", INT16),
    field("error_message", STRING, nullable="0+", default=None),
    field("auth_bytes", BYTES),
    field("session_lifetime_ms", INT64, "1+", default=0),
)

# ------------------------------------------------------ Fetch and ListOffsets
# The producer never sends these: ``aioproducer.testing.readback`` reads a topic back with
# them. FetchRequest.json / FetchResponse.json: Kafka 4 removed v0-3, so v4 (IsolationLevel,
# LastStableOffset, AbortedTransactions) is the floor; v5 log start offset, v7 fetch sessions
# (unused: session 0, epoch -1 is a full fetch), v9 current leader epoch, v11 rack and
# preferred read replica, v12 flexible. v13+ name topics by id only, so v12 is the ceiling
# (librdkafka's mock serves v0-16, Kafka 4.3 v4-18: v12 on both).

_FETCH_REQUEST = _msg(
    "FetchRequest", FETCH, "4-12", "12+",
    field("cluster_id", STRING, "12+", nullable="12+", default=None, tag=0),
    field("replica_id", INT32, default=-1),
    field("max_wait_ms", INT32),
    field("min_bytes", INT32),
    field("max_bytes", INT32, "3+", default=0x7FFFFFFF),
    field("isolation_level", INT8, "4+", default=0),
    field("session_id", INT32, "7+", default=0),
    field("session_epoch", INT32, "7+", default=-1),
    field("topics", array(
        field("topic", STRING),
        field("partitions", array(
            field("partition", INT32),
            field("current_leader_epoch", INT32, "9+", default=-1),
            field("fetch_offset", INT64),
            field("last_fetched_epoch", INT32, "12+", default=-1),
            field("log_start_offset", INT64, "5+", default=-1),
            field("partition_max_bytes", INT32),
        )),
    )),
    field("forgotten_topics_data", array(
        field("topic", STRING, "7+"),
        field("partitions", ArrayOf(INT32), "7+"),
    ), "7+"),
    field("rack_id", STRING, "11+", default=""),
)

_FETCH_RESPONSE = _msg(
    "FetchResponse", FETCH, "4-12", "12+",
    field(_THROTTLE, INT32, "1+"),
    field("error_code", INT16, "7+"),
    field("session_id", INT32, "7+", default=0),
    field("responses", array(
        field("topic", STRING),
        field("partitions", array(
            field("partition_index", INT32),
            field("error_code", INT16),
            field("high_watermark", INT64),
            field("last_stable_offset", INT64, "4+", default=-1),
            field("log_start_offset", INT64, "5+", default=-1),
            field("diverging_epoch", struct_of(
                field("epoch", INT32, "12+", default=-1),
                field("end_offset", INT64, "12+", default=-1),
            ), "12+", tag=0),
            field("current_leader", struct_of(
                field("leader_id", INT32, "12+", default=-1),
                field("leader_epoch", INT32, "12+", default=-1),
            ), "12+", tag=1),
            field("snapshot_id", struct_of(
                field("end_offset", INT64, default=-1),
                field("epoch", INT32, default=-1),
            ), "12+", tag=2),
            field("aborted_transactions", array(
                field("producer_id", INT64, "4+"),
                field("first_offset", INT64, "4+"),
            ), "4+", nullable="4+"),
            field("preferred_read_replica", INT32, "11+", default=-1),
            field("records", RECORDS, nullable="0+", default=None),
        )),
    )),
)

# ListOffsetsRequest.json / ListOffsetsResponse.json: Kafka 4 removed v0 (several offsets per
# answer); v2 IsolationLevel (latest = the last stable offset under read_committed), v4 current
# leader epoch, v6 flexible, v7 the max-timestamp query. v8-10 add tiered-storage queries and a
# timeout, which a read-back does not need (librdkafka's mock serves v0-7, Kafka 4.3 v1-11).

_LIST_OFFSETS_REQUEST = _msg(
    "ListOffsetsRequest", LIST_OFFSETS, "1-7", "6+",
    field("replica_id", INT32, default=-1),
    field("isolation_level", INT8, "2+", default=0),
    field("topics", array(
        field("name", STRING),
        field("partitions", array(
            field("partition_index", INT32),
            field("current_leader_epoch", INT32, "4+", default=-1),
            field("timestamp", INT64),
        )),
    )),
)

_LIST_OFFSETS_RESPONSE = _msg(
    "ListOffsetsResponse", LIST_OFFSETS, "1-7", "6+",
    field(_THROTTLE, INT32, "2+"),
    field("topics", array(
        field("name", STRING),
        field("partitions", array(
            field("partition_index", INT32),
            field("error_code", INT16),
            field("timestamp", INT64, "1+", default=-1),
            field("offset", INT64, "1+", default=-1),
            field("leader_epoch", INT32, "4+", default=-1),
        )),
    )),
)

# ------------------------------------------------------ client telemetry (KIP-714)
# GetTelemetrySubscriptionsRequest.json / PushTelemetryRequest.json and their responses:
# v0 only, flexible from v0. The client instance id is the zero UUID until the broker
# assigns one; Metrics is an OTLP MetricsData, compressed as CompressionType says.

_GET_TELEMETRY_SUBSCRIPTIONS_REQUEST = _msg(
    "GetTelemetrySubscriptionsRequest", GET_TELEMETRY_SUBSCRIPTIONS, "0", "0+",
    field("client_instance_id", UUID),
)

_GET_TELEMETRY_SUBSCRIPTIONS_RESPONSE = _msg(
    "GetTelemetrySubscriptionsResponse", GET_TELEMETRY_SUBSCRIPTIONS, "0", "0+",
    field(_THROTTLE, INT32),
    field("error_code", INT16),
    field("client_instance_id", UUID),
    field("subscription_id", INT32),
    field("accepted_compression_types", ArrayOf(INT8)),
    field("push_interval_ms", INT32),
    field("telemetry_max_bytes", INT32),
    field("delta_temporality", BOOL),
    field("requested_metrics", ArrayOf(STRING)),
)

_PUSH_TELEMETRY_REQUEST = _msg(
    "PushTelemetryRequest", PUSH_TELEMETRY, "0", "0+",
    field("client_instance_id", UUID),
    field("subscription_id", INT32),
    field("terminating", BOOL),
    field("compression_type", INT8),
    field("metrics", BYTES),
)

_PUSH_TELEMETRY_RESPONSE = _msg(
    "PushTelemetryResponse", PUSH_TELEMETRY, "0", "0+",
    field(_THROTTLE, INT32),
    field("error_code", INT16),
)

# ------------------------------------------------------------------ registry

#: api_key -> request body schema.
REQUEST_SCHEMAS: Final[Mapping[int, MessageSchema]] = {
    s.api_key: s
    for s in (
        _PRODUCE_REQUEST, _FETCH_REQUEST, _LIST_OFFSETS_REQUEST, _METADATA_REQUEST, _OFFSET_FETCH_REQUEST,
        _API_VERSIONS_REQUEST, _INIT_PRODUCER_ID_REQUEST,
        _FIND_COORDINATOR_REQUEST, _ADD_PARTITIONS_TO_TXN_REQUEST, _ADD_OFFSETS_TO_TXN_REQUEST,
        _END_TXN_REQUEST, _TXN_OFFSET_COMMIT_REQUEST, _SASL_HANDSHAKE_REQUEST, _SASL_AUTHENTICATE_REQUEST,
        _GET_TELEMETRY_SUBSCRIPTIONS_REQUEST, _PUSH_TELEMETRY_REQUEST,
    )
}

#: api_key -> response body schema.
RESPONSE_SCHEMAS: Final[Mapping[int, MessageSchema]] = {
    s.api_key: s
    for s in (
        _PRODUCE_RESPONSE, _FETCH_RESPONSE, _LIST_OFFSETS_RESPONSE, _METADATA_RESPONSE, _OFFSET_FETCH_RESPONSE,
        _API_VERSIONS_RESPONSE,
        _INIT_PRODUCER_ID_RESPONSE, _FIND_COORDINATOR_RESPONSE, _ADD_PARTITIONS_TO_TXN_RESPONSE, _ADD_OFFSETS_TO_TXN_RESPONSE,
        _END_TXN_RESPONSE, _TXN_OFFSET_COMMIT_RESPONSE, _SASL_HANDSHAKE_RESPONSE, _SASL_AUTHENTICATE_RESPONSE,
        _GET_TELEMETRY_SUBSCRIPTIONS_RESPONSE, _PUSH_TELEMETRY_RESPONSE,
    )
}

#: api_key -> (min, max) version aioproducer can encode and decode.
SUPPORTED_VERSIONS: Final[dict[int, tuple[int, int]]] = {
    key: (s.valid.low, s.valid.high) for key, s in REQUEST_SCHEMAS.items()
}

#: api_key -> Kafka's API name, for logs and error messages.
API_NAMES: Final[Mapping[int, str]] = {key: s.name.removesuffix("Request") for key, s in REQUEST_SCHEMAS.items()}


# ------------------------------------------------------------------- headers

_HEADER_FIXED: Final = struct.Struct(">hhi")
_INT32: Final = struct.Struct(">i")


class RequestHeader(NamedTuple):
    """A decoded request header (what a broker, or a test double, reads first)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _schema(table: Mapping[int, MessageSchema], api_key: int, version: int) -> MessageSchema:
    schema = table.get(api_key)
    if schema is None:
        raise UnsupportedVersionError(f"API key {api_key} is not supported by aioproducer")
    if version not in schema.valid:
        low, high = schema.valid.low, schema.valid.high
        raise UnsupportedVersionError(f"{schema.name} v{version} is not supported (aioproducer speaks v{low}-v{high})")
    return schema


def is_flexible(api_key: int, version: int) -> bool:
    """Whether ``version`` of the API uses KIP-482 flexible (compact, tagged) encoding."""
    return version in _schema(REQUEST_SCHEMAS, api_key, version).flexible


def request_header_version(api_key: int, version: int) -> int:
    """Request header version: 2 for flexible API versions, else 1."""
    return 2 if is_flexible(api_key, version) else 1


def response_header_version(api_key: int, version: int) -> int:
    """Response header version: 1 for flexible API versions, else 0; ApiVersions is always 0."""
    if api_key == API_VERSIONS:
        _schema(RESPONSE_SCHEMAS, api_key, version)
        return 0
    return 1 if is_flexible(api_key, version) else 0


def _frame(out: Output) -> None:
    """Patch the 4-byte size prefix reserved at the start of ``out``."""
    first = out.parts[0] if out.parts else out.buf
    assert isinstance(first, bytearray)
    first[0:4] = _INT32.pack(out.size() - 4)


def _encode_error(schema: MessageSchema, version: int, exc: Exception) -> ValueError:
    return ValueError(f"cannot encode {schema.name} v{version}: {exc}")


_ENCODE_ERRORS: Final = (struct.error, TypeError, AttributeError, OverflowError, ValueError)


def _build_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Mapping[str, Any]
) -> Output:
    schema = _schema(REQUEST_SCHEMAS, api_key, version)
    flexible = version in schema.flexible
    out = Output()
    buf = out.buf
    buf += b"\x00\x00\x00\x00"  # size, patched by _frame
    try:
        buf += _HEADER_FIXED.pack(api_key, version, correlation_id)
        p.write_nullable_string(buf, client_id)
        if flexible:
            buf.append(0)  # header v2: empty tagged-field section
        schema.codec(version).encode(out, body)
    except _ENCODE_ERRORS as exc:
        raise _encode_error(schema, version, exc) from exc
    _frame(out)
    return out


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Mapping[str, Any]
) -> bytes:
    """Encode a whole request frame: size prefix, header (v1, or v2 if flexible), body.

    Missing body fields take their schema defaults; keys the version lacks are
    ignored. A ``records`` value is copied into the frame exactly once.
    """
    return _build_request(api_key, version, correlation_id, client_id, body).getvalue()


def encode_request_chunks(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Mapping[str, Any]
) -> list[bytes | bytearray | memoryview]:
    """Like :func:`encode_request` but returns the frame as parts for ``transport.writelines``.

    Large ``records`` values are included by reference, so the frame is never
    joined: zero copies of the record batch on the way to the socket.
    """
    return _build_request(api_key, version, correlation_id, client_id, body).chunks()


def encode_response(api_key: int, version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes:
    """Encode a whole response frame (size prefix, header v0/v1, body): the broker side, for tests and fakes."""
    schema = _schema(RESPONSE_SCHEMAS, api_key, version)
    out = Output()
    buf = out.buf
    buf += b"\x00\x00\x00\x00"
    try:
        buf += _INT32.pack(correlation_id)
        if response_header_version(api_key, version) == 1:
            buf.append(0)
        schema.codec(version).encode(out, body)
    except _ENCODE_ERRORS as exc:
        raise _encode_error(schema, version, exc) from exc
    _frame(out)
    return out.getvalue()


# ------------------------------------------------------------------ decoding


def peek_correlation_id(payload: bytes | bytearray | memoryview) -> int:
    """The correlation id of a response payload (no size prefix), without decoding the rest.

    Lets the connection find the pending request, and so the API and version
    to decode with, before decoding.
    """
    if len(payload) < 4:
        raise ProtocolError(f"response of {len(payload)} bytes has no correlation id")
    value: int = _INT32.unpack_from(payload, 0)[0]
    return value


def _decode_body(schema: MessageSchema, version: int, r: Reader, *, strict: bool = True) -> dict[str, Any]:
    """Decode one body. ``strict`` rejects trailing bytes.

    Responses are decoded with ``strict=False``: like the Java client and
    librdkafka, bytes after a complete body are ignored, because real peers
    send them (librdkafka's mock cluster ends flexible Metadata responses with
    one extra byte). Requests, which only tests decode, stay strict.
    """
    try:
        body = schema.codec(version).decode(r)
    except ProtocolError:
        raise
    except (ValueError, TypeError, IndexError, struct.error, OverflowError) as exc:
        # Belt and braces: the Reader checks bounds itself, but nothing else may escape.
        raise ProtocolError(f"malformed {schema.name} v{version}: {exc}") from exc
    if strict and r.remaining:
        raise ProtocolError(f"{r.remaining} trailing bytes after {schema.name} v{version}")
    return body


def decode_response(api_key: int, version: int, payload: bytes | bytearray | memoryview) -> tuple[int, dict[str, Any]]:
    """Decode a response payload (without its size prefix) into ``(correlation_id, body)``.

    ``version`` is the version the request was sent with. Raises
    :class:`ProtocolError` for anything malformed or truncated.
    """
    schema = _schema(RESPONSE_SCHEMAS, api_key, version)
    r = Reader(payload)
    correlation_id = r.int32()
    if response_header_version(api_key, version) == 1:
        r.skip_tagged_fields()
    if api_key == API_VERSIONS and version > 0 and r.remaining >= 2:
        body_start = r.pos
        error_code: int = struct.unpack_from(">h", r.raw(2))[0]
        r.pos = body_start
        if error_code == UNSUPPORTED_VERSION_ERROR_CODE:
            # The broker does not speak ``version`` and answered in v0 (KIP-511).
            # Some brokers (librdkafka's mock) answer in the requested version
            # instead, so that is the second guess.
            try:
                return correlation_id, _decode_body(schema, 0, r)  # strict: a wrong guess must fail
            except ProtocolError:
                r.pos = body_start
    return correlation_id, _decode_body(schema, version, r, strict=False)


def decode_request(payload: bytes | bytearray | memoryview) -> tuple[RequestHeader, dict[str, Any]]:
    """Decode a request payload (without its size prefix): the broker side, for tests and fakes."""
    r = Reader(payload)
    api_key = r.int16()
    version = r.int16()
    correlation_id = r.int32()
    client_id = r.nullable_string()
    schema = _schema(REQUEST_SCHEMAS, api_key, version)
    if version in schema.flexible:
        r.skip_tagged_fields()
    header = RequestHeader(api_key, version, correlation_id, client_id)
    return header, _decode_body(schema, version, r)
