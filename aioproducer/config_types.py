"""The configuration's types, for type checkers: keywords (``Producer(linger_ms=5)``) and the dotted mapping.

Why: ``Producer(**kwargs: Any)`` let ``Producer(lingr_ms=5, acks=7)`` and ``{"linger.msx": 5}`` pass
mypy and pyright; only the ``ConfigError`` at run time caught them. With these types a checker
flags an unknown keyword or key, and a value of the wrong type, where it is written.

* :class:`ProducerKeywords`: every keyword of ``Producer`` and ``ProducerConfig`` (``Unpack``, PEP 692);
* :data:`ProducerConfigDict`: the mapping of Java keys (``total=False``: give any of them).

Both list exactly the keys of :data:`aioproducer.config.CONFIG_DEFS` (and the keyword aliases
``interceptors`` / ``partitioner``); ``tests/unit/test_config_types.py`` checks that, and runs
mypy and pyright on a file of typos and a file of correct calls. A value's type is what the
parser takes: numbers may be strings too, as a properties file gives them.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Mapping, Sequence
from typing import Literal, TypedDict


class Password:
    """A secret configuration value (Java's ``Password``): shown as ``[hidden]`` wherever it is printed.

    ``repr()``, ``str()``, ``ProducerConfig`` printing, ``as_dict()`` and error messages
    see ``[hidden]``; the code that needs the secret reads ``.value``.
    """

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value: str = value

    def __repr__(self) -> str:
        return "[hidden]"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)


__all__ = ["AcksValue", "CompressionValue", "Password", "ProducerConfigDict", "ProducerKeywords", "Properties"]

#: ``acks``: all (-1), none (0) or the leader (1), as a string or an int.
AcksValue = Literal["all", "-1", "0", "1", -1, 0, 1]
#: ``compression.type``: a codec name (none, gzip, snappy, lz4, zstd, any case), or its id in the batch
#: attributes (0-4). A ``str``, not a ``Literal``: a name read from a command line or a file is a ``str``.
CompressionValue = str | int


#: A mapping of strings, as a properties file gives it: taken as it is (its keys are checked at run time).
Properties = Mapping[str, str]


class ProducerKeywords(TypedDict, total=False):
    """The keywords of ``Producer(...)`` and ``ProducerConfig(...)``: the Java keys with dots as underscores."""

    bootstrap_servers: str | Sequence[str] | Sequence[tuple[str, int]]
    client_id: str
    acks: AcksValue
    batch_size: int | str
    linger_ms: int | str
    buffer_memory: int | str
    max_block_ms: int | str
    max_request_size: int | str
    request_timeout_ms: int | str
    delivery_timeout_ms: int | str
    retries: int | str
    retry_backoff_ms: int | str
    retry_backoff_max_ms: int | str
    reconnect_backoff_ms: int | str
    reconnect_backoff_max_ms: int | str
    max_in_flight_requests_per_connection: int | str
    enable_idempotence: bool | str
    compression_type: CompressionValue
    compression_gzip_level: int | str
    compression_lz4_level: int | str
    compression_zstd_level: int | str
    metadata_max_age_ms: int | str
    metadata_max_idle_ms: int | str
    connections_max_idle_ms: int | str
    socket_connection_setup_timeout_ms: int | str
    socket_connection_setup_timeout_max_ms: int | str
    send_buffer_bytes: int | str
    receive_buffer_bytes: int | str
    partitioner_class: object
    partitioner_ignore_keys: bool | str
    partitioner_adaptive_partitioning_enable: bool | str
    partitioner_availability_timeout_ms: int | str
    key_serializer: object
    value_serializer: object
    interceptor_classes: str | Sequence[object]
    security_protocol: str
    ssl_truststore_location: str | None
    ssl_truststore_type: str | None
    ssl_truststore_password: str | Password | None
    ssl_truststore_certificates: str | None
    ssl_keystore_location: str | None
    ssl_keystore_type: str | None
    ssl_keystore_password: str | Password | None
    ssl_key_password: str | Password | None
    ssl_keystore_certificate_chain: str | None
    ssl_keystore_key: str | Password | None
    ssl_endpoint_identification_algorithm: str
    ssl_enabled_protocols: str | Sequence[str]
    ssl_cipher_suites: str | Sequence[str]
    ssl_protocol: str
    ssl_ca_location: str | None
    ssl_certificate_location: str | None
    ssl_key_location: str | None
    ssl_context: ssl.SSLContext | None
    sasl_mechanism: str
    sasl_jaas_config: str | Password | None
    sasl_mechanisms: str | None
    sasl_username: str | None
    sasl_password: str | Password | None
    sasl_kerberos_service_name: str | None
    sasl_kerberos_keytab: str | None
    sasl_kerberos_principal: str | None
    sasl_kerberos_ticket_renew_window_factor: float | str
    sasl_kerberos_ticket_renew_jitter: float | str
    sasl_kerberos_min_time_before_relogin: int | str
    sasl_kerberos_kinit_cmd: str
    sasl_oauth_token_provider: Callable[[], object] | None
    sasl_oauthbearer_token_endpoint_url: str | None
    sasl_oauthbearer_client_credentials_client_id: str | None
    sasl_oauthbearer_client_credentials_client_secret: str | Password | None
    sasl_oauthbearer_scope: str | None
    sasl_oauthbearer_jwt_retriever_class: str
    sasl_oauthbearer_assertion_file: str | None
    sasl_oauthbearer_assertion_private_key_file: str | None
    sasl_oauthbearer_assertion_private_key_passphrase: str | Password | None
    sasl_oauthbearer_assertion_algorithm: str
    sasl_oauthbearer_assertion_claim_aud: str | None
    sasl_oauthbearer_assertion_claim_iss: str | None
    sasl_oauthbearer_assertion_claim_sub: str | None
    sasl_oauthbearer_assertion_claim_exp_seconds: int | str
    sasl_oauthbearer_assertion_claim_nbf_seconds: int | str
    sasl_oauthbearer_assertion_claim_jti_include: bool | str
    sasl_oauthbearer_assertion_template_file: str | None
    sasl_oauthbearer_grant_type: str | None
    sasl_oauthbearer_extensions: str | Mapping[str, str] | None
    sasl_oauthbearer_header_urlencode: bool | str
    sasl_oauthbearer_method: str
    sasl_oauthbearer_client_id: str | None
    sasl_oauthbearer_client_secret: str | Password | None
    sasl_login_callback_handler_class: str | None
    sasl_login_refresh_window_factor: float | str
    sasl_login_refresh_window_jitter: float | str
    sasl_login_refresh_min_period_seconds: int | str
    sasl_login_refresh_buffer_seconds: int | str
    sasl_login_retry_backoff_ms: int | str
    sasl_login_retry_backoff_max_ms: int | str
    sasl_login_connect_timeout_ms: int | str | None
    sasl_login_read_timeout_ms: int | str | None
    transactional_id: str | None
    transaction_timeout_ms: int | str
    client_dns_lookup: str
    metadata_recovery_strategy: str
    metadata_recovery_rebootstrap_trigger_ms: int | str
    metric_reporters: str | Sequence[str]
    metrics_num_samples: int | str
    metrics_recording_level: str
    metrics_sample_window_ms: int | str
    enable_metrics_push: bool | str
    interceptors: str | Sequence[object]
    partitioner: object


ProducerConfigDict = TypedDict(
    "ProducerConfigDict",
    {
        'bootstrap.servers': "str | Sequence[str] | Sequence[tuple[str, int]]",
        'client.id': "str",
        'acks': AcksValue,
        'batch.size': "int | str",
        'linger.ms': "int | str",
        'buffer.memory': "int | str",
        'max.block.ms': "int | str",
        'max.request.size': "int | str",
        'request.timeout.ms': "int | str",
        'delivery.timeout.ms': "int | str",
        'retries': "int | str",
        'retry.backoff.ms': "int | str",
        'retry.backoff.max.ms': "int | str",
        'reconnect.backoff.ms': "int | str",
        'reconnect.backoff.max.ms': "int | str",
        'max.in.flight.requests.per.connection': "int | str",
        'enable.idempotence': "bool | str",
        'compression.type': CompressionValue,
        'compression.gzip.level': "int | str",
        'compression.lz4.level': "int | str",
        'compression.zstd.level': "int | str",
        'metadata.max.age.ms': "int | str",
        'metadata.max.idle.ms': "int | str",
        'connections.max.idle.ms': "int | str",
        'socket.connection.setup.timeout.ms': "int | str",
        'socket.connection.setup.timeout.max.ms': "int | str",
        'send.buffer.bytes': "int | str",
        'receive.buffer.bytes': "int | str",
        'partitioner.class': object,
        'partitioner.ignore.keys': "bool | str",
        'partitioner.adaptive.partitioning.enable': "bool | str",
        'partitioner.availability.timeout.ms': "int | str",
        'key.serializer': object,
        'value.serializer': object,
        'interceptor.classes': "str | Sequence[object]",
        'security.protocol': "str",
        'ssl.truststore.location': "str | None",
        'ssl.truststore.type': "str | None",
        'ssl.truststore.password': "str | Password | None",
        'ssl.truststore.certificates': "str | None",
        'ssl.keystore.location': "str | None",
        'ssl.keystore.type': "str | None",
        'ssl.keystore.password': "str | Password | None",
        'ssl.key.password': "str | Password | None",
        'ssl.keystore.certificate.chain': "str | None",
        'ssl.keystore.key': "str | Password | None",
        'ssl.endpoint.identification.algorithm': "str",
        'ssl.enabled.protocols': "str | Sequence[str]",
        'ssl.cipher.suites': "str | Sequence[str]",
        'ssl.protocol': "str",
        'ssl.ca.location': "str | None",
        'ssl.certificate.location': "str | None",
        'ssl.key.location': "str | None",
        'ssl_context': "ssl.SSLContext | None",
        'sasl.mechanism': "str",
        'sasl.jaas.config': "str | Password | None",
        'sasl.mechanisms': "str | None",
        'sasl.username': "str | None",
        'sasl.password': "str | Password | None",
        'sasl.kerberos.service.name': "str | None",
        'sasl.kerberos.keytab': "str | None",
        'sasl.kerberos.principal': "str | None",
        'sasl.kerberos.ticket.renew.window.factor': "float | str",
        'sasl.kerberos.ticket.renew.jitter': "float | str",
        'sasl.kerberos.min.time.before.relogin': "int | str",
        'sasl.kerberos.kinit.cmd': "str",
        'sasl_oauth_token_provider': "Callable[[], object] | None",
        'sasl.oauthbearer.token.endpoint.url': "str | None",
        'sasl.oauthbearer.client.credentials.client.id': "str | None",
        'sasl.oauthbearer.client.credentials.client.secret': "str | Password | None",
        'sasl.oauthbearer.scope': "str | None",
        'sasl.oauthbearer.jwt.retriever.class': "str",
        'sasl.oauthbearer.assertion.file': "str | None",
        'sasl.oauthbearer.assertion.private.key.file': "str | None",
        'sasl.oauthbearer.assertion.private.key.passphrase': "str | Password | None",
        'sasl.oauthbearer.assertion.algorithm': "str",
        'sasl.oauthbearer.assertion.claim.aud': "str | None",
        'sasl.oauthbearer.assertion.claim.iss': "str | None",
        'sasl.oauthbearer.assertion.claim.sub': "str | None",
        'sasl.oauthbearer.assertion.claim.exp.seconds': "int | str",
        'sasl.oauthbearer.assertion.claim.nbf.seconds': "int | str",
        'sasl.oauthbearer.assertion.claim.jti.include': "bool | str",
        'sasl.oauthbearer.assertion.template.file': "str | None",
        'sasl.oauthbearer.grant.type': "str | None",
        'sasl.oauthbearer.extensions': "str | Mapping[str, str] | None",
        'sasl.oauthbearer.header.urlencode': "bool | str",
        'sasl.oauthbearer.method': "str",
        'sasl.oauthbearer.client.id': "str | None",
        'sasl.oauthbearer.client.secret': "str | Password | None",
        'sasl.login.callback.handler.class': "str | None",
        'sasl.login.refresh.window.factor': "float | str",
        'sasl.login.refresh.window.jitter': "float | str",
        'sasl.login.refresh.min.period.seconds': "int | str",
        'sasl.login.refresh.buffer.seconds': "int | str",
        'sasl.login.retry.backoff.ms': "int | str",
        'sasl.login.retry.backoff.max.ms': "int | str",
        'sasl.login.connect.timeout.ms': "int | str | None",
        'sasl.login.read.timeout.ms': "int | str | None",
        'transactional.id': "str | None",
        'transaction.timeout.ms': "int | str",
        'client.dns.lookup': "str",
        'metadata.recovery.strategy': "str",
        'metadata.recovery.rebootstrap.trigger.ms': "int | str",
        'metric.reporters': "str | Sequence[str]",
        'metrics.num.samples': "int | str",
        'metrics.recording.level': "str",
        'metrics.sample.window.ms': "int | str",
        'enable.metrics.push': "bool | str",
    },
    total=False,
)
"""The mapping of Java keys, ``Producer({"bootstrap.servers": "host:9092", "linger.ms": 5})``: any of them (``total=False``).

A ``dict`` annotated with it, or written in the call, is checked key by key; a mapping of strings
(``Properties``, a properties file read as text) is taken as it is and checked at run time.
"""
