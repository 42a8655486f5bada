"""SASL/GSSAPI (Kerberos) against a real Kafka broker and a real MIT KDC.

One broker for the module, made by ``KafkaCluster(sasl_mechanism="GSSAPI")``: an MIT ``krb5kdc``
for the realm, the broker's service principal ``kafka/127.0.0.1`` with its keytab, a
SASL_PLAINTEXT listener with GSSAPI and a PLAINTEXT one. The brokers end every SASL session
after ``connections.max.reauth.ms`` (5 s), so every connection here re-authenticates (KIP-368)
while it works. What is produced over GSSAPI is read back over the PLAINTEXT listener by
confluent-kafka's consumer (librdkafka's wheel has no GSSAPI). Every bad input is a test of
its own: an :class:`AuthenticationError` from ``start()``, naming the principal and the cause,
well within ``max.block.ms``, and never a byte of the keytab.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import logging
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import kafka_or_skip
from readback import read_confluent

from aioproducer import Producer
from aioproducer.errors import AuthenticationError
from aioproducer.network.client import KafkaClient
from aioproducer.security.kerberos import KerberosLogin, KerberosSettings
from aioproducer.testing import KafkaCluster
from aioproducer.testing.producer_factory import ProducerFactory

pytestmark = pytest.mark.integration

#: The brokers' session lifetime: a client re-authenticates at 85-95 % of it.
REAUTH_MS = 5000
#: The renewal test: the short-lived principal's ticket lifetime, and how long records flow (past its end).
TICKET_LIFETIME_S, RUN_S = 10, 15
#: ``max.block.ms`` of the failing starts: every failure must come well before it.
MAX_BLOCK_MS = 10_000
_names = itertools.count()


@pytest.fixture(scope="module")
def kerberized() -> Iterator[KafkaCluster]:
    try:
        import gssapi  # noqa: F401 - only whether the kerberos extra is installed
    except ImportError:
        if os.environ.get("AIOPRODUCER_REQUIRE_KAFKA") == "1":
            pytest.fail("AIOPRODUCER_REQUIRE_KAFKA=1 but python-gssapi is missing: pip install 'aioproducer[kerberos]'")
        pytest.skip("python-gssapi is not installed (the kerberos extra)")
    cluster = kafka_or_skip(
        brokers=1, topics={}, sasl_mechanism="GSSAPI",
        broker_config={"connections.max.reauth.ms": str(REAUTH_MS)},
    )
    previous = os.environ.get("KRB5_CONFIG")
    os.environ["KRB5_CONFIG"] = cluster.krb5_conf  # the client library reads the realm from it
    with cluster:
        yield cluster
    if previous is None:
        os.environ.pop("KRB5_CONFIG", None)
    else:
        os.environ["KRB5_CONFIG"] = previous


def fresh(cluster: KafkaCluster, prefix: str, partitions: int = 1) -> str:
    name = f"{prefix}-{next(_names)}"
    cluster.create_topic(name, partitions=partitions)
    return name


def principal(cluster: KafkaCluster, prefix: str, **kwargs: Any) -> tuple[str, Path]:
    """A new client principal of the realm and its keytab."""
    assert cluster.kdc is not None
    name = f"{prefix}{next(_names)}"
    return cluster.kdc.principal(name), cluster.kdc.add_principal(name, **kwargs)


def read_back(cluster: KafkaCluster, topic: str, count: int, partition: int = 0) -> list[bytes | None]:
    """``count`` values of ``partition`` read over the PLAINTEXT listener by confluent-kafka (read_committed)."""
    records = read_confluent(cluster.bootstrap_servers_for("PLAINTEXT"), topic, partition, count=count, timeout=30)
    return [r.value for r in records]


def authentications(cluster: KafkaCluster, who: str) -> int:
    """How many times the broker logged a successful GSSAPI authentication of ``who``."""
    return cluster.broker_log(1).count(f"Successfully authenticated client: authenticationID={who};")


async def test_idempotent_records_over_gssapi_come_back_once_in_order(kerberized: KafkaCluster) -> None:
    topic = fresh(kerberized, "krb-idem")
    config = kerberized.gssapi_config()
    before = authentications(kerberized, "producer@AIOPRODUCER.TEST")
    async with Producer(config, enable_idempotence=True, linger_ms=5) as producer:
        futures = [await producer.send(topic, b"%d" % i, key=b"k") for i in range(200)]
        await asyncio.gather(*futures)
    assert read_back(kerberized, topic, 200) == [b"%d" % i for i in range(200)]
    # The broker saw the producer's Kerberos principal: GSSAPI, not some other mechanism, let it in.
    assert authentications(kerberized, "producer@AIOPRODUCER.TEST") > before


async def test_a_transaction_over_gssapi_commits_and_an_aborted_one_stays_hidden(kerberized: KafkaCluster) -> None:
    topic = fresh(kerberized, "krb-txn")
    config = {**kerberized.gssapi_config(), "transactional.id": f"krb-txn-{next(_names)}"}
    async with Producer(config, linger_ms=5) as producer:
        producer.begin_transaction()
        for i in range(10):
            await producer.send(topic, b"aborted-%d" % i, key=b"k")
        await producer.abort_transaction()
        async with producer.transaction():
            for i in range(30):
                await producer.send(topic, b"committed-%d" % i, key=b"k")
    # confluent-kafka reads read_committed by default: the aborted records, first in the log, are skipped.
    assert read_back(kerberized, topic, 30) == [b"committed-%d" % i for i in range(30)]


async def test_the_plugins_producer_factory_signs_in_over_gssapi(
    kerberized: KafkaCluster, kafka_producer: ProducerFactory
) -> None:
    topic = fresh(kerberized, "krb-plugin")
    async with kafka_producer(kerberized, linger_ms=0) as producer:
        await producer.send_and_wait(topic, b"through the fixture", key=b"k")
    assert read_back(kerberized, topic, 1) == [b"through the fixture"]


async def test_a_ticket_that_expires_during_the_run_is_renewed_and_sessions_reauthenticate(
    kerberized: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """A 10 s ticket, 15 s of records over connections that re-authenticate every ~4.5 s: nothing lost or twice.

    Why 10 s and not minutes: renewal is scheduled in fractions of the ticket's lifetime
    (``sasl.kerberos.ticket.renew.window.factor``, jitter) and the KDC and the library enforce the
    end time the same way at any lifetime, so a short ticket runs the same code through the same
    states: login, re-authentications on the first ticket, the renewal point, a re-authentication
    that needs a ticket past the first one's end (the library refuses an expired one outright,
    "Ticket expired", with no grace), and re-authentications on the second. The one absolute
    setting, ``sasl.kerberos.min.time.before.relogin`` (60 s by default, longer than this ticket),
    is set to 1 s here. Without renewal the first re-authentication after 10 s fails, the broker
    drops the connection and no new one can authenticate: the records would time out.
    """
    who, keytab = principal(kerberized, "short", max_life_s=TICKET_LIFETIME_S)
    topic = fresh(kerberized, "krb-renew")
    config: dict[str, Any] = {
        **kerberized.gssapi_config(principal=who, keytab=str(keytab)),
        "sasl.kerberos.min.time.before.relogin": 1000,
        "delivery.timeout.ms": 10_000, "request.timeout.ms": 5_000,
    }
    caplog.set_level(logging.INFO, logger="aioproducer.security.kerberos")
    sent = 0
    async with Producer(config, linger_ms=5) as producer:
        started = time.monotonic()
        client = producer._engine.client
        assert isinstance(client, KafkaClient)
        await producer.partitions_for(topic)
        first = dict(client._conns)
        while time.monotonic() - started < RUN_S:
            futures = [await producer.send(topic, b"%d" % (sent + i), key=b"k") for i in range(20)]
            sent += 20
            await asyncio.gather(*futures)
            await asyncio.sleep(0.05)  # pacing only: records keep flowing across the renewal
        # Re-authenticated in place (KIP-368), not reconnected.
        assert client._conns == first and all(conn.is_connected for conn in first.values())
    logins = [r.getMessage() for r in caplog.records if "Kerberos" in r.getMessage() and who in r.getMessage()]
    assert any("re-login" in line for line in logins), logins
    # The broker's own log: a first authentication and re-authentications on both sides of the first ticket's end.
    assert authentications(kerberized, who) >= RUN_S * 1000 // REAUTH_MS
    assert read_back(kerberized, topic, sent) == [b"%d" % i for i in range(sent)]


async def test_a_renewal_the_kdc_cannot_serve_keeps_a_valid_ticket_and_fails_once_it_is_gone(
    kerberized: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    """Java's renewal thread keeps the old ticket when a re-login fails; so does the login here, until the end time.

    The clock of the login is the test's (the ticket's 24 h pass in no time); the KDC and the
    library are real: with the KDC stopped, a renewal fails and the cached ticket still serves
    (the service ticket is in the login's cache), past its end it is an AuthenticationError, and
    with the KDC back the next authentication logs in again.
    """
    kdc = kerberized.kdc
    assert kdc is not None
    who, keytab = principal(kerberized, "renew")
    now = [0.0]
    login = KerberosLogin(
        KerberosSettings(who, str(keytab), "kafka", min_time_before_relogin_ms=1000, timeout_ms=5000),
        log=logging.getLogger("aioproducer.security.kerberos"), clock=lambda: now[0],
    )
    await login.client("127.0.0.1")
    assert login.logins == 1
    now[0] = 0.9 * 86400  # past the renewal point (0.8-0.85 of the 24 h ticket), before its end
    caplog.set_level(logging.WARNING, logger="aioproducer.security.kerberos")
    kdc.stop()
    try:
        assert (await login.client("127.0.0.1")).initial_response()  # the old ticket still serves
        assert login.logins == 1
        assert any("re-login failed, the current ticket serves" in r.getMessage() for r in caplog.records)
        now[0] = 86400 + 1  # past its end
        with pytest.raises(AuthenticationError, match=f"principal {who}: login from keytab .* Cannot contact any KDC"):
            await login.client("127.0.0.1")
    finally:
        kdc.start()
    await login.client("127.0.0.1")
    assert login.logins == 2


# ------------------------------------------------------------------ failures


async def fails_at_start(config: dict[str, Any], keytab: Path | None = None) -> str:
    """Start a producer with ``config``: AuthenticationError, well within max.block.ms; its message."""
    started = time.monotonic()
    producer = Producer(config, max_block_ms=MAX_BLOCK_MS)
    with pytest.raises(AuthenticationError) as raised:
        await producer.start()
    await producer.close()
    assert time.monotonic() - started < MAX_BLOCK_MS / 1000 / 2
    message = str(raised.value)
    if keytab is not None:
        assert_no_key_material(message, keytab)
    return message


def assert_no_key_material(message: str, keytab: Path) -> None:
    """No key of the keytab, raw, in hex or in base64, is in ``message``."""
    keys = keytab_keys(keytab.read_bytes())
    assert keys
    for key in keys:
        for shown in (key.hex(), key.hex().upper(), base64.b64encode(key).decode(), key.decode("latin-1")):
            assert shown[:16] not in message


def keytab_keys(data: bytes) -> list[bytes]:
    """The key contents of an MIT keytab (format 0x0502: entries of principal, timestamp, kvno, key)."""
    assert data[:2] == b"\x05\x02"
    keys, at = [], 2
    while at + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, at)
        entry, at = data[at + 4:at + 4 + abs(size)], at + 4 + abs(size)
        if size <= 0:
            continue  # a hole left by a removed entry
        (components,) = struct.unpack_from(">H", entry, 0)
        pos = 2
        for _ in range(components + 1):  # the realm, then each component
            (length,) = struct.unpack_from(">H", entry, pos)
            pos += 2 + length
        pos += 4 + 4 + 1 + 2  # name type, timestamp, kvno, key type
        (length,) = struct.unpack_from(">H", entry, pos)
        keys.append(entry[pos + 2:pos + 2 + length])
    return keys


async def test_an_outdated_keytab_fails_start_naming_the_principal(kerberized: KafkaCluster) -> None:
    who, keytab = principal(kerberized, "rotated")
    assert kerberized.kdc is not None
    kerberized.kdc.randomize_key(who)  # the keytab now holds the principal's old key
    message = await fails_at_start(kerberized.gssapi_config(principal=who, keytab=str(keytab)), keytab)
    assert who in message
    assert "Preauthentication failed" in message and "wrong or outdated keytab" in message


async def test_a_principal_the_kdc_does_not_know_fails_start(kerberized: KafkaCluster) -> None:
    who, keytab = principal(kerberized, "gone")
    assert kerberized.kdc is not None
    kerberized.kdc.delete_principal(who)
    message = await fails_at_start(kerberized.gssapi_config(principal=who, keytab=str(keytab)), keytab)
    assert who in message
    assert "not found in Kerberos database" in message and "does not know this principal" in message


async def test_a_principal_the_keytab_has_no_key_for_fails_start(kerberized: KafkaCluster) -> None:
    _, keytab = principal(kerberized, "owner")
    other = f"stranger@{kerberized.kdc.realm if kerberized.kdc else ''}"
    message = await fails_at_start(kerberized.gssapi_config(principal=other, keytab=str(keytab)), keytab)
    assert other in message and "holds no key for this principal" in message


async def test_a_kdc_that_is_down_fails_start(kerberized: KafkaCluster) -> None:
    kdc = kerberized.kdc
    assert kdc is not None
    kdc.stop()
    try:
        message = await fails_at_start(kerberized.gssapi_config())
    finally:
        kdc.start()
    assert "producer@AIOPRODUCER.TEST" in message
    assert "Cannot contact any KDC" in message and "is it up" in message


async def test_a_kdc_that_never_answers_fails_start_within_the_request_timeout(kerberized: KafkaCluster) -> None:
    """A KDC port that accepts and stays silent (TCP and UDP): the login is given up after request.timeout.ms."""
    kdc = kerberized.kdc
    assert kdc is not None
    kdc.stop()
    silent_tcp = socket.create_server(("127.0.0.1", kdc.port))
    silent_udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    silent_udp.bind(("127.0.0.1", kdc.port))
    held: list[socket.socket] = []

    done = threading.Event()
    silent_tcp.settimeout(0.1)

    def hold() -> None:
        while not done.is_set():
            with contextlib.suppress(OSError):  # TimeoutError: look at the event again
                held.append(silent_tcp.accept()[0])

    accepting = threading.Thread(target=hold, daemon=True)
    accepting.start()
    try:
        started = time.monotonic()
        config = {**kerberized.gssapi_config(), "request.timeout.ms": 1500, "delivery.timeout.ms": 2000}
        message = await fails_at_start(config)
        assert time.monotonic() - started < 1.5 + 1.0
    finally:
        done.set()
        accepting.join(5)
        for sock in (silent_tcp, silent_udp, *held):
            sock.close()
        kdc.start()
    assert held, "the library never reached the silent KDC"
    assert "producer@AIOPRODUCER.TEST" in message and "the KDC did not answer within 1500 ms" in message


async def test_a_wrong_service_name_fails_start(kerberized: KafkaCluster) -> None:
    config = {**kerberized.gssapi_config(), "sasl.kerberos.service.name": "kafka-typo"}
    message = await fails_at_start(config)
    assert "producer@AIOPRODUCER.TEST" in message and "kafka-typo/127.0.0.1" in message
    assert "not found in Kerberos database" in message and "sasl.kerberos.service.name" in message


_SKEWED_START = """
import asyncio, json, sys
from aioproducer import Producer
from aioproducer.errors import AuthenticationError

async def main() -> None:
    producer = Producer(json.loads(sys.argv[1]), max_block_ms=10000)
    try:
        await producer.start()
    except AuthenticationError as exc:
        print("AuthenticationError:", exc)
    finally:
        await producer.close()

asyncio.run(main())
"""


def test_a_clock_ten_minutes_ahead_of_the_kdc_fails_start(kerberized: KafkaCluster) -> None:
    """The client's clock 10 min ahead (libfaketime on a producer process of its own), the realm allowing 5 s.

    The skew is the process's, not the machine's: the KDC and the broker keep the true time.
    """
    import json

    faketime = shutil.which("faketime")
    if not faketime:
        if os.environ.get("AIOPRODUCER_REQUIRE_KAFKA") == "1":
            pytest.fail("faketime (Debian: apt-get install faketime) is needed for the clock skew test")
        pytest.skip("faketime is not installed")
    env = {**os.environ, "FAKETIME_DONT_FAKE_MONOTONIC": "1", "KRB5_CONFIG": kerberized.krb5_conf}
    done = subprocess.run([faketime, "-f", "+600s", sys.executable, "-c", _SKEWED_START,
                           json.dumps(kerberized.gssapi_config())],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.stdout.startswith("AuthenticationError:"), (done.stdout, done.stderr[-2000:])
    assert "producer@AIOPRODUCER.TEST" in done.stdout
    assert "Clock skew too great" in done.stdout and "synchronise the clocks" in done.stdout
