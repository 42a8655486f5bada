"""KIP-1139 assertions signed by the client, the rest of the sign-in keys, without a broker.

The assertion decoded back (header, every claim, the signature checked with the public key), golden
for a fixed clock and jti; the template merged as Java layers it; the key rotated on disk; every bad
value of every new key refused at ``Producer(...)`` naming the key; the token request retries counted
(a fake clock and sleep, then at the fake provider); the connect and read timeouts; SASL extensions in
the client-first message; the provider's checks of an assertion; secrets in no repr, message or log.
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature, encode_dss_signature

from aioproducer import Producer
from aioproducer.config import Password, ProducerConfig
from aioproducer.errors import ConfigError, KafkaConnectionError, SaslAuthenticationFailedError
from aioproducer.security.assertion import AssertionSettings, assertion_parts, make_assertion
from aioproducer.security.connector import ConnectionSecurity
from aioproducer.security.oidc import JWT_BEARER, AccessToken, OidcSettings, OidcTokenCache, current_assertion, fetch_token
from aioproducer.security.sasl import OAuthBearerClient
from aioproducer.testing import OidcProvider

URL = "https://idp.example/oauth2/token"
NOW_MS = 1_700_000_000_123
PASSPHRASE = "pa55-phrase-9c1e"
JTI = "0b7a8f3e-0000-4000-8000-000000000001"
JWT_BEARER_RETRIEVER = "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever"


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def decode(assertion: str) -> tuple[dict[str, Any], dict[str, Any], bytes]:
    header, claims, signature = assertion.split(".")
    return json.loads(unb64(header)), json.loads(unb64(claims)), unb64(signature)


def pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, passphrase: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase.encode()) if passphrase else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture
def key_file(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> Path:
    path = tmp_path / "client.key"
    path.write_bytes(pem(rsa_key))
    return path


def rs256_verifies(key: rsa.RSAPrivateKey, assertion: str) -> bool:
    signed, _, signature = assertion.rpartition(".")
    key.public_key().verify(unb64(signature), signed.encode(), padding.PKCS1v15(), hashes.SHA256())
    return True


# ------------------------------------------------------------------------ the assertion


def test_an_rs256_assertion_has_javas_header_and_claims_for_a_fixed_clock_and_jti(key_file: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    settings = AssertionSettings(str(key_file), aud=URL, iss="svc", sub="svc-sub", include_jti=True)
    assertion = make_assertion(settings, NOW_MS, new_jti=lambda: JTI)
    header, claims, signature = decode(assertion)
    assert header == {"alg": "RS256", "typ": "JWT"}
    # iat is whole seconds; exp 300 s after it, nbf 60 s before it (Java's defaults).
    assert claims == {"aud": URL, "iss": "svc", "sub": "svc-sub", "iat": 1_700_000_000, "exp": 1_700_000_300,
                      "nbf": 1_699_999_940, "jti": JTI}
    assert assertion.split(".")[0] == "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9"  # compact JSON, base64url, no padding
    assert "=" not in assertion and len(signature) == 256
    assert rs256_verifies(rsa_key, assertion)


def test_an_es256_signature_is_r_and_s_of_32_bytes_each_and_verifies(tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    path = tmp_path / "ec.key"
    path.write_bytes(pem(key))
    assertion = make_assertion(AssertionSettings(str(path), algorithm="ES256", iss="svc"), NOW_MS)
    header, claims, signature = decode(assertion)
    assert header == {"alg": "ES256", "typ": "JWT"} and "jti" not in claims
    assert len(signature) == 64  # JWS (RFC 7518 §3.4), not DER
    der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
    key.public_key().verify(der, assertion.rpartition(".")[0].encode(), ec.ECDSA(hashes.SHA256()))


def test_the_claim_keys_the_template_and_the_dynamic_part_layer_as_in_java(tmp_path: Path, key_file: Path) -> None:
    template = tmp_path / "template.json"
    template.write_text(json.dumps({
        "header": {"kid": "key-7", "alg": "none", "typ": "other"},
        "payload": {"aud": "from-template", "scope": "kafka", "exp": 1, "jti": "fixed"},
    }))
    settings = AssertionSettings(str(key_file), aud=URL, iss="svc", include_jti=True, template_file=str(template))
    header, claims = assertion_parts(settings, NOW_MS, lambda: JTI)
    # The template overrides the claim keys; alg, typ, iat, exp, nbf and jti override the template.
    assert header == {"kid": "key-7", "alg": "RS256", "typ": "JWT"}
    assert claims == {"aud": "from-template", "iss": "svc", "scope": "kafka", "iat": 1_700_000_000,
                      "exp": 1_700_000_300, "nbf": 1_699_999_940, "jti": JTI}
    template.write_text(json.dumps({"payload": {"sub": "rotated"}}))  # read again for every assertion
    assert assertion_parts(settings, NOW_MS, lambda: JTI)[1]["sub"] == "rotated"


def test_each_assertion_gets_a_new_uuid_jti_only_when_asked(key_file: Path) -> None:
    with_jti = AssertionSettings(str(key_file), include_jti=True)
    first, second = (decode(make_assertion(with_jti, NOW_MS))[1]["jti"] for _ in range(2))
    assert first != second and uuid.UUID(first).version == 4
    assert "jti" not in decode(make_assertion(AssertionSettings(str(key_file)), NOW_MS))[1]


def test_the_exp_and_nbf_keys_move_the_claims(key_file: Path) -> None:
    claims = decode(make_assertion(AssertionSettings(str(key_file), exp_seconds=86400, nbf_seconds=0), NOW_MS))[1]
    assert (claims["exp"] - claims["iat"], claims["iat"] - claims["nbf"]) == (86400, 0)


def test_a_replaced_key_file_signs_the_next_assertion(tmp_path: Path, key_file: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    settings = AssertionSettings(str(key_file))
    assert rs256_verifies(rsa_key, make_assertion(settings, NOW_MS))
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_file.write_bytes(pem(rotated))
    assert rs256_verifies(rotated, make_assertion(settings, NOW_MS))


def test_an_encrypted_key_is_read_with_its_passphrase(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> None:
    path = tmp_path / "encrypted.key"
    path.write_bytes(pem(rsa_key, PASSPHRASE))
    assert b"ENCRYPTED PRIVATE KEY" in path.read_bytes()
    assertion = make_assertion(AssertionSettings(str(path), passphrase=Password(PASSPHRASE)), NOW_MS)
    assert rs256_verifies(rsa_key, assertion)


# ------------------------------------------------------------------------ configuration


def private_key_keys(key_file: Path, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": URL,
        "sasl.oauthbearer.jwt.retriever.class": JWT_BEARER_RETRIEVER,
        "sasl.oauthbearer.assertion.private.key.file": str(key_file),
    } | extra


def oidc_of(config: dict[str, Any]) -> OidcSettings:
    sasl = ConnectionSecurity.from_config(ProducerConfig(config)).sasl
    assert sasl is not None and sasl.oidc is not None
    return sasl.oidc


def test_every_assertion_key_reaches_the_settings(tmp_path: Path, key_file: Path) -> None:
    template = tmp_path / "t.json"
    template.write_text("{}")
    got = oidc_of(private_key_keys(key_file, **{
        "sasl.oauthbearer.assertion.algorithm": "rs256",
        "sasl.oauthbearer.assertion.claim.aud": "aud", "sasl.oauthbearer.assertion.claim.iss": "iss",
        "sasl.oauthbearer.assertion.claim.sub": "sub", "sasl.oauthbearer.assertion.claim.exp.seconds": "600",
        "sasl.oauthbearer.assertion.claim.nbf.seconds": 0, "sasl.oauthbearer.assertion.claim.jti.include": "true",
        "sasl.oauthbearer.assertion.template.file": str(template), "sasl.oauthbearer.scope": "kafka",
    }))
    assert (got.grant_type, got.assertion_file, got.scope) == (JWT_BEARER, None, "kafka")
    assert got.assertion == AssertionSettings(str(key_file), None, "RS256", "aud", "iss", "sub", 600, 0, True, str(template))


def test_librdkafkas_grant_type_chooses_the_jwt_bearer_grant_too(key_file: Path) -> None:
    config = private_key_keys(key_file, **{"sasl.oauthbearer.grant.type": "urn:ietf:params:oauth:grant-type:jwt-bearer"})
    del config["sasl.oauthbearer.jwt.retriever.class"]
    assert oidc_of(config).grant_type == JWT_BEARER
    assert oidc_of(config | {"sasl.oauthbearer.jwt.retriever.class": JWT_BEARER_RETRIEVER}).grant_type == JWT_BEARER


def test_the_assertion_file_wins_over_the_private_key_as_in_java(
    tmp_path: Path, key_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="aioproducer")
    assertion = tmp_path / "a.jwt"
    assertion.write_text("h.c.s")
    got = oidc_of(private_key_keys(key_file, **{"sasl.oauthbearer.assertion.file": str(assertion),
                                                 "sasl.oauthbearer.assertion.claim.iss": "svc"}))
    assert (got.assertion_file, got.assertion) == (str(assertion), None)
    assert current_assertion(got, NOW_MS) == "h.c.s"
    assert ("sasl.oauthbearer.assertion.file is given: sasl.oauthbearer.assertion.claim.iss, "
            "sasl.oauthbearer.assertion.private.key.file ignored (as in Java)") in caplog.text


def test_the_retry_timeout_and_urlencode_keys_reach_the_settings(key_file: Path) -> None:
    got = oidc_of(private_key_keys(key_file, **{
        "sasl.login.retry.backoff.ms": 50, "sasl.login.retry.backoff.max.ms": "700",
        "sasl.login.connect.timeout.ms": 1500, "sasl.login.read.timeout.ms": "2500",
    }))
    assert (got.retry_backoff_ms, got.retry_backoff_max_ms, got.connect_timeout_s, got.read_timeout_s) == (50, 700, 1.5, 2.5)
    defaults = oidc_of(private_key_keys(key_file))
    assert (defaults.retry_backoff_ms, defaults.retry_backoff_max_ms) == (100, 10_000)  # Java's
    assert (defaults.connect_timeout_s, defaults.read_timeout_s, defaults.header_urlencode) == (None, None, False)
    credentials = {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                   "sasl.oauthbearer.token.endpoint.url": URL, "sasl.oauthbearer.client.id": "svc",
                   "sasl.oauthbearer.client.secret": "s", "sasl.oauthbearer.header.urlencode": "TRUE"}
    assert oidc_of(credentials).header_urlencode is True


def ec_key_file(tmp_path: Path, curve: ec.EllipticCurve) -> str:
    path = tmp_path / f"{curve.name}.key"
    path.write_bytes(pem(ec.generate_private_key(curve)))
    return str(path)


def bad_values(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> Iterator[tuple[dict[str, Any], str]]:
    """(keys to add, the start of the message) for every bad value of every new key."""
    not_a_key = tmp_path / "not-a-key.pem"
    not_a_key.write_text("-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWNvbnRlbnQ=\n-----END PRIVATE KEY-----\n")
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(pem(rsa_key, PASSPHRASE))
    a_dir = tmp_path / "a-dir"
    a_dir.mkdir()
    not_json, a_list, bad_header = (tmp_path / name for name in ("not.json", "list.json", "header.json"))
    not_json.write_text("{secret-content")
    a_list.write_text("[1]")
    bad_header.write_text('{"header": [1]}')
    key = "sasl.oauthbearer.assertion.private.key.file"
    yield {key: str(tmp_path / "gone.key")}, f"{key} '{tmp_path / 'gone.key'}' cannot be read: FileNotFoundError"
    yield {key: str(a_dir)}, f"{key} '{a_dir}' cannot be read: IsADirectoryError"
    yield {key: str(not_a_key)}, f"{key} '{not_a_key}' does not hold a PEM private key \\(PKCS#8\\), or the passphrase is wrong"
    yield {key: 5}, f"{key} must be a string"
    yield {key: ec_key_file(tmp_path, ec.SECP256R1())}, f"{key} '.*' holds a EC key; RS256 needs an RSA key"
    yield ({"sasl.oauthbearer.assertion.algorithm": "ES256"}, f"{key} '.*' holds a RSA key; ES256 needs an EC key")
    yield ({key: ec_key_file(tmp_path, ec.SECP384R1()), "sasl.oauthbearer.assertion.algorithm": "ES256"},
           f"{key} '.*' holds an EC key on secp384r1; ES256 needs P-256")
    yield {key: str(encrypted)}, f"{key} '.*' is encrypted: give sasl.oauthbearer.assertion.private.key.passphrase"
    yield ({key: str(encrypted), "sasl.oauthbearer.assertion.private.key.passphrase": "wrong-phrase-77"},
           f"{key} '.*' does not hold a PEM private key \\(PKCS#8\\), or the passphrase is wrong")
    yield ({"sasl.oauthbearer.assertion.private.key.passphrase": PASSPHRASE},
           f"{key} '.*' is not encrypted: drop sasl.oauthbearer.assertion.private.key.passphrase")
    yield {"sasl.oauthbearer.assertion.private.key.passphrase": 7}, "sasl.oauthbearer.assertion.private.key.passphrase must be a string"
    yield {"sasl.oauthbearer.assertion.algorithm": "HS256"}, "sasl.oauthbearer.assertion.algorithm must be one of RS256, ES256"
    for claim in ("aud", "iss", "sub"):
        yield {f"sasl.oauthbearer.assertion.claim.{claim}": 1}, f"sasl.oauthbearer.assertion.claim.{claim} must be a string"
    for value in (-1, 86401, "soon", 1.5):
        yield {"sasl.oauthbearer.assertion.claim.exp.seconds": value}, r"sasl.oauthbearer.assertion.claim.exp.seconds must be an integer in \[0, 86400\]"
    yield {"sasl.oauthbearer.assertion.claim.nbf.seconds": 3601}, r"sasl.oauthbearer.assertion.claim.nbf.seconds must be an integer in \[0, 3600\]"
    yield {"sasl.oauthbearer.assertion.claim.jti.include": "yes"}, "sasl.oauthbearer.assertion.claim.jti.include must be a boolean"
    template = "sasl.oauthbearer.assertion.template.file"
    yield {template: str(tmp_path / "none.json")}, f"{template} '.*' cannot be read: FileNotFoundError"
    yield {template: str(not_json)}, f"{template} '{not_json}' is not JSON"
    yield {template: str(a_list)}, f"{template} '.*' must hold a JSON object"
    yield {template: str(bad_header)}, f"{template} '.*': \"header\" must be a JSON object"
    yield {template: 3}, f"{template} must be a string"
    yield {"sasl.oauthbearer.grant.type": "password"}, "sasl.oauthbearer.grant.type must be one of client_credentials, urn:ietf"
    yield ({"sasl.oauthbearer.grant.type": "client_credentials"},
           "sasl.oauthbearer.jwt.retriever.class=.*JwtBearerJwtRetriever and sasl.oauthbearer.grant.type=client_credentials "
           r"\(librdkafka's switch\) disagree")
    yield {"sasl.login.retry.backoff.ms": -1}, "sasl.login.retry.backoff.ms must be an integer >= 0"
    yield {"sasl.login.retry.backoff.max.ms": "x"}, "sasl.login.retry.backoff.max.ms must be an integer >= 0"
    yield ({"sasl.login.retry.backoff.ms": 500, "sasl.login.retry.backoff.max.ms": 200},
           r"sasl.login.retry.backoff.max.ms \(200\) must be >= sasl.login.retry.backoff.ms \(500\)")
    yield {"sasl.login.connect.timeout.ms": 0}, "sasl.login.connect.timeout.ms must be an integer >= 1"
    yield {"sasl.login.read.timeout.ms": "slow"}, "sasl.login.read.timeout.ms must be an integer >= 1"
    yield {"sasl.oauthbearer.header.urlencode": "maybe"}, "sasl.oauthbearer.header.urlencode must be a boolean"
    yield {"sasl.oauthbearer.extensions": "a=1,nokey"}, "sasl.oauthbearer.extensions must be key=value pairs separated by commas"
    yield {"sasl.oauthbearer.extensions": "a=1,a=2"}, "sasl.oauthbearer.extensions: extension 'a' given twice"
    yield {"sasl.oauthbearer.extensions": "auth=x"}, "sasl.oauthbearer.extensions: OAUTHBEARER extension name 'auth' must be ASCII letters"
    yield {"sasl.oauthbearer.extensions": "a=\x01"}, "sasl.oauthbearer.extensions: OAUTHBEARER extension 'a' has a value with a character"
    yield {"sasl.oauthbearer.extensions": 5}, "sasl.oauthbearer.extensions must be a string"
    yield ({"sasl.oauthbearer.assertion.jwt.template.file": "t.json"},
           "librdkafka's sasl.oauthbearer.assertion.jwt.template.file is not supported here: give Java's sasl.oauthbearer.assertion.template.file")
    yield ({"sasl.oauthbearer.assertion.private.key.pem": "-----BEGIN"},
           "librdkafka's sasl.oauthbearer.assertion.private.key.pem .* give Java's sasl.oauthbearer.assertion.private.key.file")
    yield ({"sasl.oauthbearer.jwt.retriever.class": "DefaultJwtRetriever", "sasl.oauthbearer.client.id": "svc",
            "sasl.oauthbearer.client.secret": "s"},
           "sasl.oauthbearer.assertion.private.key.file: for the JWT bearer grant only; set sasl.oauthbearer.jwt.retriever.class=")


def test_every_bad_value_of_every_new_key_fails_when_the_producer_is_made_naming_the_key(
    tmp_path: Path, key_file: Path, rsa_key: rsa.RSAPrivateKey
) -> None:
    secret_text = pem(rsa_key).decode().splitlines()[1]
    for extra, message in bad_values(tmp_path, rsa_key):
        with pytest.raises(ConfigError, match=message) as info:
            Producer(private_key_keys(key_file, **extra))
        text = str(info.value)
        for secret in (PASSPHRASE, "wrong-phrase-77", secret_text, "c2VjcmV0LWNvbnRlbnQ", "secret-content"):
            assert secret not in text, (extra, text)


def test_librdkafkas_inline_key_is_refused_as_a_keyword_too() -> None:
    with pytest.raises(ConfigError, match="give Java's sasl.oauthbearer.assertion.private.key.file") as info:
        ProducerConfig(sasl_oauthbearer_assertion_private_key_pem="-----BEGIN PRIVATE KEY-----secret")  # type: ignore[call-arg]  # a bad value on purpose
    assert "secret" not in str(info.value)


async def test_a_key_file_gone_after_start_fails_the_token_request_naming_the_key(key_file: Path) -> None:
    security = ConnectionSecurity.from_config(ProducerConfig(private_key_keys(key_file)))
    assert security.oidc_tokens is not None
    key_file.unlink()
    with pytest.raises(SaslAuthenticationFailedError,
                       match=f"OAUTHBEARER: sasl.oauthbearer.assertion.private.key.file '{key_file}' cannot be read: FileNotFoundError"):
        await security.oidc_tokens.token()


def test_retry_and_timeout_keys_without_the_token_endpoint_are_refused() -> None:
    with pytest.raises(ConfigError, match="sasl.login.read.timeout.ms given without sasl.oauthbearer.token.endpoint.url"):
        Producer({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                  "sasl.username": "u", "sasl.password": "p", "sasl.login.read.timeout.ms": 100})


def test_secrets_are_in_no_repr_and_no_log(tmp_path: Path, rsa_key: rsa.RSAPrivateKey, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aioproducer")
    path = tmp_path / "encrypted.key"
    path.write_bytes(pem(rsa_key, PASSPHRASE))
    producer = Producer(private_key_keys(path, **{"sasl.oauthbearer.assertion.private.key.passphrase": PASSPHRASE}))
    security = producer._engine._security
    assert security.sasl is not None and security.sasl.oidc is not None
    assertion = current_assertion(security.sasl.oidc, NOW_MS)
    shown = [repr(producer.config), repr(security), repr(security.sasl.oidc), repr(security.sasl.oidc.assertion),
             repr(security.oidc_tokens), str(producer.config.as_dict()), caplog.text]
    key_lines = pem(rsa_key, PASSPHRASE).decode().splitlines()[1:3]
    for text in shown:
        for secret in (PASSPHRASE, assertion, *key_lines):
            assert secret not in text
    assert "[hidden]" in repr(producer.config)


# ------------------------------------------------------------------------ retries


class Clock:
    """A clock only the recorded sleeps move."""

    def __init__(self) -> None:
        self.now = NOW_MS
        self.sleeps_ms: list[int] = []

    async def sleep(self, seconds: float) -> None:
        self.sleeps_ms.append(round(seconds * 1000))
        self.now += round(seconds * 1000)


def failing(times: int, error: Exception) -> tuple[list[int], Any]:
    calls: list[int] = []

    async def fetch(settings: OidcSettings, now_ms: int) -> AccessToken:
        calls.append(now_ms)
        if len(calls) <= times:
            raise error
        return AccessToken("token", now_ms, now_ms + 60_000)

    return calls, fetch


def cache_with(clock: Clock, fetch: Any, **settings: Any) -> OidcTokenCache:
    oidc = OidcSettings(URL, "svc", Password("s"), **settings)
    return OidcTokenCache(oidc, fetch=fetch, clock_ms=lambda: clock.now, sleep=clock.sleep)


async def test_a_failing_request_is_retried_after_waits_that_double() -> None:
    clock = Clock()
    calls, fetch = failing(4, KafkaConnectionError("HTTP 503"))
    assert await cache_with(clock, fetch).token() == "token"
    assert clock.sleeps_ms == [100, 200, 400, 800]
    assert calls == [NOW_MS, NOW_MS + 100, NOW_MS + 300, NOW_MS + 700, NOW_MS + 1500]


async def test_retries_end_when_backoff_max_is_spent_the_last_wait_cut_to_fit() -> None:
    clock = Clock()
    calls, fetch = failing(100, KafkaConnectionError("HTTP 503"))
    with pytest.raises(KafkaConnectionError, match="HTTP 503"):
        await cache_with(clock, fetch, retry_backoff_ms=100, retry_backoff_max_ms=1000).token()
    assert clock.sleeps_ms == [100, 200, 400, 300] and len(calls) == 5
    clock = Clock()
    calls, fetch = failing(100, KafkaConnectionError("HTTP 503"))
    with pytest.raises(KafkaConnectionError):
        await cache_with(clock, fetch, retry_backoff_ms=100, retry_backoff_max_ms=10_000).token()
    assert clock.sleeps_ms == [100, 200, 400, 800, 1600, 3200, 3700]  # Java's defaults: 8 attempts in 10 s


async def test_a_refusal_is_not_retried() -> None:
    clock = Clock()
    calls, fetch = failing(1, SaslAuthenticationFailedError("HTTP 401"))
    with pytest.raises(SaslAuthenticationFailedError):
        await cache_with(clock, fetch).token()
    assert clock.sleeps_ms == [] and len(calls) == 1


async def test_the_provider_counts_the_retries_and_a_refusal_is_asked_once(tmp_path: Path) -> None:
    waits: list[float] = []

    async def recorded(seconds: float) -> None:
        waits.append(seconds)

    with OidcProvider(clients={"svc": "svc-secret"}) as provider:
        provider.fail_next(3)
        settings = OidcSettings(provider.token_endpoint_url, "svc", Password("svc-secret"))
        assert await OidcTokenCache(settings, sleep=recorded).token()
        assert [r.status for r in provider.requests] == [503, 503, 503, 200]
        assert waits == [0.1, 0.2, 0.4]
        provider.fail_next(1, status=501)  # Java does not retry 501 (nor 4xx but 408 and 429)
        with pytest.raises(SaslAuthenticationFailedError, match="HTTP 501"):
            await OidcTokenCache(settings, sleep=recorded).token()
        assert [r.status for r in provider.requests][4:] == [501] and len(waits) == 3
        with pytest.raises(ValueError, match="fail_next: count must be an int >= 0"):
            provider.fail_next(-1)


async def test_the_read_timeout_ends_a_request_the_endpoint_never_answers() -> None:
    """A listener that accepts and says nothing: the read timeout, not request.timeout.ms (30 s), ends the wait."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        url = f"http://127.0.0.1:{server.getsockname()[1]}/token"
        settings = OidcSettings(url, "svc", Password("s"), timeout_s=30, read_timeout_s=0.2)
        # aiohttp's read timeout (SocketTimeoutError; ServerTimeoutError before 3.10), not the total's TimeoutError.
        with pytest.raises(KafkaConnectionError, match="could not be reached: (Socket|Server)TimeoutError"):
            await fetch_token(settings, NOW_MS)


# ------------------------------------------------------------------------ extensions


async def first_message(config: dict[str, Any], token: str = "tok") -> bytes:
    security = ConnectionSecurity.from_config(ProducerConfig(config))
    if security.oidc_tokens is not None:
        async def fetch(settings: OidcSettings, now_ms: int) -> AccessToken:
            return AccessToken(token, now_ms, now_ms + 60_000)
        security.oidc_tokens._fetch = fetch
    make = security.authenticator()
    assert make is not None
    client = await make("broker.example")
    assert isinstance(client, OAuthBearerClient)
    return client.initial_response()


async def test_extensions_go_in_the_client_first_message_from_librdkafkas_key_and_javas_jaas_options() -> None:
    oidc = {"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": URL}
    jaas = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId="svc" '
            'clientSecret="s" extension_logicalCluster="lkc-1" extension_identityPoolId="pool-2";')
    assert await first_message(oidc | {"sasl.jaas.config": jaas}) == (
        b"n,,\x01auth=Bearer tok\x01logicalCluster=lkc-1\x01identityPoolId=pool-2\x01\x01")
    librdkafka = oidc | {"sasl.oauthbearer.client.id": "svc", "sasl.oauthbearer.client.secret": "s",
                         "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=pool-2"}
    assert await first_message(librdkafka) == (
        b"n,,\x01auth=Bearer tok\x01logicalCluster=lkc-1\x01identityPoolId=pool-2\x01\x01")
    # The key wins over the JAAS option of the same name.
    both = oidc | {"sasl.jaas.config": jaas, "sasl.oauthbearer.extensions": "identityPoolId=pool-9"}
    assert b"identityPoolId=pool-9\x01" in await first_message(both)
    unsecured = {"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                 "sasl.jaas.config": 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                                     'unsecuredLoginStringClaim_sub="alice" unsecuredLoginExtension_traceId="t1";'}
    assert (await first_message(unsecured)).endswith(b"\x01traceId=t1\x01\x01")
    provider = {"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                "sasl_oauth_token_provider": lambda: "mine", "sasl.oauthbearer.extensions": "a=1"}
    assert await first_message(provider) == b"n,,\x01auth=Bearer mine\x01a=1\x01\x01"
    with pytest.raises(ConfigError, match="sasl.oauthbearer.extensions are OAUTHBEARER's: sasl.mechanism is PLAIN"):
        Producer({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                  "sasl.username": "u", "sasl.password": "p", "sasl.oauthbearer.extensions": "a=1"})


# ------------------------------------------------------------------------ the provider's checks


def signed(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, header: dict[str, Any], claims: dict[str, Any]) -> str:
    """An assertion forged by the test: any header over any key (an RS256 signature under "alg": "ES256" too)."""
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
    if isinstance(key, rsa.RSAPrivateKey):
        signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    else:
        r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
    return f"{signing_input}.{b64(signature)}"


async def test_the_provider_checks_an_assertion_against_the_registered_public_key(
    tmp_path: Path, key_file: Path, rsa_key: rsa.RSAPrivateKey
) -> None:
    with OidcProvider(clients={"svc": "svc-secret"}) as provider:
        provider.register_client_key("svc", rsa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        good = AssertionSettings(str(key_file), aud=provider.token_endpoint_url, iss="svc", sub="svc", include_jti=True)
        settings = OidcSettings(provider.token_endpoint_url, "", Password(""), grant_type=JWT_BEARER, assertion=good)
        now_ms = int(time.time() * 1000)
        assert (await fetch_token(settings, now_ms)).value
        claims = decode(make_assertion(good, now_ms))[1]
        other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        refused = {
            "the assertion's signature does not verify": signed(other, {"alg": "RS256"}, claims | {"jti": "j1"}),
            "the assertion's alg 'ES256' does not fit the key registered for its issuer": signed(rsa_key, {"alg": "ES256"}, claims | {"jti": "j2"}),
            "the assertion has expired": signed(rsa_key, {"alg": "RS256"}, claims | {"exp": claims["iat"] - 1, "jti": "j3"}),
            "the assertion expires too far in the future": signed(rsa_key, {"alg": "RS256"}, claims | {"exp": claims["exp"] * 1000, "jti": "j4"}),
            "the assertion is not valid yet": signed(rsa_key, {"alg": "RS256"}, claims | {"nbf": claims["iat"] + 3600, "jti": "j5"}),
            "the assertion is for another audience": signed(rsa_key, {"alg": "RS256"}, claims | {"aud": "https://else", "jti": "j6"}),
            "the assertion's issuer has no registered key": signed(rsa_key, {"alg": "RS256"}, claims | {"iss": "nobody", "jti": "j7"}),
        }
        assertion_file = tmp_path / "a.jwt"
        by_file = OidcSettings(provider.token_endpoint_url, "", Password(""), grant_type=JWT_BEARER, assertion_file=str(assertion_file))
        for description, assertion in refused.items():
            assertion_file.write_text(assertion)
            with pytest.raises(SaslAuthenticationFailedError, match=rf"HTTP 400\): invalid_grant: {description}") as info:
                await fetch_token(by_file, now_ms)
            assert assertion not in str(info.value)
        replayed = signed(rsa_key, {"alg": "RS256"}, claims | {"jti": "once"})
        assertion_file.write_text(replayed)
        assert (await fetch_token(by_file, now_ms)).value
        with pytest.raises(SaslAuthenticationFailedError, match="the assertion's jti was used before"):
            await fetch_token(by_file, now_ms)
        ec_key = ec.generate_private_key(ec.SECP256R1())
        provider.register_client_key("svc", ec_key.public_key())
        assertion_file.write_text(signed(ec_key, {"alg": "ES256"}, claims | {"jti": "ec"}))
        assert (await fetch_token(by_file, now_ms)).value
        with pytest.raises(ValueError, match="register_client_key: unknown client 'nobody'"):
            provider.register_client_key("nobody", ec_key.public_key())
