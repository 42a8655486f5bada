"""aiokafka's error names, for ``from aiokafka.errors import ...`` lines moved to ``aioproducer.compat.aiokafka.errors``.

Each name is aioproducer's own class where one means the same (``KafkaTimeoutError`` is
:class:`aioproducer.KafkaTimeoutError`, ``ProducerFenced`` is the class of Kafka's error code 90,
``IllegalOperation`` is :class:`aioproducer.IllegalStateError`), so an ``except`` clause of the
moved program catches what the producer raises. A broker error is found by its Kafka error code,
the number aiokafka gives it. The few names with nothing to match in a producer (a consumer's
``CommitFailedError``, ``ConsumerStoppedError``...) are classes of their own that aioproducer
never raises: the program's ``except`` lines still import. ``tests/integration/test_compat_aiokafka.py``
checks that every exception aiokafka 0.14 defines has its name here, and that each broker
error has aiokafka's code.
"""

from __future__ import annotations

from aioproducer import errors as _errors
from aioproducer.errors import *

__all__ = list(_errors.__all__)


class _NeverRaised(_errors.KafkaError):
    """A name of aiokafka's with no counterpart in a producer: aioproducer never raises it."""


class ConsumerStoppedError(_NeverRaised):
    """aiokafka's consumer was stopped; a producer has none."""


class CommitFailedError(_NeverRaised):
    """aiokafka's consumer could not commit; a producer has none."""


class NoOffsetForPartitionError(_NeverRaised):
    """aiokafka's consumer had no position; a producer has none."""


class StaleMetadata(_NeverRaised):
    """aiokafka's stale-metadata signal: metadata is refreshed here without surfacing it."""


class TooManyInFlightRequests(_NeverRaised):
    """aiokafka's connection-level signal: in-flight requests are bounded here by waiting, not by an error."""


class CorrelationIdError(_NeverRaised):
    """aiokafka's response-mismatch error: a mismatched response is a ProtocolError here."""


class Cancelled(_NeverRaised):
    """aiokafka's cancelled-request error: a cancelled call raises asyncio.CancelledError here."""


class UnrecognizedBrokerVersion(_NeverRaised):
    """aiokafka's broker-version guess failed: versions are negotiated with ApiVersions here."""


class IncompatibleBrokerVersion(_NeverRaised):
    """aiokafka's check of a feature against the broker's version: UnsupportedVersionError here."""


class NoError(_NeverRaised):
    """Kafka's code 0: not an error."""


# aiokafka's client-side names -> aioproducer's class of the same meaning.
IllegalOperation = _errors.IllegalStateError
ProducerClosed = _errors.ProducerClosedError
MessageSizeTooLargeError = _errors.RecordTooLargeError  # aiokafka raises it before sending a record over max_request_size
KafkaConfigurationError = _errors.ConfigError
IllegalArgumentError = _errors.ConfigError
KafkaProtocolError = _errors.ProtocolError
KafkaUnavailableError = _errors.KafkaConnectionError
NodeNotReadyError = _errors.KafkaConnectionError
NoBrokersAvailable = _errors.KafkaConnectionError
MetadataEmptyBrokerList = _errors.KafkaConnectionError
UnsupportedCodecError = _errors.ConfigError
AuthenticationFailedError = _errors.AuthenticationError
AuthenticationMethodNotSupported = _errors.AuthenticationError
QuotaViolationError = _errors.ThrottlingQuotaExceededError
UnknownError = _errors.UnknownServerError

# aiokafka's names of broker error codes -> the class of that code.
CorruptRecordException = _errors.CorruptMessageError
InvalidMessageError = _errors.CorruptMessageError
InvalidFetchRequestError = _errors.InvalidFetchSizeError
StaleLeaderEpochCodeError = _errors.NetworkExceptionError
GroupLoadInProgressError = _errors.CoordinatorLoadInProgressError
GroupCoordinatorNotAvailableError = _errors.CoordinatorNotAvailableError
NotCoordinatorForGroupError = _errors.NotCoordinatorError
InvalidReplicationAssignmentError = _errors.InvalidReplicaAssignmentError
InvalidConfigurationError = _errors.InvalidConfigError
OutOfOrderSequenceNumber = _errors.OutOfOrderSequenceNumberError
DuplicateSequenceNumber = _errors.DuplicateSequenceNumberError
InvalidProducerEpoch = _errors.InvalidProducerEpochError
InvalidTxnState = _errors.InvalidTxnStateError
InvalidProducerIdMapping = _errors.InvalidProducerIdMappingError
InvalidTransactionTimeout = _errors.InvalidTransactionTimeoutError
ConcurrentTransactions = _errors.ConcurrentTransactionsError
TransactionCoordinatorFenced = _errors.TransactionCoordinatorFencedError
TransactionalIdAuthorizationFailed = _errors.TransactionalIdAuthorizationFailedError
SecurityDisabled = _errors.SecurityDisabledError
OperationNotAttempted = _errors.OperationNotAttemptedError
LogDirNotFound = _errors.LogDirNotFoundError
SaslAuthenticationFailed = _errors.SaslAuthenticationFailedError
UnknownProducerId = _errors.UnknownProducerIdError
ReassignmentInProgress = _errors.ReassignmentInProgressError
DelegationTokenAuthDisabled = _errors.DelegationTokenAuthDisabledError
DelegationTokenNotFound = _errors.DelegationTokenNotFoundError
DelegationTokenOwnerMismatch = _errors.DelegationTokenOwnerMismatchError
DelegationTokenRequestNotAllowed = _errors.DelegationTokenRequestNotAllowedError
DelegationTokenAuthorizationFailed = _errors.DelegationTokenAuthorizationFailedError
DelegationTokenExpired = _errors.DelegationTokenExpiredError
InvalidPrincipalType = _errors.InvalidPrincipalTypeError
NonEmptyGroup = _errors.NonEmptyGroupError
GroupIdNotFound = _errors.GroupIdNotFoundError
FetchSessionIdNotFound = _errors.FetchSessionIdNotFoundError
InvalidFetchSessionEpoch = _errors.InvalidFetchSessionEpochError
ListenerNotFound = _errors.ListenerNotFoundError
MemberIdRequired = _errors.MemberIdRequiredError
ProducerFenced = _errors.ProducerFencedError

__all__ += [
    "AuthenticationFailedError", "AuthenticationMethodNotSupported", "Cancelled", "CommitFailedError",
    "ConcurrentTransactions", "ConsumerStoppedError", "CorrelationIdError", "CorruptRecordException",
    "DelegationTokenAuthDisabled", "DelegationTokenAuthorizationFailed", "DelegationTokenExpired",
    "DelegationTokenNotFound", "DelegationTokenOwnerMismatch", "DelegationTokenRequestNotAllowed",
    "DuplicateSequenceNumber", "FetchSessionIdNotFound", "GroupCoordinatorNotAvailableError", "GroupIdNotFound",
    "GroupLoadInProgressError", "IllegalArgumentError", "IllegalOperation", "IncompatibleBrokerVersion",
    "InvalidConfigurationError", "InvalidFetchRequestError", "InvalidFetchSessionEpoch", "InvalidMessageError",
    "InvalidPrincipalType", "InvalidProducerEpoch", "InvalidProducerIdMapping", "InvalidReplicationAssignmentError",
    "InvalidTransactionTimeout", "InvalidTxnState", "KafkaConfigurationError", "KafkaProtocolError",
    "KafkaUnavailableError", "ListenerNotFound", "LogDirNotFound", "MemberIdRequired", "MessageSizeTooLargeError",
    "MetadataEmptyBrokerList", "NoBrokersAvailable", "NoError", "NoOffsetForPartitionError", "NodeNotReadyError",
    "NonEmptyGroup", "NotCoordinatorForGroupError", "OperationNotAttempted", "OutOfOrderSequenceNumber",
    "ProducerClosed", "ProducerFenced", "QuotaViolationError", "ReassignmentInProgress", "SaslAuthenticationFailed",
    "SecurityDisabled", "StaleLeaderEpochCodeError", "StaleMetadata", "TooManyInFlightRequests",
    "TransactionCoordinatorFenced", "TransactionalIdAuthorizationFailed", "UnknownError", "UnknownProducerId",
    "UnrecognizedBrokerVersion", "UnsupportedCodecError",
]
