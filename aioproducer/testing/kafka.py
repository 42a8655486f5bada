"""KafkaCluster: real Apache Kafka brokers (KRaft) on loopback, from Maven Central jars.

Theory of operation. The librdkafka mock (:class:`~aioproducer.testing.MockCluster`)
starts in milliseconds and injects faults, but it does not check an idempotent
producer's sequence numbers, speaks no TLS or SASL and has no transactions
coordinator of Kafka's own. Guarantees are proven against the real thing: this
module runs Apache Kafka's own broker, one JVM per node, on 127.0.0.1.

1. **Jars.** :func:`kafka_libs` runs Maven once per Kafka version to copy
   ``org.apache.kafka:kafka_2.13`` and its runtime dependencies (and ``kafka-tools``, for
   ``ProducerPerformance`` beside ``aioproducer perf-test``), plus the Log4j 2
   binding the published POM leaves out, into
   ``~/.cache/aioproducer/kafka/<version>/libs`` (``AIOPRODUCER_KAFKA_LIBS``
   points at a ready folder instead). A file lock makes concurrent first fetches
   wait for each other; a marker file written last makes a half-done fetch redo.
2. **Storage.** Every node is a combined broker+controller (``process.roles=
   broker,controller``) with a static voter set, or, with ``dedicated_controller``,
   a broker beside one controller-only node; all are formatted with one cluster id by
   ``kafka.tools.StorageTool``; ``scram_users`` become ``--add-scram`` records
   for SCRAM-SHA-256 and -512 (PLAIN users go into the listener's JAAS line). The
   cluster-wide properties (``broker_config`` among them) go to every node, the
   controller too: it decides some of what the brokers serve.
3. **Listeners.** Each node has a ``CONTROLLER`` listener, an ``INTERNAL``
   PLAINTEXT listener used between brokers only, and one client listener per
   entry of ``listeners`` (named like its security protocol). Clients therefore
   never share a listener with replication, which lets a test put a
   :class:`~aioproducer.testing.proxy.FaultProxy` in front of the client
   listener (``proxy=True``): the broker advertises the proxy's port, so every
   client connection, bootstrap or not, goes through it.
4. **Ready.** :meth:`KafkaCluster.start_broker` launches ``java kafka.Kafka``
   directly (no shell, so signals reach the JVM) and waits for the node's
   ``Kafka Server started`` line; the cluster then waits until Metadata, asked
   through confluent-kafka's admin client (an independent client), lists every
   broker, and creates ``topics``. A failure raises :class:`KafkaStartError`
   with the tail of the node's log. The JVMs are made to start quickly, not to
   run fast: C1 only (``QUICK_START_JVM_OPTIONS``, the default ``jvm_options``;
   benchmarks pass ``SERVER_JVM_OPTIONS``) and a class-data archive of Kafka's
   classes in the jar cache, written once by the first broker that exits
   normally (``aioproducer.testing.class_archive``).
5. **Stop.** :meth:`close` sends SIGTERM to every node at once (controlled
   shutdown off, so no node waits for the others), SIGKILLs what is left after
   20 s and deletes the temporary directory. The JVMs also die with the Python
   process: they are started with ``PR_SET_PDEATHSIG`` when launched from the
   main thread, and an ``atexit`` hook closes forgotten clusters.

Needs ``java`` (17+) for the brokers, ``mvn`` for the first fetch, ``openssl``
for TLS listeners and ``confluent-kafka`` (the ``testing`` extra) for the admin
calls. What is missing raises :class:`KafkaUnavailableError` naming it.
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import fcntl
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from aioproducer.testing._processes import KafkaStartError, KafkaUnavailableError
from aioproducer.testing.class_archive import ClassArchive
from aioproducer.testing._processes import die_with_parent as _die_with_parent
from aioproducer.testing._processes import free_port as _free_port

if TYPE_CHECKING:
    from aioproducer.testing.kdc import Kdc
    from aioproducer.testing.proxy import FaultProxy
    from aioproducer.testing.readback import ConsumerRecord

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "KafkaCluster",
    "KafkaStartError",
    "KafkaUnavailableError",
    "kafka_libs",
]

#: The Kafka release the tests and benchmarks run by default (JDK 17 is enough for 4.x).
DEFAULT_KAFKA_VERSION = "4.3.1"

#: Log4j 2 release that each Kafka release was built with (its gradle/dependencies.gradle).
#: The broker's POM declares no logging backend, so it is added explicitly.
_LOG4J_VERSIONS = {
    "4.0.0": "2.24.3", "4.0.1": "2.24.3", "4.1.0": "2.24.3", "4.1.1": "2.24.3",
    "4.0.2": "2.25.3", "4.1.2": "2.25.3", "4.2.0": "2.25.3",
    "4.2.1": "2.25.4", "4.3.0": "2.25.4", "4.3.1": "2.25.4",
}
_LOG4J_DEFAULT = "2.25.4"

#: The client listeners a cluster can have, each named like its security protocol.
LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL")
_SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

#: The brokers' Kerberos service name (``sasl.kerberos.service.name``) and the client principal made for tests.
KERBEROS_SERVICE_NAME = "kafka"
KERBEROS_CLIENT = "producer"

_STARTED = re.compile(r"\[KafkaRaftServer nodeId=(\d+)\] Kafka Server started")
_START_TIMEOUT_S = 120.0
_STOP_TIMEOUT_S = 20.0
_CONTROLLER_ID = 100

#: What places one node in the cluster (role, id, quorum, listeners, storage): set per node by
#: :class:`KafkaCluster`, so ``broker_config``, one value for every node, may not set it.
_NODE_LAYOUT = frozenset({
    "process.roles", "node.id", "broker.id", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
    "listeners", "advertised.listeners", "listener.security.protocol.map", "controller.listener.names",
    "inter.broker.listener.name", "log.dirs", "log.dir",
})




# --------------------------------------------------------------------- jars


_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>aioproducer.testing</groupId>
  <artifactId>{name}</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
  <build><pluginManagement><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId><artifactId>maven-dependency-plugin</artifactId>
    <version>3.8.1</version>
  </plugin></plugins></pluginManagement></build>
</project>
"""
_DEPENDENCY = """    <dependency><groupId>{}</groupId><artifactId>{}</artifactId>
      <version>{}</version></dependency>"""


def require_tool(name: str, why: str) -> str:
    """The path of executable ``name``, or :class:`KafkaUnavailableError` saying what it is for."""
    path = shutil.which(name)
    if path is None:
        raise KafkaUnavailableError(f"`{name}` is not on PATH; it is needed {why}")
    return path


def cache_dir(version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """``~/.cache/aioproducer/kafka/<version>`` (``XDG_CACHE_HOME`` is honoured)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "aioproducer" / "kafka" / version


#: Which jars the fetch brings: raised when the POM above gains a dependency.
_JAR_SET = 2


def kafka_libs(version: str = DEFAULT_KAFKA_VERSION) -> Path:
    """The folder of jars that runs Kafka ``version``, fetched with Maven on first use.

    ``AIOPRODUCER_KAFKA_LIBS`` names a ready folder instead (it must hold the
    ``kafka_2.13`` jar). The folder also holds ``kafka-clients``, which the Java
    consumer and producer programs of the tests and benchmarks compile against.
    """
    override = os.environ.get("AIOPRODUCER_KAFKA_LIBS")
    if override:
        libs = Path(override)
        if not any(libs.glob("kafka_2.13-*.jar")):
            raise KafkaUnavailableError(
                f"AIOPRODUCER_KAFKA_LIBS={override!r} holds no kafka_2.13-*.jar"
            )
        return libs
    home = cache_dir(version)
    # The marker names the jar set: a cache filled for an older set (before kafka-tools, which has
    # ProducerPerformance for the perf-test comparison) is fetched again.
    libs, marker = home / "libs", home / f"libs.complete-{_JAR_SET}"
    if marker.exists():
        return libs
    require_tool("java", "to run the Kafka broker (OpenJDK 17 or newer)")
    mvn = require_tool("mvn", "once, to fetch the Kafka broker's jars from Maven Central")
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a concurrent first fetch waits here
        if not marker.exists():
            _fetch(mvn, version, home)
    return libs


def _fetch(mvn: str, version: str, home: Path) -> None:
    """Copy the broker's runtime classpath into ``home/libs``; the caller holds the lock."""
    log4j = _LOG4J_VERSIONS.get(version, _LOG4J_DEFAULT)
    artifacts = [
        ("org.apache.kafka", "kafka_2.13", version),
        ("org.apache.kafka", "kafka-tools", version),
        ("org.apache.logging.log4j", "log4j-api", log4j),
        ("org.apache.logging.log4j", "log4j-core", log4j),
        ("org.apache.logging.log4j", "log4j-slf4j-impl", log4j),
    ]
    maven_classpath(mvn, "kafka-broker-classpath", artifacts, home)
    (home / f"libs.complete-{_JAR_SET}").write_text(version + "\n")


def maven_classpath(mvn: str, name: str, artifacts: Sequence[tuple[str, str, str]], home: Path) -> Path:
    """Fetch ``artifacts`` (group, artifact, version) and their runtime dependencies into ``home/libs``.

    Through a POM written to ``home`` and Maven's ``dependency:copy-dependencies``, so the
    machine's Maven settings (mirrors, proxies) apply. Fetched into a staging folder that
    replaces ``libs`` only when complete: never two fetches mixed in one folder (a stale jar of
    another version would shadow classes). :class:`KafkaUnavailableError` with Maven's last
    lines if it fails.
    """
    pom = home / "pom.xml"
    dependencies = "\n".join(_DEPENDENCY.format(*artifact) for artifact in artifacts)
    pom.write_text(_POM.format(name=name, dependencies=dependencies))
    staging = home / "libs.tmp"
    shutil.rmtree(staging, ignore_errors=True)
    command = [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={staging}"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        wanted = ", ".join(":".join(artifact) for artifact in artifacts[:1])
        raise KafkaUnavailableError(f"Maven could not fetch {wanted} (exit {done.returncode}):\n{tail}")
    libs = home / "libs"
    shutil.rmtree(libs, ignore_errors=True)
    staging.rename(libs)
    return libs


def classpath(libs: Path) -> str:
    """A ``-cp`` value for every jar in ``libs`` (Java expands the wildcard, not a shell)."""
    return str(libs / "*")


def compile_java(source: Path, libs: Path) -> Path:
    """The classes folder of ``source`` compiled against ``libs``, compiled once and cached.

    For the small Java programs of the tests and benchmarks (a consumer, a
    producer) that read back and race aioproducer with Kafka's own client.
    The cache folder is named by a hash of the source and the libs path, so an
    edit recompiles. Two processes may compile at once: each compiles into a
    scratch folder and renames it into place, so nobody sees a half-written one.
    Also writes ``log4j2.properties`` there (WARN and up, to stderr), for
    ``-Dlog4j2.configurationFile``: a Java client's stdout stays its own.
    """
    digest = hashlib.sha256(source.read_bytes() + b"\0" + str(libs.resolve()).encode()).hexdigest()[:16]
    cache = cache_dir().parent.parent / "java"
    target = cache / f"{source.stem}-{digest}"
    if (target / f"{source.stem}.class").exists():
        return target
    javac = require_tool("javac", f"to compile {source.name} (a JDK 17+)")
    cache.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".compiling-", dir=cache))
    try:
        done = subprocess.run([javac, "-nowarn", "-d", str(scratch), "-cp", classpath(libs), str(source)],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise KafkaUnavailableError(f"javac failed on {source} against {libs}:\n{done.stderr[-4000:]}")
        (scratch / "log4j2.properties").write_text(_LOG4J_TOOLS)
        try:
            scratch.rename(target)
        except OSError:
            if not (target / f"{source.stem}.class").exists():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


# ---------------------------------------------------------------- processes


_LOG4J_BROKER = """status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.channel.name = kafka.network.RequestChannel$
logger.channel.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
"""

_LOG4J_TOOLS = """status = warn
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = ERR
"""

#: The script defaults' G1 settings and a small heap: a broker for throughput (both of the JIT's
#: compilers), which the benchmarks pass as ``jvm_options``.
SERVER_JVM_OPTIONS = (
    "-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)
#: The default: a quick start. C1 only (no C2 compiles in a JVM that lives for a test): a node's
#: start took 7.5-7.8 s of CPU against 10.0-10.8 s (see :mod:`aioproducer.testing.class_archive`,
#: which every JVM here adds). A benchmark's broker wants :data:`SERVER_JVM_OPTIONS`.
QUICK_START_JVM_OPTIONS = (*SERVER_JVM_OPTIONS, "-XX:TieredStopAtLevel=1")


@dataclass
class _Node:
    """One broker+controller process: its ports, its files and, while it runs, its JVM.

    Owned by its :class:`KafkaCluster`; only the cluster's methods touch it.
    """

    node_id: int
    directory: Path
    controller_port: int
    internal_port: int
    listener_ports: dict[str, int]
    advertised_ports: dict[str, int]
    process: subprocess.Popen[bytes] | None = None
    log_offset: int = 0
    proxies: dict[str, FaultProxy] = field(default_factory=dict)
    #: The class-data archive this node's JVM writes when it exits (``ClassArchive.use_or_make``).
    archive_dump: Path | None = None

    @property
    def properties(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log(self) -> Path:
        return self.directory / "broker.log"

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


_live: weakref.WeakSet[KafkaCluster] = weakref.WeakSet()


@atexit.register
def _close_forgotten_clusters() -> None:
    for cluster in list(_live):
        cluster.close()


# ------------------------------------------------------------------ cluster


def _wait_all_threads_stopped(pid: int, timeout: float) -> None:
    """Until every thread of ``pid`` is in state ``T`` (Linux ``/proc``; elsewhere nothing to wait on)."""
    tasks = Path(f"/proc/{pid}/task")
    if not tasks.is_dir():
        return
    deadline = time.monotonic() + timeout
    while not all(state in ("T", "t") for state in _thread_states(tasks)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"process {pid} was sent SIGSTOP but not all its threads stopped within {timeout} s")
        time.sleep(0.001)  # polling /proc: there is no event for "a thread stopped" to wait on


def _thread_states(tasks: Path) -> list[str]:
    states = []
    for stat in tasks.glob("*/stat"):
        try:
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue  # the thread exited while being read
    return states


class KafkaCluster:
    """``brokers`` real Kafka nodes (ids ``1..brokers``) on 127.0.0.1, started on construction.

    ``topics`` maps names to partition counts, created with ``replication_factor``
    (default ``min(3, brokers)``). ``listeners`` are the client listeners, among
    :data:`LISTENERS`; :attr:`bootstrap_servers` is the first one's.
    ``scram_users`` (``{"alice": "alice-secret"}``) are valid for PLAIN,
    SCRAM-SHA-256 and SCRAM-SHA-512 on the SASL listeners; OAUTHBEARER takes
    any unsecured JWT there (Kafka's test validator), or, with ``oauthbearer_jwks_url``
    (e.g. an :class:`~aioproducer.testing.OidcProvider`'s), only JWTs signed by a key that
    JWKS publishes (the broker's ``OAuthBearerValidatorCallbackHandler``). ``broker_config``
    adds or overrides properties on every node, the dedicated controller included: in KRaft the
    controller decides part of what the brokers serve (the default ``min.insync.replicas`` of
    a topic created without one, a CreateTopics' default partitions and replication factor), so
    a setting on the brokers alone could be silently ineffective. Its keys that place a node
    in the cluster (``process.roles``, ``node.id``, ``listeners``, ``log.dirs``, ...) are the
    cluster's own and refused with :class:`ValueError`. ``proxy=True`` puts a
    :class:`~aioproducer.testing.proxy.FaultProxy` in front of every node's
    client listeners (see :meth:`proxy`). ``ssl_client_auth`` is the brokers'
    ``ssl.client.auth`` (``"none"``, ``"requested"``, ``"required"``).
    ``sasl_mechanism="GSSAPI"`` starts a Kerberos realm first (:attr:`kdc`, an MIT KDC:
    :class:`~aioproducer.testing.kdc.Kdc`), with the brokers' principal ``kafka/127.0.0.1`` and
    a client principal ``producer``, each with a keytab, and turns GSSAPI on on the SASL
    listeners; ``listeners`` then default to ``("SASL_PLAINTEXT", "PLAINTEXT")`` (the second for
    reading back). :meth:`gssapi_config` is a producer's configuration for it, :attr:`krb5_conf`
    the ``KRB5_CONFIG`` a client process needs.
    ``extra_classpath`` puts plugin classes on the brokers' classpath (with
    ``broker_config={"metric.reporters": ...}``: a client-metrics reporter, KIP-714).
    ``dedicated_controller=True`` adds a controller-only node (id 100) and makes
    the brokers broker-only, so that stopping two of three brokers leaves a
    working quorum (leaders move, ISRs shrink, ``NOT_ENOUGH_REPLICAS`` shows);
    with combined nodes it would stop the controller too.
    ``transaction_version`` (1 or 2) finalizes the ``transaction.version`` feature at format
    time (``kafka-storage format --feature transaction.version=N``): 2 is transactions v2
    (KIP-890 part 2), 1 the classic protocol; None leaves Kafka's default for its release
    (2 for Kafka 4.x).

    A sync and async context manager; :meth:`close` is idempotent. Blocking
    calls (start, stop) block the calling thread: from async code, run them in
    ``asyncio.to_thread`` where the wait matters.
    """

    def __init__(
        self,
        brokers: int = 1,
        topics: Mapping[str, int] | None = None,
        version: str = DEFAULT_KAFKA_VERSION,
        listeners: Sequence[str] | None = None,
        scram_users: Mapping[str, str] | None = None,
        broker_config: Mapping[str, object] | None = None,
        *,
        replication_factor: int | None = None,
        proxy: bool = False,
        ssl_client_auth: str = "none",
        dedicated_controller: bool = False,
        jvm_options: Sequence[str] = QUICK_START_JVM_OPTIONS,
        extra_classpath: Sequence[Path] = (),
        transaction_version: int | None = None,
        oauthbearer_jwks_url: str | None = None,
        sasl_mechanism: str | None = None,
    ) -> None:
        if sasl_mechanism not in (None, "GSSAPI"):
            raise ValueError(
                f"sasl_mechanism is None (PLAIN, SCRAM and OAUTHBEARER are on every SASL listener) or 'GSSAPI', "
                f"got {sasl_mechanism!r}"
            )
        if listeners is None:
            listeners = ("SASL_PLAINTEXT", "PLAINTEXT") if sasl_mechanism == "GSSAPI" else ("PLAINTEXT",)
        self._validate(brokers, listeners, scram_users, ssl_client_auth)
        if sasl_mechanism == "GSSAPI" and not any(name.startswith("SASL") for name in listeners):
            raise ValueError(f"sasl_mechanism='GSSAPI' needs a SASL listener, got listeners {tuple(listeners)!r}")
        _check_broker_config(broker_config)
        #: Folders or jars put on the brokers' classpath after Kafka's (a plugin: a client-metrics reporter).
        self._extra_classpath = tuple(str(Path(entry)) for entry in extra_classpath)
        if transaction_version is not None and (
            not isinstance(transaction_version, int) or isinstance(transaction_version, bool)
            or transaction_version not in (1, 2)
        ):
            raise ValueError(f"transaction_version must be 1, 2 or None, got {transaction_version!r}")
        self.transaction_version = transaction_version
        self.version = version
        self._brokers = brokers
        self._listeners = tuple(listeners)
        self._scram_users = dict(scram_users or {})
        self._broker_config = {k: _property_value(v) for k, v in (broker_config or {}).items()}
        self._replication_factor = min(3, brokers) if replication_factor is None else replication_factor
        self._ssl_client_auth = ssl_client_auth
        self._jvm_options = tuple(jvm_options)
        self._jwks_url = oauthbearer_jwks_url
        if oauthbearer_jwks_url is not None:
            # Kafka 4 fetches no URL a SASL/OAUTHBEARER setting names unless this JVM property allows it.
            self._jvm_options += (f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={oauthbearer_jwks_url}",)
        self._lock = threading.RLock()  # guards _nodes' processes against close() from atexit
        self._closed = False
        self.libs: Path = kafka_libs(version)
        self._java = require_tool("java", "to run the Kafka broker (OpenJDK 17 or newer)")
        self._archive = ClassArchive(self._java, classpath(self.libs), cache_dir(version))
        self._work = Path(tempfile.mkdtemp(prefix="aioproducer-kafka-"))
        #: The realm's KDC and the client's principal and keytab, with ``sasl_mechanism="GSSAPI"``.
        self.kdc: Kdc | None = None
        self._kerberos: dict[str, str] = {}
        _live.add(self)
        try:
            if sasl_mechanism == "GSSAPI":
                self._start_kdc()
            self._tls: dict[str, Path] = self._make_tls() if self._needs_tls() else {}
            self._nodes = self._plan_nodes(proxy)
            self._controller = self._plan_controller() if dedicated_controller else None
            self._write_configs()
            self._format()
            self.start_all()
            for name, partitions in (topics or {}).items():
                self.create_topic(name, partitions)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------- setup

    @staticmethod
    def _validate(
        brokers: int, listeners: Sequence[str], scram_users: Mapping[str, str] | None, client_auth: str
    ) -> None:
        if not isinstance(brokers, int) or not 1 <= brokers <= 9:
            raise ValueError(f"brokers must be an int in 1..9, got {brokers!r}")
        if isinstance(listeners, str) or not listeners:
            raise ValueError(f"listeners must be a non-empty sequence of names, got {listeners!r}")
        unknown = [name for name in listeners if name not in LISTENERS]
        if unknown or len(set(listeners)) != len(listeners):
            raise ValueError(f"listeners must be distinct names among {LISTENERS}, got {tuple(listeners)!r}")
        for user, password in (scram_users or {}).items():
            if not user or "," in user or "," in password or '"' in user + password or "=" in user:
                raise ValueError(
                    f"scram_users: user {user!r}: names and passwords may not be empty or hold ',', '\"' "
                    "or (names) '=' (Kafka's --add-scram syntax)"
                )
        if client_auth not in ("none", "requested", "required"):
            raise ValueError(f"ssl_client_auth must be none, requested or required, got {client_auth!r}")

    def _start_kdc(self) -> None:
        """The realm: a KDC, the brokers' service principal and keytab, and the client's."""
        from aioproducer.testing.kdc import Kdc

        # A small clock skew allowance (one machine, one clock), so that an expired ticket is
        # refused at once rather than minutes later.
        kdc = self.kdc = Kdc(clockskew_s=5)
        self._kerberos = {
            "broker_principal": kdc.principal(f"{KERBEROS_SERVICE_NAME}/127.0.0.1"),
            "broker_keytab": str(kdc.add_principal(f"{KERBEROS_SERVICE_NAME}/127.0.0.1")),
            "client_principal": kdc.principal(KERBEROS_CLIENT),
            "client_keytab": str(kdc.add_principal(KERBEROS_CLIENT)),
        }
        self._jvm_options += (f"-Djava.security.krb5.conf={kdc.krb5_conf}",)

    def _needs_tls(self) -> bool:
        return any(name.endswith("SSL") for name in self._listeners)

    def _plan_nodes(self, proxy: bool) -> list[_Node]:
        nodes = []
        for node_id in range(1, self._brokers + 1):
            ports = {name: _free_port() for name in self._listeners}
            directory = self._work / f"node{node_id}"
            directory.mkdir()
            node = _Node(node_id, directory, _free_port(), _free_port(), ports, dict(ports))
            if proxy:
                from aioproducer.testing.proxy import FaultProxy

                for name, port in ports.items():
                    fp = FaultProxy(("127.0.0.1", port), port=_free_port(), kafka_frames=not name.endswith("SSL"))
                    node.proxies[name] = fp
                    node.advertised_ports[name] = fp.port
            nodes.append(node)
        return nodes

    def _plan_controller(self) -> _Node:
        """A controller-only node (id 100): stopping brokers then never costs the quorum."""
        directory = self._work / "controller"
        directory.mkdir()
        return _Node(_CONTROLLER_ID, directory, _free_port(), 0, {}, {})

    def _all_nodes(self) -> list[_Node]:
        """The brokers and, with ``dedicated_controller``, the controller."""
        return self._nodes + ([self._controller] if self._controller is not None else [])

    def _write_configs(self) -> None:
        """Every node's ``server.properties``: its own layout, then the cluster-wide properties.

        The cluster-wide ones (:meth:`_cluster_properties`, ``broker_config`` last) go to every
        node, the dedicated controller too: in KRaft the controller decides part of what a
        broker serves. It writes its own ``min.insync.replicas`` into the metadata as the
        cluster's default, which then overrides the brokers' static value (Kafka 4.x), it fills
        in a CreateTopics request's missing partition count and replication factor from its
        ``num.partitions`` and ``default.replication.factor``, and it fences a broker after its
        ``broker.session.timeout.ms``. A setting written to the brokers only would be silently
        ineffective there.
        """
        voters = ",".join(
            f"{n.node_id}@127.0.0.1:{n.controller_port}"
            for n in ([self._controller] if self._controller is not None else self._nodes)
        )
        (self._work / "log4j2-broker.properties").write_text(_LOG4J_BROKER)
        (self._work / "log4j2-tools.properties").write_text(_LOG4J_TOOLS)
        cluster = self._cluster_properties()
        for node in self._nodes:
            _write_properties(node.properties, {**self._node_properties(node, voters), **cluster})
        if self._controller is not None:
            c = self._controller
            layout = {
                "process.roles": "controller",
                "node.id": str(c.node_id),
                "controller.quorum.voters": voters,
                "listeners": f"CONTROLLER://127.0.0.1:{c.controller_port}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
                "controller.listener.names": "CONTROLLER",
                "log.dirs": str(c.directory / "data"),
            }
            _write_properties(c.properties, {**layout, **cluster})

    def _node_properties(self, node: _Node, voters: str) -> dict[str, str]:
        """A broker's (or combined node's) place in the cluster: role, id, listeners, storage, security."""
        combined = self._controller is None
        listeners = [f"CONTROLLER://127.0.0.1:{node.controller_port}"] if combined else []
        listeners += [f"INTERNAL://127.0.0.1:{node.internal_port}"]
        listeners += [f"{name}://127.0.0.1:{port}" for name, port in node.listener_ports.items()]
        advertised = [f"INTERNAL://127.0.0.1:{node.internal_port}"]
        advertised += [f"{name}://127.0.0.1:{port}" for name, port in node.advertised_ports.items()]
        protocol_map = ["CONTROLLER:PLAINTEXT", "INTERNAL:PLAINTEXT"] + [f"{n}:{n}" for n in self._listeners]
        props = {
            "process.roles": "broker,controller" if combined else "broker",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": ",".join(listeners),
            "advertised.listeners": ",".join(advertised),
            "listener.security.protocol.map": ",".join(protocol_map),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "INTERNAL",
            "log.dirs": str(node.directory / "data"),
        }
        props.update(self._security_properties())
        return props

    def _cluster_properties(self) -> dict[str, str]:
        """What every node gets, the dedicated controller included; ``broker_config`` overrides it."""
        combined = self._controller is None
        rf = str(min(3, self._brokers))
        isr = "2" if self._brokers >= 3 else "1"
        props = {
            "auto.create.topics.enable": "true",
            "num.partitions": "1",
            "default.replication.factor": rf,
            "min.insync.replicas": "1",
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": isr,
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": isr,
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
            "log.segment.bytes": "1048576",
            # Tests write records with create times from years ago: time-based
            # retention would delete them from under a long test session.
            "log.retention.ms": "-1",
            # Combined nodes are stopped together: none may wait for a controller that is stopping too.
            # A dedicated controller outlives the brokers, so they shut down the controlled way
            # (leaders handed over first), as in a rolling restart.
            "controlled.shutdown.enable": "false" if combined else "true",
            "initial.broker.registration.timeout.ms": "120000",
            # Fast failure detection and ISR changes for failover tests (the session timeout is
            # the controller's: it fences a broker that has not sent a heartbeat for that long).
            "replica.lag.time.max.ms": "5000",
            "broker.session.timeout.ms": "6000",
            "broker.heartbeat.interval.ms": "500",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.recovery.threads.per.data.dir": "1",
        }
        props.update(self._broker_config)
        return props

    def _security_properties(self) -> dict[str, str]:
        props: dict[str, str] = {}
        sasl = [name for name in self._listeners if name.startswith("SASL")]
        if sasl:
            props["sasl.enabled.mechanisms"] = ",".join(_SASL_MECHANISMS + (("GSSAPI",) if self._kerberos else ()))
            plain_users = " ".join(f'user_{u}="{p}"' for u, p in self._scram_users.items())
            for name in sasl:
                prefix = f"listener.name.{name.lower()}"
                props[f"{prefix}.plain.sasl.jaas.config"] = (
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
                )
                for mechanism in ("scram-sha-256", "scram-sha-512"):
                    props[f"{prefix}.{mechanism}.sasl.jaas.config"] = (
                        "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                    )
                props.update(self._oauthbearer_properties(prefix))
                if self._kerberos:
                    props[f"{prefix}.gssapi.sasl.jaas.config"] = (
                        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                        f'keyTab="{self._kerberos["broker_keytab"]}" principal="{self._kerberos["broker_principal"]}";'
                    )
                    props["sasl.kerberos.service.name"] = KERBEROS_SERVICE_NAME
        if self._tls:
            props.update({
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self._tls["broker_pem"]),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self._tls["ca"]),
                "ssl.client.auth": self._ssl_client_auth,
            })
        return props

    def _oauthbearer_properties(self, prefix: str) -> dict[str, str]:
        """OAUTHBEARER on one SASL listener: JWTs checked against the JWKS, or any unsecured token."""
        module = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
        if self._jwks_url is None:
            # Kafka's unsecured-token validator (the broker's default without a callback handler):
            # any principal, no signature; for tests only.
            return {f"{prefix}.oauthbearer.sasl.jaas.config": f'{module} required unsecuredLoginStringClaim_sub="admin";'}
        return {
            f"{prefix}.oauthbearer.sasl.jaas.config": f"{module} required;",
            f"{prefix}.oauthbearer.sasl.server.callback.handler.class":
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
            f"{prefix}.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": self._jwks_url,
            "sasl.oauthbearer.jwks.endpoint.url": self._jwks_url,
        }

    def _make_tls(self) -> dict[str, Path]:
        """A CA, a broker certificate for localhost/127.0.0.1 and a client certificate, all PEM."""
        openssl = require_tool("openssl", "to make the TLS certificates of the SSL listeners")
        d = self._work / "tls"
        d.mkdir()

        def run(*args: str) -> None:
            done = subprocess.run([openssl, *args], cwd=d, capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise KafkaStartError(f"openssl {' '.join(args[:2])} failed: {done.stderr.strip()}")

        run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=aioproducer-test-ca",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout", "ca.key", "-out", "ca.crt")
        for who, cn, san in (("broker", "localhost", "DNS:localhost,IP:127.0.0.1"), ("client", "client", "")):
            run("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={cn}",
                "-keyout", f"{who}.key", "-out", f"{who}.csr")
            ext = ["basicConstraints=CA:FALSE", "keyUsage=critical,digitalSignature,keyEncipherment",
                   "extendedKeyUsage=serverAuth,clientAuth", "subjectKeyIdentifier=hash",
                   "authorityKeyIdentifier=keyid,issuer"] + ([f"subjectAltName={san}"] if san else [])
            (d / f"{who}.ext").write_text("\n".join(ext) + "\n")
            run("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "3650", "-extfile", f"{who}.ext", "-out", f"{who}.crt")
        (d / "broker.pem").write_text((d / "broker.key").read_text() + (d / "broker.crt").read_text())
        return {"ca": d / "ca.crt", "broker_pem": d / "broker.pem",
                "client_cert": d / "client.crt", "client_key": d / "client.key"}

    def _tool(self, *args: str, timeout: float = 120) -> str:
        command = [self._java, "-Xmx256m", "-XX:TieredStopAtLevel=1", *self._archive.use(),
                   f"-Dlog4j2.configurationFile={self._work / 'log4j2-tools.properties'}", "-cp", classpath(self.libs), *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise KafkaStartError(f"{args[0]} {args[1]} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
        return done.stdout

    def _format(self) -> None:
        """Format every node's storage with one cluster id, in parallel (a JVM start each)."""
        cluster_id = _cluster_id()
        scram: list[str] = []
        for user, password in self._scram_users.items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                scram += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        if self.transaction_version is not None:
            scram += ["--feature", f"transaction.version={self.transaction_version}"]
        errors: list[BaseException] = []

        def format_node(node: _Node) -> None:
            try:
                self._tool("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(node.properties), *scram)
            except BaseException as exc:  # noqa: BLE001 - re-raised below in the caller's thread
                errors.append(exc)

        threads = [threading.Thread(target=format_node, args=(n,)) for n in self._all_nodes()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    # ------------------------------------------------------------- nodes

    def _node(self, node_id: int) -> _Node:
        if self._closed:
            raise RuntimeError("this KafkaCluster is closed")
        if not isinstance(node_id, int) or not 1 <= node_id <= self._brokers:
            raise ValueError(f"node id must be in 1..{self._brokers}, got {node_id!r}")
        return self._nodes[node_id - 1]

    def _launch(self, node: _Node) -> None:
        if node.process is not None and node.process.poll() is None:
            raise RuntimeError(f"broker {node.node_id} is already running")
        node.log_offset = node.log.stat().st_size if node.log.exists() else 0
        self._archive_ended(node)  # a JVM that ended on its own, not through _terminate
        if self._extra_classpath:  # the archive is of Kafka's classpath alone: map it, never make it
            archive, node.archive_dump = self._archive.use(), None
        else:
            archive, node.archive_dump = self._archive.use_or_make()
        command = [self._java, *self._jvm_options, *archive,
                   f"-Dlog4j2.configurationFile={self._work / 'log4j2-broker.properties'}",
                   f"-Dkafka.logs.dir={node.directory / 'logs'}",
                   "-cp", os.pathsep.join((classpath(self.libs), *self._extra_classpath)), "kafka.Kafka",
                   str(node.properties)]
        main_thread = threading.current_thread() is threading.main_thread()
        with open(node.log, "ab") as log:
            node.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent if main_thread and sys.platform == "linux" else None,
            )

    def _wait_started(self, nodes: Iterable[_Node], timeout: float = _START_TIMEOUT_S) -> None:
        """Until every node logged ``Kafka Server started`` since its launch, or its JVM died."""
        waiting = list(nodes)
        deadline = time.monotonic() + timeout
        while waiting:
            for node in list(waiting):
                assert node.process is not None
                if node.process.poll() is not None:
                    raise KafkaStartError(
                        f"broker {node.node_id} exited with {node.process.returncode} while starting; "
                        f"its log ends with:\n{node.log_tail()}"
                    )
                with open(node.log, "rb") as f:
                    f.seek(node.log_offset)
                    if _STARTED.search(f.read().decode(errors="replace")):
                        waiting.remove(node)
            if waiting and time.monotonic() > deadline:
                node = waiting[0]
                raise KafkaStartError(
                    f"broker {node.node_id} did not start within {timeout:.0f} s; its log ends with:\n"
                    f"{node.log_tail()}"
                )
            if waiting:
                time.sleep(0.1)  # polling a log file written by another process; nothing to wait on

    def start_all(self) -> None:
        """Start every node that is not running, then wait until Metadata lists all brokers."""
        with self._lock:
            stopped = [n for n in self._all_nodes() if n.process is None or n.process.poll() is not None]
            for node in stopped:
                self._launch(node)
        self._wait_started(stopped)
        self.wait_for_brokers(set(range(1, self._brokers + 1)))

    def start_broker(self, node_id: int) -> None:
        """Start a stopped or killed node again (same ports, same data) and wait until it serves."""
        node = self._node(node_id)
        with self._lock:
            self._launch(node)
        self._wait_started([node])
        self.wait_for_brokers({node_id} | self.running_brokers())

    def restart_on_new_ports(self) -> None:
        """Stop every broker, give each client listener a new port, start them again; wait until they serve.

        The same node ids, data and cluster id: the cluster moved, as behind a load balancer or a
        DNS alias re-pointed (the rebootstrap tests put a FaultProxy there). Clients that knew the
        old ports find nothing there; the internal listener (:meth:`read`, the admin calls) keeps its port.
        """
        if any(node.proxies for node in self._nodes):
            raise RuntimeError("restart_on_new_ports needs proxy=False: the proxies would hide the move")
        self._terminate(self._nodes, signal.SIGTERM)
        for node in self._nodes:
            node.listener_ports = {name: _free_port() for name in self._listeners}
            node.advertised_ports = dict(node.listener_ports)
        self._write_configs()
        self.start_all()

    def stop_broker(self, node_id: int) -> None:
        """SIGTERM: the node shuts down cleanly (closing its connections); SIGKILL after 20 s."""
        self._terminate([self._node(node_id)], signal.SIGTERM)

    def kill_broker(self, node_id: int) -> None:
        """SIGKILL: the node dies at once, mid-request, leaving connections to time out or reset."""
        self._terminate([self._node(node_id)], signal.SIGKILL)

    def pause_broker(self, node_id: int, timeout: float = 10.0) -> None:
        """SIGSTOP: the node hangs (connections stay open, nothing is answered) until resumed.

        Returns once every thread of the JVM is stopped. ``kill`` returns before that: on this
        project's 2-core CI machines the last of a broker's ~90 threads stopped up to 8 ms later
        (measured by polling ``/proc``), long enough for it to answer a request sent in between.
        """
        node = self._node(node_id)
        self._signal(node, signal.SIGSTOP)
        assert node.process is not None
        _wait_all_threads_stopped(node.process.pid, timeout)

    def resume_broker(self, node_id: int) -> None:
        """SIGCONT after :meth:`pause_broker`."""
        self._signal(self._node(node_id), signal.SIGCONT)

    def _signal(self, node: _Node, signum: int) -> None:
        if node.process is None or node.process.poll() is not None:
            raise RuntimeError(f"broker {node.node_id} is not running")
        node.process.send_signal(signum)

    def running_brokers(self) -> set[int]:
        """Ids of the nodes whose JVM is alive (paused ones included)."""
        return {n.node_id for n in self._nodes if n.process is not None and n.process.poll() is None}

    # ------------------------------------------------------------- admin

    def _admin(self) -> Any:
        try:
            from confluent_kafka.admin import AdminClient
        except ImportError as exc:
            raise KafkaUnavailableError(
                "KafkaCluster uses confluent-kafka's admin client: pip install 'aioproducer[testing]'"
            ) from exc
        # The internal listener: reachable even when the client listeners are proxied or need TLS/SASL.
        servers = ",".join(f"127.0.0.1:{n.internal_port}" for n in self._nodes)
        return AdminClient({"bootstrap.servers": servers, "log_level": 2, "socket.timeout.ms": 10000})

    def wait_for_brokers(self, broker_ids: set[int], timeout: float = _START_TIMEOUT_S) -> None:
        """Until Metadata from the cluster lists exactly ``broker_ids`` (registered and unfenced)."""
        admin = self._admin()
        deadline = time.monotonic() + timeout
        seen: set[int] = set()
        while True:
            try:
                seen = set(admin.list_topics(timeout=5).brokers)
            except Exception:  # noqa: BLE001 - not ready yet: retried until the deadline
                seen = set()
            if seen == broker_ids:
                return
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- broker {n.node_id}:\n{n.log_tail(15)}" for n in self._nodes)
                raise KafkaStartError(f"Metadata lists brokers {sorted(seen)}, expected {sorted(broker_ids)}:\n{tails}")
            time.sleep(0.2)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int | None = None,
        config: Mapping[str, object] | None = None,
    ) -> None:
        """Create ``name`` and wait until every partition's leader serves it."""
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        if partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {partitions}")
        rf = self._replication_factor if replication_factor is None else replication_factor
        if not 1 <= rf <= self._brokers:
            raise ValueError(f"replication_factor must be in 1..{self._brokers}, got {rf}")
        admin = self._admin()
        topic = NewTopic(name, partitions, rf, config={k: _property_value(v) for k, v in (config or {}).items()})
        admin.create_topics([topic])[name].result(timeout=60)
        self._wait_writable(name, partitions)

    def _wait_writable(self, topic: str, partitions: int, timeout: float = 60.0) -> None:
        """Until every partition's leader answers ListOffsets for it.

        Metadata names a leader before that broker has created the partition's
        log; a first Produce then gets NOT_LEADER_OR_FOLLOWER. A test that
        writes right after creating a topic should not start with that race.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                if len(self.high_watermarks(topic)) == partitions:
                    return
            except Exception:  # noqa: BLE001 - not ready yet: retried until the deadline
                pass
            if time.monotonic() > deadline:
                raise KafkaStartError(f"topic {topic!r}: not every partition is writable after {timeout:.0f} s")
            time.sleep(0.05)

    def set_client_quota(self, client_id: str, *, producer_byte_rate: int | None) -> None:
        """Set (or, with ``None``, remove) the ``producer_byte_rate`` quota of ``client_id`` (bytes/s, every broker).

        Through Kafka's own ``kafka-configs`` tool class from the cluster's jars (an
        AlterClientQuotas request; confluent-kafka's admin client has no such call), so it
        costs a JVM start, a few seconds. Returns once the controller committed the quota;
        each broker applies it when the metadata reaches it, moments later: a test that
        waits for a throttled answer waits for that too. A broker past the quota answers
        with ``throttle_time_ms`` and holds the connection for that long (KIP-219).
        """
        if not isinstance(client_id, str) or not client_id:
            raise ValueError(f"client_id must be a non-empty string, got {client_id!r}")
        if producer_byte_rate is not None and (
            isinstance(producer_byte_rate, bool) or not isinstance(producer_byte_rate, int) or producer_byte_rate < 1
        ):
            raise ValueError(f"producer_byte_rate must be a positive int or None, got {producer_byte_rate!r}")
        change = (
            ["--delete-config", "producer_byte_rate"]
            if producer_byte_rate is None
            else ["--add-config", f"producer_byte_rate={producer_byte_rate}"]
        )
        self._tool(
            "kafka.admin.ConfigCommand", "--bootstrap-server", self.internal_bootstrap_servers, "--alter",
            "--entity-type", "clients", "--entity-name", client_id, *change,
        )

    def set_client_metrics(
        self, name: str, *, metrics: Sequence[str], interval_ms: int, match: Mapping[str, str] | None = None,
    ) -> None:
        """Create or replace the client-metrics subscription ``name`` (KIP-714), through ``kafka-configs``.

        ``metrics`` are the metric name prefixes the matching clients push (``["*"]``: all),
        ``interval_ms`` their push interval (100 ms at least), ``match`` the client selectors
        (``{"client_id": "telemetry-.*"}``, regular expressions; none: every client). Only
        clients that ask for their subscription after the change see it. A JVM start, a few seconds.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if isinstance(metrics, str) or not all(isinstance(m, str) and "," not in m for m in metrics):
            raise ValueError(f"metrics must be a sequence of prefixes without ',', got {metrics!r}")
        if isinstance(interval_ms, bool) or not isinstance(interval_ms, int) or interval_ms < 100:
            raise ValueError(f"interval_ms must be an int >= 100, got {interval_ms!r}")
        selectors = ",".join(f"{key}={value}" for key, value in (match or {}).items())
        settings = f"metrics=[{','.join(metrics)}],interval.ms={interval_ms}"
        if selectors:
            settings += f",match=[{selectors}]"
        self._tool(
            "kafka.admin.ConfigCommand", "--bootstrap-server", self.internal_bootstrap_servers, "--alter",
            "--entity-type", "client-metrics", "--entity-name", name, "--add-config", settings,
        )

    async def read(
        self,
        topic: str,
        *,
        count: int | None = None,
        timeout: float = 10.0,
        isolation_level: str = "read_uncommitted",
    ) -> list[ConsumerRecord]:
        """The records of ``topic``, every partition, sorted by (partition, offset): no second client needed.

        Read through the brokers' internal PLAINTEXT listener (the admin calls'),
        so it works whatever the client listeners need (TLS, SASL) or suffer (a
        :class:`~aioproducer.testing.proxy.FaultProxy`). ``count=None`` reads up to
        each partition's end offset as of the call (the high watermark; the last
        stable offset under ``read_committed``, which also drops aborted
        transactions); ``count=n`` waits until at least ``n`` records are there
        (then returns all up to the end offsets of that moment, so possibly more
        than ``n``) and raises :class:`~aioproducer.errors.KafkaTimeoutError` after
        ``timeout`` seconds. See :func:`aioproducer.testing.readback.read_topic`.
        """
        from aioproducer.testing.readback import check_read_arguments, read_topic

        check_read_arguments(topic, count, timeout, isolation_level)
        if self._closed:
            raise RuntimeError("this KafkaCluster is closed")
        return await read_topic(
            self.internal_bootstrap_servers, topic, count=count, timeout=timeout, isolation_level=isolation_level
        )

    def partition_leader(self, topic: str, partition: int) -> int:
        """The node id leading ``topic``/``partition`` now (-1: none)."""
        md = self._admin().list_topics(topic=topic, timeout=10)
        leader: int = md.topics[topic].partitions[partition].leader
        return leader

    def high_watermarks(self, topic: str) -> dict[int, int]:
        """``{partition: high watermark}`` for every partition of ``topic`` (read_uncommitted)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": ",".join(f"127.0.0.1:{n.internal_port}" for n in self._nodes),
                             "group.id": "aioproducer-kafkacluster", "log_level": 2})
        try:
            md = consumer.list_topics(topic, timeout=10)
            result = {}
            for p in md.topics[topic].partitions:
                _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                result[p] = high
            return result
        finally:
            consumer.close()

    # ---------------------------------------------------------- addresses

    @property
    def bootstrap_servers(self) -> str:
        """The first client listener of every node, ``127.0.0.1:port,...`` (the proxies' with ``proxy=True``)."""
        return self.bootstrap_servers_for(self._listeners[0])

    def bootstrap_servers_for(self, listener: str) -> str:
        """Bootstrap servers of ``listener`` (one of the ``listeners`` given)."""
        if listener not in self._listeners:
            raise ValueError(f"this cluster has listeners {self._listeners}, not {listener!r}")
        return ",".join(f"127.0.0.1:{n.advertised_ports[listener]}" for n in self._nodes)

    @property
    def internal_bootstrap_servers(self) -> str:
        """The brokers' own PLAINTEXT listener, never proxied: for reading back what a faulty network let through."""
        return ",".join(f"127.0.0.1:{n.internal_port}" for n in self._nodes)

    def proxy(self, node_id: int, listener: str | None = None) -> FaultProxy:
        """The :class:`FaultProxy` in front of ``node_id``'s ``listener`` (default: the first); needs ``proxy=True``."""
        node = self._node(node_id)
        name = listener or self._listeners[0]
        if name not in node.proxies:
            raise ValueError(f"no proxy for broker {node_id} listener {name!r}: create the cluster with proxy=True")
        return node.proxies[name]

    @property
    def broker_ids(self) -> list[int]:
        """The node ids, ``[1, ..., brokers]``."""
        return list(range(1, self._brokers + 1))

    @property
    def listeners(self) -> tuple[str, ...]:
        """The client listeners, in the order given."""
        return self._listeners

    def _tls_file(self, key: str) -> str:
        if not self._tls:
            raise ValueError("this cluster has no SSL listener, so no certificates")
        return str(self._tls[key])

    @property
    def ca_file(self) -> str:
        """PEM of the CA that signed the brokers' (and the client's) certificates."""
        return self._tls_file("ca")

    @property
    def client_cert_file(self) -> str:
        """PEM certificate for mutual TLS, signed by :attr:`ca_file`."""
        return self._tls_file("client_cert")

    @property
    def client_key_file(self) -> str:
        """Unencrypted PKCS#8 PEM key of :attr:`client_cert_file`."""
        return self._tls_file("client_key")

    @property
    def krb5_conf(self) -> str:
        """The realm's ``krb5.conf`` (``sasl_mechanism="GSSAPI"``): a client's ``KRB5_CONFIG``."""
        return str(self._kerberos_kdc().krb5_conf)

    def _kerberos_kdc(self) -> Kdc:
        if self.kdc is None:
            raise ValueError("this cluster has no KDC: create it with sasl_mechanism='GSSAPI'")
        return self.kdc

    def gssapi_config(self, principal: str | None = None, keytab: str | None = None) -> dict[str, str]:
        """A producer's settings for the GSSAPI listener, as a Java client would give them.

        The client principal and keytab the cluster made, unless ``principal`` and ``keytab`` say
        otherwise (another principal of :attr:`kdc`). The process needs ``KRB5_CONFIG`` set to
        :attr:`krb5_conf` before the first Kerberos call.
        """
        self._kerberos_kdc()
        principal = principal or self._kerberos["client_principal"]
        keytab = keytab or self._kerberos["client_keytab"]
        return {
            "bootstrap.servers": self.bootstrap_servers_for("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": KERBEROS_SERVICE_NAME,
            "sasl.jaas.config": (
                "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                f'keyTab="{keytab}" principal="{principal}";'
            ),
        }

    def broker_log(self, node_id: int) -> str:
        """The whole log of node ``node_id`` so far (every start of it)."""
        return self._node(node_id).log.read_text(errors="replace")

    # ------------------------------------------------------------- close

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop every node (SIGTERM together, SIGKILL after 20 s), close the proxies, delete the files."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # Brokers first, the dedicated controller (if any) last: a broker's controlled shutdown needs it.
        self._terminate([n for n in getattr(self, "_nodes", [])])
        if getattr(self, "_controller", None) is not None:
            assert self._controller is not None
            self._terminate([self._controller])
        for node in getattr(self, "_nodes", []):
            for fp in node.proxies.values():
                fp.close()
        if getattr(self, "kdc", None) is not None:
            assert self.kdc is not None
            self.kdc.close()
        shutil.rmtree(self._work, ignore_errors=True)
        _live.discard(self)

    def _terminate(self, nodes: list[_Node], signum: int = signal.SIGTERM) -> None:
        """Signal ``nodes`` together, SIGKILL those still alive after 20 s, and reap them."""
        with self._lock:
            running = [n for n in nodes if n.process is not None and n.process.poll() is None]
            for node in running:
                assert node.process is not None
                node.process.send_signal(signal.SIGCONT)  # a paused JVM cannot handle SIGTERM
                node.process.send_signal(signum)
        deadline = time.monotonic() + _STOP_TIMEOUT_S
        for node in running:
            assert node.process is not None
            try:
                node.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait()
        for node in nodes:
            self._archive_ended(node)

    def _archive_ended(self, node: _Node) -> None:
        """If ``node``'s JVM was to write the class-data archive and has ended, put it in place (or drop it)."""
        if node.archive_dump is not None and node.process is not None and node.process.poll() is not None:
            self._archive.made(node.archive_dump, node.process.returncode)
            node.archive_dump = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        import asyncio

        await asyncio.to_thread(self.close)

    def __repr__(self) -> str:
        state = "closed" if self._closed else self.bootstrap_servers
        return f"<KafkaCluster {self.version} brokers={self._brokers} {state}>"


def _cluster_id() -> str:
    """A random cluster id as Kafka writes them: a UUID in URL-safe base64, 22 characters.

    Like Kafka's ``Uuid.randomUuid``, never one starting with ``-``: the storage tool's
    argument parser would read it as an option ("expected one argument"), 1 start in 64.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _check_broker_config(broker_config: Mapping[str, object] | None) -> None:
    """Refuse a ``broker_config`` key that :class:`KafkaCluster` sets per node (see :data:`_NODE_LAYOUT`)."""
    layout = sorted(set(broker_config or {}) & _NODE_LAYOUT)
    if layout:
        raise ValueError(
            f"broker_config may not set {', '.join(map(repr, layout))}: KafkaCluster sets each node's role, id, "
            "ports and storage itself, and broker_config is written to every node, the controller included"
        )


def _write_properties(path: Path, props: Mapping[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def _property_value(value: object) -> str:
    """A Python value as a properties-file value (``True`` -> ``true``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# ---------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m aioproducer.testing.kafka``: run a cluster in the foreground.

    Prints ``bootstrap.servers=...`` (flushed, the first line of stdout) once the
    cluster serves, then runs until SIGTERM/SIGINT or, with
    ``--until-stdin-eof``, until stdin closes; the nodes are stopped either way.
    """
    import argparse

    from aioproducer.testing._cli import topic_spec, wait_for_stop

    parser = argparse.ArgumentParser(
        prog="python -m aioproducer.testing.kafka",
        description="Run real Apache Kafka brokers (KRaft, from Maven Central) and print their bootstrap servers.",
    )
    parser.add_argument("--brokers", type=int, default=1, help="number of nodes (ids 1..N)")
    parser.add_argument("--topic", type=topic_spec, action="append", default=[], metavar="NAME:PARTITIONS",
                        help="create a topic up front (repeatable)")
    parser.add_argument("--replication-factor", type=int, default=None, help="default: min(3, brokers)")
    parser.add_argument("--version", default=DEFAULT_KAFKA_VERSION, help="Kafka release (kafka_2.13 on Maven Central)")
    parser.add_argument("--listener", action="append", choices=LISTENERS, default=None,
                        help="client listeners (repeatable; default PLAINTEXT)")
    parser.add_argument("--scram-user", action="append", default=[], metavar="NAME:PASSWORD",
                        help="a SASL user for PLAIN and SCRAM (repeatable)")
    parser.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a property on every node, the controller too (repeatable)")
    parser.add_argument("--throughput", action="store_true",
                        help="both of the JIT's compilers (SERVER_JVM_OPTIONS), for a benchmark's broker; "
                             "default: a quick start, C1 only")
    parser.add_argument("--until-stdin-eof", action="store_true",
                        help="also stop when stdin reaches end of file (the parent closed the pipe)")
    args = parser.parse_args(argv)
    try:
        cluster = KafkaCluster(
            brokers=args.brokers,
            topics=dict(args.topic),
            version=args.version,
            listeners=tuple(args.listener or ("PLAINTEXT",)),
            scram_users=dict(u.split(":", 1) for u in args.scram_user),
            broker_config=dict(c.split("=", 1) for c in args.broker_config),
            replication_factor=args.replication_factor,
            jvm_options=SERVER_JVM_OPTIONS if args.throughput else QUICK_START_JVM_OPTIONS,
        )
    except (ValueError, KafkaUnavailableError, KafkaStartError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        lines = [f"bootstrap.servers={cluster.bootstrap_servers}"]
        lines += [f"{name}={cluster.bootstrap_servers_for(name)}" for name in cluster.listeners[1:]]
        if any(n.endswith("SSL") for n in cluster.listeners):
            lines.append(f"ca_file={cluster.ca_file}")
        wait_for_stop(args.until_stdin_eof, lines)
    finally:
        cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
