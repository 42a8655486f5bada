"""Secrets cut out of what a server sent back: the one redaction of the project's HTTP clients.

Why. The OIDC token fetch and the Schema Registry client quote the server's answer in their
errors (its ``error_description`` or ``message`` says why it refused), and a server, or a gateway
or debugging proxy in front of it, may echo the request it got: its ``Authorization`` header, its
form. Whatever the request carried that is secret must not come back out through an exception, a
``repr`` or a log line. Cutting out the raw secret is not enough: the Basic header sends it inside
the Base64 of ``id:secret`` (form-url-encoded first, with KIP-1025's ``header.urlencode``), and an
echo hands values back escaped for where it puts them (a query string, a JSON document, an HTML
page, a Python ``repr``).

How. The caller lists the secret values its request carried (:func:`authorization_secrets` reads
them off the ``Authorization`` header it sent); :func:`redact` cuts each out in every form it may
come back in, longest first, and also the value of any echoed ``Authorization: Basic/Bearer``
header (which exact matching misses when an echo cut it short). Redact before cutting a text
short: a cut may leave half a secret that no longer matches.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
import urllib.parse
from collections.abc import Iterable
from typing import Final

__all__ = ["REDACTED", "authorization_secrets", "redact"]

#: What a secret is replaced with.
REDACTED: Final = "***"
#: An echoed ``Authorization: Basic ...``/``Bearer ...`` header (or ``"Authorization": "Basic ..."``,
#: or ``Authorization=Basic+...`` in a query string), whatever its value: also when an echo cut it
#: short of the value sent, which no exact match finds.
_AUTHORIZATION_HEADER: Final = re.compile(
    r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)"
    r"(?:(basic(?:\s|\+|%20)+)[A-Za-z0-9+/=%]+|(bearer(?:\s|\+|%20)+)[A-Za-z0-9+/=%._~-]+)"
)


def authorization_secrets(header: str) -> set[str]:
    """The secret values in an ``Authorization`` header a request sent.

    ``Basic``: the header, its Base64, the ``id:secret`` pair inside and the secret alone (as it
    sits in the pair: form-url-encoded when the client encoded it); ``Bearer``: the header and the token.
    """
    scheme, _, credentials = header.partition(" ")
    if not credentials:
        return set()
    found = {header, credentials}
    if scheme.lower() == "basic":
        try:
            pair = base64.b64decode(credentials, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return found
        found |= {pair, pair.partition(":")[2]}
    return {value for value in found if value}


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` cut out, in every form an echo may hand it back, and any echoed credentials header's value.

    The forms (:func:`_echoed_forms`) are matched longest first, so that a whole header goes
    before the value inside it and no part of a longer form is left behind.
    """
    forms = {form for secret in secrets if secret for form in _echoed_forms(secret)}
    if forms:
        pattern = "|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True))
        text = re.sub(pattern, REDACTED, text)
    return _AUTHORIZATION_HEADER.sub(lambda m: f"{m.group(1)}{m.group(2) or m.group(3)}{REDACTED}", text)


def _echoed_forms(value: str) -> set[str]:
    """``value`` as sent, and as an echo may carry it: form-url-encoded (both hex cases, ``+`` or
    ``%20`` for a space), as a JSON string (with and without ``\\u`` escapes, ``/`` escaped or not),
    HTML-escaped (an error page) and as a Python ``repr`` has it (either quote escaped)."""
    forms = {value, urllib.parse.quote(value, safe=""), urllib.parse.quote_plus(value, safe=""), urllib.parse.quote(value)}
    forms |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), form) for form in forms}
    for ascii_only in (True, False):
        as_json = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
        forms |= {as_json, as_json.replace("/", "\\/")}
    forms |= {html.escape(value), html.escape(value, quote=False)}
    as_repr = repr(value)[1:-1]
    forms |= {as_repr, as_repr.replace("'", "\\'"), as_repr.replace('"', '\\"')}
    return forms
