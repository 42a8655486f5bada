"""A fake OIDC provider for tests: a client credentials token endpoint and a JWKS, on a thread of its own.

Theory of operation. A broker's ``OAuthBearerValidatorCallbackHandler`` checks a token's
RS256 signature against the keys its JWKS endpoint publishes, and its ``exp``, ``iat`` and
``sub`` claims. This provider generates an RSA key per run (``cryptography``), publishes it
at :attr:`OidcProvider.jwks_endpoint_url`, and signs a JWT for every client whose id and
secret (HTTP Basic, or ``client_id``/``client_secret`` in the form) match one given to it:
``sub`` is the client id, ``exp`` ``token_lifetime_s`` after ``iat``. A wrong secret or an
unknown client is answered ``401 {"error": "invalid_client", ...}``, another grant
``400 unsupported_grant_type``, as RFC 6749 §5.2 has it. (The Basic header's id and secret
are taken form-url-decoded, as RFC 6749 §2.3.1 has them, or as they are, as Java sends them
by default.) The JWT bearer grant (RFC 7523, KIP-1139) takes an assertion signed with the
private key whose public half was registered for its issuer, a client
(:meth:`OidcProvider.register_client_key`; :meth:`OidcProvider.assertion_for` makes and
registers one): its RS256 or ES256 signature, ``iss``/``sub``, ``aud`` (the token endpoint
or the issuer), ``exp`` (in the future, and not more than a day ahead: an ``exp`` in
milliseconds is refused), ``nbf`` (not in the future) and ``jti`` (never twice) are checked,
else ``400 invalid_grant`` with an ``error_description`` saying which. :meth:`OidcProvider.fail_next`
makes the next requests fail with 503, to show a client's retries. Every token request is logged
(:attr:`OidcProvider.requests`, secrets left out), so a test can count how often a client
asked. Like :class:`~aioproducer.testing.SchemaRegistry`, it is driven synchronously
from any thread and closed with :meth:`OidcProvider.close` (or ``with``)::

    with OidcProvider(clients={"svc": "svc-secret"}, token_lifetime_s=60) as provider:
        config = {"sasl.oauthbearer.token.endpoint.url": provider.token_endpoint_url, ...}
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from aiohttp import web
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from aioproducer.testing._loop_thread import LoopThreadService

__all__ = ["OidcProvider", "OidcProviderClosedError", "TokenRequest"]

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
#: Leeway for the client's clock, and the longest an assertion may live (Java's claim.exp.seconds at most).
_CLOCK_SKEW_S = 60
_MAX_ASSERTION_LIFETIME_S = 86400
PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey


class OidcProviderClosedError(RuntimeError):
    """The provider was closed."""


@dataclass(frozen=True)
class TokenRequest:
    """One request to the token endpoint, as logged: who asked, for what, and the answer's status."""

    client_id: str | None
    grant_type: str | None
    scope: str | None
    status: int
    #: The issued token's ``jti`` (None when refused).
    token_id: str | None
    time: float
    #: A JWT bearer request's assertion ``jti`` (None without one).
    assertion_id: str | None = None


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _jws(header: dict[str, Any], claims: dict[str, Any], key: rsa.RSAPrivateKey) -> str:
    """A compact RS256 JWS of ``claims``."""
    signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
    signature = key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64url(signature)}"


def _assertion_id(assertion: str) -> str | None:
    """The ``jti`` of an assertion already checked to be a JWT."""
    jti = json.loads(_unb64url(assertion.split(".")[1])).get("jti")
    return jti if isinstance(jti, str) else None


def _uint(number: int) -> str:
    return _b64url(number.to_bytes((number.bit_length() + 7) // 8, "big"))


class OidcProvider(LoopThreadService):
    """Token endpoint (``POST /oauth2/token``) and JWKS (``GET /jwks``) on 127.0.0.1.

    ``ssl_context=`` (a server context whose certificate names 127.0.0.1) serves HTTPS, and
    :attr:`issuer` and the endpoint URLs say ``https``: for a producer's token endpoint TLS.
    """

    _kind: ClassVar[str] = "OidcProvider"
    _closed_error: ClassVar[type[Exception]] = OidcProviderClosedError
    _shutdown_timeout: ClassVar[float | None] = 10.0

    def __init__(
        self,
        clients: Mapping[str, str],
        *,
        token_lifetime_s: int = 3600,
        audience: str | None = None,
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        if ssl_context is not None and not isinstance(ssl_context, ssl.SSLContext):
            raise ValueError(f"ssl_context must be an ssl.SSLContext (a server one) or None, got {type(ssl_context).__name__}")
        self._ssl_context = ssl_context
        if not clients or not all(isinstance(k, str) and k and isinstance(v, str) and v for k, v in clients.items()):
            raise ValueError("clients must map non-empty client ids to non-empty secrets")
        self._check_lifetime(token_lifetime_s)
        self._clients = dict(clients)
        self._lifetime = token_lifetime_s
        self.audience = audience
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.key_id: str = secrets.token_hex(8)
        self._requests: list[TokenRequest] = []
        #: Each client's assertion key (JWT bearer grant) made by assertion_for, on first use.
        self._client_keys: dict[str, rsa.RSAPrivateKey] = {}
        #: The public key registered for each client's assertions.
        self._client_public_keys: dict[str, PublicKey] = {}
        self._seen_jtis: set[str] = set()
        self._failures_left = 0
        self._failure_status = 503
        self._log_lock = threading.Lock()
        self._runner: web.AppRunner | None = None
        self._start_thread("aioproducer-oidc-provider")
        try:
            self.port: int = self._run(self._serve(port))
        except BaseException:
            self.close()
            raise
        self.issuer: str = f"{self._scheme}://127.0.0.1:{self.port}"

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{self._scheme}://127.0.0.1:{getattr(self, 'port', '?')}"
        return f"OidcProvider({state}, clients={sorted(self._clients)!r})"

    @property
    def _scheme(self) -> str:
        return "http" if self._ssl_context is None else "https"

    @staticmethod
    def _check_lifetime(seconds: int) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int) or seconds < 1:
            raise ValueError(f"token_lifetime_s must be an int >= 1, got {seconds!r}")

    # ----------------------------------------------------------------- public

    @property
    def token_endpoint_url(self) -> str:
        return f"{self.issuer}/oauth2/token"

    @property
    def jwks_endpoint_url(self) -> str:
        return f"{self.issuer}/jwks"

    @property
    def requests(self) -> list[TokenRequest]:
        """Every token request so far, oldest first (a copy)."""
        with self._log_lock:
            return list(self._requests)

    def tokens_issued(self, client_id: str | None = None) -> int:
        """How many tokens were handed out (to ``client_id``, or to anyone)."""
        return sum(1 for r in self.requests if r.token_id is not None and client_id in (None, r.client_id))

    def set_token_lifetime(self, seconds: int) -> None:
        """The lifetime of tokens issued from now on."""
        self._check_lifetime(seconds)
        self._lifetime = seconds

    def register_client_key(self, client_id: str, public_key: PublicKey | bytes | str) -> None:
        """Trust assertions ``client_id`` signs with the private half of ``public_key`` (an object or PEM) from now on."""
        if client_id not in self._clients:
            raise ValueError(f"register_client_key: unknown client {client_id!r}")
        if isinstance(public_key, str | bytes):
            loaded = serialization.load_pem_public_key(public_key.encode() if isinstance(public_key, str) else public_key)
            if not isinstance(loaded, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
                raise ValueError("register_client_key: an RSA or EC public key is needed")
            public_key = loaded
        self._client_public_keys[client_id] = public_key

    def fail_next(self, count: int, *, status: int = 503) -> None:
        """Answer the next ``count`` token requests ``status`` (logged as such), whatever they hold."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 0 or not 400 <= status <= 599:
            raise ValueError(f"fail_next: count must be an int >= 0 and status an HTTP error, got {count!r}, {status!r}")
        self._failures_left, self._failure_status = count, status

    def assertion_for(self, client_id: str, *, lifetime_s: int = 300, audience: str | None = None) -> str:
        """A JWT bearer assertion for ``client_id`` (a known client), signed with a key made and registered for it."""
        if client_id not in self._clients:
            raise ValueError(f"assertion_for: unknown client {client_id!r}")
        if client_id not in self._client_keys:
            self._client_keys[client_id] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.register_client_key(client_id, self._client_keys[client_id].public_key())
        key = self._client_keys[client_id]
        now = int(time.time())
        claims = {"iss": client_id, "sub": client_id, "aud": audience or self.token_endpoint_url,
                  "iat": now, "exp": now + lifetime_s, "jti": secrets.token_hex(8)}
        return _jws({"alg": "RS256", "typ": "JWT", "kid": f"client-{client_id}"}, claims, key)

    def issue_token(self, client_id: str, *, lifetime_s: int | None = None, scope: str | None = None) -> str:
        """A token signed by this provider, without a request (for tests of the broker side)."""
        return self._sign(client_id, scope, self._lifetime if lifetime_s is None else lifetime_s)[0]

    # ----------------------------------------------------------------- server

    async def _serve(self, port: int) -> int:
        app = web.Application()
        app.router.add_post("/oauth2/token", self._token)
        app.router.add_get("/jwks", self._jwks)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port, reuse_address=True, ssl_context=self._ssl_context)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        return int(runner.addresses[0][1])

    async def _stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    def _shutdown(self) -> Any:
        return self._stop()

    async def _jwks(self, request: web.Request) -> web.Response:
        numbers = self._key.public_key().public_numbers()
        key = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.key_id, "n": _uint(numbers.n), "e": _uint(numbers.e)}
        return web.json_response({"keys": [key]})

    async def _token(self, request: web.Request) -> web.Response:
        form = urllib.parse.parse_qs((await request.read()).decode("utf-8", "replace"))
        grant = form.get("grant_type", [None])[0]
        scope = form.get("scope", [None])[0]
        if self._failures_left > 0:
            self._failures_left -= 1
            return self._refuse(None, grant, scope, self._failure_status, "temporarily_unavailable", "the provider is failing on purpose")
        if grant == JWT_BEARER:
            return self._jwt_bearer(form.get("assertion", [""])[0], scope)
        client_id, authenticated = self._client(request, form)
        if not authenticated:
            return self._refuse(client_id, grant, scope, 401, "invalid_client", "client authentication failed")
        if grant != "client_credentials":
            return self._refuse(client_id, grant, scope, 400, "unsupported_grant_type", f"grant type {grant!r} is not supported")
        assert client_id is not None
        lifetime = self._lifetime
        token, token_id = self._sign(client_id, scope, lifetime)
        self._record(TokenRequest(client_id, grant, scope, 200, token_id, time.time()))
        body: dict[str, Any] = {"access_token": token, "token_type": "Bearer", "expires_in": lifetime}
        if scope:
            body["scope"] = scope
        return web.json_response(body)

    def _jwt_bearer(self, assertion: str, scope: str | None) -> web.Response:
        """RFC 7523 §3: the assertion's signature, issuer, subject, audience and expiry."""
        client_id, problem = self._check_assertion(assertion)
        if problem is not None:
            return self._refuse(client_id, JWT_BEARER, scope, 400, "invalid_grant", problem)
        assert client_id is not None
        token, token_id = self._sign(client_id, scope, self._lifetime)
        self._record(TokenRequest(client_id, JWT_BEARER, scope, 200, token_id, time.time(), _assertion_id(assertion)))
        return web.json_response({"access_token": token, "token_type": "Bearer", "expires_in": self._lifetime})

    def _check_assertion(self, assertion: str) -> tuple[str | None, str | None]:
        """(client id, None) for a good assertion, else (who it claims to be, why it is refused)."""
        try:
            header_b64, claims_b64, signature_b64 = assertion.split(".")
            claims = json.loads(_unb64url(claims_b64))
            header = json.loads(_unb64url(header_b64))
        except ValueError:
            return None, "the assertion is not a JWT"
        if not isinstance(claims, dict) or not isinstance(header, dict):
            return None, "the assertion is not a JWT"
        client_id = claims.get("iss")
        key = self._client_public_keys.get(client_id) if isinstance(client_id, str) else None
        if key is None or not isinstance(client_id, str):
            return None, "the assertion's issuer has no registered key"
        problem = self._signature_problem(key, header.get("alg"), f"{header_b64}.{claims_b64}".encode("ascii"), signature_b64)
        if problem is not None:
            return client_id, problem
        return client_id, self._claims_problem(client_id, claims)

    @staticmethod
    def _signature_problem(key: PublicKey, alg: object, signed: bytes, signature_b64: str) -> str | None:
        """None if ``alg`` fits the key (RS256: RSA, ES256: EC) and the signature verifies."""
        try:
            signature = _unb64url(signature_b64)
            if alg == "RS256" and isinstance(key, rsa.RSAPublicKey):
                key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
            elif alg == "ES256" and isinstance(key, ec.EllipticCurvePublicKey) and len(signature) == 64:
                r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
                key.verify(encode_dss_signature(r, s), signed, ec.ECDSA(hashes.SHA256()))
            else:
                return f"the assertion's alg {alg!r} does not fit the key registered for its issuer"
        except (InvalidSignature, ValueError):
            return "the assertion's signature does not verify"
        return None

    def _claims_problem(self, client_id: str, claims: dict[str, Any]) -> str | None:
        """RFC 7523 §3's checks of the claims, in order; None if all pass."""
        now = time.time()
        exp, nbf, jti = claims.get("exp"), claims.get("nbf"), claims.get("jti")
        if claims.get("sub") != client_id:
            return "the assertion's subject is not its issuer"
        if claims.get("aud") not in (self.token_endpoint_url, self.issuer):
            return "the assertion is for another audience"
        if not isinstance(exp, int) or exp <= now:
            return "the assertion has expired"
        if exp > now + _MAX_ASSERTION_LIFETIME_S + _CLOCK_SKEW_S:
            return "the assertion expires too far in the future (exp is in seconds since the epoch)"
        if nbf is not None and (not isinstance(nbf, int) or nbf > now + _CLOCK_SKEW_S):
            return "the assertion is not valid yet (nbf)"
        if jti is not None:
            with self._log_lock:
                if jti in self._seen_jtis:
                    return "the assertion's jti was used before"
                self._seen_jtis.add(str(jti))
        return None

    def _client(self, request: web.Request, form: dict[str, list[str]]) -> tuple[str | None, bool]:
        """(the client id, whether its secret matches), read form-url-decoded (RFC 6749) or as sent (Java's default)."""
        decoded = self._credentials(request, form, decode=True)
        for client_id, secret in (decoded, self._credentials(request, form, decode=False)):
            if client_id is not None and self._clients.get(client_id) == secret:
                return client_id, True
        return decoded[0], False

    @staticmethod
    def _credentials(request: web.Request, form: dict[str, list[str]], *, decode: bool = True) -> tuple[str | None, str | None]:
        """client_secret_basic (each part form-url-decoded, RFC 6749 §2.3.1), else client_secret_post."""
        header = request.headers.get("Authorization", "")
        if header.startswith("Basic "):
            try:
                user, _, password = base64.b64decode(header[6:], validate=True).decode("utf-8").partition(":")
            except ValueError:
                return None, None
            if not decode:
                return user, password
            return urllib.parse.unquote_plus(user), urllib.parse.unquote_plus(password)
        return form.get("client_id", [None])[0], form.get("client_secret", [None])[0]

    def _refuse(self, client_id: str | None, grant: str | None, scope: str | None, status: int, error: str,
                description: str) -> web.Response:
        self._record(TokenRequest(client_id, grant, scope, status, None, time.time()))
        return web.json_response({"error": error, "error_description": description}, status=status)

    def _record(self, entry: TokenRequest) -> None:
        with self._log_lock:
            self._requests.append(entry)

    def _sign(self, client_id: str, scope: str | None, lifetime_s: int) -> tuple[str, str]:
        now = int(time.time())
        token_id = secrets.token_hex(8)
        claims: dict[str, Any] = {"iss": self.issuer, "sub": client_id, "iat": now, "nbf": now,
                                  "exp": now + lifetime_s, "jti": token_id}
        if self.audience is not None:
            claims["aud"] = self.audience
        if scope:
            claims["scope"] = scope
        return _jws({"alg": "RS256", "typ": "JWT", "kid": self.key_id}, claims, self._key), token_id
