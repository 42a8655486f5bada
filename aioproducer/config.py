"""Producer configuration: the Java producer's keys and defaults, parsed and validated once.

Why Java's keys: users port settings from Java ``producer.properties`` files, Kafka docs and
Confluent guides. So :class:`ProducerConfig` takes the dotted keys (``{"linger.ms": "5"}``), with
string values as in a properties file, *and* Python keywords (``linger_ms=5``, dots become
underscores), and exposes typed attributes with the Python names (``cfg.linger_ms == 5``).

Defaults are those of the **Java client 4.x** (``ProducerConfig.java``), ``linger.ms`` 5 (KIP-1030)
and ``metadata.recovery.strategy`` ``rebootstrap`` (KIP-1102) included; ``linger.ms`` was chosen by a
measurement (``benchmarks/linger_default.py``, docs/reference/configuration.md). The defaults that
differ from Java 4.x, each for a reason, are listed on that page.

Everything is checked at construction, with messages that name the key: unknown keys (with the
closest known key suggested), values of the wrong type or out of range, and the cross-key rules of
the Java client:

* ``delivery.timeout.ms >= linger.ms + request.timeout.ms``: an error if ``delivery.timeout.ms`` was
  set explicitly, otherwise it is raised to that sum (``KafkaProducer.configureDeliveryTimeout``);
* idempotence (on by default, KIP-679) needs ``acks=all``, ``retries > 0`` and
  ``max.in.flight.requests.per.connection <= 5``: if ``enable.idempotence=true`` was set
  explicitly a conflict is an error; if it was left to its default, a conflicting setting silently
  disables idempotence (3.9 behaviour; 4.0 turned the max-in-flight case into an error);
* ``reconnect.backoff.ms`` set without ``reconnect.backoff.max.ms`` disables the exponential
  reconnect backoff (max := base), as ``CommonClientConfigs.postProcessReconnectBackoffConfigs``;
* an empty ``client.id`` becomes ``aioproducer-N`` (Java: ``producer-N``).

Key status (the full table, with defaults and types, is :func:`render_markdown_table`):

========================================  ======================================================
supported                                 every key in :data:`CONFIG_DEFS` not listed below
accepted and ignored (harmless)           ``metric.reporters``, ``metrics.recording.level``
accepted and ignored (no effect here)     ``ssl.protocol`` (``ssl.enabled.protocols`` decides),
                                          ``sasl.kerberos.kinit.cmd`` (no ``kinit`` runs)
accepted and ignored (not built yet)      ``connections.max.idle.ms``,
                                          ``socket.connection.setup.timeout.max.ms``
========================================  ======================================================
"""

from __future__ import annotations

import difflib
import inspect
import itertools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Unpack

from aioproducer.errors import ConfigError
from aioproducer.logs import client_logger
from aioproducer.partitioner import PartitionerFn, resolve_partitioner
from aioproducer.serializers import SerializeFn, import_dotted, resolve_serializer

# Password lives with the configuration's types (config_types.py, which imports nothing from here).
from aioproducer.config_types import Password

if TYPE_CHECKING:
    from aioproducer.config_types import ProducerConfigDict, ProducerKeywords, Properties

__all__ = [
    "COMPRESSION_CODECS",
    "CONFIG_DEFS",
    "ConfigDef",
    "PYTHON_ONLY_KEYS",
    "Password",
    "ProducerConfig",
    "render_markdown_table",
]


INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

#: ``compression.type`` names -> the codec id in the RecordBatch ``attributes`` bits 0-2.
COMPRESSION_CODECS: dict[str, int] = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

#: Most in-flight requests per connection with which the broker can still de-duplicate
#: (it keeps the last 5 batches per producer, ``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``).
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5

_client_id_sequence = itertools.count(1)

Parser = Callable[[str, Any], Any]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One configuration key: its Java name, type (as Java's ``ConfigDef.Type``), default, doc.

    ``default`` is written the way a user would write it (``"all"``, ``"none"``) and goes through
    ``parse`` like any user value. ``status`` is ``"supported"`` or ``"ignored"`` (accepted and
    validated, no effect).
    """

    key: str
    type: str
    default: Any
    doc: str
    parse: Parser
    status: str = "supported"

    @property
    def attr(self) -> str:
        """The Python name: attribute of :class:`ProducerConfig` and keyword argument."""
        return self.key.replace(".", "_")


# ----------------------------------------------------------------------------------- parsers


def _show(value: Any) -> str:
    return repr(value)


def _to_int(key: str, value: Any, expectation: str) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{key} must be {expectation}, got {_show(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"[+-]?\d+", text):
            return int(text)
    raise ConfigError(f"{key} must be {expectation}, got {_show(value)}")


def _int(low: int | None = None, high: int = INT_MAX, *, long: bool = False) -> Parser:
    """An ``int``/``long`` with Java's bounds, from an int or a decimal string."""
    high = LONG_MAX if long and high == INT_MAX else high
    type_low = -(2**63) if long else -(2**31)
    if low is None:
        expectation = "an integer"
    elif high in (INT_MAX, LONG_MAX):
        expectation = f"an integer >= {low}"
    else:
        expectation = f"an integer in [{low}, {high}]"

    def parse(key: str, value: Any) -> int:
        number = _to_int(key, value, expectation)
        if not (low if low is not None else type_low) <= number <= high:
            raise ConfigError(f"{key} must be {expectation}, got {_show(value)}")
        return number

    return parse


def _bool(key: str, value: Any) -> bool:
    """Java accepts ``true``/``false`` in any case, and booleans; so do we (no 0/1, no yes/no)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{key} must be a boolean (true or false), got {_show(value)}")


def _choice(options: Iterable[str]) -> Parser:
    """One of ``options``, case-insensitively; stored in the options' case."""
    canonical = {o.lower(): o for o in options}

    def parse(key: str, value: Any) -> str:
        if isinstance(value, str) and value.strip().lower() in canonical:
            return canonical[value.strip().lower()]
        raise ConfigError(f"{key} must be one of {', '.join(canonical.values())}, got {_show(value)}")

    return parse


def _string(key: str, value: Any) -> str:
    if isinstance(value, str):
        return value
    raise ConfigError(f"{key} must be a string, got {_show(value)}")


def _client_id(key: str, value: Any) -> str:
    """Sent in every request header as a Kafka STRING: UTF-8, at most 32,767 bytes."""
    text = _string(key, value)
    try:
        encoded = text.encode()
    except UnicodeEncodeError as exc:
        raise ConfigError(f"{key} cannot be encoded as UTF-8 ({exc.reason}): {_show(value)}") from None
    if len(encoded) > 32767:
        raise ConfigError(f"{key} is {len(encoded)} bytes in UTF-8; Kafka's request header allows 32,767")
    return text


def _list_items(key: str, value: Any) -> list[Any]:
    """Java's ``Type.LIST``: a list, or a comma-separated string (blanks dropped)."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise ConfigError(f"{key} must be a list or a comma-separated string, got {_show(value)}")


def _string_list(key: str, value: Any) -> list[str]:
    items = _list_items(key, value)
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"{key} must be a list of strings, got item {_show(item)}")
    return items


def _acks(key: str, value: Any) -> int:
    """``all`` is ``-1`` on the wire; also accepts -1/0/1 as ints or strings."""
    if isinstance(value, str) and value.strip().lower() == "all":
        return -1
    if not isinstance(value, bool) and isinstance(value, (int, str)):
        text = str(value).strip()
        if text in ("-1", "0", "1"):
            return int(text)
    raise ConfigError(f"{key} must be one of all, -1, 0, 1, got {_show(value)}")


def _compression_type(key: str, value: Any) -> int:
    """Codec name (any case) or codec id 0..4 -> codec id."""
    if isinstance(value, str) and value.strip().lower() in COMPRESSION_CODECS:
        return COMPRESSION_CODECS[value.strip().lower()]
    if not isinstance(value, bool) and isinstance(value, int) and value in COMPRESSION_CODECS.values():
        return value
    raise ConfigError(f"{key} must be one of {', '.join(COMPRESSION_CODECS)}, got {_show(value)}")


def _gzip_level(key: str, value: Any) -> int:
    """Java: ``Deflater.DEFAULT_COMPRESSION`` (-1) or 1..9."""
    level = _to_int(key, value, "-1 or an integer in [1, 9]")
    if level != -1 and not 1 <= level <= 9:
        raise ConfigError(f"{key} must be -1 or an integer in [1, 9], got {_show(value)}")
    return level


_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[^\[\]\s]+)\]|(?P<host>[^\[\]:\s]+)):(?P<port>\d+)$")


def _bootstrap_servers(key: str, value: Any) -> list[tuple[str, int]]:
    """``host:port`` entries (or ``(host, port)`` tuples), list or comma string; IPv6 in brackets (``[::1]:9092``)."""
    servers: list[tuple[str, int]] = []
    for item in _list_items(key, value):
        if isinstance(item, tuple) and len(item) == 2:  # (host, port), as as_dict() gives them back
            host, port_value = item
            item = f"[{host}]:{port_value}" if isinstance(host, str) and ":" in host else f"{host}:{port_value}"
        if not isinstance(item, str):
            raise ConfigError(f"{key} entries must be 'host:port' strings, got {_show(item)}")
        match = _HOST_PORT.match(item.strip())
        if match is None:
            hint = " (IPv6 addresses go in brackets: [::1]:9092)" if item.count(":") > 1 else ""
            if "@" in item:  # a URL's user:password@ part: never echoed
                hint = " (no user or password in an address: they go in sasl.* keys)"
            raise ConfigError(f"{key}: invalid address {_without_userinfo(item)!r}, expected host:port{hint}")
        port = int(match["port"])
        if not 0 < port <= 65535:
            raise ConfigError(f"{key}: invalid port in {item!r}, must be in [1, 65535]")
        servers.append((match["v6"] or match["host"], port))
    return servers


def _without_userinfo(address: str) -> str:
    """``address`` with what precedes its last ``@`` (a URL's ``user:password``) masked."""
    return "***@" + address.rsplit("@", 1)[1] if "@" in address else address


_security_protocol = _choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"])


def _password(key: str, value: Any) -> Password | None:
    if value is None or isinstance(value, Password):
        return value
    if isinstance(value, str):
        return Password(value)
    raise ConfigError(f"{key} must be a string (a secret), got a {type(value).__name__}")


def _optional_string(key: str, value: Any) -> str | None:
    return None if value is None else _string(key, value)


def _store_type(key: str, value: Any) -> str | None:
    """PEM, PKCS12 or JKS (refused when a store is loaded, with how to convert it); None: guessed from the file."""
    return None if value is None else _choice(["PEM", "PKCS12", "JKS"])(key, value)


def _ssl_context(key: str, value: Any) -> Any:
    import ssl

    if value is None or isinstance(value, ssl.SSLContext):
        return value
    raise ConfigError(f"{key} must be an ssl.SSLContext, got a {type(value).__name__}")


def _token_provider(key: str, value: Any) -> Any:
    if value is None or callable(value):
        return value
    # The type only: the usual mistake is passing the token itself.
    raise ConfigError(
        f"{key} must be a callable (or async callable) returning (token, expiry_ms) or a token string, "
        f"got a {type(value).__name__}"
    )


def _double(low: float, high: float) -> Parser:
    """A Java ``double`` in [low, high], from a number or a decimal string."""

    def parse(key: str, value: Any) -> float:
        number: float | None = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = None
        if number is None or not low <= number <= high:
            raise ConfigError(f"{key} must be a number in [{low}, {high}], got {_show(value)}")
        return number

    return parse


def _login_callback_handler(key: str, value: Any) -> str | None:
    """Java's OIDC login handler, named as Java users paste it; no other class can run here."""
    if value is None:
        return None
    name = _string(key, value).strip()
    if name.rsplit(".", 1)[-1] != "OAuthBearerLoginCallbackHandler":
        raise ConfigError(
            f"{key}: only org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler "
            f"(OIDC sign-in, built in) is supported, got {_show(name)}; for your own tokens pass sasl_oauth_token_provider="
        )
    return name


#: Java 4.1's JWT retrievers (KIP-1139) by simple name -> the grant aioproducer uses for it.
JWT_RETRIEVERS: dict[str, str] = {
    "DefaultJwtRetriever": "client_credentials",
    "ClientCredentialsJwtRetriever": "client_credentials",
    "JwtBearerJwtRetriever": "urn:ietf:params:oauth:grant-type:jwt-bearer",
}


def _jwt_retriever(key: str, value: Any) -> str:
    """One of Java's retrievers, by its class name (any package, so shaded copies match)."""
    name = _string(key, value).strip()
    if name.rsplit(".", 1)[-1] not in JWT_RETRIEVERS:
        raise ConfigError(
            f"{key} must be one of Java's {', '.join(JWT_RETRIEVERS)} (org.apache.kafka.common.security.oauthbearer.*), "
            f"got {_show(name)}"
        )
    return name


def _optional_choice(options: Iterable[str]) -> Parser:
    choice = _choice(options)
    return lambda key, value: None if value is None else choice(key, value)


def _optional_int(low: int) -> Parser:
    number = _int(low)
    return lambda key, value: None if value is None else number(key, value)


def _extensions(key: str, value: Any) -> dict[str, str] | None:
    """librdkafka's ``key=value,key2=value2``; a mapping is taken too. Each name once."""
    if value is None or isinstance(value, Mapping):
        pairs = list((value or {}).items())
    else:
        pairs = []
        for item in _string(key, value).split(","):
            name, equals, text = item.partition("=")
            if not equals or not name.strip():
                raise ConfigError(f"{key} must be key=value pairs separated by commas, got an item without a key and '='")
            pairs.append((name.strip(), text))
    result: dict[str, str] = {}
    for name, text in pairs:
        if not isinstance(name, str) or not isinstance(text, str):
            raise ConfigError(f"{key}: extension names and values must be strings")
        if name in result:
            raise ConfigError(f"{key}: extension {name!r} given twice")
        result[name] = text
    return result or None


def _transactional_id(key: str, value: Any) -> str | None:
    """None (no transactions) or a non-empty string: the id that fences earlier incarnations."""
    if value is None:
        return None
    text = _client_id(key, value)
    if not text:
        raise ConfigError(f"{key} must not be empty (None: no transactions)")
    return text


def _serializer(key: str, value: Any) -> SerializeFn | None:
    return None if value is None else resolve_serializer(value, key)


def _partitioner(key: str, value: Any) -> PartitionerFn | None:
    return None if value is None else resolve_partitioner(value)


def _interceptors(key: str, value: Any) -> list[Any]:
    """Objects, classes (instantiated without arguments) or dotted paths to either."""
    result: list[Any] = []
    for item in _list_items(key, value):
        if isinstance(item, str):
            item = import_dotted(item, key)
        if isinstance(item, type):
            try:
                item = item()
            except Exception as exc:  # noqa: BLE001 - any constructor failure is a configuration error
                raise ConfigError(f"{key}: {item.__qualname__}() failed: {exc!r}") from exc
        on_send = getattr(item, "on_send", None)
        if not callable(on_send):
            raise ConfigError(
                f"{key}: {_show(item)} is not an interceptor: it needs an on_send(record) method "
                "(and may have on_acknowledgement(metadata, error), on_send_error(error), close())"
            )
        if inspect.iscoroutinefunction(on_send):
            raise ConfigError(
                f"{key}: {type(item).__qualname__}.on_send is async; interceptors run inside send() and must be "
                "plain functions (as in Java, where they run on the caller's thread)"
            )
        result.append(item)
    return result


# -------------------------------------------------------------------------------- the table

_IGN = "ignored"

#: Every key aioproducer accepts, in the order of the docs table. Defaults: Java client 3.9.
CONFIG_DEFS: tuple[ConfigDef, ...] = (
    ConfigDef("bootstrap.servers", "list", [], "Brokers to fetch the initial metadata from, `host:port` (IPv6: `[::1]:9092`), a list or a comma-separated string. Required to start a producer.", _bootstrap_servers),
    ConfigDef("client.id", "string", "", "Name sent with every request, for broker logs and quotas. Empty: `aioproducer-N`.", _client_id),
    ConfigDef("acks", "string", "all", "Acknowledgements the leader waits for: `0` (none, no retries possible), `1` (leader only), `all`/`-1` (all in-sync replicas). Stored as an int, `all` = -1.", _acks),
    ConfigDef("batch.size", "int", 16384, "Target size in bytes of a per-partition batch; also how many bytes go to the sticky partition before it changes. 0 disables batching (one record per batch). Capped just below max.request.size and buffer.memory, so that a batch always fits a request. Records of several KB go faster with a larger value (see Speed).", _int(0)),
    ConfigDef("linger.ms", "long", 5, "How long a batch that is not full may wait for more records. A batch whose record someone awaits (`await`, `gather()`) goes before that when its leader has no request in flight. Kafka 4.x's default (KIP-1030; 3.9: 0).", _int(0, long=True)),
    ConfigDef("buffer.memory", "long", 33554432, "Total bytes the producer may hold for records not yet acknowledged (their encoded bytes plus their futures and delivery callbacks); `send()` waits up to `max.block.ms` for room.", _int(1, long=True)),
    ConfigDef("max.block.ms", "long", 60000, "How long `send()` may wait for metadata and buffer memory before failing, and `start()` for the first metadata.", _int(0, long=True)),
    ConfigDef("max.request.size", "int", 1048576, "Largest request, and so largest record (batch) in bytes.", _int(0)),
    ConfigDef("request.timeout.ms", "int", 30000, "How long to wait for a broker's response before retrying the request or failing it.", _int(0)),
    ConfigDef("delivery.timeout.ms", "int", 120000, "Upper bound on reporting success or failure after `send()` returns, retries included. Must be >= `linger.ms` + `request.timeout.ms`.", _int(0)),
    ConfigDef("retries", "int", INT_MAX, "Retries of a failed batch (bounded by `delivery.timeout.ms` anyway). 0 disables retries (and implicit idempotence).", _int(0)),
    ConfigDef("retry.backoff.ms", "long", 100, "Initial wait before retrying a failed request; doubles per retry up to `retry.backoff.max.ms`, each wait jittered by ±20 % (KIP-580). Above `retry.backoff.max.ms`, the max applies as a static backoff without jitter.", _int(0, long=True)),
    ConfigDef("retry.backoff.max.ms", "long", 1000, "Maximum retry backoff: the jitter never takes a wait above it.", _int(0, long=True)),
    ConfigDef("reconnect.backoff.ms", "long", 50, "Initial wait before reconnecting to a broker; grows exponentially up to `reconnect.backoff.max.ms`.", _int(0, long=True)),
    ConfigDef("reconnect.backoff.max.ms", "long", 1000, "Maximum reconnect backoff. If only `reconnect.backoff.ms` is set, it is used as a constant backoff.", _int(0, long=True)),
    ConfigDef("max.in.flight.requests.per.connection", "int", 5, "Unacknowledged requests per broker connection. At most 5 with idempotence.", _int(1)),
    ConfigDef("enable.idempotence", "boolean", True, "Producer id + sequence numbers so retries cannot duplicate or reorder. Needs `acks=all`, `retries > 0`, `max.in.flight.requests.per.connection <= 5`; if not set explicitly, a conflicting setting turns it off.", _bool),
    ConfigDef("compression.type", "string", "none", "Batch compression: none, gzip, snappy, lz4, zstd. Stored as the codec id 0..4.", _compression_type),
    ConfigDef("compression.gzip.level", "int", -1, "gzip level: -1 (zlib default) or 1..9.", _gzip_level),
    ConfigDef("compression.lz4.level", "int", 9, "lz4 level, 1..17.", _int(1, 17)),
    ConfigDef("compression.zstd.level", "int", 3, "zstd level, -131072..22.", _int(-131072, 22)),
    ConfigDef("metadata.max.age.ms", "long", 300000, "Metadata older than this is refreshed by the sender even without an error; it is also refreshed for new topics, after a lost connection or a timed-out request, and on leader-moved errors (or taken from the Produce answer, KIP-951).", _int(0, long=True)),
    ConfigDef("metadata.max.idle.ms", "long", 300000, "A topic not sent to for this long is dropped from metadata requests (sending to it again fetches it again).", _int(5000, long=True)),
    ConfigDef("connections.max.idle.ms", "long", 540000, "Accepted and ignored yet: idle connections stay open.", _int(long=True), "ignored"),
    ConfigDef("socket.connection.setup.timeout.ms", "long", 10000, "Timeout for establishing a connection (it does not grow per failure yet).", _int(0, long=True)),
    ConfigDef("socket.connection.setup.timeout.max.ms", "long", 30000, "Accepted and ignored yet: the setup timeout does not grow.", _int(0, long=True), "ignored"),
    ConfigDef("send.buffer.bytes", "int", 131072, "SO_SNDBUF of broker sockets, set once connected; -1: OS default.", _int(-1)),
    ConfigDef("receive.buffer.bytes", "int", 32768, "SO_RCVBUF of broker sockets, set once connected; -1: OS default.", _int(-1)),
    ConfigDef("partitioner.class", "class", None, "Custom partitioner: callable or object with `partition(topic, key, key_bytes, value, value_bytes, cluster)`, or its dotted import path. None: built-in (murmur2 for keys, sticky otherwise).", _partitioner),
    ConfigDef("partitioner.ignore.keys", "boolean", False, "Built-in partitioner: ignore keys, use the sticky partition for every record.", _bool),
    ConfigDef("partitioner.adaptive.partitioning.enable", "boolean", True, "Built-in partitioner: send more to partitions whose brokers drain faster (KIP-794).", _bool),
    ConfigDef("partitioner.availability.timeout.ms", "long", 0, "Built-in adaptive partitioner: skip partitions whose leader could not be sent to for this long. 0 disables.", _int(0, long=True)),
    ConfigDef("key.serializer", "class", None, "Key serializer: `f(key) -> bytes|None`, object with `serialize(topic, data)` or `serialize(topic, headers, data)` (may add headers), any of them `async`, or dotted path. None: bytes/str only.", _serializer),
    ConfigDef("value.serializer", "class", None, "Value serializer, like `key.serializer`.", _serializer),
    ConfigDef("interceptor.classes", "list", [], "Interceptors: objects, classes or dotted paths, list or comma string.", _interceptors),
    ConfigDef("security.protocol", "string", "PLAINTEXT", "How to reach the brokers: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT, SASL_SSL (SASL over TLS).", _security_protocol),
    ConfigDef("ssl.truststore.location", "string", None, "CA certificates that sign the brokers' certificates: a PEM file (one or more certificates) or a PKCS12 store. None: the system's CAs.", _optional_string),
    ConfigDef("ssl.truststore.type", "string", None, "PEM or PKCS12 (JKS is refused with the command that converts it). None (Java: JKS): read from the file.", _store_type),
    ConfigDef("ssl.truststore.password", "password", None, "Password of a PKCS12 truststore.", _password),
    ConfigDef("ssl.truststore.certificates", "string", None, "CA certificates inline, in PEM (instead of `ssl.truststore.location`).", _optional_string),
    ConfigDef("ssl.keystore.location", "string", None, "Mutual TLS: this client's certificate chain and private key, a PEM file or a PKCS12 store.", _optional_string),
    ConfigDef("ssl.keystore.type", "string", None, "PEM or PKCS12 (JKS refused). None (Java: JKS): read from the file.", _store_type),
    ConfigDef("ssl.keystore.password", "password", None, "Password of a PKCS12 keystore.", _password),
    ConfigDef("ssl.key.password", "password", None, "Password of the (encrypted) private key.", _password),
    ConfigDef("ssl.keystore.certificate.chain", "string", None, "Mutual TLS: the certificate chain inline, in PEM.", _optional_string),
    ConfigDef("ssl.keystore.key", "password", None, "Mutual TLS: the private key inline, in PEM (encrypted: `ssl.key.password`).", _password),
    ConfigDef("ssl.endpoint.identification.algorithm", "string", "https", "`https`: check that the broker's certificate names the host connected to; empty: do not (the chain is still verified).", _string),
    ConfigDef("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", "TLS versions allowed: TLSv1.2, TLSv1.3.", _string_list),
    ConfigDef("ssl.cipher.suites", "list", [], "TLS 1.2 cipher suites allowed (empty: Python's defaults); TLS 1.3 suites cannot be restricted from Python.", _string_list),
    ConfigDef("ssl.protocol", "string", "TLSv1.3", "Accepted and ignored: `ssl.enabled.protocols` decides.", _string, _IGN),
    ConfigDef("ssl.ca.location", "string", None, "librdkafka's name: a PEM file or directory of CA certificates (as `ssl.truststore.location`).", _optional_string),
    ConfigDef("ssl.certificate.location", "string", None, "librdkafka's name: this client's certificate (PEM) for mutual TLS, with `ssl.key.location`.", _optional_string),
    ConfigDef("ssl.key.location", "string", None, "librdkafka's name: this client's private key (PEM), with `ssl.certificate.location`.", _optional_string),
    ConfigDef("ssl_context", "object", None, "Python only: a ready `ssl.SSLContext` used as is, instead of every `ssl.*` key.", _ssl_context),
    ConfigDef("sasl.mechanism", "string", "GSSAPI", "SASL mechanism: GSSAPI (Kerberos, Java's default; needs `aioproducer[kerberos]`), PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER.", _string),
    ConfigDef("sasl.jaas.config", "password", None, "Credentials as Java's JAAS line, pasted as given (PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule, Krb5LoginModule).", _password),
    ConfigDef("sasl.mechanisms", "string", None, "librdkafka's name of `sasl.mechanism`.", _optional_string),
    ConfigDef("sasl.username", "string", None, "librdkafka's name: the SASL user (PLAIN, SCRAM), instead of `sasl.jaas.config`.", _optional_string),
    ConfigDef("sasl.password", "password", None, "librdkafka's name: the SASL password, with `sasl.username`.", _password),
    ConfigDef("sasl.kerberos.service.name", "string", None, "GSSAPI: the first part of the brokers' Kerberos principals (`kafka` for `kafka/host@REALM`); or the JAAS option `serviceName`. Required with GSSAPI, as in Java.", _optional_string),
    ConfigDef("sasl.kerberos.keytab", "string", None, "librdkafka's name, GSSAPI: the keytab to log in from, instead of `sasl.jaas.config`'s Krb5LoginModule `keyTab`; with `sasl.kerberos.principal`.", _optional_string),
    ConfigDef("sasl.kerberos.principal", "string", None, "librdkafka's name, GSSAPI: the client's principal (`user@REALM`), with `sasl.kerberos.keytab`.", _optional_string),
    ConfigDef("sasl.kerberos.ticket.renew.window.factor", "double", 0.8, "GSSAPI: a ticket is fetched again from the keytab at this fraction of its lifetime (plus jitter).", _double(0.5, 1.0)),
    ConfigDef("sasl.kerberos.ticket.renew.jitter", "double", 0.05, "GSSAPI: at most this fraction of a ticket's lifetime added at random to its renewal point.", _double(0.0, 0.25)),
    ConfigDef("sasl.kerberos.min.time.before.relogin", "long", 60000, "GSSAPI: no new login sooner than this after the last one, unless the ticket would expire first.", _int(0, long=True)),
    ConfigDef("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit", "Accepted and ignored: no `kinit` runs; tickets come from the keytab (or the ticket cache) through the GSSAPI library.", _string, _IGN),
    ConfigDef("sasl_oauth_token_provider", "object", None, "Python only, OAUTHBEARER: `f()` or `async f()` returning a token string or `(token, expiry_ms)`; called for every connection and re-authentication.", _token_provider),
    # OAUTHBEARER sign-in with OIDC client credentials (KIP-768): aioproducer.security.oidc.
    ConfigDef("sasl.oauthbearer.token.endpoint.url", "string", None, "OAUTHBEARER: the OAuth token endpoint; set, tokens are fetched there with the client credentials grant (needs `aioproducer[oidc]`), cached and fetched again before they expire (`sasl.login.refresh.*`). http(s) URLs only.", _optional_string),
    ConfigDef("sasl.oauthbearer.client.credentials.client.id", "string", None, "OIDC client id (Java 4.1+). Wins over the JAAS line's `clientId`; `sasl.oauthbearer.client.id` is librdkafka's name of it.", _optional_string),
    ConfigDef("sasl.oauthbearer.client.credentials.client.secret", "password", None, "OIDC client secret (Java 4.1+). Wins over the JAAS line's `clientSecret`; `sasl.oauthbearer.client.secret` is librdkafka's name of it.", _password),
    ConfigDef("sasl.oauthbearer.scope", "string", None, "OIDC scope asked for (space-separated). Wins over the JAAS line's `scope`.", _optional_string),
    ConfigDef("sasl.oauthbearer.jwt.retriever.class", "class", "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever", "How tokens are asked for (KIP-1139): `DefaultJwtRetriever` or `ClientCredentialsJwtRetriever`, the client credentials grant; `JwtBearerJwtRetriever`, the JWT bearer grant (RFC 7523) with the assertion in `sasl.oauthbearer.assertion.file` or signed here with `sasl.oauthbearer.assertion.private.key.file`.", _jwt_retriever),
    ConfigDef("sasl.oauthbearer.assertion.file", "string", None, "JWT bearer grant: a file holding the signed assertion JWT, read again for every token request (so it can be rotated). Given, every other `sasl.oauthbearer.assertion.*` key is ignored (as in Java).", _optional_string),
    # KIP-1139 assertions signed by the client (Java 4.1+; librdkafka 2.11+ has the same names): aioproducer.security.assertion.
    ConfigDef("sasl.oauthbearer.assertion.private.key.file", "string", None, "JWT bearer grant without `sasl.oauthbearer.assertion.file`: the PEM (PKCS#8) private key a fresh assertion is signed with for every token request; read again each time (so it can be rotated). Needs `aioproducer[oidc]`.", _optional_string),
    ConfigDef("sasl.oauthbearer.assertion.private.key.passphrase", "password", None, "The passphrase of an encrypted `sasl.oauthbearer.assertion.private.key.file`.", _password),
    ConfigDef("sasl.oauthbearer.assertion.algorithm", "string", "RS256", "How the assertion is signed, and its header's `alg`: `RS256` (an RSA key) or `ES256` (an EC key on P-256).", _choice(["RS256", "ES256"])),
    ConfigDef("sasl.oauthbearer.assertion.claim.aud", "string", None, "The assertion's `aud` claim (the template file may override it).", _optional_string),
    ConfigDef("sasl.oauthbearer.assertion.claim.iss", "string", None, "The assertion's `iss` claim (the template file may override it).", _optional_string),
    ConfigDef("sasl.oauthbearer.assertion.claim.sub", "string", None, "The assertion's `sub` claim (the template file may override it).", _optional_string),
    ConfigDef("sasl.oauthbearer.assertion.claim.exp.seconds", "int", 300, "The assertion's `exp`: this many seconds after its `iat` (now).", _int(0, 86400)),
    ConfigDef("sasl.oauthbearer.assertion.claim.nbf.seconds", "int", 60, "The assertion's `nbf`: this many seconds before its `iat` (now).", _int(0, 3600)),
    ConfigDef("sasl.oauthbearer.assertion.claim.jti.include", "boolean", False, "Give each assertion a `jti` claim, a random UUID.", _bool),
    ConfigDef("sasl.oauthbearer.assertion.template.file", "string", None, "A JSON file `{\"header\": {...}, \"payload\": {...}}` of static header fields and claims, read for every assertion; they override the `claim.aud/iss/sub` keys, and `alg`, `typ`, `iat`, `exp`, `nbf`, `jti` override them.", _optional_string),
    ConfigDef("sasl.oauthbearer.grant.type", "string", None, "librdkafka's switch of grant: `client_credentials`, or `urn:ietf:params:oauth:grant-type:jwt-bearer` (Java: `sasl.oauthbearer.jwt.retriever.class=...JwtBearerJwtRetriever`).", _optional_choice(["client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer"])),
    ConfigDef("sasl.oauthbearer.extensions", "string", None, "librdkafka's OAUTHBEARER SASL extensions, `key=value,key2=value2`, sent with every token (as Java's JAAS `extension_<key>` and `unsecuredLoginExtension_<key>` options, which are read too).", _extensions),
    ConfigDef("sasl.oauthbearer.header.urlencode", "boolean", False, "Client credentials grant: form-url-encode the client id and secret in the token request's Basic header, as RFC 6749 says (KIP-1025; false, Java's default: as they are).", _bool),
    ConfigDef("sasl.oauthbearer.method", "string", "default", "librdkafka's switch: `oidc` fetches tokens from `sasl.oauthbearer.token.endpoint.url` (which then must be set); `default` does too when that URL is set.", _choice(["default", "oidc"])),
    ConfigDef("sasl.oauthbearer.client.id", "string", None, "librdkafka's name of `sasl.oauthbearer.client.credentials.client.id`.", _optional_string),
    ConfigDef("sasl.oauthbearer.client.secret", "password", None, "librdkafka's name of `sasl.oauthbearer.client.credentials.client.secret`.", _password),
    ConfigDef("sasl.login.callback.handler.class", "class", None, "Accepted only as Java's `OAuthBearerLoginCallbackHandler` (OIDC sign-in, which `sasl.oauthbearer.token.endpoint.url` turns on anyway).", _login_callback_handler),
    ConfigDef("sasl.login.refresh.window.factor", "double", 0.8, "OIDC tokens: fetched again at this fraction of their lifetime (plus jitter), within the buffer and minimum period below.", _double(0.5, 1.0)),
    ConfigDef("sasl.login.refresh.window.jitter", "double", 0.05, "OIDC tokens: at most this fraction of their lifetime added at random to the refresh point.", _double(0.0, 0.25)),
    ConfigDef("sasl.login.refresh.min.period.seconds", "short", 60, "OIDC tokens: not fetched again sooner than this after one is received (unless its lifetime leaves no room for this and the buffer).", _int(0, 900)),
    ConfigDef("sasl.login.refresh.buffer.seconds", "short", 300, "OIDC tokens: fetched again at least this long before they expire (unless the lifetime leaves no room for this and the minimum period).", _int(0, 3600)),
    ConfigDef("sasl.login.retry.backoff.ms", "long", 100, "OIDC token requests: the wait after the first one that failed for a reason that may pass (unreachable, HTTP 5xx, 408, 429), doubled after each further failure.", _int(0, long=True)),
    ConfigDef("sasl.login.retry.backoff.max.ms", "long", 10000, "OIDC token requests: the most time spent retrying one (the last wait is cut to fit); then `start()` or the connection fails and is retried as a broker connection is. 0: no retries.", _int(0, long=True)),
    ConfigDef("sasl.login.connect.timeout.ms", "int", None, "OIDC token requests: the most time connecting to the token endpoint may take (None: `request.timeout.ms` bounds the whole request).", _optional_int(1)),
    ConfigDef("sasl.login.read.timeout.ms", "int", None, "OIDC token requests: the most time to wait for the token endpoint's answer to arrive (None: `request.timeout.ms` bounds the whole request).", _optional_int(1)),
    ConfigDef("transactional.id", "string", None, "Turns on transactions (`begin_transaction()` ... `commit_transaction()`); a producer with the same id fences this one. Forces idempotence on.", _transactional_id),
    ConfigDef("transaction.timeout.ms", "int", 60000, "How long the coordinator lets a transaction stay open before aborting it.", _int(1)),
    ConfigDef("client.dns.lookup", "string", "use_all_dns_ips", "`use_all_dns_ips`: each connection resolves its name again and tries every address in turn. `resolve_canonical_bootstrap_servers_only`: each bootstrap name is resolved, at start and at every rebootstrap, and its addresses replaced by their canonical names (reverse lookup).", _choice(["use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"])),
    ConfigDef("metadata.recovery.strategy", "string", "rebootstrap", "`rebootstrap` (Java 4.x's default, KIP-899): a metadata refresh tries the bootstrap servers after the known brokers, and when no metadata arrived for `metadata.recovery.rebootstrap.trigger.ms` or a broker answers REBOOTSTRAP_REQUIRED the client drops its cluster view and connections and starts again from the bootstrap servers, resolved again. `none` (3.9's default): the bootstrap servers serve only until the first metadata.", _choice(["none", "rebootstrap"])),
    ConfigDef("metadata.recovery.rebootstrap.trigger.ms", "long", 300000, "With `metadata.recovery.strategy=rebootstrap`: how long metadata may fail to arrive before the client rebootstraps (KIP-1102).", _int(0, long=True)),
    ConfigDef("metric.reporters", "list", [], "Accepted and ignored (no JMX).", _string_list, _IGN),
    ConfigDef("metrics.num.samples", "int", 2, "How many samples `producer.metrics()`'s rates, averages and maxima are kept over (each `metrics.sample.window.ms` long); the oldest is dropped as a new one starts.", _int(1)),
    ConfigDef("metrics.recording.level", "string", "INFO", "Accepted and ignored.", _choice(["INFO", "DEBUG", "TRACE"]), _IGN),
    ConfigDef("metrics.sample.window.ms", "long", 30000, "The length of one sample of `producer.metrics()`'s rates, averages and maxima: they cover the last `metrics.num.samples` samples (0 is taken as 1 ms).", _int(0, long=True)),
    ConfigDef("enable.metrics.push", "boolean", True, "KIP-714 client telemetry: when the cluster has a client-metrics subscription matching this producer, push the subscribed metrics (`org.apache.kafka.producer.*`, OTLP) every push interval the broker gives, and once more on `close()`. A broker without KIP-714 ends it quietly.", _bool),
)

#: Options with no Java key (objects a properties file cannot hold): their key is their keyword.
PYTHON_ONLY_KEYS: frozenset[str] = frozenset({"ssl_context", "sasl_oauth_token_provider"})

_DEFS_BY_KEY: dict[str, ConfigDef] = {d.key: d for d in CONFIG_DEFS}
_KEY_BY_ATTR: dict[str, str] = {d.attr: d.key for d in CONFIG_DEFS}

#: Extra Python keywords, for the names Python users reach for first (aiokafka and
#: confluent-kafka say ``interceptors``, not ``interceptor_classes``; aiokafka says
#: ``partitioner=``, as the docs do). Keywords only: a mapping of Java keys takes the
#: Java key, so the config table and every error name the Java key, whichever was used.
_KEYWORD_ALIASES: dict[str, str] = {"interceptors": "interceptor.classes", "partitioner": "partitioner.class"}
_KEY_BY_ATTR.update(_KEYWORD_ALIASES)


#: librdkafka keys that do not map one to one to a Java key: refused, naming the key to use.
_REFUSED_KEYS: dict[str, str] = {
    "sasl.oauthbearer.assertion.jwt.template.file": "librdkafka's sasl.oauthbearer.assertion.jwt.template.file is not "
    "read here: give Java's sasl.oauthbearer.assertion.template.file (a JSON object of \"header\" and \"payload\")",
    "sasl.oauthbearer.assertion.private.key.pem": "librdkafka's sasl.oauthbearer.assertion.private.key.pem (the key "
    "inline) is not supported: put the key in a file and give Java's sasl.oauthbearer.assertion.private.key.file",
}


#: Names other clients give a setting -> the Java key it is here, and what differs. Asked before
#: edit distance, which points the wrong way for these (``message_timeout_ms`` is nearer to
#: ``request_timeout_ms`` than to ``delivery_timeout_ms``). Keyword spelling (dots as
#: underscores); a mapping key is looked up the same way. librdkafka's dotted keys in a mapping
#: are translated before any hint is needed (``aioproducer/compat/librdkafka.py``): their rows
#: here are for the keyword spelling. ``tests/unit/test_config_hints.py`` gives every row.
KEY_ALIASES: dict[str, tuple[str, str]] = {
    # aiokafka
    "max_batch_size": ("batch.size", "aiokafka's name"),
    "sasl_plain_username": ("sasl.username", "aiokafka's and kafka-python's name"),
    "sasl_plain_password": ("sasl.password", "aiokafka's and kafka-python's name"),
    # kafka-python
    "ssl_cafile": ("ssl.truststore.location", "kafka-python's name; a PEM file"),
    "ssl_certfile": ("ssl.certificate.location", "kafka-python's name"),
    "ssl_keyfile": ("ssl.key.location", "kafka-python's name"),
    "ssl_password": ("ssl.key.password", "kafka-python's name"),
    "ssl_check_hostname": ("ssl.endpoint.identification.algorithm", "https checks the host name, an empty string does not"),
    # librdkafka, spelled as keywords
    "metadata_broker_list": ("bootstrap.servers", "librdkafka's metadata.broker.list"),
    "message_timeout_ms": ("delivery.timeout.ms", "librdkafka's message.timeout.ms"),
    "queue_buffering_max_ms": ("linger.ms", "librdkafka's queue.buffering.max.ms"),
    "queue_buffering_max_kbytes": ("buffer.memory", "librdkafka's queue.buffering.max.kbytes, in bytes here"),
    "queue_buffering_max_messages": ("buffer.memory", "the queue is bounded in bytes here"),
    "batch_num_messages": ("batch.size", "a batch is bounded in bytes here"),
    "compression_codec": ("compression.type", "librdkafka's compression.codec"),
    "message_max_bytes": ("max.request.size", "librdkafka's message.max.bytes"),
    "message_send_max_retries": ("retries", "librdkafka's message.send.max.retries"),
    "request_required_acks": ("acks", "librdkafka's request.required.acks"),
    "max_in_flight": ("max.in.flight.requests.per.connection", "librdkafka's max.in.flight"),
    "topic_metadata_refresh_interval_ms": ("metadata.max.age.ms", "librdkafka's topic.metadata.refresh.interval.ms"),
    "socket_send_buffer_bytes": ("send.buffer.bytes", "librdkafka's socket.send.buffer.bytes"),
    "socket_receive_buffer_bytes": ("receive.buffer.bytes", "librdkafka's socket.receive.buffer.bytes"),
    "socket_timeout_ms": ("request.timeout.ms", "librdkafka's socket.timeout.ms"),
    "enable_ssl_certificate_verification": ("ssl_context", "verification is switched off only in an ssl.SSLContext of your own"),
    "ssl_key_pem": ("ssl.keystore.key", "librdkafka's ssl.key.pem"),
    "ssl_certificate_pem": ("ssl.keystore.certificate.chain", "librdkafka's ssl.certificate.pem"),
    "ssl_ca_pem": ("ssl.truststore.certificates", "librdkafka's ssl.ca.pem"),
    "statistics_interval_ms": ("metrics.sample.window.ms", "producer.metrics() gives the statistics"),
}


def _unknown(name: str, known: Iterable[str], what: str) -> ConfigError:
    """An unknown key or keyword, with the key meant: a known alias first, else the nearest name."""
    refused = _REFUSED_KEYS.get(name) or _REFUSED_KEYS.get(name.replace("_", "."))
    if refused is not None:
        return ConfigError(refused)
    keyword = what == "keyword argument"
    alias = KEY_ALIASES.get(name.replace(".", "_"))
    if alias is not None:
        target = alias[0].replace(".", "_") if keyword else alias[0]
        return ConfigError(f"unknown {what} {name!r}; did you mean {target!r}? ({alias[1]})")
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"unknown {what} {name!r}{hint}")


def _java_dialect(config: Mapping[str, Any]) -> tuple[Mapping[str, Any], dict[str, str], list[str]]:
    """``config`` in Java's keys, where each came from, and what to warn about.

    A mapping of Java keys only is returned as it is; one with other keys goes through
    librdkafka's table (``aioproducer/compat/librdkafka.py``, imported only then).
    """
    if all(key in _DEFS_BY_KEY for key in config):
        return config, {}, []
    from aioproducer.compat.librdkafka import translate

    translation = translate(config)
    return translation.config, translation.origins, translation.warnings


def _conflict(key: str, first: Any, first_as: str, name: str, second: Any) -> ConfigError:
    """A key given twice with different values; a secret's values are not shown (both would leak)."""
    if _DEFS_BY_KEY[key].type == "password":
        return ConfigError(
            f"{key} given twice with different values, {first_as} and as {name}= (secret values, not shown): give it once"
        )
    return ConfigError(f"{key} given twice with different values: {first!r} {first_as} and {name}={second!r}")


def _same(a: Any, b: Any) -> bool:
    a = a.value if isinstance(a, Password) else a  # a secret given once as Password, once as its text
    b = b.value if isinstance(b, Password) else b
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - exotic __eq__: treat as different
        return False


class ProducerConfig:
    """Validated producer configuration with typed attributes named like the keys.

    ``ProducerConfig({"linger.ms": "5", "acks": "1"}, compression_type="lz4")``. Giving a key both
    ways with different values is an error; with equal values it is fine. ``interceptors=`` and
    ``partitioner=`` are accepted as keyword aliases of ``interceptor_classes=`` and
    ``partitioner_class=``. Attributes are those of
    :data:`CONFIG_DEFS` (``cfg.acks``, ``cfg.compression_type``, ...) plus:

    * ``idempotence_explicit`` — ``enable.idempotence`` was given by the user (Java's
      ``originals().containsKey``), which decides whether conflicts are errors or disable it;
    * ``explicit_keys`` — every key the user gave.

    Notable parsed forms: ``acks`` int (-1 = all), ``compression_type`` codec id 0..4,
    ``bootstrap_servers`` list of ``(host, port)`` (may be empty here; :meth:`require_bootstrap_servers`
    is what the producer calls), serializers normalized to ``fn(topic, data)``.
    """

    bootstrap_servers: list[tuple[str, int]]
    client_id: str
    acks: int
    batch_size: int
    linger_ms: int
    buffer_memory: int
    max_block_ms: int
    max_request_size: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    retries: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    max_in_flight_requests_per_connection: int
    enable_idempotence: bool
    compression_type: int
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    metadata_max_age_ms: int
    metadata_max_idle_ms: int
    connections_max_idle_ms: int
    socket_connection_setup_timeout_ms: int
    socket_connection_setup_timeout_max_ms: int
    send_buffer_bytes: int
    receive_buffer_bytes: int
    partitioner_class: PartitionerFn | None
    partitioner_ignore_keys: bool
    partitioner_adaptive_partitioning_enable: bool
    partitioner_availability_timeout_ms: int
    key_serializer: SerializeFn | None
    value_serializer: SerializeFn | None
    interceptor_classes: list[Any]
    security_protocol: str
    ssl_truststore_location: str | None
    ssl_truststore_type: str | None
    ssl_truststore_password: Password | None
    ssl_truststore_certificates: str | None
    ssl_keystore_location: str | None
    ssl_keystore_type: str | None
    ssl_keystore_password: Password | None
    ssl_key_password: Password | None
    ssl_keystore_certificate_chain: str | None
    ssl_keystore_key: Password | None
    ssl_endpoint_identification_algorithm: str
    ssl_enabled_protocols: list[str]
    ssl_cipher_suites: list[str]
    ssl_protocol: str
    ssl_ca_location: str | None
    ssl_certificate_location: str | None
    ssl_key_location: str | None
    ssl_context: Any
    sasl_mechanism: str
    sasl_jaas_config: Password | None
    sasl_mechanisms: str | None
    sasl_username: str | None
    sasl_password: Password | None
    sasl_kerberos_service_name: str | None
    sasl_kerberos_keytab: str | None
    sasl_kerberos_principal: str | None
    sasl_kerberos_ticket_renew_window_factor: float
    sasl_kerberos_ticket_renew_jitter: float
    sasl_kerberos_min_time_before_relogin: int
    sasl_kerberos_kinit_cmd: str
    sasl_oauth_token_provider: Any
    sasl_oauthbearer_token_endpoint_url: str | None
    sasl_oauthbearer_client_credentials_client_id: str | None
    sasl_oauthbearer_client_credentials_client_secret: Password | None
    sasl_oauthbearer_scope: str | None
    sasl_oauthbearer_jwt_retriever_class: str
    sasl_oauthbearer_assertion_file: str | None
    sasl_oauthbearer_assertion_private_key_file: str | None
    sasl_oauthbearer_assertion_private_key_passphrase: Password | None
    sasl_oauthbearer_assertion_algorithm: str
    sasl_oauthbearer_assertion_claim_aud: str | None
    sasl_oauthbearer_assertion_claim_iss: str | None
    sasl_oauthbearer_assertion_claim_sub: str | None
    sasl_oauthbearer_assertion_claim_exp_seconds: int
    sasl_oauthbearer_assertion_claim_nbf_seconds: int
    sasl_oauthbearer_assertion_claim_jti_include: bool
    sasl_oauthbearer_assertion_template_file: str | None
    sasl_oauthbearer_grant_type: str | None
    sasl_oauthbearer_extensions: dict[str, str] | None
    sasl_oauthbearer_header_urlencode: bool
    sasl_oauthbearer_method: str
    sasl_oauthbearer_client_id: str | None
    sasl_oauthbearer_client_secret: Password | None
    sasl_login_callback_handler_class: str | None
    sasl_login_refresh_window_factor: float
    sasl_login_refresh_window_jitter: float
    sasl_login_refresh_min_period_seconds: int
    sasl_login_refresh_buffer_seconds: int
    sasl_login_retry_backoff_ms: int
    sasl_login_retry_backoff_max_ms: int
    sasl_login_connect_timeout_ms: int | None
    sasl_login_read_timeout_ms: int | None
    transactional_id: str | None
    transaction_timeout_ms: int
    client_dns_lookup: str
    metadata_recovery_strategy: str
    metadata_recovery_rebootstrap_trigger_ms: int
    metric_reporters: list[str]
    metrics_num_samples: int
    metrics_recording_level: str
    metrics_sample_window_ms: int
    enable_metrics_push: bool

    idempotence_explicit: bool
    explicit_keys: frozenset[str]
    dialect_origins: dict[str, str]

    def __init__(
        self, config: ProducerConfigDict | Properties | None = None, **kwargs: Unpack[ProducerKeywords]
    ) -> None:
        if config is not None and not isinstance(config, Mapping):
            # Its type only: whatever it is (a list of pairs, a properties string) may hold secrets.
            raise ConfigError(
                f"the configuration must be a mapping of keys to values (or keywords), got a {type(config).__name__}; "
                "for example Producer({'bootstrap.servers': 'host:9092'}) or Producer(bootstrap_servers='host:9092')"
            )
        given: dict[str, Any] = {}
        given_as: dict[str, str] = {}  # key -> how it was given, for the conflict message
        mapping, self.dialect_origins, dialect_warnings = _java_dialect(config or {})
        for key, value in mapping.items():
            if key not in _DEFS_BY_KEY:
                raise _unknown(str(key), _DEFS_BY_KEY, "config key")
            origin = self.dialect_origins.get(key)
            given[key], given_as[key] = value, "in the mapping" if origin is None else f"as {origin} in the mapping"
        for name, value in kwargs.items():
            if name not in _KEY_BY_ATTR:
                raise _unknown(name, _KEY_BY_ATTR, "keyword argument")
            key = _KEY_BY_ATTR[name]
            if key in given and not _same(given[key], value):
                raise _conflict(key, given[key], given_as[key], name, value)
            given[key], given_as[key] = value, f"as {name}="

        for d in CONFIG_DEFS:
            setattr(self, d.attr, d.parse(self._named(d.key), given[d.key] if d.key in given else d.default))
        self.explicit_keys = frozenset(given)
        self.idempotence_explicit = "enable.idempotence" in given
        self._post_process()
        if dialect_warnings:
            log = client_logger(__name__, self.client_id)
            for warning in dialect_warnings:
                log.warning("%s", warning)

    def _named(self, key: str, value: Any = None) -> str:
        """``key`` (and its value) as an error names it: with the librdkafka key it was given as, if it was."""
        origin = self.dialect_origins.get(key)
        shown = "" if value is None else f" ({value})"
        return f"{key}{shown}" if origin is None else f"{origin}{shown} (Java's {key} here)"

    def _post_process(self) -> None:
        """The cross-key rules, in the order of Java's ``postProcessParsedConfig`` + ``KafkaProducer``."""
        explicit = self.explicit_keys
        if not self.client_id:
            self.client_id = f"aioproducer-{next(_client_id_sequence)}"
        # First, so that what is said below names the producer it is about (see logs.py).
        log = client_logger(__name__, self.client_id)
        if "reconnect.backoff.ms" in explicit and "reconnect.backoff.max.ms" not in explicit:
            self.reconnect_backoff_max_ms = self.reconnect_backoff_ms
        if self.retry_backoff_ms > self.retry_backoff_max_ms:
            log.warning(
                "retry.backoff.ms=%d is greater than retry.backoff.max.ms=%d: a static backoff of %d ms applies",
                self.retry_backoff_ms, self.retry_backoff_max_ms, self.retry_backoff_max_ms,
            )

        if self.transactional_id is not None:
            if "enable.idempotence" in explicit and not self.enable_idempotence:
                raise ConfigError("transactional.id needs enable.idempotence=true: a transaction is built on the idempotent producer")
            self.enable_idempotence = True
            self.idempotence_explicit = True  # a conflict below is an error, not a silent downgrade

        if self.enable_idempotence:
            conflicts: list[str] = []
            if self.retries == 0:
                conflicts.append("retries must be > 0 (got 0)")
            if self.acks != -1:
                conflicts.append(f"acks must be all (got {self.acks})")
            if self.max_in_flight_requests_per_connection > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
                conflicts.append(
                    "max.in.flight.requests.per.connection must be <= "
                    f"{MAX_IN_FLIGHT_FOR_IDEMPOTENCE} (got {self.max_in_flight_requests_per_connection})"
                )
            if conflicts:
                if self.idempotence_explicit:
                    raise ConfigError(
                        "enable.idempotence=true conflicts with other settings: " + "; ".join(conflicts)
                    )
                log.info("idempotence disabled because %s", "; ".join(conflicts))
                self.enable_idempotence = False

        floor = min(self.linger_ms + self.request_timeout_ms, INT_MAX)
        if self.delivery_timeout_ms < floor:
            if "delivery.timeout.ms" in explicit:
                raise ConfigError(
                    f"{self._named('delivery.timeout.ms', self.delivery_timeout_ms)} must be >= "
                    f"{self._named('linger.ms', self.linger_ms)} + request.timeout.ms ({self.request_timeout_ms}) = {floor}: "
                    f"raise {self.dialect_origins.get('delivery.timeout.ms', 'delivery.timeout.ms')} to at least {floor}, "
                    "or lower request.timeout.ms or linger.ms"
                )
            log.warning(
                "delivery.timeout.ms raised from %d to linger.ms + request.timeout.ms = %d",
                self.delivery_timeout_ms, floor,
            )
            self.delivery_timeout_ms = floor

    def require_bootstrap_servers(self) -> list[tuple[str, int]]:
        """The bootstrap servers, or ConfigError if none: a producer cannot start without them."""
        if not self.bootstrap_servers:
            raise ConfigError("bootstrap.servers is required: give at least one host:port")
        return self.bootstrap_servers

    def as_dict(self) -> dict[str, Any]:
        """Dotted key -> effective (parsed, post-processed) value.

        Values are what the producer uses (``acks`` -1, codec ids, resolved serializers), so
        ``ProducerConfig(cfg.as_dict())`` builds an equivalent configuration. Secrets stay
        ``Password`` objects (``[hidden]``), but the user's objects are themselves, and their
        repr may show what they hold: to log a configuration, log the ``ProducerConfig``.
        """
        out: dict[str, Any] = {}
        for d in CONFIG_DEFS:
            value = getattr(self, d.attr)
            out[d.key] = list(value) if isinstance(value, list) else value
        return out

    def __repr__(self) -> str:
        """The keys the user gave, secrets as ``[hidden]`` and objects by their type (see ``_shown``)."""
        changed = {
            d.key: _shown(getattr(self, d.attr)) for d in CONFIG_DEFS if d.key in self.explicit_keys
        }
        return f"ProducerConfig({changed!r})"


class _Described:
    """Stands for a user object in ``ProducerConfig``'s repr: its type's name, nothing it holds."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _shown(value: Any) -> Any:
    """``value`` for a repr: plain values as they are, a user's object by its type.

    Why: objects are the user's (a token provider, a serializer, an SSL context) and their
    repr may show what they hold, a ``functools.partial(fetch_token, client_secret=...)`` its secret.
    """
    if value is None or isinstance(value, (str, int, float, Password)):
        return value
    if isinstance(value, (list, tuple)):
        return type(value)(_shown(item) for item in value)
    name = getattr(value, "__qualname__", None)
    return _Described(f"<{name}>" if isinstance(name, str) else f"<{type(value).__qualname__} object>")


# ------------------------------------------------------------------------------- docs table


def _default_text(d: ConfigDef) -> str:
    if d.key == "bootstrap.servers":
        return "(required)"
    if d.default is None:
        return "null"
    if isinstance(d.default, bool):
        return str(d.default).lower()
    if d.default == "" or d.default == []:
        return '""'
    return str(d.default)


def render_markdown_table() -> str:
    """The docs' configuration table (docs/reference/configuration.md), generated from :data:`CONFIG_DEFS` so it cannot drift."""
    lines = [
        "| Key | Keyword | Type | Default | Status | Description |",
        "|---|---|---|---|---|---|",
    ]
    for d in CONFIG_DEFS:
        doc = d.doc.replace("|", "\\|")
        lines.append(
            f"| `{d.key}` | `{d.attr}` | {d.type} | `{_default_text(d)}` | {d.status} | {doc} |"
        )
    return "\n".join(lines) + "\n"
