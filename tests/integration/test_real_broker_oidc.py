"""OAUTHBEARER sign-in through an OIDC provider (KIP-768) against real Kafka that checks the tokens.

One broker whose SASL listener validates JWTs with Kafka's own ``OAuthBearerValidatorCallbackHandler``
against the JWKS of a fake provider (:class:`~aioproducer.testing.OidcProvider`), and a short
``connections.max.reauth.ms``, so that a producer must re-authenticate (KIP-368) several times while
it sends, with tokens the provider hands out fresh as the old ones reach their refresh point. What is
produced is read back over the PLAINTEXT listener with the project's reader (``KafkaCluster.read``),
which shares nothing with the producer's SASL path.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from aioproducer import Producer
from aioproducer.errors import SaslAuthenticationFailedError
from aioproducer.security.oidc import OidcTokenCache
from aioproducer.testing import KafkaCluster, OidcProvider
from conftest import kafka_or_skip

pytestmark = pytest.mark.integration

CLIENT, SECRET = "orders-service", "orders-secret-5d1c"
#: The client that signs its own assertions (KIP-1139) with a key whose public half the provider holds.
SIGNER = "billing-service"
#: The broker's session lifetime, as in test_real_broker_security.py (the client re-authenticates at 85-95 % of it).
REAUTH_MS = 5000
#: Tokens live 12 s and are fetched again at 50-55 % of that (``sasl.login.refresh.window.factor=0.5``):
#: a token reused for a session still has more than 5 s left, so every session lasts the full 5 s.
TOKEN_LIFETIME_S = 12
_topics = itertools.count()
JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"


@pytest.fixture(scope="module")
def provider() -> Iterator[OidcProvider]:
    with OidcProvider(clients={CLIENT: SECRET, SIGNER: "unused-secret-0e2f"}, token_lifetime_s=TOKEN_LIFETIME_S) as fake:
        yield fake


@pytest.fixture(scope="module")
def cluster(provider: OidcProvider) -> Iterator[KafkaCluster]:
    with kafka_or_skip(
        brokers=1,
        topics={},
        listeners=("PLAINTEXT", "SASL_PLAINTEXT"),
        broker_config={"connections.max.reauth.ms": str(REAUTH_MS)},
        oauthbearer_jwks_url=provider.jwks_endpoint_url,
    ) as kafka:
        yield kafka


def oidc_config(cluster: KafkaCluster, provider: OidcProvider, secret: str = SECRET) -> dict[str, Any]:
    """Java 4.x's keys, as a Java user's properties file would have them."""
    return {
        "bootstrap.servers": cluster.bootstrap_servers_for("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.login.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
        "sasl.oauthbearer.token.endpoint.url": provider.token_endpoint_url,
        "sasl.oauthbearer.client.credentials.client.id": CLIENT,
        "sasl.oauthbearer.client.credentials.client.secret": secret,
        "sasl.oauthbearer.scope": "kafka",
    }


def fresh_topic(cluster: KafkaCluster) -> str:
    name = f"oidc-{next(_topics)}"
    cluster.create_topic(name, partitions=2)
    return name


async def test_tokens_are_cached_refreshed_and_presented_at_every_reauthentication(
    cluster: KafkaCluster, provider: OidcProvider, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aioproducer")
    topic = fresh_topic(cluster)
    issued_before = provider.tokens_issued(CLIENT)
    config = oidc_config(cluster, provider) | {
        "sasl.login.refresh.window.factor": 0.5,
        "sasl.login.refresh.min.period.seconds": 0,
        "sasl.login.refresh.buffer.seconds": 0,
        "linger.ms": 5,
    }
    sent = 0
    producer = Producer(config)
    cache = producer._engine._security.oidc_tokens
    assert isinstance(cache, OidcTokenCache)
    authentications: list[str] = []  # the token each authentication presented
    original = cache.token

    async def counted() -> str:
        token = await original()
        authentications.append(token)
        return token

    monkeypatch.setattr(cache, "token", counted)
    async with producer:
        await producer.partitions_for(topic)
        futures = []
        deadline = time.monotonic() + 3.5 * REAUTH_MS / 1000  # re-authentications at ~0.9, 1.8 and 2.7 lifetimes
        while time.monotonic() < deadline:
            futures.append(await producer.send(topic, b"%d" % sent, key=b"k%d" % (sent % 5)))
            sent += 1
            if sent % 50 == 0:
                await asyncio.gather(*futures[-50:])  # requests keep flowing across the re-authentications
                # Paced (a rate, not a wait for a condition): unpaced, 700,000 records took the
                # read-back past its timeout; a few thousand a second cross every re-authentication.
                await asyncio.sleep(0.02)
        await asyncio.gather(*futures)
    issued = provider.tokens_issued(CLIENT) - issued_before
    # Sessions of 5 s over 17.5 s: the first authentication and at least three re-authentications,
    # each with a token the broker accepted. Tokens are fetched again after 6-6.6 s: at least two
    # were needed, and fewer than one per authentication (the cache served the others).
    assert len(authentications) >= 4, authentications
    assert issued >= 2
    assert issued < len(authentications)
    # A refreshed token was presented, and every token presented was one the provider issued. Not
    # "every token issued was presented": the cache refreshes ahead of need, so a token fetched
    # near the run's end may meet no authentication before it closes (a CI run under load: 3
    # issued, 2 presented).
    presented = set(authentications)
    assert 2 <= len(presented) <= issued, (len(presented), issued)
    records = await cluster.read(topic, count=sent)
    assert sorted(int(r.value or b"") for r in records) == list(range(sent))
    for partition in {r.partition for r in records}:
        offsets_in_order = [int(r.value or b"") for r in records if r.partition == partition]
        assert offsets_in_order == sorted(offsets_in_order)
    assert SECRET not in caplog.text and not any(token in caplog.text for token in authentications)


async def test_librdkafkas_keys_and_the_jaas_line_sign_in_too(cluster: KafkaCluster, provider: OidcProvider) -> None:
    topic = fresh_topic(cluster)
    base = {
        "bootstrap.servers": cluster.bootstrap_servers_for("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": provider.token_endpoint_url,
    }
    librdkafka = base | {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": CLIENT,
                         "sasl.oauthbearer.client.secret": SECRET}
    jaas = base | {"sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                                       f'clientId="{CLIENT}" clientSecret="{SECRET}" scope="kafka";'}
    for number, config in enumerate((librdkafka, jaas)):
        async with Producer(config) as producer:
            await (await producer.send(topic, b"%d" % number, partition=0))
    assert [r.value for r in await cluster.read(topic, count=2)] == [b"0", b"1"]


async def test_a_wrong_client_secret_fails_start_at_once_with_the_providers_error(
    cluster: KafkaCluster, provider: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="aioproducer")
    wrong = "not-the-secret-83e0"
    producer = Producer(oidc_config(cluster, provider, secret=wrong), max_block_ms=20000)
    started = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError) as info:
        await producer.start()
    assert time.monotonic() - started < 10  # at once, not after max.block.ms
    message = str(info.value)
    assert provider.token_endpoint_url in message and "HTTP 401" in message
    assert "invalid_client: client authentication failed" in message  # the provider's own words
    for text in (message, repr(producer.config), repr(producer._engine._security), caplog.text):
        assert wrong not in text
    assert provider.requests[-1].status == 401


async def test_the_listener_refuses_a_token_the_provider_did_not_sign(cluster: KafkaCluster) -> None:
    """The broker really checks: the unsecured token the other listeners take is refused here."""
    producer = Producer({
        "bootstrap.servers": cluster.bootstrap_servers_for("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": 'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="alice";',
        "max.block.ms": 20000,
    })
    with pytest.raises(SaslAuthenticationFailedError, match="the broker rejected the token with status 'invalid_token'"):
        await producer.start()


async def test_the_jwt_bearer_grant_signs_in_with_an_assertion_file(
    cluster: KafkaCluster, provider: OidcProvider, tmp_path: Path
) -> None:
    """KIP-1139: the assertion, not a client secret, gets the token the broker checks."""
    topic = fresh_topic(cluster)
    assertion = tmp_path / "assertion.jwt"
    assertion.write_text(provider.assertion_for(CLIENT))
    before = len(provider.requests)
    config = {
        "bootstrap.servers": cluster.bootstrap_servers_for("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": provider.token_endpoint_url,
        "sasl.oauthbearer.jwt.retriever.class": "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever",
        "sasl.oauthbearer.assertion.file": str(assertion),
    }
    async with Producer(config) as producer:
        await (await producer.send(topic, b"by-assertion", partition=0))
    assert [r.value for r in await cluster.read(topic, count=1)] == [b"by-assertion"]
    assert [(r.grant_type, r.status) for r in provider.requests[before:]] == [
        ("urn:ietf:params:oauth:grant-type:jwt-bearer", 200)]


def private_key_file(directory: Path, name: str) -> tuple[Path, rsa.RSAPrivateKey]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path = directory / name
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    return path, key


def signer_config(cluster: KafkaCluster, provider: OidcProvider, key_file: Path) -> dict[str, Any]:
    """Java 4.1+'s keys for assertions the client signs, as a properties file would have them."""
    return {
        "bootstrap.servers": cluster.bootstrap_servers_for("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": provider.token_endpoint_url,
        "sasl.oauthbearer.jwt.retriever.class": "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever",
        "sasl.oauthbearer.assertion.private.key.file": str(key_file),
        "sasl.oauthbearer.assertion.claim.iss": SIGNER,
        "sasl.oauthbearer.assertion.claim.sub": SIGNER,
        "sasl.oauthbearer.assertion.claim.aud": provider.token_endpoint_url,
        "sasl.oauthbearer.assertion.claim.jti.include": "true",
    }


async def test_a_producer_signs_a_fresh_assertion_for_every_token_across_reauthentications(
    cluster: KafkaCluster, provider: OidcProvider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """KIP-1139 with the client's key: each token the broker checks was bought with a new signed assertion."""
    caplog.set_level(logging.DEBUG, logger="aioproducer")
    topic = fresh_topic(cluster)
    key_file, key = private_key_file(tmp_path, "billing.key")
    provider.register_client_key(SIGNER, key.public_key())
    before = len(provider.requests)
    config = signer_config(cluster, provider, key_file) | {
        "sasl.login.refresh.window.factor": 0.5,
        "sasl.login.refresh.min.period.seconds": 0,
        "sasl.login.refresh.buffer.seconds": 0,
        "linger.ms": 5,
    }
    producer = Producer(config)
    cache = producer._engine._security.oidc_tokens
    assert isinstance(cache, OidcTokenCache)
    authentications: list[str] = []
    original = cache.token

    async def counted() -> str:
        token = await original()
        authentications.append(token)
        return token

    monkeypatch.setattr(cache, "token", counted)
    sent = 0
    async with producer:
        futures = []
        # Two and a half sessions of 5 s: re-authentications at ~4.5 s and ~9 s; tokens fetched again after 6-6.6 s.
        deadline = time.monotonic() + 2.5 * REAUTH_MS / 1000
        while time.monotonic() < deadline:
            futures.append(await producer.send(topic, b"%d" % sent, key=b"k%d" % (sent % 5)))
            sent += 1
            if sent % 50 == 0:
                await asyncio.gather(*futures[-50:])
                await asyncio.sleep(0.02)  # paced, as above
        await asyncio.gather(*futures)
    asked = provider.requests[before:]
    assert len(authentications) >= 3, authentications  # the first authentication and two re-authentications
    assert len(asked) >= 2 and all((r.client_id, r.grant_type, r.status) == (SIGNER, JWT_BEARER_GRANT, 200) for r in asked)
    ids = [r.assertion_id for r in asked]
    assert None not in ids and len(set(ids)) == len(ids)  # a fresh assertion (its own jti) for every token
    records = await cluster.read(topic, count=sent)
    assert sorted(int(r.value or b"") for r in records) == list(range(sent))
    assert key_file.read_text().splitlines()[1] not in caplog.text


async def test_a_wrong_private_key_fails_start_at_once_with_the_providers_error(
    cluster: KafkaCluster, provider: OidcProvider, tmp_path: Path
) -> None:
    registered, registered_key = private_key_file(tmp_path, "registered.key")
    provider.register_client_key(SIGNER, registered_key.public_key())
    wrong, _ = private_key_file(tmp_path, "wrong.key")
    before = len(provider.requests)
    # max.block.ms is long: failing with the provider's error (not a timeout) is failing at once.
    producer = Producer(signer_config(cluster, provider, wrong), max_block_ms=60000)
    with pytest.raises(SaslAuthenticationFailedError) as info:
        await producer.start()
    message = str(info.value)
    assert provider.token_endpoint_url in message and "HTTP 400" in message
    assert "invalid_grant: the assertion's signature does not verify" in message
    assert [(r.client_id, r.status) for r in provider.requests[before:]] == [(SIGNER, 400)]  # asked once: a 4xx is final
    topic = fresh_topic(cluster)
    async with Producer(signer_config(cluster, provider, registered)) as right:  # the right key signs in
        await (await right.send(topic, b"signed", partition=0))
    assert [r.value for r in await cluster.read(topic, count=1)] == [b"signed"]


async def test_an_es256_key_signs_in_with_an_assertion_pyjwt_signed(
    cluster: KafkaCluster, provider: OidcProvider, tmp_path: Path
) -> None:
    """KIP-1139 with an EC key on P-256: the provider verifies the ES256 assertion, the broker the token it bought."""
    key = ec.generate_private_key(ec.SECP256R1())
    key_file = tmp_path / "billing-ec.key"
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    provider.register_client_key(SIGNER, key.public_key())
    before = len(provider.requests)
    topic = fresh_topic(cluster)
    config = signer_config(cluster, provider, key_file) | {"sasl.oauthbearer.assertion.algorithm": "ES256"}
    async with Producer(config) as producer:
        await (await producer.send(topic, b"es256", partition=0))
    assert [r.value for r in await cluster.read(topic, count=1)] == [b"es256"]
    assert [(r.client_id, r.grant_type, r.status) for r in provider.requests[before:]] == [(SIGNER, JWT_BEARER_GRANT, 200)]
