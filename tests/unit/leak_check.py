"""Whether a secret got out: the texts a user could see of an error and the log, searched under every decoding.

Shared by the tests of the project's HTTP clients against servers that echo the request back
(``test_oidc_hostile_endpoint.py``, ``test_schema_registry_hostile.py``). It does not trust the
redaction's own list of forms: a text is searched as it is, URL-, HTML- and JSON-unescaped, and
with every run that could be Base64 (or base64url) decoded.
"""

from __future__ import annotations

import base64
import html
import logging
import re
import traceback
import urllib.parse
from collections.abc import Iterator


def unescaped(text: str) -> Iterator[str]:
    """``text`` as it is and as each decoding an echo may have used would read it."""
    json_unescaped = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), text)
    json_unescaped = re.sub(r"\\([\"\\/])", r"\1", json_unescaped)
    for candidate in (text, urllib.parse.unquote(text), urllib.parse.unquote_plus(text), html.unescape(text), json_unescaped):
        yield candidate
        for run in re.findall(r"[A-Za-z0-9+/_-]{8,}={0,2}", candidate):
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                try:
                    yield decode(run + "=" * (-len(run) % 4)).decode("utf-8", "replace")
                except ValueError:
                    pass


def leaks(text: str, secrets: set[str]) -> list[str]:
    """The secrets found in ``text`` under any decoding (empty: none)."""
    return sorted({secret for candidate in unescaped(text) for secret in secrets if secret in candidate})


def chain(error: BaseException) -> Iterator[BaseException]:
    """``error`` and every exception reachable through ``__cause__`` and ``__context__``, suppressed or not."""
    seen: set[int] = set()
    todo = [error]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [linked for linked in (current.__cause__, current.__context__) if linked is not None]


def texts_of(error: BaseException, records: list[logging.LogRecord]) -> list[str]:
    """Everything a user could see: each chained exception's str, repr, args, notes and traceback; each log line."""
    texts = ["".join(traceback.format_exception(error))]
    for linked in chain(error):
        texts += [str(linked), repr(linked), repr(linked.args), *getattr(linked, "__notes__", [])]
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    texts += [formatter.format(record) for record in records]
    return texts
