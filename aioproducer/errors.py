"""Every error aioproducer raises, client-side and broker-side.

Why one module: users catch these, so they are public (re-exported by
``aioproducer``), and the sender needs two facts about each broker error code
to decide what to do with a failed batch: is it *retriable* (send the batch
again after a backoff) and does it call for a *metadata refresh* (the leader
moved, the topic is unknown). Both facts live on the class, as in the Java
client's ``RetriableException`` / ``InvalidMetadataException`` hierarchy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TypeVar, cast


class KafkaError(Exception):
    """Root of every aioproducer error."""

    retriable: bool = False
    invalid_metadata: bool = False


# ---------------------------------------------------------------- client side


class ConfigError(KafkaError, ValueError):
    """A configuration key is unknown, mistyped or inconsistent with another."""


class KafkaTimeoutError(KafkaError, TimeoutError):
    """A deadline passed: ``max.block.ms``, ``delivery.timeout.ms`` or ``request.timeout.ms``."""

    retriable = True


class SerializationError(KafkaError):
    """A key or value could not be turned into bytes."""


class ProducerClosedError(KafkaError):
    """``send()`` was called on a producer that is closing or closed."""


class WrongEventLoopError(KafkaError, RuntimeError):
    """A producer was used from an event loop, or a forked process, other than the one ``start()`` ran in.

    Its connections, sender task and record futures belong to that loop and process: a
    record accepted elsewhere could never be sent. One producer per event loop (and per
    process); a ``RuntimeError`` as asyncio's own "attached to a different loop" is.
    """


class IllegalStateError(KafkaError, RuntimeError):
    """A call the producer's current state does not allow (a transaction method out of order); names the state."""


class TransactionAbortedError(KafkaError):
    """The record was in a transaction that was aborted before it was sent."""


class RecordTooLargeError(KafkaError):
    """A record is larger than ``max.request.size`` or ``buffer.memory``."""


class InvalidRecordError(KafkaError, ValueError):
    """A record field is invalid (negative timestamp, bad header, bad partition)."""


class UnsupportedVersionError(KafkaError):
    """The broker supports no version of an API that aioproducer can speak."""


class ProtocolError(KafkaError):
    """Bytes from the wire do not decode: truncated or malformed frame."""


class AuthenticationError(KafkaError):
    """TLS or SASL failed: the broker refused our credentials, or we refused the broker.

    Fatal, as Java's ``AuthenticationException``: retrying with the same certificates or
    credentials cannot succeed, so ``start()`` raises it at once and a running producer
    fails its records with it instead of retrying them for ``delivery.timeout.ms``.
    """


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed: an untrusted or expired certificate, a hostname mismatch, TLS on a plaintext port."""


class KafkaConnectionError(KafkaError, ConnectionError):
    """A broker connection could not be made or broke; in-flight requests failed with it."""

    retriable = True
    invalid_metadata = True


class BrokerResponseError(KafkaError):
    """An error code returned by a broker. Subclasses carry ``errno``."""

    errno: int = -1
    message: str = ""
    description: str = ""

    def __str__(self) -> str:
        detail = super().__str__()
        base = f"[Error {self.errno}] {self.message}"
        return f"{base}: {detail}" if detail else base


# ---------------------------------------------------------------- broker side
#
# One class per Kafka error code (Errors.java), so callers can ``except`` the
# precise condition and the sender can read the two facts it acts on from the
# class: ``retriable`` (Java: extends RetriableException) and
# ``invalid_metadata`` (Java: extends InvalidMetadataException, i.e. the
# leader or topic moved, refresh metadata before retrying). Names are the
# CamelCase of Kafka's names plus ``Error``; three differ to avoid clashing
# with client-side errors or doubling a suffix: ``InvalidTopicError`` (17),
# ``UnsupportedVersionBrokerError`` (35), ``InvalidRecordBrokerError`` (87).
# ``description`` is the class docstring.

_BrokerErrorT = TypeVar("_BrokerErrorT", bound="type[BrokerResponseError]")

_ERRORS_BY_CODE: dict[int, type[BrokerResponseError]] = {}


def _broker_error(
    errno: int, message: str, *, retriable: bool = False, invalid_metadata: bool = False
) -> Callable[[_BrokerErrorT], _BrokerErrorT]:
    """Stamp a class with its code facts and register it for :func:`error_for_code`."""

    def register(cls: _BrokerErrorT) -> _BrokerErrorT:
        if errno in _ERRORS_BY_CODE:
            raise RuntimeError(f"error code {errno} registered twice")
        cls.errno = errno
        cls.message = message
        cls.description = " ".join((cls.__doc__ or "").split())
        cls.retriable = retriable
        cls.invalid_metadata = invalid_metadata
        _ERRORS_BY_CODE[errno] = cls
        return cls

    return register


@_broker_error(-1, "UNKNOWN_SERVER_ERROR")
class UnknownServerError(BrokerResponseError):
    """The broker hit an unexpected error while handling the request."""


@_broker_error(1, "OFFSET_OUT_OF_RANGE")
class OffsetOutOfRangeError(BrokerResponseError):
    """The requested offset is outside the range the broker holds for the partition."""


@_broker_error(2, "CORRUPT_MESSAGE", retriable=True)
class CorruptMessageError(BrokerResponseError):
    """The message failed its CRC check, has an invalid size, a null key on a compacted topic, or is
    otherwise corrupt.
    """


@_broker_error(3, "UNKNOWN_TOPIC_OR_PARTITION", retriable=True, invalid_metadata=True)
class UnknownTopicOrPartitionError(BrokerResponseError):
    """The broker does not host this topic-partition (it may not exist yet, or metadata is stale)."""


@_broker_error(4, "INVALID_FETCH_SIZE")
class InvalidFetchSizeError(BrokerResponseError):
    """The requested fetch size is invalid."""


@_broker_error(5, "LEADER_NOT_AVAILABLE", retriable=True, invalid_metadata=True)
class LeaderNotAvailableError(BrokerResponseError):
    """The partition has no leader right now, typically during a leader election."""


@_broker_error(6, "NOT_LEADER_OR_FOLLOWER", retriable=True, invalid_metadata=True)
class NotLeaderOrFollowerError(BrokerResponseError):
    """The broker is not the leader (or not a replica) of the partition; the client's metadata is stale."""


@_broker_error(7, "REQUEST_TIMED_OUT", retriable=True)
class RequestTimedOutError(BrokerResponseError):
    """The broker timed the request out (for produce: replication did not finish within timeout_ms)."""


@_broker_error(8, "BROKER_NOT_AVAILABLE")
class BrokerNotAvailableError(BrokerResponseError):
    """The broker is not available."""


@_broker_error(9, "REPLICA_NOT_AVAILABLE", retriable=True, invalid_metadata=True)
class ReplicaNotAvailableError(BrokerResponseError):
    """A replica of the partition is not available."""


@_broker_error(10, "MESSAGE_TOO_LARGE")
class MessageTooLargeError(BrokerResponseError):
    """The request contained a message larger than the broker or topic accepts."""


@_broker_error(11, "STALE_CONTROLLER_EPOCH")
class StaleControllerEpochError(BrokerResponseError):
    """The controller has moved to another broker."""


@_broker_error(12, "OFFSET_METADATA_TOO_LARGE")
class OffsetMetadataTooLargeError(BrokerResponseError):
    """The metadata attached to an offset commit is too large."""


@_broker_error(13, "NETWORK_EXCEPTION", retriable=True, invalid_metadata=True)
class NetworkExceptionError(BrokerResponseError):
    """The broker disconnected before a response was received."""


@_broker_error(14, "COORDINATOR_LOAD_IN_PROGRESS", retriable=True)
class CoordinatorLoadInProgressError(BrokerResponseError):
    """The coordinator is still loading its state and cannot serve requests yet."""


@_broker_error(15, "COORDINATOR_NOT_AVAILABLE", retriable=True)
class CoordinatorNotAvailableError(BrokerResponseError):
    """The coordinator is not available."""


@_broker_error(16, "NOT_COORDINATOR", retriable=True)
class NotCoordinatorError(BrokerResponseError):
    """The broker is not the coordinator for this group or transactional id."""


@_broker_error(17, "INVALID_TOPIC_EXCEPTION")
class InvalidTopicError(BrokerResponseError):
    """The topic name is invalid or the operation is not allowed on this topic."""


@_broker_error(18, "RECORD_LIST_TOO_LARGE")
class RecordListTooLargeError(BrokerResponseError):
    """The record batch is larger than the broker's configured segment size."""


@_broker_error(19, "NOT_ENOUGH_REPLICAS", retriable=True)
class NotEnoughReplicasError(BrokerResponseError):
    """Rejected: fewer in-sync replicas than min.insync.replicas."""


@_broker_error(20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", retriable=True)
class NotEnoughReplicasAfterAppendError(BrokerResponseError):
    """Written to the leader's log, but fewer in-sync replicas than required acknowledged it."""


@_broker_error(21, "INVALID_REQUIRED_ACKS")
class InvalidRequiredAcksError(BrokerResponseError):
    """The produce request's acks value is invalid."""


@_broker_error(22, "ILLEGAL_GENERATION")
class IllegalGenerationError(BrokerResponseError):
    """The group generation id is not valid."""


@_broker_error(23, "INCONSISTENT_GROUP_PROTOCOL")
class InconsistentGroupProtocolError(BrokerResponseError):
    """The member's protocols are incompatible with the group's."""


@_broker_error(24, "INVALID_GROUP_ID")
class InvalidGroupIdError(BrokerResponseError):
    """The group id is invalid."""


@_broker_error(25, "UNKNOWN_MEMBER_ID")
class UnknownMemberIdError(BrokerResponseError):
    """The coordinator does not know this member."""


@_broker_error(26, "INVALID_SESSION_TIMEOUT")
class InvalidSessionTimeoutError(BrokerResponseError):
    """The session timeout is outside the range the broker allows."""


@_broker_error(27, "REBALANCE_IN_PROGRESS")
class RebalanceInProgressError(BrokerResponseError):
    """The group is rebalancing and the member must rejoin."""


@_broker_error(28, "INVALID_COMMIT_OFFSET_SIZE")
class InvalidCommitOffsetSizeError(BrokerResponseError):
    """The committed offset data has an invalid size."""


@_broker_error(29, "TOPIC_AUTHORIZATION_FAILED")
class TopicAuthorizationFailedError(BrokerResponseError):
    """The principal is not authorized for the topic."""


@_broker_error(30, "GROUP_AUTHORIZATION_FAILED")
class GroupAuthorizationFailedError(BrokerResponseError):
    """The principal is not authorized for the group."""


@_broker_error(31, "CLUSTER_AUTHORIZATION_FAILED")
class ClusterAuthorizationFailedError(BrokerResponseError):
    """The principal is not authorized for the cluster operation (e.g. idempotent write)."""


@_broker_error(32, "INVALID_TIMESTAMP")
class InvalidTimestampError(BrokerResponseError):
    """A record timestamp is outside the range the broker accepts."""


@_broker_error(33, "UNSUPPORTED_SASL_MECHANISM")
class UnsupportedSaslMechanismError(BrokerResponseError, AuthenticationError):
    """The broker does not support the requested SASL mechanism."""


@_broker_error(34, "ILLEGAL_SASL_STATE")
class IllegalSaslStateError(BrokerResponseError, AuthenticationError):
    """The request is not valid in the current SASL state."""


@_broker_error(35, "UNSUPPORTED_VERSION")
class UnsupportedVersionBrokerError(BrokerResponseError):
    """The broker does not support this version of the API."""


@_broker_error(36, "TOPIC_ALREADY_EXISTS")
class TopicAlreadyExistsError(BrokerResponseError):
    """A topic with this name already exists."""


@_broker_error(37, "INVALID_PARTITIONS")
class InvalidPartitionsError(BrokerResponseError):
    """The number of partitions is invalid."""


@_broker_error(38, "INVALID_REPLICATION_FACTOR")
class InvalidReplicationFactorError(BrokerResponseError):
    """The replication factor is invalid."""


@_broker_error(39, "INVALID_REPLICA_ASSIGNMENT")
class InvalidReplicaAssignmentError(BrokerResponseError):
    """The replica assignment is invalid."""


@_broker_error(40, "INVALID_CONFIG")
class InvalidConfigError(BrokerResponseError):
    """The configuration is invalid."""


@_broker_error(41, "NOT_CONTROLLER", retriable=True)
class NotControllerError(BrokerResponseError):
    """The broker is not the active controller."""


@_broker_error(42, "INVALID_REQUEST")
class InvalidRequestError(BrokerResponseError):
    """The broker considers the request malformed or incompatible."""


@_broker_error(43, "UNSUPPORTED_FOR_MESSAGE_FORMAT")
class UnsupportedForMessageFormatError(BrokerResponseError):
    """The broker's message format version does not support the request."""


@_broker_error(44, "POLICY_VIOLATION")
class PolicyViolationError(BrokerResponseError):
    """The request parameters violate a configured policy."""


@_broker_error(45, "OUT_OF_ORDER_SEQUENCE_NUMBER")
class OutOfOrderSequenceNumberError(BrokerResponseError):
    """The broker received a sequence number that does not follow the last one it stored."""


@_broker_error(46, "DUPLICATE_SEQUENCE_NUMBER")
class DuplicateSequenceNumberError(BrokerResponseError):
    """The broker received a sequence number it has already seen."""


@_broker_error(47, "INVALID_PRODUCER_EPOCH")
class InvalidProducerEpochError(BrokerResponseError):
    """The producer used an epoch older than the broker's."""


@_broker_error(48, "INVALID_TXN_STATE")
class InvalidTxnStateError(BrokerResponseError):
    """The transactional operation is not valid in the transaction's current state."""


@_broker_error(49, "INVALID_PRODUCER_ID_MAPPING")
class InvalidProducerIdMappingError(BrokerResponseError):
    """The producer id is not the one assigned to this transactional id."""


@_broker_error(50, "INVALID_TRANSACTION_TIMEOUT")
class InvalidTransactionTimeoutError(BrokerResponseError):
    """The transaction timeout exceeds transaction.max.timeout.ms."""


@_broker_error(51, "CONCURRENT_TRANSACTIONS", retriable=True)
class ConcurrentTransactionsError(BrokerResponseError):
    """Another operation on the same transaction is still in progress."""


@_broker_error(52, "TRANSACTION_COORDINATOR_FENCED")
class TransactionCoordinatorFencedError(BrokerResponseError):
    """The transaction coordinator sending the marker is no longer current."""


@_broker_error(53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
class TransactionalIdAuthorizationFailedError(BrokerResponseError):
    """The principal is not authorized for the transactional id."""


@_broker_error(54, "SECURITY_DISABLED")
class SecurityDisabledError(BrokerResponseError):
    """Security features are disabled on the broker."""


@_broker_error(55, "OPERATION_NOT_ATTEMPTED")
class OperationNotAttemptedError(BrokerResponseError):
    """The broker skipped this operation because another one in the same batch failed."""


@_broker_error(56, "KAFKA_STORAGE_ERROR", retriable=True, invalid_metadata=True)
class KafkaStorageError(BrokerResponseError):
    """The broker hit a disk error accessing the partition's log."""


@_broker_error(57, "LOG_DIR_NOT_FOUND")
class LogDirNotFoundError(BrokerResponseError):
    """The log directory is not in the broker's configuration."""


@_broker_error(58, "SASL_AUTHENTICATION_FAILED")
class SaslAuthenticationFailedError(BrokerResponseError, AuthenticationError):
    """SASL authentication failed."""


@_broker_error(59, "UNKNOWN_PRODUCER_ID")
class UnknownProducerIdError(BrokerResponseError):
    """The broker has no state for this producer id (e.g. its records were all deleted by retention)."""


@_broker_error(60, "REASSIGNMENT_IN_PROGRESS")
class ReassignmentInProgressError(BrokerResponseError):
    """A partition reassignment is in progress."""


@_broker_error(61, "DELEGATION_TOKEN_AUTH_DISABLED")
class DelegationTokenAuthDisabledError(BrokerResponseError):
    """Delegation tokens are not enabled."""


@_broker_error(62, "DELEGATION_TOKEN_NOT_FOUND")
class DelegationTokenNotFoundError(BrokerResponseError):
    """The delegation token does not exist."""


@_broker_error(63, "DELEGATION_TOKEN_OWNER_MISMATCH")
class DelegationTokenOwnerMismatchError(BrokerResponseError):
    """The principal is not the token's owner or renewer."""


@_broker_error(64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED")
class DelegationTokenRequestNotAllowedError(BrokerResponseError):
    """Delegation token requests are not allowed on this channel."""


@_broker_error(65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED")
class DelegationTokenAuthorizationFailedError(BrokerResponseError):
    """The principal is not authorized for the delegation token."""


@_broker_error(66, "DELEGATION_TOKEN_EXPIRED")
class DelegationTokenExpiredError(BrokerResponseError):
    """The delegation token has expired."""


@_broker_error(67, "INVALID_PRINCIPAL_TYPE")
class InvalidPrincipalTypeError(BrokerResponseError):
    """The principal type is not supported."""


@_broker_error(68, "NON_EMPTY_GROUP")
class NonEmptyGroupError(BrokerResponseError):
    """The group is not empty."""


@_broker_error(69, "GROUP_ID_NOT_FOUND")
class GroupIdNotFoundError(BrokerResponseError):
    """The group id does not exist."""


@_broker_error(70, "FETCH_SESSION_ID_NOT_FOUND", retriable=True)
class FetchSessionIdNotFoundError(BrokerResponseError):
    """The fetch session id is unknown."""


@_broker_error(71, "INVALID_FETCH_SESSION_EPOCH", retriable=True)
class InvalidFetchSessionEpochError(BrokerResponseError):
    """The fetch session epoch is invalid."""


@_broker_error(72, "LISTENER_NOT_FOUND", retriable=True, invalid_metadata=True)
class ListenerNotFoundError(BrokerResponseError):
    """The partition leader has no listener matching the one the metadata request used."""


@_broker_error(73, "TOPIC_DELETION_DISABLED")
class TopicDeletionDisabledError(BrokerResponseError):
    """Topic deletion is disabled."""


@_broker_error(74, "FENCED_LEADER_EPOCH", retriable=True, invalid_metadata=True)
class FencedLeaderEpochError(BrokerResponseError):
    """The request's leader epoch is older than the broker's."""


@_broker_error(75, "UNKNOWN_LEADER_EPOCH", retriable=True, invalid_metadata=True)
class UnknownLeaderEpochError(BrokerResponseError):
    """The request's leader epoch is newer than the broker's."""


@_broker_error(76, "UNSUPPORTED_COMPRESSION_TYPE")
class UnsupportedCompressionTypeError(BrokerResponseError):
    """The client does not support the compression type of the partition."""


@_broker_error(77, "STALE_BROKER_EPOCH")
class StaleBrokerEpochError(BrokerResponseError):
    """The broker epoch has changed."""


@_broker_error(78, "OFFSET_NOT_AVAILABLE", retriable=True)
class OffsetNotAvailableError(BrokerResponseError):
    """The new leader's high watermark has not caught up yet, so offsets are not yet reliable."""


@_broker_error(79, "MEMBER_ID_REQUIRED")
class MemberIdRequiredError(BrokerResponseError):
    """The member must obtain a member id before joining the group."""


@_broker_error(80, "PREFERRED_LEADER_NOT_AVAILABLE", retriable=True)
class PreferredLeaderNotAvailableError(BrokerResponseError):
    """The preferred leader is not available."""


@_broker_error(81, "GROUP_MAX_SIZE_REACHED")
class GroupMaxSizeReachedError(BrokerResponseError):
    """The group has reached its maximum size."""


@_broker_error(82, "FENCED_INSTANCE_ID")
class FencedInstanceIdError(BrokerResponseError):
    """Another member with the same group.instance.id fenced this one."""


@_broker_error(83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", retriable=True)
class EligibleLeadersNotAvailableError(BrokerResponseError):
    """No eligible leader is available for the partition."""


@_broker_error(84, "ELECTION_NOT_NEEDED", retriable=True)
class ElectionNotNeededError(BrokerResponseError):
    """The leader election is not needed."""


@_broker_error(85, "NO_REASSIGNMENT_IN_PROGRESS")
class NoReassignmentInProgressError(BrokerResponseError):
    """No partition reassignment is in progress."""


@_broker_error(86, "GROUP_SUBSCRIBED_TO_TOPIC")
class GroupSubscribedToTopicError(BrokerResponseError):
    """Offsets cannot be deleted while the group is subscribed to the topic."""


@_broker_error(87, "INVALID_RECORD")
class InvalidRecordBrokerError(BrokerResponseError):
    """The broker's validation rejected a record in the batch (see record_errors)."""


@_broker_error(88, "UNSTABLE_OFFSET_COMMIT", retriable=True)
class UnstableOffsetCommitError(BrokerResponseError):
    """There are pending transactional offsets that must be resolved first."""


@_broker_error(89, "THROTTLING_QUOTA_EXCEEDED", retriable=True)
class ThrottlingQuotaExceededError(BrokerResponseError):
    """The throttling quota has been exceeded."""


@_broker_error(90, "PRODUCER_FENCED")
class ProducerFencedError(BrokerResponseError):
    """A newer producer with the same transactional id has fenced this one."""


@_broker_error(91, "RESOURCE_NOT_FOUND")
class ResourceNotFoundError(BrokerResponseError):
    """The request referred to a resource that does not exist."""


@_broker_error(92, "DUPLICATE_RESOURCE")
class DuplicateResourceError(BrokerResponseError):
    """The request referred to the same resource twice."""


@_broker_error(93, "UNACCEPTABLE_CREDENTIAL")
class UnacceptableCredentialError(BrokerResponseError):
    """The credential does not meet the acceptability criteria."""


@_broker_error(94, "INCONSISTENT_VOTER_SET")
class InconsistentVoterSetError(BrokerResponseError):
    """The sender or recipient of a voter-only request is not an expected voter."""


@_broker_error(95, "INVALID_UPDATE_VERSION")
class InvalidUpdateVersionError(BrokerResponseError):
    """The update version is invalid."""


@_broker_error(96, "FEATURE_UPDATE_FAILED")
class FeatureUpdateFailedError(BrokerResponseError):
    """Finalized features could not be updated."""


@_broker_error(97, "PRINCIPAL_DESERIALIZATION_FAILURE")
class PrincipalDeserializationFailureError(BrokerResponseError):
    """The forwarded request's principal could not be deserialized."""


@_broker_error(98, "SNAPSHOT_NOT_FOUND")
class SnapshotNotFoundError(BrokerResponseError):
    """The requested snapshot does not exist."""


@_broker_error(99, "POSITION_OUT_OF_RANGE")
class PositionOutOfRangeError(BrokerResponseError):
    """The requested snapshot position is out of range."""


@_broker_error(100, "UNKNOWN_TOPIC_ID", retriable=True, invalid_metadata=True)
class UnknownTopicIdError(BrokerResponseError):
    """The broker does not host a topic with this id."""


@_broker_error(101, "DUPLICATE_BROKER_REGISTRATION")
class DuplicateBrokerRegistrationError(BrokerResponseError):
    """The broker id is already registered."""


@_broker_error(102, "BROKER_ID_NOT_REGISTERED")
class BrokerIdNotRegisteredError(BrokerResponseError):
    """The broker id is not registered."""


@_broker_error(103, "INCONSISTENT_TOPIC_ID", retriable=True, invalid_metadata=True)
class InconsistentTopicIdError(BrokerResponseError):
    """The log's topic id does not match the request's."""


@_broker_error(104, "INCONSISTENT_CLUSTER_ID")
class InconsistentClusterIdError(BrokerResponseError):
    """The cluster id in the request does not match the broker's."""


@_broker_error(105, "TRANSACTIONAL_ID_NOT_FOUND")
class TransactionalIdNotFoundError(BrokerResponseError):
    """The transactional id does not exist."""


@_broker_error(106, "FETCH_SESSION_TOPIC_ID_ERROR", retriable=True)
class FetchSessionTopicIdError(BrokerResponseError):
    """The fetch session used topic ids inconsistently."""


@_broker_error(107, "INELIGIBLE_REPLICA")
class IneligibleReplicaError(BrokerResponseError):
    """The new ISR contains an ineligible replica."""


@_broker_error(108, "NEW_LEADER_ELECTED")
class NewLeaderElectedError(BrokerResponseError):
    """The partition state was updated but the leader changed."""


@_broker_error(109, "OFFSET_MOVED_TO_TIERED_STORAGE")
class OffsetMovedToTieredStorageError(BrokerResponseError):
    """The requested offset has moved to tiered storage."""


@_broker_error(110, "FENCED_MEMBER_EPOCH")
class FencedMemberEpochError(BrokerResponseError):
    """The group coordinator fenced the member epoch; the member must rejoin."""


@_broker_error(111, "UNRELEASED_INSTANCE_ID")
class UnreleasedInstanceIdError(BrokerResponseError):
    """Another member still holds this instance id."""


@_broker_error(112, "UNSUPPORTED_ASSIGNOR")
class UnsupportedAssignorError(BrokerResponseError):
    """The assignor or its version is not supported by the group."""


@_broker_error(113, "STALE_MEMBER_EPOCH")
class StaleMemberEpochError(BrokerResponseError):
    """The member epoch is stale."""


@_broker_error(114, "MISMATCHED_ENDPOINT_TYPE")
class MismatchedEndpointTypeError(BrokerResponseError):
    """The request was sent to the wrong type of endpoint."""


@_broker_error(115, "UNSUPPORTED_ENDPOINT_TYPE")
class UnsupportedEndpointTypeError(BrokerResponseError):
    """This endpoint type is not supported yet."""


@_broker_error(116, "UNKNOWN_CONTROLLER_ID")
class UnknownControllerIdError(BrokerResponseError):
    """The controller id is unknown."""


@_broker_error(117, "UNKNOWN_SUBSCRIPTION_ID")
class UnknownSubscriptionIdError(BrokerResponseError):
    """The telemetry subscription id is unknown or outdated."""


@_broker_error(118, "TELEMETRY_TOO_LARGE")
class TelemetryTooLargeError(BrokerResponseError):
    """The telemetry push is larger than the broker accepts."""


@_broker_error(119, "INVALID_REGISTRATION")
class InvalidRegistrationError(BrokerResponseError):
    """The controller considers the broker registration invalid."""


@_broker_error(120, "TRANSACTION_ABORTABLE")
class TransactionAbortableError(BrokerResponseError):
    """The transaction hit an error; abort it to keep using the transactional id."""


@_broker_error(121, "INVALID_RECORD_STATE")
class InvalidRecordStateError(BrokerResponseError):
    """The record state is invalid for the acknowledgement."""


@_broker_error(122, "SHARE_SESSION_NOT_FOUND", retriable=True)
class ShareSessionNotFoundError(BrokerResponseError):
    """The share session does not exist."""


@_broker_error(123, "INVALID_SHARE_SESSION_EPOCH", retriable=True)
class InvalidShareSessionEpochError(BrokerResponseError):
    """The share session epoch is invalid."""


@_broker_error(124, "FENCED_STATE_EPOCH")
class FencedStateEpochError(BrokerResponseError):
    """The share-group state epoch does not match."""


@_broker_error(125, "INVALID_VOTER_KEY")
class InvalidVoterKeyError(BrokerResponseError):
    """The voter key does not match the receiving replica's."""


@_broker_error(126, "DUPLICATE_VOTER")
class DuplicateVoterError(BrokerResponseError):
    """The voter is already in the voter set."""


@_broker_error(127, "VOTER_NOT_FOUND")
class VoterNotFoundError(BrokerResponseError):
    """The voter is not in the voter set."""


@_broker_error(128, "INVALID_REGULAR_EXPRESSION")
class InvalidRegularExpressionError(BrokerResponseError):
    """The regular expression is invalid."""


@_broker_error(129, "REBOOTSTRAP_REQUIRED")
class RebootstrapRequiredError(BrokerResponseError):
    """The client's metadata is stale; it must rebootstrap."""


@_broker_error(130, "STREAMS_INVALID_TOPOLOGY")
class StreamsInvalidTopologyError(BrokerResponseError):
    """The streams topology is invalid."""


@_broker_error(131, "STREAMS_INVALID_TOPOLOGY_EPOCH")
class StreamsInvalidTopologyEpochError(BrokerResponseError):
    """The streams topology epoch is invalid."""


@_broker_error(132, "STREAMS_TOPOLOGY_FENCED")
class StreamsTopologyFencedError(BrokerResponseError):
    """The streams topology epoch is outdated."""


@_broker_error(133, "SHARE_SESSION_LIMIT_REACHED")
class ShareSessionLimitReachedError(BrokerResponseError):
    """The share session limit has been reached."""


#: Kafka's pre-2.7 name for error code 6.
NotLeaderForPartitionError = NotLeaderOrFollowerError


class UnknownErrorCodeError(BrokerResponseError):
    """A code this aioproducer does not know, e.g. from a newer broker.

    Not retriable: the Java client maps unknown codes to UNKNOWN_SERVER_ERROR,
    and retrying blindly on an unknown condition could loop forever.
    :func:`error_for_code` returns a cached subclass carrying the number.
    """

    message = "UNKNOWN_ERROR_CODE"
    description = "An error code unknown to this client."


_UNKNOWN_CODE_CLASSES: dict[int, type[BrokerResponseError]] = {}

ERRORS_BY_CODE: Mapping[int, type[BrokerResponseError]] = MappingProxyType(_ERRORS_BY_CODE)
"""Kafka's error code -> its error class, for every code Kafka defines (a read-only view)."""


def error_for_code(code: int) -> type[BrokerResponseError]:
    """The error class for a broker error code.

    Unknown codes give a subclass of :class:`UnknownErrorCodeError` whose
    ``errno`` is the code, so the number survives into logs. Code 0 (NONE)
    is not an error and raises ``ValueError``.
    """
    cls = _ERRORS_BY_CODE.get(code)
    if cls is not None:
        return cls
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    cls = _UNKNOWN_CODE_CLASSES.get(code)
    if cls is None:
        attrs = {"errno": code, "message": f"UNKNOWN_ERROR_CODE_{code}", "__module__": __name__}
        cls = cast("type[BrokerResponseError]", type("UnknownErrorCodeError", (UnknownErrorCodeError,), attrs))
        _UNKNOWN_CODE_CLASSES[code] = cls
    return cls


def raise_for_code(code: int, message: str | None = None) -> None:
    """Raise the error for ``code`` (with the broker's ``message`` if any); do nothing for 0."""
    if code == 0:
        return
    cls = error_for_code(code)
    raise cls(message) if message else cls()


def _first_sentence(cls: type) -> str:
    """The first paragraph of a class's docstring on one line, ``|`` escaped for a Markdown table."""
    doc = (cls.__doc__ or "").strip().split("\n\n", 1)[0]
    return " ".join(doc.split()).replace("|", "\\|")


def render_markdown_table() -> str:
    """The docs' error tables (``docs/reference/errors.md``), generated from the classes so they cannot drift.

    Two tables: the client-side errors (every class of ``__all__`` that is not one broker error
    code's) with their bases and ``retriable``, then one row per broker error code from
    :data:`ERRORS_BY_CODE`.
    """
    names = [name for name in __all__ if isinstance(globals()[name], type)]
    client = [globals()[name] for name in names if globals()[name] not in _ERRORS_BY_CODE.values()]
    lines = [
        "| Class | Derives from | Retriable | Meaning |",
        "|---|---|---|---|",
    ]
    for cls in client:
        bases = ", ".join(f"`{base.__name__}`" for base in cls.__bases__)
        lines.append(f"| `{cls.__name__}` | {bases} | {'yes' if cls.retriable else 'no'} | {_first_sentence(cls)} |")
    lines += [
        "",
        "| Code | Kafka name | Class | Retriable | Refreshes metadata | Meaning |",
        "|---:|---|---|---|---|---|",
    ]
    for code, cls in sorted(_ERRORS_BY_CODE.items()):
        lines.append(
            f"| {code} | `{cls.message}` | `{cls.__name__}` | {'yes' if cls.retriable else 'no'} | "
            f"{'yes' if cls.invalid_metadata else 'no'} | {_first_sentence(cls)} |"
        )
    return "\n".join(lines) + "\n"


__all__ = [
    "KafkaError",
    "AuthenticationError",
    "ConfigError",
    "IllegalStateError",
    "TransactionAbortedError",
    "SslAuthenticationError",
    "KafkaTimeoutError",
    "SerializationError",
    "ProducerClosedError",
    "WrongEventLoopError",
    "RecordTooLargeError",
    "InvalidRecordError",
    "UnsupportedVersionError",
    "ProtocolError",
    "KafkaConnectionError",
    "BrokerResponseError",
    "UnknownServerError",
    "OffsetOutOfRangeError",
    "CorruptMessageError",
    "UnknownTopicOrPartitionError",
    "InvalidFetchSizeError",
    "LeaderNotAvailableError",
    "NotLeaderOrFollowerError",
    "RequestTimedOutError",
    "BrokerNotAvailableError",
    "ReplicaNotAvailableError",
    "MessageTooLargeError",
    "StaleControllerEpochError",
    "OffsetMetadataTooLargeError",
    "NetworkExceptionError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "NotCoordinatorError",
    "InvalidTopicError",
    "RecordListTooLargeError",
    "NotEnoughReplicasError",
    "NotEnoughReplicasAfterAppendError",
    "InvalidRequiredAcksError",
    "IllegalGenerationError",
    "InconsistentGroupProtocolError",
    "InvalidGroupIdError",
    "UnknownMemberIdError",
    "InvalidSessionTimeoutError",
    "RebalanceInProgressError",
    "InvalidCommitOffsetSizeError",
    "TopicAuthorizationFailedError",
    "GroupAuthorizationFailedError",
    "ClusterAuthorizationFailedError",
    "InvalidTimestampError",
    "UnsupportedSaslMechanismError",
    "IllegalSaslStateError",
    "UnsupportedVersionBrokerError",
    "TopicAlreadyExistsError",
    "InvalidPartitionsError",
    "InvalidReplicationFactorError",
    "InvalidReplicaAssignmentError",
    "InvalidConfigError",
    "NotControllerError",
    "InvalidRequestError",
    "UnsupportedForMessageFormatError",
    "PolicyViolationError",
    "OutOfOrderSequenceNumberError",
    "DuplicateSequenceNumberError",
    "InvalidProducerEpochError",
    "InvalidTxnStateError",
    "InvalidProducerIdMappingError",
    "InvalidTransactionTimeoutError",
    "ConcurrentTransactionsError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError",
    "SecurityDisabledError",
    "OperationNotAttemptedError",
    "KafkaStorageError",
    "LogDirNotFoundError",
    "SaslAuthenticationFailedError",
    "UnknownProducerIdError",
    "ReassignmentInProgressError",
    "DelegationTokenAuthDisabledError",
    "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError",
    "DelegationTokenRequestNotAllowedError",
    "DelegationTokenAuthorizationFailedError",
    "DelegationTokenExpiredError",
    "InvalidPrincipalTypeError",
    "NonEmptyGroupError",
    "GroupIdNotFoundError",
    "FetchSessionIdNotFoundError",
    "InvalidFetchSessionEpochError",
    "ListenerNotFoundError",
    "TopicDeletionDisabledError",
    "FencedLeaderEpochError",
    "UnknownLeaderEpochError",
    "UnsupportedCompressionTypeError",
    "StaleBrokerEpochError",
    "OffsetNotAvailableError",
    "MemberIdRequiredError",
    "PreferredLeaderNotAvailableError",
    "GroupMaxSizeReachedError",
    "FencedInstanceIdError",
    "EligibleLeadersNotAvailableError",
    "ElectionNotNeededError",
    "NoReassignmentInProgressError",
    "GroupSubscribedToTopicError",
    "InvalidRecordBrokerError",
    "UnstableOffsetCommitError",
    "ThrottlingQuotaExceededError",
    "ProducerFencedError",
    "ResourceNotFoundError",
    "DuplicateResourceError",
    "UnacceptableCredentialError",
    "InconsistentVoterSetError",
    "InvalidUpdateVersionError",
    "FeatureUpdateFailedError",
    "PrincipalDeserializationFailureError",
    "SnapshotNotFoundError",
    "PositionOutOfRangeError",
    "UnknownTopicIdError",
    "DuplicateBrokerRegistrationError",
    "BrokerIdNotRegisteredError",
    "InconsistentTopicIdError",
    "InconsistentClusterIdError",
    "TransactionalIdNotFoundError",
    "FetchSessionTopicIdError",
    "IneligibleReplicaError",
    "NewLeaderElectedError",
    "OffsetMovedToTieredStorageError",
    "FencedMemberEpochError",
    "UnreleasedInstanceIdError",
    "UnsupportedAssignorError",
    "StaleMemberEpochError",
    "MismatchedEndpointTypeError",
    "UnsupportedEndpointTypeError",
    "UnknownControllerIdError",
    "UnknownSubscriptionIdError",
    "TelemetryTooLargeError",
    "InvalidRegistrationError",
    "TransactionAbortableError",
    "InvalidRecordStateError",
    "ShareSessionNotFoundError",
    "InvalidShareSessionEpochError",
    "FencedStateEpochError",
    "InvalidVoterKeyError",
    "DuplicateVoterError",
    "VoterNotFoundError",
    "InvalidRegularExpressionError",
    "RebootstrapRequiredError",
    "StreamsInvalidTopologyError",
    "StreamsInvalidTopologyEpochError",
    "StreamsTopologyFencedError",
    "ShareSessionLimitReachedError",
    "NotLeaderForPartitionError",
    "UnknownErrorCodeError",
    "ERRORS_BY_CODE",
    "error_for_code",
    "raise_for_code",
]
