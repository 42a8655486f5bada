"""SASL mechanisms against the RFCs' published exchanges and an independent SCRAM server.

The SCRAM-SHA-1 (RFC 5802) and SCRAM-SHA-256 (RFC 7677) exchanges are the
RFCs' own bytes. For SCRAM-SHA-512, which has no published example, the test
plays the server with hashlib and hmac step by step: it derives the keys from
the password itself, checks the client's proof the way a broker does and signs
its answer, so the client is checked against the definitions, not against
itself.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from collections.abc import Callable

import pytest

from aioproducer.errors import BrokerResponseError, SaslAuthenticationFailedError
from aioproducer.security import sasl
from aioproducer.security.sasl import (
    OAuthBearerClient,
    OAuthBearerError,
    PlainClient,
    SaslClient,
    ScramClient,
    create_sasl_client,
    token_expiry_ms,
    unsecured_jwt,
)

RFC7677_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc7677_client() -> ScramClient:
    return ScramClient("SCRAM-SHA-256", "user", "pencil", nonce="rOprNGfwEbeRWgbNEkqO")


def after_client_final(client: ScramClient, server_first: bytes) -> ScramClient:
    client.initial_response()
    client.respond(server_first)
    return client


# ------------------------------------------------------------------- SCRAM RFC


def test_scram_sha256_rfc7677_exchange() -> None:
    client = rfc7677_client()
    assert client.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.respond(RFC7677_SERVER_FIRST) == RFC7677_CLIENT_FINAL
    assert not client.complete
    assert client.respond(RFC7677_SERVER_FINAL) is None
    assert client.complete


def test_scram_sha1_rfc5802_exchange(monkeypatch: pytest.MonkeyPatch) -> None:
    """RFC 5802's example, through the same code with SHA-1 (which Kafka does not offer, hence the patch)."""
    monkeypatch.setitem(sasl._SCRAM_HASHES, "SCRAM-SHA-1", "sha1")
    client = ScramClient("SCRAM-SHA-1", "user", "pencil", nonce="fyko+d2lbbFgONRv9qkxdawL")
    assert client.initial_response() == b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL"
    server_first = b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096"
    assert client.respond(server_first) == (
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    )
    assert client.respond(b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=") is None
    assert client.complete


def tampered(signature: bytes) -> bytes:
    raw = bytearray(base64.b64decode(signature[2:]))
    raw[0] ^= 0x01
    return b"v=" + base64.b64encode(bytes(raw))


@pytest.mark.parametrize(
    "server_final",
    [tampered(RFC7677_SERVER_FINAL), b"v=", b"v=" + base64.b64encode(b"\0" * 32)],
    ids=["one-bit-flipped", "empty", "zeros"],
)
def test_scram_refuses_a_wrong_server_signature(server_final: bytes) -> None:
    client = after_client_final(rfc7677_client(), RFC7677_SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailedError, match="server signature does not match"):
        client.respond(server_final)
    assert not client.complete


def test_scram_server_error_raises_with_the_error_name() -> None:
    client = after_client_final(rfc7677_client(), RFC7677_SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailedError, match="invalid-proof") as caught:
        client.respond(b"e=invalid-proof")
    assert caught.value.errno == 58
    assert not client.complete


@pytest.mark.parametrize(
    ("server_first", "reason"),
    [
        (b"r=someoneelsesnonce123,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce does not extend"),
        (b"r=XrOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "nonce does not extend"),
        (b"r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095", "4095 iterations"),
        (b"r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=1", "fewer than the minimum 4096"),
        (b"r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=-4096", "not a number"),
        (b"r=rOprNGfwEbeRWgbNEkqOabc,s=not base64!,i=4096", "salt is not valid base64"),
        (b"r=rOprNGfwEbeRWgbNEkqOabc,s=,i=4096", "salt is empty"),
        (b"s=W22ZaJ0SNY7soEsUEjb6gQ==,r=rOprNGfwEbeRWgbNEkqOabc,i=4096", "malformed"),
        (b"r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==", "malformed"),
        (b"m=must-know,r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", "requires a SCRAM extension"),
        (b"e=unknown-user", "unknown-user"),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_scram_refuses_a_bad_server_first(server_first: bytes, reason: str) -> None:
    client = rfc7677_client()
    client.initial_response()
    with pytest.raises(SaslAuthenticationFailedError, match=re.escape(reason)):
        client.respond(server_first)


def test_scram_accepts_exactly_the_minimum_iterations() -> None:
    """The boundary of the check above: 4096 is allowed (the RFC example uses it; this pins >= not >)."""
    client = rfc7677_client()
    client.initial_response()
    assert client.respond(RFC7677_SERVER_FIRST) is not None


@pytest.mark.parametrize("server_final", [b"x=whatever", b"", b"v=not*base64"])
def test_scram_refuses_a_malformed_server_final(server_final: bytes) -> None:
    client = after_client_final(rfc7677_client(), RFC7677_SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailedError):
        client.respond(server_final)


def test_scram_out_of_order_calls_are_caller_bugs() -> None:
    client = rfc7677_client()
    with pytest.raises(RuntimeError, match="respond"):
        client.respond(RFC7677_SERVER_FIRST)
    client.initial_response()
    with pytest.raises(RuntimeError, match="initial_response"):
        client.initial_response()
    client.respond(RFC7677_SERVER_FIRST)
    client.respond(RFC7677_SERVER_FINAL)
    with pytest.raises(RuntimeError, match="complete"):
        client.respond(RFC7677_SERVER_FINAL)


def test_scram_after_a_failure_refuses_to_continue() -> None:
    client = after_client_final(rfc7677_client(), RFC7677_SERVER_FIRST)
    with pytest.raises(SaslAuthenticationFailedError):
        client.respond(tampered(RFC7677_SERVER_FINAL))
    with pytest.raises(RuntimeError, match="failed"):
        client.respond(RFC7677_SERVER_FINAL)


# ------------------------------------------------------- SCRAM-SHA-512, by hand


class ScramServer:
    """The broker's side of SCRAM, written from RFC 5802 §3 with hashlib and hmac only."""

    def __init__(self, hash_name: str, password: bytes, salt: bytes, iterations: int, server_nonce: str) -> None:
        self.hash_name = hash_name
        salted = hashlib.pbkdf2_hmac(hash_name, password, salt, iterations)
        client_key = hmac.new(salted, b"Client Key", hash_name).digest()
        self.stored_key = hashlib.new(hash_name, client_key).digest()
        self.server_key = hmac.new(salted, b"Server Key", hash_name).digest()
        self.salt = salt
        self.iterations = iterations
        self.server_nonce = server_nonce
        self.client_first_bare = ""
        self.server_first = ""

    def first(self, client_first: bytes) -> bytes:
        text = client_first.decode()
        assert text.startswith("n,,")
        self.client_first_bare = text[3:]
        client_nonce = dict(part.split("=", 1) for part in self.client_first_bare.split(","))["r"]
        salt = base64.b64encode(self.salt).decode()
        self.server_first = f"r={client_nonce}{self.server_nonce},s={salt},i={self.iterations}"
        return self.server_first.encode()

    def final(self, client_final: bytes) -> bytes:
        """Check the proof as a broker does (recover ClientKey, hash it, compare); sign the exchange."""
        without_proof, proof_attr = client_final.decode().rsplit(",", 1)
        assert without_proof.startswith("c=biws,r=")
        auth_message = f"{self.client_first_bare},{self.server_first},{without_proof}".encode()
        client_signature = hmac.new(self.stored_key, auth_message, self.hash_name).digest()
        proof = base64.b64decode(proof_attr.removeprefix("p="))
        client_key = bytes(p ^ s for p, s in zip(proof, client_signature, strict=True))
        if hashlib.new(self.hash_name, client_key).digest() != self.stored_key:
            return b"e=invalid-proof"
        signature = hmac.new(self.server_key, auth_message, self.hash_name).digest()
        return b"v=" + base64.b64encode(signature)


def run_exchange(client: SaslClient, server: ScramServer) -> bytes:
    """Drive one exchange; returns the server-final the client accepted."""
    client_final = client.respond(server.first(client.initial_response()))
    assert client_final is not None
    server_final = server.final(client_final)
    assert client.respond(server_final) is None
    return server_final


def test_scram_sha512_against_an_independent_server() -> None:
    server = ScramServer("sha512", b"alice-secret", b"\x01\x02salt\xff", 4096, "SERVERPART")
    client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret", nonce="clientnonce")
    assert client.initial_response() == b"n,,n=alice,r=clientnonce"
    client_final = client.respond(server.first(b"n,,n=alice,r=clientnonce"))
    assert client_final is not None
    assert len(base64.b64decode(client_final.rsplit(b",p=", 1)[1])) == 64  # a SHA-512 sized proof
    server_final = server.final(client_final)
    assert server_final.startswith(b"v=")
    assert client.respond(server_final) is None
    assert client.complete


def test_scram_sha512_with_the_wrong_password_is_refused_by_the_server() -> None:
    server = ScramServer("sha512", b"alice-secret", b"salt", 4096, "S")
    client = ScramClient("SCRAM-SHA-512", "alice", "wrong", nonce="n")
    client_final = client.respond(server.first(client.initial_response()))
    assert client_final is not None
    answer = server.final(client_final)
    assert answer == b"e=invalid-proof"
    with pytest.raises(SaslAuthenticationFailedError, match="invalid-proof"):
        client.respond(answer)


def test_scram_sha256_with_a_default_nonce_and_more_iterations() -> None:
    server = ScramServer("sha256", b"pw", b"NaCl", 8192, "xyz")
    client = ScramClient("SCRAM-SHA-256", "bob", "pw")
    run_exchange(client, server)
    assert client.complete


def test_scram_hashes_the_password_bytes_unprepared() -> None:
    """Kafka's ScramFormatter does not SASLprep the password; a soft hyphen must stay in it."""
    server = ScramServer("sha256", "pass\u00adword".encode(), b"salt", 4096, "s")
    run_exchange(ScramClient("SCRAM-SHA-256", "u", "pass\u00adword", nonce="n"), server)
    with pytest.raises(SaslAuthenticationFailedError):
        run_exchange(ScramClient("SCRAM-SHA-256", "u", "password", nonce="n"), server)


# ------------------------------------------------------------ SCRAM client-first


@pytest.mark.parametrize(
    ("username", "saslname"),
    [
        ("a=b,c", "a=3Db=2Cc"),
        ("=,", "=3D=2C"),
        ("=2C", "=3D2C"),  # a literal "=2C" must not read back as ","
        ("\u2168", "IX"),  # RFC 4013 §3: ROMAN NUMERAL NINE, NFKC
        ("I\u00adX", "IX"),  # soft hyphen maps to nothing
        ("a\u00a0b", "a b"),  # non-ASCII space maps to SPACE
        ("\u00e9l\u00e8ve", "\u00e9l\u00e8ve"),
    ],
)
def test_scram_client_first_escapes_and_prepares_the_username(username: str, saslname: str) -> None:
    client = ScramClient("SCRAM-SHA-256", username, "pw", nonce="abc")
    assert client.initial_response() == f"n,,n={saslname},r=abc".encode()


@pytest.mark.parametrize("username", ["a\u0007b", "\u0627a\u0628", "", "\u00ad"])
def test_scram_username_saslprep_refuses(username: str) -> None:
    with pytest.raises(ValueError, match="username"):
        ScramClient("SCRAM-SHA-256", username, "pw", nonce="abc")


def test_scram_tokenauth_extension_is_appended_to_client_first() -> None:
    client = ScramClient("SCRAM-SHA-256", "tokenid", "hmac", nonce="abc", extensions={"tokenauth": "true"})
    assert client.initial_response() == b"n,,n=tokenid,r=abc,tokenauth=true"


def test_scram_extensions_are_part_of_the_signed_message() -> None:
    server = ScramServer("sha256", b"hmac", b"salt", 4096, "s")
    run_exchange(ScramClient("SCRAM-SHA-256", "id", "hmac", extensions={"tokenauth": "true"}), server)
    assert server.client_first_bare.endswith(",tokenauth=true")


@pytest.mark.parametrize("extensions", [{"token,auth": "true"}, {"x": "1"}, {"tokenauth": "a,b"}])
def test_scram_refuses_bad_extensions(extensions: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="extension"):
        ScramClient("SCRAM-SHA-256", "u", "pw", extensions=extensions)


@pytest.mark.parametrize("nonce", ["", "a,b", "caf\u00e9", "sp ace"])
def test_scram_refuses_a_bad_injected_nonce(nonce: str) -> None:
    with pytest.raises(ValueError, match="nonce"):
        ScramClient("SCRAM-SHA-256", "u", "pw", nonce=nonce)


def test_scram_default_nonces_are_fresh_and_wire_safe() -> None:
    nonces = {ScramClient("SCRAM-SHA-256", "u", "pw").initial_response().rsplit(b",r=", 1)[1] for _ in range(20)}
    assert len(nonces) == 20
    assert all(re.fullmatch(rb"[\x21-\x2b\x2d-\x7e]{24,}", n) for n in nonces)


def test_scram_refuses_an_unknown_hash_and_an_empty_password() -> None:
    with pytest.raises(ValueError, match="SCRAM-SHA-256, SCRAM-SHA-512"):
        ScramClient("SCRAM-SHA-1", "u", "pw")
    with pytest.raises(ValueError, match="password is empty"):
        ScramClient("SCRAM-SHA-256", "u", "")


# ------------------------------------------------------------------------ PLAIN


def test_plain_message_and_completion() -> None:
    client = PlainClient("alice", "s3cret")
    assert client.initial_response() == b"\0alice\0s3cret"
    assert not client.complete
    assert client.respond(b"") is None
    assert client.complete


def test_plain_with_authzid_and_utf8() -> None:
    assert PlainClient("j\u00fcrgen", "p\u00e4ss", authzid="admin").initial_response() == (
        b"admin\0j\xc3\xbcrgen\0p\xc3\xa4ss"
    )


def test_plain_refuses_a_challenge() -> None:
    client = PlainClient("alice", "s3cret")
    client.initial_response()
    with pytest.raises(SaslAuthenticationFailedError, match="challenge"):
        client.respond(b"unexpected")
    assert not client.complete


@pytest.mark.parametrize(
    ("username", "password", "authzid", "field"),
    [
        ("", "pw", "", "username"),
        ("u", "", "", "password"),
        ("u\0x", "pw", "", "username"),
        ("u", "pw", "\0", "authzid"),
    ],
)
def test_plain_refuses_empty_or_nul_fields(username: str, password: str, authzid: str, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        PlainClient(username, password, authzid)


# ------------------------------------------------------------------ OAUTHBEARER

JWT_LIKE = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9."


def test_oauthbearer_initial_response_with_extensions() -> None:
    client = OAuthBearerClient(JWT_LIKE, {"traceId": "123", "logicalCluster": "lkc-abc"})
    assert client.initial_response() == (
        b"n,,\x01auth=Bearer " + JWT_LIKE.encode() + b"\x01traceId=123\x01logicalCluster=lkc-abc\x01\x01"
    )
    assert client.respond(b"") is None
    assert client.complete


def test_oauthbearer_without_extensions() -> None:
    assert OAuthBearerClient("abc-._~+/==").initial_response() == b"n,,\x01auth=Bearer abc-._~+/==\x01\x01"


def test_oauthbearer_error_document_raises_with_status() -> None:
    client = OAuthBearerClient(JWT_LIKE)
    client.initial_response()
    document = {"status": "invalid_token", "scope": "kafka", "openid-configuration": "https://idp/.well-known"}
    with pytest.raises(OAuthBearerError, match="invalid_token") as caught:
        client.respond(json.dumps(document).encode())
    error = caught.value
    assert isinstance(error, SaslAuthenticationFailedError)
    expected = ("invalid_token", "kafka", "https://idp/.well-known")
    assert (error.status, error.scope, error.openid_configuration) == expected
    assert JWT_LIKE not in str(error)
    assert not client.complete


def test_oauthbearer_error_document_with_status_only() -> None:
    client = OAuthBearerClient(JWT_LIKE)
    client.initial_response()
    with pytest.raises(OAuthBearerError) as caught:
        client.respond(b'{"status":"invalid_token"}')
    error = caught.value
    assert (error.status, error.scope, error.openid_configuration) == ("invalid_token", None, None)
    assert "scope" not in str(caught.value)


@pytest.mark.parametrize("challenge", [b"not json", b"[1,2]", b"\xff"])
def test_oauthbearer_non_document_challenge_still_fails(challenge: bytes) -> None:
    client = OAuthBearerClient(JWT_LIKE)
    client.initial_response()
    with pytest.raises(SaslAuthenticationFailedError, match="not an RFC 7628 error document"):
        client.respond(challenge)


@pytest.mark.parametrize("token", ["", "has space", "tab\there", "caf\u00e9", "a\x01b"])
def test_oauthbearer_refuses_a_malformed_token_without_echoing_it(token: str) -> None:
    with pytest.raises(ValueError) as caught:
        OAuthBearerClient(token)
    if token:
        assert token not in str(caught.value)


@pytest.mark.parametrize("extensions", [{"auth": "x"}, {"trace_id": "1"}, {"k": "a\x01b"}, {"": "v"}])
def test_oauthbearer_refuses_bad_extensions(extensions: dict[str, str]) -> None:
    with pytest.raises(ValueError, match="extension"):
        OAuthBearerClient(JWT_LIKE, extensions)


# ------------------------------------------------------------------------- JWTs

NOW_MS = 1_700_000_000_000


def decode_part(part: str) -> dict[str, object]:
    decoded = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    assert isinstance(decoded, dict)
    return decoded


def test_unsecured_jwt_claims() -> None:
    token = unsecured_jwt("alice", lifetime_ms=3_600_000, now_ms=NOW_MS + 999, scope=["read", "write"])
    header, payload, signature = token.split(".")
    assert decode_part(header) == {"alg": "none"}
    assert decode_part(payload) == {
        "sub": "alice",
        "iat": 1_700_000_000,
        "exp": 1_700_003_600,
        "scope": ["read", "write"],
    }
    assert signature == ""
    assert "=" not in token  # base64url without padding (JWS compact form)


def test_unsecured_jwt_extra_claims_and_no_scope() -> None:
    token = unsecured_jwt("bob", lifetime_ms=1000, now_ms=NOW_MS, claims={"iss": "local", "n": 1})
    claims = decode_part(token.split(".")[1])
    assert claims == {"sub": "bob", "iat": 1_700_000_000, "exp": 1_700_000_001, "iss": "local", "n": 1}


def test_unsecured_jwt_is_accepted_by_the_oauthbearer_client() -> None:
    token = unsecured_jwt("alice", lifetime_ms=60_000, now_ms=NOW_MS)
    assert OAuthBearerClient(token).initial_response().startswith(b"n,,\x01auth=Bearer ey")


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: unsecured_jwt("", lifetime_ms=1, now_ms=0), ValueError),
        (lambda: unsecured_jwt("a", lifetime_ms=0, now_ms=0), ValueError),
        (lambda: unsecured_jwt("a", lifetime_ms=1, now_ms=0, claims={"exp": 5}), ValueError),
        (lambda: unsecured_jwt("a", lifetime_ms=1, now_ms=0, claims={"sub": "b"}), ValueError),
        (lambda: unsecured_jwt("a", lifetime_ms=1, now_ms=0, scope=["has space"]), ValueError),
        (lambda: unsecured_jwt("a", lifetime_ms=1, now_ms=0, scope="read"), TypeError),
    ],
)
def test_unsecured_jwt_refuses(call: Callable[[], str], error: type[Exception]) -> None:
    with pytest.raises(error):
        call()


def test_token_expiry_ms_reads_exp() -> None:
    assert token_expiry_ms(unsecured_jwt("a", lifetime_ms=3_600_000, now_ms=NOW_MS)) == NOW_MS + 3_600_000


def jwt_with(payload: bytes) -> str:
    return "eyJhbGciOiJub25lIn0." + base64.urlsafe_b64encode(payload).rstrip(b"=").decode() + ".sig"


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (jwt_with(b'{"exp":1700000000.5}'), 1_700_000_000_500),
        (jwt_with(b'{"sub":"a"}'), None),
        (jwt_with(b'{"exp":"1700000000"}'), None),
        (jwt_with(b'{"exp":true}'), None),
        (jwt_with(b"[1]"), None),
        (jwt_with(b"not json"), None),
        ("opaque-token", None),
        ("a.b", None),
    ],
)
def test_token_expiry_ms_edge_cases(token: str, expected: int | None) -> None:
    assert token_expiry_ms(token) == expected


# ---------------------------------------------------------------------- factory


@pytest.mark.parametrize(
    ("mechanism", "cls"),
    [("PLAIN", PlainClient), ("SCRAM-SHA-256", ScramClient), ("scram-sha-512", ScramClient)],
)
def test_create_sasl_client_password_mechanisms(mechanism: str, cls: type[SaslClient]) -> None:
    client = create_sasl_client(mechanism, username="u", password="p")
    assert isinstance(client, cls)
    assert isinstance(client, SaslClient)
    assert client.mechanism == mechanism.upper()


def test_create_sasl_client_scram_passes_extensions() -> None:
    client = create_sasl_client("SCRAM-SHA-512", username="u", password="p", extensions={"tokenauth": "true"})
    assert client.initial_response().endswith(b",tokenauth=true")


def test_create_sasl_client_oauthbearer() -> None:
    client = create_sasl_client("OAUTHBEARER", token=JWT_LIKE, extensions={"a": "b"})
    assert isinstance(client, OAuthBearerClient)
    assert client.initial_response().endswith(b"\x01a=b\x01\x01")


@pytest.mark.parametrize(
    ("mechanism", "kwargs", "message"),
    [
        ("PLAIN", {"username": "u"}, "password missing"),
        ("SCRAM-SHA-256", {"password": "p"}, "username missing"),
        ("SCRAM-SHA-512", {}, "username and password missing"),
        ("OAUTHBEARER", {}, "needs a token"),
        ("OAUTHBEARER", {"token": JWT_LIKE, "username": "u"}, "does not take username"),
        ("PLAIN", {"username": "u", "password": "p", "token": "t"}, "does not take token"),
        ("PLAIN", {"username": "u", "password": "p", "extensions": {"a": "b"}}, "does not take extensions"),
        ("GSSAPI", {}, "GSSAPI works on a security context: see GssapiClient"),
    ],
)
def test_create_sasl_client_errors(mechanism: str, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        create_sasl_client(mechanism, **kwargs)  # type: ignore[arg-type]


# ---------------------------------------------------------------- no secrets out

SECRET = "Sup3r-S3cret-Value"


def all_clients() -> list[SaslClient]:
    return [
        PlainClient("alice", SECRET),
        ScramClient("SCRAM-SHA-256", "alice", SECRET, nonce="n"),
        ScramClient("SCRAM-SHA-512", "alice", SECRET),
        OAuthBearerClient(SECRET),
    ]


@pytest.mark.parametrize("client", all_clients(), ids=lambda c: c.mechanism)
def test_repr_shows_mechanism_and_username_only(client: SaslClient) -> None:
    text = repr(client)
    assert SECRET not in text
    assert client.mechanism in text
    if not isinstance(client, OAuthBearerClient):
        assert "alice" in text


def failures_of(client: SaslClient, messages: list[bytes]) -> BrokerResponseError:
    client.initial_response()
    with pytest.raises(BrokerResponseError) as caught:
        for message in messages:
            client.respond(message)
    return caught.value


def test_failure_messages_hold_no_secret() -> None:
    scram = ScramClient("SCRAM-SHA-256", "user", SECRET, nonce="rOprNGfwEbeRWgbNEkqO")
    errors = [
        failures_of(PlainClient("alice", SECRET), [SECRET.encode()]),
        failures_of(scram, [RFC7677_SERVER_FIRST, RFC7677_SERVER_FINAL]),
        failures_of(OAuthBearerClient(SECRET), [b'{"status":"invalid_token"}']),
    ]
    for error in errors:
        assert SECRET not in str(error) and SECRET not in repr(error)
    with pytest.raises(ValueError) as caught:
        create_sasl_client("PLAIN", username="u", password=SECRET, token=SECRET)
    assert SECRET not in str(caught.value)
