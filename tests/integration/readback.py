"""Read a topic-partition back with independent Kafka consumers, for end-to-end tests.

Theory of operation. A producer test that only looks at what aioproducer's own
decoder makes of its own bytes proves nothing about the wire format: encoder
and decoder could share a mistake. The librdkafka mock cluster stores the
batches it is sent without looking inside them (it does not even check the
CRC), so reading a partition back with a consumer written by somebody else is
what checks the bytes. Three are at hand, each with its own record decoder:

* :func:`read_aiokafka` -- aiokafka's ``AIOKafkaConsumer`` (asyncio; Python/Cython decoder);
* :func:`read_kafka_python` -- kafka-python's ``KafkaConsumer`` (blocking; pure Python);
* :func:`read_confluent` -- confluent-kafka's ``Consumer`` (librdkafka, C).

Every reader assigns the partition directly and seeks (no consumer group, no
offset commits), collects ``count`` records starting at ``start_offset`` and
returns them as :class:`ReadRecord` tuples ``(offset, timestamp, key, value,
headers)`` with ``headers`` normalized to ``list[tuple[str, bytes | None]]``
(``[]`` when a record has none). Each read is bounded by ``count`` and by
``timeout`` seconds: it raises :class:`ReadbackTimeoutError` naming what it got
rather than hanging, and :class:`ReadbackError` (the library's error in
``.error``) when the consumer reports one, e.g. a failed CRC check. CRC
checking is on in all three (confluent-kafka's ``check.crcs`` defaults to off;
here it defaults to on).

:func:`read_with` picks a reader by name (:data:`CONSUMERS`) and runs the
blocking ones in a thread, so async tests can treat all three alike.
:func:`fetch_raw_records` sends one hand-written Fetch v4 request and returns
the partition's ``records`` bytes exactly as the broker holds them, for
checking aioproducer's own decoder on what came back over the wire.

A fourth reader, :func:`read_java` (and :func:`read_java_raw`, which also
returns the timestamp type and leader epoch), runs the Java ``KafkaConsumer``
of kafka-clients -- the reference decoder -- as a subprocess
(``tests/java/ReadTopic.java``, compiled once and cached). It is *not* in
:data:`CONSUMERS`, so the mock-cluster tests do not run it: it cannot read
from librdkafka's mock (2.16). The Java client opens with ApiVersions v4; the
mock answers UNSUPPORTED_VERSION with a flexible-format body whose array
count is off by one (bytes ``00 23 01 00 12 00 00 00 02 00 00 00 00``), which
the Java client parses, without error, as v4 with zero API keys and a
``throttle_time_ms`` of 1,179,648 (the ``00 12 00 00`` of the ApiVersions
entry). Its v0 retry succeeds, but the node stays throttled for ~20 minutes,
so no Metadata request is ever sent and every read times out. Declaring
ApiVersions v3+ on the mock (``rd_kafka_mock_set_apiversion``) does not help:
its v3 answer is malformed too (Java: "Tried to allocate a collection of size
402653184"; aioproducer's own client: "tagged field 0 out of order"). So the
Java reader is for real brokers: :data:`REAL_BROKER_CONSUMERS` is every
reader, Java included, and :func:`read_with` accepts ``"java"``
(:data:`JAVA_CONSUMER`). A read costs one JVM start (about a second).
"""

from __future__ import annotations

import asyncio
import base64
import functools
import importlib
import json
import os
import shutil
import struct
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, cast

__all__ = [
    "CONSUMERS",
    "JAVA_CONSUMER",
    "REAL_BROKER_CONSUMERS",
    "JavaError",
    "JavaRecord",
    "JavaUnavailableError",
    "ReadRecord",
    "ReadbackError",
    "ReadbackTimeoutError",
    "fetch_raw_records",
    "java_reader_command",
    "kafka_libs_dir",
    "read_all_records",
    "read_all_values",
    "read_topic_aiokafka",
    "read_isolated",
    "read_aiokafka",
    "read_confluent",
    "read_java",
    "read_java_raw",
    "read_kafka_python",
    "read_with",
]

Headers = list[tuple[str, bytes | None]]

#: How long one poll may block: short, so the overall ``timeout`` is respected closely.
_POLL_S = 0.5


class ReadRecord(NamedTuple):
    """One record as a consumer delivered it. ``timestamp`` is in ms (create or log-append time)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers


class ReadbackError(Exception):
    """The consumer reported an error instead of a record; the library's error object is ``error``."""

    def __init__(self, message: str, error: object) -> None:
        super().__init__(message)
        self.error = error


class ReadbackTimeoutError(TimeoutError):
    """Fewer than ``count`` records arrived within the timeout; ``records`` holds those that did."""

    def __init__(self, message: str, records: list[ReadRecord]) -> None:
        super().__init__(message)
        self.records = records


def _headers(raw: Any) -> Headers:
    """Normalize a library's headers (None, tuple or list of pairs) to a list of (str, bytes|None)."""
    out: Headers = []
    for key, value in raw or ():
        out.append(
            (key.decode() if isinstance(key, bytes) else str(key), None if value is None else bytes(value))
        )
    return out


def _timeout_error(
    consumer: str, topic: str, partition: int, start: int, count: int, got: list[ReadRecord], timeout: float
) -> ReadbackTimeoutError:
    last = f", last offset {got[-1].offset}" if got else ""
    return ReadbackTimeoutError(
        f"{consumer}: read {len(got)} of {count} records from {topic}-{partition} "
        f"starting at offset {start} within {timeout} s{last}",
        got,
    )


# ------------------------------------------------------------------ aiokafka


async def read_aiokafka(
    bootstrap_servers: str,
    topic: str,
    partition: int,
    *,
    count: int,
    start_offset: int = 0,
    timeout: float = 10.0,
    check_crcs: bool = True,
) -> list[ReadRecord]:
    """Read ``count`` records from ``start_offset`` with aiokafka (``group_id=None``, assign + seek)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.errors import KafkaError

    deadline = time.monotonic() + timeout
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        check_crcs=check_crcs,
        request_timeout_ms=max(1000, int(timeout * 1000)),
    )
    got: list[ReadRecord] = []
    try:
        await asyncio.wait_for(consumer.start(), timeout)
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, start_offset)
        while len(got) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timeout_error("aiokafka", topic, partition, start_offset, count, got, timeout)
            try:
                batch = await consumer.getmany(tp, timeout_ms=int(min(remaining, _POLL_S) * 1000) or 1)
            except KafkaError as exc:
                raise ReadbackError(f"aiokafka reading {topic}-{partition}: {exc!r}", exc) from exc
            for m in batch.get(tp, ()):
                got.append(ReadRecord(m.offset, m.timestamp, m.key, m.value, _headers(m.headers)))
    finally:
        await consumer.stop()
    return got[:count]


# -------------------------------------------------------------- kafka-python


def read_kafka_python(
    bootstrap_servers: str,
    topic: str,
    partition: int,
    *,
    count: int,
    start_offset: int = 0,
    timeout: float = 10.0,
    check_crcs: bool = True,
    api_version: tuple[int, ...] | None = None,
) -> list[ReadRecord]:
    """Read ``count`` records from ``start_offset`` with kafka-python 2.2 (blocking; assign + seek).

    ``api_version=None`` lets kafka-python probe the broker; against the
    librdkafka mock it settles on (2, 4), and every explicit version from
    (0, 10, 0) to (4, 0) reads magic-2 batches just as well.
    """
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        check_crcs=check_crcs,
        api_version=api_version,
        api_version_auto_timeout_ms=max(1000, int(timeout * 1000)),
    )
    got: list[ReadRecord] = []
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, start_offset)
        while len(got) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timeout_error("kafka-python", topic, partition, start_offset, count, got, timeout)
            try:
                polled = consumer.poll(timeout_ms=int(min(remaining, _POLL_S) * 1000) or 1)
            except KafkaError as exc:
                raise ReadbackError(f"kafka-python reading {topic}-{partition}: {exc!r}", exc) from exc
            for m in polled.get(tp, ()):
                got.append(ReadRecord(m.offset, m.timestamp, m.key, m.value, _headers(m.headers)))
    finally:
        consumer.close(autocommit=False)
    return got[:count]


# ------------------------------------------------------------ confluent-kafka


def read_confluent(
    bootstrap_servers: str,
    topic: str,
    partition: int,
    *,
    count: int,
    start_offset: int = 0,
    timeout: float = 10.0,
    check_crcs: bool = True,
) -> list[ReadRecord]:
    """Read ``count`` records from ``start_offset`` with confluent-kafka (blocking; assign at an offset).

    ``group.id`` is required by librdkafka's consumer even when nothing is
    committed; no group is joined since the partition is assigned directly.
    An error event (``msg.error()``, e.g. ``_BAD_MSG`` for a failed CRC)
    raises :class:`ReadbackError` with the ``confluent_kafka.KafkaError``.
    """
    from confluent_kafka import Consumer, TopicPartition

    deadline = time.monotonic() + timeout
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": "aioproducer-readback",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "check.crcs": check_crcs,
        }
    )
    got: list[ReadRecord] = []
    try:
        consumer.assign([TopicPartition(topic, partition, start_offset)])
        while len(got) < count:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _timeout_error("confluent-kafka", topic, partition, start_offset, count, got, timeout)
            for m in consumer.consume(count - len(got), timeout=min(remaining, _POLL_S)):
                err = m.error()
                if err is not None:
                    raise ReadbackError(f"confluent-kafka reading {topic}-{partition}: {err}", err)
                _ts_type, ts = m.timestamp()
                offset = m.offset()
                assert offset is not None  # a consumed record has one
                got.append(ReadRecord(offset, ts, m.key(), m.value(), _headers(m.headers())))
    finally:
        consumer.close()
    return got[:count]


# ---------------------------------------------------------------- Java

#: The Java reader's name in :func:`read_with` (not a key of :data:`CONSUMERS`: see the module docstring).
JAVA_CONSUMER = "java"

#: ``tests/java``: ReadTopic.java and the log4j2 configuration that keeps the JVM's stdout for records.
_JAVA_DIR = Path(__file__).resolve().parent.parent / "java"
_READ_TOPIC = _JAVA_DIR / "ReadTopic.java"
_LOG4J2 = _JAVA_DIR / "log4j2.properties"

#: ReadTopic's exit statuses (see its header comment).
_EXIT_TIMEOUT = 3

#: Extra time the subprocess gets on top of the read timeout: JVM start, connecting, closing.
_JVM_GRACE_S = 30.0

#: A short-lived JVM: C1 only and the serial collector start faster; 256 MiB holds a 17,000-record read.
_JVM_FLAGS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto")


class JavaUnavailableError(RuntimeError):
    """The Java reader cannot run here: no ``javac``/``java``, or no Kafka jars. The message says which.

    Tests turn this into a skip, or into a failure when ``AIOPRODUCER_REQUIRE_KAFKA=1``.
    """


class JavaError(NamedTuple):
    """What ReadTopic reported when it failed: the Java exception's class and message, and its stderr."""

    exception: str
    message: str
    stderr: str


class JavaRecord(NamedTuple):
    """One record as the Java consumer delivered it, with what :class:`ReadRecord` leaves out.

    ``timestamp_type`` is Java's name for it: ``"CreateTime"`` or ``"LogAppendTime"``;
    ``leader_epoch`` is the batch's partition leader epoch, ``None`` when it carries none.
    """

    offset: int
    timestamp: int
    timestamp_type: str
    key: bytes | None
    value: bytes | None
    headers: Headers
    leader_epoch: int | None

    def read_record(self) -> ReadRecord:
        return ReadRecord(self.offset, self.timestamp, self.key, self.value, self.headers)


def kafka_libs_dir() -> Path:
    """The directory of Kafka jars: ``aioproducer.testing.kafka.kafka_libs()``, else ``$AIOPRODUCER_KAFKA_LIBS``.

    Imported by name so that this module works (and type-checks) before that
    helper exists; whatever it raises becomes :class:`JavaUnavailableError`.
    """
    try:
        module = importlib.import_module("aioproducer.testing.kafka")
    except ImportError:
        env = os.environ.get("AIOPRODUCER_KAFKA_LIBS")
        if not env:
            raise JavaUnavailableError(
                "no Kafka jars: aioproducer.testing.kafka is not importable and AIOPRODUCER_KAFKA_LIBS is not set"
            ) from None
        libs = Path(env)
    else:
        kafka_libs: Callable[[], Path] = module.kafka_libs
        try:
            libs = Path(kafka_libs())
        except Exception as exc:
            raise JavaUnavailableError(f"no Kafka jars: kafka_libs() failed: {exc!r}") from exc
    if not any(libs.glob("kafka-clients-*.jar")):
        raise JavaUnavailableError(f"no Kafka jars: no kafka-clients-*.jar in {libs}")
    return libs


def _java_tool(name: str) -> str:
    """``$JAVA_HOME/bin/<name>`` if there is one, else ``<name>`` on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = shutil.which(name, path=str(Path(home) / "bin")) if home else None
    found = found or shutil.which(name)
    if found is None:
        raise JavaUnavailableError(f"no `{name}` on PATH (nor in $JAVA_HOME/bin): the Java reader needs a JDK 17+")
    return found


@functools.cache
def compiled_read_topic(libs: Path) -> Path:
    """The classes directory of ReadTopic compiled against ``libs`` (once per process; cached on disk too)."""
    from aioproducer.testing.kafka import KafkaUnavailableError, compile_java

    try:
        return compile_java(_READ_TOPIC, libs)
    except KafkaUnavailableError as exc:
        raise JavaUnavailableError(str(exc)) from exc


def java_reader_command(libs: Path | None = None) -> list[str]:
    """``java ... ReadTopic`` without its arguments, compiling first if needed.

    Raises :class:`JavaUnavailableError` when Java or the jars are missing;
    tests call it up front to decide whether to skip.
    """
    libs = kafka_libs_dir() if libs is None else libs
    classes = compiled_read_topic(libs)
    java = _java_tool("java")
    return [java, *_JVM_FLAGS, f"-Dlog4j2.configurationFile={_LOG4J2}", "-cp", f"{classes}{os.pathsep}{libs}/*", "ReadTopic"]


def _b64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _parse_java_line(line: str) -> JavaRecord:
    d = json.loads(line)
    return JavaRecord(
        d["offset"],
        d["timestamp"],
        d["timestampType"],
        _b64(d["key"]),
        _b64(d["value"]),
        [(k, _b64(v)) for k, v in d["headers"]],
        d["leaderEpoch"],
    )


def _parse_java_output(stdout: str, who: str) -> list[JavaRecord]:
    try:
        return [_parse_java_line(line) for line in stdout.splitlines() if line]
    except (ValueError, KeyError, TypeError) as exc:
        raise ReadbackError(f"{who}: ReadTopic wrote something that is not a record line: {exc!r}", exc) from exc


def _java_error(stderr: str) -> JavaError:
    """The last ``ReadTopic: error: <class>: <message>`` line of stderr, or stderr's tail."""
    for line in reversed(stderr.splitlines()):
        if line.startswith("ReadTopic: error: "):
            exception, _, message = line.removeprefix("ReadTopic: error: ").partition(": ")
            return JavaError(exception, message, stderr)
    return JavaError("", stderr.strip().splitlines()[-1] if stderr.strip() else "", stderr)


def read_java_raw(
    bootstrap_servers: str,
    topic: str,
    partition: int,
    *,
    count: int,
    start_offset: int = 0,
    timeout: float = 10.0,
    check_crcs: bool = True,
    isolation_level: str = "read_uncommitted",
    properties: Mapping[str, str] | None = None,
) -> list[JavaRecord]:
    """Read ``count`` records from ``start_offset`` with the Java ``KafkaConsumer`` (blocking; assign + seek).

    ``properties`` are extra consumer properties (SASL, SSL, ...), applied
    after the reader's own. A timeout raises :class:`ReadbackTimeoutError`
    with the records that did arrive (as :class:`ReadRecord`); a consumer
    error raises :class:`ReadbackError` with a :class:`JavaError`.
    """
    extra = [f"check.crcs={'true' if check_crcs else 'false'}"]
    extra += [f"{k}={v}" for k, v in (properties or {}).items()]
    args = [bootstrap_servers, topic, str(partition), str(start_offset), str(count), str(int(timeout * 1000))]
    args += [isolation_level, *extra]
    who = f"java reading {topic}-{partition}"
    try:
        done = subprocess.run(
            java_reader_command() + args, capture_output=True, text=True, timeout=timeout + _JVM_GRACE_S
        )
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        got = [r.read_record() for r in _parse_java_output(partial.rpartition("\n")[0], who)]
        raise ReadbackTimeoutError(f"{who}: the JVM did not exit within {timeout + _JVM_GRACE_S} s", got) from exc
    records = _parse_java_output(done.stdout, who)
    if done.returncode == _EXIT_TIMEOUT:
        got = [r.read_record() for r in records]
        raise _timeout_error("java", topic, partition, start_offset, count, got, timeout)
    if done.returncode != 0:
        error = _java_error(done.stderr)
        raise ReadbackError(f"{who}: exit {done.returncode}: {error.exception}: {error.message}", error)
    return records


def read_java(
    bootstrap_servers: str,
    topic: str,
    partition: int,
    *,
    count: int,
    start_offset: int = 0,
    timeout: float = 10.0,
    check_crcs: bool = True,
    isolation_level: str = "read_uncommitted",
    properties: Mapping[str, str] | None = None,
) -> list[ReadRecord]:
    """:func:`read_java_raw`, as :class:`ReadRecord` tuples like the other readers return."""
    raw = read_java_raw(
        bootstrap_servers,
        topic,
        partition,
        count=count,
        start_offset=start_offset,
        timeout=timeout,
        check_crcs=check_crcs,
        isolation_level=isolation_level,
        properties=properties,
    )
    return [r.read_record() for r in raw]


# ----------------------------------------------------------------- dispatch

#: Reader name -> reader; the names are what tests parametrize over.
CONSUMERS: dict[str, Callable[..., Any]] = {
    "aiokafka": read_aiokafka,
    "kafka-python": read_kafka_python,
    "confluent-kafka": read_confluent,
}

#: Every reader, the Java one included: what tests against a real broker parametrize over.
REAL_BROKER_CONSUMERS: tuple[str, ...] = (*CONSUMERS, JAVA_CONSUMER)

_READERS: dict[str, Callable[..., Any]] = {**CONSUMERS, JAVA_CONSUMER: read_java}


async def read_with(
    consumer: str,
    bootstrap_servers: str,
    topic: str,
    partition: int,
    *,
    count: int,
    start_offset: int = 0,
    timeout: float = 10.0,
    **options: Any,
) -> list[ReadRecord]:
    """Read with the reader named ``consumer`` (one of :data:`REAL_BROKER_CONSUMERS`), blocking ones in a thread."""
    reader = _READERS[consumer]
    kwargs: dict[str, Any] = dict(count=count, start_offset=start_offset, timeout=timeout, **options)
    if reader is read_aiokafka:
        return await read_aiokafka(bootstrap_servers, topic, partition, **kwargs)
    records: list[ReadRecord] = await asyncio.to_thread(reader, bootstrap_servers, topic, partition, **kwargs)
    return records


# ------------------------------------------------------- raw Fetch, by hand

_FETCH = 1
_FETCH_V = 4
_NOT_LEADER_OR_FOLLOWER = 6


def _fetch_v4_request(correlation_id: int, topic: str, partition: int, offset: int, max_bytes: int) -> bytes:
    """A whole Fetch v4 frame (request header v1): replica -1, read_uncommitted."""
    client_id = b"aioproducer-readback"
    t = topic.encode()
    body = b"".join(
        (
            struct.pack(">hhih", _FETCH, _FETCH_V, correlation_id, len(client_id)),
            client_id,
            # replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level (read_uncommitted)
            struct.pack(">iiiib", -1, 100, 1, max_bytes, 0),
            struct.pack(">ih", 1, len(t)),
            t,
            struct.pack(">iiqi", 1, partition, offset, max_bytes),
        )
    )
    return struct.pack(">i", len(body)) + body


def _parse_fetch_v4_response(payload: bytes, correlation_id: int) -> tuple[int, int, bytes]:
    """(error_code, high_watermark, records) of the single partition of a Fetch v4 response."""
    pos = 0

    def take(fmt: str) -> tuple[Any, ...]:
        nonlocal pos
        values = struct.unpack_from(fmt, payload, pos)
        pos += struct.calcsize(fmt)
        return values

    (corr,) = take(">i")
    if corr != correlation_id:
        raise ReadbackError(f"Fetch response has correlation id {corr}, expected {correlation_id}", corr)
    _throttle, n_topics = take(">ii")
    if n_topics != 1:
        raise ReadbackError(f"Fetch response has {n_topics} topics, expected 1", n_topics)
    (name_len,) = take(">h")
    pos += name_len
    (n_parts,) = take(">i")
    if n_parts != 1:
        raise ReadbackError(f"Fetch response has {n_parts} partitions, expected 1", n_parts)
    _index, error_code, high_watermark, _lso, n_aborted = take(">ihqqi")
    pos += max(n_aborted, 0) * 16
    (size,) = take(">i")
    return error_code, high_watermark, b"" if size < 0 else payload[pos : pos + size]


#: baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8,
#: crc uint32, attributes int16, lastOffsetDelta int32: the batch header up to
#: what it takes to walk from one batch to the next without decoding it.
_BATCH_PREFIX = struct.Struct(">qiibIhi")


def _whole_batches(records: bytes) -> tuple[int, int | None]:
    """(bytes of the complete batches at the start of ``records``, the offset after them or None)."""
    pos = 0
    nxt = None
    while pos + _BATCH_PREFIX.size <= len(records):
        base, length, _epoch, _magic, _crc, _attrs, last_delta = _BATCH_PREFIX.unpack_from(records, pos)
        if pos + 12 + length > len(records):
            break  # a partial batch at the end of a size-limited response
        nxt = base + last_delta + 1
        pos += 12 + length
    return pos, nxt


async def fetch_raw_records(
    bootstrap_servers: str,
    topic: str,
    partition: int,
    *,
    offset: int = 0,
    max_bytes: int = 1 << 20,
    timeout: float = 10.0,
) -> bytes:
    """The record batches from ``offset`` to the high watermark, as the leader stores them.

    Fetch v4 is fixed-layout and predates flexible versions, so it is
    written here with ``struct`` rather than with any client library's codec:
    the bytes returned are the broker's, untouched. The leader is found by
    asking each bootstrap server (the others answer NOT_LEADER_OR_FOLLOWER).
    The librdkafka mock answers a Fetch with one batch, so this fetches again
    after the last complete batch until the high watermark is reached; the
    batches are concatenated, each whole. A batch larger than ``max_bytes``
    is an error rather than an endless loop.
    """
    deadline = time.monotonic() + timeout
    correlation_id = 0

    async def ask(host: str, port: int, at: int) -> tuple[int, int, bytes]:
        nonlocal correlation_id
        correlation_id += 1
        reader, writer = await asyncio.open_connection(host, port)
        try:
            writer.write(_fetch_v4_request(correlation_id, topic, partition, at, max_bytes))
            await writer.drain()
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            return _parse_fetch_v4_response(await reader.readexactly(size), correlation_id)
        finally:
            writer.close()
            await writer.wait_closed()

    async def ask_in_time(server: str, at: int) -> tuple[int, int, bytes]:
        host, port = server.strip().rsplit(":", 1)
        try:
            return await asyncio.wait_for(ask(host, int(port), at), max(deadline - time.monotonic(), 0.001))
        except TimeoutError as exc:
            raise ReadbackTimeoutError(
                f"Fetch of {topic}-{partition} not answered within {timeout} s", []
            ) from exc

    leader = None
    codes: list[int] = []
    for server in bootstrap_servers.split(","):
        code, high_watermark, records = await ask_in_time(server, offset)
        if code == 0:
            leader = server
            break
        if code != _NOT_LEADER_OR_FOLLOWER:
            raise ReadbackError(f"Fetch {topic}-{partition} from {server}: error code {code}", code)
        codes.append(code)
    if leader is None:
        raise ReadbackError(f"no bootstrap server leads {topic}-{partition} (error codes {codes})", codes)
    parts: list[bytes] = []
    while True:
        whole, nxt = _whole_batches(records)
        if nxt is None:
            if offset < high_watermark:
                raise ReadbackError(
                    f"Fetch {topic}-{partition} at {offset}: no whole batch in {max_bytes} bytes", records
                )
            return b"".join(parts)
        parts.append(records[:whole])
        if nxt >= high_watermark:
            return b"".join(parts)
        offset = nxt
        code, high_watermark, records = await ask_in_time(leader, offset)
        if code != 0:
            raise ReadbackError(
                f"Fetch {topic}-{partition} at {offset} from {leader}: error code {code}", code
            )


async def read_all_values(
    bootstrap_servers: str, topic: str, partitions: Iterable[int], *, timeout: float = 10.0
) -> dict[int, list[bytes]]:
    """Every value of ``partitions``, offset 0 to the high watermark, through aiokafka (assign + seek).

    For tests that check "nothing lost, nothing twice, in order" over whole partitions.
    """
    records = await read_all_records(bootstrap_servers, topic, partitions, timeout=timeout)
    return {p: [cast(bytes, r.value) for r in got] for p, got in records.items()}  # tombstones: read_all_records


async def read_all_records(
    bootstrap_servers: str, topic: str, partitions: Iterable[int], *, timeout: float = 10.0
) -> dict[int, list[ReadRecord]]:
    """Every record of ``partitions``, offset 0 to the high watermark, through aiokafka (assign + seek)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        out: dict[int, list[ReadRecord]] = {tp.partition: [] for tp in tps}

        def behind() -> bool:
            return any(ends[tp] > 0 and (not out[tp.partition] or out[tp.partition][-1].offset < ends[tp] - 1) for tp in tps)

        async with asyncio.timeout(timeout):
            while behind():
                for tp, messages in (await consumer.getmany(timeout_ms=500)).items():
                    out[tp.partition] += [
                        ReadRecord(m.offset, m.timestamp, m.key, m.value, _headers(m.headers)) for m in messages
                    ]
        return out
    finally:
        await consumer.stop()


async def read_isolated(
    bootstrap_servers: str, topic: str, partitions: Iterable[int], *, committed: bool, timeout: float = 10.0
) -> list[bytes]:
    """Every value of ``partitions`` up to their end, as a read_committed (or read_uncommitted) aiokafka consumer sees it.

    read_committed stops at the last stable offset: records of open or aborted transactions
    are not returned; read_uncommitted returns everything written. With ``committed``, it first
    waits (within ``timeout``) until no transaction is open on the partitions: a committed
    transaction's markers are written after ``commit_transaction()`` returns, and until then
    its records are below no stable offset.
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        enable_auto_commit=False,
        isolation_level="read_committed" if committed else "read_uncommitted",
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in partitions]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        values: list[bytes] = []
        async with asyncio.timeout(timeout):
            ends = await consumer.end_offsets(tps)
            if committed:
                ends = await _stable_ends(bootstrap_servers, tps, consumer)
            while True:
                positions = [await consumer.position(tp) for tp in tps]
                if all(position >= ends[tp] for position, tp in zip(positions, tps)):
                    break
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    values.extend(r.value for r in records if r.value is not None)
        return values
    finally:
        await consumer.stop()


async def _stable_ends(bootstrap_servers: str, tps: list[Any], committed: Any) -> dict[Any, int]:
    """The read_committed end offsets once they reach the log ends (no transaction open), polled."""
    from aiokafka import AIOKafkaConsumer

    uncommitted = AIOKafkaConsumer(bootstrap_servers=bootstrap_servers)
    await uncommitted.start()
    try:
        while True:
            stable = await committed.end_offsets(tps)
            log_end = await uncommitted.end_offsets(tps)
            if all(stable[tp] >= log_end[tp] for tp in tps):
                return dict(stable)
            await asyncio.sleep(0.1)  # between polls; the caller's timeout bounds the wait
    finally:
        await uncommitted.stop()


async def read_topic_aiokafka(
    bootstrap_servers: str,
    topic: str,
    partitions: Iterable[int],
    *,
    isolation_level: str = "read_uncommitted",
    timeout: float = 10.0,
    check_crcs: bool = True,
) -> list[tuple[str, int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]]:
    """Every record of ``partitions`` of ``topic`` up to their end offsets, as an aiokafka consumer reads them.

    ``AIOKafkaConsumer(auto_offset_reset="earliest")`` with the partitions assigned (no group),
    at ``isolation_level``; the ends are taken first (the last stable offsets under
    read_committed). Each record is ``(topic, partition, offset, key, value, headers, timestamp)``
    with headers a tuple of ``(str, bytes | None)`` pairs, sorted by (partition, offset): the
    fields of ``aioproducer.testing.ConsumerRecord``, in its order, for comparing with it.
    ``check_crcs=False`` for librdkafka's mock's transaction markers, written with a zero CRC.
    """
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, group_id=None, enable_auto_commit=False,
        auto_offset_reset="earliest", isolation_level=isolation_level, check_crcs=check_crcs,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        out = []
        async with asyncio.timeout(timeout):
            ends = await consumer.end_offsets(tps)
            while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
                for tp, messages in (await consumer.getmany(timeout_ms=200)).items():
                    out += [(topic, tp.partition, m.offset, m.key, m.value, tuple(_headers(m.headers)), m.timestamp)
                            for m in messages if m.offset < ends[tp]]
        return sorted(out, key=lambda r: (r[1], r[2]))
    finally:
        await consumer.stop()
