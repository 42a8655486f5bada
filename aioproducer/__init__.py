"""aioproducer: an asyncio-native Apache Kafka producer with the Java producer's semantics."""

from aioproducer.errors import *  # noqa: F401,F403  (re-exported on purpose: users catch them)

__version__ = "0.1.0"
