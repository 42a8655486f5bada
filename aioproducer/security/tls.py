"""TLS for broker connections: an :class:`ssl.SSLContext` built from the Java producer's ``ssl.*`` keys.

Theory of operation. :class:`TlsSettings` holds the Java producer's TLS keys, already parsed;
:func:`build_ssl_context` turns them into one client-side :class:`ssl.SSLContext`, which every
broker connection then shares (``asyncio.open_connection(host, port, ssl=context,
server_hostname=host)``). The context always verifies the broker's certificate chain
(``CERT_REQUIRED``, as Java: there is no key to turn that off) and, unless
``ssl.endpoint.identification.algorithm`` is empty, the broker's host name. Building is done in
four steps, each of which checks its keys and raises :class:`~aioproducer.errors.ConfigError`
naming the key, the file and the cause, never a password or key material:

1. **trust** (who may the broker be): the truststore (``ssl.truststore.location``, a PEM or
   PKCS12 file, a directory of hashed PEM files for librdkafka's ``ssl.ca.location``, or inline
   PEM in ``ssl.truststore.certificates``) replaces the system CAs, as in Java; with no truststore
   the system CAs are used (``load_default_certs``).
2. **identity** (mutual TLS, optional): the keystore (``ssl.keystore.location``, a PEM file with
   the private key and the certificate chain or a PKCS12 file; or inline PEM in
   ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key``). Python's
   :meth:`~ssl.SSLContext.load_cert_chain` reads only files, so the chain and the key are written
   to a file created ``0600`` in a fresh ``0700`` :class:`tempfile.TemporaryDirectory`, loaded and
   deleted at once (the file lives for the duration of one ``load_cert_chain`` call). When
   ``cryptography`` is installed (always, for PKCS12) the key in that file is encrypted with a
   random one-time password, so no plaintext key touches the disk; without it an inline PEM key is
   written as given.
3. **versions and suites**: ``ssl.enabled.protocols`` sets the minimum and maximum TLS version
   (TLSv1.2 and TLSv1.3 only; they must be set before the suites); ``ssl.cipher.suites``
   restricts the TLS 1.2 suites (IANA/Java names mapped through :data:`IANA_TO_OPENSSL_CIPHERS`,
   or OpenSSL names); TLS 1.3 suites cannot be restricted by Python's ``ssl`` (see
   :func:`_apply_cipher_suites`).
4. **host name**: ``ssl.endpoint.identification.algorithm``.

Store types. ``ssl.truststore.type`` / ``ssl.keystore.type`` default to ``None``: the format is
read from the file (PEM text or PKCS12 binary). Java's default, ``JKS``, is a format Python cannot
read; the types ``JKS`` and ``JCEKS`` are accepted, as Java 9+ does (``keystore.type.compat``),
for a file that is in fact PKCS12 (or PEM), and an actual JKS or JCEKS file is refused with the
``keytool`` command that converts it. PKCS12 needs the optional ``cryptography`` package (``pip install 'aioproducer[tls]'``),
imported only when a PKCS12 store is given. The consistency rules of Java's
``DefaultSslEngineFactory`` are kept (no store password with PEM, inline PEM only with type PEM,
not both a location and inline PEM, a PKCS12 keystore needs its password).

:func:`describe_ssl_error` turns what a failed handshake raises into one line for humans (an
untrusted, expired or mismatched certificate, TLS against a plaintext port, a refused client
certificate, a timeout). :func:`with_librdkafka_aliases` maps librdkafka's ``ssl.ca.location``,
``ssl.certificate.location``, ``ssl.key.location`` and their ``.pem`` forms onto the settings.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, NoReturn

from aioproducer.errors import ConfigError
from aioproducer.logs import LogLike

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
    from cryptography.hazmat.primitives.serialization.pkcs12 import PKCS12KeyAndCertificates

__all__ = [
    "IANA_TO_OPENSSL_CIPHERS",
    "TLS13_CIPHER_SUITES",
    "TlsSettings",
        "build_ssl_context",
    "describe_ssl_error",
    "with_librdkafka_aliases",
]

log = logging.getLogger(__name__)

_MASK = "***"
_SECRET_FIELDS = frozenset({"truststore_password", "keystore_password", "key_password", "keystore_key"})
_INSTALL_HINT = "pip install 'aioproducer[tls]'"
_PEM_KEYSTORE_PASSWORD = "a PEM keystore has no store password (the key's password is ssl.key.password): remove it"
_JKS_MAGIC = (b"\xfe\xed\xfe\xed", b"\xce\xce\xce\xce")  # JKS, JCEKS
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----\r?\n?", re.S)
_HASHED_NAME = re.compile(r"^[0-9a-f]{8}\.r?[0-9]+$")

StoreKind = Literal["PEM", "PKCS12"]


@dataclass(frozen=True, repr=False)
class TlsSettings:
    """The Java producer's ``ssl.*`` keys, parsed. ``repr`` masks passwords and inline keys.

    ``truststore_type`` / ``keystore_type``: ``None`` (the default) reads the format from the
    file; ``"PEM"`` and ``"PKCS12"`` insist on it; ``"JKS"`` / ``"JCEKS"`` read the file's actual
    format and refuse an actual JKS file with the conversion command (Java 9+ semantics).
    ``key_aliases`` maps a Java key to the label error messages show instead (set by
    :func:`with_librdkafka_aliases`, so that a user who wrote ``ssl.ca.location`` reads that name).
    """

    truststore_location: str | None = None  # ssl.truststore.location: PEM or PKCS12 file, or a CA directory
    truststore_type: str | None = None  # ssl.truststore.type (None: from the file)
    truststore_password: str | None = None  # ssl.truststore.password (PKCS12 only)
    truststore_certificates: str | None = None  # ssl.truststore.certificates: inline PEM
    keystore_location: str | None = None  # ssl.keystore.location: PEM (key + chain) or PKCS12 file
    keystore_type: str | None = None  # ssl.keystore.type (None: from the file)
    keystore_password: str | None = None  # ssl.keystore.password (PKCS12 only)
    key_password: str | None = None  # ssl.key.password: of an encrypted PEM key (PKCS12 uses the store's)
    keystore_certificate_chain: str | None = None  # ssl.keystore.certificate.chain: inline PEM
    keystore_key: str | None = None  # ssl.keystore.key: inline PEM private key
    endpoint_identification_algorithm: str = "https"  # "https": check the host name; "" (or "none"): do not
    enabled_protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")  # ssl.enabled.protocols
    cipher_suites: tuple[str, ...] = ()  # ssl.cipher.suites: IANA (Java) or OpenSSL names; () = OpenSSL's
    key_aliases: tuple[tuple[str, str], ...] = ()  # (Java key, label for messages)

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            shown = repr(_MASK if f.name in _SECRET_FIELDS and value is not None else value)
            parts.append(f"{f.name}={shown}")
        return f"TlsSettings({', '.join(parts)})"

    def label(self, java_key: str) -> str:
        """The name to show for ``java_key`` in messages: the key the user actually wrote."""
        return dict(self.key_aliases).get(java_key, java_key)


def build_ssl_context(settings: TlsSettings, *, log: LogLike = log) -> ssl.SSLContext:
    """A client :class:`ssl.SSLContext` for ``settings``; reads the store files now.

    ``log`` says what cannot be honoured (a producer's, naming its client.id: see logs.py).

    Raises :class:`~aioproducer.errors.ConfigError` naming the key and file at fault.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname=True
    _load_truststore(context, settings)
    _load_keystore(context, settings)
    _apply_protocols(context, settings)
    _apply_cipher_suites(context, settings.cipher_suites, settings.label("ssl.cipher.suites"), log)
    _apply_endpoint_identification(context, settings)
    return context


# ------------------------------------------------------------------ errors and files


def _fail(key: str, cause: str, path: str | None = None) -> NoReturn:
    where = f" (file {path})" if path is not None else ""
    raise ConfigError(f"{key}: {cause}{where}")


def _read_file(key: str, path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        _fail(key, "file not found", path)
    except IsADirectoryError:
        _fail(key, "is a directory, expected a file", path)
    except PermissionError:
        _fail(key, "permission denied", path)
    except OSError as exc:
        _fail(key, f"cannot read: {exc.strerror}", path)


def _sniff(data: bytes) -> StoreKind | Literal["JKS"] | None:
    if data.startswith(_JKS_MAGIC):
        return "JKS"
    if b"-----BEGIN " in data:
        return "PEM"
    if data[:1] == b"\x30":  # a DER SEQUENCE: PKCS12's PFX
        return "PKCS12"
    return None


def _normalized_type(key: str, declared: str | None) -> str | None:
    if declared is None or not declared.strip():
        return None
    upper = declared.strip().upper()
    if upper not in ("PEM", "PKCS12", "JKS", "JCEKS"):
        _fail(key, f"unknown store type {declared!r}: use PEM or PKCS12 (or leave it unset: the file tells)")
    return upper


def _store_kind(type_key: str, location_key: str, declared: str | None, data: bytes, path: str) -> StoreKind:
    """What the file at ``path`` is, reconciled with the declared type; refuses JKS."""
    found = _sniff(data)
    wanted = _normalized_type(type_key, declared)
    if found == "JKS":
        converted = os.path.splitext(path)[0] + ".p12"
        _fail(
            location_key,
            "is a Java KeyStore (JKS/JCEKS), which Python cannot read; convert it to PKCS12 with "
            f"`keytool -importkeystore -srckeystore {path} -destkeystore {converted} -deststoretype PKCS12` "
            f"and set {type_key}=PKCS12",
            path,
        )
    if found is None:
        _fail(location_key, "is neither PEM nor PKCS12", path)
    if wanted == "PEM" and found != "PEM":
        _fail(location_key, f"{type_key}=PEM but the file is not PEM (it looks like PKCS12)", path)
    if wanted == "PKCS12" and found != "PKCS12":
        _fail(location_key, f"{type_key}=PKCS12 but the file is PEM text: set {type_key}=PEM", path)
    return found


def _pem_blocks(data: bytes, kind: str) -> list[bytes]:
    """The PEM blocks of ``data`` whose type ends with ``kind`` ("CERTIFICATE", "PRIVATE KEY")."""
    return [m.group(0) for m in _PEM_BLOCK.finditer(data) if m.group(1).endswith(kind.encode())]


def _is_encrypted(key_pem: bytes) -> bool:
    return key_pem.startswith(b"-----BEGIN ENCRYPTED PRIVATE KEY-----") or b"Proc-Type: 4,ENCRYPTED" in key_pem


@contextmanager
def _private_file(content: bytes) -> Iterator[str]:
    """A file holding ``content``, mode 0600 in a fresh 0700 directory, deleted on exit."""
    with tempfile.TemporaryDirectory(prefix="aioproducer-tls-") as directory:
        path = os.path.join(directory, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        try:
            yield path
        finally:
            os.unlink(path)


# ------------------------------------------------------------------ PKCS12 (cryptography)


def _load_pkcs12(key: str, password_key: str, data: bytes, password: str | None, path: str) -> PKCS12KeyAndCertificates:
    try:
        import cryptography.hazmat.primitives.serialization.pkcs12 as pkcs12
    except ImportError:
        _fail(key, f"reading a PKCS12 store needs the cryptography package: {_INSTALL_HINT}", path)
    secret = None if password is None else password.encode()
    try:
        return pkcs12.load_pkcs12(data, secret)
    except (ValueError, TypeError):
        hint = f"{password_key} is not set" if password is None else f"wrong {password_key}"
        _fail(key, f"cannot open the PKCS12 store: {hint}, or the file is damaged", path)


def _certificates_pem(certificates: Sequence[x509.Certificate]) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding

    return b"".join(c.public_bytes(Encoding.PEM) for c in certificates)


def _pkcs12_certificates(store: PKCS12KeyAndCertificates) -> list[x509.Certificate]:
    leaf = [store.cert.certificate] if store.cert is not None else []
    return leaf + [c.certificate for c in store.additional_certs]


def _encrypted_key_pem(private_key: PrivateKeyTypes, one_time: str) -> bytes:
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, Encoding, PrivateFormat

    return private_key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(one_time.encode()))


# ------------------------------------------------------------------ trust


def _load_truststore(context: ssl.SSLContext, s: TlsSettings) -> None:
    if s.truststore_certificates is not None:
        _check_inline_truststore(s)
        _load_ca_pem(context, s.label("ssl.truststore.certificates"), s.truststore_certificates.encode(), None)
    elif s.truststore_location is not None:
        _load_truststore_file(context, s, s.truststore_location)
    elif s.truststore_password is not None:
        _fail(s.label("ssl.truststore.password"), "is set but ssl.truststore.location is not")
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)


def _check_inline_truststore(s: TlsSettings) -> None:
    key = s.label("ssl.truststore.certificates")
    if _normalized_type(s.label("ssl.truststore.type"), s.truststore_type) not in (None, "PEM"):
        _fail(key, f"inline certificates need ssl.truststore.type=PEM, not {s.truststore_type}")
    if s.truststore_location is not None:
        _fail(key, "set together with ssl.truststore.location: give one of them")
    if s.truststore_password is not None:
        _fail(s.label("ssl.truststore.password"), "a PEM truststore has no password: remove it")


def _load_truststore_file(context: ssl.SSLContext, s: TlsSettings, path: str) -> None:
    key = s.label("ssl.truststore.location")
    if os.path.isdir(path):
        _load_ca_directory(context, key, s, path)
        return
    data = _read_file(key, path)
    kind = _store_kind(s.label("ssl.truststore.type"), key, s.truststore_type, data, path)
    if kind == "PEM":
        if s.truststore_password is not None:
            _fail(s.label("ssl.truststore.password"), "a PEM truststore has no password: remove it")
        _load_ca_pem(context, key, data, path)
        return
    store = _load_pkcs12(key, s.label("ssl.truststore.password"), data, s.truststore_password, path)
    certificates = _pkcs12_certificates(store)
    if not certificates:
        _fail(key, "the PKCS12 store holds no certificate", path)
    _load_ca_pem(context, key, _certificates_pem(certificates), path)


def _load_ca_pem(context: ssl.SSLContext, key: str, data: bytes, path: str | None) -> None:
    certificates = _pem_blocks(data, "CERTIFICATE")
    if not certificates:
        _fail(key, "holds no PEM certificate (-----BEGIN CERTIFICATE-----)", path)
    try:
        context.load_verify_locations(cadata=b"".join(certificates).decode("ascii"))
    except (ssl.SSLError, UnicodeDecodeError) as exc:
        _fail(key, f"a certificate could not be read ({_reason(exc)})", path)


def _load_ca_directory(context: ssl.SSLContext, key: str, s: TlsSettings, path: str) -> None:
    if _normalized_type(s.label("ssl.truststore.type"), s.truststore_type) not in (None, "PEM"):
        _fail(key, "a directory of CA certificates must be PEM", path)
    if not any(_HASHED_NAME.match(name) for name in os.listdir(path)):
        _fail(key, f"the directory holds no hashed certificate names (run `openssl rehash {path}`)", path)
    context.load_verify_locations(capath=path)


# ------------------------------------------------------------------ identity (mutual TLS)


def _load_keystore(context: ssl.SSLContext, s: TlsSettings) -> None:
    if s.keystore_key is not None or s.keystore_certificate_chain is not None:
        chain, private_key = _inline_keystore(s)
        key = s.label("ssl.keystore.key")
        _load_pem_identity(context, key, chain, private_key, s, path=None)
    elif s.keystore_location is not None:
        _load_keystore_file(context, s, s.keystore_location)
    elif s.keystore_password is not None:
        _fail(s.label("ssl.keystore.password"), "is set but ssl.keystore.location is not")


def _inline_keystore(s: TlsSettings) -> tuple[bytes, bytes]:
    key = s.label("ssl.keystore.key")
    chain_key = s.label("ssl.keystore.certificate.chain")
    if _normalized_type(s.label("ssl.keystore.type"), s.keystore_type) not in (None, "PEM"):
        _fail(key, f"an inline key and certificate chain need ssl.keystore.type=PEM, not {s.keystore_type}")
    if s.keystore_key is None or s.keystore_certificate_chain is None:
        missing = key if s.keystore_key is None else chain_key
        _fail(missing, f"is required with {chain_key if s.keystore_key is None else key}")
    if s.keystore_location is not None:
        _fail(key, "set together with ssl.keystore.location: give one of them")
    if s.keystore_password is not None:
        _fail(s.label("ssl.keystore.password"), _PEM_KEYSTORE_PASSWORD)
    return s.keystore_certificate_chain.encode(), s.keystore_key.encode()


def _load_keystore_file(context: ssl.SSLContext, s: TlsSettings, path: str) -> None:
    key = s.label("ssl.keystore.location")
    data = _read_file(key, path)
    kind = _store_kind(s.label("ssl.keystore.type"), key, s.keystore_type, data, path)
    if kind == "PEM":
        if s.keystore_password is not None:
            _fail(s.label("ssl.keystore.password"), _PEM_KEYSTORE_PASSWORD)
        _load_pem_identity(context, key, data, data, s, path)
        return
    if s.keystore_password is None:
        _fail(s.label("ssl.keystore.password"), "is required with a PKCS12 ssl.keystore.location", path)
    store = _load_pkcs12(key, s.label("ssl.keystore.password"), data, s.keystore_password, path)
    if store.key is None or store.cert is None:
        _fail(key, "the PKCS12 store holds no private key with its certificate", path)
    one_time = secrets.token_urlsafe(32)
    chain = _certificates_pem(_pkcs12_certificates(store))
    _load_chain(context, key, chain + _encrypted_key_pem(store.key, one_time), one_time, path, encrypted=False)


def _load_pem_identity(
    context: ssl.SSLContext, key: str, chain: bytes, private_key: bytes, s: TlsSettings, path: str | None
) -> None:
    certificates = _pem_blocks(chain, "CERTIFICATE")
    keys = _pem_blocks(private_key, "PRIVATE KEY")
    if not certificates:
        _fail(s.label("ssl.keystore.certificate.chain") if path is None else key, "holds no PEM certificate", path)
    if not keys:
        _fail(key, "holds no PEM private key (-----BEGIN PRIVATE KEY-----)", path)
    password_key = s.label("ssl.key.password")
    protected = _protect_key(key, password_key, keys[0], s.key_password, path)
    if protected is None:  # no cryptography: OpenSSL reads the key as given
        key_pem, password, encrypted = keys[0], s.key_password, _is_encrypted(keys[0])
    else:
        (key_pem, password), encrypted = protected, False
    _load_chain(context, key, b"".join(certificates) + key_pem, password, path, encrypted, password_key)


def _protect_key(
    key: str, password_key: str, key_pem: bytes, password: str | None, path: str | None
) -> tuple[bytes, str] | None:
    """``key_pem`` re-encrypted with a one-time password, and that password; ``None`` without ``cryptography``."""
    try:
        from cryptography.hazmat.primitives.serialization import load_pem_private_key
    except ImportError:
        return None
    encrypted = _is_encrypted(key_pem)
    if encrypted and password is None:
        _fail(key, f"the private key is encrypted: set {password_key}", path)
    secret = password.encode() if encrypted and password is not None else None
    try:
        private_key = load_pem_private_key(key_pem, secret)
    except (ValueError, TypeError):
        _fail(key, f"cannot decrypt the private key: wrong {password_key}" if encrypted else "invalid PEM private key", path)
    one_time = secrets.token_urlsafe(32)
    return _encrypted_key_pem(private_key, one_time), one_time


class _PasswordNeeded(Exception):
    """Raised from the password callback: never let OpenSSL prompt on the terminal."""


def _no_password() -> str:
    raise _PasswordNeeded


def _load_chain(
    context: ssl.SSLContext,
    key: str,
    pem: bytes,
    password: str | None,
    path: str | None,
    encrypted: bool,
    password_key: str = "ssl.key.password",
) -> None:
    """``load_cert_chain`` from memory, through a private temporary file; errors named."""
    with _private_file(pem) as certfile:
        try:
            context.load_cert_chain(certfile, password=_no_password if password is None else password)
        except _PasswordNeeded:
            _fail(key, f"the private key is encrypted: set {password_key}", path)
        except ssl.SSLError as exc:
            _fail(key, _chain_error(exc, encrypted, password_key), path)


def _chain_error(exc: ssl.SSLError, encrypted: bool, password_key: str) -> str:
    if exc.reason == "KEY_VALUES_MISMATCH":
        return "the private key does not match the certificate"
    if encrypted:
        return f"cannot decrypt the private key: wrong {password_key}"
    return f"the certificate chain or private key could not be read ({_reason(exc)})"


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason) if reason else type(exc).__name__


# ------------------------------------------------------------------ versions, suites, host name

_PROTOCOLS = {"TLSV1.2": ssl.TLSVersion.TLSv1_2, "TLSV1.3": ssl.TLSVersion.TLSv1_3}
_REFUSED_PROTOCOLS = frozenset({"SSLV2", "SSLV2HELLO", "SSLV3", "TLSV1", "TLSV1.0", "TLSV1.1"})


def _apply_protocols(context: ssl.SSLContext, s: TlsSettings) -> None:
    key = s.label("ssl.enabled.protocols")
    versions = [_protocol(key, name) for name in s.enabled_protocols if name.strip()]
    if not versions:
        _fail(key, "is empty: list TLSv1.2 and/or TLSv1.3")
    context.minimum_version = min(versions)
    context.maximum_version = max(versions)


def _protocol(key: str, name: str) -> ssl.TLSVersion:
    upper = name.strip().upper()
    if upper in _REFUSED_PROTOCOLS:
        _fail(key, f"{name.strip()} is refused: deprecated as insecure (RFC 8996); use TLSv1.2 and/or TLSv1.3")
    if upper not in _PROTOCOLS:
        _fail(key, f"unknown protocol {name.strip()!r}: use TLSv1.2 and/or TLSv1.3")
    if upper == "TLSV1.3" and not ssl.HAS_TLSv1_3:
        _fail(key, f"TLSv1.3 is not supported by this Python's OpenSSL ({ssl.OPENSSL_VERSION})")
    return _PROTOCOLS[upper]


#: The TLS 1.3 suites (IANA names = OpenSSL names). OpenSSL enables all three; Python's ``ssl``
#: cannot restrict them (it has no binding of ``SSL_CTX_set_ciphersuites``).
TLS13_CIPHER_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"})

#: Java's placeholder suite (RFC 5746): OpenSSL always sends the renegotiation extension.
_SCSV = "TLS_EMPTY_RENEGOTIATION_INFO_SCSV"

#: IANA (Java) names of the TLS 1.2 suites with certificates, to OpenSSL names: the output of
#: ``openssl ciphers -stdname -tls1_2 'ALL:@SECLEVEL=0'`` (OpenSSL 3.0) without the anonymous,
#: PSK and SRP suites, which a Kafka client cannot use.
IANA_TO_OPENSSL_CIPHERS: Mapping[str, str] = {
    "TLS_DHE_DSS_WITH_AES_128_CBC_SHA": "DHE-DSS-AES128-SHA",
    "TLS_DHE_DSS_WITH_AES_128_CBC_SHA256": "DHE-DSS-AES128-SHA256",
    "TLS_DHE_DSS_WITH_AES_128_GCM_SHA256": "DHE-DSS-AES128-GCM-SHA256",
    "TLS_DHE_DSS_WITH_AES_256_CBC_SHA": "DHE-DSS-AES256-SHA",
    "TLS_DHE_DSS_WITH_AES_256_CBC_SHA256": "DHE-DSS-AES256-SHA256",
    "TLS_DHE_DSS_WITH_AES_256_GCM_SHA384": "DHE-DSS-AES256-GCM-SHA384",
    "TLS_DHE_DSS_WITH_ARIA_128_GCM_SHA256": "DHE-DSS-ARIA128-GCM-SHA256",
    "TLS_DHE_DSS_WITH_ARIA_256_GCM_SHA384": "DHE-DSS-ARIA256-GCM-SHA384",
    "TLS_DHE_DSS_WITH_CAMELLIA_128_CBC_SHA": "DHE-DSS-CAMELLIA128-SHA",
    "TLS_DHE_DSS_WITH_CAMELLIA_128_CBC_SHA256": "DHE-DSS-CAMELLIA128-SHA256",
    "TLS_DHE_DSS_WITH_CAMELLIA_256_CBC_SHA": "DHE-DSS-CAMELLIA256-SHA",
    "TLS_DHE_DSS_WITH_CAMELLIA_256_CBC_SHA256": "DHE-DSS-CAMELLIA256-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA": "DHE-RSA-AES128-SHA",
    "TLS_DHE_RSA_WITH_AES_128_CBC_SHA256": "DHE-RSA-AES128-SHA256",
    "TLS_DHE_RSA_WITH_AES_128_CCM": "DHE-RSA-AES128-CCM",
    "TLS_DHE_RSA_WITH_AES_128_CCM_8": "DHE-RSA-AES128-CCM8",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA": "DHE-RSA-AES256-SHA",
    "TLS_DHE_RSA_WITH_AES_256_CBC_SHA256": "DHE-RSA-AES256-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_CCM": "DHE-RSA-AES256-CCM",
    "TLS_DHE_RSA_WITH_AES_256_CCM_8": "DHE-RSA-AES256-CCM8",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_ARIA_128_GCM_SHA256": "DHE-RSA-ARIA128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_ARIA_256_GCM_SHA384": "DHE-RSA-ARIA256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CAMELLIA_128_CBC_SHA": "DHE-RSA-CAMELLIA128-SHA",
    "TLS_DHE_RSA_WITH_CAMELLIA_128_CBC_SHA256": "DHE-RSA-CAMELLIA128-SHA256",
    "TLS_DHE_RSA_WITH_CAMELLIA_256_CBC_SHA": "DHE-RSA-CAMELLIA256-SHA",
    "TLS_DHE_RSA_WITH_CAMELLIA_256_CBC_SHA256": "DHE-RSA-CAMELLIA256-SHA256",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CCM": "ECDHE-ECDSA-AES128-CCM",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8": "ECDHE-ECDSA-AES128-CCM8",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CCM": "ECDHE-ECDSA-AES256-CCM",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CCM_8": "ECDHE-ECDSA-AES256-CCM8",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_ARIA_128_GCM_SHA256": "ECDHE-ECDSA-ARIA128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_ARIA_256_GCM_SHA384": "ECDHE-ECDSA-ARIA256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CAMELLIA_128_CBC_SHA256": "ECDHE-ECDSA-CAMELLIA128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_CAMELLIA_256_CBC_SHA384": "ECDHE-ECDSA-CAMELLIA256-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_ARIA_128_GCM_SHA256": "ECDHE-ARIA128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_ARIA_256_GCM_SHA384": "ECDHE-ARIA256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CAMELLIA_128_CBC_SHA256": "ECDHE-RSA-CAMELLIA128-SHA256",
    "TLS_ECDHE_RSA_WITH_CAMELLIA_256_CBC_SHA384": "ECDHE-RSA-CAMELLIA256-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_CCM": "AES128-CCM",
    "TLS_RSA_WITH_AES_128_CCM_8": "AES128-CCM8",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA256": "AES256-SHA256",
    "TLS_RSA_WITH_AES_256_CCM": "AES256-CCM",
    "TLS_RSA_WITH_AES_256_CCM_8": "AES256-CCM8",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_RSA_WITH_ARIA_128_GCM_SHA256": "ARIA128-GCM-SHA256",
    "TLS_RSA_WITH_ARIA_256_GCM_SHA384": "ARIA256-GCM-SHA384",
    "TLS_RSA_WITH_CAMELLIA_128_CBC_SHA": "CAMELLIA128-SHA",
    "TLS_RSA_WITH_CAMELLIA_128_CBC_SHA256": "CAMELLIA128-SHA256",
    "TLS_RSA_WITH_CAMELLIA_256_CBC_SHA": "CAMELLIA256-SHA",
    "TLS_RSA_WITH_CAMELLIA_256_CBC_SHA256": "CAMELLIA256-SHA256",
}


def _apply_cipher_suites(context: ssl.SSLContext, suites: Sequence[str], key: str, log: LogLike) -> None:
    """Restrict ``context`` to ``suites`` (``ssl.cipher.suites``); an empty list changes nothing.

    Each entry is an IANA name as Java writes it (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``,
    mapped through :data:`IANA_TO_OPENSSL_CIPHERS`) or OpenSSL cipher-string syntax as librdkafka
    takes it (``ECDHE-RSA-AES128-GCM-SHA256``, keywords such as ``HIGH``, ``!`` exclusions;
    ``:`` separates several). Each positive OpenSSL entry must select a cipher on its own, so a
    typo is an error instead of being silently skipped by OpenSSL. TLS 1.3 suites cannot be
    restricted by Python's ``ssl`` (OpenSSL keeps all three): listing only some of them logs a
    warning. As in Java, where a protocol version is not offered without one of its suites, a
    list without a TLS 1.3 suite limits the connection to TLS 1.2, and a list of TLS 1.3 suites
    only limits it to TLS 1.3.
    """
    tls12, tls13 = _split_suites(key, suites)
    if not tls12 and not tls13:
        return
    if tls12:
        _set_ciphers(context, key, tls12)
    _restrict_versions(context, key, has_tls12=bool(tls12), has_tls13=bool(tls13))
    if tls13 and set(tls13) != TLS13_CIPHER_SUITES:
        log.warning(
            "%s: TLS 1.3 suites cannot be restricted by Python's ssl module; all of %s stay enabled",
            key,
            ", ".join(sorted(TLS13_CIPHER_SUITES)),
        )


def _split_suites(key: str, suites: Sequence[str]) -> tuple[list[str], list[str]]:
    tls12: list[str] = []
    tls13: list[str] = []
    for entry in suites:
        for name in (part.strip() for part in entry.split(":")):
            if not name or name == _SCSV:
                continue
            if name in TLS13_CIPHER_SUITES:
                tls13.append(name)
            elif name in IANA_TO_OPENSSL_CIPHERS:
                tls12.append(IANA_TO_OPENSSL_CIPHERS[name])
            elif name.startswith(("TLS_", "SSL_")):
                _fail(key, f"unknown or unsupported cipher suite {name!r}: OpenSSL has no such TLS 1.2 suite; "
                      "give an IANA name of a TLS 1.2 suite with ECDHE, DHE or RSA key exchange, or an OpenSSL name")
            else:
                tls12.append(name)
    return tls12, tls13


def _set_ciphers(context: ssl.SSLContext, key: str, names: list[str]) -> None:
    for name in names:
        if name[:1] in ("!", "-", "+", "@"):
            continue
        try:
            context.set_ciphers(name)
        except ssl.SSLError:
            _fail(key, f"unknown cipher {name!r}: not an IANA name of a TLS 1.2 suite nor an OpenSSL cipher name")
    try:
        context.set_ciphers(":".join(names))
    except ssl.SSLError:
        _fail(key, "the list selects no cipher suite")


def _restrict_versions(context: ssl.SSLContext, key: str, has_tls12: bool, has_tls13: bool) -> None:
    if not has_tls13:
        if context.minimum_version > ssl.TLSVersion.TLSv1_2:
            _fail(key, "lists no TLS 1.3 suite but ssl.enabled.protocols allows TLSv1.3 only")
        context.maximum_version = min(context.maximum_version, ssl.TLSVersion.TLSv1_2)
    if not has_tls12:
        if context.maximum_version < ssl.TLSVersion.TLSv1_3:
            _fail(key, "lists TLS 1.3 suites only but ssl.enabled.protocols does not allow TLSv1.3")
        context.minimum_version = ssl.TLSVersion.TLSv1_3


def _apply_endpoint_identification(context: ssl.SSLContext, s: TlsSettings) -> None:
    algorithm = s.endpoint_identification_algorithm.strip().lower()
    if algorithm == "https":
        context.check_hostname = True
    elif algorithm in ("", "none"):  # Java: empty; librdkafka: "none"
        context.check_hostname = False  # the chain is still verified (CERT_REQUIRED)
    else:
        _fail(
            s.label("ssl.endpoint.identification.algorithm"),
            f"unknown algorithm {s.endpoint_identification_algorithm!r}: "
            "use https (verify the host name) or an empty value (do not)",
        )


# ------------------------------------------------------------------ librdkafka aliases

_LIBRDKAFKA_KEYS = (
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.certificate.pem",
    "ssl.key.location",
    "ssl.key.pem",
)


def with_librdkafka_aliases(settings: TlsSettings, aliases: Mapping[str, str]) -> TlsSettings:
    """``settings`` with librdkafka's TLS keys in ``aliases`` mapped onto the Java keys.

    ``ssl.ca.location`` (a PEM file or a directory of hashed PEM files; ``probe`` means the system
    CAs) becomes the truststore location, ``ssl.ca.pem`` the inline truststore certificates;
    ``ssl.certificate.location`` / ``.pem`` and ``ssl.key.location`` / ``.pem`` become the inline
    keystore chain and key (the files are read now). ``ssl.key.password``,
    ``ssl.keystore.location``/``.password``, ``ssl.endpoint.identification.algorithm`` and
    ``ssl.cipher.suites`` have the same names in both clients and are not aliases. Setting an
    alias and its Java key, or both forms of one alias, is a ConfigError.
    """
    unknown = sorted(set(aliases) - set(_LIBRDKAFKA_KEYS))
    if unknown:
        raise ConfigError(f"not librdkafka TLS aliases: {', '.join(unknown)} (known: {', '.join(_LIBRDKAFKA_KEYS)})")
    changes: dict[str, Any] = {}
    labels: dict[str, str] = dict(settings.key_aliases)
    _alias_truststore(settings, aliases, changes, labels)
    _alias_keystore(settings, aliases, changes, labels)
    return dataclasses.replace(settings, **changes, key_aliases=tuple(labels.items()))


def _one_of(aliases: Mapping[str, str], location_key: str, pem_key: str) -> str | None:
    if location_key in aliases and pem_key in aliases:
        raise ConfigError(f"{location_key} and {pem_key} are both set: give one of them")
    return location_key if location_key in aliases else pem_key if pem_key in aliases else None


def _alias_truststore(
    s: TlsSettings, aliases: Mapping[str, str], changes: dict[str, Any], labels: dict[str, str]
) -> None:
    alias = _one_of(aliases, "ssl.ca.location", "ssl.ca.pem")
    if alias is None:
        return
    if s.truststore_location is not None or s.truststore_certificates is not None:
        raise ConfigError(f"{alias} and ssl.truststore.location/.certificates are both set: give one of them")
    value = aliases[alias]
    if alias == "ssl.ca.pem":
        changes["truststore_certificates"] = value
        labels["ssl.truststore.certificates"] = alias
    elif value.strip().lower() != "probe":  # probe: the system CAs, which no truststore gives
        changes["truststore_location"] = value
        labels["ssl.truststore.location"] = alias


def _alias_keystore(
    s: TlsSettings, aliases: Mapping[str, str], changes: dict[str, Any], labels: dict[str, str]
) -> None:
    cert_alias = _one_of(aliases, "ssl.certificate.location", "ssl.certificate.pem")
    key_alias = _one_of(aliases, "ssl.key.location", "ssl.key.pem")
    if cert_alias is None and key_alias is None:
        return
    if cert_alias is None or key_alias is None:
        missing = "ssl.certificate.location" if cert_alias is None else "ssl.key.location"
        raise ConfigError(f"{key_alias or cert_alias} needs {missing} (or its .pem form) too")
    if s.keystore_location is not None or s.keystore_key is not None or s.keystore_certificate_chain is not None:
        raise ConfigError(f"{cert_alias}/{key_alias} and the ssl.keystore.* keys are both set: give one of them")
    changes["keystore_certificate_chain"] = _alias_text(cert_alias, aliases[cert_alias])
    changes["keystore_key"] = _alias_text(key_alias, aliases[key_alias])
    labels["ssl.keystore.certificate.chain"] = _alias_label(cert_alias, aliases[cert_alias])
    labels["ssl.keystore.key"] = _alias_label(key_alias, aliases[key_alias])


def _alias_text(alias: str, value: str) -> str:
    if not alias.endswith(".location"):
        return value
    return _read_file(alias, value).decode("ascii", errors="replace")


def _alias_label(alias: str, value: str) -> str:
    return f"{alias} ({value})" if alias.endswith(".location") else alias


# ------------------------------------------------------------------ handshake errors, for humans

_HANDSHAKE_TIMEOUT_TEXT = "handshake is taking longer"  # asyncio's ssl_handshake_timeout abort

_PLAINTEXT = "this looks like TLS against a PLAINTEXT listener; check security.protocol and the port"
_NEEDS_CLIENT_CERT = "the broker requires a client certificate (mutual TLS); set ssl.keystore.location"
_CLIENT_CERT_REJECTED = "the broker rejected our client certificate (untrusted CA, or expired); check ssl.keystore.location"
_NO_VERSION = "no TLS version in common; check ssl.enabled.protocols"
_HANDSHAKE_REFUSED = (
    "no cipher suite in common (check ssl.cipher.suites), or the broker requires a client certificate "
    "(ssl.keystore.location)"
)
#: OpenSSL's ``reason`` of a failed handshake, to the advice for it.
_ADVICE_BY_REASON: Mapping[str, str] = {
    "WRONG_VERSION_NUMBER": _PLAINTEXT,
    "RECORD_LAYER_FAILURE": _PLAINTEXT,  # OpenSSL 3.2+ for WRONG_VERSION_NUMBER
    "PACKET_LENGTH_TOO_LONG": _PLAINTEXT,
    "HTTP_REQUEST": _PLAINTEXT,
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": _NEEDS_CLIENT_CERT,
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": _NEEDS_CLIENT_CERT,
    "TLSV1_ALERT_UNKNOWN_CA": _CLIENT_CERT_REJECTED,
    "SSLV3_ALERT_BAD_CERTIFICATE": _CLIENT_CERT_REJECTED,
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": _CLIENT_CERT_REJECTED,
    "SSLV3_ALERT_CERTIFICATE_EXPIRED": _CLIENT_CERT_REJECTED,
    "SSLV3_ALERT_UNSUPPORTED_CERTIFICATE": _CLIENT_CERT_REJECTED,
    "UNSUPPORTED_PROTOCOL": _NO_VERSION,
    "TLSV1_ALERT_PROTOCOL_VERSION": _NO_VERSION,
    "NO_PROTOCOLS_AVAILABLE": _NO_VERSION,
    "NO_SHARED_CIPHER": _HANDSHAKE_REFUSED,
    "NO_CIPHERS_AVAILABLE": _HANDSHAKE_REFUSED,
    "SSLV3_ALERT_HANDSHAKE_FAILURE": _HANDSHAKE_REFUSED,  # TLS 1.2 also says this for a missing client cert
}

_UNTRUSTED = (
    "the broker's certificate is not signed by a trusted CA; set ssl.truststore.location "
    "(or ssl.truststore.certificates) to the CA that signed it"
)
_HOST_MISMATCH = (
    "it is not issued for the host name we connected to; connect with a name the certificate lists "
    "(bootstrap.servers, the broker's advertised.listeners) or set ssl.endpoint.identification.algorithm= (empty)"
)
#: OpenSSL's ``X509_V_ERR_*`` codes (``verify_code``), to the advice for them.
_ADVICE_BY_VERIFY_CODE: Mapping[int, str] = {
    2: _UNTRUSTED,  # UNABLE_TO_GET_ISSUER_CERT
    9: "the certificate is not valid yet; check the clocks of this host and the broker",  # CERT_NOT_YET_VALID
    10: "the broker's certificate, or one in its chain, has expired; renew it on the broker",  # CERT_HAS_EXPIRED
    18: "the broker's certificate is self-signed and not in the truststore; add it to ssl.truststore.location",
    19: _UNTRUSTED,  # SELF_SIGNED_CERT_IN_CHAIN
    20: _UNTRUSTED,  # UNABLE_TO_GET_ISSUER_CERT_LOCALLY
    21: _UNTRUSTED,  # UNABLE_TO_VERIFY_LEAF_SIGNATURE
    27: _UNTRUSTED,  # CERT_UNTRUSTED
    62: _HOST_MISMATCH,  # HOSTNAME_MISMATCH
    64: _HOST_MISMATCH,  # IP_ADDRESS_MISMATCH
}


def describe_ssl_error(exc: BaseException, address: str) -> str:
    """One line saying why the TLS connection to ``address`` (``host:port``) failed, and what to check.

    Looks through ``exc``'s ``__cause__`` / ``__context__`` chain for the :class:`ssl.SSLError`
    (or timeout, or end of stream) underneath a wrapping error.
    """
    found = _underlying(exc)
    if isinstance(found, ssl.SSLCertVerificationError):
        advice = _ADVICE_BY_VERIFY_CODE.get(found.verify_code, "certificate verification failed")
        text = f"the TLS certificate of {address} was rejected ({found.verify_message}): {advice}"
    elif isinstance(found, ssl.SSLError) and not isinstance(found, ssl.SSLEOFError):
        text = _describe_reason(found, address)
    elif _is_timeout(found):
        text = (
            f"the TLS handshake with {address} timed out: is it a TLS listener (check security.protocol "
            "and the port), and is the broker reachable?"
        )
    elif isinstance(found, (ssl.SSLEOFError, ConnectionError, EOFError)):
        text = (
            f"{address} closed the connection during the TLS handshake: is it a PLAINTEXT listener (check "
            "security.protocol and the port), or does the broker refuse our client certificate (ssl.keystore.location)?"
        )
    else:
        text = f"TLS connection to {address} failed: {type(exc).__name__}: {exc}"
    return " ".join(text.split())


def _describe_reason(exc: ssl.SSLError, address: str) -> str:
    reason = str(exc.reason or "")
    advice = _ADVICE_BY_REASON.get(reason)
    if advice is None:
        return f"the TLS handshake with {address} failed: {exc}"
    return f"the TLS handshake with {address} failed ({reason.lower().replace('_', ' ')}): {advice}"


def _underlying(exc: BaseException) -> BaseException:
    """The most telling error in ``exc``'s chain: an SSL error or timeout, else an end of stream."""
    chain = list(_chain(exc))
    for candidate in chain:
        if isinstance(candidate, ssl.SSLError) or _is_timeout(candidate):
            return candidate
    for candidate in chain:
        if isinstance(candidate, (ConnectionError, EOFError)):
            return candidate
    return exc


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _is_timeout(exc: BaseException) -> bool:
    if isinstance(exc, TimeoutError):
        return True
    return isinstance(exc, ConnectionAbortedError) and _HANDSHAKE_TIMEOUT_TEXT in str(exc)
