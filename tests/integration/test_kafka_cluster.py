"""KafkaCluster itself, checked with an independent client (confluent-kafka/librdkafka).

Its listeners must be what their names say: TLS with the CA it hands out, mutual
TLS with its client certificate, SASL PLAIN and SCRAM-SHA-256/512 for the users
it was given, and wrong credentials refused. Its failures must say what failed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer

from aioproducer.testing import KafkaCluster, KafkaStartError, KafkaUnavailableError
from aioproducer.testing.kafka import _thread_states, _wait_all_threads_stopped, kafka_libs

from conftest import kafka_or_skip

pytestmark = pytest.mark.integration

USER, PASSWORD = "alice", "alice-secret"


@pytest.fixture(scope="module")
def secured() -> Iterator[KafkaCluster]:
    cluster = kafka_or_skip(
        brokers=1,
        topics={"t": 1},
        listeners=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        scram_users={USER: PASSWORD},
        ssl_client_auth="required",
    )
    with cluster:
        yield cluster


def deliver(config: dict[str, Any], timeout: float = 20.0) -> None:
    """Produce one record with librdkafka; raise KafkaException (or AssertionError) if it is not acknowledged."""
    reports: list[Any] = []
    producer = Producer({**config, "message.timeout.ms": int(timeout * 1000), "log_level": 0})
    producer.produce("t", b"v", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(timeout + 5)
    assert len(reports) == 1, "no delivery report"
    if reports[0] is not None:
        raise KafkaException(reports[0])


def test_plaintext_listener(secured: KafkaCluster) -> None:
    deliver({"bootstrap.servers": secured.bootstrap_servers})
    assert secured.bootstrap_servers == secured.bootstrap_servers_for("PLAINTEXT")


def test_mutual_tls_with_the_client_certificate(secured: KafkaCluster) -> None:
    deliver({
        "bootstrap.servers": secured.bootstrap_servers_for("SSL"),
        "security.protocol": "SSL",
        "ssl.ca.location": secured.ca_file,
        "ssl.certificate.location": secured.client_cert_file,
        "ssl.key.location": secured.client_key_file,
        "ssl.endpoint.identification.algorithm": "https",  # the broker's certificate names 127.0.0.1
    })


def test_tls_without_a_client_certificate_is_refused_when_required(secured: KafkaCluster) -> None:
    with pytest.raises(KafkaException):
        deliver({
            "bootstrap.servers": secured.bootstrap_servers_for("SSL"),
            "security.protocol": "SSL",
            "ssl.ca.location": secured.ca_file,
        }, timeout=5)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_sasl_users_work_with_every_mechanism(secured: KafkaCluster, listener: str, mechanism: str) -> None:
    config = {
        "bootstrap.servers": secured.bootstrap_servers_for(listener),
        "security.protocol": listener,
        "sasl.mechanism": mechanism,
        "sasl.username": USER,
        "sasl.password": PASSWORD,
    }
    if listener == "SASL_SSL":
        config["ssl.ca.location"] = secured.ca_file
    deliver(config)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_is_refused(secured: KafkaCluster, mechanism: str) -> None:
    with pytest.raises(KafkaException):
        deliver({
            "bootstrap.servers": secured.bootstrap_servers_for("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": USER,
            "sasl.password": "wrong",
        }, timeout=5)


def test_a_listener_not_configured_is_a_clear_error(kafka_cluster: KafkaCluster) -> None:
    with pytest.raises(ValueError, match="not 'SSL'"):
        kafka_cluster.bootstrap_servers_for("SSL")
    with pytest.raises(ValueError, match="no SSL listener"):
        _ = kafka_cluster.ca_file


def test_pause_returns_once_every_thread_of_the_broker_is_stopped(kafka_cluster: KafkaCluster) -> None:
    """``kill(SIGSTOP)`` returns before the last of the JVM's threads stops; ``pause_broker`` must not."""
    node = kafka_cluster._node(1)
    assert node.process is not None
    tasks = Path(f"/proc/{node.process.pid}/task")
    for _ in range(5):
        kafka_cluster.pause_broker(1)
        try:
            states = _thread_states(tasks)
            assert len(states) > 10 and set(states) <= {"T", "t"}, states
        finally:
            kafka_cluster.resume_broker(1)


def test_a_process_that_does_not_stop_is_reported() -> None:
    """SIGSTOP never sent: the wait gives up after its timeout with the pid, not a hang."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        with pytest.raises(RuntimeError, match=rf"process {child.pid} .* not all its threads stopped"):
            _wait_all_threads_stopped(child.pid, timeout=0.05)
        os.kill(child.pid, signal.SIGSTOP)
        _wait_all_threads_stopped(child.pid, timeout=10)
        os.kill(child.pid, signal.SIGCONT)
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"brokers": 0}, "brokers must be"),
        ({"listeners": "PLAINTEXT"}, "listeners must be"),
        ({"listeners": ("PLAINTEXT", "TLS")}, "listeners must be distinct names"),
        ({"scram_users": {"bob": "a,b"}}, "scram_users"),
        ({"ssl_client_auth": "maybe"}, "ssl_client_auth"),
        ({"transaction_version": 3}, "transaction_version must be 1, 2 or None, got 3"),
        ({"transaction_version": True}, "transaction_version must be 1, 2 or None, got True"),
        ({"transaction_version": "2"}, "transaction_version must be 1, 2 or None, got '2'"),
        ({"broker_config": {"listeners": "PLAINTEXT://:9092", "log.dirs": "/tmp/x", "num.io.threads": 2}},
         "broker_config may not set 'listeners', 'log.dirs': KafkaCluster sets each node's role"),
    ],
)
def test_bad_arguments_are_refused_before_anything_starts(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KafkaCluster(**kwargs)


def test_a_broker_that_cannot_start_raises_with_its_log(kafka_cluster: KafkaCluster) -> None:
    """A bad broker property: the error names the step and ends with what Kafka said about it."""
    with pytest.raises(KafkaStartError, match="num.io.threads") as info:
        KafkaCluster(brokers=1, broker_config={"num.io.threads": "zero"})
    assert "failed" in str(info.value) or "exited" in str(info.value)


def test_a_broker_jvm_that_dies_while_starting_raises_with_the_end_of_its_log(kafka_cluster: KafkaCluster) -> None:
    with pytest.raises(KafkaStartError, match=r"(?s)broker 1 exited with \d+ while starting.*heap") as info:
        KafkaCluster(brokers=1, jvm_options=("-Xmx1k",))
    assert "its log ends with" in str(info.value)


def test_missing_java_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kafka_cluster: KafkaCluster) -> None:
    monkeypatch.setenv("AIOPRODUCER_KAFKA_LIBS", str(kafka_cluster.libs))
    monkeypatch.setenv("PATH", str(tmp_path))  # neither java nor mvn
    with pytest.raises(KafkaUnavailableError, match="`java` is not on PATH"):
        KafkaCluster(brokers=1)


def test_missing_maven_is_named_when_the_jars_are_not_cached(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    java = subprocess.run(["sh", "-c", "command -v java"], capture_output=True, text=True).stdout.strip()
    if not java:
        pytest.skip("no java here: the missing-Maven case cannot be reached")
    (bin_dir / "java").symlink_to(java)
    monkeypatch.delenv("AIOPRODUCER_KAFKA_LIBS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # an empty jar cache
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(KafkaUnavailableError, match="`mvn` is not on PATH; it is needed once, to fetch"):
        kafka_libs()


def test_close_leaves_no_jvm_and_no_files() -> None:
    cluster = kafka_or_skip(brokers=1)
    work = cluster._work
    processes = [n.process for n in cluster._nodes]
    assert work.exists() and all(p is not None and p.poll() is None for p in processes)
    cluster.close()
    cluster.close()  # idempotent
    assert not work.exists()
    assert all(p is not None and p.poll() is not None for p in processes)
    with pytest.raises(RuntimeError, match="closed"):
        cluster.start_broker(1)


def test_cli_prints_bootstrap_servers_and_stops_when_stdin_closes(kafka_cluster: KafkaCluster) -> None:
    env = {**os.environ, "AIOPRODUCER_KAFKA_LIBS": str(kafka_cluster.libs)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "aioproducer.testing.kafka", "--topic", "t:2", "--until-stdin-eof"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        first = proc.stdout.readline().strip()
        assert first.startswith("bootstrap.servers=127.0.0.1:"), (first, proc.stderr.read() if proc.stderr else "")
        deliver({"bootstrap.servers": first.split("=", 1)[1]})
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cluster_ids_never_start_with_a_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    """The storage tool reads a leading '-' as an option; one cluster start in 64 failed that way."""
    import uuid as uuid_module

    from aioproducer.testing import kafka as kafka_module

    dashed = uuid_module.UUID(bytes=b"\xfb" + bytes(15))  # base64url: starts with '-'
    plain = uuid_module.UUID(bytes=bytes(16))
    draws = iter([dashed, dashed, plain])
    monkeypatch.setattr(uuid_module, "uuid4", lambda: next(draws))  # the module kafka_module draws from
    cluster_id = kafka_module._cluster_id()
    assert not cluster_id.startswith("-") and len(cluster_id) == 22


def test_a_port_is_handed_out_once_even_when_the_kernel_offers_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ports are bound seconds after they are picked: a port offered twice would stop the second node."""
    import socket as socket_module

    from aioproducer.testing._processes import free_port

    first = free_port()
    offers = iter([first, first, first + 1])  # the kernel offers the same port again, then another

    class Offering:
        def __enter__(self) -> "Offering":
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def bind(self, address: tuple[str, int]) -> None:
            self.port = next(offers)

        def getsockname(self) -> tuple[str, int]:
            return "127.0.0.1", self.port

    monkeypatch.setattr(socket_module, "socket", Offering)  # the module free_port binds through
    assert free_port() == first + 1
