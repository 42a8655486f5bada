"""Read ``sasl.jaas.config`` as Java users paste it, and map it to SASL credentials.

Theory of operation. Kafka's Java clients take their SASL credentials as one
JAAS login-module entry, ``<class> <flag> key=value ... ;``, and every
provider's documentation (Confluent Cloud, Aiven, MSK, Strimzi) hands users
that string. Accepting it unchanged lets a user move a working Java
configuration over without translating it, so this module parses the same
grammar Kafka's JaasConfig reads with Java's StreamTokenizer: whitespace,
newlines and ``//`` or ``/* */`` comments between tokens; values double- or
single-quoted or bare; and, inside quotes, the escapes StreamTokenizer knows
(``\\"``, ``\\\\``, ``\\n``, ``\\t``, ``\\r``, ``\\b``, ``\\f``, ``\\a``, ``\\v``, octal
``\\0`` to ``\\377``, and ``\\<other>`` standing for the character itself), so
that a password means the same thing to both clients. Exactly one module, ended
by ``;``, as Kafka requires of ``sasl.jaas.config``.

The option values are mostly secrets, so the parser never quotes text from the
input in an error (it gives the line, column and offset, and names only the
grammar's own characters ``= ; " '``; a login module is named only if its name
ends with ``LoginModule``), and :class:`JaasConfig`'s ``repr``
masks the value of every option whose name contains "password", "secret" or
"token". :func:`credentials_from_jaas` then checks the module fits the chosen
mechanism and returns the arguments :func:`~aioproducer.security.sasl.create_sasl_client`
and the token provider need.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

__all__ = ["MSK_IAM_MARKER", "JaasConfig", "credentials_from_jaas", "parse_jaas_config"]

CONTROL_FLAGS: Final = ("required", "requisite", "sufficient", "optional")
_SECRET_MARKERS: Final = ("password", "secret", "token", "keystore.key")
_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*", re.ASCII)
_STRUCTURAL: Final = "=;\"'"
_SIMPLE_ESCAPES: Final = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


@dataclass(frozen=True, repr=False)
class JaasConfig:
    """One JAAS login-module entry: class name, control flag (lower case) and options in order."""

    login_module: str
    control_flag: str
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        shown = {key: "***" if _is_secret(key) else value for key, value in self.options.items()}
        return (
            f"JaasConfig(login_module={self.login_module!r}, control_flag={self.control_flag!r}, "
            f"options={shown!r})"
        )


def _is_secret(key: str) -> bool:
    lowered = key.lower()
    return any(marker in lowered for marker in _SECRET_MARKERS)


def parse_jaas_config(text: str) -> JaasConfig:
    """Parse one ``<class> <flag> (key=value)* ;`` entry; ``ValueError`` (with where, not what) if malformed."""
    return _Parser(text).entry()


class _Parser:
    """A cursor over the text; each method reads one element of the grammar and moves past it."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def entry(self) -> JaasConfig:
        self.skip()
        module = self.word()
        if not _CLASS_NAME.fullmatch(module):
            raise self.error("expected a login module class name", self.pos - len(module))
        self.skip()
        flag = self.word().lower()
        if flag not in CONTROL_FLAGS:
            raise self.error(f"expected a control flag ({', '.join(CONTROL_FLAGS)})", self.pos - len(flag))
        options = self.options()
        self.skip()
        if self.pos < len(self.text):
            raise self.error("only one login module may be given: there is more after ';'")
        return JaasConfig(module, flag, options)

    def options(self) -> dict[str, str]:
        options: dict[str, str] = {}
        while True:
            self.skip()
            if self.pos >= len(self.text):
                raise self.error("missing ';' at the end of the login module entry")
            if self.text[self.pos] == ";":
                self.pos += 1
                return options
            start = self.pos
            key = self.word()
            if not key:
                raise self.error("expected an option name or ';'")
            self.skip()
            self.expect("=", "after an option name")
            self.skip()
            if key in options:
                raise self.error("an option is given twice", start)
            options[key] = self.value()

    def skip(self) -> None:
        """Move past whitespace and comments."""
        while self.pos < len(self.text):
            if self.text[self.pos].isspace():
                self.pos += 1
            elif self.text.startswith("//", self.pos):
                end = self.text.find("\n", self.pos)
                self.pos = len(self.text) if end < 0 else end + 1
            elif self.text.startswith("/*", self.pos):
                end = self.text.find("*/", self.pos + 2)
                if end < 0:
                    raise self.error("unterminated '/*' comment")
                self.pos = end + 2
            else:
                return

    def word(self) -> str:
        """A bare token: everything up to whitespace or one of ``= ; " '`` (possibly empty)."""
        start = self.pos
        while self.pos < len(self.text) and not self._ends_word(self.text[self.pos]):
            self.pos += 1
        return self.text[start : self.pos]

    @staticmethod
    def _ends_word(ch: str) -> bool:
        return ch.isspace() or ch in _STRUCTURAL

    def expect(self, ch: str, context: str) -> None:
        if self.text.startswith(ch, self.pos):
            self.pos += 1
            return
        raise self.error(f"expected {ch!r} {context}")

    def value(self) -> str:
        if self.pos < len(self.text) and self.text[self.pos] in "\"'":
            return self.quoted()
        value = self.word()
        if not value:
            raise self.error("expected a value after '='")
        return value

    def quoted(self) -> str:
        start = self.pos
        quote = self.text[self.pos]
        self.pos += 1
        chars: list[str] = []
        while True:
            ch = self.text[self.pos] if self.pos < len(self.text) else "\n"
            if ch in "\r\n":
                raise self.error("unterminated quoted value", start)
            self.pos += 1
            if ch == quote:
                return "".join(chars)
            chars.append(self.escape(start) if ch == "\\" else ch)

    def escape(self, start: int) -> str:
        """The character a backslash escape stands for, as Java's StreamTokenizer reads it."""
        ch = self.text[self.pos] if self.pos < len(self.text) else "\n"
        if ch in "\r\n":
            raise self.error("unterminated quoted value", start)
        self.pos += 1
        if ch in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[ch]
        if "0" <= ch <= "7":
            return self.octal(ch)
        return ch

    def octal(self, first: str) -> str:
        """Up to three octal digits, the third only when the first is 0-3 (so at most \\377)."""
        digits = first
        limit = 3 if first <= "3" else 2
        while len(digits) < limit and self.pos < len(self.text) and "0" <= self.text[self.pos] <= "7":
            digits += self.text[self.pos]
            self.pos += 1
        return chr(int(digits, 8))

    def error(self, problem: str, pos: int | None = None) -> ValueError:
        """A ValueError saying where; it names the character found only if it is one of the grammar's own."""
        at = self.pos if pos is None else pos
        line = self.text.count("\n", 0, at) + 1
        column = at - (self.text.rfind("\n", 0, at) + 1) + 1
        return ValueError(
            f"sasl.jaas.config: {problem} at line {line}, column {column} (offset {at}), found {self._found(at)}"
        )

    def _found(self, at: int) -> str:
        if at >= len(self.text):
            return "the end of the text"
        ch = self.text[at]
        if ch in _STRUCTURAL:
            return repr(ch)
        return "whitespace" if ch.isspace() else "other text"


# --------------------------------------------------------------- to credentials

_PLAIN_MODULE: Final = "PlainLoginModule"
_SCRAM_MODULE: Final = "ScramLoginModule"
_OAUTH_MODULE: Final = "OAuthBearerLoginModule"
_MSK_IAM_MODULE: Final = "IAMLoginModule"
_KRB5_MODULE: Final = "Krb5LoginModule"

#: Login module (simple class name, so shaded copies such as Databricks' kafkashaded.* match) -> mechanisms.
_MODULE_MECHANISMS: Final = {
    _PLAIN_MODULE: ("PLAIN",),
    _SCRAM_MODULE: ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    _OAUTH_MODULE: ("OAUTHBEARER",),
    _KRB5_MODULE: ("GSSAPI",),
}
_UNSECURED_SUB: Final = "unsecuredLoginStringClaim_sub"
#: The key :func:`credentials_from_jaas` adds for AWS's IAMLoginModule (with a space: never an option's name).
MSK_IAM_MARKER: Final = "aws msk iam"


def credentials_from_jaas(config: JaasConfig, mechanism: str) -> dict[str, str]:
    """The credentials in ``config`` for ``mechanism``, or ``ValueError`` if the module does not fit it.

    PlainLoginModule and ScramLoginModule give ``username`` and ``password``
    (ScramLoginModule also ``tokenauth: "true"`` when its ``tokenauth`` option is
    true, for delegation tokens). OAuthBearerLoginModule gives its
    ``unsecuredLoginStringClaim_sub`` as ``principal`` and every other option
    under its own name. AWS's IAMLoginModule (with OAUTHBEARER) gives its options and
    :data:`MSK_IAM_MARKER` set to ``"true"``: tokens are SigV4-presigned URLs (:mod:`aioproducer.security.msk_iam`).
    Krb5LoginModule (GSSAPI) gives its options as they are (``useKeyTab``, ``keyTab``, ``principal``...).
    """
    module = config.login_module.rsplit(".", 1)[-1]
    wanted = mechanism.strip().upper()
    if module == _MSK_IAM_MODULE:
        if wanted != "OAUTHBEARER":
            raise ValueError(
                f"{config.login_module} (AWS MSK IAM) signs in through SASL mechanism OAUTHBEARER here "
                f"(MSK's IAM listeners take both): set sasl.mechanism=OAUTHBEARER, not {mechanism!r}"
            )
        # The JAAS options (awsProfileName, ...) and a marker no option can be (a JAAS name holds no space).
        return {**config.options, MSK_IAM_MARKER: "true"}
    if module not in _MODULE_MECHANISMS:
        supported = ", ".join(_MODULE_MECHANISMS)
        # Named only if it looks like one: a secret pasted in its place must not be echoed.
        named = repr(config.login_module) if module.endswith("LoginModule") else "(its first word is not a *LoginModule class)"
        raise ValueError(f"unsupported login module {named}; supported: {supported}")
    if wanted not in _MODULE_MECHANISMS[module]:
        raise ValueError(
            f"login module {module} does not fit SASL mechanism {mechanism!r}: "
            f"it serves {', '.join(_MODULE_MECHANISMS[module])}"
        )
    if module == _OAUTH_MODULE:
        return _oauth_credentials(config.options)
    if module == _KRB5_MODULE:
        return dict(config.options)  # useKeyTab, keyTab, principal, ...: read by the connector's Kerberos settings
    return _password_credentials(module, config.options)


def _password_credentials(module: str, options: dict[str, str]) -> dict[str, str]:
    missing = [key for key in ("username", "password") if key not in options]
    if missing:
        raise ValueError(f"login module {module} needs the option(s) {' and '.join(missing)}")
    credentials = {"username": options["username"], "password": options["password"]}
    if module == _SCRAM_MODULE and options.get("tokenauth", "").lower() == "true":
        credentials["tokenauth"] = "true"
    return credentials


def _oauth_credentials(options: dict[str, str]) -> dict[str, str]:
    credentials = {key: value for key, value in options.items() if key != _UNSECURED_SUB}
    if _UNSECURED_SUB in options:
        credentials["principal"] = options[_UNSECURED_SUB]
    return credentials
