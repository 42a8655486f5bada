"""Java ``.properties`` files and ``key=value`` arguments, as Kafka's tools read them.

Why a parser of our own: ``--producer.config client.properties`` files are
written for the Java tools, so they follow ``java.util.Properties.load``, not
INI or shell syntax. What is handled, as Java does:

* lines starting (after leading whitespace) with ``#`` or ``!`` are comments;
  blank lines are skipped;
* a line ending in an odd number of backslashes continues on the next line,
  whose leading whitespace is dropped;
* the key ends at the first unescaped ``=``, ``:`` or whitespace; whitespace and
  one ``=``/``:`` around the separator are skipped; a line with no separator is
  a key with an empty value;
* escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\x`` for any other ``x`` (so ``\\=``,
  ``\\:``, ``\\ `` and ``\\\\`` are literal).

Files are read as UTF-8 (Java 9+ reads ``.properties`` resource bundles as UTF-8 too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["PropertiesError", "load_properties", "parse_properties", "parse_assignment"]

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SEPARATORS = "=:"
_WHITESPACE = " \t\f"


class PropertiesError(ValueError):
    """A properties file or a ``key=value`` argument cannot be used; the message says where and why."""


def _logical_lines(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """Join continued lines; yield (first line number, logical line) without comments or blanks."""
    pending: str | None = None
    start = 0
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r\n")
        if pending is None:
            stripped = line.lstrip(_WHITESPACE)
            if not stripped or stripped[0] in "#!":
                continue
            start, pending = number, stripped
        else:
            pending += line.lstrip(_WHITESPACE)
        trailing = len(pending) - len(pending.rstrip("\\"))
        if trailing % 2 == 1:
            pending = pending[:-1]
            continue
        yield start, pending
        pending = None
    if pending is not None:
        yield start, pending


def _unescape(text: str, where: str) -> str:
    """Resolve the backslash escapes of a key or value."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "\\" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                raise PropertiesError(f"{where}: malformed \\uxxxx escape")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split_key(line: str) -> tuple[str, str]:
    """Split a logical line at its first unescaped separator, as ``Properties.load``."""
    i = 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char in _SEPARATORS or char in _WHITESPACE:
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(_WHITESPACE)
    if rest[:1] in tuple(_SEPARATORS):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def parse_properties(lines: Iterable[str], source: str = "<properties>") -> dict[str, str]:
    """Parse properties text (an iterable of lines); later keys win, as in Java."""
    result: dict[str, str] = {}
    for number, line in _logical_lines(lines):
        key, value = _split_key(line)
        where = f"{source}:{number}"
        result[_unescape(key, where)] = _unescape(value, where)
    return result


def load_properties(path: str) -> dict[str, str]:
    """Read a properties file; an unreadable file is a :class:`PropertiesError` naming it."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PropertiesError(f"cannot read properties file {path!r}: {exc}") from exc
    return parse_properties(text.splitlines(), source=path)


def parse_assignment(text: str, option: str) -> tuple[str, str]:
    """``key=value`` from a command-line option (split at the first ``=``; the key must not be empty).

    The error never quotes the argument: it may hold a secret (``sasl.password:S3CRET``, with ``:``
    typed for ``=``). It names what can be shown: the leading characters a key is made of.
    """
    key, sep, value = text.partition("=")
    if not sep:
        # A key typed with ":" or a space for "=" is named; a bare word may itself be the secret.
        name = re.match(r"\s*([A-Za-z0-9._-]+)\s*[:\s]", text)
        shown = f"starting with {name.group(1)!r}" if name else f"of {len(text)} characters"
        raise PropertiesError(f"{option} expects key=value, got no '=' in the argument {shown} (its value not shown)")
    if not key.strip():
        raise PropertiesError(f"{option} expects key=value, got an empty key before '='")
    return key.strip(), value
