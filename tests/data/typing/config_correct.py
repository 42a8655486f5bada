"""Configuration a type checker must accept (tests/unit/test_config_types.py)."""

import ssl

from aioproducer import Producer, ProducerConfig, json_serializer
from aioproducer.config_types import ProducerConfigDict


def token() -> tuple[str, int]:
    return "t", 0


def correct(properties: dict[str, str]) -> None:
    Producer(bootstrap_servers="b:9092", linger_ms=5, acks="all", compression_type="lz4", enable_idempotence=True)
    Producer({"bootstrap.servers": "b:9092", "linger.ms": 5, "acks": -1, "batch.size": "65536"})
    Producer(properties)  # a properties file's strings: checked at run time
    settings: ProducerConfigDict = {"bootstrap.servers": ["a:1", "b:2"], "value.serializer": json_serializer}
    Producer(settings, client_id="svc", ssl_context=ssl.create_default_context(), sasl_oauth_token_provider=token)
    ProducerConfig(interceptors=[], partitioner=None, transactional_id=None, sasl_password="pw")
