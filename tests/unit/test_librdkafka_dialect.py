"""confluent-kafka's configuration dialect: every librdkafka producer key decided, and each decision held to.

The key list is read from the librdkafka the tests already load (``rd_kafka_conf_properties_show``
of confluent-kafka's bundled library), so a key added by a newer librdkafka fails here until it
is decided in ``aioproducer/compat/librdkafka.py``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from aioproducer.compat.librdkafka import LIBRDKAFKA_KEYS, render_markdown_table
from aioproducer.config import CONFIG_DEFS, KEY_ALIASES, ProducerConfig
from aioproducer.errors import ConfigError

JAVA = {d.key: d for d in CONFIG_DEFS}
#: confluent-kafka's own keys, which librdkafka's table does not list.
PYTHON_ONLY = {"logger", "oauth_cb", "on_delivery"}
BASE: dict[str, Any] = {"bootstrap.servers": "b:9092"}


def make(config: dict[str, Any]) -> ProducerConfig:
    """A configuration in librdkafka's dialect: a ``dict[str, Any]`` to type checkers, as a loaded one is."""
    return ProducerConfig(config)


def librdkafka_producer_keys() -> set[str]:
    """The P and * rows of librdkafka's configuration table, from the loaded library itself."""
    from aioproducer.testing._librdkafka import find_library_path

    lib = ctypes.CDLL(str(find_library_path()))
    libc = ctypes.CDLL(None)
    libc.fopen.restype, libc.fopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_conf_properties_show.argtypes = [ctypes.c_void_p]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "conf.md"
        handle = libc.fopen(os.fsencode(path), b"w")
        lib.rd_kafka_conf_properties_show(handle)
        libc.fclose(handle)
        text = path.read_text()
    keys = set()
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) > 2 and cells[1] in ("P", "*") and cells[0] != "Property":
            keys.add(cells[0])
    return keys


def test_every_librdkafka_producer_key_is_decided() -> None:
    theirs = librdkafka_producer_keys()
    assert len(theirs) > 140
    assert theirs - set(LIBRDKAFKA_KEYS) == set()
    assert set(LIBRDKAFKA_KEYS) - theirs == PYTHON_ONLY


def test_each_key_names_a_real_java_key() -> None:
    for entry in LIBRDKAFKA_KEYS.values():
        assert entry.handling in ("same", "translated", "warned", "refused"), entry.key
        if entry.handling == "same":
            assert entry.java == entry.key and entry.key in JAVA, entry.key
        if entry.handling == "translated":
            assert entry.java in JAVA or entry.java in ("compression.<codec>.level", "ssl_context"), entry.key
        if entry.java is not None and entry.handling in ("warned", "refused") and not entry.java.startswith("on_delivery"):
            assert entry.java in JAVA or entry.java in ("ssl_context", "sasl_oauth_token_provider"), entry.key


#: A value of each translated key and what the producer's configuration holds for it.
TRANSLATED: dict[str, tuple[Any, str, Any]] = {
    "metadata.broker.list": ("h:1,g:2", "bootstrap_servers", [("h", 1), ("g", 2)]),
    "message.max.bytes": (2_000_000, "max_request_size", 2_000_000),
    "max.in.flight": (3, "max_in_flight_requests_per_connection", 3),
    "topic.metadata.refresh.interval.ms": (60_000, "metadata_max_age_ms", 60_000),
    "socket.send.buffer.bytes": (0, "send_buffer_bytes", -1),
    "socket.receive.buffer.bytes": (65536, "receive_buffer_bytes", 65536),
    "ssl.key.pem": ("-----BEGIN PRIVATE KEY-----", "ssl_keystore_key", None),  # checked below: a Password
    "ssl.certificate.pem": ("-----BEGIN CERTIFICATE-----", "ssl_keystore_certificate_chain", "-----BEGIN CERTIFICATE-----"),
    "ssl.ca.pem": ("-----BEGIN CERTIFICATE-----", "ssl_truststore_certificates", "-----BEGIN CERTIFICATE-----"),
    "enable.ssl.certificate.verification": (True, "ssl_context", None),
    "oauth_cb": (lambda config: ("tok", 12.5), "sasl_oauth_token_provider", None),
    "interceptors": ([], "interceptor_classes", []),
    "queue.buffering.max.kbytes": (4, "buffer_memory", 4096),
    "queue.buffering.max.ms": (7.0, "linger_ms", 7),
    "message.send.max.retries": (3, "retries", 3),
    "compression.codec": ("zstd", "compression_type", 4),
    "compression.level": (-1, "compression_gzip_level", -1),
    "request.required.acks": (1, "acks", 1),
    "message.timeout.ms": (0, "delivery_timeout_ms", 2**31 - 1),
    "partitioner": ("murmur2_random", "partitioner_class", None),
}


@pytest.mark.parametrize("key", sorted(k for k, e in LIBRDKAFKA_KEYS.items() if e.handling == "translated"))
def test_translated_keys_become_their_java_key(key: str) -> None:
    value, attr, expected = TRANSLATED[key]
    extra = {"enable.idempotence": False} if key in ("max.in.flight", "request.required.acks", "message.send.max.retries") else {}
    base = {} if attr == "bootstrap_servers" else BASE
    config = make({**base, **extra, key: value})
    if key not in ("enable.ssl.certificate.verification", "oauth_cb", "ssl.key.pem"):
        assert getattr(config, attr) == expected
    if key == "ssl.key.pem":
        assert config.ssl_keystore_key is not None and config.ssl_keystore_key.value == value
    if key == "oauth_cb":
        assert config.sasl_oauth_token_provider() == ("tok", 12_500)  # seconds become ms


@pytest.mark.parametrize("key", sorted(k for k, e in LIBRDKAFKA_KEYS.items() if e.handling == "warned"))
def test_warned_keys_log_one_warning_naming_what_to_use(key: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="aioproducer")
    make({**BASE, key: "1"})
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 1 and f"librdkafka's {key} has no effect here" in lines[0]
    entry = LIBRDKAFKA_KEYS[key]
    if entry.java:
        assert entry.java in lines[0]


@pytest.mark.parametrize("key", sorted(k for k, e in LIBRDKAFKA_KEYS.items() if e.handling == "refused"))
def test_refused_keys_name_the_key_to_use(key: str) -> None:
    with pytest.raises(ConfigError, match=f"librdkafka's {key} is not supported here") as caught:
        make({**BASE, key: "x"})
    entry = LIBRDKAFKA_KEYS[key]
    if entry.java:
        assert entry.java in str(caught.value)


@pytest.mark.parametrize("key", sorted(k for k, e in LIBRDKAFKA_KEYS.items() if e.handling == "same"))
def test_same_keys_are_read_as_java_keys(key: str) -> None:
    default = JAVA[key].default
    config = make({**BASE, key: "b:1" if key == "bootstrap.servers" else default})
    assert key in config.explicit_keys and config.dialect_origins == {}


@pytest.mark.parametrize(
    "key",
    # enable.ssl.certificate.verification=true sets nothing (verification is on anyway): nothing to clash with
    sorted(k for k, e in LIBRDKAFKA_KEYS.items() if e.handling == "translated" and e.java in JAVA and k != "enable.ssl.certificate.verification"),
)
def test_both_dialects_at_once_are_refused_naming_both(key: str) -> None:
    java = LIBRDKAFKA_KEYS[key].java
    assert java is not None
    value = TRANSLATED[key][0]
    with pytest.raises(ConfigError, match=f"{key} and {java} both set {java}|{java} and {key} both set {java}"):
        make({**BASE, java: JAVA[java].default if java != "bootstrap.servers" else "b:1", key: value})


def test_compression_level_follows_the_codec(caplog: pytest.LogCaptureFixture) -> None:
    assert make({**BASE, "compression.codec": "gzip", "compression.level": 4}).compression_gzip_level == 4
    assert make({**BASE, "compression.type": "zstd", "compression.level": 9}).compression_zstd_level == 9
    with pytest.raises(ConfigError, match=r"compression.level \(0\) \(Java's compression.gzip.level here\)|compression.level .*Java's compression.gzip.level"):
        make({**BASE, "compression.codec": "gzip", "compression.level": 0})
    caplog.set_level(logging.WARNING, logger="aioproducer")
    make({**BASE, "compression.level": 3})  # no codec: nothing to level
    assert any("compression.level has no effect" in r.getMessage() for r in caplog.records)


def test_bad_values_name_both_keys() -> None:
    with pytest.raises(ConfigError, match=r"queue.buffering.max.ms \(Java's linger.ms here\) takes whole milliseconds"):
        make({**BASE, "queue.buffering.max.ms": 0.5})
    with pytest.raises(ConfigError, match=r"message.send.max.retries \(Java's retries here\) must be an integer >= 0"):
        make({**BASE, "message.send.max.retries": -2})
    with pytest.raises(ConfigError, match=r"topic.metadata.refresh.interval.ms=-1 .* metadata.max.age.ms"):
        make({**BASE, "topic.metadata.refresh.interval.ms": -1})
    with pytest.raises(ConfigError, match=r"oauth_cb must be a callable"):
        make({**BASE, "oauth_cb": "token"})


def test_delivery_timeout_rule_names_the_key_to_raise() -> None:
    """The guide's own rename of a real config: the error says which key, and to what."""
    with pytest.raises(ConfigError, match=r"message.timeout.ms \(15000\) \(Java's delivery.timeout.ms here\) must be >= "
                                          r"queue.buffering.max.ms \(5\) \(Java's linger.ms here\) \+ request.timeout.ms \(30000\) = 30005: "
                                          r"raise message.timeout.ms to at least 30005"):
        make({**BASE, "message.timeout.ms": 15000, "queue.buffering.max.ms": 5})
    with pytest.raises(ConfigError, match=r"raise delivery.timeout.ms to at least 30005"):
        make({**BASE, "delivery.timeout.ms": 15000, "linger.ms": 5})


def test_a_secret_in_a_translated_key_is_not_shown() -> None:
    with pytest.raises(ConfigError) as caught:
        make({**BASE, "ssl.key.pem": 12345678})
    assert "ssl.key.pem" in str(caught.value) and "12345678" not in str(caught.value)


def test_docs_table_is_generated_from_the_table() -> None:
    page = Path(__file__).parents[2] / "docs" / "reference" / "librdkafka.md"
    assert render_markdown_table() in page.read_text()


# ---------------------------------------------------------------------- did-you-mean hints


@pytest.mark.parametrize("alias", sorted(KEY_ALIASES))
def test_every_alias_hint_as_a_keyword(alias: str) -> None:
    target, _why = KEY_ALIASES[alias]
    assert target in JAVA, f"{alias} points at {target}, which is no key"
    with pytest.raises(ConfigError, match=f"unknown keyword argument '{alias}'; did you mean '{target.replace('.', '_')}'"):
        keywords: dict[str, Any] = {alias: 1}
        ProducerConfig(None, **keywords)


@pytest.mark.parametrize("alias", sorted(KEY_ALIASES))
def test_every_alias_hint_as_a_mapping_key(alias: str) -> None:
    """A mapping key spelled as the alias (dots or underscores) gets the Java key; librdkafka's own keys are translated instead."""
    target, _why = KEY_ALIASES[alias]
    dotted = alias.replace("_", ".")
    if dotted in LIBRDKAFKA_KEYS:
        return  # translated, warned or refused by the table (tested above), no hint needed
    with pytest.raises(ConfigError, match=f"unknown config key '{alias}'; did you mean '{target}'"):
        make({**BASE, alias: 1})


@pytest.mark.parametrize(
    ("given", "hint"),
    [
        ({"lingr_ms": 5}, "linger_ms"),
        ({"acks_all": 1}, "acks"),
        ({"bootstrap_server": "b:1"}, "bootstrap_servers"),
        ({"deliveri_timeout_ms": 1}, "delivery_timeout_ms"),
    ],
)
def test_edit_distance_hints_for_keywords(given: dict[str, Any], hint: str) -> None:
    with pytest.raises(ConfigError, match=f"did you mean '{hint}'"):
        ProducerConfig(**given)


@pytest.mark.parametrize(
    ("key", "hint"),
    [("linger.msx", "linger.ms"), ("bootstrap.server", "bootstrap.servers"), ("compresion.type", "compression.type"), ("batch.sizes", "batch.size")],
)
def test_edit_distance_hints_for_mapping_keys(key: str, hint: str) -> None:
    with pytest.raises(ConfigError, match=f"did you mean '{hint}'"):
        make({**BASE, key: 5})


def test_the_hints_that_pointed_the_wrong_way() -> None:
    """message.timeout.ms, queue.buffering.max.kbytes and enable.ssl.certificate.verification no longer get a wrong neighbour."""
    assert make({**BASE, "message.timeout.ms": 60000}).delivery_timeout_ms == 60000
    assert make({**BASE, "queue.buffering.max.kbytes": 1}).buffer_memory == 1024
    with pytest.raises(ConfigError, match="ssl_context") as caught:
        make({**BASE, "enable.ssl.certificate.verification": "false"})
    assert "ssl.certificate.location" not in str(caught.value)
    with pytest.raises(ConfigError, match="did you mean 'delivery_timeout_ms'"):
        ProducerConfig(message_timeout_ms=60000)  # type: ignore[call-arg]
