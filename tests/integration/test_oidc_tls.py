"""The token endpoint's TLS: ``ssl.*`` options in ``sasl.jaas.config``, where Java's token retrievers read them.

The fake provider serves HTTPS with a certificate from a test CA; the producer's configuration
goes the whole way (``ConnectionSecurity.from_config`` to the token cache), without a broker:
the broker side of OIDC sign-in does not change with the provider's TLS.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from aioproducer.config import ProducerConfig
from aioproducer.errors import ConfigError, KafkaConnectionError
from aioproducer.security.connector import ConnectionSecurity
from aioproducer.security.jaas import parse_jaas_config
from aioproducer.security.oidc import OidcSettings, fetch_token
from aioproducer.testing import OidcProvider
from helpers import tls_files

SECRET = "s3cret-client-secret"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"


def server_context(files: dict[str, str], *, client_certificate: bool) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(files["server.pem"], files["server.key"])
    if client_certificate:
        context.load_verify_locations(files["ca.pem"])
        context.verify_mode = ssl.CERT_REQUIRED
    return context


def oidc(url: str, jaas_options: str) -> OidcSettings:
    """The OIDC settings a producer with these JAAS options makes (the token endpoint given as a key)."""
    config = ProducerConfig({
        "bootstrap.servers": "127.0.0.1:9092",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": url,
        "sasl.jaas.config": f'{MODULE} clientId="svc" clientSecret="{SECRET}" {jaas_options};',
    })
    sasl = ConnectionSecurity.from_config(config).sasl
    assert sasl is not None and sasl.oidc is not None
    return sasl.oidc


async def test_a_private_ca_in_the_jaas_options_reaches_an_https_provider(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    with OidcProvider(clients={"svc": SECRET}, ssl_context=server_context(files, client_certificate=False)) as provider:
        assert provider.token_endpoint_url.startswith("https://127.0.0.1:")
        trusted = oidc(provider.token_endpoint_url, f'ssl.truststore.location="{files["ca.pem"]}"')
        assert (await fetch_token(trusted, 0)).value.count(".") == 2
        system_cas = oidc(provider.token_endpoint_url, "")  # no options: the system's CAs, which do not know ours
        assert system_cas.ssl_context is None
        with pytest.raises(KafkaConnectionError, match="token endpoint .* could not be reached: .*Certificate"):
            await fetch_token(system_cas, 0)
        assert provider.tokens_issued("svc") == 1


async def test_a_client_certificate_in_the_jaas_options_is_presented(tmp_path: Path) -> None:
    files = tls_files(tmp_path)
    keystore = tmp_path / "client-keystore.pem"  # key and chain in one PEM file, as ssl.keystore.location takes it
    keystore.write_text(Path(files["client.key"]).read_text() + Path(files["client.pem"]).read_text())
    with OidcProvider(clients={"svc": SECRET}, ssl_context=server_context(files, client_certificate=True)) as provider:
        truststore = f'ssl.truststore.location="{files["ca.pem"]}"'
        mutual = oidc(provider.token_endpoint_url, f'{truststore} ssl.keystore.location="{keystore}"')
        await fetch_token(mutual, 0)
        with pytest.raises(KafkaConnectionError, match="could not be reached"):
            await fetch_token(oidc(provider.token_endpoint_url, truststore), 0)  # no certificate: refused
        assert provider.tokens_issued("svc") == 1


@pytest.mark.parametrize(
    ("url", "options", "message"),
    [
        ("https://idp.example/token", 'ssl.truststore.location="{missing}"',
         r"sasl.jaas.config option ssl.truststore.location.*missing.pem"),
        ("https://idp.example/token", 'ssl.trustsore.location="/ca.pem"',
         r"sasl.jaas.config option ssl.trustsore.location: not a TLS setting of the token endpoint"),
        ("http://idp.example/token", 'ssl.truststore.location="/ca.pem"',
         r"sasl.jaas.config options ssl.truststore.location: TLS settings for an https token endpoint"),
        ("https://idp.example/token", 'ssl.keystore.key="-----BEGIN PRIVATE KEY-----x" ssl.keystore.certificate.chain="y"',
         r"sasl.jaas.config option ssl.keystore"),
    ],
)
def test_bad_tls_options_fail_when_the_producer_is_made_naming_the_option(
    tmp_path: Path, url: str, options: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        oidc(url, options.format(missing=tmp_path / "missing.pem"))
    assert "BEGIN PRIVATE KEY" not in str(info.value)


def test_the_tls_secrets_of_the_jaas_line_are_in_no_repr() -> None:
    line = f'{MODULE} ssl.truststore.password="store-pass" ssl.keystore.key="-----BEGIN PRIVATE KEY-----x";'
    shown = repr(parse_jaas_config(line))
    assert "store-pass" not in shown and "BEGIN PRIVATE KEY" not in shown
    assert "ssl.truststore.password" in shown  # the names stay: only the values are hidden

