"""The broker error table: lookups, the retriable / refresh-metadata facts the sender acts on, naming."""

from __future__ import annotations

import re

import pytest

from aioproducer import errors as e

BROKER_CLASSES = sorted(set(e.ERRORS_BY_CODE.values()), key=lambda cls: cls.errno)


@pytest.mark.parametrize(
    ("code", "cls", "retriable", "invalid_metadata"),
    [
        (-1, e.UnknownServerError, False, False),
        (2, e.CorruptMessageError, True, False),
        (3, e.UnknownTopicOrPartitionError, True, True),
        (5, e.LeaderNotAvailableError, True, True),
        (6, e.NotLeaderOrFollowerError, True, True),
        (7, e.RequestTimedOutError, True, False),
        (10, e.MessageTooLargeError, False, False),
        (13, e.NetworkExceptionError, True, True),
        (19, e.NotEnoughReplicasError, True, False),
        (20, e.NotEnoughReplicasAfterAppendError, True, False),
        (29, e.TopicAuthorizationFailedError, False, False),
        (35, e.UnsupportedVersionBrokerError, False, False),
        (45, e.OutOfOrderSequenceNumberError, False, False),
        (46, e.DuplicateSequenceNumberError, False, False),
        (47, e.InvalidProducerEpochError, False, False),
        (51, e.ConcurrentTransactionsError, True, False),
        (56, e.KafkaStorageError, True, True),
        (59, e.UnknownProducerIdError, False, False),
        (74, e.FencedLeaderEpochError, True, True),
        (75, e.UnknownLeaderEpochError, True, True),
        (87, e.InvalidRecordBrokerError, False, False),
        (90, e.ProducerFencedError, False, False),
        (100, e.UnknownTopicIdError, True, True),
        (120, e.TransactionAbortableError, False, False),
    ],
)
def test_known_codes(code: int, cls: type[e.BrokerResponseError], retriable: bool, invalid_metadata: bool) -> None:
    assert e.error_for_code(code) is cls
    assert cls.errno == code
    assert cls.retriable is retriable
    assert cls.invalid_metadata is invalid_metadata
    assert issubclass(cls, e.BrokerResponseError)


def test_message_is_kafka_name() -> None:
    assert e.NotLeaderOrFollowerError.message == "NOT_LEADER_OR_FOLLOWER"
    assert e.UnknownServerError.message == "UNKNOWN_SERVER_ERROR"
    assert e.InvalidRecordBrokerError.message == "INVALID_RECORD"
    assert e.NotLeaderForPartitionError is e.NotLeaderOrFollowerError


def test_table_covers_every_code_once() -> None:
    assert sorted(e.ERRORS_BY_CODE) == [-1, *range(1, 134)]
    assert len({cls.message for cls in BROKER_CLASSES}) == len(BROKER_CLASSES)


@pytest.mark.parametrize("cls", BROKER_CLASSES, ids=lambda cls: cls.__name__)
def test_every_class_is_well_formed(cls: type[e.BrokerResponseError]) -> None:
    assert re.fullmatch(r"[A-Z][A-Z_]+", cls.message)
    assert cls.description and not cls.description.startswith(" ")
    assert cls.__name__.endswith("Error")
    assert cls.__name__ in e.__all__
    # Java's InvalidMetadataException extends RetriableException.
    assert cls.retriable or not cls.invalid_metadata


def test_broker_invalid_record_does_not_shadow_client_error() -> None:
    assert not issubclass(e.InvalidRecordBrokerError, e.InvalidRecordError)
    assert issubclass(e.InvalidRecordError, ValueError)
    assert not issubclass(e.UnsupportedVersionBrokerError, e.UnsupportedVersionError)


def test_unknown_code_gives_class_carrying_the_number() -> None:
    cls = e.error_for_code(9999)
    assert issubclass(cls, e.UnknownErrorCodeError)
    assert issubclass(cls, e.BrokerResponseError)
    assert cls.errno == 9999
    assert not cls.retriable and not cls.invalid_metadata
    assert e.error_for_code(9999) is cls  # cached: one class per code
    assert e.error_for_code(-7).errno == -7
    assert "9999" in str(cls())


def test_code_zero_is_not_an_error() -> None:
    with pytest.raises(ValueError):
        e.error_for_code(0)
    e.raise_for_code(0)  # must not raise
    e.raise_for_code(0, "ignored")


def test_raise_for_code() -> None:
    with pytest.raises(e.NotLeaderOrFollowerError) as info:
        e.raise_for_code(6, "leader moved")
    assert str(info.value) == "[Error 6] NOT_LEADER_OR_FOLLOWER: leader moved"
    with pytest.raises(e.MessageTooLargeError) as info2:
        e.raise_for_code(10)
    assert str(info2.value) == "[Error 10] MESSAGE_TOO_LARGE"
    with pytest.raises(e.UnknownErrorCodeError):
        e.raise_for_code(4242)


def test_all_lists_only_existing_names() -> None:
    assert len(set(e.__all__)) == len(e.__all__)
    for name in e.__all__:
        assert hasattr(e, name), name
    for name in ("KafkaError", "ProtocolError", "BrokerResponseError", "error_for_code", "raise_for_code"):
        assert name in e.__all__
