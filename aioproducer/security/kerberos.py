"""Kerberos for SASL/GSSAPI: the login from a keytab (or a ticket cache), its renewal, each connection's context.

Theory of operation. Kerberos is the system's MIT library, reached through python-gssapi
(the ``kerberos`` extra); nothing of the protocol is written here. A producer has one
:class:`KerberosLogin`, shared by its connections, as Java's ``LoginManager``:

* **Login.** With a keytab, the principal's ticket-granting ticket is fetched from the KDC
  into a credential cache of the process's own (``MEMORY:``, a new one per login, through
  the GSSAPI credential store's ``client_keytab``), so no ``kinit`` runs and no file is
  written; the user's own ticket cache is never touched. (A renewal leaves the previous
  cache in memory, a few KB each time: python-gssapi has no call that destroys a cache.) With ``useTicketCache=true`` and
  no keytab, the tickets are read from the cache someone else keeps fresh (``kinit``,
  ``k5start``, SSSD).
* **Re-login.** A ticket is fetched again at ``sasl.kerberos.ticket.renew.window.factor``
  of its lifetime plus up to ``sasl.kerberos.ticket.renew.jitter`` of it, but never sooner
  than ``sasl.kerberos.min.time.before.relogin`` after the last login unless the ticket
  would expire first (Java's ``KerberosLogin``). The check is made whenever a connection
  authenticates (a new connection, or a KIP-368 re-authentication): the ticket only ever
  matters then. A re-login that fails while the old ticket is still valid keeps the old
  one (a warning) and is tried again at the next authentication after
  ``min.time.before.relogin``; with no valid ticket left, it is an :class:`AuthenticationError`.
* **Each authentication.** A security context for ``<service>@<broker host>`` is started
  and its first token made (which fetches a service ticket: a KDC round trip); the rest of
  the exchange is :class:`~aioproducer.security.sasl.GssapiClient`, local cryptography.

Every call that may reach the KDC runs in a worker thread, never on the event loop, and
is bounded as a request is, by ``request.timeout.ms`` and at most ``max.block.ms`` (a KDC
that accepts and never answers would otherwise hold a connection for the library's own
retries); a failure is an :class:`AuthenticationError` naming the
principal and the library's reason, with a hint for the usual causes (an outdated keytab,
an unknown principal, no KDC, a skewed clock, a wrong service name). Key material never
appears in a message: the library's messages hold none, and the keytab is only named.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from aioproducer.errors import AuthenticationError
from aioproducer.security.sasl import GssapiClient, GssapiContextError

if TYPE_CHECKING:
    import gssapi
    from gssapi.raw.misc import GSSError

__all__ = ["KerberosLogin", "KerberosSettings", "refresh_time"]

_T = TypeVar("_T")

#: MIT's com_err base of the krb5 error table: a minor status minus it is a Kerberos error code.
_KRB5_ERROR_BASE = 2529638912
#: Kerberos error code -> what it usually means for a Kafka client (RFC 4120 §7.5.9, MIT's krb5_err.et).
_HINTS: dict[int, str] = {
    6: "the KDC does not know this principal (is it spelled right, with its realm?)",
    7: "the KDC knows no such service principal: is sasl.kerberos.service.name (and the broker's host name) right?",
    24: "the keytab's key is not the one the KDC has for this principal (a wrong or outdated keytab)",
    32: "it ran out before it was renewed",
    37: "this machine's clock and the KDC's differ by more than the realm allows (clockskew): synchronise the clocks",
    156: "no KDC of the realm answered: is it up, and does krb5.conf (KRB5_CONFIG) name it?",
    195: "no ticket could be had: the keytab holds no key for this principal, or the ticket cache is empty",
}


@dataclass(frozen=True)
class KerberosSettings:
    """Who logs in and how, from ``sasl.jaas.config``'s Krb5LoginModule or librdkafka's keys."""

    #: ``user@REALM`` (the keytab's); None with a ticket cache: the cache's own principal.
    principal: str | None
    #: The keytab to log in from; None: the ticket cache.
    keytab: str | None
    #: The first part of the brokers' principals (``sasl.kerberos.service.name``).
    service_name: str
    #: With ``keytab`` None: the credential cache to read (``ticketCache``); None: the default one.
    ticket_cache: str | None = None
    renew_window_factor: float = 0.8
    renew_jitter: float = 0.05
    min_time_before_relogin_ms: int = 60000
    #: The bound of each blocking call: ``request.timeout.ms``, at most ``max.block.ms``.
    timeout_ms: int = 30000

    @property
    def who(self) -> str:
        return self.principal or "(the ticket cache's principal)"


def refresh_time(
    start: float, expiry: float, now: float, *, factor: float, jitter: float, min_relogin: float, rng: random.Random
) -> float:
    """When to log in again, as Java's ``KerberosLogin`` computes it (all in seconds, one clock).

    ``start + (expiry - start) * (factor + jitter * U[0, 1))``, but not sooner than
    ``min_relogin`` after ``now``, unless the ticket expires before that (then ``now``: at once).
    """
    proposed = start + (expiry - start) * (factor + jitter * rng.random())
    if proposed > expiry or min_relogin > expiry - now:
        return now
    return max(proposed, now + min_relogin)


def _reason(exc: GSSError) -> str:
    """The GSSAPI library's own words for a failure (the minor status, else the major), and a hint."""
    statuses: list[str] = []
    for code, is_major in ((exc.min_code, False), (exc.maj_code, True)):
        if code and not statuses:
            try:
                statuses = [str(s) for s in exc.get_all_statuses(code, is_major) if str(s).strip()]
            except Exception:  # noqa: BLE001 - the text is best effort; the failure is reported either way
                statuses = []
    text = "; ".join(statuses) or str(exc) or type(exc).__name__
    hint = _HINTS.get((exc.min_code or 0) - _KRB5_ERROR_BASE)
    return f"{text} ({hint})" if hint else text


class _Context:
    """python-gssapi's initiator context as :class:`~aioproducer.security.sasl.GssContext`."""

    def __init__(self, context: gssapi.SecurityContext) -> None:
        self._context = context

    @property
    def complete(self) -> bool:
        return bool(self._context.complete)

    def step(self, token: bytes) -> bytes:
        return self._guard(lambda: self._context.step(token) or b"")

    def wrap(self, message: bytes) -> bytes:
        return self._guard(lambda: bytes(self._context.wrap(message, False).message))

    def unwrap(self, message: bytes) -> bytes:
        return self._guard(lambda: bytes(self._context.unwrap(message).message))

    @staticmethod
    def _guard(call: Callable[[], bytes]) -> bytes:
        from gssapi.raw.misc import GSSError

        try:
            return call()
        except GSSError as exc:
            raise GssapiContextError(_reason(exc)) from None


@dataclass
class _Login:
    """One login's credentials and when they run out and are to be renewed (monotonic seconds)."""

    credentials: gssapi.Credentials
    expiry: float
    refresh_at: float


class KerberosLogin:
    """A producer's Kerberos login, renewed as Java renews it, and a SASL client per authentication."""

    def __init__(
        self,
        settings: KerberosSettings,
        *,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger],
        clock: Callable[[], float] = time.monotonic,
        rng: random.Random | None = None,
    ) -> None:
        self.settings = settings
        self._log = log
        self._clock = clock
        self._rng = rng or random.Random()
        self._login: _Login | None = None
        self._lock: asyncio.Lock | None = None
        #: How many times a ticket was fetched (the first login counts): what a test of renewal reads.
        self.logins = 0

    def __repr__(self) -> str:
        return f"KerberosLogin({self.settings.who}, service {self.settings.service_name!r})"

    async def client(self, host: str) -> GssapiClient:
        """A SASL client for broker ``host``: valid credentials (a login if due) and the context's first token."""
        credentials = await self._credentials()
        context, token = await self._blocking(f"could not get a ticket for service {self._service(host)}",
                                              self._first_token, credentials, host)
        return GssapiClient(_Context(context), token, self.settings.who)

    def _service(self, host: str) -> str:
        return f"{self.settings.service_name}/{host}"

    # ------------------------------------------------------------ blocking calls

    async def _blocking(self, what: str, call: Callable[..., _T], *args: Any) -> _T:
        """``call(*args)`` in a worker thread, bounded by ``max.block.ms``; GSSAPI failures as AuthenticationError."""
        from gssapi.raw.misc import GSSError

        timeout_s = self.settings.timeout_ms / 1000
        try:
            return await asyncio.wait_for(asyncio.to_thread(call, *args), timeout_s)
        except GSSError as exc:
            raise AuthenticationError(f"GSSAPI: principal {self.settings.who}: {what}: {_reason(exc)}") from None
        except TimeoutError:
            raise AuthenticationError(
                f"GSSAPI: principal {self.settings.who}: {what}: the KDC did not answer within "
                f"{self.settings.timeout_ms} ms (request.timeout.ms, at most max.block.ms)"
            ) from None

    def _first_token(self, credentials: gssapi.Credentials, host: str) -> tuple[gssapi.SecurityContext, bytes]:
        """In a worker thread: the context for ``service@host`` and its first token (a service ticket: the KDC)."""
        import gssapi

        name = gssapi.Name(f"{self.settings.service_name}@{host}", gssapi.NameType.hostbased_service)
        context = gssapi.SecurityContext(name=name, creds=credentials, usage="initiate")
        return context, context.step() or b""

    def _acquire(self) -> gssapi.Credentials:
        """In a worker thread: a TGT from the keytab into a new private cache, or the ticket cache's credentials."""
        import gssapi

        s = self.settings
        name = None if s.principal is None else gssapi.Name(s.principal, gssapi.NameType.kerberos_principal)
        if s.keytab is None:
            store: dict[bytes | str, bytes | str] | None = None if s.ticket_cache is None else {"ccache": s.ticket_cache}
            return gssapi.Credentials(name=name, usage="initiate", store=store)
        ccache = f"MEMORY:aioproducer-{uuid.uuid4().hex}"
        gssapi.Credentials(name=name, usage="initiate", store={"client_keytab": s.keytab, "ccache": ccache})
        # Used through the cache alone: the library then never fetches a ticket behind our back,
        # so renewal is this object's schedule, the same every time.
        return gssapi.Credentials(name=name, usage="initiate", store={"ccache": ccache})

    # ------------------------------------------------------------ login and renewal

    async def _credentials(self) -> gssapi.Credentials:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            login, now = self._login, self._clock()
            if login is not None and now < login.refresh_at:
                return login.credentials
            try:
                self._login = await self._fetch(relogin=login is not None)
            except AuthenticationError as exc:
                if login is None or now >= login.expiry:
                    raise
                # The old ticket still serves: try again after the minimum interval, as Java's thread does.
                login.refresh_at = now + min(self.settings.min_time_before_relogin_ms / 1000, login.expiry - now)
                self._log.warning("Kerberos re-login failed, the current ticket serves until it expires: %s", exc)
                return login.credentials
            return self._login.credentials

    async def _fetch(self, *, relogin: bool) -> _Login:
        s = self.settings
        where = f"from keytab {s.keytab}" if s.keytab is not None else "from the ticket cache"
        credentials = await self._blocking(f"login {where} failed", self._acquire)
        now = self._clock()
        lifetime = float(credentials.lifetime or 0)
        if lifetime <= 0:
            raise AuthenticationError(f"GSSAPI: principal {s.who}: the ticket {where} has expired")
        expiry = now + lifetime
        refresh = refresh_time(now, expiry, now, factor=s.renew_window_factor, jitter=s.renew_jitter,
                               min_relogin=s.min_time_before_relogin_ms / 1000, rng=self._rng)
        self.logins += 1
        self._log.info("Kerberos %s of principal %s %s: ticket valid for %.0f s, renewed in %.0f s",
                       "re-login" if relogin else "login", credentials.name, where, lifetime, refresh - now)
        return _Login(credentials, expiry, refresh)
