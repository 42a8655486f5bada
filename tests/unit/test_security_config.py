"""security.protocol, ssl.* and sasl.* as the producer reads them: checked at construction, secrets hidden."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.config import Password, ProducerConfig
from aioproducer.errors import ConfigError
from aioproducer.security.connector import ConnectionSecurity
from aioproducer.security.sasl import SaslClient

SECRET = "s3cr3t-value-42"
PLAIN_JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="key" password="{SECRET}";'


def security(**kwargs: Any) -> ConnectionSecurity:
    return ConnectionSecurity.from_config(ProducerConfig(bootstrap_servers="127.0.0.1:9092", **kwargs))


def test_secrets_print_as_hidden_everywhere_the_config_is_shown() -> None:
    cfg = ProducerConfig(
        bootstrap_servers="b:9092", security_protocol="SASL_SSL", sasl_mechanism="PLAIN", sasl_jaas_config=PLAIN_JAAS,
        ssl_key_password=SECRET, sasl_password=None,
    )
    for text in (repr(cfg), str(cfg.as_dict()), repr(cfg.sasl_jaas_config), repr(security(
        security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_jaas_config=PLAIN_JAAS
    ))):
        assert SECRET not in text
    assert "[hidden]" in repr(cfg)
    assert isinstance(cfg.sasl_jaas_config, Password) and cfg.sasl_jaas_config.value == PLAIN_JAAS


def test_as_dict_round_trips_with_its_hidden_secrets() -> None:
    cfg = ProducerConfig(bootstrap_servers="b:9092", sasl_password=SECRET)
    again = ProducerConfig(cfg.as_dict())
    assert again.sasl_password == cfg.sasl_password and again.sasl_password is not None
    assert again.sasl_password.value == SECRET


def test_plaintext_needs_nothing_and_builds_neither_tls_nor_sasl() -> None:
    s = security()
    assert s.open_streams() is None and s.authenticator() is None


def test_sasl_plain_credentials_from_the_jaas_line_or_librdkafkas_names() -> None:
    from_jaas = security(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_jaas_config=PLAIN_JAAS)
    from_names = security(security_protocol="SASL_PLAINTEXT", sasl_mechanisms="PLAIN", sasl_username="key", sasl_password=SECRET)
    for s in (from_jaas, from_names):
        assert s.sasl is not None and s.sasl.username == "key" and s.sasl.password == Password(SECRET)
        make = s.authenticator()
        assert make is not None
        async def one() -> SaslClient:
            return await make("broker.example")

        client = asyncio.run(one())
        assert client.mechanism == "PLAIN" and client.initial_response() == b"\0key\0" + SECRET.encode()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"security_protocol": "SASL_SSL"}, r"sasl.mechanism=GSSAPI needs a login: sasl.jaas.config"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "DIGEST-MD5"}, "sasl.mechanism must be one of"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"}, "needs a username and password"),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"}, "needs sasl_oauth_token_provider"),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256", "sasl_jaas_config": PLAIN_JAAS},
            "sasl.jaas.config",
        ),
        (
            {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_jaas_config": PLAIN_JAAS,
             "sasl_username": "x", "sasl_password": "y"},
            "both give credentials",
        ),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_mechanisms": "SCRAM-SHA-256"}, "disagree"),
        ({"security_protocol": "SSL", "ssl_context": ssl.create_default_context(), "ssl_ca_location": "x"}, "ssl_context replaces"),
        ({"security_protocol": "SSL", "ssl_truststore_location": "/nonexistent/ca.pem"}, "ssl.truststore.location"),
        ({"security_protocol": "SSL", "ssl_enabled_protocols": "TLSv1.1"}, "ssl.enabled.protocols"),
    ],
)
def test_bad_security_settings_fail_when_the_producer_is_made(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        Producer(bootstrap_servers="127.0.0.1:9092", **kwargs)
    assert SECRET not in str(info.value)


def test_a_jks_truststore_is_refused_with_the_command_that_converts_it(tmp_path: Path) -> None:
    store = tmp_path / "truststore.jks"
    store.write_bytes(b"\xfe\xed\xfe\xed" + b"\x00" * 60)
    with pytest.raises(ConfigError, match="keytool -importkeystore"):
        Producer(bootstrap_servers="b:9092", security_protocol="SSL", ssl_truststore_location=str(store))


def test_a_ready_ssl_context_is_used_as_is() -> None:
    context = ssl.create_default_context()
    s = security(security_protocol="SSL", ssl_context=context)
    assert s.ssl_context is context and s.open_streams() is not None
