"""Every error aioproducer raises, client-side and broker-side.

Why one module: users catch these, so they are public (re-exported by
``aioproducer``), and the sender needs two facts about each broker error code
to decide what to do with a failed batch: is it *retriable* (send the batch
again after a backoff) and does it call for a *metadata refresh* (the leader
moved, the topic is unknown). Both facts live on the class, as in the Java
client's ``RetriableException`` / ``InvalidMetadataException`` hierarchy.
"""

from __future__ import annotations


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


class RecordTooLargeError(KafkaError):
    """A record is larger than ``max.request.size`` or ``buffer.memory``."""


class InvalidRecordError(KafkaError, ValueError):
    """A record field is invalid (negative timestamp, bad header, bad partition)."""


class UnsupportedVersionError(KafkaError):
    """The broker supports no version of an API that aioproducer can speak."""


class ProtocolError(KafkaError):
    """Bytes from the wire do not decode: truncated or malformed frame."""


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
