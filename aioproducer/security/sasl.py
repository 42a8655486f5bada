"""SASL client mechanisms as pure state machines: PLAIN, SCRAM-SHA-256/512, OAUTHBEARER, GSSAPI.

Theory of operation. Kafka authenticates a connection with SASL: a
SaslHandshake request names the mechanism, then SaslAuthenticate requests carry
the client's messages and their responses carry the broker's (opaque bytes
both ways). Everything mechanism-specific is in what those bytes say, so each
mechanism here is a small object that turns the broker's last message into the
client's next one and does nothing else: no sockets, no asyncio, no clock. That
keeps the connection code a loop that knows no mechanism::

    client = create_sasl_client(mechanism, username=..., password=...)
    answer = await authenticate(client.initial_response())
    while (message := client.respond(answer)) is not None:
        answer = await authenticate(message)
    # client.complete is True here; a failure raised SaslAuthenticationFailedError

and lets the tests replay the RFCs' published exchanges byte for byte. An
object serves one authentication: make a new one per connection.

Failures the client itself detects (the broker's SCRAM signature does not
prove it knows the password, a SCRAM ``e=`` error, an OAUTHBEARER error
document, a malformed or unexpected broker message) raise
:class:`~aioproducer.errors.SaslAuthenticationFailedError`, the class of
Kafka's error code 58, so callers catch one type whichever side noticed.
Calling the methods out of order is a bug in the caller and raises
``RuntimeError``. Secrets (password, salted password, proof, token) never
appear in an exception message or a ``repr()``; the SCRAM client drops the
password once it has derived the keys.

Normalisation (SCRAM). RFC 5802 asks for SASLprep (RFC 4013) of the user name
and the password. The user name is prepared here as a "query" string (mapping,
NFKC with the Unicode 3.2 tables of :mod:`stringprep`, prohibited characters,
the bidirectional rule; unassigned code points allowed), so ``"\\u2168"`` goes on
the wire as ``"IX"``. The password is *not* prepared: Kafka's ScramFormatter
hashes the password's UTF-8 bytes as they are, and the broker's stored keys were
derived that way, so preparing it would lock out a user whose password
SASLprep changes.

GSSAPI (Kerberos). The Kerberos messages themselves come from the system's
GSSAPI library (:mod:`aioproducer.security.kerberos` drives it through
python-gssapi); what Kafka adds around them is framed here, as RFC 4752 says:
the security context's tokens go back and forth until it is established, then
the broker offers its security layers in a wrapped 4-byte message and the
client answers, wrapped too, that it takes none (layer 1, maximum size 0):
Kafka's GSSAPI protects nothing beyond the authentication, TLS does. The first
token needs a ticket from the KDC, a network round trip, so it is made before
this object is (in a thread); every later step is local cryptography.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import json
import re
import secrets
import stringprep
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol, runtime_checkable

from aioproducer.errors import SaslAuthenticationFailedError

__all__ = [
    "SUPPORTED_MECHANISMS",
    "GssapiClient",
    "GssapiContextError",
    "GssContext",
    "OAuthBearerClient",
    "OAuthBearerError",
    "PlainClient",
    "SaslClient",
    "ScramClient",
    "create_sasl_client",
    "token_expiry_ms",
    "unsecured_jwt",
]

PLAIN: Final = "PLAIN"
SCRAM_SHA_256: Final = "SCRAM-SHA-256"
SCRAM_SHA_512: Final = "SCRAM-SHA-512"
OAUTHBEARER: Final = "OAUTHBEARER"
GSSAPI: Final = "GSSAPI"

#: The mechanism names :func:`create_sasl_client` accepts, as Kafka spells them.
SUPPORTED_MECHANISMS: Final = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)

#: SCRAM mechanism name -> hashlib name (RFC 7677 for SHA-256; SHA-512 as Kafka registers it).
_SCRAM_HASHES: dict[str, str] = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}

#: Kafka's ScramMechanism minimum; a lower count from the broker is refused, as Java does.
SCRAM_MIN_ITERATIONS: Final = 4096


@runtime_checkable
class SaslClient(Protocol):
    """The client side of one SASL authentication, as the connection drives it."""

    mechanism: str

    def initial_response(self) -> bytes:
        """The first client message (sent in the first SaslAuthenticate request)."""
        ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The next client message for the broker's ``challenge``, or None: done, authenticated."""
        ...

    @property
    def complete(self) -> bool:
        """True once the broker's last message has been accepted."""
        ...


class _State(enum.Enum):
    START = "not started"
    SENT_FIRST = "waiting for the broker's first answer"
    SENT_TOKEN = "waiting for the broker's next security context token"
    AWAIT_LAYERS = "waiting for the broker's security layer offer"
    SENT_FINAL = "waiting for the broker's final answer"
    COMPLETE = "complete"
    FAILED = "failed"


class _Mechanism:
    """What every mechanism shares: the state, out-of-order calls, failing once."""

    mechanism: str

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self._state = _State.START

    @property
    def complete(self) -> bool:
        return self._state is _State.COMPLETE

    def _expect(self, call: str, *states: _State) -> None:
        if self._state not in states:
            raise RuntimeError(f"{self.mechanism}: {call} called while {self._state.value}")

    def _failed(self, reason: str) -> SaslAuthenticationFailedError:
        """Enter the failed state and make the error to raise (the reason names no secret)."""
        self._state = _State.FAILED
        return SaslAuthenticationFailedError(f"{self.mechanism} authentication failed: {reason}")


class _OneMessage(_Mechanism):
    """A mechanism whose client speaks once (PLAIN, OAUTHBEARER): the message, then only the verdict."""

    _message: bytes

    def initial_response(self) -> bytes:
        self._expect("initial_response()", _State.START)
        self._state = _State.SENT_FIRST
        message, self._message = self._message, b""  # the secret is not kept once sent
        return message


# ------------------------------------------------------------------------ PLAIN


def _check_plain_field(name: str, value: str, *, required: bool) -> None:
    if required and not value:
        raise ValueError(f"PLAIN: {name} is empty")
    if "\0" in value:
        raise ValueError(f"PLAIN: {name} contains a NUL character, which RFC 4616 forbids")


class PlainClient(_OneMessage):
    """RFC 4616 PLAIN: one message ``authzid NUL username NUL password``, then the broker's empty answer.

    PLAIN sends the password itself: use it over TLS only.
    """

    def __init__(self, username: str, password: str, authzid: str = "") -> None:
        super().__init__(PLAIN)
        _check_plain_field("username", username, required=True)
        _check_plain_field("password", password, required=True)
        _check_plain_field("authzid", authzid, required=False)
        self.username = username
        self._message = "\0".join((authzid, username, password)).encode("utf-8")

    def __repr__(self) -> str:
        return f"PlainClient(mechanism={self.mechanism!r}, username={self.username!r})"

    def respond(self, challenge: bytes) -> bytes | None:
        self._expect("respond()", _State.SENT_FIRST)
        if challenge:
            raise self._failed("the broker answered with a challenge, where PLAIN expects none")
        self._state = _State.COMPLETE
        return None


# ------------------------------------------------------------------------ SCRAM


def _saslprep_query(text: str, what: str) -> str:
    """RFC 4013 SASLprep of ``text`` as a query string (unassigned code points allowed)."""
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch for ch in text if not stringprep.in_table_b1(ch)
    )
    prepared = unicodedata.ucd_3_2_0.normalize("NFKC", mapped)
    for ch in prepared:
        if _prohibited(ch):
            raise ValueError(f"{what} contains the character U+{ord(ch):04X}, which SASLprep prohibits")
    _check_bidi(prepared, what)
    if not prepared:
        raise ValueError(f"{what} is empty after SASLprep")
    return prepared


def _prohibited(ch: str) -> bool:
    """RFC 4013 §2.3: the stringprep tables C.1.2 and C.2.1 to C.9."""
    return (
        stringprep.in_table_c12(ch)
        or stringprep.in_table_c21_c22(ch)
        or stringprep.in_table_c3(ch)
        or stringprep.in_table_c4(ch)
        or stringprep.in_table_c5(ch)
        or stringprep.in_table_c6(ch)
        or stringprep.in_table_c7(ch)
        or stringprep.in_table_c8(ch)
        or stringprep.in_table_c9(ch)
    )


def _check_bidi(text: str, what: str) -> None:
    """RFC 3454 §6: right-to-left text may not mix with left-to-right, and must start and end RTL."""
    if not any(stringprep.in_table_d1(ch) for ch in text):
        return
    if any(stringprep.in_table_d2(ch) for ch in text) or not (
        stringprep.in_table_d1(text[0]) and stringprep.in_table_d1(text[-1])
    ):
        raise ValueError(f"{what} mixes right-to-left and left-to-right text in a way SASLprep prohibits")


def _saslname(username: str) -> str:
    """RFC 5802 saslname: ``=`` as ``=3D`` and ``,`` as ``=2C`` (``=`` first, so no escape is doubled)."""
    return username.replace("=", "=3D").replace(",", "=2C")


_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # printable ASCII except ','
_EXTENSION_KEY = re.compile(r"[A-Za-z]+")
_SCRAM_EXTENSION_VALUE = re.compile(r"[\x21-\x2b\x2d-\x7e]*")


def _check_nonce(nonce: str) -> str:
    if not _NONCE.fullmatch(nonce):
        raise ValueError("SCRAM nonce must be non-empty printable ASCII without ','")
    return nonce


def _scram_extensions(extensions: Mapping[str, str] | None) -> str:
    """``,key=value`` for each extension (Kafka's ``tokenauth=true`` for delegation tokens)."""
    parts = []
    for key, value in (extensions or {}).items():
        if not _EXTENSION_KEY.fullmatch(key) or len(key) == 1:
            raise ValueError(f"SCRAM extension name {key!r} must be two or more ASCII letters")
        if not _SCRAM_EXTENSION_VALUE.fullmatch(value):
            raise ValueError(f"SCRAM extension {key!r} has a value with a ',' or a non-printable character")
        parts.append(f",{key}={value}")
    return "".join(parts)


def _hmac(hash_name: str, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, hash_name).digest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class ScramClient(_Mechanism):
    """RFC 5802 SCRAM with SHA-256 (RFC 7677) or SHA-512, as Kafka speaks it (no channel binding).

    Three steps: client-first (user name and a fresh nonce), then from the
    broker's salt and iteration count the client-final (the proof that we know
    the password, without sending it), then the broker's server-final, whose
    signature proves *it* knows the password too. ``extensions`` adds SCRAM
    extensions to client-first, e.g. ``{"tokenauth": "true"}`` to authenticate
    with a Kafka delegation token (token id as username, HMAC as password).
    """

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        nonce: str | None = None,
        *,
        extensions: Mapping[str, str] | None = None,
    ) -> None:
        if mechanism not in _SCRAM_HASHES:
            raise ValueError(f"unsupported SCRAM mechanism {mechanism!r}; supported: {', '.join(_SCRAM_HASHES)}")
        super().__init__(mechanism)
        if not password:
            raise ValueError(f"{mechanism}: password is empty")
        self.username = username
        self._hash = _SCRAM_HASHES[mechanism]
        self._password = password.encode("utf-8")
        self._nonce = _check_nonce(secrets.token_urlsafe(24) if nonce is None else nonce)
        saslname = _saslname(_saslprep_query(username, f"{mechanism} username"))
        self._client_first_bare = f"n={saslname},r={self._nonce}{_scram_extensions(extensions)}"
        self._server_signature = b""

    def __repr__(self) -> str:
        return f"ScramClient(mechanism={self.mechanism!r}, username={self.username!r})"

    def initial_response(self) -> bytes:
        self._expect("initial_response()", _State.START)
        self._state = _State.SENT_FIRST
        return f"n,,{self._client_first_bare}".encode("utf-8")

    def respond(self, challenge: bytes) -> bytes | None:
        self._expect("respond()", _State.SENT_FIRST, _State.SENT_FINAL)
        if self._state is _State.SENT_FIRST:
            return self._client_final(self._decode(challenge, "server-first"))
        self._verify_server_final(self._decode(challenge, "server-final"))
        return None

    def _decode(self, message: bytes, name: str) -> str:
        try:
            return message.decode("utf-8")
        except UnicodeDecodeError:
            raise self._failed(f"the broker's {name} message is not UTF-8") from None

    def _client_final(self, server_first: str) -> bytes:
        server_nonce, salt, iterations = self._parse_server_first(server_first)
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        self._password = b""
        without_proof = f"c=biws,r={server_nonce}"  # biws: base64 of the GS2 header "n,,"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode("utf-8")
        client_key = _hmac(self._hash, salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        client_signature = _hmac(self._hash, stored_key, auth_message)
        proof = bytes(k ^ s for k, s in zip(client_key, client_signature, strict=True))
        server_key = _hmac(self._hash, salted, b"Server Key")
        self._server_signature = _hmac(self._hash, server_key, auth_message)
        self._state = _State.SENT_FINAL
        return f"{without_proof},p={_b64(proof)}".encode("ascii")

    def _parse_server_first(self, message: str) -> tuple[str, bytes, int]:
        """``r=<nonce>,s=<salt>,i=<iterations>[,extensions]``, checked; returns (nonce, salt, iterations)."""
        if message.startswith("e="):
            raise self._failed(f"the broker reported {_server_error(message)}")
        if message.startswith("m="):
            raise self._failed("the broker requires a SCRAM extension this client does not know")
        parts = message.split(",")
        if len(parts) < 3 or [p[:2] for p in parts[:3]] != ["r=", "s=", "i="]:
            raise self._failed("the broker's server-first message is malformed (expected r=, s=, i=)")
        nonce, salt_b64, count = (p[2:] for p in parts[:3])
        if not _NONCE.fullmatch(nonce) or not nonce.startswith(self._nonce):
            raise self._failed("the broker's nonce does not extend the client's nonce")
        return nonce, self._parse_salt(salt_b64), self._parse_iterations(count)

    def _parse_salt(self, text: str) -> bytes:
        try:
            salt = base64.b64decode(text, validate=True)
        except binascii.Error:
            raise self._failed("the broker's salt is not valid base64") from None
        if not salt:
            raise self._failed("the broker's salt is empty")
        return salt

    def _parse_iterations(self, text: str) -> int:
        if not text.isascii() or not text.isdigit():
            raise self._failed("the broker's iteration count is not a number")
        iterations = int(text)
        if iterations < SCRAM_MIN_ITERATIONS:
            raise self._failed(
                f"the broker asked for {iterations} iterations, fewer than the minimum {SCRAM_MIN_ITERATIONS}"
            )
        return iterations

    def _verify_server_final(self, message: str) -> None:
        """``v=<ServerSignature>`` must equal ours; ``e=<error>`` is the broker refusing us."""
        attribute = message.split(",", 1)[0]
        if attribute.startswith("e="):
            raise self._failed(f"the broker reported {_server_error(attribute)}")
        if not attribute.startswith("v="):
            raise self._failed("the broker's server-final message is malformed (expected v= or e=)")
        try:
            signature = base64.b64decode(attribute[2:], validate=True)
        except binascii.Error:
            raise self._failed("the broker's server signature is not valid base64") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise self._failed(
                "the broker's server signature does not match: the broker did not prove it knows the password"
            )
        self._server_signature = b""
        self._state = _State.COMPLETE


def _server_error(attribute: str) -> str:
    """The text of an ``e=`` attribute for a message: printable ASCII only, bounded."""
    value = attribute[2:].split(",", 1)[0]
    safe = "".join(ch if " " <= ch <= "~" else "?" for ch in value[:100])
    return f"error {safe!r}"


# ------------------------------------------------------------------ OAUTHBEARER

_KVSEP: Final = "\x01"
#: RFC 6750 b64token, the form RFC 7628 requires of the bearer token (Kafka checks the same).
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_OAUTH_EXTENSION_VALUE = re.compile(r"[\x21-\x7e \t\r\n]*")


class OAuthBearerError(SaslAuthenticationFailedError):
    """The broker refused an OAUTHBEARER token with an RFC 7628 §3.2.2 error document.

    ``status`` is the document's status (e.g. ``"invalid_token"``); ``scope`` and
    ``openid_configuration`` are set when the broker gave them.
    """

    def __init__(self, status: str | None, scope: str | None, openid_configuration: str | None) -> None:
        self.status = status
        self.scope = scope
        self.openid_configuration = openid_configuration
        detail = f"the broker rejected the token with status {status!r}"
        if scope is not None:
            detail += f", scope {scope!r}"
        if openid_configuration is not None:
            detail += f", openid-configuration {openid_configuration!r}"
        super().__init__(f"{OAUTHBEARER} authentication failed: {detail}")


def _oauth_extensions(extensions: Mapping[str, str] | None) -> str:
    parts = []
    for key, value in (extensions or {}).items():
        if not _EXTENSION_KEY.fullmatch(key) or key == "auth":
            raise ValueError(f"OAUTHBEARER extension name {key!r} must be ASCII letters and not 'auth'")
        if not _OAUTH_EXTENSION_VALUE.fullmatch(value):
            raise ValueError(f"OAUTHBEARER extension {key!r} has a value with a character RFC 7628 forbids")
        parts.append(f"{key}={value}{_KVSEP}")
    return "".join(parts)


def _error_field(document: Mapping[str, object], key: str) -> str | None:
    value = document.get(key)
    return None if value is None else str(value)


class OAuthBearerClient(_OneMessage):
    """RFC 7628 OAUTHBEARER: send the bearer token (and extensions) once; an empty answer accepts it.

    A non-empty answer is the broker's error document and raises
    :class:`OAuthBearerError`. (RFC 7628 has the client acknowledge it with a
    single ``\\x01`` before the server fails the exchange, which is how Java gets
    the broker's error text; this object raises at once, and a driver that wants
    that text may send ``b"\\x01"`` before closing.)
    """

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None) -> None:
        super().__init__(OAUTHBEARER)
        if not _B64TOKEN.fullmatch(token):
            raise ValueError("OAUTHBEARER token is empty or has characters a bearer token cannot have")
        self._message = (
            f"n,,{_KVSEP}auth=Bearer {token}{_KVSEP}{_oauth_extensions(extensions)}{_KVSEP}".encode("ascii")
        )

    def __repr__(self) -> str:
        return f"OAuthBearerClient(mechanism={self.mechanism!r})"

    def respond(self, challenge: bytes) -> bytes | None:
        self._expect("respond()", _State.SENT_FIRST)
        if challenge:
            self._state = _State.FAILED
            raise self._error_from(challenge)
        self._state = _State.COMPLETE
        return None

    def _error_from(self, challenge: bytes) -> SaslAuthenticationFailedError:
        try:
            document = json.loads(challenge.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return self._failed("the broker answered with a challenge that is not an RFC 7628 error document")
        if not isinstance(document, dict):
            return self._failed("the broker answered with a challenge that is not an RFC 7628 error document")
        return OAuthBearerError(
            _error_field(document, "status"),
            _error_field(document, "scope"),
            _error_field(document, "openid-configuration"),
        )


# ----------------------------------------------------------------------- GSSAPI

#: RFC 4752 §3.3: the security layer bits; Kafka's client takes "no security layer".
_NO_SECURITY_LAYER: Final = 0x01
#: The client's answer: no security layer, maximum message size 0 (none applies without a layer), no authzid.
_LAYER_CHOICE: Final = bytes((_NO_SECURITY_LAYER, 0, 0, 0))


class GssapiContextError(Exception):
    """A GSSAPI call on the security context failed; the message is the library's reason (no key material)."""


class GssContext(Protocol):
    """An initiator's GSSAPI security context, as :class:`GssapiClient` uses it (python-gssapi's, adapted)."""

    @property
    def complete(self) -> bool:
        """True once the context is established (mutual authentication done)."""
        ...

    def step(self, token: bytes) -> bytes:
        """The next context token for the broker's ``token`` (empty when there is none to send)."""
        ...

    def wrap(self, message: bytes) -> bytes:
        """``message`` wrapped with integrity protection and no encryption (``gss_wrap``, conf_req 0)."""
        ...

    def unwrap(self, message: bytes) -> bytes:
        """The payload of a message the broker wrapped (``gss_unwrap``), its integrity checked."""
        ...


class GssapiClient(_Mechanism):
    """RFC 4752 GSSAPI with Kafka's framing: context tokens, then the security layer negotiation.

    ``context`` has made ``initial_token`` already (its first step needs the KDC; the
    caller made it off the event loop). ``principal`` is named in every failure, never a key.
    """

    def __init__(self, context: GssContext, initial_token: bytes, principal: str) -> None:
        super().__init__(GSSAPI)
        self.principal = principal
        self._context = context
        self._initial = initial_token

    def __repr__(self) -> str:
        return f"GssapiClient(mechanism={self.mechanism!r}, principal={self.principal!r})"

    def initial_response(self) -> bytes:
        self._expect("initial_response()", _State.START)
        self._state = _State.AWAIT_LAYERS if self._context.complete else _State.SENT_TOKEN
        token, self._initial = self._initial, b""
        return token

    def respond(self, challenge: bytes) -> bytes | None:
        self._expect("respond()", _State.SENT_TOKEN, _State.AWAIT_LAYERS, _State.SENT_FINAL)
        if self._state is _State.SENT_TOKEN:
            token = self._call("the broker's security context token was refused", self._context.step, challenge)
            if self._context.complete:
                self._state = _State.AWAIT_LAYERS
            return token
        if self._state is _State.AWAIT_LAYERS:
            return self._choose_layer(challenge)
        if challenge:
            raise self._failed("the broker answered the security layer choice with a challenge, where it sends none")
        self._state = _State.COMPLETE
        return None

    def _choose_layer(self, challenge: bytes) -> bytes:
        """RFC 4752 §3.1: the broker's wrapped offer (layers, max size), answered with "none, 0"."""
        offer = self._call("the broker's security layer offer could not be unwrapped", self._context.unwrap, challenge)
        if len(offer) != 4:
            raise self._failed(f"the broker's security layer offer is {len(offer)} bytes, where RFC 4752 sends 4")
        if not offer[0] & _NO_SECURITY_LAYER:
            raise self._failed(
                f"the broker offers security layers 0x{offer[0]:02x}, without 'no security layer' (0x01), "
                "the only one Kafka clients take"
            )
        answer = self._call("the security layer choice could not be wrapped", self._context.wrap, _LAYER_CHOICE)
        self._state = _State.SENT_FINAL
        return answer

    def _call(self, what: str, call: Callable[[bytes], bytes], data: bytes) -> bytes:
        try:
            return call(data)
        except GssapiContextError as exc:
            raise self._failed(f"{what}: {exc}") from None

    def _failed(self, reason: str) -> SaslAuthenticationFailedError:
        return super()._failed(f"principal {self.principal}: {reason}")


# ------------------------------------------------------------------------- JWTs

_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")  # RFC 6749 scope-token
_RESERVED_CLAIMS: Final = ("sub", "iat", "exp", "scope")


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _json(value: Mapping[str, object]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def unsecured_jwt(
    principal: str,
    *,
    lifetime_ms: int,
    now_ms: int,
    scope: Sequence[str] = (),
    claims: Mapping[str, object] | None = None,
) -> str:
    """An unsigned JWT (``alg: none``) that Kafka's OAuthBearerUnsecuredValidatorCallbackHandler accepts.

    For tests and local brokers only: anyone can make one. ``sub`` is
    ``principal``; ``iat`` and ``exp`` are in seconds (``now_ms`` and
    ``now_ms + lifetime_ms``, rounded down); ``scope`` becomes a JSON list when
    given; ``claims`` adds more claims (it may not redefine sub, iat, exp or scope).
    """
    if not principal:
        raise ValueError("unsecured_jwt: principal is empty")
    if lifetime_ms <= 0:
        raise ValueError(f"unsecured_jwt: lifetime_ms must be positive, got {lifetime_ms}")
    payload: dict[str, object] = {
        "sub": principal,
        "iat": now_ms // 1000,
        "exp": (now_ms + lifetime_ms) // 1000,
    }
    if scope:
        payload["scope"] = _scope_list(scope)
    for key, value in (claims or {}).items():
        if key in _RESERVED_CLAIMS:
            raise ValueError(f"unsecured_jwt: claims may not redefine {key!r}")
        payload[key] = value
    return f"{_b64url(_json({'alg': 'none'}))}.{_b64url(_json(payload))}."


def _scope_list(scope: Sequence[str]) -> list[str]:
    if isinstance(scope, str):
        raise TypeError("unsecured_jwt: scope is a sequence of scope names, not one string")
    for name in scope:
        if not _SCOPE_TOKEN.fullmatch(name):
            raise ValueError(f"unsecured_jwt: {name!r} is not a valid OAuth scope name")
    return list(scope)


def token_expiry_ms(token: str) -> int | None:
    """The ``exp`` claim of a JWT in milliseconds, read without verifying the token.

    For scheduling a token refresh, never for trusting a token. None when the
    token is not a JWT (opaque tokens are legal) or has no numeric ``exp``.
    """
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError):
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    if isinstance(exp, bool) or not isinstance(exp, int | float):
        return None
    return int(exp * 1000)


# ---------------------------------------------------------------------- factory


def create_sasl_client(
    mechanism: str,
    *,
    username: str | None = None,
    password: str | None = None,
    token: str | None = None,
    extensions: Mapping[str, str] | None = None,
) -> SaslClient:
    """The client for ``mechanism`` (Kafka's ``sasl.mechanism``, any case), checked for what it needs.

    PLAIN and SCRAM take ``username`` and ``password`` (SCRAM also
    ``extensions``, e.g. ``{"tokenauth": "true"}``); OAUTHBEARER takes ``token``
    and ``extensions``. A missing or misplaced argument is a ``ValueError``
    naming it.
    """
    name = mechanism.strip().upper()
    if name == GSSAPI:
        raise ValueError("SASL mechanism GSSAPI works on a security context: see GssapiClient and aioproducer.security.kerberos")
    if name not in SUPPORTED_MECHANISMS:
        raise ValueError(f"unsupported SASL mechanism {mechanism!r}; supported: {', '.join(SUPPORTED_MECHANISMS)}")
    if name == OAUTHBEARER:
        _refuse(name, username=username, password=password)
        if token is None:
            raise ValueError(f"SASL mechanism {name} needs a token (see unsecured_jwt() for local brokers)")
        return OAuthBearerClient(token, extensions)
    _refuse(name, token=token)
    if username is None or password is None:
        missing = " and ".join(n for n, v in (("username", username), ("password", password)) if v is None)
        raise ValueError(f"SASL mechanism {name} needs a username and a password: {missing} missing")
    if name == PLAIN:
        _refuse(name, extensions=extensions or None)
        return PlainClient(username, password)
    return ScramClient(name, username, password, extensions=extensions)


def _refuse(mechanism: str, **arguments: object) -> None:
    """Raise for an argument that ``mechanism`` does not use (a sign the configuration is mixed up)."""
    given = [name for name, value in arguments.items() if value is not None]
    if given:
        raise ValueError(f"SASL mechanism {mechanism} does not take {' or '.join(given)}")
