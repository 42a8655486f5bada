"""JWT bearer assertions made by the client from its private key (KIP-1139, RFC 7523), as Java 4.1+ makes them.

Theory of operation. With ``sasl.oauthbearer.jwt.retriever.class=JwtBearerJwtRetriever`` and no
``sasl.oauthbearer.assertion.file``, Java's client signs a fresh assertion for every token
request with the key in ``sasl.oauthbearer.assertion.private.key.file`` (PEM, PKCS#8, encrypted
if ``...private.key.passphrase`` is given). The JWT is built in three layers, each overriding
the one before, as Java's ``LayeredAssertionJwtTemplate`` does:

1. the static claims of the configuration: ``aud``, ``iss``, ``sub`` (``sasl.oauthbearer.assertion.claim.*``);
2. the template file (``sasl.oauthbearer.assertion.template.file``): a JSON object whose
   ``header`` and ``payload`` objects are copied in (so a template may override 1);
3. the dynamic part, which nothing overrides: header ``alg`` (``sasl.oauthbearer.assertion.algorithm``,
   RS256 or ES256) and ``typ: JWT``; claims ``iat`` (now, whole seconds), ``exp`` (``iat`` plus
   ``claim.exp.seconds``), ``nbf`` (``iat`` minus ``claim.nbf.seconds``) and, if
   ``claim.jti.include``, ``jti``, a random UUID per assertion.

The JWS is PyJWT's (``jwt.encode``, the ``oidc`` extra): RS256 is RSASSA-PKCS1-v1_5 with SHA-256,
ES256 ECDSA on P-256 with SHA-256 (RFC 7518). PyJWT rather than ``cryptography`` alone: ``cryptography``
signs, but the JWS around it (base64url JSON, ES256's signature as ``r || s`` rather than DER) would be
ours to write; PyJWT is that maintained layer, pure Python with no dependency beyond ``cryptography``,
which loads the key here anyway. The key and the template are read again for every assertion, so
either can be replaced on disk while the producer runs (Java caches them until the file changes:
the same effect).

When both ``sasl.oauthbearer.assertion.file`` and a private key are given, the file wins and
every other ``sasl.oauthbearer.assertion.*`` key is ignored: Java's documented rule.

The private key, its passphrase and the assertions are secrets: no message, ``repr`` or log line
holds them; a file that cannot be used is named by its key and path, never by its content.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from aioproducer.config import Password

if TYPE_CHECKING:  # cryptography is the ``oidc`` extra's: imported when an assertion is made
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

__all__ = [
    "ALGORITHMS",
    "AssertionFileError",
    "AssertionSettings",
    "assertion_parts",
    "load_private_key",
    "make_assertion",
    "read_template",
    "sign_jws",
]

#: Java's ``AssertionUtils``: the two algorithms it signs with.
ALGORITHMS: Final = ("RS256", "ES256")
PRIVATE_KEY_FILE: Final = "sasl.oauthbearer.assertion.private.key.file"
TEMPLATE_FILE: Final = "sasl.oauthbearer.assertion.template.file"


class AssertionFileError(ValueError):
    """A key or template that cannot make an assertion; the message names the key and path only."""


@dataclass(frozen=True, repr=False)
class AssertionSettings:
    """Java's ``sasl.oauthbearer.assertion.*`` keys for an assertion made here, with Java's defaults."""

    private_key_file: str
    passphrase: Password | None = None
    algorithm: str = "RS256"
    aud: str | None = None
    iss: str | None = None
    sub: str | None = None
    exp_seconds: int = 300
    nbf_seconds: int = 60
    include_jti: bool = False
    template_file: str | None = None

    def __repr__(self) -> str:
        return (
            f"AssertionSettings({self.algorithm}, private_key_file={self.private_key_file!r}, "
            f"template_file={self.template_file!r}, iss={self.iss!r}, sub={self.sub!r}, aud={self.aud!r})"
        )


def load_private_key(path: str, passphrase: Password | None, algorithm: str) -> PrivateKey:
    """The PEM private key in ``path``, checked to fit ``algorithm`` (RS256: RSA; ES256: EC on P-256)."""
    from cryptography.hazmat.primitives import serialization

    try:
        with open(path, "rb") as file:
            pem = file.read()
    except OSError as exc:
        raise AssertionFileError(f"{PRIVATE_KEY_FILE} {path!r} cannot be read: {type(exc).__name__}") from None
    secret = passphrase.value.encode() if passphrase is not None else None
    try:
        key = serialization.load_pem_private_key(pem, password=secret)
    except TypeError:
        # cryptography: a passphrase for a plain key, or none for an encrypted one.
        hint = "is encrypted: give sasl.oauthbearer.assertion.private.key.passphrase" if secret is None else (
            "is not encrypted: drop sasl.oauthbearer.assertion.private.key.passphrase")
        raise AssertionFileError(f"{PRIVATE_KEY_FILE} {path!r} {hint}") from None
    except (ValueError, UnicodeError):
        # A wrong passphrase and a file that is no PEM key look alike to the library: say both.
        raise AssertionFileError(
            f"{PRIVATE_KEY_FILE} {path!r} does not hold a PEM private key (PKCS#8), or the passphrase is wrong"
        ) from None
    _check_key_fits(key, path, algorithm)
    return key  # type: ignore[return-value]  # narrowed by _check_key_fits


def _check_key_fits(key: object, path: str, algorithm: str) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if algorithm == "RS256" and not isinstance(key, rsa.RSAPrivateKey):
        raise AssertionFileError(f"{PRIVATE_KEY_FILE} {path!r} holds a {_kind(key)} key; RS256 needs an RSA key")
    if algorithm == "ES256":
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise AssertionFileError(f"{PRIVATE_KEY_FILE} {path!r} holds a {_kind(key)} key; ES256 needs an EC key")
        if not isinstance(key.curve, ec.SECP256R1):
            raise AssertionFileError(f"{PRIVATE_KEY_FILE} {path!r} holds an EC key on {key.curve.name}; ES256 needs P-256")


def _kind(key: object) -> str:
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    if isinstance(key, rsa.RSAPrivateKey):
        return "RSA"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return "EC"
    return type(key).__name__.lstrip("_")


def read_template(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``header`` and ``payload`` objects of a template file (either may be missing: empty)."""
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except (OSError, UnicodeDecodeError) as exc:
        raise AssertionFileError(f"{TEMPLATE_FILE} {path!r} cannot be read: {type(exc).__name__}") from None
    except ValueError:
        raise AssertionFileError(f"{TEMPLATE_FILE} {path!r} is not JSON") from None
    if not isinstance(document, dict):
        raise AssertionFileError(f"{TEMPLATE_FILE} {path!r} must hold a JSON object with \"header\" and/or \"payload\"")
    parts = (document.get("header", {}), document.get("payload", {}))
    for name, part in zip(("header", "payload"), parts, strict=True):
        if not isinstance(part, dict):
            raise AssertionFileError(f"{TEMPLATE_FILE} {path!r}: \"{name}\" must be a JSON object")
    return parts


def assertion_parts(
    settings: AssertionSettings, now_ms: int, new_jti: Callable[[], str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of one assertion: static claims, then the template, then the dynamic part."""
    header: dict[str, Any] = {}
    payload: dict[str, Any] = {k: v for k, v in (("aud", settings.aud), ("iss", settings.iss), ("sub", settings.sub)) if v}
    if settings.template_file is not None:
        template_header, template_payload = read_template(settings.template_file)
        header.update(template_header)
        payload.update(template_payload)
    iat = now_ms // 1000
    header.update({"alg": settings.algorithm, "typ": "JWT"})
    payload.update({"iat": iat, "exp": iat + settings.exp_seconds, "nbf": iat - settings.nbf_seconds})
    if settings.include_jti:
        payload["jti"] = new_jti()
    return header, payload


def sign_jws(header: dict[str, Any], payload: dict[str, Any], key: PrivateKey) -> str:
    """A compact JWS of ``payload`` signed with ``key`` by PyJWT, with the algorithm of ``header["alg"]`` (RS256, ES256).

    PyJWT writes the JWS (base64url JSON, the signature as JWS wants it: ES256's ``r || s``, not DER);
    ``header`` is laid over its ``alg`` and ``typ``.
    """
    import jwt

    try:
        return jwt.encode(payload, key, algorithm=header["alg"], headers=header)
    except (TypeError, jwt.InvalidTokenError) as exc:  # a template claim PyJWT refuses (a non-string "iss")
        raise AssertionFileError(f"the assertion cannot be signed: {exc}") from None


def make_assertion(
    settings: AssertionSettings, now_ms: int, *, new_jti: Callable[[], str] = lambda: str(uuid.uuid4())
) -> str:
    """A fresh signed assertion (the key and template read again: they may have been rotated)."""
    key = load_private_key(settings.private_key_file, settings.passphrase, settings.algorithm)
    header, payload = assertion_parts(settings, now_ms, new_jti)
    return sign_jws(header, payload, key)
