"""No secret in any error, log line or repr, whatever the path (#25 item 12).

A sentinel secret goes into every ``password``-typed key (read from the config table, so a new
one is swept too) and into ``sasl.jaas.config`` in every shape the parser and the security
layer refuse; each error path is provoked and the sentinel must appear in no exception (its
message, repr, args, traceback, cause and context), no log record and no repr.
"""

from __future__ import annotations

import functools
import logging
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from aioproducer import Producer
from aioproducer.config import CONFIG_DEFS, ProducerConfig
from aioproducer.testing import MockCluster

SECRET = "S3NT1NEL_not_to_be_printed"  # a valid identifier: it parses where a JAAS class name or flag goes
PASSWORD_KEYS = [d.key for d in CONFIG_DEFS if d.type == "password"]
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SASL_PLAIN: dict[str, Any] = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "bootstrap.servers": "h:9092"}


def _attr(key: str) -> str:
    return key.replace(".", "_")


def _texts(exc: BaseException) -> Iterator[str]:
    """Every text an exception shows, its causes' and contexts' too (suppressed or not)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield str(current)
        yield repr(current)
        yield repr(current.args)
        yield "".join(traceback.format_exception_only(type(current), current))
        todo += [current.__cause__, current.__context__]
    yield "".join(traceback.format_exception(exc))


def _log_texts(caplog: pytest.LogCaptureFixture) -> Iterator[str]:
    for record in caplog.records:
        yield record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            yield from _texts(record.exc_info[1])


def _assert_hidden(texts: Iterator[str]) -> None:
    for text in texts:
        assert SECRET not in text, f"the secret leaked: {text}"


def _cases() -> Iterator[Any]:
    """(id, call) pairs: each call must raise, showing no secret."""
    for key in PASSWORD_KEYS:
        attr = _attr(key)
        yield pytest.param(lambda k=key, a=attr: ProducerConfig({k: SECRET + "1"}, **{a: SECRET + "2"}), id=f"{key}-twice")  # type: ignore[arg-type]  # a bad value on purpose
        yield pytest.param(lambda a=attr: ProducerConfig(None, **{a: SECRET + "1", a + "_": SECRET}), id=f"{key}-keyword-typo")  # type: ignore[arg-type]  # a bad value on purpose
        yield pytest.param(lambda k=key: ProducerConfig({k: [SECRET]}), id=f"{key}-wrong-type")  # type: ignore[dict-item]  # a bad value on purpose
        yield pytest.param(lambda k=key: ProducerConfig({k: SECRET.encode()}), id=f"{key}-bytes")  # type: ignore[dict-item]  # a bad value on purpose
        yield pytest.param(lambda k=key: ProducerConfig([(k, SECRET)]), id=f"{key}-not-a-mapping")  # type: ignore[arg-type]
        yield pytest.param(lambda k=key: ProducerConfig({k + "s": SECRET}), id=f"{key}-unknown-key")
        yield pytest.param(lambda k=key: ProducerConfig(f"{k}={SECRET}"), id=f"{key}-a-string")  # type: ignore[arg-type]
    # Refused by the security layer at construction, with the secret in place.
    ssl = {"security.protocol": "SSL", "bootstrap.servers": "h:9092"}
    for key in ("ssl.truststore.password", "ssl.keystore.password"):
        yield pytest.param(lambda k=key: Producer({**ssl, k: SECRET}), id=f"{key}-without-its-store")
        location = key.replace("password", "location")
        yield pytest.param(lambda k=key, loc=location: Producer({**ssl, k: SECRET, loc: "/nonexistent/store.p12"}), id=f"{key}-store-missing")
    yield pytest.param(lambda: Producer({**ssl, "ssl.keystore.key": SECRET}), id="ssl.keystore.key-without-chain")
    yield pytest.param(
        lambda: Producer({**ssl, "ssl.keystore.key": SECRET, "ssl.keystore.certificate.chain": "x", "ssl.key.password": SECRET}),
        id="ssl.keystore.key-not-pem",
    )
    yield pytest.param(lambda: Producer({**SASL_PLAIN, "sasl.password": SECRET}), id="sasl.password-without-username")
    yield pytest.param(lambda: Producer({**SASL_PLAIN, "sasl.username": "u", "sasl.password": SECRET + "\0"}), id="sasl.password-nul")
    yield pytest.param(
        lambda: Producer({**SASL_PLAIN, "sasl.username": "u", "sasl.password": SECRET, "sasl.jaas.config": _jaas("")}),
        id="sasl.password-and-jaas",
    )
    jaas_errors = {
        "no-semicolon": f'{PLAIN} required username="u" password="{SECRET}"',
        "unterminated-quote": f'{PLAIN} required username="u" password="{SECRET}',
        "secret-as-module": f"{SECRET} required;",
        "secret-as-flag": f'{PLAIN} {SECRET} username="u";',
        "secret-as-option-name": f'{PLAIN} required username="u" {SECRET};',
        "unknown-module": f'com.example.FooLoginModule required password="{SECRET}";',
        "msk-iam-module": f'software.amazon.msk.auth.iam.IAMLoginModule required awsSecret="{SECRET}";',
        "no-username": f'{PLAIN} required password="{SECRET}";',
        "option-twice": f'{PLAIN} required username="u" password="{SECRET}" password="{SECRET}";',
        "more-after-end": f'{PLAIN} required username="u" password="{SECRET}"; {SECRET}',
        "unterminated-comment": f'{PLAIN} required username="u" password="{SECRET}" /* {SECRET}',
        "nul-in-password": f'{PLAIN} required username="u" password="{SECRET}\\0";',
    }
    for name, text in jaas_errors.items():
        yield pytest.param(lambda t=text: Producer({**SASL_PLAIN, "sasl.jaas.config": t}), id=f"jaas-{name}")
    yield pytest.param(
        lambda: Producer({**SASL_PLAIN, "sasl.mechanism": "SCRAM-SHA-256", "sasl.jaas.config": _jaas(SECRET)}),
        id="jaas-module-does-not-fit-mechanism",
    )
    yield pytest.param(
        lambda: Producer({**SASL_PLAIN, "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": f'{OAUTH} required clientSecret="{SECRET}";'}),
        id="jaas-oauth-without-token-source",
    )
    # Secrets where a secret does not belong: the token itself as the provider, a URL's password.
    yield pytest.param(lambda: ProducerConfig(sasl_oauth_token_provider=SECRET), id="token-as-provider")  # type: ignore[arg-type]  # a bad value on purpose
    yield pytest.param(lambda: ProducerConfig(bootstrap_servers=f"user:{SECRET}@host:9092"), id="bootstrap-userinfo")


def _jaas(password: str) -> str:
    return f'{PLAIN} required username="u" password="{password}";'


@pytest.mark.parametrize("call", list(_cases()))
def test_no_error_path_shows_a_secret(call: Callable[[], object], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Exception) as info:
        call()
    _assert_hidden(_texts(info.value))
    _assert_hidden(_log_texts(caplog))


def _token_provider(client_secret: str) -> str:
    return "token"


def test_no_repr_shows_a_secret(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    everything = {key: SECRET for key in PASSWORD_KEYS}
    config = ProducerConfig(everything, sasl_oauth_token_provider=functools.partial(_token_provider, client_secret=SECRET))
    assert config.sasl_password is not None and config.sasl_password.value == SECRET  # the secret is there, just not shown
    _assert_hidden(iter([repr(config), str(config)]))
    # as_dict() gives the objects themselves (it rebuilds a configuration); its secrets stay Password objects.
    _assert_hidden(iter(repr(config.as_dict()[key]) for key in PASSWORD_KEYS))
    _assert_hidden(iter(repr(getattr(config, _attr(key))) for key in PASSWORD_KEYS))
    same = ProducerConfig({"sasl.password": SECRET}, sasl_password=SECRET)  # given twice, equal: fine
    producer = Producer({**SASL_PLAIN, "sasl.username": "u", "sasl.password": SECRET})
    _assert_hidden(iter([repr(same), repr(producer), str(producer), repr(producer.config)]))
    producer = Producer({**SASL_PLAIN, "sasl.jaas.config": _jaas(SECRET)})
    _assert_hidden(iter([repr(producer), repr(producer.config)]))
    _assert_hidden(_log_texts(caplog))


@pytest.mark.integration
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
async def test_a_connection_that_fails_shows_no_secret(
    mock_cluster: MockCluster, mechanism: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The mock speaks no SASL: authentication fails at connect time, through every layer that logs."""
    caplog.set_level(logging.DEBUG)
    producer = Producer(
        bootstrap_servers=mock_cluster.bootstrap_servers, security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
        sasl_jaas_config=_jaas(SECRET).replace(PLAIN, "org.apache.kafka.common.security.scram.ScramLoginModule")
        if mechanism != "PLAIN" else _jaas(SECRET),
        max_block_ms=500,
    )
    with pytest.raises(Exception) as info:
        await producer.start()
    _assert_hidden(_texts(info.value))
    _assert_hidden(_log_texts(caplog))
    await producer.close()
