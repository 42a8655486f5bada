"""OAUTHBEARER tokens from an OIDC provider (KIP-768 client credentials), fetched, cached, refreshed.

Theory of operation. Java's ``OAuthBearerLoginCallbackHandler`` asks the token endpoint
(``sasl.oauthbearer.token.endpoint.url``) for an access token with the OAuth client
credentials grant (RFC 6749 §4.4): a form POST of ``grant_type=client_credentials`` and
the scope, the client id and secret in an HTTP Basic header (§2.3.1, each form-url-encoded
first). The token is a JWT the broker verifies against the provider's JWKS. It is kept and
handed to every authentication (each new connection, each KIP-368 re-authentication) until
its refresh point, then fetched again: one request per token lifetime, not one per
connection.

KIP-1139's JWT bearer grant (RFC 7523) sends, instead of the client's credentials, a signed
assertion: read from ``sasl.oauthbearer.assertion.file`` for every request (so that whoever
makes it can rotate it), or, without that file, signed here for every request with the
private key in ``sasl.oauthbearer.assertion.private.key.file``
(:mod:`aioproducer.security.assertion`; the file wins when both are given, as in Java).

The refresh point follows Java's ``sasl.login.refresh.*`` rule: at ``window.factor`` of
the lifetime plus up to ``window.jitter`` of it at random; moved earlier if that leaves
less than ``buffer.seconds`` before expiry, and later if it comes sooner than
``min.period.seconds`` after the token arrived; if the lifetime cannot hold both the
buffer and the minimum period, the window point stands. Unlike Java no thread refreshes
in the background: the first authentication past the refresh point fetches (one fetch at
a time; the others wait for it), which is all a producer's connections need.

The expiry is the JWT's ``exp`` claim (seconds, what the broker enforces), else the
response's ``expires_in`` (seconds from now); a token with neither is refused.

Failures. The provider refusing the client (an HTTP 4xx: ``invalid_client``, a wrong
secret, an unknown scope; and 501, 505) is a :class:`SaslAuthenticationFailedError` carrying
the provider's own ``error``/``error_description``: retrying cannot help, so ``start()``
fails at once. The provider unreachable, slow or failing (5xx, 408, 429) is retried at once
as Java's ``HttpJwtRetriever`` does: after ``sasl.login.retry.backoff.ms``, doubling each
time, for at most ``sasl.login.retry.backoff.max.ms`` in all (the last wait cut to fit);
then it is a :class:`KafkaConnectionError`, retried as a broker connection is. An answer is
read up to :data:`MAX_TOKEN_RESPONSE_BYTES` and refused past it, unread.

Secrets. The client secret, the private key and its passphrase, the assertions and the tokens
never appear in a message, a ``repr`` or the log. The provider's own text is quoted in errors
(its ``error_description`` says why it refused), and a provider or a gateway in front of it may
echo the request it got: every secret value the request carried, in every form the client sent
it (the raw secret, form-url-encoded, the Base64 of ``id:secret``, the whole ``Authorization``
header, the assertion and its signature) and in the forms an echo hands it back (URL-, JSON- or
HTML-escaped), is cut out of that text before any error is made of it (:func:`request_secrets`,
:func:`aioproducer.security.redaction.redact`): the one place provider text enters a message, so
exceptions, their ``repr``, the "last failures" of ``start()`` and the retry warnings are clean alike.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import ssl
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Final

from aioproducer.config import Password
from aioproducer.errors import KafkaConnectionError, SaslAuthenticationFailedError
from aioproducer.logs import client_logger
from aioproducer.network.http_body import BodyTooLargeError, read_capped
from aioproducer.security.assertion import AssertionFileError, AssertionSettings, make_assertion
from aioproducer.security.redaction import authorization_secrets, redact
from aioproducer.security.sasl import token_expiry_ms

__all__ = [
    "AccessToken",
    "OidcSettings",
    "OidcTokenCache",
    "RefreshSettings",
    "parse_token_response",
    "refresh_at_ms",
    "request_secrets",
    "token_request",
]

#: How much of the provider's error body goes into a message (it is the provider's text, not ours).
_MAX_ERROR_TEXT: Final = 300
#: Java's ``HttpJwtRetriever`` retries every HTTP error but 4xx (save 408 and 429), 501 and 505.
_RETRIABLE_4XX: Final = frozenset({408, 429})
_UNRETRIABLE_5XX: Final = frozenset({501, 505})
#: The most of a token endpoint's answer read. A token answer is a JWT of a few KiB (a large
#: identity provider's, with every group claim, stays under 64 KiB); 1 MiB leaves a wide margin
#: and still stops a misrouted download or a lying server from growing the process by its size.
MAX_TOKEN_RESPONSE_BYTES: Final = 1024 * 1024


@dataclass(frozen=True)
class RefreshSettings:
    """Java's ``sasl.login.refresh.*`` keys, with Java's defaults."""

    window_factor: float = 0.8
    window_jitter: float = 0.05
    min_period_seconds: int = 60
    buffer_seconds: int = 300


CLIENT_CREDENTIALS: Final = "client_credentials"
JWT_BEARER: Final = "urn:ietf:params:oauth:grant-type:jwt-bearer"


@dataclass(frozen=True, repr=False)
class OidcSettings:
    """Where and as whom to ask for tokens; ``repr`` shows no secret.

    The client credentials grant uses ``client_id`` and ``client_secret``; the JWT bearer
    grant (KIP-1139, RFC 7523) the assertion in ``assertion_file``, else one made from
    ``assertion`` (the private key and claims) for every request.
    """

    token_endpoint_url: str
    client_id: str
    client_secret: Password
    scope: str | None = None
    refresh: RefreshSettings = field(default_factory=RefreshSettings)
    #: Upper bound on one token request (connect, send, answer), in seconds.
    timeout_s: float = 30.0
    grant_type: str = CLIENT_CREDENTIALS
    assertion_file: str | None = None
    #: The assertion made here (JWT bearer grant without ``assertion_file``).
    assertion: AssertionSettings | None = None
    #: ``sasl.login.retry.backoff.ms`` and ``.max.ms``: the first wait after a failed request, and the most time spent retrying.
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 10_000
    #: ``sasl.login.connect.timeout.ms`` and ``.read.timeout.ms`` in seconds (None: only ``timeout_s`` bounds them).
    connect_timeout_s: float | None = None
    read_timeout_s: float | None = None
    #: ``sasl.oauthbearer.header.urlencode`` (KIP-1025): form-url-encode the id and secret in the Basic header.
    header_urlencode: bool = False
    #: The token endpoint's TLS, from the ``ssl.*`` options of ``sasl.jaas.config`` as Java reads
    #: them (a private CA, a client certificate); None: the system's CAs.
    ssl_context: ssl.SSLContext | None = None

    def __repr__(self) -> str:
        if self.grant_type == JWT_BEARER and self.assertion_file is None:
            return f"OidcSettings({self.token_endpoint_url!r}, jwt-bearer, {self.assertion!r}, scope={self.scope!r})"
        if self.grant_type == JWT_BEARER:
            return f"OidcSettings({self.token_endpoint_url!r}, jwt-bearer, assertion_file={self.assertion_file!r}, scope={self.scope!r})"
        return f"OidcSettings({self.token_endpoint_url!r}, client_id={self.client_id!r}, scope={self.scope!r})"


@dataclass(frozen=True, repr=False)
class AccessToken:
    """One token from the provider: its value (never shown), when it arrived and when it expires (ms)."""

    value: str
    received_ms: int
    expires_ms: int

    def __repr__(self) -> str:
        return f"AccessToken(received_ms={self.received_ms}, expires_ms={self.expires_ms})"


def token_request(settings: OidcSettings, assertion: str | None = None) -> tuple[dict[str, str], bytes]:
    """The headers and form body of a token request.

    Client credentials: RFC 6749 §4.4.2, the client authenticated with Basic auth, the id and
    secret form-url-encoded first (§2.3.1) only if ``header_urlencode`` (Java's default: not).
    JWT bearer: RFC 7523 §2.1, ``assertion`` in the form and no client authentication, as Java sends it.
    """
    if settings.grant_type == JWT_BEARER:
        if not assertion:
            raise ValueError("token_request: the JWT bearer grant needs an assertion")
        form = {"grant_type": JWT_BEARER, "assertion": assertion}
        if settings.scope:
            form["scope"] = settings.scope
        headers = {"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"}
        return headers, urllib.parse.urlencode(form).encode("ascii")
    user, secret = settings.client_id, settings.client_secret.value
    if settings.header_urlencode:
        user, secret = urllib.parse.quote(user, safe=""), urllib.parse.quote(secret, safe="")
    basic = base64.b64encode(f"{user}:{secret}".encode()).decode("ascii")
    form = {"grant_type": "client_credentials"}
    if settings.scope:
        form["scope"] = settings.scope
    headers = {
        "Authorization": f"Basic {basic}",
        "Content-Type": "application/x-www-form-urlencoded",
        "Accept": "application/json",
    }
    return headers, urllib.parse.urlencode(form).encode("ascii")


def parse_token_response(
    status: int, body: bytes, now_ms: int, *, url: str, secrets: Collection[str] = ()
) -> AccessToken:
    """The token in the provider's answer, or the error saying why there is none.

    ``secrets`` (:func:`request_secrets`) are cut out of any provider text quoted in an error:
    a provider that echoes the request must not leak them through us.
    """
    if _retriable(status):
        raise KafkaConnectionError(f"OAUTHBEARER: the token endpoint {url} answered HTTP {status}{_provider_text(body, secrets)}")
    if status != 200:
        raise SaslAuthenticationFailedError(
            f"OAUTHBEARER: the token endpoint {url} refused the client (HTTP {status}){_provider_text(body, secrets)}"
        )
    document = _json_object(body)
    token = document.get("access_token") if document is not None else None
    if not isinstance(token, str) or not token:
        raise SaslAuthenticationFailedError(f"OAUTHBEARER: the token endpoint {url} answered without an access_token")
    expires_ms = token_expiry_ms(token)
    if expires_ms is None:
        expires_in = document.get("expires_in") if document is not None else None
        if isinstance(expires_in, int | float) and not isinstance(expires_in, bool) and expires_in > 0:
            expires_ms = now_ms + int(expires_in * 1000)
    if expires_ms is None:
        raise SaslAuthenticationFailedError(
            f"OAUTHBEARER: the token from {url} does not say when it expires (neither a JWT exp claim nor expires_in)"
        )
    if expires_ms <= now_ms:
        raise SaslAuthenticationFailedError(f"OAUTHBEARER: the token endpoint {url} handed out an expired token")
    return AccessToken(token, now_ms, expires_ms)


def _json_object(body: bytes) -> dict[str, object] | None:
    try:
        document = json.loads(body)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def _retriable(status: int) -> bool:
    """Java's ``HttpJwtRetriever`` rule: 408, 429 and every 5xx but 501 and 505 are worth asking again."""
    return status in _RETRIABLE_4XX or (status >= 500 and status not in _UNRETRIABLE_5XX)


def _provider_text(body: bytes, secrets: Collection[str]) -> str:
    """``: <error>: <error_description>`` from an OAuth error document (RFC 6749 §5.2), else the body's start; redacted."""
    document = _json_object(body)
    if document is not None and isinstance(document.get("error"), str):
        text = str(document["error"])
        if isinstance(document.get("error_description"), str):
            text += f": {document['error_description']}"
    else:
        text = body.decode("utf-8", "replace").strip()
    text = redact(text, secrets)[:_MAX_ERROR_TEXT]  # cut after redacting: a cut must not split a secret out of reach
    return f": {text}" if text else ""


def request_secrets(settings: OidcSettings, headers: Mapping[str, str], assertion: str | None) -> frozenset[str]:
    """Every secret value a token request carried, in each form the client sent it.

    Client credentials: the secret as configured and form-url-encoded (KIP-1025's
    ``header.urlencode`` sends that form; both are listed whatever the setting), the
    ``id:secret`` pair and its Base64, and the whole ``Authorization`` header. JWT bearer: the
    assertion (it is a credential until it expires) and its signature (with the header and claims,
    which are not secret, it is the assertion again).
    """
    found = {settings.client_secret.value, urllib.parse.quote(settings.client_secret.value, safe="")}
    found |= authorization_secrets(headers.get("Authorization", ""))
    if assertion:
        found |= {assertion, assertion.rpartition(".")[2]}
    return frozenset(value for value in found if value)


def refresh_at_ms(token: AccessToken, refresh: RefreshSettings, draw: float) -> int:
    """When to fetch the next token (Java's rule, see the module doc); ``draw`` in [0, 1) picks the jitter."""
    start, expiry = token.received_ms, token.expires_ms
    lifetime = expiry - start
    at = start + int(lifetime * (refresh.window_factor + refresh.window_jitter * draw))
    min_period_ms = refresh.min_period_seconds * 1000
    buffer_ms = refresh.buffer_seconds * 1000
    if min_period_ms + buffer_ms > lifetime:
        return at
    return max(min(at, expiry - buffer_ms), start + min_period_ms)


#: Fetches one token: (settings, now_ms) -> token. The default speaks HTTP with aiohttp.
Fetcher = Callable[[OidcSettings, int], Awaitable[AccessToken]]


async def fetch_token(settings: OidcSettings, now_ms: int) -> AccessToken:
    """One token request over aiohttp; errors classified as :func:`parse_token_response` does."""
    assertion = await asyncio.to_thread(current_assertion, settings, now_ms) if settings.grant_type == JWT_BEARER else None
    headers, body = token_request(settings, assertion)
    status, answer = await _post(settings, headers, body)
    secrets = request_secrets(settings, headers, assertion)
    return parse_token_response(status, answer, now_ms, url=settings.token_endpoint_url, secrets=secrets)


async def _post(settings: OidcSettings, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
    """The token endpoint's status and answer (at most :data:`MAX_TOKEN_RESPONSE_BYTES`), or the error no answer is."""
    import aiohttp

    url = settings.token_endpoint_url
    timeout = aiohttp.ClientTimeout(
        total=settings.timeout_s, sock_connect=settings.connect_timeout_s, sock_read=settings.read_timeout_s
    )
    unreachable = ""
    try:
        connector = None if settings.ssl_context is None else aiohttp.TCPConnector(ssl=settings.ssl_context)
        async with aiohttp.ClientSession(timeout=timeout, connector=connector) as session:
            async with session.post(url, data=body, headers=headers, allow_redirects=False) as response:
                status = response.status
                return status, await read_capped(response, MAX_TOKEN_RESPONSE_BYTES)
    except BodyTooLargeError as exc:
        error = KafkaConnectionError if _retriable(status) else SaslAuthenticationFailedError
        raise error(f"OAUTHBEARER: the token endpoint {url} answered HTTP {status} with {exc}") from None
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        unreachable = type(exc).__name__
    # Raised outside the handler: aiohttp's exception (whose request_info holds the request's
    # headers, the Authorization among them) is not kept as this one's __context__.
    raise KafkaConnectionError(f"OAUTHBEARER: the token endpoint {url} could not be reached: {unreachable}")


def current_assertion(settings: OidcSettings, now_ms: int) -> str:
    """The assertion for one request: the file's (it wins, as in Java), else one signed now."""
    if settings.assertion_file is not None or settings.assertion is None:
        return read_assertion(settings.assertion_file)
    try:
        return make_assertion(settings.assertion, now_ms)
    except AssertionFileError as exc:
        raise SaslAuthenticationFailedError(f"OAUTHBEARER: {exc}") from None


def read_assertion(path: str | None) -> str:
    """The assertion in ``sasl.oauthbearer.assertion.file`` (read for every request: it may be rotated)."""
    if path is None:
        raise SaslAuthenticationFailedError("OAUTHBEARER: the JWT bearer grant needs sasl.oauthbearer.assertion.file")
    try:
        with open(path, encoding="utf-8") as file:
            assertion = file.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise SaslAuthenticationFailedError(
            f"sasl.oauthbearer.assertion.file {path!r} cannot be read: {type(exc).__name__}"
        ) from None
    if assertion.count(".") != 2:
        raise SaslAuthenticationFailedError(f"sasl.oauthbearer.assertion.file {path!r} does not hold a JWT")
    return assertion


class OidcTokenCache:
    """The current token and its refresh point; :meth:`token` fetches only when that has passed."""

    def __init__(
        self,
        settings: OidcSettings,
        *,
        fetch: Fetcher = fetch_token,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        draw: Callable[[], float] = random.random,
        client_id: str = "",
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self.settings = settings
        self._fetch = fetch
        self._clock_ms = clock_ms
        self._sleep = sleep
        self._draw = draw
        self._token: AccessToken | None = None
        self._refresh_at = 0
        self._lock: asyncio.Lock | None = None
        self._log = client_logger("aioproducer.security.oidc", client_id)

    def __repr__(self) -> str:
        return f"OidcTokenCache({self.settings!r}, holds_token={self._token is not None})"

    @property
    def refresh_at(self) -> int:
        """When the held token is to be replaced (ms since the epoch); 0 before the first."""
        return self._refresh_at

    async def token(self) -> str:
        """The held token while it is before its refresh point, else a new one (one fetch at a time)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            now = self._clock_ms()
            if self._token is None or now >= self._refresh_at:
                token = await self._fetch_retrying(now)
                self._token = token
                self._refresh_at = refresh_at_ms(token, self.settings.refresh, self._draw())
                self._log.debug(
                    "OAUTHBEARER: new token from %s for client %s, expires in %d ms, refreshed in %d ms",
                    self.settings.token_endpoint_url, self.settings.client_id,
                    token.expires_ms - now, self._refresh_at - now,
                )
            return self._token.value

    async def _fetch_retrying(self, now: int) -> AccessToken:
        """One fetch, retried as Java's ``Retry``: waits of backoff * 2^(n-1), all within backoff.max.

        Only a :class:`KafkaConnectionError` (unreachable, 5xx, 408, 429) is retried; a refusal is final.
        """
        settings = self.settings
        deadline = now + settings.retry_backoff_max_ms
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._fetch(settings, self._clock_ms())
            except KafkaConnectionError as exc:
                wait_ms = min(settings.retry_backoff_ms * 2 ** (attempt - 1), deadline - self._clock_ms())
                if wait_ms <= 0:
                    raise
                self._log.warning("%s (attempt %d); trying again in %d ms", exc, attempt, wait_ms)
                await self._sleep(wait_ms / 1000)
