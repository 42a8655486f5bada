"""Turning one input line into a record, as ``kafka-console-producer``'s line reader does.

Properties (``--property name=value``) and their defaults, those of Kafka 3.9's
``LineMessageReader``:

===================== ======= ===================================================
``parse.key``         false   split a key off the line at ``key.separator``
``key.separator``     tab
``parse.headers``     false   split headers off the line at ``headers.delimiter``
``headers.delimiter`` tab     between the headers and the rest of the line
``headers.separator`` ``,``   between two headers
``headers.key.separator`` ``:`` between a header's key and its value
``null.marker``       unset   a key, value or header value equal to it is null
``ignore.error``      false   a missing separator is not an error (see below)
===================== ======= ===================================================

Order, as Kafka: headers first (up to the first ``headers.delimiter``), then the
key (up to the first ``key.separator`` after the headers), then the rest is the
value. So with both on, a line reads ``h1:v1,h2:v2<TAB>key<TAB>value``. Headers
keep their order and duplicates; an empty trailing header after a final
separator is dropped (Java's ``String.split`` drops trailing empty strings).

A missing key or headers separator is an error naming the line number, unless
``ignore.error=true``: then the key (or headers) is absent and the whole rest
of the line is the value; a header without its key separator becomes a header
with a null value. A header key equal to ``null.marker`` is always an error
(header keys cannot be null). The separators must differ from each other and
from ``null.marker`` (Kafka refuses the same combinations at start-up).

Lines are bytes without their line ending (``\\n``, ``\\r\\n``); separators are
matched as UTF-8 bytes, header keys are decoded as UTF-8.

Errors name the line number, its length and what is missing, but never quote the line
(Kafka's reader does): a line is record data, and its headers may carry credentials
(``authorization:Bearer ...``), which must not reach a terminal or a CI log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["LineError", "LineFormat", "Parsed"]

Headers = list[tuple[str, bytes | None]]
#: (key, value, headers) of one line.
Parsed = tuple[bytes | None, bytes | None, Headers | None]

_KNOWN = {
    "parse.key",
    "key.separator",
    "parse.headers",
    "headers.delimiter",
    "headers.separator",
    "headers.key.separator",
    "null.marker",
    "ignore.error",
}


class LineError(ValueError):
    """A line that does not match the configured format."""


def _flag(properties: Mapping[str, str], name: str) -> bool:
    value = properties.get(name, "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"--property {name} must be true or false, got {properties[name]!r}")
    return value == "true"


def _separator(properties: Mapping[str, str], name: str, default: str) -> bytes:
    value = properties.get(name, default)
    if not value:
        raise ValueError(f"--property {name} must not be empty")
    return value.encode()


@dataclass(frozen=True)
class LineFormat:
    """The parsed ``--property`` settings; :meth:`parse` splits one line."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    parse_headers: bool = False
    headers_delimiter: bytes = b"\t"
    headers_separator: bytes = b","
    headers_key_separator: bytes = b":"
    null_marker: bytes | None = None
    ignore_error: bool = False

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> LineFormat:
        """Build from ``--property`` values; ``ValueError`` names an unknown or inconsistent one."""
        unknown = sorted(set(properties) - _KNOWN)
        if unknown:
            raise ValueError(f"unknown --property {unknown[0]!r} (known: {', '.join(sorted(_KNOWN))})")
        marker = properties.get("null.marker")
        fmt = cls(
            parse_key=_flag(properties, "parse.key"),
            key_separator=_separator(properties, "key.separator", "\t"),
            parse_headers=_flag(properties, "parse.headers"),
            headers_delimiter=_separator(properties, "headers.delimiter", "\t"),
            headers_separator=_separator(properties, "headers.separator", ","),
            headers_key_separator=_separator(properties, "headers.key.separator", ":"),
            null_marker=None if marker is None else marker.encode(),
            ignore_error=_flag(properties, "ignore.error"),
        )
        fmt._check_distinct()
        return fmt

    def _check_distinct(self) -> None:
        """Refuse the separator combinations Kafka refuses: they would make lines ambiguous."""
        pairs = [
            ("headers.delimiter", self.headers_delimiter, "headers.separator", self.headers_separator),
            ("headers.delimiter", self.headers_delimiter, "headers.key.separator", self.headers_key_separator),
            ("headers.separator", self.headers_separator, "headers.key.separator", self.headers_key_separator),
        ]
        if self.null_marker is not None:
            for name, value in [
                ("key.separator", self.key_separator),
                ("headers.delimiter", self.headers_delimiter),
                ("headers.separator", self.headers_separator),
                ("headers.key.separator", self.headers_key_separator),
            ]:
                pairs.append(("null.marker", self.null_marker, name, value))
        for name_a, a, name_b, b in pairs:
            if a == b:
                raise ValueError(f"--property {name_a} and {name_b} may not be equal")

    def _nullable(self, text: bytes) -> bytes | None:
        return None if text == self.null_marker else text

    def _cut(self, line: bytes, start: int, separator: bytes, what: str, number: int) -> bytes | None:
        """The text from ``start`` to the next ``separator``; None if absent and errors are ignored."""
        index = line.find(separator, start)
        if index >= 0:
            return line[start:index]
        if self.ignore_error:
            return None
        raise LineError(f"No {what} found on line number {number} ({len(line)} bytes; the line is not shown)")

    def _headers(self, text: bytes, number: int) -> Headers:
        pairs = text.split(self.headers_separator)
        while pairs and not pairs[-1]:
            pairs.pop()
        headers: Headers = []
        for index, pair in enumerate(pairs, 1):
            key, sep, value = pair.partition(self.headers_key_separator)
            if not sep:
                if not self.ignore_error:
                    raise LineError(f"No header key separator found in header {index} on line number {number}")
                headers.append((key.decode("utf-8", "replace"), None))
                continue
            if key == self.null_marker:
                raise LineError(f"Header keys should not be equal to the null marker on line number {number}")
            headers.append((key.decode("utf-8", "replace"), self._nullable(value)))
        return headers

    def parse(self, line: bytes, number: int) -> Parsed:
        """(key, value, headers) of ``line`` (1-based ``number`` for messages); :class:`LineError` if malformed."""
        headers: Headers | None = None
        start = 0
        if self.parse_headers:
            raw = self._cut(line, 0, self.headers_delimiter, "headers delimiter", number)
            if raw is not None:
                start = len(raw) + len(self.headers_delimiter)
                headers = None if raw == self.null_marker else self._headers(raw, number)
        key: bytes | None = None
        if self.parse_key:
            raw_key = self._cut(line, start, self.key_separator, "key separator", number)
            if raw_key is not None:
                start += len(raw_key) + len(self.key_separator)
                key = self._nullable(raw_key)
        return key, self._nullable(line[start:]), headers

