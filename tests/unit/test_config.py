"""Tests for aioproducer.config: Java 3.9 keys and defaults, parsing, validation, cross-key rules."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from aioproducer.config import CONFIG_DEFS, PYTHON_ONLY_KEYS, Password, ProducerConfig, render_markdown_table
from aioproducer.errors import ConfigError
from aioproducer.serializers import str_serializer

# The Java client's defaults (ProducerConfig.java / CommonClientConfigs.java; 4.x's where 4.0 changed them), in
# their parsed form. Written out again here on purpose: a typo in CONFIG_DEFS must fail a test.
JAVA_39_DEFAULTS: dict[str, Any] = {
    "bootstrap_servers": [],
    "acks": -1,
    "batch_size": 16384,
    "linger_ms": 5,  # Kafka 4.x (KIP-1030; 3.9: 0), measured: docs/reference/configuration.md
    "buffer_memory": 33554432,
    "max_block_ms": 60000,
    "max_request_size": 1048576,
    "request_timeout_ms": 30000,
    "delivery_timeout_ms": 120000,
    "retries": 2147483647,
    "retry_backoff_ms": 100,
    "retry_backoff_max_ms": 1000,
    "reconnect_backoff_ms": 50,
    "reconnect_backoff_max_ms": 1000,
    "max_in_flight_requests_per_connection": 5,
    "enable_idempotence": True,
    "compression_type": 0,
    "compression_gzip_level": -1,
    "compression_lz4_level": 9,
    "compression_zstd_level": 3,
    "metadata_max_age_ms": 300000,
    "metadata_max_idle_ms": 300000,
    "connections_max_idle_ms": 540000,
    "socket_connection_setup_timeout_ms": 10000,
    "socket_connection_setup_timeout_max_ms": 30000,
    "send_buffer_bytes": 131072,
    "receive_buffer_bytes": 32768,
    "partitioner_class": None,
    "partitioner_ignore_keys": False,
    "partitioner_adaptive_partitioning_enable": True,
    "partitioner_availability_timeout_ms": 0,
    "key_serializer": None,
    "value_serializer": None,
    "interceptor_classes": [],
    "security_protocol": "PLAINTEXT",
    # Java's store types default to JKS; here None reads the format from the file (JKS is refused anyway).
    "ssl_truststore_location": None,
    "ssl_truststore_type": None,
    "ssl_truststore_password": None,
    "ssl_truststore_certificates": None,
    "ssl_keystore_location": None,
    "ssl_keystore_type": None,
    "ssl_keystore_password": None,
    "ssl_key_password": None,
    "ssl_keystore_certificate_chain": None,
    "ssl_keystore_key": None,
    "ssl_endpoint_identification_algorithm": "https",
    "ssl_enabled_protocols": ["TLSv1.2", "TLSv1.3"],
    "ssl_cipher_suites": [],
    "ssl_protocol": "TLSv1.3",
    "ssl_ca_location": None,  # librdkafka's names: no Java default
    "ssl_certificate_location": None,
    "ssl_key_location": None,
    "ssl_context": None,  # Python only
    "sasl_mechanism": "GSSAPI",
    "sasl_jaas_config": None,
    "sasl_mechanisms": None,
    "sasl_username": None,
    "sasl_password": None,
    # GSSAPI: Java's service name (no default: required with GSSAPI) and renewal keys, librdkafka's keytab and principal.
    "sasl_kerberos_service_name": None,
    "sasl_kerberos_keytab": None,
    "sasl_kerberos_principal": None,
    "sasl_kerberos_ticket_renew_window_factor": 0.8,
    "sasl_kerberos_ticket_renew_jitter": 0.05,
    "sasl_kerberos_min_time_before_relogin": 60000,
    "sasl_kerberos_kinit_cmd": "/usr/bin/kinit",
    "sasl_oauth_token_provider": None,  # Python only
    # OIDC sign-in (KIP-768; the client credentials keys and sasl.oauthbearer.scope are Java 4.1's,
    # sasl.oauthbearer.method/.client.id/.client.secret librdkafka's, whose method default is "default").
    "sasl_oauthbearer_token_endpoint_url": None,
    "sasl_oauthbearer_client_credentials_client_id": None,
    "sasl_oauthbearer_client_credentials_client_secret": None,
    "sasl_oauthbearer_scope": None,
    "sasl_oauthbearer_jwt_retriever_class": "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever",
    "sasl_oauthbearer_assertion_file": None,
    # Java 4.1+'s defaults for assertions the client signs (SaslConfigs), and librdkafka's two switches.
    "sasl_oauthbearer_assertion_private_key_file": None,
    "sasl_oauthbearer_assertion_private_key_passphrase": None,
    "sasl_oauthbearer_assertion_algorithm": "RS256",
    "sasl_oauthbearer_assertion_claim_aud": None,
    "sasl_oauthbearer_assertion_claim_iss": None,
    "sasl_oauthbearer_assertion_claim_sub": None,
    "sasl_oauthbearer_assertion_claim_exp_seconds": 300,
    "sasl_oauthbearer_assertion_claim_nbf_seconds": 60,
    "sasl_oauthbearer_assertion_claim_jti_include": False,
    "sasl_oauthbearer_assertion_template_file": None,
    "sasl_oauthbearer_grant_type": None,
    "sasl_oauthbearer_extensions": None,
    "sasl_oauthbearer_header_urlencode": False,
    "sasl_oauthbearer_method": "default",
    "sasl_oauthbearer_client_id": None,
    "sasl_oauthbearer_client_secret": None,
    "sasl_login_callback_handler_class": None,
    "sasl_login_refresh_window_factor": 0.8,
    "sasl_login_refresh_window_jitter": 0.05,
    "sasl_login_refresh_min_period_seconds": 60,
    "sasl_login_refresh_buffer_seconds": 300,
    "sasl_login_retry_backoff_ms": 100,
    "sasl_login_retry_backoff_max_ms": 10000,
    "sasl_login_connect_timeout_ms": None,
    "sasl_login_read_timeout_ms": None,
    "transactional_id": None,
    "transaction_timeout_ms": 60000,
    "client_dns_lookup": "use_all_dns_ips",
    "metadata_recovery_strategy": "rebootstrap",  # Java 4.x's default (3.9: none): see config.py
    "metadata_recovery_rebootstrap_trigger_ms": 300000,  # Java 4.x (KIP-1102)
    "metric_reporters": [],
    "metrics_num_samples": 2,
    "metrics_recording_level": "INFO",
    "metrics_sample_window_ms": 30000,
    "enable_metrics_push": True,
}


def test_defaults_equal_java_4x_but_where_the_docs_say() -> None:
    cfg = ProducerConfig()
    for attr, expected in JAVA_39_DEFAULTS.items():
        assert getattr(cfg, attr) == expected, attr
    assert cfg.client_id.startswith("aioproducer-")
    assert not cfg.idempotence_explicit
    assert cfg.explicit_keys == frozenset()


def test_every_def_is_tested_and_annotated() -> None:
    attrs = {d.attr for d in CONFIG_DEFS} - {"client_id"}
    assert attrs == set(JAVA_39_DEFAULTS)
    annotations = ProducerConfig.__annotations__
    for d in CONFIG_DEFS:
        assert d.attr in annotations, d.attr
        assert "." not in d.attr and ("_" not in d.key or d.key in PYTHON_ONLY_KEYS)


# (key, string form as in a .properties file, Python form, parsed value) for every key.
FORMS: list[tuple[str, Any, Any, Any]] = [
    ("bootstrap.servers", "a:1, b:2", ["a:1", "b:2"], [("a", 1), ("b", 2)]),
    ("client.id", "my-app", "my-app", "my-app"),
    ("acks", "1", 1, 1),
    ("batch.size", "32768", 32768, 32768),
    ("linger.ms", "5", 5, 5),
    ("buffer.memory", "67108864", 67108864, 67108864),
    ("max.block.ms", "1000", 1000, 1000),
    ("max.request.size", "2097152", 2097152, 2097152),
    ("request.timeout.ms", "20000", 20000, 20000),
    ("delivery.timeout.ms", "60000", 60000, 60000),
    ("retries", "3", 3, 3),
    ("retry.backoff.ms", "200", 200, 200),
    ("retry.backoff.max.ms", "2000", 2000, 2000),
    ("reconnect.backoff.ms", "20", 20, 20),
    ("reconnect.backoff.max.ms", "500", 500, 500),
    ("max.in.flight.requests.per.connection", "1", 1, 1),
    ("enable.idempotence", "false", False, False),
    ("compression.type", "lz4", "lz4", 3),
    ("compression.gzip.level", "6", 6, 6),
    ("compression.lz4.level", "12", 12, 12),
    ("compression.zstd.level", "-5", -5, -5),
    ("metadata.max.age.ms", "60000", 60000, 60000),
    ("metadata.max.idle.ms", "60000", 60000, 60000),
    ("connections.max.idle.ms", "-1", -1, -1),
    ("socket.connection.setup.timeout.ms", "5000", 5000, 5000),
    ("socket.connection.setup.timeout.max.ms", "6000", 6000, 6000),
    ("send.buffer.bytes", "-1", -1, -1),
    ("receive.buffer.bytes", "65536", 65536, 65536),
    ("partitioner.ignore.keys", "true", True, True),
    ("partitioner.adaptive.partitioning.enable", "FALSE", False, False),
    ("partitioner.availability.timeout.ms", "250", 250, 250),
    ("security.protocol", "plaintext", "PLAINTEXT", "PLAINTEXT"),
    ("ssl.truststore.location", "/ca.pem", "/ca.pem", "/ca.pem"),
    ("ssl.truststore.type", "pkcs12", "PKCS12", "PKCS12"),
    ("ssl.truststore.password", "pw", Password("pw"), Password("pw")),
    ("ssl.truststore.certificates", "-----BEGIN", "-----BEGIN", "-----BEGIN"),
    ("ssl.keystore.location", "/k.p12", "/k.p12", "/k.p12"),
    ("ssl.keystore.type", "pem", "PEM", "PEM"),
    ("ssl.keystore.password", "pw", "pw", Password("pw")),
    ("ssl.key.password", "pw", "pw", Password("pw")),
    ("ssl.keystore.certificate.chain", "-----BEGIN", "-----BEGIN", "-----BEGIN"),
    ("ssl.keystore.key", "-----BEGIN", "-----BEGIN", Password("-----BEGIN")),
    ("ssl.endpoint.identification.algorithm", "", "", ""),
    ("ssl.enabled.protocols", "TLSv1.3", ["TLSv1.3"], ["TLSv1.3"]),
    ("ssl.cipher.suites", "A, B", ["A", "B"], ["A", "B"]),
    ("ssl.protocol", "TLSv1.2", "TLSv1.2", "TLSv1.2"),
    ("ssl.ca.location", "/ca.pem", "/ca.pem", "/ca.pem"),
    ("ssl.certificate.location", "/c.pem", "/c.pem", "/c.pem"),
    ("ssl.key.location", "/k.pem", "/k.pem", "/k.pem"),
    ("ssl_context", None, None, None),
    ("sasl.mechanism", "PLAIN", "PLAIN", "PLAIN"),
    ("sasl.jaas.config", "x required;", "x required;", Password("x required;")),
    ("sasl.mechanisms", "PLAIN", "PLAIN", "PLAIN"),
    ("sasl.username", "alice", "alice", "alice"),
    ("sasl.password", "pw", "pw", Password("pw")),
    ("sasl.kerberos.service.name", "kafka", "kafka", "kafka"),
    ("sasl.kerberos.keytab", "/etc/k.keytab", "/etc/k.keytab", "/etc/k.keytab"),
    ("sasl.kerberos.principal", "app@EXAMPLE.COM", "app@EXAMPLE.COM", "app@EXAMPLE.COM"),
    ("sasl.kerberos.ticket.renew.window.factor", "0.9", 0.9, 0.9),
    ("sasl.kerberos.ticket.renew.jitter", "0.1", 0.1, 0.1),
    ("sasl.kerberos.min.time.before.relogin", "1000", 1000, 1000),
    ("sasl.kerberos.kinit.cmd", "/opt/kinit", "/opt/kinit", "/opt/kinit"),
    ("sasl_oauth_token_provider", None, None, None),
    ("sasl.oauthbearer.token.endpoint.url", "https://idp/token", "https://idp/token", "https://idp/token"),
    ("sasl.oauthbearer.client.credentials.client.id", "svc", "svc", "svc"),
    ("sasl.oauthbearer.client.credentials.client.secret", "pw", "pw", Password("pw")),
    ("sasl.oauthbearer.scope", "kafka write", "kafka write", "kafka write"),
    ("sasl.oauthbearer.method", "OIDC", "oidc", "oidc"),
    ("sasl.oauthbearer.jwt.retriever.class", "JwtBearerJwtRetriever", "JwtBearerJwtRetriever", "JwtBearerJwtRetriever"),
    ("sasl.oauthbearer.assertion.file", "/etc/kafka/assertion.jwt", "/etc/kafka/assertion.jwt", "/etc/kafka/assertion.jwt"),
    ("sasl.oauthbearer.assertion.private.key.file", "/etc/kafka/client.key", "/etc/kafka/client.key", "/etc/kafka/client.key"),
    ("sasl.oauthbearer.assertion.private.key.passphrase", "pp", "pp", Password("pp")),
    ("sasl.oauthbearer.assertion.algorithm", "es256", "ES256", "ES256"),
    ("sasl.oauthbearer.assertion.claim.aud", "https://idp/token", "https://idp/token", "https://idp/token"),
    ("sasl.oauthbearer.assertion.claim.iss", "svc", "svc", "svc"),
    ("sasl.oauthbearer.assertion.claim.sub", "svc", "svc", "svc"),
    ("sasl.oauthbearer.assertion.claim.exp.seconds", "600", 600, 600),
    ("sasl.oauthbearer.assertion.claim.nbf.seconds", "0", 0, 0),
    ("sasl.oauthbearer.assertion.claim.jti.include", "true", True, True),
    ("sasl.oauthbearer.assertion.template.file", "/etc/kafka/t.json", "/etc/kafka/t.json", "/etc/kafka/t.json"),
    ("sasl.oauthbearer.grant.type", "Client_Credentials", "client_credentials", "client_credentials"),
    ("sasl.oauthbearer.extensions", "a=1,b=x=y", {"a": "1", "b": "x=y"}, {"a": "1", "b": "x=y"}),
    ("sasl.oauthbearer.header.urlencode", "TRUE", True, True),
    ("sasl.oauthbearer.client.id", "svc", "svc", "svc"),
    ("sasl.oauthbearer.client.secret", "pw", "pw", Password("pw")),
    ("sasl.login.callback.handler.class", "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
     "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
     "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"),
    ("sasl.login.refresh.window.factor", "0.5", 0.5, 0.5),
    ("sasl.login.refresh.window.jitter", "0.1", 0.1, 0.1),
    ("sasl.login.refresh.min.period.seconds", "10", 10, 10),
    ("sasl.login.refresh.buffer.seconds", "20", 20, 20),
    ("sasl.login.retry.backoff.ms", "50", 50, 50),
    ("sasl.login.retry.backoff.max.ms", "5000", 5000, 5000),
    ("sasl.login.connect.timeout.ms", "1500", 1500, 1500),
    ("sasl.login.read.timeout.ms", "2500", 2500, 2500),
    ("transaction.timeout.ms", "90000", 90000, 90000),
    ("client.dns.lookup", "resolve_canonical_bootstrap_servers_only", "resolve_canonical_bootstrap_servers_only", "resolve_canonical_bootstrap_servers_only"),
    ("metadata.recovery.strategy", "none", "none", "none"),
    ("metadata.recovery.rebootstrap.trigger.ms", "5000", 5000, 5000),
    ("metric.reporters", "a.B, c.D", ["a.B", "c.D"], ["a.B", "c.D"]),
    ("metrics.num.samples", "3", 3, 3),
    ("metrics.recording.level", "debug", "DEBUG", "DEBUG"),
    ("metrics.sample.window.ms", "1000", 1000, 1000),
    ("enable.metrics.push", "false", False, False),
    ("interceptor.classes", "", [], []),
    ("partitioner.class", None, None, None),
    ("key.serializer", None, None, None),
    ("value.serializer", None, None, None),
    ("transactional.id", None, None, None),
]


def test_forms_cover_every_key() -> None:
    assert {f[0] for f in FORMS} == {d.key for d in CONFIG_DEFS}


@pytest.mark.parametrize(("key", "text", "python", "parsed"), FORMS, ids=[f[0] for f in FORMS])
def test_every_key_parses_from_string_and_python_forms(key: str, text: Any, python: Any, parsed: Any) -> None:
    attr = key.replace(".", "_")
    extra: dict[str, Any] = {"acks": "1"} if key == "enable.idempotence" else {}
    from_text = ProducerConfig({key: text, **extra})
    from_kwarg = ProducerConfig(extra, **{attr: python})
    assert getattr(from_text, attr) == parsed
    assert getattr(from_kwarg, attr) == parsed
    assert key in from_text.explicit_keys and key in from_kwarg.explicit_keys


@pytest.mark.parametrize(("value", "expected"), [("all", -1), ("ALL", -1), (" all ", -1), ("-1", -1), (-1, -1), ("0", 0), (0, 0), ("1", 1)])
def test_acks_forms(value: Any, expected: int) -> None:
    assert ProducerConfig(acks=value, enable_idempotence=expected == -1).acks == expected


@pytest.mark.parametrize(("name", "codec"), [("none", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4), ("ZSTD", 4), (2, 2)])
def test_compression_codecs(name: Any, codec: int) -> None:
    assert ProducerConfig(compression_type=name).compression_type == codec


def test_bootstrap_servers_forms() -> None:
    cfg = ProducerConfig(bootstrap_servers="[::1]:9092,host.example:19092 , 10.0.0.1:9093,")
    assert cfg.bootstrap_servers == [("::1", 9092), ("host.example", 19092), ("10.0.0.1", 9093)]
    assert ProducerConfig(bootstrap_servers=[("::1", 9092), "h:1"]).bootstrap_servers == [("::1", 9092), ("h", 1)]  # type: ignore[arg-type]  # a bad value on purpose
    assert cfg.require_bootstrap_servers() == cfg.bootstrap_servers
    with pytest.raises(ConfigError, match="bootstrap.servers is required"):
        ProducerConfig().require_bootstrap_servers()


@pytest.mark.parametrize("bad", ["localhost", "host:", ":9092", "::1:9092", "h:99999", "h:0", "h:x", 9092, ["h:1", 5]])
def test_bootstrap_servers_rejects(bad: Any) -> None:
    with pytest.raises(ConfigError, match="bootstrap.servers"):
        ProducerConfig(bootstrap_servers=bad)


def test_ipv6_hint() -> None:
    with pytest.raises(ConfigError, match=r"\[::1\]:9092"):
        ProducerConfig(bootstrap_servers="::1:9092")


def test_client_id_generated_when_empty_and_unique() -> None:
    a, b = ProducerConfig(), ProducerConfig(client_id="")
    assert a.client_id != b.client_id
    assert a.client_id.startswith("aioproducer-") and b.client_id.startswith("aioproducer-")
    assert ProducerConfig(client_id="svc").client_id == "svc"


# ------------------------------------------------------------------------- errors


def test_wrong_type_message_names_key_and_value() -> None:
    with pytest.raises(ConfigError) as exc:
        ProducerConfig({"linger.ms": "abc"})
    assert str(exc.value) == "linger.ms must be an integer >= 0, got 'abc'"


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("linger.ms", -1, "linger.ms must be an integer >= 0"),
        ("linger.ms", 1.5, "linger.ms"),
        ("linger.ms", True, "linger.ms"),
        ("linger.ms", None, "linger.ms"),
        ("batch.size", 2**31, "batch.size"),
        ("max.in.flight.requests.per.connection", 0, r"max.in.flight.requests.per.connection must be an integer >= 1"),
        ("metadata.max.idle.ms", 4999, "metadata.max.idle.ms must be an integer >= 5000"),
        ("compression.lz4.level", 18, r"compression.lz4.level must be an integer in \[1, 17\]"),
        ("compression.zstd.level", 23, "compression.zstd.level"),
        ("compression.gzip.level", 0, r"-1 or an integer in \[1, 9\]"),
        ("compression.type", "brotli", "compression.type must be one of none, gzip, snappy, lz4, zstd"),
        ("acks", "2", "acks must be one of all, -1, 0, 1"),
        ("acks", True, "acks"),
        ("enable.idempotence", "yes", r"enable.idempotence must be a boolean"),
        ("enable.idempotence", 1, "enable.idempotence"),
        ("client.id", 5, "client.id must be a string"),
        ("send.buffer.bytes", -2, "send.buffer.bytes"),
        ("retries", -1, "retries"),
        ("metrics.recording.level", "verbose", "metrics.recording.level"),
        ("interceptor.classes", 5, "interceptor.classes"),
        ("interceptor.classes", "no_such_module_q.Interceptor", "interceptor.classes"),
        ("key.serializer", 42, "key.serializer"),
        ("partitioner.class", "no_such_module_q.P", "partitioner.class"),
        ("metadata.recovery.strategy", "always", "metadata.recovery.strategy must be one of none, rebootstrap"),
        ("metadata.recovery.strategy", 1, "metadata.recovery.strategy"),
        ("metadata.recovery.rebootstrap.trigger.ms", -1, "metadata.recovery.rebootstrap.trigger.ms must be an integer >= 0"),
        ("metadata.recovery.rebootstrap.trigger.ms", "soon", "metadata.recovery.rebootstrap.trigger.ms"),
        ("client.dns.lookup", "default", "client.dns.lookup must be one of"),
    ],
)
def test_invalid_values(key: str, value: Any, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ProducerConfig({key: value})


@pytest.mark.parametrize(("given", "suggestion"), [("lingr.ms", "linger.ms"), ("linger_ms", "linger.ms"), ("batchsize", "batch.size"), ("ack", "acks")])
def test_unknown_key_suggests_closest(given: str, suggestion: str) -> None:
    with pytest.raises(ConfigError, match=f"unknown config key '{given}'; did you mean '{suggestion}'"):
        ProducerConfig({given: 1})  # type: ignore[dict-item]  # a bad value on purpose


def test_unknown_keyword_suggests_python_name() -> None:
    with pytest.raises(ConfigError, match="did you mean 'linger_ms'"):
        ProducerConfig(linger=5)  # type: ignore[call-arg]  # a bad value on purpose


def test_unknown_key_without_close_match() -> None:
    with pytest.raises(ConfigError) as exc:
        ProducerConfig({"zzzzzz": 1})  # type: ignore[dict-item]  # a bad value on purpose
    assert "did you mean" not in str(exc.value)


@pytest.mark.parametrize("protocol", ["SSL", "sasl_ssl", "SASL_PLAINTEXT"])
def test_every_security_protocol_is_accepted(protocol: str) -> None:
    assert ProducerConfig(security_protocol=protocol).security_protocol == protocol.upper()


def test_bad_security_protocol_lists_options() -> None:
    with pytest.raises(ConfigError, match="must be one of PLAINTEXT"):
        ProducerConfig(security_protocol="TLS")


def test_a_transactional_id_forces_idempotence_and_an_empty_one_is_refused() -> None:
    cfg = ProducerConfig(transactional_id="my-tx", acks="all")
    assert cfg.transactional_id == "my-tx" and cfg.enable_idempotence
    with pytest.raises(ConfigError, match="transactional.id needs enable.idempotence=true"):
        ProducerConfig(transactional_id="my-tx", enable_idempotence=False)
    with pytest.raises(ConfigError, match="enable.idempotence=true conflicts"):
        ProducerConfig(transactional_id="my-tx", acks="1")  # no silent downgrade: the conflict is an error
    with pytest.raises(ConfigError, match="must not be empty"):
        ProducerConfig(transactional_id="")


def test_mixing_forms() -> None:
    assert ProducerConfig({"linger.ms": "5"}, linger_ms="5").linger_ms == 5
    assert ProducerConfig({"linger.ms": 5}, linger_ms=5).linger_ms == 5
    with pytest.raises(ConfigError, match="linger.ms given twice with different values"):
        ProducerConfig({"linger.ms": 5}, linger_ms=10)


# --------------------------------------------------------------------- cross-key rules


def test_delivery_timeout_explicit_too_small_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"delivery.timeout.ms \(30000\) must be >= linger.ms \(5\) \+ request.timeout.ms \(30000\)"):
        ProducerConfig(delivery_timeout_ms=30000, linger_ms=5)
    assert ProducerConfig(delivery_timeout_ms=30005, linger_ms=5).delivery_timeout_ms == 30005


def test_delivery_timeout_default_raised_to_floor(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="aioproducer.config"):
        cfg = ProducerConfig(request_timeout_ms=200000, linger_ms=10)
    assert cfg.delivery_timeout_ms == 200010
    assert "delivery.timeout.ms raised" in caplog.text


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"acks": "1"}, "acks must be all"),
        ({"acks": 0}, "acks must be all"),
        ({"retries": 0}, "retries must be > 0"),
        ({"max.in.flight.requests.per.connection": 6}, "max.in.flight.requests.per.connection must be <= 5"),
    ],
)
def test_explicit_idempotence_conflicts_are_errors(settings: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ProducerConfig({**settings, "enable.idempotence": "true"})
    with pytest.raises(ConfigError, match=match):
        ProducerConfig(settings, enable_idempotence=True)


@pytest.mark.parametrize(
    "settings",
    [{"acks": "1"}, {"acks": 0}, {"retries": 0}, {"max.in.flight.requests.per.connection": 6}],
)
def test_implicit_idempotence_is_silently_disabled(settings: dict[str, Any]) -> None:
    cfg = ProducerConfig(settings)
    assert cfg.enable_idempotence is False
    assert cfg.idempotence_explicit is False


def test_idempotence_explicit_flag() -> None:
    assert ProducerConfig(enable_idempotence=True).idempotence_explicit
    assert ProducerConfig({"enable.idempotence": "true"}).enable_idempotence
    off = ProducerConfig(enable_idempotence=False, acks=1, max_in_flight_requests_per_connection=10, retries=0)
    assert off.idempotence_explicit and not off.enable_idempotence
    # Compatible settings keep the default on.
    kept = ProducerConfig(acks="all", retries=5, max_in_flight_requests_per_connection=5)
    assert kept.enable_idempotence and not kept.idempotence_explicit


def test_reconnect_backoff_without_max_becomes_constant() -> None:
    assert ProducerConfig(reconnect_backoff_ms=200).reconnect_backoff_max_ms == 200
    both = ProducerConfig(reconnect_backoff_ms=200, reconnect_backoff_max_ms=5000)
    assert both.reconnect_backoff_max_ms == 5000
    assert ProducerConfig().reconnect_backoff_max_ms == 1000


# ------------------------------------------------------------------- objects & output


class Interceptor:
    def on_send(self, record: Any) -> Any:
        return record


def test_serializers_and_interceptors_resolve() -> None:
    cfg = ProducerConfig(
        key_serializer="aioproducer.serializers.str_serializer",
        value_serializer=str_serializer,
        interceptor_classes=f"{__name__}.Interceptor",
    )
    assert cfg.key_serializer is not None and cfg.key_serializer("t", "k") == b"k"
    assert cfg.value_serializer is not None and cfg.value_serializer("t", "v") == b"v"
    assert len(cfg.interceptor_classes) == 1 and isinstance(cfg.interceptor_classes[0], Interceptor)
    obj = Interceptor()
    assert ProducerConfig(interceptor_classes=[obj, Interceptor]).interceptor_classes[0] is obj


def test_partitioner_class_resolves_to_callable() -> None:
    def choose(topic: str, key: Any, key_bytes: Any, value: Any, value_bytes: Any, cluster: Any) -> int:
        return 1

    cfg = ProducerConfig(partitioner_class=choose)
    assert cfg.partitioner_class is not None
    assert cfg.partitioner_class("t", None, None, None, None, None) == 1


def test_as_dict_round_trips() -> None:
    cfg = ProducerConfig(
        {"bootstrap.servers": "[::1]:9092,b:2", "acks": "1", "compression.type": "zstd", "linger.ms": "7"},
        key_serializer=str_serializer,
    )
    d = cfg.as_dict()
    assert d["acks"] == 1 and d["compression.type"] == 4 and d["linger.ms"] == 7
    assert d["bootstrap.servers"] == [("::1", 9092), ("b", 2)]
    assert set(d) == {c.key for c in CONFIG_DEFS}
    again = ProducerConfig(d)
    assert again.as_dict() == d
    d["bootstrap.servers"].append(("x", 1))
    assert len(cfg.bootstrap_servers) == 2  # as_dict hands out copies


def test_repr_shows_explicit_keys_only() -> None:
    text = repr(ProducerConfig(linger_ms=5))
    assert "linger.ms" in text and "batch.size" not in text


def test_markdown_table() -> None:
    table = render_markdown_table()
    lines = table.strip().splitlines()
    assert lines[0].startswith("| Key | Keyword | Type | Default |")
    assert len(lines) == 2 + len(CONFIG_DEFS)
    assert "| `linger.ms` | `linger_ms` | long | `5` |" in table
    assert "| `bootstrap.servers` | `bootstrap_servers` | list | `(required)` |" in table
    assert "| `enable.idempotence` | `enable_idempotence` | boolean | `true` |" in table
    for line in lines[2:]:
        assert line.count(" | ") == 5, line  # no unescaped pipes inside a description


def test_module_docstring_lists_every_ignored_key() -> None:
    import aioproducer.config as config_module

    doc = config_module.__doc__ or ""
    for d in CONFIG_DEFS:
        if d.status != "supported":
            assert f"``{d.key}``" in doc, d.key


class _AsyncInterceptor:
    async def on_send(self, record: object) -> object:
        return record


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"buffer_memory": 0}, "buffer.memory"),
        ({"client_id": "x" * 32768}, "32,767"),
        ({"client_id": "\ud800"}, "UTF-8"),
        ({"interceptor_classes": [5]}, "not an interceptor"),
        ({"interceptor_classes": [object()]}, "on_send"),
        ({"interceptor_classes": [_AsyncInterceptor()]}, "async"),
    ],
    ids=["buffer-memory-0", "client-id-too-long", "client-id-surrogate", "interceptor-int", "interceptor-no-on-send", "interceptor-async"],
)
def test_bad_values_found_late_before_are_refused_at_construction(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ProducerConfig(bootstrap_servers="localhost:9092", **kwargs)


@pytest.mark.parametrize("config", [["bootstrap.servers", "x:1"], "bootstrap.servers=x:1"], ids=["list", "str"])
def test_a_configuration_that_is_not_a_mapping_is_refused(config: object) -> None:
    with pytest.raises(ConfigError, match="must be a mapping"):
        ProducerConfig(config)  # type: ignore[arg-type]


def test_partitioner_is_the_keyword_alias_of_partitioner_class() -> None:
    """The docs' spelling (and aiokafka's): the same setting, the Java key in the table and in errors."""

    def first(topic: str, key: object, key_bytes: object, value: object, value_bytes: object, cluster: object) -> int:
        return 0

    def second(topic: str, key: object, key_bytes: object, value: object, value_bytes: object, cluster: object) -> int:
        return 1

    assert ProducerConfig(partitioner=first).partitioner_class is first
    assert ProducerConfig(partitioner=first, partitioner_class=first).partitioner_class is first  # the same twice: fine
    assert "partitioner.class" in ProducerConfig(partitioner=first).explicit_keys
    with pytest.raises(ConfigError, match=r"partitioner\.class given twice with different values: .* as partitioner= and partitioner_class="):
        ProducerConfig(partitioner=first, partitioner_class=second)
    with pytest.raises(ConfigError, match=r"partitioner takes one of librdkafka's partitioner names .*; did you mean 'partitioner\.class'"):
        ProducerConfig({"partitioner": first})  # type: ignore[dict-item]  # a mapping takes the Java key, as for interceptors
