"""OIDC sign-in (KIP-768) without a broker: the token request, the provider's answers, the refresh rule,
the cache, the configuration (each key's bad values and conflicts), secrets never shown, and the fake
provider itself (its tokens verify against its JWKS; an aiohttp fetch against it end to end)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import urllib.parse
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from aioproducer import Producer
from aioproducer.config import Password, ProducerConfig
from aioproducer.errors import ConfigError, KafkaConnectionError, SaslAuthenticationFailedError
from aioproducer.security.connector import ConnectionSecurity
from aioproducer.security.oidc import (
    JWT_BEARER,
    AccessToken,
    OidcSettings,
    OidcTokenCache,
    RefreshSettings,
    fetch_token,
    parse_token_response,
    read_assertion,
    refresh_at_ms,
    token_request,
)
from aioproducer.security.sasl import OAuthBearerClient, unsecured_jwt
from aioproducer.testing import OidcProvider

SECRET = "cl13nt-s3cret:&=+/"
URL = "https://idp.example/oauth2/token"
NOW = 1_700_000_000_000


def settings(**kwargs: Any) -> OidcSettings:
    return OidcSettings(URL, kwargs.pop("client_id", "svc"), Password(SECRET), **kwargs)


def jwt(exp_s: int) -> str:
    """An unsecured JWT issued an hour before NOW whose exp claim is ``exp_s`` (seconds)."""
    issued_ms = NOW - 3_600_000
    return unsecured_jwt("svc", lifetime_ms=exp_s * 1000 - issued_ms, now_ms=issued_ms)


# ------------------------------------------------------------------------ the request


def basic_credentials(headers: dict[str, str]) -> tuple[str, str]:
    user, _, password = base64.b64decode(headers["Authorization"].removeprefix("Basic ")).decode().partition(":")
    return user, password


def test_the_request_is_a_client_credentials_form_with_basic_auth_of_the_id_and_secret_as_they_are() -> None:
    """Java's default (``sasl.oauthbearer.header.urlencode=false``): the id and secret go into the Basic header unchanged."""
    headers, body = token_request(settings(client_id="svc id", scope="kafka write"))
    assert urllib.parse.parse_qs(body.decode()) == {"grant_type": ["client_credentials"], "scope": ["kafka write"]}
    assert headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert basic_credentials(headers) == ("svc id", SECRET)
    _, no_scope = token_request(settings())
    assert no_scope == b"grant_type=client_credentials"


def test_header_urlencode_form_url_encodes_the_id_and_secret_first() -> None:
    """KIP-1025, RFC 6749 §2.3.1: each part form-url-encoded before the Basic encoding (the secret holds ':')."""
    headers, _ = token_request(settings(client_id="svc id", header_urlencode=True))
    user, password = basic_credentials(headers)
    assert (user, password) == ("svc%20id", urllib.parse.quote(SECRET, safe=""))
    assert urllib.parse.unquote(password) == SECRET


# ------------------------------------------------------------------------ the answer


def answer(**document: object) -> bytes:
    return json.dumps(document).encode()


def test_a_jwts_exp_claim_in_seconds_is_the_expiry() -> None:
    token = jwt(exp_s=NOW // 1000 + 3600)
    got = parse_token_response(200, answer(access_token=token, expires_in=5), NOW, url=URL)
    assert (got.value, got.received_ms, got.expires_ms) == (token, NOW, NOW + 3_600_000)  # exp wins over expires_in


def test_an_opaque_tokens_expires_in_is_seconds_from_now() -> None:
    got = parse_token_response(200, answer(access_token="opaque-abc", expires_in=300), NOW, url=URL)
    assert got.expires_ms == NOW + 300_000


@pytest.mark.parametrize("document, message", [
    ({"token_type": "Bearer"}, "answered without an access_token"),
    ({"access_token": ""}, "answered without an access_token"),
    ({"access_token": "opaque"}, "does not say when it expires"),
    ({"access_token": "opaque", "expires_in": True}, "does not say when it expires"),
    ({"access_token": "opaque", "expires_in": 0}, "does not say when it expires"),
])
def test_an_answer_without_a_usable_token_is_refused(document: dict[str, object], message: str) -> None:
    with pytest.raises(SaslAuthenticationFailedError, match=message):
        parse_token_response(200, answer(**document), NOW, url=URL)


def test_an_expired_token_is_refused() -> None:
    with pytest.raises(SaslAuthenticationFailedError, match="handed out an expired token"):
        parse_token_response(200, answer(access_token=jwt(exp_s=NOW // 1000 - 1)), NOW, url=URL)


def test_a_refusal_carries_the_providers_error_and_never_the_secret() -> None:
    body = answer(error="invalid_client", error_description=f"bad secret {SECRET}")
    with pytest.raises(SaslAuthenticationFailedError) as info:
        parse_token_response(401, body, NOW, url=URL, secrets=[SECRET])
    assert str(info.value).endswith(f"the token endpoint {URL} refused the client (HTTP 401): invalid_client: bad secret ***")
    with pytest.raises(SaslAuthenticationFailedError, match=r"\(HTTP 403\): forbidden$"):
        parse_token_response(403, b"forbidden", NOW, url=URL)


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 429])
def test_a_failing_or_busy_provider_is_a_retriable_connection_error(status: int) -> None:
    with pytest.raises(KafkaConnectionError, match=f"answered HTTP {status}: temporarily_unavailable"):
        parse_token_response(status, answer(error="temporarily_unavailable"), NOW, url=URL)


@pytest.mark.parametrize("status", [400, 404, 501, 505])
def test_the_statuses_java_does_not_retry_are_refusals(status: int) -> None:
    """Java's HttpJwtRetriever: every 4xx but 408 and 429, and 501 and 505, end the request at once."""
    with pytest.raises(SaslAuthenticationFailedError, match=rf"\(HTTP {status}\): nope"):
        parse_token_response(status, answer(error="nope"), NOW, url=URL)


# ------------------------------------------------------------------------ the refresh point


def token(lifetime_s: int) -> AccessToken:
    return AccessToken("t", NOW, NOW + lifetime_s * 1000)


@pytest.mark.parametrize("lifetime_s, refresh, draw, expected_s", [
    (3600, RefreshSettings(), 0.0, 2880),  # 80 % of an hour; the buffer (300 s before expiry) is not reached
    (3600, RefreshSettings(), 1.0, 3060),  # plus the whole jitter: 85 %
    (3600, RefreshSettings(buffer_seconds=900), 0.0, 2700),  # moved earlier to leave the buffer
    (1000, RefreshSettings(window_factor=0.5, min_period_seconds=600, buffer_seconds=0), 0.0, 600),  # not before the min period
    (300, RefreshSettings(), 0.0, 240),  # 60 + 300 s do not fit in 300 s: the window point stands
    (12, RefreshSettings(window_factor=0.5, min_period_seconds=0, buffer_seconds=0), 0.5, 6.3),
])
def test_the_refresh_point_follows_javas_rule(lifetime_s: int, refresh: RefreshSettings, draw: float, expected_s: float) -> None:
    assert refresh_at_ms(token(lifetime_s), refresh, draw) == NOW + int(expected_s * 1000)


# ------------------------------------------------------------------------ the cache


class FakeIdp:
    """A fetcher handing out numbered tokens that live ``lifetime_ms``, on a clock the test moves."""

    def __init__(self, lifetime_ms: int = 10_000) -> None:
        self.now = NOW
        self.lifetime_ms = lifetime_ms
        self.fetches = 0

    async def fetch(self, settings: OidcSettings, now_ms: int) -> AccessToken:
        self.fetches += 1
        await asyncio.sleep(0)  # let concurrent callers pile up behind the fetch
        return AccessToken(f"token-{self.fetches}", now_ms, now_ms + self.lifetime_ms)


def cache_for(idp: FakeIdp) -> OidcTokenCache:
    refresh = RefreshSettings(window_factor=0.8, window_jitter=0.0, min_period_seconds=0, buffer_seconds=0)
    return OidcTokenCache(settings(refresh=refresh), fetch=idp.fetch, clock_ms=lambda: idp.now, draw=lambda: 0.0)


async def test_the_token_is_reused_until_its_refresh_point_then_fetched_again() -> None:
    idp = FakeIdp(lifetime_ms=10_000)
    cache = cache_for(idp)
    assert await cache.token() == "token-1" and cache.refresh_at == NOW + 8_000
    idp.now += 7_999
    assert await cache.token() == "token-1"
    idp.now += 1
    assert await cache.token() == "token-2"
    assert cache.refresh_at == idp.now + 8_000 and idp.fetches == 2


async def test_concurrent_authentications_share_one_fetch() -> None:
    idp = FakeIdp()
    cache = cache_for(idp)
    tokens = await asyncio.gather(*(cache.token() for _ in range(10)))
    assert tokens == ["token-1"] * 10 and idp.fetches == 1


async def test_a_failed_fetch_keeps_nothing_and_the_next_authentication_tries_again() -> None:
    """With retries off (sasl.login.retry.backoff.max.ms=0) the failure is the caller's at once."""
    idp = FakeIdp()
    fail = [True]

    async def flaky(settings: OidcSettings, now_ms: int) -> AccessToken:
        if fail.pop(0) if fail else False:
            raise KafkaConnectionError("down")
        return await idp.fetch(settings, now_ms)

    cache = OidcTokenCache(settings(retry_backoff_max_ms=0), fetch=flaky, clock_ms=lambda: idp.now)
    with pytest.raises(KafkaConnectionError):
        await cache.token()
    assert await cache.token() == "token-1"


async def test_the_authenticator_presents_the_cached_token() -> None:
    security = ConnectionSecurity.from_config(ProducerConfig(oidc_keys()))
    assert security.oidc_tokens is not None
    idp = FakeIdp()
    security.oidc_tokens._fetch = idp.fetch
    make = security.authenticator()
    assert make is not None
    first, second = await make("broker.example"), await make("broker.example")
    assert isinstance(first, OAuthBearerClient) and isinstance(second, OAuthBearerClient)
    assert first.initial_response() == second.initial_response() == b"n,,\x01auth=Bearer token-1\x01\x01"
    assert idp.fetches == 1


# ------------------------------------------------------------------------ configuration


def oidc_keys(**extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": URL,
        "sasl.oauthbearer.client.credentials.client.id": "svc",
        "sasl.oauthbearer.client.credentials.client.secret": SECRET,
    } | extra


def oidc_of(config: dict[str, Any]) -> OidcSettings:
    sasl = ConnectionSecurity.from_config(ProducerConfig(config)).sasl
    assert sasl is not None and sasl.oidc is not None
    return sasl.oidc


JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
        f'clientId="jaas-id" clientSecret="jaas-{SECRET}" scope="jaas-scope";')


def test_javas_keys_librdkafkas_keys_and_the_jaas_line_each_give_the_client() -> None:
    java = oidc_of(oidc_keys(**{"sasl.oauthbearer.scope": "kafka", "request.timeout.ms": 5000}))
    assert (java.token_endpoint_url, java.client_id, java.client_secret.value, java.scope) == (URL, "svc", SECRET, "kafka")
    assert java.timeout_s == 5.0 and java.refresh == RefreshSettings()
    rdkafka = oidc_of({
        "bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL", "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": URL,
        "sasl.oauthbearer.client.id": "rd", "sasl.oauthbearer.client.secret": SECRET,
    })
    assert (rdkafka.client_id, rdkafka.client_secret.value, rdkafka.scope) == ("rd", SECRET, None)
    jaas = oidc_of({"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                    "sasl.oauthbearer.token.endpoint.url": URL, "sasl.jaas.config": JAAS})
    assert (jaas.client_id, jaas.client_secret.value, jaas.scope) == ("jaas-id", f"jaas-{SECRET}", "jaas-scope")


def test_the_keys_win_over_the_jaas_line_as_in_java() -> None:
    both = oidc_of(oidc_keys(**{"sasl.jaas.config": JAAS}))
    assert (both.client_id, both.client_secret.value, both.scope) == ("svc", SECRET, "jaas-scope")
    same = oidc_of(oidc_keys(**{"sasl.oauthbearer.client.id": "svc", "sasl.oauthbearer.client.secret": SECRET}))
    assert same.client_id == "svc"


def test_the_refresh_keys_reach_the_cache() -> None:
    got = oidc_of(oidc_keys(**{
        "sasl.login.refresh.window.factor": "0.5", "sasl.login.refresh.window.jitter": 0,
        "sasl.login.refresh.min.period.seconds": 1, "sasl.login.refresh.buffer.seconds": "2",
    }))
    assert got.refresh == RefreshSettings(0.5, 0.0, 1, 2)


@pytest.mark.parametrize("extra, message", [
    ({"sasl.login.refresh.window.factor": 0.4}, r"sasl.login.refresh.window.factor must be a number in \[0.5, 1.0\], got 0.4"),
    ({"sasl.login.refresh.window.factor": "x"}, r"sasl.login.refresh.window.factor must be a number in \[0.5, 1.0\], got 'x'"),
    ({"sasl.login.refresh.window.jitter": 0.3}, r"sasl.login.refresh.window.jitter must be a number in \[0.0, 0.25\]"),
    ({"sasl.login.refresh.window.jitter": True}, r"sasl.login.refresh.window.jitter must be a number"),
    ({"sasl.login.refresh.min.period.seconds": 901}, r"sasl.login.refresh.min.period.seconds must be an integer in \[0, 900\]"),
    ({"sasl.login.refresh.buffer.seconds": -1}, r"sasl.login.refresh.buffer.seconds must be an integer in \[0, 3600\]"),
    ({"sasl.oauthbearer.method": "aws"}, "sasl.oauthbearer.method must be one of default, oidc, got 'aws'"),
    ({"sasl.oauthbearer.token.endpoint.url": 5}, "sasl.oauthbearer.token.endpoint.url must be a string"),
    ({"sasl.oauthbearer.token.endpoint.url": "ftp://idp/token"}, "must be an http:// or https:// URL with a host"),
    ({"sasl.oauthbearer.token.endpoint.url": "idp.example/token"}, "must be an http:// or https:// URL with a host"),
    ({"sasl.oauthbearer.token.endpoint.url": "https://u:pw-9@idp/token"}, "may not hold a user or password"),
    ({"sasl.oauthbearer.client.credentials.client.id": None}, "the client id missing"),
    ({"sasl.oauthbearer.client.credentials.client.secret": None, "sasl.oauthbearer.client.credentials.client.id": None},
     "the client id and client secret missing"),
    ({"sasl.oauthbearer.client.id": "other"},
     r"sasl.oauthbearer.client.credentials.client.id and sasl.oauthbearer.client.id \(librdkafka's name\) disagree"),
    ({"sasl.oauthbearer.client.secret": "other-secret"}, "client.secret and sasl.oauthbearer.client.secret .* disagree"),
    ({"sasl.mechanism": "PLAIN"}, "sasl.oauthbearer.token.endpoint.url needs sasl.mechanism=OAUTHBEARER, not PLAIN"),
    ({"sasl_oauth_token_provider": lambda: "t"}, "sasl_oauth_token_provider and sasl.oauthbearer.token.endpoint.url both give tokens"),
    ({"sasl.login.callback.handler.class": "com.example.MyHandler"},
     "sasl.login.callback.handler.class: only org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"),
])
def test_bad_oidc_settings_fail_when_the_producer_is_made(extra: dict[str, Any], message: str) -> None:
    config = {k: v for k, v in oidc_keys(**extra).items() if v is not None}
    with pytest.raises(ConfigError, match=message) as info:
        Producer(config)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("extra, message", [
    ({"sasl.oauthbearer.method": "oidc"}, "sasl.oauthbearer.method=oidc needs sasl.oauthbearer.token.endpoint.url"),
    ({"sasl.login.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"},
     "sasl.login.callback.handler.class=.*OAuthBearerLoginCallbackHandler needs sasl.oauthbearer.token.endpoint.url"),
    ({"sasl.oauthbearer.client.id": "svc", "sasl.oauthbearer.scope": "s"},
     "sasl.oauthbearer.client.id, sasl.oauthbearer.scope given without sasl.oauthbearer.token.endpoint.url"),
])
def test_oidc_keys_without_the_endpoint_are_refused(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Producer({"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",  # type: ignore[arg-type]  # a dict merged with `|`: dict[str, object] to mypy
                  "sasl_oauth_token_provider": lambda: "t"} | extra)


def test_the_secret_is_in_no_repr_and_no_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="aioproducer")
    config = oidc_keys(**{"sasl.jaas.config": JAAS, "sasl.oauthbearer.client.secret": SECRET})
    producer = Producer(config)
    security = producer._engine._security
    assert security.sasl is not None and security.sasl.oidc is not None
    texts = [repr(producer.config), str(producer.config.as_dict()), repr(security), repr(security.sasl),
             repr(security.sasl.oidc), repr(security.oidc_tokens), repr(AccessToken(SECRET, 1, 2)), caplog.text]
    for text in texts:
        assert SECRET not in text, text
    assert "client_id='svc'" in repr(security.sasl.oidc)


# ------------------------------------------------------------------------ the fake provider


def verify(provider: OidcProvider, token: str, jwks: dict[str, Any]) -> dict[str, Any]:
    """Check a token's RS256 signature with the JWKS's key, as a broker does; its claims."""
    def unb64(text: str) -> bytes:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))

    header_b64, claims_b64, signature_b64 = token.split(".")
    header = json.loads(unb64(header_b64))
    (key,) = [k for k in jwks["keys"] if k["kid"] == header["kid"]]
    public = rsa.RSAPublicNumbers(int.from_bytes(unb64(key["e"]), "big"), int.from_bytes(unb64(key["n"]), "big")).public_key()
    public.verify(unb64(signature_b64), f"{header_b64}.{claims_b64}".encode(), padding.PKCS1v15(), hashes.SHA256())
    assert header["alg"] == "RS256"
    claims: dict[str, Any] = json.loads(unb64(claims_b64))
    return claims


async def test_the_providers_tokens_verify_against_its_jwks_and_every_request_is_logged() -> None:
    with OidcProvider(clients={"svc": SECRET}, token_lifetime_s=120, audience="kafka") as provider:
        async with aiohttp.ClientSession() as session:
            async with session.get(provider.jwks_endpoint_url) as response:
                jwks = await response.json()
        s = OidcSettings(provider.token_endpoint_url, "svc", Password(SECRET), scope="kafka")
        got = await fetch_token(s, NOW)
        claims = verify(provider, got.value, jwks)
        assert claims["sub"] == "svc" and claims["scope"] == "kafka" and claims["aud"] == "kafka"
        assert claims["exp"] - claims["iat"] == 120 and claims["iss"] == provider.issuer
        assert got.expires_ms == claims["exp"] * 1000
        with pytest.raises(SaslAuthenticationFailedError, match="HTTP 401.*invalid_client") as info:
            await fetch_token(OidcSettings(provider.token_endpoint_url, "svc", Password("wrong-secret")), NOW)
        assert "wrong-secret" not in str(info.value)
        with pytest.raises(SaslAuthenticationFailedError, match="HTTP 401"):
            await fetch_token(OidcSettings(provider.token_endpoint_url, "nobody", Password(SECRET)), NOW)
        assert [(r.client_id, r.status, r.scope) for r in provider.requests] == [
            ("svc", 200, "kafka"), ("svc", 401, None), ("nobody", 401, None)]
        assert provider.tokens_issued() == 1 and provider.tokens_issued("nobody") == 0
        assert SECRET not in repr(provider) and SECRET not in repr(provider.requests)


async def test_the_provider_refuses_other_grants_and_takes_form_credentials() -> None:
    with OidcProvider(clients={"svc": SECRET}) as provider:
        async with aiohttp.ClientSession() as session:
            form = {"grant_type": "password", "client_id": "svc", "client_secret": SECRET}
            async with session.post(provider.token_endpoint_url, data=form) as response:
                assert response.status == 400
                assert (await response.json())["error"] == "unsupported_grant_type"
            form["grant_type"] = "client_credentials"
            async with session.post(provider.token_endpoint_url, data=form) as response:
                assert response.status == 200 and (await response.json())["expires_in"] == 3600
        provider.set_token_lifetime(5)
        claims = json.loads(base64.urlsafe_b64decode(provider.issue_token("svc").split(".")[1] + "=="))
        assert claims["exp"] - claims["iat"] == 5


def test_the_providers_bad_arguments() -> None:
    with pytest.raises(ValueError, match="clients must map non-empty client ids to non-empty secrets"):
        OidcProvider(clients={})
    with pytest.raises(ValueError, match="token_lifetime_s must be an int >= 1, got 0"):
        OidcProvider(clients={"a": "b"}, token_lifetime_s=0)


async def test_an_unreachable_endpoint_is_a_retriable_connection_error() -> None:
    with OidcProvider(clients={"svc": SECRET}) as provider:
        url = provider.token_endpoint_url
    with pytest.raises(KafkaConnectionError, match="could not be reached") as info:
        await fetch_token(OidcSettings(url, "svc", Password(SECRET)), NOW)
    assert info.value.retriable
    # aiohttp's error is not kept as the context: its request_info holds the request's Authorization header.
    assert info.value.__context__ is None and info.value.__cause__ is None


# ------------------------------------------------------------------------ the JWT bearer grant (KIP-1139)


JWT_BEARER_RETRIEVER = "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever"


def test_a_jwt_bearer_request_carries_the_assertion_and_no_client_authentication() -> None:
    s = OidcSettings(URL, "", Password(""), scope="kafka", grant_type=JWT_BEARER, assertion_file="/x")
    headers, body = token_request(s, "a.b.c")
    assert urllib.parse.parse_qs(body.decode()) == {
        "grant_type": ["urn:ietf:params:oauth:grant-type:jwt-bearer"], "assertion": ["a.b.c"], "scope": ["kafka"]}
    assert "Authorization" not in headers
    with pytest.raises(ValueError, match="needs an assertion"):
        token_request(s)
    assert repr(s) == f"OidcSettings({URL!r}, jwt-bearer, assertion_file='/x', scope='kafka')"


def test_the_assertion_file_is_read_for_every_request_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "assertion.jwt"
    path.write_text("h.c.s1\n")
    assert read_assertion(str(path)) == "h.c.s1"
    path.write_text("h.c.s2")
    assert read_assertion(str(path)) == "h.c.s2"  # rotated: read again
    path.write_text("not a jwt")
    with pytest.raises(SaslAuthenticationFailedError, match="does not hold a JWT") as info:
        read_assertion(str(path))
    assert "not a jwt" not in str(info.value)
    with pytest.raises(SaslAuthenticationFailedError, match="cannot be read: FileNotFoundError"):
        read_assertion(str(tmp_path / "gone"))


def jwt_bearer_keys(path: Path, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": URL,
        "sasl.oauthbearer.jwt.retriever.class": JWT_BEARER_RETRIEVER,
        "sasl.oauthbearer.assertion.file": str(path),
    } | extra


def test_the_jwt_bearer_retriever_takes_the_assertion_file(tmp_path: Path) -> None:
    path = tmp_path / "a.jwt"
    path.write_text("h.c.s")
    got = oidc_of(jwt_bearer_keys(path, **{"sasl.oauthbearer.scope": "kafka"}))
    assert (got.grant_type, got.assertion_file, got.scope) == (JWT_BEARER, str(path), "kafka")
    shaded = oidc_of(jwt_bearer_keys(path, **{"sasl.oauthbearer.jwt.retriever.class": "kafkashaded.x.JwtBearerJwtRetriever"}))
    assert shaded.grant_type == JWT_BEARER


@pytest.mark.parametrize("extra, message", [
    ({"sasl.oauthbearer.jwt.retriever.class": "com.example.Mine"},
     "sasl.oauthbearer.jwt.retriever.class must be one of Java's DefaultJwtRetriever, ClientCredentialsJwtRetriever, JwtBearerJwtRetriever"),
    ({"sasl.oauthbearer.jwt.retriever.class": 3}, "sasl.oauthbearer.jwt.retriever.class must be a string"),
    ({"sasl.oauthbearer.assertion.file": None},
     "JwtBearerJwtRetriever needs sasl.oauthbearer.assertion.file or sasl.oauthbearer.assertion.private.key.file"),
    ({"sasl.oauthbearer.assertion.file": "/no/such/assertion.jwt"}, "'/no/such/assertion.jwt' is not a readable file"),
    ({"sasl.oauthbearer.assertion.file": 7}, "sasl.oauthbearer.assertion.file must be a string"),
    ({"sasl.oauthbearer.client.id": "svc"}, "the JWT bearer grant authenticates with an assertion: drop"),
    ({"sasl.jaas.config": JAAS}, "drop the client id and secret"),
    ({"sasl.oauthbearer.jwt.retriever.class": "ClientCredentialsJwtRetriever"},
     "sasl.oauthbearer.assertion.file: for the JWT bearer grant only"),
])
def test_bad_jwt_bearer_settings_fail_when_the_producer_is_made(tmp_path: Path, extra: dict[str, Any], message: str) -> None:
    path = tmp_path / "a.jwt"
    path.write_text("h.c.s")
    config = {k: v for k, v in jwt_bearer_keys(path, **extra).items() if v is not None}
    with pytest.raises(ConfigError, match=message):
        Producer(config)


async def test_the_provider_grants_a_token_for_a_good_assertion_only(tmp_path: Path) -> None:
    with OidcProvider(clients={"svc": SECRET}, token_lifetime_s=60) as provider:
        path = tmp_path / "a.jwt"
        s = OidcSettings(provider.token_endpoint_url, "", Password(""), scope="kafka", grant_type=JWT_BEARER,
                         assertion_file=str(path))
        path.write_text(provider.assertion_for("svc"))
        got = await fetch_token(s, NOW)
        claims = json.loads(base64.urlsafe_b64decode(got.value.split(".")[1] + "=="))
        assert claims["sub"] == "svc" and claims["exp"] - claims["iat"] == 60
        refused = {
            "expired": provider.assertion_for("svc", lifetime_s=-10),
            "another audience": provider.assertion_for("svc", audience="https://elsewhere"),
            "signature": provider.assertion_for("svc")[:-4] + "AAAA",
        }
        for why, assertion in refused.items():
            path.write_text(assertion)
            with pytest.raises(SaslAuthenticationFailedError, match=r"HTTP 400\): invalid_grant") as info:
                await fetch_token(s, NOW)
            assert assertion not in str(info.value), why
        assert [(r.grant_type, r.status) for r in provider.requests] == [
            ("urn:ietf:params:oauth:grant-type:jwt-bearer", 200)] + [("urn:ietf:params:oauth:grant-type:jwt-bearer", 400)] * 3
        with pytest.raises(ValueError, match="unknown client 'nobody'"):
            provider.assertion_for("nobody")
