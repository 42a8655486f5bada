"""confluent-kafka's configuration dialect: every librdkafka producer key, decided one by one.

Why a table and not a guess: a configuration moved from confluent-kafka holds librdkafka's
names (``message.timeout.ms``, ``queue.buffering.max.kbytes``, ``compression.codec``...). Some
are Java's keys already (``linger.ms``, ``acks``, ``ssl.ca.location``); for the others a
"did you mean" from edit distance points the wrong way as often as not
(``message.timeout.ms`` is not ``request.timeout.ms``). So each key of librdkafka's producer
configuration (the ``P`` and ``*`` rows of its ``CONFIGURATION.md``; ``tests/unit/test_librdkafka_dialect.py``
checks this table against ``rd_kafka_conf_properties_show`` of the librdkafka confluent-kafka
bundles) and each Python-only key of confluent-kafka (``error_cb``, ``logger``...) is handled one
of four ways:

* ``same``: the Java key of that name, read as any Java key;
* ``translated``: becomes its Java key, its value converted (``queue.buffering.max.kbytes`` in
  KB -> ``buffer.memory`` in bytes, ``message.timeout.ms=0`` (no limit) -> the largest
  ``delivery.timeout.ms``); an error about it names both keys;
* ``warned``: accepted, with one WARNING when the producer is built naming what to use instead
  (nothing here works that way: ``stats_cb`` -> ``producer.metrics()``);
* ``refused``: ``ConfigError`` naming the key to use, where accepting the key would change
  what the program means (a verification switched off, a Kerberos login, a C callback).

A mapping that sets one setting in both dialects (``message.timeout.ms`` and
``delivery.timeout.ms``) is refused naming both: which of them should win is the user's call.

:func:`render_markdown_table` gives the reference table of docs/reference/librdkafka.md.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aioproducer.errors import ConfigError

__all__ = [
    "LIBRDKAFKA_KEYS",
    "LibrdkafkaKey",
    "Translation",
    "librdkafka_partitioner",
    "render_markdown_table",
    "translate",
]

INT_MAX = 2**31 - 1

Converter = Callable[[str, Any], Any]


@dataclass(frozen=True, slots=True)
class LibrdkafkaKey:
    """One librdkafka (or confluent-kafka) key: how it is handled, the Java key it maps to, why."""

    key: str
    handling: str  # "same", "translated", "warned", "refused"
    java: str | None
    note: str
    convert: Converter | None = None


@dataclass(slots=True)
class Translation:
    """What :func:`translate` made of a mapping: Java keys, where each came from, what to warn about."""

    config: dict[str, Any] = field(default_factory=dict)
    #: Java key -> the librdkafka key it was given as (for error messages).
    origins: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


# ------------------------------------------------------------------------------ converters


def _whole(key: str, value: Any, java: str) -> int:
    """An integer from an int, an integral float or a decimal string; anything else names both keys."""
    number: Any = value
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if isinstance(number, bool) or not isinstance(number, (int, float)) or not math.isfinite(number):
        raise ConfigError(f"{key} (Java's {java} here) must be a number, got {value!r}")
    if number != int(number):
        raise ConfigError(f"{key} (Java's {java} here) takes whole milliseconds or bytes here, got {value!r}")
    return int(number)


def _kbytes(key: str, value: Any) -> int:
    """``queue.buffering.max.kbytes`` is in KB; ``buffer.memory`` in bytes."""
    return _whole(key, value, "buffer.memory") * 1024


def _linger(key: str, value: Any) -> int:
    """librdkafka's linger is a float; Java's ``linger.ms`` a whole number of milliseconds."""
    return _whole(key, value, "linger.ms")


def _message_timeout(key: str, value: Any) -> Any:
    """0 is "no limit" in librdkafka: the largest ``delivery.timeout.ms`` Java takes."""
    return INT_MAX if _whole(key, value, "delivery.timeout.ms") == 0 else value


def _os_default_buffer(java: str) -> Converter:
    """librdkafka's 0 (the system's default socket buffer) is Java's -1."""
    return lambda key, value: -1 if _whole(key, value, java) == 0 else value


def _refresh_interval(key: str, value: Any) -> Any:
    if _whole(key, value, "metadata.max.age.ms") < 0:
        raise ConfigError(f"{key}=-1 (no periodic refresh) has no equivalent: give metadata.max.age.ms a large value")
    return value


def _ssl_verification(key: str, value: Any) -> None:
    """Only the default (on) is taken: switching verification off must be written out in an ``ssl_context``."""
    if value is True or (isinstance(value, str) and value.strip().lower() == "true"):
        return
    raise ConfigError(
        f"{key}={value!r} is not taken: to connect without verifying the broker's certificate, pass "
        "ssl_context= an ssl.SSLContext with check_hostname=False and verify_mode=ssl.CERT_NONE (and know why)"
    )


def _partitioner(key: str, value: Any) -> Any:
    if not isinstance(value, str):
        raise ConfigError(
            f"{key} takes one of librdkafka's partitioner names ({', '.join(_PARTITIONERS)}), got a "
            f"{type(value).__name__}; did you mean 'partitioner.class'? (a callable or an object with partition())"
        )
    name = value.strip()
    if name == "murmur2_random":
        return None  # Java's default: the built-in partitioner, fast path included
    if name not in _PARTITIONERS:
        raise ConfigError(
            f"{key}={value!r}: not one of librdkafka's partitioners ({', '.join(_PARTITIONERS)}); "
            "for your own, give partitioner.class a callable"
        )
    return librdkafka_partitioner(name)


# ------------------------------------------------------------------------------ partitioners


def _fnv1a(data: bytes) -> int:
    """32-bit FNV-1a, as librdkafka's ``fnv1a`` partitioner hashes a key."""
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def _murmur2(data: bytes) -> int:
    from aioproducer.partitioner import murmur2

    return murmur2(data) & 0x7FFFFFFF


def _crc32(data: bytes) -> int:
    return zlib.crc32(data)


#: librdkafka partitioner -> (hash of a key, whether a null or empty key goes to a random partition).
_PARTITIONERS: dict[str, tuple[Callable[[bytes], int] | None, bool]] = {
    "random": (None, True),
    "consistent": (_crc32, False),
    "consistent_random": (_crc32, True),
    "murmur2": (_murmur2, False),
    "murmur2_random": (_murmur2, True),
    "fnv1a": (_fnv1a, False),
    "fnv1a_random": (_fnv1a, True),
}


class _LibrdkafkaPartitioner:
    """librdkafka's named partitioners, so that keyed records keep the partitions they had.

    Why: librdkafka's default, ``consistent_random``, places a key by CRC32, not by Java's
    murmur2; a service moved from confluent-kafka that set it (or relied on it) would otherwise
    start writing each key to another partition than its earlier records.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._hash, self._random_for_null = _PARTITIONERS[name]
        self._random = random.Random()

    def partition(self, topic: str, key: Any, key_bytes: bytes | None, value: Any, value_bytes: bytes | None, cluster: Any) -> int:
        partitions = cluster.partitions_for(topic) or (0,)
        count = len(partitions)
        if self._hash is None or (not key_bytes and self._random_for_null):
            available = cluster.available_partitions_for(topic) or partitions
            return int(self._random.choice(available))
        code = self._hash(key_bytes or b"")
        if self._hash is _fnv1a:  # taken as a signed 32-bit number, its remainder's magnitude (Sarama's formula)
            return abs(code - (1 << 32) if code >= 1 << 31 else code) % count
        return code % count

    def __repr__(self) -> str:
        return f"<librdkafka partitioner {self.name}>"


def librdkafka_partitioner(name: str) -> _LibrdkafkaPartitioner:
    """The partitioner librdkafka calls ``name`` (``consistent_random``, ``fnv1a``...)."""
    return _LibrdkafkaPartitioner(name)


# ------------------------------------------------------------------------------ the table

_S, _T, _W, _R = "same", "translated", "warned", "refused"
_LOGGING = "aioproducer logs to the standard logging module: configure the 'aioproducer' logger"
_METRICS = "read producer.metrics() (Java's metric names), or export them with aioproducer.metrics.prometheus"
_C_API = "a callback of librdkafka's C API, which has no counterpart here"
_SSL_CONTEXT = "pass ssl_context= an ssl.SSLContext configured as you need"
_DEPRECATED = "deprecated and unused in librdkafka too"


def _k(key: str, handling: str, java: str | None, note: str, convert: Converter | None = None) -> LibrdkafkaKey:
    return LibrdkafkaKey(key, handling, java, note, convert)


#: Every librdkafka producer and common (``*``) key, and confluent-kafka's Python-only keys.
LIBRDKAFKA_KEYS: dict[str, LibrdkafkaKey] = {k.key: k for k in (
    _k("builtin.features", _W, None, "the features are fixed here (every codec, TLS, SASL PLAIN/SCRAM/OAUTHBEARER, GSSAPI with the kerberos extra): nothing to check"),
    _k("client.id", _S, "client.id", "empty: aioproducer-N"),
    _k("metadata.broker.list", _T, "bootstrap.servers", "host:port, a list or a comma-separated string"),
    _k("bootstrap.servers", _S, "bootstrap.servers", "host:port: a port is required"),
    _k("message.max.bytes", _T, "max.request.size", "the largest request, and so the largest record"),
    _k("message.copy.max.bytes", _W, None, "how records are copied is not configurable here"),
    _k("receive.message.max.bytes", _W, None, "a response is read whatever its size (the protocol bounds it)"),
    _k("max.in.flight.requests.per.connection", _S, "max.in.flight.requests.per.connection", "librdkafka's default is 1000000; at most 5 with idempotence (the default here)"),
    _k("max.in.flight", _T, "max.in.flight.requests.per.connection", "at most 5 with idempotence (the default here)"),
    _k("metadata.recovery.strategy", _S, "metadata.recovery.strategy", ""),
    _k("metadata.recovery.rebootstrap.trigger.ms", _S, "metadata.recovery.rebootstrap.trigger.ms", ""),
    _k("topic.metadata.refresh.interval.ms", _T, "metadata.max.age.ms", "-1 (never) is refused", _refresh_interval),
    _k("metadata.max.age.ms", _S, "metadata.max.age.ms", "Java's meaning: how old metadata may get before it is refreshed"),
    _k("topic.metadata.refresh.fast.interval.ms", _W, "retry.backoff.ms", "after a leader change metadata is refreshed at retry.backoff.ms, growing to retry.backoff.max.ms"),
    _k("topic.metadata.refresh.fast.cnt", _W, None, _DEPRECATED),
    _k("topic.metadata.refresh.sparse", _W, None, "metadata requests always name only the producer's topics"),
    _k("topic.metadata.propagation.max.ms", _W, "max.block.ms", "send() waits up to max.block.ms for a topic's metadata"),
    _k("topic.blacklist", _W, None, "a producer reads no topic it did not send to"),
    _k("debug", _W, None, _LOGGING + " (DEBUG level)"),
    _k("socket.timeout.ms", _W, "request.timeout.ms", "request.timeout.ms bounds every request"),
    _k("socket.blocking.max.ms", _W, None, _DEPRECATED),
    _k("socket.send.buffer.bytes", _T, "send.buffer.bytes", "0 (the system's default) becomes -1", _os_default_buffer("send.buffer.bytes")),
    _k("socket.receive.buffer.bytes", _T, "receive.buffer.bytes", "0 (the system's default) becomes -1", _os_default_buffer("receive.buffer.bytes")),
    _k("socket.keepalive.enable", _W, None, "TCP keep-alive is not configurable here"),
    _k("socket.nagle.disable", _W, None, "TCP_NODELAY is not configurable here"),
    _k("socket.max.fails", _W, "request.timeout.ms", "a failed request is retried until delivery.timeout.ms"),
    _k("broker.address.ttl", _W, "client.dns.lookup", "names are resolved again at each connection (client.dns.lookup=use_all_dns_ips)"),
    _k("broker.address.family", _W, "client.dns.lookup", "every address of a name is tried in turn (client.dns.lookup=use_all_dns_ips)"),
    _k("socket.connection.setup.timeout.ms", _S, "socket.connection.setup.timeout.ms", ""),
    _k("connections.max.idle.ms", _S, "connections.max.idle.ms", "accepted and ignored: idle connections stay open"),
    _k("reconnect.backoff.jitter.ms", _W, None, _DEPRECATED),
    _k("reconnect.backoff.ms", _S, "reconnect.backoff.ms", ""),
    _k("reconnect.backoff.max.ms", _S, "reconnect.backoff.max.ms", ""),
    _k("statistics.interval.ms", _W, None, _METRICS),
    _k("enabled_events", _W, None, _C_API),
    _k("error_cb", _W, None, "an error reaches the call or the record's future it is about, and is logged: " + _LOGGING),
    _k("throttle_cb", _W, None, "broker throttling shows in producer.metrics() (produce-throttle-time-avg, -max)"),
    _k("stats_cb", _W, None, _METRICS),
    _k("log_cb", _W, None, _LOGGING),
    _k("logger", _W, None, _LOGGING),
    _k("log_level", _W, None, _LOGGING + " (its level)"),
    _k("log.queue", _W, None, _LOGGING),
    _k("log.thread.name", _W, None, _LOGGING),
    _k("enable.random.seed", _W, None, "each producer seeds its own random source"),
    _k("log.connection.close", _W, None, _LOGGING),
    _k("background_event_cb", _R, None, _C_API),
    _k("socket_cb", _R, None, _C_API),
    _k("connect_cb", _R, None, _C_API),
    _k("closesocket_cb", _R, None, _C_API),
    _k("open_cb", _R, None, _C_API),
    _k("resolve_cb", _R, None, _C_API),
    _k("opaque", _R, None, _C_API + "; a delivery callback closes over what it needs (on_delivery=)"),
    _k("default_topic_conf", _R, None, "topic settings go in the same mapping as the others"),
    _k("internal.termination.signal", _R, None, _C_API),
    _k("api.version.request", _W, None, "API versions are always negotiated (ApiVersions)"),
    _k("api.version.request.timeout.ms", _W, "request.timeout.ms", "request.timeout.ms bounds the ApiVersions request too"),
    _k("api.version.fallback.ms", _W, None, _DEPRECATED),
    _k("broker.version.fallback", _W, None, "API versions are always negotiated (ApiVersions); brokers before 0.11 are not supported"),
    _k("allow.auto.create.topics", _W, None, "topics are auto-created when the broker's auto.create.topics.enable says so, as with Java"),
    _k("security.protocol", _S, "security.protocol", "any case"),
    _k("ssl.cipher.suites", _S, "ssl.cipher.suites", "OpenSSL cipher names"),
    _k("ssl.curves.list", _R, "ssl_context", _SSL_CONTEXT + " (ssl.SSLContext.set_ecdh_curve)"),
    _k("ssl.sigalgs.list", _R, "ssl_context", _SSL_CONTEXT),
    _k("ssl.key.location", _S, "ssl.key.location", ""),
    _k("ssl.key.password", _S, "ssl.key.password", ""),
    _k("ssl.key.pem", _T, "ssl.keystore.key", "the PEM private key itself"),
    _k("ssl_key", _R, "ssl.keystore.key", _C_API + ": give the PEM key as ssl.keystore.key or its file as ssl.key.location"),
    _k("ssl.certificate.location", _S, "ssl.certificate.location", ""),
    _k("ssl.certificate.pem", _T, "ssl.keystore.certificate.chain", "the PEM certificate (chain) itself"),
    _k("ssl_certificate", _R, "ssl.keystore.certificate.chain", _C_API + ": give the PEM chain as ssl.keystore.certificate.chain or its file as ssl.certificate.location"),
    _k("ssl.ca.location", _S, "ssl.ca.location", "a PEM file"),
    _k("https.ca.location", _R, "sasl.jaas.config", "the OIDC token endpoint's CA is read from sasl.jaas.config's ssl.truststore.location option, as in Java"),
    _k("https.ca.pem", _R, "sasl.jaas.config", "the OIDC token endpoint's CA is read from sasl.jaas.config's ssl.truststore.location option, as in Java"),
    _k("ssl.ca.pem", _T, "ssl.truststore.certificates", "the PEM CA certificates themselves"),
    _k("ssl_ca", _R, "ssl.truststore.certificates", _C_API + ": give the PEM certificates as ssl.truststore.certificates or their file as ssl.ca.location"),
    _k("ssl.ca.certificate.stores", _W, "ssl.ca.location", "the Windows certificate stores are not read: the system's CAs come from OpenSSL's default paths"),
    _k("ssl.crl.location", _R, "ssl_context", _SSL_CONTEXT + " (load_verify_locations of the CRL, verify_flags |= VERIFY_CRL_CHECK_LEAF)"),
    _k("ssl.keystore.location", _S, "ssl.keystore.location", "PKCS#12, PEM or JKS (guessed from the file)"),
    _k("ssl.keystore.password", _S, "ssl.keystore.password", ""),
    _k("ssl.providers", _R, "ssl_context", _SSL_CONTEXT + "; OpenSSL providers are not loaded here"),
    _k("ssl.engine.location", _R, "ssl_context", _SSL_CONTEXT + "; OpenSSL engines are not loaded here"),
    _k("ssl.engine.id", _R, "ssl_context", _SSL_CONTEXT + "; OpenSSL engines are not loaded here"),
    _k("ssl_engine_callback_data", _R, None, _C_API),
    _k("enable.ssl.certificate.verification", _T, "ssl_context", "true (the default) is taken; false is refused: pass ssl_context=", _ssl_verification),
    _k("ssl.endpoint.identification.algorithm", _S, "ssl.endpoint.identification.algorithm", "https, or none (Java: empty) for no host name check"),
    _k("ssl.certificate.verify_cb", _R, "ssl_context", _C_API + "; " + _SSL_CONTEXT),
    _k("sasl.mechanisms", _S, "sasl.mechanisms", "or sasl.mechanism"),
    _k("sasl.mechanism", _S, "sasl.mechanism", ""),
    _k("sasl.kerberos.service.name", _S, "sasl.kerberos.service.name", "required with GSSAPI, as in Java (librdkafka's default kafka is not assumed)"),
    _k("sasl.kerberos.principal", _S, "sasl.kerberos.principal", "required with sasl.kerberos.keytab (librdkafka's default kafkaclient is not assumed)"),
    _k("sasl.kerberos.kinit.cmd", _S, "sasl.kerberos.kinit.cmd", "Java's key too, accepted and ignored: no kinit runs, the ticket comes from sasl.kerberos.keytab through the GSSAPI library"),
    _k("sasl.kerberos.keytab", _S, "sasl.kerberos.keytab", "the ticket is fetched from it through the GSSAPI library, into a cache of the process's own"),
    _k("sasl.kerberos.min.time.before.relogin", _S, "sasl.kerberos.min.time.before.relogin", "Java's meaning: no new login sooner than this after the last one (0 does not turn renewal off)"),
    _k("sasl.username", _S, "sasl.username", ""),
    _k("sasl.password", _S, "sasl.password", ""),
    _k("sasl.oauthbearer.config", _W, "sasl_oauth_token_provider", "handed to oauth_cb when one is given; the unsecured JWT it configures is not supported"),
    _k("enable.sasl.oauthbearer.unsecure.jwt", _R, "sasl_oauth_token_provider", "unsecured JWTs are not made here: give sasl_oauth_token_provider= a function returning a token, or the sasl.oauthbearer.* OIDC keys"),
    _k("oauthbearer_token_refresh_cb", _R, "sasl_oauth_token_provider", _C_API + ": give sasl_oauth_token_provider= (or oauth_cb)"),
    _k("oauth_cb", _T, "sasl_oauth_token_provider", "oauth_cb(sasl.oauthbearer.config) -> (token, expiry in seconds) is called as the token provider"),
    _k("sasl.oauthbearer.method", _S, "sasl.oauthbearer.method", ""),
    _k("sasl.oauthbearer.client.id", _S, "sasl.oauthbearer.client.id", ""),
    _k("sasl.oauthbearer.client.credentials.client.id", _S, "sasl.oauthbearer.client.credentials.client.id", ""),
    _k("sasl.oauthbearer.client.credentials.client.secret", _S, "sasl.oauthbearer.client.credentials.client.secret", ""),
    _k("sasl.oauthbearer.client.secret", _S, "sasl.oauthbearer.client.secret", ""),
    _k("sasl.oauthbearer.scope", _S, "sasl.oauthbearer.scope", ""),
    _k("sasl.oauthbearer.extensions", _S, "sasl.oauthbearer.extensions", ""),
    _k("sasl.oauthbearer.token.endpoint.url", _S, "sasl.oauthbearer.token.endpoint.url", ""),
    _k("sasl.oauthbearer.sub.claim.name", _W, None, "it configures librdkafka's unsecured JWT, which is not made here"),
    _k("sasl.oauthbearer.grant.type", _S, "sasl.oauthbearer.grant.type", ""),
    _k("sasl.oauthbearer.assertion.algorithm", _S, "sasl.oauthbearer.assertion.algorithm", ""),
    _k("sasl.oauthbearer.assertion.private.key.file", _S, "sasl.oauthbearer.assertion.private.key.file", ""),
    _k("sasl.oauthbearer.assertion.private.key.passphrase", _S, "sasl.oauthbearer.assertion.private.key.passphrase", ""),
    _k("sasl.oauthbearer.assertion.private.key.pem", _R, "sasl.oauthbearer.assertion.private.key.file", "put the key in a file and give Java's sasl.oauthbearer.assertion.private.key.file"),
    _k("sasl.oauthbearer.assertion.file", _S, "sasl.oauthbearer.assertion.file", ""),
    _k("sasl.oauthbearer.assertion.claim.aud", _S, "sasl.oauthbearer.assertion.claim.aud", ""),
    _k("sasl.oauthbearer.assertion.claim.exp.seconds", _S, "sasl.oauthbearer.assertion.claim.exp.seconds", ""),
    _k("sasl.oauthbearer.assertion.claim.iss", _S, "sasl.oauthbearer.assertion.claim.iss", ""),
    _k("sasl.oauthbearer.assertion.claim.jti.include", _S, "sasl.oauthbearer.assertion.claim.jti.include", ""),
    _k("sasl.oauthbearer.assertion.claim.nbf.seconds", _S, "sasl.oauthbearer.assertion.claim.nbf.seconds", ""),
    _k("sasl.oauthbearer.assertion.claim.sub", _S, "sasl.oauthbearer.assertion.claim.sub", ""),
    _k("sasl.oauthbearer.assertion.jwt.template.file", _R, "sasl.oauthbearer.assertion.template.file", "give Java's sasl.oauthbearer.assertion.template.file (a JSON object of \"header\" and \"payload\")"),
    _k("sasl.oauthbearer.metadata.authentication.type", _R, "sasl.jaas.config", "for AWS MSK IAM give sasl.jaas.config with IAMLoginModule (aioproducer.security.msk_iam); for other clouds' tokens give sasl_oauth_token_provider="),
    _k("plugin.library.paths", _R, "interceptor.classes", "C plugins are not loaded here: Python interceptors go in interceptor.classes"),
    _k("interceptors", _T, "interceptor.classes", "objects with on_send(record) (Java's ProducerInterceptor)"),
    _k("client.rack", _W, None, "a producer does not use its rack (Java's producer has no client.rack)"),
    _k("transactional.id", _S, "transactional.id", ""),
    _k("transaction.timeout.ms", _S, "transaction.timeout.ms", ""),
    _k("enable.idempotence", _S, "enable.idempotence", "default true here (false in librdkafka)"),
    _k("enable.gapless.guarantee", _W, "enable.idempotence", "with idempotence (the default) no record is written twice and a failed record is reported on its future; there is no mode that fails the producer instead"),
    _k("queue.buffering.max.messages", _W, "buffer.memory", "the queue is bounded in bytes (buffer.memory), not in records"),
    _k("queue.buffering.max.kbytes", _T, "buffer.memory", "KB become bytes (x 1024)", _kbytes),
    _k("queue.buffering.max.ms", _T, "linger.ms", "whole milliseconds; librdkafka's default is 5, Java 3.9's 0", _linger),
    _k("linger.ms", _S, "linger.ms", "whole milliseconds; librdkafka's default is 5, Java 3.9's 0"),
    _k("message.send.max.retries", _T, "retries", ""),
    _k("retries", _S, "retries", ""),
    _k("retry.backoff.ms", _S, "retry.backoff.ms", ""),
    _k("retry.backoff.max.ms", _S, "retry.backoff.max.ms", ""),
    _k("queue.buffering.backpressure.threshold", _W, None, "batches are sent as soon as they are ready (linger.ms, batch.size)"),
    _k("compression.codec", _T, "compression.type", ""),
    _k("compression.type", _S, "compression.type", ""),
    _k("compression.level", _T, "compression.<codec>.level", "goes to compression.gzip.level, compression.lz4.level or compression.zstd.level by the codec; -1 keeps the codec's default"),
    _k("batch.num.messages", _W, "batch.size", "a batch is bounded in bytes (batch.size), not in records"),
    _k("batch.size", _S, "batch.size", "librdkafka's default is 1000000, Java's 16384"),
    _k("delivery.report.only.error", _W, None, "on_delivery is called for every record: return early when error is None"),
    _k("dr_cb", _R, "on_delivery", "give on_delivery= to send() (aioproducer.compat.confluent.AIOProducer takes it in the configuration)"),
    _k("dr_msg_cb", _R, "on_delivery", "give on_delivery= to send() (aioproducer.compat.confluent.AIOProducer takes it in the configuration)"),
    _k("on_delivery", _R, "on_delivery", "give on_delivery= to send() (aioproducer.compat.confluent.AIOProducer takes it in the configuration)"),
    _k("sticky.partitioning.linger.ms", _W, "batch.size", "keyless records stay on one partition until batch.size bytes went to it (KIP-794)"),
    _k("client.dns.lookup", _S, "client.dns.lookup", ""),
    _k("enable.metrics.push", _S, "enable.metrics.push", ""),
    _k("request.required.acks", _T, "acks", "-1, 0 or 1 (all)"),
    _k("acks", _S, "acks", "-1, 0, 1 or all"),
    _k("request.timeout.ms", _S, "request.timeout.ms", ""),
    _k("message.timeout.ms", _T, "delivery.timeout.ms", "0 (no limit) becomes 2147483647; must be >= linger.ms + request.timeout.ms", _message_timeout),
    _k("delivery.timeout.ms", _S, "delivery.timeout.ms", "must be >= linger.ms + request.timeout.ms"),
    _k("queuing.strategy", _W, None, _DEPRECATED),
    _k("produce.offset.report", _W, None, _DEPRECATED),
    _k("partitioner", _T, "partitioner.class", "murmur2_random is the default here; every other librdkafka partitioner is built in, so keys keep their partitions", _partitioner),
    _k("partitioner_cb", _R, "partitioner.class", _C_API + ": give partitioner.class a callable f(topic, key, key_bytes, value, value_bytes, cluster)"),
    _k("msg_order_cmp", _R, None, _C_API),
)}

_LEVELED_CODECS = ("gzip", "lz4", "zstd")


def _message(entry: LibrdkafkaKey) -> str:
    """What a warned or refused key's log line or error says: the key, what became of it, what to use."""
    verb = "has no effect here" if entry.handling == _W else "is not supported here"
    instead = f" (instead: {entry.java})" if entry.java and entry.java not in entry.note else ""
    return f"librdkafka's {entry.key} {verb}{instead}: {entry.note}"


def translate(config: Mapping[str, Any]) -> Translation:
    """``config`` with librdkafka's keys turned into Java's, or ConfigError naming the key to use.

    A key that is neither librdkafka's nor known to this table is passed on as it is, for
    ``ProducerConfig``'s "unknown key" error and its hints.
    """
    out = Translation()
    level: tuple[str, Any] | None = None
    for key, value in config.items():
        entry = LIBRDKAFKA_KEYS.get(key) if isinstance(key, str) else None
        if entry is None or entry.handling == _S:
            _put(out, key, key, value)  # Java's, or unknown: ProducerConfig says which
        elif entry.handling == _T:
            if key == "compression.level":
                level = (key, value)
            elif key == "oauth_cb":
                _put(out, "sasl_oauth_token_provider", key, _oauth_cb_provider(key, value, config.get("sasl.oauthbearer.config")))
            elif key == "enable.ssl.certificate.verification":
                _ssl_verification(key, value)  # on: the default, nothing to set
            else:
                assert entry.java is not None
                _put(out, entry.java, key, value if entry.convert is None else entry.convert(key, value))
        elif entry.handling == _W:
            out.warnings.append(_message(entry))
        else:
            raise ConfigError(_message(entry))
    if level is not None:
        _put_level(out, *level)
    return out



def _put(out: Translation, java: str, given: str, value: Any) -> None:
    """One Java key, refused if the mapping already set it under another name (both dialects at once)."""
    if java in out.config:
        first = out.origins.get(java, java)
        raise ConfigError(
            f"{first} and {given} both set {java}: they are the same setting in Java's and librdkafka's "
            f"dialects; give one of them"
        )
    out.config[java] = value
    if given != java:
        out.origins[java] = given


def _oauth_cb_provider(key: str, callback: Any, config_string: Any) -> Callable[[], tuple[str, int]]:
    """confluent-kafka's ``oauth_cb(config) -> (token, expiry seconds)`` as a token provider (expiry in ms)."""
    if not callable(callback):
        raise ConfigError(f"{key} must be a callable oauth_cb(sasl.oauthbearer.config) -> (token, expiry_seconds), got a {type(callback).__name__}")

    def provider() -> tuple[str, int]:
        answer = callback(config_string)
        token, expiry_s = answer[0], answer[1]
        return token, int(float(expiry_s) * 1000)

    return provider


def _put_level(out: Translation, key: str, value: Any) -> None:
    """``compression.level`` goes to the level key of the codec chosen (-1: the codec's default)."""
    if _whole(key, value, "compression.<codec>.level") == -1:
        return
    codec = out.config.get("compression.type", "none")
    name = str(codec).strip().lower() if isinstance(codec, str) else ""
    if name not in _LEVELED_CODECS:
        out.warnings.append(f"librdkafka's {key} has no effect with compression.type={codec!r}: the level is for gzip, lz4 or zstd")
        return
    _put(out, f"compression.{name}.level", key, value)


def render_markdown_table() -> str:
    """docs/reference/librdkafka.md's table, from :data:`LIBRDKAFKA_KEYS` so that it cannot drift."""
    lines = ["| librdkafka key | Handling | Java key or what to use | Note |", "|---|---|---|---|"]
    for entry in sorted(LIBRDKAFKA_KEYS.values(), key=lambda e: e.key):
        java = f"`{entry.java}`" if entry.java else ""
        note = entry.note.replace("|", "\\|")
        lines.append(f"| `{entry.key}` | {entry.handling} | {java} | {note} |")
    return "\n".join(lines) + "\n"
