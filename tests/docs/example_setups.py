"""What a reader's machine has and a test's does not, for the docs examples that name a setup.

A block marked ``<!-- example: kafka setup="secured" -->`` (or ``run setup=...``) runs as written,
inside its setup: the setup makes locally what the reader has (a secured broker, an identity
provider, a Schema Registry, a Spark session's Python workers, key files), and says how the
block's literals map onto it (:class:`Reader`). The block's text is not changed: its string and
integer literals that the setup names are swapped for the local values before it runs, as
bootstrap literals are swapped for the page's cluster, and its environment variables are set for
the length of the block. What the setup checks after the block ran (a registration, a
collector) is part of the example's test.

Each setup is a context manager entered around one block; the long-lived pieces (the secured
broker and its identity provider) are module fixtures, so they start once, and only when a block
needs them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import kafka_or_skip  # tests/conftest.py: skip, or fail under AIOPRODUCER_REQUIRE_KAFKA=1
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from aioproducer.testing import KafkaCluster, OidcProvider
from aioproducer.testing._processes import free_port  # a port for a server told it later; never one twice

#: The secured page's users and secrets (the literals and variables the page uses, and their values here).
SCRAM_USER, SCRAM_PASSWORD = "alice", "alice-secret-3c1f"
CLOUD_KEY, CLOUD_SECRET = "API_KEY", "API_SECRET"  # the Confluent Cloud example's JAAS line, as written
OIDC_CLIENT, OIDC_SECRET = "orders-service", "orders-secret-9d2a"
KEY_PASSWORD = "client-key-password-71e0"


@dataclass
class Reader:
    """How a block's literals and environment map onto what its setup made."""

    #: a literal as the page writes it (a broker's name, a file path, a URL, a port) -> the value here
    values: dict[str | int, object] = field(default_factory=dict)
    #: environment variables set while the block runs (restored after it)
    env: dict[str, str] = field(default_factory=dict)
    #: False: the block's bootstrap literals are left as written (it connects nowhere)
    cluster: bool = True


Setup = Callable[[pytest.FixtureRequest, Path], AbstractContextManager[Reader]]


@pytest.fixture(scope="module")
def example_oidc_provider() -> Iterator[OidcProvider]:
    """The identity provider of the secured page: one client with a secret, one signing its own assertions."""
    with OidcProvider(clients={OIDC_CLIENT: OIDC_SECRET}) as provider:
        yield provider


@pytest.fixture(scope="module")
def example_secured_kafka(example_oidc_provider: OidcProvider) -> Iterator[KafkaCluster]:
    """One broker with an SSL listener (client certificates required) and a SASL_SSL one (PLAIN, SCRAM, OIDC tokens)."""
    cluster = kafka_or_skip(
        brokers=1,
        topics={"orders": 1},
        listeners=("SASL_SSL", "SSL"),
        scram_users={SCRAM_USER: SCRAM_PASSWORD, CLOUD_KEY: CLOUD_SECRET},
        ssl_client_auth="required",
        oauthbearer_jwks_url=example_oidc_provider.jwks_endpoint_url,
    )
    with cluster:
        yield cluster


def _private_key_file(path: Path, password: bytes | None = None) -> rsa.RSAPrivateKey:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    encryption = serialization.NoEncryption() if password is None else serialization.BestAvailableEncryption(password)
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
    return key


def _encrypted_keystore(cluster: KafkaCluster, path: Path) -> None:
    """The cluster's client key, encrypted with :data:`KEY_PASSWORD`, and its certificate: one PEM file."""
    key = serialization.load_pem_private_key(Path(cluster.client_key_file).read_bytes(), password=None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(KEY_PASSWORD.encode()))
    path.write_bytes(encrypted + Path(cluster.client_cert_file).read_bytes())


@contextmanager
def secured(request: pytest.FixtureRequest, directory: Path) -> Iterator[Reader]:
    """docs/how-to/secured-clusters.md: Confluent Cloud, OIDC (secret and assertion), MSK SCRAM, mutual TLS.

    The brokers' certificates are trusted as the reader's system trusts a public CA's:
    ``SSL_CERT_FILE`` names the local CA (OpenSSL's default file, which ``load_default_certs``
    reads). The provider is plain HTTP (its TLS is tests/integration/test_oidc_tls.py's).
    """
    provider: OidcProvider = request.getfixturevalue("example_oidc_provider")
    cluster: KafkaCluster = request.getfixturevalue("example_secured_kafka")
    signing_key = directory / "orders-service.key"
    if not signing_key.exists():
        provider.register_client_key(OIDC_CLIENT, _private_key_file(signing_key).public_key())
    keystore = directory / "client.pem"
    if not keystore.exists():
        _encrypted_keystore(cluster, keystore)
    sasl_ssl, ssl = cluster.bootstrap_servers_for("SASL_SSL"), cluster.bootstrap_servers_for("SSL")
    yield Reader(
        values={
            "pkc-xxxxx.us-east-1.aws.confluent.cloud:9092": sasl_ssl,
            "broker1:9094": sasl_ssl,
            "b-1.mycluster.xxxxxx.kafka.us-east-1.amazonaws.com:9096": sasl_ssl,
            "broker1:9093": ssl,
            "https://idp.example.com/oauth2/token": provider.token_endpoint_url,
            "/etc/kafka/orders-service.key": str(signing_key),
            "/etc/kafka/ca.pem": cluster.ca_file,
            "/etc/kafka/client.pem": str(keystore),
        },
        env={
            "SSL_CERT_FILE": cluster.ca_file,
            "OIDC_CLIENT_SECRET": OIDC_SECRET,
            "MSK_PASSWORD": SCRAM_PASSWORD,
            "KEY_PASSWORD": KEY_PASSWORD,
        },
    )


@contextmanager
def msk_iam(request: pytest.FixtureRequest, directory: Path) -> Iterator[Reader]:
    """The MSK IAM example is made as written and never started: a token needs AWS.

    Making it reads the region from the brokers' names and checks the JAAS line, so the bootstrap
    literal stays as written. The token itself is tests/unit/test_msk_iam.py's (botocore presigns
    it; a SigV4 verifier of the test's own accepts it).
    """
    yield Reader(cluster=False)


@contextmanager
def schema_registry(request: pytest.FixtureRequest, directory: Path) -> Iterator[Reader]:
    """docs/how-to/schemas.md: a test registry that checks the example's basic-auth credentials."""
    from aioproducer.testing import SchemaRegistry

    registry = SchemaRegistry(basic_auth=("user", "secret"))
    try:
        yield Reader(values={"https://registry:8081": registry.url})
        registrations = [path.partition("?")[0] for method, path in registry.requests if method == "POST"]
        assert registrations == ["/subjects/orders-value/versions"], (
            f"the example should have registered orders-value once, the registry saw {registry.requests}"
        )
    finally:
        registry.close()


@contextmanager
def prometheus(request: pytest.FixtureRequest, directory: Path) -> Iterator[Reader]:
    """docs/how-to/observability.md: port 9100 is a free port here; the scrape must show the producer's series.

    ``start_http_server`` leaves its daemon thread serving until the test run ends (it has no
    stop); the collector the block registered is taken out of the global registry after it.
    """
    from urllib.request import urlopen

    from prometheus_client import REGISTRY

    port = free_port()
    before = set(REGISTRY._collector_to_names)  # no public listing of a registry's collectors
    try:
        yield Reader(values={9100: port, "http://localhost:9100/metrics": f"http://127.0.0.1:{port}/metrics"})
        with urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
            scraped = answer.read().decode()
        assert 'kafka_producer_record_send_total{client_id="orders-api"}' in scraped, scraped[:2000]
    finally:
        for collector in set(REGISTRY._collector_to_names) - before:
            REGISTRY.unregister(collector)


@contextmanager
def spark(request: pytest.FixtureRequest, directory: Path) -> Iterator[Reader]:
    """docs/how-to/spark.md: local Spark, its Python workers this interpreter (as the page tells the reader).

    The stream's ``incoming/`` is a folder with one JSON file of two rows.

    The session the block makes is stopped after it, with its streaming query, so that the Spark
    tests' own session (tests/integration/spark_support.py) starts with their settings.
    """
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    from pyspark.sql import SparkSession

    incoming = directory / "incoming"
    incoming.mkdir(exist_ok=True)
    (incoming / "orders-1.json").write_text('{"key": "k3", "value": "v3"}\n{"key": "k4", "value": "v4"}\n')
    before = SparkSession.getActiveSession()  # a session of the Spark tests, if they ran first: left alone
    try:
        yield Reader(values={"incoming/": str(incoming)},
                     env={"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    finally:
        session = SparkSession.getActiveSession()
        if session is not None and session is not before:
            for query in session.streams.active:
                query.stop()
            session.stop()


SETUPS: dict[str, Setup] = {
    "secured": secured,
    "msk-iam": msk_iam,
    "schema-registry": schema_registry,
    "prometheus": prometheus,
    "spark": spark,
}


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set, restored after."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
