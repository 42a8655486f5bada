"""aioproducer: an asyncio-native Apache Kafka producer with the Java producer's semantics.

The public API is what this module exports; everything under ``internals``,
``protocol`` and ``network`` may change without notice.
"""

from aioproducer._version import __version__
from aioproducer.errors import *  # noqa: F401,F403  (re-exported on purpose: users catch them)
from aioproducer.errors import __all__ as _error_names
from aioproducer.arrow import ArrowDelivery, ArrowDeliveryReport
from aioproducer.config import ProducerConfig
from aioproducer.internals.batch import DeliveryCallback, FutureRecordMetadata, RecordMetadata
from aioproducer.internals.transactions import GroupMetadata, PreparedTransaction
from aioproducer.producer import Producer, ProducerRecord
from aioproducer.serializers import (
    bytes_serializer,
    int_serializer,
    json_serializer,
    long_serializer,
    str_serializer,
)

__all__ = [
    "Producer",
    "ProducerConfig",
    "ProducerRecord",
    "DeliveryCallback",
    "RecordMetadata",
    "FutureRecordMetadata",
    "ArrowDelivery",
    "ArrowDeliveryReport",
    "GroupMetadata",
    "PreparedTransaction",
    "bytes_serializer",
    "str_serializer",
    "int_serializer",
    "long_serializer",
    "json_serializer",
    *_error_names,
]
