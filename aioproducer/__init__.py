"""aioproducer: an asyncio-native Apache Kafka producer with the Java producer's semantics.

The public API is what this module exports; everything under ``internals``,
``protocol`` and ``network`` may change without notice.
"""

from aioproducer._version import __version__
from aioproducer.errors import *  # noqa: F401,F403  (re-exported on purpose: users catch them)
from aioproducer.errors import __all__ as _error_names
from aioproducer.arrow import ArrowDelivery, ArrowDeliveryReport
from aioproducer.config import ProducerConfig
from aioproducer.config_types import ProducerConfigDict, ProducerKeywords
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
    "ProducerConfigDict",
    "ProducerKeywords",
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


#: Submodules that importing the names above loaded as a side effect, taken out of the package's
#: namespace: ``dir(aioproducer)`` is the public surface (``__all__``), not the machinery under it.
#: ``aioproducer.internals`` and the rest still resolve on access (``__getattr__``), and
#: ``import aioproducer.network.client`` works as ever.
_INTERNAL_PACKAGES = frozenset(
    {"internals", "network", "protocol", "clock", "lifecycle", "logs", "record_types", "topic", "security", "arrow",
     "producer", "config_types", "partitioner"}
)
for _name in _INTERNAL_PACKAGES & set(globals()):
    del globals()[_name]
del _name


def __getattr__(name: str) -> object:
    """A submodule taken out of the namespace above (or not imported yet), imported on first access."""
    import importlib

    if name.startswith("_") and name != "_native":
        raise AttributeError(f"module 'aioproducer' has no attribute {name!r}")
    try:
        return importlib.import_module(f"aioproducer.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"aioproducer.{name}":
            raise
        raise AttributeError(f"module 'aioproducer' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted({*__all__, "__version__", "errors", "config", "serializers"})
