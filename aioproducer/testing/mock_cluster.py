"""MockCluster: an in-process Kafka cluster for tests, borrowed from librdkafka.

Theory of operation. librdkafka contains a mock Kafka broker (``rdkafka_mock.c``)
that speaks the real wire protocol on localhost sockets, keeps partition logs in
memory and lets a test inject faults: brokers going down, extra round-trip time,
error codes returned for the next N requests of an API, leader moves. It is the
closest thing to a broker that starts in milliseconds and needs no JVM, and,
because it was written by other people against the Kafka protocol spec, it is an
*independent* check of aioproducer's encoders and its retry logic.

A mock cluster hangs off an ``rd_kafka_t`` handle that is only used for
bookkeeping; librdkafka runs the brokers on a thread of its own, so the cluster
serves clients in the same process (including asyncio ones on the main thread)
and in other processes alike. Every control call below is synchronous and
thread-safe: librdkafka hands it to the mock thread and waits for the result.

Topics. ``topics`` given to the constructor, and :meth:`MockCluster.create_topic`,
create topics up front with an explicit partition count. Besides, the mock
auto-creates a topic the first time a *Metadata* request names it with
``allow_auto_topic_creation`` set (the default of most clients), with librdkafka's
mock defaults: 4 partitions and ``min(3, brokers)`` replicas. A *Produce* request
to a topic that does not exist is answered ``UNKNOWN_TOPIC_OR_PARTITION`` and
creates nothing. Create topics explicitly when a test depends on the partition
count.

What the mock does and does not check (librdkafka 2.16, measured):

- Partition leaders are picked *at random* among the replicas. A test that
  cares which broker leads a partition sets it with :meth:`set_partition_leader`,
  before its client fetches metadata.
- Produce: only magic-2 record batches are accepted (older magic:
  ``UNSUPPORTED_VERSION``); the CRC is *not* verified; a non-leader answers
  ``NOT_LEADER_OR_FOLLOWER``. Producer id, epoch and sequence numbers are only
  validated for *transactional* producers (``DUPLICATE_SEQUENCE_NUMBER``,
  ``OUT_OF_ORDER_SEQUENCE_NUMBER``, ``INVALID_PRODUCER_EPOCH``); an idempotent,
  non-transactional producer's sequences are appended unchecked. So under injected
  errors such a producer's retried batches can land out of order per key (or twice)
  where a real broker refuses them and keeps the order: ordering and no-duplicate
  guarantees under faults are proven on :class:`~aioproducer.testing.KafkaCluster`,
  not on the mock.
- ApiVersions is served up to v2 only; a v3+ request is answered with
  ``UNSUPPORTED_VERSION`` and a v0 body, as KIP-511 prescribes.
- Consumer-group offsets: OffsetFetch is served up to v6 (no ``RequireStable``,
  which needs v7); TxnOffsetCommit is checked and answered but stores nothing,
  so offsets committed in a transaction never read back (OffsetFetch answers
  -1); offsets committed with OffsetCommit (a consumer's ``commit()``) do.
- :meth:`broker_down` closes the broker's open connections at once and its
  listener refuses new ones; Metadata from the other brokers then omits the
  down broker while still naming it as the leader of its partitions.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Self

from aioproducer.testing import _librdkafka as _rd
from aioproducer.testing._librdkafka import LibrdkafkaError

if TYPE_CHECKING:
    from aioproducer.testing.readback import ConsumerRecord

__all__ = ["LibrdkafkaError", "MockCluster", "MockClusterClosedError", "MockRequest"]


#: The signals a program handles (SIGINT, SIGTERM, ...): every one but those the kernel sends to
#: the thread that faulted, which must stay deliverable.
_ASYNC_SIGNALS = signal.valid_signals() - {
    signal.SIGSEGV,
    signal.SIGBUS,
    signal.SIGFPE,
    signal.SIGILL,
    signal.SIGTRAP,
    signal.SIGSYS,
    signal.SIGABRT,
    signal.SIGKILL,
    signal.SIGSTOP,
}


@contextlib.contextmanager
def _signals_blocked() -> Iterator[None]:
    """Block the process's signals in the calling thread, so the threads started meanwhile are born blocking them.

    librdkafka's mock thread does not block signals itself. The kernel may hand a process's
    SIGTERM or SIGINT to it; then the mock thread's ``poll`` is interrupted and it stops
    serving (the CLI then hung in ``close()``, about one run in six under load), and
    Python's own handler is only flagged, not run. Born blocking them, it never takes one.
    """
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _ASYNC_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class MockClusterClosedError(RuntimeError):
    """A method was called on a :class:`MockCluster` after :meth:`~MockCluster.close`.

    The C handles are freed by then; calling into them would crash the process,
    so the Python object refuses instead.
    """


@dataclass(frozen=True, slots=True)
class MockRequest:
    """One request a mock broker received while request tracking was on.

    ``timestamp_us`` is librdkafka's monotonic clock (``rd_clock()``) in
    microseconds at arrival: meaningful for ordering and for the distance
    between two requests, not as wall-clock time.
    """

    broker_id: int
    api_key: int
    timestamp_us: int


class MockCluster:
    """A librdkafka mock Kafka cluster with ``brokers`` brokers (ids ``1..brokers``).

    Use as a context manager (``with`` or ``async with``) or call :meth:`close`.
    ``replication_factor`` (``None``: ``min(3, brokers)``) is the default for the
    ``topics`` created here and for :meth:`create_topic`. ``debug`` is passed to
    librdkafka's ``debug`` property (e.g. ``"mock,protocol"``) and turns its
    logging on, to stderr; by default the cluster is silent.

    The mock checks sequence numbers for transactional producers only: under injected
    errors a non-transactional idempotent producer's retried batches are appended unchecked
    and can come out of order per key (or twice), where real Kafka keeps the order. Ordering
    and no-duplicate guarantees under faults are proven on
    :class:`~aioproducer.testing.KafkaCluster`, not here.
    """

    def __init__(
        self,
        brokers: int = 3,
        topics: Mapping[str, int] | None = None,
        replication_factor: int | None = None,
        *,
        debug: str | None = None,
    ) -> None:
        if brokers < 1:
            raise ValueError(f"a mock cluster needs at least one broker, got brokers={brokers}")
        self._broker_count = brokers
        self._default_replication_factor = self._check_replication_factor(
            min(3, brokers) if replication_factor is None else replication_factor
        )
        # Guards _rk/_mc against a close() racing a control call from another
        # thread (the CLI closes from a signal handler, tests from __del__).
        self._lock = threading.RLock()
        # Keep the library object: __del__ may run at interpreter shutdown when
        # the module global has already been cleared.
        self._lib = _rd.library()  # loaded here, on the first mock cluster: ConfluentKafkaMissingError without it
        self._rk: int | None = None
        self._mc: int | None = None
        # Cluster-level error stacks pushed so far, for clear_request_errors().
        self._pushed_api_keys: set[int] = set()
        # Requests recorded before the last stop_request_tracking() (see there).
        self._stopped_requests: list[MockRequest] = []
        with _signals_blocked():  # the threads made here inherit the mask
            self._rk = self._new_handle(debug)
            mc = self._lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        if not mc:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None
            raise RuntimeError(
                f"rd_kafka_mock_cluster_new(brokers={brokers}) failed: could not create the "
                "mock brokers (listening sockets on 127.0.0.1); pass debug='mock' for details"
            )
        self._mc = mc
        raw = self._lib.rd_kafka_mock_cluster_bootstraps(mc)
        self._bootstrap_servers: str = raw.decode("ascii")
        try:
            for name, partitions in (topics or {}).items():
                self.create_topic(name, partitions)
        except BaseException:
            self.close()
            raise

    def _new_handle(self, debug: str | None) -> int:
        """Create the ``rd_kafka_t`` the mock cluster is attached to.

        It is a producer with no ``bootstrap.servers``: it never connects
        anywhere, it only owns the mock thread. Its log is off unless ``debug``
        is given, since otherwise librdkafka warns about the missing bootstrap
        servers on every cluster created.
        """
        conf = self._lib.rd_kafka_conf_new()
        settings = {"client.id": "aioproducer-mock-cluster", "log_level": "0"}
        if debug:
            settings.update({"debug": debug, "log_level": "7"})
        errstr = ctypes.create_string_buffer(512)
        for key, value in settings.items():
            if (
                self._lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr, len(errstr))
                != _rd.RD_KAFKA_CONF_OK
            ):
                self._lib.rd_kafka_conf_destroy(conf)
                raise ValueError(f"rd_kafka_conf_set({key}={value!r}): {errstr.value.decode()}")
        rk = self._lib.rd_kafka_new(_rd.RD_KAFKA_PRODUCER, conf, errstr, len(errstr))
        if not rk:
            # On failure rd_kafka_new leaves the conf to the caller.
            self._lib.rd_kafka_conf_destroy(conf)
            raise RuntimeError(f"rd_kafka_new failed: {errstr.value.decode()}")
        return int(rk)

    def _check_replication_factor(self, replication_factor: int) -> int:
        if not 1 <= replication_factor <= self._broker_count:
            raise ValueError(
                f"replication_factor must be in 1..{self._broker_count} "
                f"(the number of brokers), got {replication_factor}"
            )
        return replication_factor

    def _handle(self) -> int:
        """The live cluster handle; the caller must hold ``self._lock``."""
        if self._mc is None:
            raise MockClusterClosedError("this MockCluster is closed")
        return self._mc

    @staticmethod
    def _check(call: str, code: int, detail: str = "") -> None:
        if code != 0:
            raise LibrdkafkaError(call, code, detail)

    # ------------------------------------------------------------ introspection

    @property
    def bootstrap_servers(self) -> str:
        """``"127.0.0.1:port,..."``, one listener per broker, for ``bootstrap.servers``."""
        with self._lock:
            self._handle()
            return self._bootstrap_servers

    @property
    def broker_ids(self) -> list[int]:
        """The broker ids, ``[1, ..., brokers]``, as the mock numbers them."""
        return list(range(1, self._broker_count + 1))

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._mc is None

    # ------------------------------------------------------------------- topics

    def create_topic(
        self, name: str, partitions: int = 1, replication_factor: int | None = None
    ) -> None:
        """Create ``name`` with ``partitions`` partitions, leaders spread over the brokers.

        Raises :class:`LibrdkafkaError` (``TOPIC_ALREADY_EXISTS``) if the topic
        exists, including one the mock auto-created on a Metadata request.
        """
        if partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {partitions}")
        rf = self._check_replication_factor(
            self._default_replication_factor if replication_factor is None else replication_factor
        )
        with self._lock:
            code = self._lib.rd_kafka_mock_topic_create(
                self._handle(), name.encode(), partitions, rf
            )
        self._check("rd_kafka_mock_topic_create", code, f"topic={name!r}")

    def set_partition_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Make ``broker_id`` the leader of ``topic``/``partition``.

        The next Metadata response shows the new leader; the old leader answers
        Produce for that partition with ``NOT_LEADER_OR_FOLLOWER``. The mock
        creates the topic if it does not exist. ``-1`` ("no leader") is refused:
        librdkafka 2.16's mock then crashes the whole process on the next Produce
        to the partition; take the leader's broker down instead (:meth:`broker_down`).
        """
        if broker_id not in self.broker_ids:
            raise ValueError(
                f"broker_id must be one of {self.broker_ids}, got {broker_id}"
                + (" (no leader: librdkafka's mock would crash on the next Produce; use broker_down())"
                   if broker_id == -1 else "")
            )
        with self._lock:
            code = self._lib.rd_kafka_mock_partition_set_leader(
                self._handle(), topic.encode(), partition, broker_id
            )
        self._check(
            "rd_kafka_mock_partition_set_leader",
            code,
            f"topic={topic!r} partition={partition} broker_id={broker_id}",
        )

    def set_topic_error(self, topic: str, code: int) -> None:
        """Report ``code`` for ``topic`` in Metadata responses (``0`` clears it).

        librdkafka only applies this to Metadata and AddPartitionsToTxn
        responses; Produce is unaffected.
        """
        with self._lock:
            self._lib.rd_kafka_mock_topic_set_error(self._handle(), topic.encode(), code)

    async def read(self, topic: str, *, count: int | None = None, timeout: float = 10.0) -> list[ConsumerRecord]:
        """The records of ``topic``, every partition, sorted by (partition, offset): no second client needed.

        ``count=None`` reads up to each partition's high watermark as of the call;
        ``count=n`` waits until at least ``n`` records are there (then returns all
        up to the high watermarks of that moment, so possibly more than ``n``) and
        raises :class:`~aioproducer.errors.KafkaTimeoutError` after ``timeout``
        seconds. See :func:`aioproducer.testing.readback.read_topic`. A closed
        cluster raises :class:`MockClusterClosedError` at once.
        """
        from aioproducer.testing.readback import check_read_arguments, read_topic

        check_read_arguments(topic, count, timeout, "read_uncommitted")
        return await read_topic(self.bootstrap_servers, topic, count=count, timeout=timeout)

    # ------------------------------------------------------------------ brokers

    def broker_down(self, broker_id: int) -> None:
        """Disconnect every client of ``broker_id`` and refuse new connections.

        Leadership does not move: partitions led by this broker stay
        unavailable until :meth:`broker_up` or :meth:`set_partition_leader`.
        """
        with self._lock:
            code = self._lib.rd_kafka_mock_broker_set_down(self._handle(), broker_id)
        self._check("rd_kafka_mock_broker_set_down", code, f"broker_id={broker_id}")

    def broker_up(self, broker_id: int) -> None:
        """Let ``broker_id`` accept connections again after :meth:`broker_down`."""
        with self._lock:
            code = self._lib.rd_kafka_mock_broker_set_up(self._handle(), broker_id)
        self._check("rd_kafka_mock_broker_set_up", code, f"broker_id={broker_id}")

    def set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of ``broker_id`` by ``rtt_ms`` milliseconds (``0``: none)."""
        with self._lock:
            code = self._lib.rd_kafka_mock_broker_set_rtt(self._handle(), broker_id, rtt_ms)
        self._check("rd_kafka_mock_broker_set_rtt", code, f"broker_id={broker_id}")

    # ----------------------------------------------------------- error injection

    def push_request_errors(self, api_key: int, *error_codes: int) -> None:
        """Fail the next ``len(error_codes)`` requests of ``api_key``, on any broker, in order.

        Each request gets the next code as its response's error code (in every
        partition, for Produce). ``0`` lets one request through; librdkafka's
        ``-195`` (``_TRANSPORT``) makes the broker drop the connection instead
        of answering. Codes add to those already pushed.
        """
        if not error_codes:
            return
        array = (ctypes.c_int * len(error_codes))(*error_codes)
        with self._lock:
            self._lib.rd_kafka_mock_push_request_errors_array(
                self._handle(), api_key, len(error_codes), array
            )
            self._pushed_api_keys.add(api_key)

    def push_broker_request_errors(
        self, broker_id: int, api_key: int, *errors_and_rtts: tuple[int, int]
    ) -> None:
        """Like :meth:`push_request_errors`, for one broker, each with a response delay.

        ``errors_and_rtts`` are ``(error_code, rtt_ms)`` pairs; ``(0, 500)``
        delays one response by 500 ms without failing it. A broker's own stack
        is consumed before the cluster-wide one, and
        :meth:`clear_request_errors` does not clear it.
        """
        if not errors_and_rtts:
            return
        varargs: list[ctypes.c_int] = []
        for code, rtt_ms in errors_and_rtts:
            varargs += [ctypes.c_int(code), ctypes.c_int(rtt_ms)]
        with self._lock:
            result = self._lib.rd_kafka_mock_broker_push_request_error_rtts(
                self._handle(), broker_id, api_key, len(errors_and_rtts), *varargs
            )
        self._check(
            "rd_kafka_mock_broker_push_request_error_rtts", result, f"broker_id={broker_id}"
        )

    def clear_request_errors(self, *api_keys: int) -> None:
        """Drop the not-yet-used cluster-wide errors pushed for ``api_keys`` (none given: all).

        Per-broker errors from :meth:`push_broker_request_errors` stay:
        librdkafka has no call that clears them.
        """
        with self._lock:
            handle = self._handle()
            keys: Iterable[int] = api_keys or sorted(self._pushed_api_keys)
            for api_key in keys:
                self._lib.rd_kafka_mock_clear_request_errors(handle, api_key)
            if not api_keys:
                self._pushed_api_keys.clear()

    # --------------------------------------------------------- request tracking

    def start_request_tracking(self) -> None:
        """Record every request any broker receives from now on (see :meth:`requests`)."""
        with self._lock:
            self._lib.rd_kafka_mock_start_request_tracking(self._handle())

    def stop_request_tracking(self) -> None:
        """Stop recording; what was recorded stays available until :meth:`clear_requests`.

        librdkafka 2.16 frees its request log when tracking stops (its header
        says it does not), so the log is copied to Python first and the C log
        cleared, which gives the same result on either behaviour.
        """
        with self._lock:
            handle = self._handle()
            self._stopped_requests += self._read_requests(handle)
            self._lib.rd_kafka_mock_stop_request_tracking(handle)
            self._lib.rd_kafka_mock_clear_requests(handle)

    def requests(self) -> list[MockRequest]:
        """The requests recorded so far, in arrival order (a copy; the log is kept)."""
        with self._lock:
            return self._stopped_requests + self._read_requests(self._handle())

    def _read_requests(self, handle: int) -> list[MockRequest]:
        """Copy librdkafka's request log; the caller holds ``self._lock``."""
        count = ctypes.c_size_t(0)
        array = self._lib.rd_kafka_mock_get_requests(handle, ctypes.byref(count))
        if not array:
            return []
        try:
            return [
                MockRequest(
                    broker_id=self._lib.rd_kafka_mock_request_id(array[i]),
                    api_key=self._lib.rd_kafka_mock_request_api_key(array[i]),
                    timestamp_us=self._lib.rd_kafka_mock_request_timestamp(array[i]),
                )
                for i in range(count.value)
            ]
        finally:
            self._lib.rd_kafka_mock_request_destroy_array(array, count.value)

    def clear_requests(self) -> None:
        """Forget the requests recorded so far (tracking stays on if it was)."""
        with self._lock:
            self._lib.rd_kafka_mock_clear_requests(self._handle())
            self._stopped_requests = []

    # ---------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Stop the brokers (clients see their connections close) and free everything.

        Idempotent. The mock cluster goes before its ``rd_kafka_t``, which it
        references.
        """
        with self._lock:
            mc, rk = self._mc, self._rk
            self._mc = self._rk = None
            if mc is not None:
                self._lib.rd_kafka_mock_cluster_destroy(mc)
            if rk is not None:
                self._lib.rd_kafka_destroy(rk)

    def __enter__(self) -> Self:
        self._handle()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self.__enter__()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # A forgotten cluster must not leak its thread and sockets, and a
        # half-constructed one (exception in __init__) must not crash here.
        try:
            if getattr(self, "_mc", None) is not None or getattr(self, "_rk", None) is not None:
                self.close()
        except Exception:  # noqa: BLE001 - nothing sensible to do in a finalizer
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else self._bootstrap_servers
        return f"<MockCluster brokers={self._broker_count} {state}>"
