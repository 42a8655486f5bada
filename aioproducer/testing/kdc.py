"""Kdc: a real MIT Kerberos KDC on loopback, for a Kerberized :class:`~aioproducer.testing.KafkaCluster`.

Theory of operation. GSSAPI is proven against the real thing: MIT Kerberos's own
``krb5kdc`` (Debian's ``krb5-kdc`` and ``krb5-admin-server`` packages), which is
what most Kerberized Kafka clusters authenticate against, speaks the protocol
the broker's JVM and the client's ``libgssapi_krb5`` speak, and starts in well
under a second. (A pure-Java KDC, Apache Kerby, would need a JVM start and its
jars fetched too; MIT's is what the client library is, so no interoperability is
left unproven between two implementations of our choosing.)

1. **Database.** ``kdb5_util create`` makes the realm's database in a temporary
   folder, with a ``kdc.conf`` of its own (``KRB5_KDC_PROFILE``): nothing of the
   machine's ``/etc/krb5kdc`` is read or written.
2. **krb5.conf.** :attr:`Kdc.krb5_conf` names the realm's KDC on ``127.0.0.1``
   (TCP first, ``udp_preference_limit = 1``), no DNS canonicalisation or reverse
   lookups (a service's host is the name the client was given), AES only (what
   both MIT and Java 17 speak), and the clock skew allowed (``clockskew``,
   :attr:`Kdc.clockskew_s`). The client gets it through ``KRB5_CONFIG``, the
   broker's JVM through ``-Djava.security.krb5.conf``.
3. **Principals and keytabs.** :meth:`Kdc.add_principal` adds a principal with
   a random key (pre-authentication required, as in a real realm) and writes its
   keytab; ``max_life_s`` caps its tickets' lifetime, which is how a test makes
   a ticket expire during a run. :meth:`Kdc.randomize_key` gives a principal a
   new key, so that the keytabs written before are wrong; :meth:`Kdc.delete_principal`
   makes its keytabs name a principal the realm does not know.
4. **Stop.** :meth:`Kdc.stop` stops ``krb5kdc`` (the realm's clients find no KDC) and
   :meth:`Kdc.start` starts it again on the same port; :meth:`Kdc.close` stops it and deletes
   the folder. The process also dies with the thread that started it (Linux).

What is missing (the MIT tools) raises
:class:`~aioproducer.testing.KafkaUnavailableError` naming the package.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Self

from aioproducer.testing._processes import KafkaStartError, KafkaUnavailableError
from aioproducer.testing._processes import die_with_parent as _die_with_parent
from aioproducer.testing._processes import free_port as _free_port

__all__ = ["DEFAULT_REALM", "Kdc"]

#: The realm of the test KDC (upper case, as realms are by convention).
DEFAULT_REALM = "AIOPRODUCER.TEST"
_PACKAGES = "Debian: apt-get install krb5-kdc krb5-admin-server"
_START_TIMEOUT_S = 10.0


def _mit_tool(name: str) -> str:
    """An MIT Kerberos admin tool, on PATH or in /usr/sbin (not on every user's PATH)."""
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin")
    if path is None:
        raise KafkaUnavailableError(f"`{name}` (MIT Kerberos) is not installed; it is needed for a GSSAPI cluster ({_PACKAGES})")
    return path


class Kdc:
    """An MIT ``krb5kdc`` for ``realm`` on ``127.0.0.1``, started on construction.

    ``clockskew_s`` is the skew every party allows (Kerberos's default is 300 s);
    a small one makes an expired ticket fail at once rather than minutes later.
    A sync context manager; :meth:`close` is idempotent.
    """

    def __init__(self, realm: str = DEFAULT_REALM, *, clockskew_s: int = 300) -> None:
        self.realm = realm
        self.clockskew_s = clockskew_s
        self._kdc = _mit_tool("krb5kdc")
        self._kdb5_util = _mit_tool("kdb5_util")
        self._kadmin = _mit_tool("kadmin.local")
        self._process: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self.directory = Path(tempfile.mkdtemp(prefix="aioproducer-kdc-"))
        try:
            self.port = _free_port()
            self.krb5_conf = self.directory / "krb5.conf"
            self._kdc_conf = self.directory / "kdc.conf"
            self._write_configs()
            self._create_database()
            self.start()
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------- setup

    def _write_configs(self) -> None:
        d = self.directory
        enctypes = "aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96"
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"  default_realm = {self.realm}\n"
            "  dns_lookup_realm = false\n  dns_lookup_kdc = false\n"
            "  dns_canonicalize_hostname = false\n  rdns = false\n"
            "  udp_preference_limit = 1\n"
            f"  clockskew = {self.clockskew_s}\n"
            # No silent correction of the client's clock from the KDC's answer: a skewed
            # clock is reported, as it would be to any other service of the realm.
            "  kdc_timesync = 0\n"
            f"  default_tkt_enctypes = {enctypes}\n  default_tgs_enctypes = {enctypes}\n"
            f"  permitted_enctypes = {enctypes}\n"
            "  ticket_lifetime = 24h\n  forwardable = false\n"
            "[realms]\n"
            f"  {self.realm} = {{\n    kdc = 127.0.0.1:{self.port}\n  }}\n"
        )
        self._kdc_conf.write_text(
            "[kdcdefaults]\n"
            f"  kdc_listen = 127.0.0.1:{self.port}\n  kdc_tcp_listen = 127.0.0.1:{self.port}\n"
            "[realms]\n"
            f"  {self.realm} = {{\n"
            f"    database_name = {d / 'principal'}\n"
            f"    key_stash_file = {d / 'stash'}\n"
            f"    acl_file = {d / 'kadm5.acl'}\n"
            "    max_life = 24h\n    max_renewable_life = 0\n"
            "    default_principal_flags = +preauth\n"
            "    supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            "  }\n"
            "[logging]\n"
            f"  kdc = FILE:{d / 'kdc.log'}\n  admin_server = FILE:{d / 'kadmin.log'}\n"
            f"  default = FILE:{d / 'krb5.log'}\n"
        )
        (d / "kadm5.acl").write_text("")

    def _env(self) -> dict[str, str]:
        return {**os.environ, "KRB5_CONFIG": str(self.krb5_conf), "KRB5_KDC_PROFILE": str(self._kdc_conf)}

    def _run(self, command: Sequence[str], stdin: str | None = None) -> str:
        done = subprocess.run(list(command), input=stdin, capture_output=True, text=True, env=self._env(), timeout=60, check=False)
        # kadmin.local reports a failed query on stderr and still exits 0: both are checked.
        problems = [line for line in done.stderr.splitlines() if "while" in line or "rror" in line]
        if done.returncode != 0 or problems:
            raise KafkaStartError(f"{Path(command[0]).name} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
        return done.stdout

    def _create_database(self) -> None:
        master = secrets.token_urlsafe(24)  # the stash file keeps it; nobody types it
        self._run([self._kdb5_util, "-r", self.realm, "create", "-s", "-P", master])

    def start(self) -> None:
        """Start ``krb5kdc`` (on construction, and again after :meth:`stop`: same port, same principals)."""
        if self.running:
            raise RuntimeError("the KDC is running already")
        main_thread = threading.current_thread() is threading.main_thread()
        log = open(self.directory / "krb5kdc.out", "ab")  # noqa: SIM115 - the child writes it until close()
        with log:
            self._process = subprocess.Popen(
                [self._kdc, "-n", "-r", self.realm], env=self._env(), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if main_thread and sys.platform == "linux" else None,
            )
        self._wait_listening()

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise KafkaStartError(f"krb5kdc exited with {self._process.returncode}: {self.log_tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise KafkaStartError(f"krb5kdc did not listen on port {self.port}: {self.log_tail()}") from None
                time.sleep(0.05)

    def log_tail(self, lines: int = 20) -> str:
        """The end of the KDC's log (what it granted and refused, and why)."""
        text = ""
        for name in ("krb5kdc.out", "kdc.log"):
            path = self.directory / name
            if path.exists():
                text += path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    # -------------------------------------------------------- principals

    def principal(self, name: str) -> str:
        """``name@REALM`` (``name`` as is if it names a realm already)."""
        return name if "@" in name else f"{name}@{self.realm}"

    def add_principal(self, name: str, *, max_life_s: int | None = None, keytab: Path | None = None) -> Path:
        """Add ``name`` with a random key and write its keytab (returned); ``max_life_s`` caps its tickets."""
        path = keytab or self.directory / f"{name.replace('/', '_').replace('@', '_')}.keytab"
        life = [] if max_life_s is None else ["-maxlife", f"{max_life_s} seconds"]
        principal = self.principal(name)
        self._kadmin_query(["addprinc", "-randkey", *life, principal])
        self._kadmin_query(["ktadd", "-k", str(path), principal])
        return path

    def delete_principal(self, name: str) -> None:
        """Remove ``name`` from the realm (its keytabs then name a principal the KDC does not know)."""
        self._kadmin_query(["delprinc", "-force", self.principal(name)])

    def randomize_key(self, name: str) -> None:
        """Give ``name`` a new random key: every keytab written for it before no longer matches."""
        self._kadmin_query(["cpw", "-randkey", self.principal(name)])

    def _kadmin_query(self, query: Sequence[str]) -> None:
        self._run([self._kadmin, "-r", self.realm, "-q", " ".join(f'"{part}"' if " " in part else part for part in query)])

    # -------------------------------------------------------------- stop

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self) -> None:
        """Stop ``krb5kdc`` (the realm's clients then find no KDC); :meth:`close` also deletes the folder."""
        with self._lock:
            process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Kdc({self.realm}, 127.0.0.1:{self.port}, {'running' if self.running else 'stopped'})"
