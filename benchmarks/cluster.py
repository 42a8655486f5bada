"""The brokers the benchmarks run against, each in a process of its own.

Two kinds, one interface:

- ``kind="mock"``: librdkafka's mock cluster, ``python -m aioproducer.testing``;
  starts in milliseconds, so the suite starts one per scenario and repeat with
  that scenario's topics created up front.
- ``kind="kafka"``: real Apache Kafka (KRaft) nodes,
  ``python -m aioproducer.testing.kafka``; a start costs 11-18 s, so the suite
  starts one per layout and creates (and afterwards deletes) each scenario's
  topics through the admin API (:func:`create_topics`, :func:`delete_topics`).

Both CLIs print ``bootstrap.servers=...`` first and stop when their stdin is
closed, so a cluster cannot outlive the suite even if the suite is killed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping

__all__ = ["ClusterProcess", "create_topics", "delete_topics"]

_MODULES = {"mock": "aioproducer.testing", "kafka": "aioproducer.testing.kafka"}
# A real node flushes and closes its logs on SIGTERM; the mock stops at once.
_STOP_TIMEOUT_S = {"mock": 20.0, "kafka": 60.0}


class ClusterProcess:
    """``with ClusterProcess(topics) as cluster: cluster.bootstrap_servers``.

    ``broker_config`` (real Kafka only) sets broker properties on every node.
    """

    def __init__(
        self,
        topics: Iterable[str],
        partitions: int = 6,
        brokers: int = 3,
        *,
        kind: str = "mock",
        replication_factor: int | None = None,
        broker_config: Mapping[str, object] | None = None,
    ) -> None:
        if kind not in _MODULES:
            raise ValueError(f"kind must be one of {sorted(_MODULES)}, got {kind!r}")
        self.kind = kind
        args = [sys.executable, "-m", _MODULES[kind], "--brokers", str(brokers), "--until-stdin-eof"]
        if kind == "mock":
            # The same layout for every client and run: librdkafka's mock picks each topic's leaders
            # at random, and at 10 KB a request carries one batch per partition its broker leads, so
            # a 1-5 layout against a 2-2-2 one moved a client's rate by 30 % or more (2026-12-03).
            args.append("--spread-leaders")
        else:
            args.append("--throughput")  # a broker with both JIT compilers, as before the test kit's quick start
        for topic in topics:
            args += ["--topic", f"{topic}:{partitions}"]
        if replication_factor is not None:
            args += ["--replication-factor", str(replication_factor)]
        for key, value in (broker_config or {}).items():
            if kind != "kafka":
                raise ValueError("broker_config needs kind='kafka'")
            args += ["--broker-config", f"{key}={value}"]
        self._proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ.copy()
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.startswith("bootstrap.servers="):
            self.close()
            raise RuntimeError(f"{kind} cluster did not start (first line {line!r}, exit {self._proc.poll()})")
        self.bootstrap_servers = line.partition("=")[2]

    @property
    def pid(self) -> int:
        return self._proc.pid

    def close(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=_STOP_TIMEOUT_S[self.kind])
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def __enter__(self) -> ClusterProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_topics(bootstrap: str, names: Iterable[str], partitions: int, replication_factor: int,
                  timeout: float = 60.0) -> None:
    """Create ``names`` in one request, then wait until Metadata gives every partition a leader.

    Waiting for leaders keeps topic creation out of the clients' warm-up, which
    must find a leader at once like it does on the mock.
    """
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    wanted = list(names)
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    futures = admin.create_topics([NewTopic(n, partitions, replication_factor) for n in wanted])
    for future in futures.values():
        future.result(timeout=timeout)
    deadline = time.monotonic() + timeout
    pending = set(wanted)
    while pending:
        topics = admin.list_topics(timeout=10).topics
        for name in list(pending):
            described = topics.get(name)
            if (described is not None and described.error is None and len(described.partitions) == partitions
                    and all(p.leader >= 0 for p in described.partitions.values())):
                pending.discard(name)
        if pending and time.monotonic() > deadline:
            raise RuntimeError(f"topics without a leader for every partition after {timeout:.0f} s: {sorted(pending)}")
        if pending:
            time.sleep(0.1)


def delete_topics(bootstrap: str, names: Iterable[str], timeout: float = 60.0) -> None:
    """Delete ``names`` (a finished scenario's), so idle partitions do not add replication work to the next."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
    for future in admin.delete_topics(list(names), operation_timeout=timeout).values():
        future.result(timeout=timeout)
