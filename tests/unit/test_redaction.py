"""The one redaction of the project's HTTP clients (``aioproducer.security.redaction``), at its edges.

The end-to-end proofs are the echoing servers of ``test_oidc_hostile_endpoint.py`` and
``test_schema_registry_hostile.py``; here, each form an echo may hand a secret back in (computed
by the test, not taken from the module), a credentials header an echo cut short, prose that must
stay, and the secrets a request is known to carry.
"""

from __future__ import annotations

import base64
import html
import json
import urllib.parse

import pytest

from aioproducer.config import Password
from aioproducer.security.oidc import JWT_BEARER, OidcSettings, request_secrets, token_request
from aioproducer.security.redaction import authorization_secrets, redact

SECRET = 'pa55:w&rd/+="ü <x>\'-7f'


def lower_hex(text: str) -> str:
    return "%".join(part[:2].lower() + part[2:] if i else part for i, part in enumerate(text.split("%")))


FORMS = {
    "raw": SECRET,
    "form-url-encoded": urllib.parse.quote(SECRET, safe=""),
    "query string (+ for a space)": urllib.parse.quote_plus(SECRET, safe=""),
    "lower-case escapes": lower_hex(urllib.parse.quote(SECRET, safe="")),
    "a path (/ kept)": urllib.parse.quote(SECRET),
    "JSON, ASCII only": json.dumps(SECRET)[1:-1],
    "JSON, UTF-8": json.dumps(SECRET, ensure_ascii=False)[1:-1],
    "JSON, / escaped": json.dumps(SECRET)[1:-1].replace("/", "\\/"),
    "HTML": html.escape(SECRET),
    "a Python repr beside both quotes": repr(SECRET + '"')[1:-2],  # ' escaped as \'
    "a Python repr": repr(SECRET)[1:-1],
}


@pytest.mark.parametrize("form", FORMS.values(), ids=FORMS.keys())
def test_each_form_an_echo_may_hand_a_secret_back_in_is_cut(form: str) -> None:
    assert SECRET not in form or form == SECRET
    assert redact(f"before {form} after", [SECRET]) == "before *** after"


@pytest.mark.parametrize("echo, expected", [
    ("echo: Authorization: Basic b3JkZXJzIHN2YzpwYTU1...", "echo: Authorization: Basic ***..."),
    ('{"authorization": "basic b3JkZXJz"}', '{"authorization": "basic ***"}'),
    ("?Authorization=Basic+b3JkZXJz&x=1", "?Authorization=Basic+***&x=1"),
    ("authorization: Bearer eyJhbGciOi.eyJzdWIi.c2ln", "authorization: Bearer ***"),
    ("basic authentication failed; bearer token expired", "basic authentication failed; bearer token expired"),
])
def test_an_echoed_credentials_header_loses_its_value_even_cut_short_and_prose_stays(echo: str, expected: str) -> None:
    assert redact(echo, []) == expected


def test_the_secrets_an_authorization_header_carries() -> None:
    b64 = base64.b64encode(b"svc:s3cret").decode()
    assert authorization_secrets(f"Basic {b64}") == {f"Basic {b64}", b64, "svc:s3cret", "s3cret"}
    assert authorization_secrets("Bearer tok.en") == {"Bearer tok.en", "tok.en"}
    assert authorization_secrets("Basic not-base64!") == {"Basic not-base64!", "not-base64!"}
    assert authorization_secrets("") == set()


def test_a_token_request_lists_every_secret_it_carries_in_the_form_sent() -> None:
    url = "https://idp.example/token"
    for urlencode in (False, True):
        settings = OidcSettings(url, "svc id", Password("a b&c"), header_urlencode=urlencode)
        headers, _ = token_request(settings)
        pair = "svc%20id:a%20b%26c" if urlencode else "svc id:a b&c"
        b64 = base64.b64encode(pair.encode()).decode()
        assert {"a b&c", "a%20b%26c", pair, b64, f"Basic {b64}"} <= request_secrets(settings, headers, None)
    assertion = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzdmMifQ.c2lnbmF0dXJl"
    bearer = OidcSettings(url, "", Password(""), grant_type=JWT_BEARER, assertion_file="/a.jwt")
    headers, _ = token_request(bearer, assertion)
    # the signature alone too: with the header and claims, which are not secret, it is the assertion again
    assert request_secrets(bearer, headers, assertion) == {assertion, "c2lnbmF0dXJl"}
