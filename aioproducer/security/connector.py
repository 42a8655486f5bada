"""How a producer's connections are secured: TLS streams and SASL mechanisms, from its configuration.

Theory of operation. :class:`ConnectionSecurity` is built once, in ``Producer(...)``, from
``security.protocol`` and the ``ssl.*``/``sasl.*`` keys (and their librdkafka names), so that
every bad key, unreadable store or missing credential is a :class:`ConfigError` at the call
that caused it, not a connection failure later. It hands the network layer two things, and
the network layer knows nothing else of security:

* ``open_streams``: how a connection's byte streams are opened. For SSL and SASL_SSL, TLS
  over TCP with the context built here (or the user's ``ssl_context``), the broker's host
  as server name; a failed handshake is an :class:`SslAuthenticationError` that says why
  (untrusted, expired, wrong host, a plaintext port).
* ``authenticator``: for SASL_PLAINTEXT and SASL_SSL, an async factory of a fresh
  mechanism client per authentication (the connection state machine drives it; see
  ``protocol/connection_state.py``). OAUTHBEARER asks the user's token provider each time,
  so re-authentication (KIP-368) presents a fresh token; GSSAPI asks the producer's one
  :class:`~aioproducer.security.kerberos.KerberosLogin` for a context with the broker's host,
  which logs in again first when the ticket is due for renewal.

Credentials come from, in order: ``sasl.jaas.config`` (pasted as Java users have it),
``sasl.username``/``sasl.password`` (librdkafka's names); OAUTHBEARER from
``sasl_oauth_token_provider``, else the JAAS line's ``unsecuredLoginStringClaim_sub`` (an
unsecured token, which only a test broker accepts); GSSAPI from the JAAS line's
Krb5LoginModule (``useKeyTab``/``keyTab``/``principal``, or ``useTicketCache``), else
librdkafka's ``sasl.kerberos.keytab`` and ``sasl.kerberos.principal``. Secrets stay in
:class:`~aioproducer.config.Password` objects, printed as ``[hidden]``.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import ssl
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aioproducer.config import JWT_RETRIEVERS, Password, ProducerConfig
from aioproducer.errors import AuthenticationError, ConfigError, KafkaConnectionError, SslAuthenticationError
from aioproducer.logs import client_logger
from aioproducer.security.assertion import AssertionFileError, AssertionSettings, make_assertion
from aioproducer.security.jaas import MSK_IAM_MARKER, credentials_from_jaas, parse_jaas_config
from aioproducer.security.kerberos import KerberosLogin, KerberosSettings
from aioproducer.security.oidc import JWT_BEARER, OidcSettings, OidcTokenCache, RefreshSettings
from aioproducer.security.sasl import OAuthBearerClient, SaslClient, create_sasl_client, unsecured_jwt
from aioproducer.security.tls import TlsSettings, build_ssl_context, describe_ssl_error, with_librdkafka_aliases

__all__ = ["ConnectionSecurity", "SaslSettings", "TokenProvider"]

#: The user's OAUTHBEARER token source: ``f()`` or ``async f()`` -> token, or (token, expiry_ms).
TokenProvider = Callable[[], Any]

_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: Lifetime of the unsecured test token made from the JAAS line (Kafka's own default is one hour).
_UNSECURED_LIFETIME_MS = 3_600_000


@dataclass(frozen=True)
class SaslSettings:
    """The mechanism and what it authenticates with; secrets hidden in ``repr``."""

    mechanism: str
    username: str | None = None
    password: Password | None = None
    token_provider: TokenProvider | None = None
    unsecured_principal: str | None = None
    #: SCRAM extensions from the JAAS line (``tokenauth=true``: a delegation token).
    extensions: tuple[tuple[str, str], ...] = ()
    #: OAUTHBEARER tokens from an OIDC token endpoint (``sasl.oauthbearer.token.endpoint.url``).
    oidc: OidcSettings | None = None
    #: OAUTHBEARER SASL extensions sent with every token (RFC 7628 §3.1; Java's JAAS ``extension_*``).
    oauth_extensions: tuple[tuple[str, str], ...] = ()
    #: GSSAPI: who logs in (keytab or ticket cache) and the brokers' service name.
    kerberos: KerberosSettings | None = None

    def __repr__(self) -> str:
        who = self.username or self.unsecured_principal or ("token provider" if self.token_provider else None)
        if self.kerberos is not None:
            return f"SaslSettings({self.mechanism}, {self.kerberos.who!r})"
        if self.oidc is not None:
            return f"SaslSettings({self.mechanism}, {self.oidc!r})"
        return f"SaslSettings({self.mechanism}, {who!r})"


class ConnectionSecurity:
    """What ``security.protocol`` asks of every connection: TLS, SASL, both or neither."""

    def __init__(
        self, protocol: str, ssl_context: ssl.SSLContext | None, sasl: SaslSettings | None, client_id: str = ""
    ) -> None:
        self.protocol = protocol
        self.ssl_context = ssl_context
        self.sasl = sasl
        #: One token cache for every connection of the producer: a token serves them all until its refresh point.
        self.oidc_tokens = None if sasl is None or sasl.oidc is None else OidcTokenCache(sasl.oidc, client_id=client_id)
        #: GSSAPI: one Kerberos login for every connection of the producer, renewed before its ticket expires.
        self.kerberos = None if sasl is None or sasl.kerberos is None else KerberosLogin(
            sasl.kerberos, log=client_logger("aioproducer.security.kerberos", client_id))

    def __repr__(self) -> str:
        return f"ConnectionSecurity({self.protocol}, tls={self.ssl_context is not None}, sasl={self.sasl!r})"

    @classmethod
    def from_config(cls, cfg: ProducerConfig) -> ConnectionSecurity:
        protocol = cfg.security_protocol
        tls = _tls_context(cfg) if protocol in ("SSL", "SASL_SSL") else None
        sasl = _sasl_settings(cfg) if protocol.startswith("SASL") else None
        return cls(protocol, tls, sasl, cfg.client_id)

    # ------------------------------------------------------------------ streams

    def open_streams(self) -> Callable[[str, int], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] | None:
        """The TLS opener, or None for plain TCP."""
        context = self.ssl_context
        if context is None:
            return None

        async def open_tls(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            address = f"{host}:{port}"
            try:
                return await asyncio.open_connection(host, port, ssl=context, server_hostname=host)
            except (ssl.SSLError, ConnectionError, EOFError) as exc:
                # Unreachable hosts stay connection errors (retried); a refused handshake is fatal.
                if isinstance(exc, (ConnectionRefusedError, TimeoutError)):
                    raise
                raise SslAuthenticationError(describe_ssl_error(exc, address)) from exc

        return open_tls

    # --------------------------------------------------------------------- SASL

    def authenticator(self) -> Callable[[str], Awaitable[SaslClient]] | None:
        """The factory of one mechanism client per authentication with a broker's host, or None without SASL."""
        sasl = self.sasl
        if sasl is None:
            return None
        oidc_tokens = self.oidc_tokens
        kerberos = self.kerberos

        extensions = dict(sasl.oauth_extensions) or None

        async def make(host: str) -> SaslClient:
            if kerberos is not None:
                return await kerberos.client(host)
            if oidc_tokens is not None:
                return OAuthBearerClient(await oidc_tokens.token(), extensions)
            if sasl.mechanism == "OAUTHBEARER":
                return OAuthBearerClient(await _token(sasl), extensions)
            assert sasl.username is not None and sasl.password is not None
            return create_sasl_client(
                sasl.mechanism, username=sasl.username, password=sasl.password.value, extensions=dict(sasl.extensions) or None
            )

        return make


async def _token(sasl: SaslSettings) -> str:
    """A token from the user's provider (sync or async; a string or (token, expiry_ms)), or an unsecured one."""
    provider = sasl.token_provider
    if provider is None:
        assert sasl.unsecured_principal is not None
        now_ms = int(time.time() * 1000)
        return unsecured_jwt(sasl.unsecured_principal, lifetime_ms=_UNSECURED_LIFETIME_MS, now_ms=now_ms)
    try:
        result = provider()
        if inspect.isawaitable(result):
            result = await result
    except AuthenticationError:
        raise  # the provider knows retrying cannot help (no AWS credentials, say)
    except Exception as exc:  # noqa: BLE001 - the user's code: report it as a failed connection attempt
        raise KafkaConnectionError(f"the OAUTHBEARER token provider raised {type(exc).__name__}: {exc}") from exc
    token = result[0] if isinstance(result, tuple) else result
    if not isinstance(token, str) or not token:
        raise KafkaConnectionError(
            f"the OAUTHBEARER token provider returned {type(token).__name__}: it must return a token string "
            "or (token, expiry_ms)"
        )
    return token


# --------------------------------------------------------------------------- TLS


def _tls_context(cfg: ProducerConfig) -> ssl.SSLContext:
    """The user's ``ssl_context`` as is, or one built from the ``ssl.*`` keys (their librdkafka names too)."""
    given = [key for key in cfg.explicit_keys if key.startswith("ssl.") and key not in ("ssl.protocol",)]
    if cfg.ssl_context is not None:
        if given:
            raise ConfigError(f"ssl_context replaces every ssl.* key: drop {', '.join(sorted(given))} or ssl_context")
        context: ssl.SSLContext = cfg.ssl_context
        return context
    settings = TlsSettings(
        truststore_location=cfg.ssl_truststore_location,
        truststore_type=cfg.ssl_truststore_type,
        truststore_password=_secret(cfg.ssl_truststore_password),
        truststore_certificates=cfg.ssl_truststore_certificates,
        keystore_location=cfg.ssl_keystore_location,
        keystore_type=cfg.ssl_keystore_type,
        keystore_password=_secret(cfg.ssl_keystore_password),
        key_password=_secret(cfg.ssl_key_password),
        keystore_certificate_chain=cfg.ssl_keystore_certificate_chain,
        keystore_key=_secret(cfg.ssl_keystore_key),
        endpoint_identification_algorithm=cfg.ssl_endpoint_identification_algorithm,
        enabled_protocols=tuple(cfg.ssl_enabled_protocols),
        cipher_suites=tuple(cfg.ssl_cipher_suites),
    )
    aliases = {
        key: value
        for key, value in (
            ("ssl.ca.location", cfg.ssl_ca_location),
            ("ssl.certificate.location", cfg.ssl_certificate_location),
            ("ssl.key.location", cfg.ssl_key_location),
        )
        if value is not None
    }
    if aliases:
        settings = with_librdkafka_aliases(settings, aliases)
    return build_ssl_context(settings, log=client_logger("aioproducer.security.tls", cfg.client_id))


def _secret(value: Password | None) -> str | None:
    return None if value is None else value.value


# -------------------------------------------------------------------------- SASL


def _sasl_settings(cfg: ProducerConfig) -> SaslSettings:
    mechanism = _mechanism(cfg)
    _check_kerberos_keys(cfg, mechanism)
    if mechanism == "GSSAPI":
        return SaslSettings(mechanism, kerberos=_kerberos_settings(cfg))
    username, password = cfg.sasl_username, cfg.sasl_password
    principal: str | None = None
    extensions: tuple[tuple[str, str], ...] = ()
    credentials: dict[str, str] = {}
    if cfg.sasl_jaas_config is not None:
        if username is not None or password is not None:
            raise ConfigError("sasl.jaas.config and sasl.username/sasl.password both give credentials: give one")
        try:
            credentials = credentials_from_jaas(parse_jaas_config(cfg.sasl_jaas_config.value), mechanism)
        except ValueError as exc:
            message = str(exc)  # the parser's own errors name the key already
            raise ConfigError(message if message.startswith("sasl.jaas.config:") else f"sasl.jaas.config: {message}") from None
        username = credentials.get("username")
        password = Password(credentials["password"]) if "password" in credentials else None
        principal = credentials.get("principal")
        if credentials.get("tokenauth", "").lower() == "true":
            extensions = (("tokenauth", "true"),)
    source = "sasl.jaas.config" if cfg.sasl_jaas_config is not None else "sasl.username/sasl.password"
    oidc = _oidc_settings(cfg, mechanism, credentials if cfg.sasl_jaas_config is not None else {})
    oauth_extensions = _oauth_extensions(cfg, mechanism, credentials, oidc is not None)
    if oidc is not None:
        return SaslSettings(mechanism, oidc=oidc, oauth_extensions=oauth_extensions)
    if credentials.get(MSK_IAM_MARKER) == "true":
        return SaslSettings(mechanism, token_provider=_msk_provider(cfg, credentials))
    if mechanism == "OAUTHBEARER":
        if cfg.sasl_oauth_token_provider is None and principal is None:
            raise ConfigError(
                "sasl.mechanism=OAUTHBEARER needs sasl_oauth_token_provider= (a callable returning a token), or, "
                "for a test broker, sasl.jaas.config with unsecuredLoginStringClaim_sub"
            )
        settings = SaslSettings(mechanism, token_provider=cfg.sasl_oauth_token_provider, unsecured_principal=principal,
                                oauth_extensions=oauth_extensions)
        if principal is not None and cfg.sasl_oauth_token_provider is None:
            _check_now(source, lambda: unsecured_jwt(principal, lifetime_ms=_UNSECURED_LIFETIME_MS, now_ms=0))
        return settings
    if not username or password is None:
        raise ConfigError(
            f"sasl.mechanism={mechanism} needs a username and password: sasl.jaas.config "
            "(org.apache.kafka.common.security.plain.PlainLoginModule or ...scram.ScramLoginModule required "
            'username="..." password="...";) or sasl.username and sasl.password'
        )
    settings = SaslSettings(mechanism, username=username, password=password, extensions=extensions)
    # What the first connection would refuse (an empty password, a NUL in PLAIN, a user name
    # SASLprep prohibits) is refused now, as a ConfigError, not as a raw error from start().
    _check_now(
        source,
        lambda: create_sasl_client(mechanism, username=username, password=password.value, extensions=dict(extensions) or None),
    )
    return settings


def _oauth_extensions(cfg: ProducerConfig, mechanism: str, jaas: dict[str, str], oidc: bool) -> tuple[tuple[str, str], ...]:
    """OAUTHBEARER extensions: the JAAS line's (``extension_<name>`` for OIDC sign-in,
    ``unsecuredLoginExtension_<name>`` for an unsecured token, as Java's two login handlers
    read them), then librdkafka's ``sasl.oauthbearer.extensions`` (which wins for a name in both)."""
    prefix = "extension_" if oidc else "unsecuredLoginExtension_"
    extensions = {name.removeprefix(prefix): value for name, value in jaas.items() if name.startswith(prefix)}
    extensions |= cfg.sasl_oauthbearer_extensions or {}
    if not extensions:
        return ()
    if mechanism != "OAUTHBEARER":
        raise ConfigError(f"sasl.oauthbearer.extensions are OAUTHBEARER's: sasl.mechanism is {mechanism}")
    try:
        OAuthBearerClient("placeholder", extensions)  # the mechanism's own rules; its messages name no value
    except ValueError as exc:
        raise ConfigError(f"sasl.oauthbearer.extensions: {exc}") from None
    return tuple(extensions.items())


#: (Java's key, librdkafka's key, the JAAS option) for each OIDC client setting; the keys win over the JAAS line.
_OIDC_SOURCES = (
    ("sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.client.id", "clientId"),
    ("sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.client.secret", "clientSecret"),
    ("sasl.oauthbearer.scope", None, "scope"),
)


def _oidc_settings(cfg: ProducerConfig, mechanism: str, jaas: dict[str, str]) -> OidcSettings | None:
    """OIDC sign-in if the token endpoint is set (or ``sasl.oauthbearer.method=oidc`` asks for it), else None.

    Each client setting comes from Java's key, else librdkafka's (both given and different: an
    error), else the JAAS option, as Java 4.x reads them.
    """
    url = cfg.sasl_oauthbearer_token_endpoint_url
    given = sorted(key for key in cfg.explicit_keys if key.startswith(("sasl.oauthbearer.", "sasl.login.retry", "sasl.login.connect",
                   "sasl.login.read")) and key not in ("sasl.oauthbearer.method", "sasl.oauthbearer.extensions"))
    if url is None:
        if cfg.sasl_oauthbearer_method == "oidc":
            raise ConfigError("sasl.oauthbearer.method=oidc needs sasl.oauthbearer.token.endpoint.url")
        if cfg.sasl_login_callback_handler_class is not None:
            raise ConfigError(f"sasl.login.callback.handler.class={cfg.sasl_login_callback_handler_class} needs sasl.oauthbearer.token.endpoint.url")
        if given:
            raise ConfigError(f"{', '.join(given)} given without sasl.oauthbearer.token.endpoint.url: give it, or drop them")
        return None
    if mechanism != "OAUTHBEARER":
        raise ConfigError(f"sasl.oauthbearer.token.endpoint.url needs sasl.mechanism=OAUTHBEARER, not {mechanism}")
    if cfg.sasl_oauth_token_provider is not None:
        raise ConfigError("sasl_oauth_token_provider and sasl.oauthbearer.token.endpoint.url both give tokens: give one")
    _check_endpoint_url(url)
    client_id, secret, scope = (_oidc_value(cfg, java, rdkafka, option, jaas) for java, rdkafka, option in _OIDC_SOURCES)
    grant = _grant(cfg)
    if grant == JWT_BEARER:
        return _jwt_bearer_settings(cfg, url, client_id, secret, scope, _token_endpoint_tls(cfg, url, jaas))
    assertion_keys = sorted(key for key in cfg.explicit_keys if key.startswith("sasl.oauthbearer.assertion."))
    if assertion_keys:
        raise ConfigError(
            f"{', '.join(assertion_keys)}: for the JWT bearer grant only; set "
            "sasl.oauthbearer.jwt.retriever.class=org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever"
        )
    if not client_id or not secret:
        missing = " and ".join(name for name, value in (("client id", client_id), ("client secret", secret)) if not value)
        raise ConfigError(
            f"sasl.oauthbearer.token.endpoint.url: the {missing} missing: give sasl.oauthbearer.client.credentials.client.id "
            "and ...client.secret (librdkafka: sasl.oauthbearer.client.id and .client.secret), or clientId and clientSecret "
            "in sasl.jaas.config"
        )
    _require_aiohttp()
    tls = _token_endpoint_tls(cfg, url, jaas)
    return OidcSettings(url, client_id, Password(secret), scope or None, _refresh(cfg), ssl_context=tls, **_http(cfg))


def _grant(cfg: ProducerConfig) -> str:
    """Java's retriever class, else librdkafka's ``sasl.oauthbearer.grant.type`` (both given: they must agree)."""
    grant = JWT_RETRIEVERS[cfg.sasl_oauthbearer_jwt_retriever_class.rsplit(".", 1)[-1]]
    librdkafka = cfg.sasl_oauthbearer_grant_type
    if librdkafka is None:
        return grant
    if "sasl.oauthbearer.jwt.retriever.class" in cfg.explicit_keys and librdkafka != grant:
        raise ConfigError(
            f"sasl.oauthbearer.jwt.retriever.class={cfg.sasl_oauthbearer_jwt_retriever_class} and "
            f"sasl.oauthbearer.grant.type={librdkafka} (librdkafka's switch) disagree: give one"
        )
    return librdkafka


#: The ``ssl.*`` JAAS options Java's token retrievers read for the token endpoint, as :class:`TlsSettings` fields.
_JAAS_TLS_FIELDS = {
    "ssl.truststore.location": "truststore_location",
    "ssl.truststore.type": "truststore_type",
    "ssl.truststore.password": "truststore_password",
    "ssl.truststore.certificates": "truststore_certificates",
    "ssl.keystore.location": "keystore_location",
    "ssl.keystore.type": "keystore_type",
    "ssl.keystore.password": "keystore_password",
    "ssl.key.password": "key_password",
    "ssl.keystore.certificate.chain": "keystore_certificate_chain",
    "ssl.keystore.key": "keystore_key",
    "ssl.endpoint.identification.algorithm": "endpoint_identification_algorithm",
    "ssl.enabled.protocols": "enabled_protocols",
    "ssl.cipher.suites": "cipher_suites",
}


def _token_endpoint_tls(cfg: ProducerConfig, url: str, jaas: dict[str, str]) -> ssl.SSLContext | None:
    """The token endpoint's TLS from ``sasl.jaas.config``'s ``ssl.*`` options, where Java's retrievers read it.

    None without such options (the system's CAs, as Java's default). Built now, so a missing
    or unreadable store is a ``ConfigError`` when the producer is made, naming the option.
    The broker connection's own ``ssl.*`` keys do not apply, as in Java: the provider is
    another server, often with a public certificate.
    """
    options = {key: value for key, value in jaas.items() if key.startswith("ssl.")}
    if not options:
        return None
    where = "sasl.jaas.config option"
    if not url.lower().startswith("https://"):
        raise ConfigError(f"{where}s {', '.join(sorted(options))}: TLS settings for an https token endpoint, not {url}")
    unknown = sorted(set(options) - set(_JAAS_TLS_FIELDS) - {"ssl.protocol"})
    if unknown:
        raise ConfigError(
            f"{where} {', '.join(unknown)}: not a TLS setting of the token endpoint (it takes {', '.join(_JAAS_TLS_FIELDS)})"
        )
    fields: dict[str, Any] = {}
    for key, value in options.items():
        name = _JAAS_TLS_FIELDS.get(key)
        if name in ("enabled_protocols", "cipher_suites"):
            fields[name] = tuple(part.strip() for part in value.split(",") if part.strip())
        elif name is not None:
            fields[name] = value
    labels = tuple((key, f"{where} {key}") for key in options)
    settings = TlsSettings(**fields, key_aliases=labels)
    return build_ssl_context(settings, log=client_logger("aioproducer.security.tls", cfg.client_id))


def _http(cfg: ProducerConfig) -> dict[str, Any]:
    """How token requests are made and retried: ``sasl.login.retry.*``, ``.connect/read.timeout.ms``, ``header.urlencode``."""
    if cfg.sasl_login_retry_backoff_max_ms < cfg.sasl_login_retry_backoff_ms and "sasl.login.retry.backoff.max.ms" in cfg.explicit_keys:
        raise ConfigError(
            f"sasl.login.retry.backoff.max.ms ({cfg.sasl_login_retry_backoff_max_ms}) must be >= "
            f"sasl.login.retry.backoff.ms ({cfg.sasl_login_retry_backoff_ms})"
        )
    connect, read = cfg.sasl_login_connect_timeout_ms, cfg.sasl_login_read_timeout_ms
    return {
        "timeout_s": cfg.request_timeout_ms / 1000,
        "retry_backoff_ms": cfg.sasl_login_retry_backoff_ms,
        "retry_backoff_max_ms": max(cfg.sasl_login_retry_backoff_max_ms, cfg.sasl_login_retry_backoff_ms),
        "connect_timeout_s": None if connect is None else connect / 1000,
        "read_timeout_s": None if read is None else read / 1000,
        "header_urlencode": cfg.sasl_oauthbearer_header_urlencode,
    }


def _jwt_bearer_settings(
    cfg: ProducerConfig, url: str, client_id: str | None, secret: str | None, scope: str | None,
    tls: ssl.SSLContext | None,
) -> OidcSettings:
    """KIP-1139's JWT bearer grant: the assertion file, else one signed here, instead of the client's id and secret.

    The file wins over a private key (Java ignores every other ``assertion.*`` key then); it
    is said once, at info level, so that a forgotten key does not go unnoticed.
    """
    path, key_file = cfg.sasl_oauthbearer_assertion_file, cfg.sasl_oauthbearer_assertion_private_key_file
    if path is None and key_file is None:
        raise ConfigError(
            "sasl.oauthbearer.jwt.retriever.class=JwtBearerJwtRetriever needs sasl.oauthbearer.assertion.file "
            "or sasl.oauthbearer.assertion.private.key.file"
        )
    if client_id or secret:
        raise ConfigError(
            "the JWT bearer grant authenticates with an assertion: drop the client id and secret (keys or JAAS options)"
        )
    _require_aiohttp()
    common = {"grant_type": JWT_BEARER, "ssl_context": tls, **_http(cfg)}
    if path is not None:
        if not os.access(path, os.R_OK) or not os.path.isfile(path):
            raise ConfigError(f"sasl.oauthbearer.assertion.file {path!r} is not a readable file")
        ignored = sorted(k for k in cfg.explicit_keys if k.startswith("sasl.oauthbearer.assertion.") and k != "sasl.oauthbearer.assertion.file")
        if ignored:
            client_logger(__name__, cfg.client_id).info(
                "sasl.oauthbearer.assertion.file is given: %s ignored (as in Java)", ", ".join(ignored))
        return OidcSettings(url, "", Password(""), scope or None, _refresh(cfg), assertion_file=path, **common)
    return OidcSettings(url, "", Password(""), scope or None, _refresh(cfg), assertion=_assertion_settings(cfg), **common)


def _assertion_settings(cfg: ProducerConfig) -> AssertionSettings:
    """The keys of an assertion made here; the key and template are tried once now, so a bad one is a ConfigError."""
    try:
        import cryptography  # noqa: F401 - only whether it is there
    except ImportError:
        raise ConfigError("sasl.oauthbearer.assertion.private.key.file needs cryptography: pip install 'aioproducer[oidc]'") from None
    assert cfg.sasl_oauthbearer_assertion_private_key_file is not None
    settings = AssertionSettings(
        private_key_file=cfg.sasl_oauthbearer_assertion_private_key_file,
        passphrase=cfg.sasl_oauthbearer_assertion_private_key_passphrase,
        algorithm=cfg.sasl_oauthbearer_assertion_algorithm,
        aud=cfg.sasl_oauthbearer_assertion_claim_aud,
        iss=cfg.sasl_oauthbearer_assertion_claim_iss,
        sub=cfg.sasl_oauthbearer_assertion_claim_sub,
        exp_seconds=cfg.sasl_oauthbearer_assertion_claim_exp_seconds,
        nbf_seconds=cfg.sasl_oauthbearer_assertion_claim_nbf_seconds,
        include_jti=cfg.sasl_oauthbearer_assertion_claim_jti_include,
        template_file=cfg.sasl_oauthbearer_assertion_template_file,
    )
    try:
        make_assertion(settings, 0)
    except AssertionFileError as exc:
        raise ConfigError(str(exc)) from None
    return settings


def _require_aiohttp() -> None:
    try:
        import aiohttp  # noqa: F401 - only whether it is there
    except ImportError:
        raise ConfigError("sasl.oauthbearer.token.endpoint.url needs aiohttp: pip install 'aioproducer[oidc]'") from None


def _refresh(cfg: ProducerConfig) -> RefreshSettings:
    return RefreshSettings(
        window_factor=cfg.sasl_login_refresh_window_factor,
        window_jitter=cfg.sasl_login_refresh_window_jitter,
        min_period_seconds=cfg.sasl_login_refresh_min_period_seconds,
        buffer_seconds=cfg.sasl_login_refresh_buffer_seconds,
    )


def _msk_provider(cfg: ProducerConfig, options: dict[str, str]) -> TokenProvider:
    """MSK IAM tokens for the JAAS line's IAMLoginModule: region from the brokers' names, botocore's credentials."""
    if cfg.sasl_oauth_token_provider is not None:
        raise ConfigError("sasl_oauth_token_provider and sasl.jaas.config's IAMLoginModule both give tokens: give one")
    try:
        import botocore  # noqa: F401 - only whether it is there
    except ImportError:
        raise ConfigError("sasl.jaas.config: IAMLoginModule (AWS MSK IAM) needs botocore: pip install 'aioproducer[msk]'") from None
    from aioproducer.security.msk_iam import msk_provider_from_jaas

    try:
        return msk_provider_from_jaas(options, [host for host, _ in cfg.bootstrap_servers])
    except ValueError as exc:
        raise ConfigError(f"sasl.jaas.config: {exc}") from None


def _oidc_value(cfg: ProducerConfig, java: str, rdkafka: str | None, option: str, jaas: dict[str, str]) -> str | None:
    values = [getattr(cfg, key.replace(".", "_")) for key in (java, rdkafka) if key is not None]
    texts = [value.value if isinstance(value, Password) else value for value in values]
    present = [text for text in texts if text is not None]
    if len(present) == 2 and present[0] != present[1]:
        raise ConfigError(f"{java} and {rdkafka} (librdkafka's name) disagree: give one")
    return present[0] if present else jaas.get(option)


def _check_endpoint_url(url: str) -> None:
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError("sasl.oauthbearer.token.endpoint.url must be an http:// or https:// URL with a host")
    if parsed.username is not None or parsed.password is not None:
        raise ConfigError("sasl.oauthbearer.token.endpoint.url may not hold a user or password: give the client id and secret")


def _check_now(source: str, make: Callable[[], object]) -> None:
    """Make the mechanism's client (or token) once, as a connection will: its ``ValueError`` as a ``ConfigError``.

    The mechanisms' messages name the field at fault and never its value.
    """
    try:
        make()
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def _mechanism(cfg: ProducerConfig) -> str:
    if "sasl.mechanism" in cfg.explicit_keys and cfg.sasl_mechanisms is not None:
        if cfg.sasl_mechanisms.strip().upper() != cfg.sasl_mechanism.strip().upper():
            raise ConfigError("sasl.mechanism and sasl.mechanisms (librdkafka's name) disagree: give one")
    mechanism = (cfg.sasl_mechanisms or cfg.sasl_mechanism).strip().upper()
    if mechanism not in _MECHANISMS:
        raise ConfigError(f"sasl.mechanism must be one of {', '.join(_MECHANISMS)}, got {mechanism!r}")
    return mechanism


# ---------------------------------------------------------------------- Kerberos

#: The GSSAPI keys that make no sense with another mechanism (the renewal keys have defaults, so only when given).
_KERBEROS_KEYS = ("sasl.kerberos.service.name", "sasl.kerberos.keytab", "sasl.kerberos.principal",
                  "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
                  "sasl.kerberos.min.time.before.relogin")


def _check_kerberos_keys(cfg: ProducerConfig, mechanism: str) -> None:
    given = sorted(key for key in _KERBEROS_KEYS if key in cfg.explicit_keys)
    if given and mechanism != "GSSAPI":
        raise ConfigError(f"{', '.join(given)}: GSSAPI (Kerberos) settings, but sasl.mechanism is {mechanism}")


def _kerberos_settings(cfg: ProducerConfig) -> KerberosSettings:
    """Who logs in (Krb5LoginModule's options, else librdkafka's keys) and the service name, checked now."""
    if cfg.sasl_username is not None or cfg.sasl_password is not None:
        raise ConfigError("sasl.username/sasl.password are not used by sasl.mechanism=GSSAPI: give a keytab")
    options = _krb5_options(cfg)
    if options is None:
        keytab, principal, cache = cfg.sasl_kerberos_keytab, cfg.sasl_kerberos_principal, None
        if keytab is None:
            raise ConfigError(
                "sasl.mechanism=GSSAPI needs a login: sasl.jaas.config (com.sun.security.auth.module.Krb5LoginModule "
                'required useKeyTab=true keyTab="..." principal="...";) or sasl.kerberos.keytab and sasl.kerberos.principal'
            )
        where = "sasl.kerberos.keytab"
    else:
        keytab, principal, cache = _krb5_login(options)
        where = "sasl.jaas.config keyTab"
    if keytab is not None:
        if not principal:
            raise ConfigError(f"{where} is given without the principal to log in as (principal=\"user@REALM\")")
        if not os.path.isfile(keytab) or not os.access(keytab, os.R_OK):
            raise ConfigError(f"{where} {keytab!r} is not a readable file")
    _require_gssapi()
    return KerberosSettings(
        principal=principal or None, keytab=keytab, service_name=_service_name(cfg, options), ticket_cache=cache,
        renew_window_factor=cfg.sasl_kerberos_ticket_renew_window_factor,
        renew_jitter=cfg.sasl_kerberos_ticket_renew_jitter,
        min_time_before_relogin_ms=cfg.sasl_kerberos_min_time_before_relogin,
        # A KDC round trip is a request: bounded by request.timeout.ms, and within start()'s max.block.ms.
        timeout_ms=min(cfg.request_timeout_ms, cfg.max_block_ms),
    )


def _krb5_options(cfg: ProducerConfig) -> dict[str, str] | None:
    """The JAAS line's Krb5LoginModule options, or None without a JAAS line."""
    if cfg.sasl_jaas_config is None:
        return None
    given = [key for key in ("sasl.kerberos.keytab", "sasl.kerberos.principal") if key in cfg.explicit_keys]
    if given:
        raise ConfigError(f"sasl.jaas.config and {' and '.join(given)} (librdkafka's) both say who logs in: give one")
    try:
        return credentials_from_jaas(parse_jaas_config(cfg.sasl_jaas_config.value), "GSSAPI")
    except ValueError as exc:
        message = str(exc)
        raise ConfigError(message if message.startswith("sasl.jaas.config:") else f"sasl.jaas.config: {message}") from None


def _krb5_login(options: dict[str, str]) -> tuple[str | None, str | None, str | None]:
    """(keytab, principal, ticket cache) from Krb5LoginModule's options; a producer cannot prompt for a password."""
    principal = options.get("principal")
    if options.get("useKeyTab", "").lower() == "true":
        keytab = options.get("keyTab")
        if not keytab:
            raise ConfigError("sasl.jaas.config: Krb5LoginModule useKeyTab=true needs keyTab=\"/path/to/file.keytab\"")
        return keytab, principal, None
    if options.get("useTicketCache", "").lower() == "true":
        return None, principal, options.get("ticketCache")
    raise ConfigError(
        "sasl.jaas.config: Krb5LoginModule needs useKeyTab=true with keyTab and principal, or useTicketCache=true: "
        "a producer cannot prompt for a password"
    )


def _service_name(cfg: ProducerConfig, options: dict[str, str] | None) -> str:
    """``sasl.kerberos.service.name``, or the JAAS option ``serviceName``; both given, they must agree (Java's rule)."""
    key, jaas = cfg.sasl_kerberos_service_name, (options or {}).get("serviceName")
    if key and jaas and key != jaas:
        raise ConfigError(f"sasl.kerberos.service.name={key!r} and sasl.jaas.config serviceName={jaas!r} disagree: give one")
    name = key or jaas
    if not name:
        raise ConfigError(
            "sasl.mechanism=GSSAPI needs sasl.kerberos.service.name: the first part of the brokers' "
            "principals (kafka for kafka/broker.example.com@REALM)"
        )
    return name


def _require_gssapi() -> None:
    try:
        import gssapi  # noqa: F401 - only whether it is there
    except ImportError:
        raise ConfigError(
            "sasl.mechanism=GSSAPI needs python-gssapi: pip install 'aioproducer[kerberos]' (it builds against the "
            "system's MIT Kerberos: Debian libkrb5-dev, Fedora krb5-devel)"
        ) from None
